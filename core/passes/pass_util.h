// Helpers shared by several passes: program-order positions, memory effects of a subtree,
// and cloning a set of nodes with substitutions. Not a pass itself.
#pragma once
#include <functional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/ir/builder.h"
#include "core/ir/node.h"

namespace ember {

// Pre-order positions of nodes (the root is 0), indexed by node id: dense, so passes that look
// positions up per access stay linear and cache-friendly on programs of 10^5 nodes.
class Positions {
 public:
  // The position of n (an internal error when n has none).
  int at(const Node* n) const;
  // Gives n position v (nodes a pass creates take the position of what they replace).
  void set(const Node* n, int v);

 private:
  std::vector<int> v_;  // by id; -1: none
};
// `also`, when given, is called on every node of the same walk (a pass that needs positions and
// a scan of the program reads each node once).
Positions program_positions(const Program& p, const std::function<void(Node*)>& also = nullptr);

// The memory x writes (operand 0 of a store, atomic or move_memory), or null.
const Node* written_memory(const Node* x);

// Memories read / written by `n` and everything inside it.
void memory_effects(const Node* n, std::unordered_set<const Node*>* reads, std::unordered_set<const Node*>* writes);

// Whether `n` (host level) runs per element of a non-empty shape: a kernel, or a shaped scope.
bool is_device_scope(const Node* n);

// Every kernel of p, in program order, found without entering any kernel: a walk of the host
// level (kernels never nest), so a pass that works kernel by kernel does not read every node
// of the program first.
std::vector<Node*> kernels_of(const Program& p);

// Whether f32 value v reaches an equality test, a min or a max through f32 elementwise math: the
// mask x == max(...) of a max reduction's gradient, where x (or -x, as a min's gradient compares
// it) is recomputed in another kernel. A pass that changes how v rounds (share_reciprocals'
// product by a reciprocal) must leave such a value alone: a copy of it computed elsewhere the old
// way would then compare unequal (fuzz seed 1360198: min of -(a / d), its gradient NaN). Follows
// users up to 64 nodes; past that it answers yes.
bool reaches_exact_comparison(const Node* v);
// The same for any use where the last bit can decide something discrete: a comparison, a min or a
// max, a conversion to an integer or bool, floor/ceil/round/trunc/frac/mod/sign, isnan/isinf, a
// bitcast; followed also through the vars v is set to and their reads (a loop's next iteration).
// contract_fma leaves such values unfused, so a kernel's branches, counts and masks come out as an
// unfused evaluation (NumPy's float32, the GPU backends') of the same operations gives them.
bool reaches_discrete_use(const Node* v);
// Whether node u is such a use of its operands.
bool discrete_use(const Node* u);
// The values that reach one of `uses` along the edges reaches_discrete_use follows, at any
// distance: for all values at once (backwards from the uses), where asking each would cost a walk.
std::unordered_set<const Node*> values_reaching(const std::vector<const Node*>& uses);

// Calls f on n and every node inside it (pre-order).
void walk_subtree(Node* n, const std::function<void(Node*)>& f);

// A new kernel of `shape` at b's insertion point with every attribute of `like` (copy_attrs:
// name, user_kernel, group, loc, ...) except its own fresh kernel id (`index`).
Node* kernel_like(Builder& b, const Node* like, const std::vector<Node*>& shape);

// Index i clamped into [0, d): min(max(i, 0), d - 1) inserted before `at`, its host math d - 1
// before `host_pos` (the kernel around `at`, or `at` itself on the host).
Node* clamp_index(Builder& b, Node* i, Node* d, Node* at, Node* host_pos);

// Copies the nodes of `keep` that lie inside `src_scope` (in program order, keeping their
// nesting) to the builder's insertion point. `map` holds substitutions for values defined
// elsewhere (e.g. index nodes) and receives old -> new for every copy. Copies get `shape`
// when they had a non-empty shape.
void clone_nodes(Builder& b, Node* src_scope, const std::unordered_set<Node*>& keep,
                 std::unordered_map<Node*, Node*>& map, const std::vector<Node*>& shape);
// The same, for a set given as its nodes (any order, no repeats) and a membership test.
void clone_nodes(Builder& b, Node* src_scope, std::span<Node* const> keep, const std::function<bool(const Node*)>& kept,
                 std::unordered_map<Node*, Node*>& map, const std::vector<Node*>& shape);

}  // namespace ember

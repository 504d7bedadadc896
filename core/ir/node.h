// The IR: a program is a tree of ordered lists (DESIGN §2). Every node has prev/next siblings in
// execution order, a parent scope and, for scoping ops, a first/last child. Order is never
// recomputed, so in-place writes keep their meaning. Nodes are owned by their Program.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/ir/dtype.h"
#include "core/ir/error.h"
#include "core/support/small_vec.h"
#include "core/support/thin_string.h"
#include "core/support/thin_vec.h"

namespace ember {

enum class Op : uint8_t {
#define OP(name, arity, rule, cost, flags) name,
#include "core/ir/ops.def"
  count_
};
constexpr int kOpCount = static_cast<int>(Op::count_);

enum class DTypeRule : uint8_t { Same, Bool, Float, Given, None };

enum OpFlags : uint32_t {
  F_PURE = 1u << 0,          // no side effect, result depends only on operands
  F_LEAF = 1u << 1,          // no operands
  F_MEMORY = 1u << 2,        // the node is a memory (tensor storage)
  F_HOST_ONLY = 1u << 3,     // only at host level (never inside a kernel)
  F_ELEMENTWISE = 1u << 4,
  F_COMMUTATIVE = 1u << 5,
  F_NONDIFF = 1u << 6,       // has no derivative
  F_MEMORY_READ = 1u << 7,
  F_SIDE_EFFECT = 1u << 8,   // never removed by dce while it can matter
  F_SCATTER = 1u << 9,       // writes memory
  F_ALGORITHM = 1u << 10,    // high-level op lowered by lower_algorithms
  F_SCOPE = 1u << 11,        // has children
  F_MUTABLE = 1u << 12,      // a var: its value changes in program order
  F_KERNEL_OR_LOOP = 1u << 13,
};

struct OpInfo {
  const char* name;
  int arity;  // -1: variadic
  DTypeRule rule;
  int cost;
  uint32_t flags;
};
const OpInfo& op_info(Op op);
inline const char* op_name(Op op) { return op_info(op).name; }
inline bool has_flag(Op op, uint32_t f) { return (op_info(op).flags & f) != 0; }

// argmax/argmin: the row-major flat index (i32) of the first extreme element over the reduced
// axes (NumPy semantics; a NaN counts as the extreme, so the first NaN wins).
enum class ReduceKind : uint8_t { sum, prod, max, min, any, all, argmax, argmin };
enum class AtomicKind : uint8_t { add, min, max, band, bor, bxor, exchange };
enum class IndexMode : uint8_t { clamp, unsafe, wrap };
const char* reduce_kind_name(ReduceKind k);
const char* atomic_kind_name(AtomicKind k);
const char* index_mode_name(IndexMode m);

// Every node attribute, declared once: X(type, name, default, role). Node's attribute members
// are generated from this list (NodeAttrs), and so are copy_attrs, same_attrs and hash_attrs
// below, so an attribute added here is copied (clone_program, pass copies), compared (cse,
// builder value numbering) and hashed with no other edit. Which ops use which attribute is
// documented in ops.def. Role:
//   semantic: part of what the node computes; two nodes with the same op, dtype, shape and
//             operands are interchangeable only when every semantic attribute is equal
//             (same_attrs / hash_attrs). The printer shows each one where it differs from its
//             default, except those printer_omits() lists (tests/cpp/test_node_attrs.cpp checks).
//   metadata: carried along by copies but never compared, hashed or printed.
// Do not declare an attribute as a plain member of Node: it would be silently dropped by copies.
// The order packs the small members together (Node's size is walked memory in every pass).
#define EMBER_NODE_ATTRS(X)                                                                       \
  X(uint32_t, bits, 0, semantic)                  /* constant: the value's 32-bit word */          \
  X(int, axis, 0, semantic)                       /* index: which coordinate; scan: the axis */    \
  X(uint8_t, kind, 0, semantic)                   /* reduce, scan: ReduceKind; atomic: AtomicKind */ \
  X(bool, user_kernel, false, semantic)           /* kernel: written by the user (em.kernel) */    \
  X(uint32_t, axes, 0, semantic)                  /* reduce: bitmask of reduced input axes */      \
  X(bool, keepdims, false, semantic)              /* reduce */                                     \
  X(IndexMode, mode, IndexMode::clamp, semantic)  /* load/store/atomic: out-of-range policy */     \
  X(bool, flat, false, semantic)                  /* load/store/atomic: one flat index */          \
  X(bool, zero_init, false, semantic)             /* buffer: filled with zeros when allocated */   \
  X(int, index, -1, semantic)                     /* argument position, output slot, kernel id */  \
  X(ThinString, name, {}, semantic)               /* argument name, symbolic dim, kernel name */   \
  X(ThinVec<int>, group, {}, semantic)            /* kernel: workgroup shape; empty: none */       \
  X(SourceLoc, loc, {}, metadata)                 /* where the user traced it */

enum class AttrRole : uint8_t { semantic, metadata };

struct Node;

struct NodeAttrs {
#define EMBER_DECLARE_ATTR(type, name, init, role) type name = init;
  EMBER_NODE_ATTRS(EMBER_DECLARE_ATTR)
#undef EMBER_DECLARE_ATTR
};

// Derived from EMBER_NODE_ATTRS. copy_attrs copies every attribute (metadata included);
// same_attrs and hash_attrs cover the semantic ones.
void copy_attrs(NodeAttrs& dst, const NodeAttrs& src);
bool same_attrs(const NodeAttrs& a, const NodeAttrs& b);
size_t hash_attrs(const NodeAttrs& a);
// hash_attrs of the integer and enum attributes only (not name, group): they sit in a node's
// second cache line, the strings and lists do not. For tables that compare keys with same_attrs.
size_t hash_scalar_attrs(const NodeAttrs& a);
// Names of the semantic attributes of `a` that differ from their defaults (diagnostics, tests).
std::vector<const char*> non_default_attrs(const NodeAttrs& a);

// A node's shape: reads like a `std::vector<Node*>` (it converts to a span, or to a vector by copy); written only
// by Program (create, set_shape, replace_all_uses), which keeps every dim's `dim_users` in sync.
class DimList {
 public:
  using value_type = Node*;
  using const_iterator = Node* const*;
  using iterator = const_iterator;
  using size_type = size_t;

  DimList() = default;
  DimList(const DimList&) = delete;
  DimList& operator=(const DimList&) = delete;

  operator std::vector<Node*>() const { return v_; }               // NOLINT: a copy
  operator std::span<Node* const>() const { return {v_.data(), v_.size()}; }  // NOLINT: a view
  std::vector<Node*> vec() const { return v_; }
  const_iterator begin() const { return v_.begin(); }
  const_iterator end() const { return v_.end(); }
  size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  Node* operator[](size_t i) const { return v_[i]; }
  Node* front() const { return v_.front(); }
  Node* back() const { return v_.back(); }
  friend bool operator==(const DimList& a, const DimList& b) { return a.v_ == b.v_; }
  friend bool operator==(const DimList& a, const std::vector<Node*>& b) { return a.v_ == b; }

 private:
  friend class Program;
  SmallVec<Node*, 3> v_;  // inline up to rank 3: a node's shape sits in its second cache line
};

// A node's fields in three parts, laid out for the walks every pass makes (issue 17: past a few
// MB of IR, each cache line a walk touches per node is a miss). NodeHead and the scalar
// attributes (the first 24 bytes of NodeAttrs) fill the first two 64-byte lines: what the walks
// and the cleanup passes read (kind, links, operands, shape, attributes). NodeTail holds what
// only edits read (users, prev, order, last_child, slots); the lists few nodes have (NodeLists)
// sit behind one pointer, so a node is four lines (256 bytes), not five.
struct NodeHead {
  Op op;
  DType dtype = DType::none;
  bool dead = false;
  int id = 0;  // creation order (unique within the program)

  Node* next = nullptr;
  Node* first_child = nullptr;
  Node* parent = nullptr;

  SmallVec<Node*, 4> operands;  // changed only through Program (keeps users and use_slots in sync)
  DimList shape;  // dimension nodes (scalar i32, host level); [] is a scalar
};

struct NodeTail {
  // One entry per use (a node using x twice appears twice), in no particular order.
  SmallVec<Node*, 2> users;
  // Links that only edits read. An insertion reads its neighbours' prev and order: they share
  // the node's third cache line with the users.
  Node* prev = nullptr;
  // Position among its siblings, strictly increasing along `next` (Program's linking keeps it),
  // so "does a come before b in their scope" is one comparison instead of a walk of the list.
  uint64_t order = 0;
  Node* last_child = nullptr;

  // use_slots[i]: where this node's entry for operands[i] sits in operands[i]->users, so dropping
  // a use is O(1), not O(uses of the operand) (a constant such as 0.1f has one per step of an
  // unrolled simulation: scanning made erasing quadratic in program size).
  SmallVec<uint32_t, 4> use_slots;
  // shape_slots[a]: where this node's entry for shape[a] sits in shape[a]->dim_users, so dropping
  // it is O(1) (a dim such as N has one entry per node of shape [N, ...]: scanning would make
  // erasing quadratic in program size).
  SmallVec<uint32_t, 3> shape_slots;
};

// The lists only some nodes have (a dimension's dim users, a kernel's params and memories), kept
// off the node: three more pointers in every Node would make it five cache lines instead of four.
struct NodeLists {
  ThinVec<Node*> dim_users;
  ThinVec<Node*> params;
  ThinVec<Node*> memories;
};

struct alignas(64) Node : NodeHead, NodeAttrs, NodeTail {
  // Attributes (bits, axis, kind, ...): inherited from NodeAttrs, see EMBER_NODE_ATTRS.

  // Nodes whose shape lists this node as a dimension, one entry per occurrence, in no particular
  // order. Kept apart from `users` so passes that walk users see only operand uses. Written only
  // by Program.
  const ThinVec<Node*>& dim_users() const { return lists_ ? lists_->dim_users : no_list(); }
  // Filled by split_host for kernel nodes: host values the kernel reads (passed as scalars)
  // and memories it touches (passed as buffers), in a fixed order.
  const ThinVec<Node*>& params() const { return lists_ ? lists_->params : no_list(); }
  const ThinVec<Node*>& memories() const { return lists_ ? lists_->memories : no_list(); }
  // The same lists for writing (made on first use).
  ThinVec<Node*>& dim_users_mut() { return lists().dim_users; }
  ThinVec<Node*>& params_mut() { return lists().params; }
  ThinVec<Node*>& memories_mut() { return lists().memories; }
  // Frees the dim user list's storage (erase: an erased node is no one's dim), making nothing.
  void release_dim_users() {
    if (lists_) lists_->dim_users.release();
  }

  bool is(Op o) const { return op == o; }
  bool is_scope() const { return has_flag(op, F_SCOPE); }
  bool is_memory() const { return has_flag(op, F_MEMORY); }
  int rank() const { return static_cast<int>(shape.size()); }
  Node* operand(int i) const { return operands[static_cast<size_t>(i)]; }
  int num_operands() const { return static_cast<int>(operands.size()); }
  // Index operands of load/store/atomic.
  int first_index_operand() const { return op == Op::load ? 1 : 2; }
  // Whether this node lies (strictly) inside `scope`.
  bool inside(const Node* scope) const;
  // Nearest enclosing kernel, or null at host level.
  Node* enclosing_kernel() const;
  // Constant value views (op == constant).
  float f() const { return w2f(bits); }
  int32_t i() const { return w2i(bits); }
  std::vector<Node*> children() const;

 private:
  NodeLists& lists() {
    if (!lists_) lists_ = std::make_unique<NodeLists>();
    return *lists_;
  }
  static const ThinVec<Node*>& no_list() {
    static const ThinVec<Node*> empty;
    return empty;
  }
  std::unique_ptr<NodeLists> lists_;
};
static_assert(sizeof(Node) == 256, "Node is four cache lines: the walks of every pass read them (issue 17)");

// Starts loading n's two hot cache lines (NodeHead and the scalar attributes): a walk calls it for
// the next sibling before working on the current node, so the next load overlaps that work
// instead of waiting on memory once the program outgrows the cache (issue 17).
inline void prefetch_node(const Node* n) {
  if (!n) return;
  __builtin_prefetch(n);
  __builtin_prefetch(reinterpret_cast<const char*>(n) + 64);
}

// Nodes looked at by traversals on this thread: Program::for_each and walk_subtree count each
// node, and passes count their own scans (user lists, cones). run_pipeline records the count per
// pass (PassRecord::visits), so tests assert that a pass's work grows linearly, without timing.
// A thread_local reached through a call (and __tls_get_addr in the shared module): hot loops take
// the reference once per walk, not once per node (issue 17: 3-5% of pass time).
uint64_t& node_visit_counter();

class Program {
 public:
  Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  Node* root() const { return root_; }
  std::string name = "program";

  // Makes a node that is not linked anywhere yet; operands get this node as a user, dims as a
  // dim user.
  Node* create(Op op, DType dtype, std::span<Node* const> shape = {}, std::span<Node* const> operands = {});
  // Linking. A node may be linked in one place at a time.
  void insert_before(Node* pos, Node* n);
  void insert_after(Node* pos, Node* n);
  void append(Node* scope, Node* n);
  void prepend(Node* scope, Node* n);
  void unlink(Node* n);
  // Removes a node (and its children) from the program; it must have no users and no dim users
  // left. An erased node keeps its shape list for reading but is no longer a dim user.
  void erase(Node* n);
  void set_operand(Node* n, int i, Node* v);
  void add_operand(Node* n, Node* v);
  // Drops n's operands from position `count` on.
  void truncate_operands(Node* n, size_t count);
  // The only way to change a node's shape (keeps dim_users in sync).
  void set_shape(Node* n, std::span<Node* const> shape);
  // Rewrites every operand use and every shape reference of old_value to new_value.
  void replace_all_uses(Node* old_value, Node* new_value);

  // Every live node in program order (pre-order: a scope before its children).
  std::vector<Node*> nodes() const;
  // Calls f on every live node in program order. f may erase the node it is given, link new
  // nodes anywhere and edit operands; nodes linked right after the current node or into scopes
  // already passed are not visited, nor are erased ones.
  void for_each(const std::function<void(Node*)>& f) const;
  // While on (run_pipeline turns it on for its passes), for_each over a program of `min_nodes`
  // nodes or more keeps the order it walked and, until a node is linked or unlinked other than by
  // erase, walks that array instead of the `next` links: the node addresses are known ahead, so
  // their loads overlap instead of each waiting on the one before (issue 17: a program past L2
  // and L3 was walked at memory latency per node). Not for programs walked from several threads.
  static constexpr uint64_t kArrayWalkNodes = 12000;
  void set_walk_cache(bool on, uint64_t min_nodes = kArrayWalkNodes) const;
  // Whether for_each walks an array (set_walk_cache, and the program is large): a pass whose own
  // walk by links is cheaper per node can use for_each only then.
  bool walks_by_array() const { return walk_cache_on_ && walk_size_ >= walk_min_nodes_; }

  // Arguments and outputs in positional order.
  std::vector<Node*> args;      // input / scalar_arg nodes by argument position
  std::vector<Node*> dims;      // shape_arg nodes (symbolic and free dimensions)
  int num_outputs = 0;
  int next_kernel_id = 0;
  // The user's schedule (python: em.Program.schedule), one request per line, applied by the
  // apply_schedule pass (core/passes/apply_schedule.h); part of the program cache key. Empty: none.
  std::string schedule;
  // One past the largest node id: passes index dense per-node tables by Node::id.
  int id_bound() const { return next_id_; }

  // The id the next created node gets (ids are unique in a program; the interpreter indexes by
  // them). reserve_ids raises it so nodes given saved ids (deserialize_program) never collide
  // with later ones.
  int next_id() const { return next_id_; }
  void reserve_ids(int next) { if (next > next_id_) next_id_ = next; }

 private:
  void drop_dim_uses(Node* n);
  void add_use(Node* n, size_t i);
  void drop_use(Node* n, size_t i);
  // Gives the children of `scope` evenly spaced `order` labels (when an insertion finds no gap).
  static void relabel(Node* scope);
  // Nodes live in slabs, allocated in creation order: nodes made together (a traced step, a
  // pass's output) sit together in memory, so walks over a large program touch fewer pages than
  // one heap allocation per node did. The first slabs are small (small programs stay small); past
  // kSmallSlabs, a slab is one 2 MiB huge page where the OS gives them (Linux transparent huge
  // pages): a pass's walk over a program of tens of thousands of nodes then misses the TLB once
  // per 2 MiB, not once per 4 KiB (issue 17).
  // A slab's nodes are constructed one by one as they are handed out (constructing a 2 MiB slab
  // at once would write every line of it, evicting the cache, long before its nodes are used).
  struct Slab {
    Node* nodes = nullptr;
    size_t capacity = 0;
    size_t used = 0;  // constructed
    Slab(size_t capacity, bool huge);
    Slab(Slab&& o) noexcept : nodes(o.nodes), capacity(o.capacity), used(o.used) {
      o.nodes = nullptr;
      o.capacity = o.used = 0;
    }
    Slab(const Slab&) = delete;
    Slab& operator=(const Slab&) = delete;
    Slab& operator=(Slab&&) = delete;
    ~Slab();
  };
  static constexpr size_t kSmallSlabNodes = 256;
  static constexpr size_t kSmallSlabs = 16;
  Node* allocate();
  std::vector<Slab> slabs_;
  Node* root_;
  int next_id_ = 0;
  // The walk cache (set_walk_cache): the pre-order for_each last found, erased nodes included,
  // valid while no node has been linked or unlinked since (erasing keeps it: walks skip dead nodes).
  void links_changed() { walk_order_valid_ = false; }
  void detach(Node* n);  // unlink, keeping the walk cache (erase: the node is dead)
  void walk_cached(const std::function<void(Node*)>& f, uint64_t& visits) const;
  mutable std::vector<Node*> walk_order_;
  mutable bool walk_cache_on_ = false;
  mutable bool walk_order_valid_ = false;
  mutable int walking_ = 0;       // for_each calls under way
  mutable uint64_t walk_size_ = 0;  // nodes the last walk met
  // Below kArrayWalkNodes nodes (two hot lines each: 1.5 MB, past a 1 MB L2) walks by links cost
  // no more than recording and reading the array. Measured on the issue-17 stencil (A/B of two
  // builds in one process): at 12000, 400 steps (12-19k nodes) 6-15% faster, 200 steps (6-9k)
  // unchanged; at 8000, 200 steps 1-3% slower.
  mutable uint64_t walk_min_nodes_ = kArrayWalkNodes;
};

// Deep copy of a program (same printed form); `map` receives old -> new node pointers.
std::unique_ptr<Program> clone_program(const Program& p, std::vector<std::pair<const Node*, Node*>>* map = nullptr);

}  // namespace ember

// Kernels that differ only in what they are bound to. A program unrolled by a Python loop (a
// 200-step stencil) holds hundreds of kernels that are the same code run on other buffers and
// host values; code generation and compilation should scale with the distinct ones.
//
// A kernel's signature is its body up to binding: memories and params by their slot in
// kernel->memories / kernel->params (and their dtypes), values by their pre-order position in
// the kernel, constants by dtype and value, every node's op, dtype, shape, user count, child
// structure and semantic attributes (hash_attrs / same_attrs of EMBER_NODE_ATTRS; the kernel
// node's own id and name are identity, not body, and are left out). Two kernels with equal
// signatures print the same text in every dialect and have the same GPU facts (memory accesses
// by slot, loop bounds by param slot), so one compiled function runs both. The hash groups
// candidates; same_kernel_body is the exact check, so a hash collision never merges two kernels.
// A reference the signature cannot express by slot or value (none after split_host) compares by
// node identity: such kernels merge only when they read the very same node.
//
// Operand order. The builder orders the operands of commutative ops by Node::id, which depends on
// the program around the kernel (a value-numbered constant made by the first step of an unrolled
// loop comes before that step's values, after the later steps'): `x * 4.0f` in one step is
// `4.0f * x` in the next. Ops whose result does not depend on the order (operands_commute: add,
// mul, eq, ne, land, lor, band, bor, bxor; not min/max, whose ties pick an operand) are printed,
// and compared here, with their operands in the kernel's own order (KernelBody::swapped): values
// of the kernel by position, then memories and params by slot, then constants. (Floats: a + b and
// b + a are equal bit for bit except for which NaN's payload a sum of two NaNs carries, which the
// C compiler and GPU drivers do not preserve either.)
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/ir/node.h"

namespace ember {

// How a node is referenced from inside a kernel, independent of the program around it.
enum class RefKind : uint8_t { local, memory, param, constant, self, foreign };
struct KernelRef {
  RefKind kind;
  uint64_t value;  // position, slot, (dtype << 32 | bits), 0, or the node's address
  bool operator==(const KernelRef& o) const { return kind == o.kind && value == o.value; }
  bool operator<(const KernelRef& o) const { return kind != o.kind ? kind < o.kind : value < o.value; }
};

// A kernel's nodes in pre-order (the kernel itself excluded) and how its body refers to nodes.
class KernelBody {
 public:
  explicit KernelBody(const Node* kernel);
  const std::vector<const Node*>& nodes() const { return nodes_; }
  KernelRef ref(const Node* o) const;
  // Whether the printer shows the two operands of `n` (a node of this kernel) swapped: `n`
  // commutes and its second operand comes first in the kernel's order (see above).
  bool swapped(const Node* n) const;
  // ref() of n's operands in printed order.
  std::vector<KernelRef> operand_refs(const Node* n) const;

 private:
  void collect(const Node* s);
  const Node* k_;
  std::vector<const Node*> nodes_;
  std::unordered_map<const Node*, KernelRef> slot_;
};

// Whether swapping the two operands of `n` gives the same result (see above).
bool operands_commute(const Node* n);

// Hash of the kernel's body up to binding (stable within a process only).
uint64_t kernel_signature_hash(const Node* kernel);

// Whether kernels `a` and `b` have the same body up to binding (exact; see above).
bool same_kernel_body(const Node* a, const Node* b);

// The kernels of a program grouped by signature.
struct KernelClasses {
  std::vector<const Node*> kernels;               // every kernel, in program order
  std::vector<int> class_of;                      // kernels[i] runs the code of class class_of[i]
  std::vector<std::vector<const Node*>> members;  // per class, its kernels in program order;
                                                  // members[c][0] is the one to print
  size_t size() const { return members.size(); }
  const Node* representative(size_t c) const { return members[c][0]; }
};

// Groups the kernels of `p` (after split_host); classes are numbered by their first kernel.
KernelClasses group_kernels(const Program& p);

}  // namespace ember

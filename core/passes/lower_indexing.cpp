#include "core/passes/lower_indexing.h"
#include <algorithm>

#include "core/ir/builder.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// (x + 1) % d and (x - 1) % d with x in [0, d), the neighbours of a periodic stencil, as a
// compare and select instead of a floor division (cheap, and vectorizable): null otherwise.
Node* wrap_neighbour(Builder& b, Node* i, Node* d, const Node* kernel) {
  if (i->op != Op::mod || !same_dim(i->operand(1), d)) return nullptr;
  Node* t = i->operand(0);
  if (t->op != Op::add && t->op != Op::sub) return nullptr;
  const bool swap = t->op == Op::add && t->operand(0)->op == Op::constant;  // 1 + x
  Node* x = t->operand(swap ? 1 : 0);
  Node* step = t->operand(swap ? 0 : 1);
  if (step->op != Op::constant) return nullptr;
  int32_t c = step->i() * (t->op == Op::sub ? -1 : 1);
  if ((c != 1 && c != -1) || !index_in_range(x, d, kernel)) return nullptr;
  if (c == 1) return b.select(b.binary(Op::ge, t, d), b.binary(Op::sub, t, d), t);
  return b.select(b.binary(Op::lt, t, b.i32(0)), b.binary(Op::add, t, d), t);
}

}  // namespace

bool lower_indexing(Program& p) {
  Builder b(p);
  bool changed = false;
  // The accesses first (one walk; lowering them adds no access), then each is lowered: a second
  // pass over every node would read them all again, after the lowering evicted them.
  std::vector<Node*> accesses;
  p.for_each([&](Node* n) {
    if ((n->op == Op::load || n->op == Op::store || n->op == Op::atomic) && !n->flat) accesses.push_back(n);
  });
  for (Node* n : accesses) {
    Node* mem = n->operand(0);
    Node* k = n->enclosing_kernel();
    int first = n->first_index_operand();
    int rank = mem->rank();
    // Host-side strides and bounds go before the kernel (or the host access).
    Node* host_pos = k ? k : n;
    Node* flat = nullptr;
    for (int a = 0; a < rank; ++a) {
      Node* d = mem->shape[static_cast<size_t>(a)];
      b.loc = n->loc;
      b.set_insert_before(n);
      Node* i = n->operand(first + a);
      if (i->dtype != DType::i32) i = b.cast(i, DType::i32);
      Node* w = wrap_neighbour(b, i, d, k);
      if (w) i = w;  // in [0, d) by construction
      if (n->mode == IndexMode::clamp && !w && !index_in_range(i, d, k)) {
        i = clamp_index(b, i, d, n, host_pos);
      } else if (n->mode == IndexMode::wrap) {
        i = b.binary(Op::mod, i, d);
      }
      if (!flat) {
        flat = i;
      } else {
        flat = b.binary(Op::add, b.binary(Op::mul, flat, d), i);
      }
    }
    if (!flat) flat = b.i32(0);
    std::vector<Node*> ops(n->operands.begin(), n->operands.begin() + first);
    ops.push_back(flat);
    p.truncate_operands(n, static_cast<size_t>(first));
    p.add_operand(n, flat);
    n->flat = true;
    n->mode = IndexMode::unsafe;
    changed = true;
  }
  return changed;
}

}  // namespace ember

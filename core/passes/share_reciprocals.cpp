#include "core/passes/share_reciprocals.h"

#include <unordered_set>
#include <vector>

#include "core/ir/builder.h"

namespace ember {

namespace {
// A quotient that reaches an equality test or a min/max through elementwise float math (the mask
// x == max(...) of a max reduction's gradient, where x, or -x as a min's gradient compares it, is
// recomputed in another kernel) must keep the division's rounding: the product by a reciprocal can
// differ from it in the last bits, and a copy of the same quotient left a lone division elsewhere
// would then compare unequal (fuzz seed 1360198: min of -(a / d), its gradient NaN). Follows
// users up to 64 nodes; past that it answers yes.
bool compared_exactly(const Node* dv) {
  std::vector<const Node*> todo{dv};
  std::unordered_set<const Node*> seen{dv};
  while (!todo.empty()) {
    const Node* v = todo.back();
    todo.pop_back();
    for (const Node* u : v->users) {
      switch (u->op) {
        case Op::eq: case Op::ne: case Op::min: case Op::max:
          return true;
        default: break;
      }
      if (u->dtype != DType::f32 || !has_flag(u->op, F_PURE) || !has_flag(u->op, F_ELEMENTWISE)) continue;
      if (!seen.insert(u).second) continue;
      if (seen.size() > 64) return true;
      todo.push_back(u);
    }
  }
  return false;
}
bool shareable(const Node* u, const Node* d) {
  return u->op == Op::div && u->operand(1) == d && u->operand(0) != d && !compared_exactly(u);
}
}  // namespace

bool share_reciprocals(Program& p) {
  std::vector<Node*> denominators;
  p.for_each([&](Node* n) {
    // A var is read where it is used, so its value at d is not its value at each division.
    if (n->dtype != DType::f32 || n->op == Op::constant || n->op == Op::var || n->is_scope()) return;
    int divisions = 0;
    for (Node* u : n->users) divisions += shareable(u, n);
    if (divisions >= 2) denominators.push_back(n);
  });
  for (Node* d : denominators) {
    // A denominator that was itself a shared division (1 / (a / b)) is gone: its divisions now
    // divide by the product that replaced it, and stay divisions.
    if (d->dead) continue;
    std::vector<Node*> divs;
    for (Node* u : d->users)
      if (shareable(u, d)) divs.push_back(u);
    Builder b(p);
    b.loc = d->loc;
    Node* one = b.f32(1.0f);
    // After d, which dominates every division, and after the leaves that follow it: a
    // denominator among the arguments at the top of the program comes before the constants
    // (1.0f among them), and the leading leaves stay together (Builder::constant looks there).
    // No division is among those leaves, so the reciprocal still precedes them all.
    Node* after = d;
    while (after->next && has_flag(after->next->op, F_LEAF)) after = after->next;
    if (after->next) b.set_insert_before(after->next); else b.set_insert_end(after->parent);
    Node* r = b.raw(Op::div, DType::f32, d->shape, {one, d});
    for (Node* dv : divs) {
      Builder m(p);
      m.set_insert_before(dv);
      m.loc = dv->loc;
      Node* prod = m.raw(Op::mul, DType::f32, dv->shape, {dv->operand(0), r});
      p.replace_all_uses(dv, prod);
      p.erase(dv);
    }
  }
  return !denominators.empty();
}

}  // namespace ember

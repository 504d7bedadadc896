#include "core/passes/share_reciprocals.h"

#include <algorithm>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "core/ir/builder.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {
bool shareable(const Node* u, const Node* d) {
  return u->op == Op::div && u->operand(1) == d && u->operand(0) != d && !reaches_exact_comparison(u);
}
}  // namespace

bool share_reciprocals(Program& p) {
  // One walk finds the divisions and counts them per denominator (by id); only denominators with
  // two or more are then checked through their users. (Scanning every value's users read a third
  // cache line of every node: issue 17.) A var is read where it is used, so its value at d is
  // not its value at each division.
  auto denominator = [](const Node* d) {
    return d->dtype == DType::f32 && d->op != Op::constant && d->op != Op::var && !d->is_scope();
  };
  std::vector<uint8_t> divisions(static_cast<size_t>(p.id_bound()), 0);
  std::vector<Node*> twice;  // denominators of two or more divisions
  const Positions pos = program_positions(p, [&](Node* n) {
    if (n->op != Op::div || n->dtype != DType::f32) return;
    Node* d = n->operand(1);
    if (n->operand(0) == d || !denominator(d)) return;
    uint8_t& k = divisions[static_cast<size_t>(d->id)];
    if (k < 2 && ++k == 2) twice.push_back(d);
  });
  // In program order of the denominators, those with two shareable divisions.
  std::sort(twice.begin(), twice.end(), [&](const Node* a, const Node* b) { return pos.at(a) < pos.at(b); });
  std::vector<Node*> denominators;
  for (Node* d : twice) {
    int shared = 0;
    for (Node* u : d->users) shared += shareable(u, d);
    if (shared >= 2) denominators.push_back(d);
  }
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

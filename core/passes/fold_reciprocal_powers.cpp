#include "core/passes/fold_reciprocal_powers.h"

#include <cmath>
#include <vector>

#include "core/ir/builder.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

bool is_f32_op(const Node* n, Op op) { return n->op == op && n->dtype == DType::f32; }

// Whether f32 value x is +0, positive, +inf or NaN (never negative, never -0), by its form.
bool nonnegative(const Node* x, int depth = 0) {
  if (x->dtype != DType::f32 || depth > 8) return false;
  auto nn = [&](const Node* y) { return nonnegative(y, depth + 1); };
  switch (x->op) {
    case Op::constant: return !std::signbit(x->f());
    case Op::abs:
    case Op::exp:
    case Op::exp2: return true;
    case Op::sqrt:
    case Op::rsqrt: return nn(x->operand(0));  // sqrt(-0) = -0
    case Op::mul: return x->operand(0) == x->operand(1) || (nn(x->operand(0)) && nn(x->operand(1)));
    case Op::add:
    case Op::div:
    case Op::max: return nn(x->operand(0)) && nn(x->operand(1));
    case Op::fma:
      return (x->operand(0) == x->operand(1) || (nn(x->operand(0)) && nn(x->operand(1)))) && nn(x->operand(2));
    default: return false;
  }
}

// The a of q = 1 / sqrt(a) or rsqrt(a), else null.
Node* rsqrt_operand(const Node* q) {
  if (is_f32_op(q, Op::rsqrt)) return q->operand(0);
  if (!is_f32_op(q, Op::div) || q->operand(0)->op != Op::constant || q->operand(0)->f() != 1.0f) return nullptr;
  const Node* s = q->operand(1);
  return is_f32_op(s, Op::sqrt) ? s->operand(0) : nullptr;
}

}  // namespace

bool fold_reciprocal_powers(Program& p) {
  std::vector<Node*> squares;
  p.for_each([&](Node* n) {
    if (is_f32_op(n, Op::mul) && n->operand(0) == n->operand(1) && rsqrt_operand(n->operand(0)) &&
        n->enclosing_kernel())
      squares.push_back(n);
  });
  bool changed = false;
  for (Node* t : squares) {
    if (t->dead || t->users.size() != 1) continue;
    Node* q = t->operand(0);
    Node* cube = t->users[0];
    if (!is_f32_op(cube, Op::mul) || (cube->operand(0) != q && cube->operand(1) != q) ||
        cube->operand(0) == cube->operand(1))
      continue;
    if (cube->operand(0) != t && cube->operand(1) != t) continue;
    // q only in the square and the cube (the square reads it twice).
    bool only = true;
    for (const Node* u : q->users) only &= u == t || u == cube;
    Node* a = rsqrt_operand(q);
    if (!only || !nonnegative(a) || reaches_discrete_use(cube)) continue;
    Builder b(p);
    b.set_insert_before(cube);
    b.loc_of = cube;
    Node* s = q->op == Op::div ? q->operand(1) : b.unary(Op::sqrt, a);
    Node* r = b.binary(Op::div, b.f32(1.0f), b.binary(Op::mul, a, s));
    p.replace_all_uses(cube, r);
    p.erase(cube);
    p.erase(t);
    if (q->users.empty()) p.erase(q);
    changed = true;
  }
  return changed;
}

}  // namespace ember

#include "core/passes/contract_fma.h"

#include <vector>

#include "core/analysis/contraction.h"
#include "core/ir/builder.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

bool is_f32_op(const Node* n, Op op) { return n->op == op && n->dtype == DType::f32; }
bool is_square(const Node* n) { return is_f32_op(n, Op::mul) && n->operand(0) == n->operand(1); }

// Whether add/sub u can take product m (one of its operands) into an fma.
bool takes(const Node* u, const Node* m) {
  if ((!is_f32_op(u, Op::add) && !is_f32_op(u, Op::sub)) || u->parent != m->parent) return false;
  if (u->operand(0) == u->operand(1)) return false;  // m + m, m - m: simplify's business
  const Node* other = u->operand(u->operand(0) == m ? 1 : 0);
  if (is_f32_op(other, Op::mul) && !(u->op == Op::add && is_square(m) && is_square(other))) return false;
  return !reaches_discrete_use(u);
}

bool contractible(const Node* m) {
  if (!is_f32_op(m, Op::mul) || m->users.empty()) return false;
  for (const Node* f : m->operands)
    if (has_flag(f->op, F_MUTABLE)) return false;
  for (const Node* u : m->users)
    if (!takes(u, m)) return false;
  return true;
}

// Replaces u (an add or sub of product m) by the fma it is.
void contract(Program& p, Node* u, Node* m) {
  Builder b(p);
  b.set_insert_before(u);
  b.loc_of = u;
  const bool m_first = u->operand(0) == m;
  Node* other = u->operand(m_first ? 1 : 0);
  Node* x = m->operand(0);
  Node* y = m->operand(1);
  Node* f = nullptr;
  if (u->op == Op::add)
    f = b.fma(x, y, other);
  else if (m_first)
    f = b.fma(x, y, b.unary(Op::neg, other));  // a*b - c
  else
    f = b.fma(b.unary(Op::neg, x), y, other);  // c - a*b
  p.replace_all_uses(u, f);
  p.erase(u);
}

}  // namespace

bool contract_fma(Program& p) {
  std::vector<Node*> products;
  for (Node* k : kernels_of(p)) {
    if (find_contraction(k, nullptr)) continue;  // the cpp dialect's packed panels compute its sums
    walk_subtree(k, [&](Node* n) {
      if (is_f32_op(n, Op::mul)) products.push_back(n);
    });
  }
  bool changed = false;
  for (Node* m : products) {
    // In program order: a sum contracted earlier is an fma now, no longer a product for later sums.
    if (m->dead || !contractible(m)) continue;
    const std::vector<Node*> users = m->users;
    for (Node* u : users) contract(p, u, m);
    p.erase(m);
    changed = true;
  }
  return changed;
}

}  // namespace ember

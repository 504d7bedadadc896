#include "core/passes/contract_fma.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/analysis/contraction.h"
#include "core/ir/builder.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

bool is_f32_op(const Node* n, Op op) { return n->op == op && n->dtype == DType::f32; }
bool is_square(const Node* n) { return is_f32_op(n, Op::mul) && n->operand(0) == n->operand(1); }

// The values of the kernel at hand whose last bit can decide something discrete.
using Discrete = std::unordered_set<const Node*>;

// Whether add/sub u can take product m (one of its operands) into an fma.
bool takes(const Node* u, const Node* m, const Discrete& discrete) {
  if ((!is_f32_op(u, Op::add) && !is_f32_op(u, Op::sub)) || u->parent != m->parent) return false;
  if (u->operand(0) == u->operand(1)) return false;  // m + m, m - m: simplify's business
  const Node* other = u->operand(u->operand(0) == m ? 1 : 0);
  if (is_f32_op(other, Op::mul) && !(u->op == Op::add && is_square(m) && is_square(other))) return false;
  return !discrete.count(u);
}

bool contractible(const Node* m, const Discrete& discrete) {
  if (!is_f32_op(m, Op::mul) || m->users.empty()) return false;
  for (const Node* f : m->operands)
    if (has_flag(f->op, F_MUTABLE)) return false;
  for (const Node* u : m->users)
    if (!takes(u, m, discrete)) return false;
  return true;
}

// Replaces u (an add or sub of product m) by the fma it is; the negations it makes go to `negs`.
void contract(Program& p, Node* u, Node* m, std::vector<Node*>& negs) {
  Builder b(p);
  b.set_insert_before(u);
  b.loc_of = u;
  const bool m_first = u->operand(0) == m;
  Node* other = u->operand(m_first ? 1 : 0);
  Node* x = m->operand(0);
  Node* y = m->operand(1);
  // A constant factor goes second, so 4 * u and u * 4 give one fma (equal kernels stay equal:
  // the builder orders a product's operands by node, which differs between copies), and c - 4 * u
  // negates the constant: fma(u, -4, c).
  if (x->op == Op::constant && y->op != Op::constant) std::swap(x, y);
  Node* f = nullptr;
  Node* neg = nullptr;
  if (u->op == Op::add)
    f = b.fma(x, y, other);
  else if (m_first)
    f = b.fma(x, y, neg = b.unary(Op::neg, other));  // a*b - c
  else
    f = y->op == Op::constant ? b.fma(x, neg = b.unary(Op::neg, y), other)   // c - a*k
                              : b.fma(neg = b.unary(Op::neg, x), y, other);  // c - a*b
  if (neg && neg->op == Op::neg) negs.push_back(neg);
  p.replace_all_uses(u, f);
  p.erase(u);
}

// Whether v's value can change from one iteration of `loop` to the next: it reads the loop's
// counter, a var, or a value that does (operands followed 16 deep; deeper counts as yes).
bool varies_in(const Node* v, const Node* loop, std::unordered_map<const Node*, bool>& memo, int depth = 0) {
  if (v == loop || v->op == Op::var) return true;
  if (v->op == Op::constant || v->is_memory()) return false;
  if (depth > 16) return true;
  auto it = memo.find(v);
  if (it != memo.end()) return it->second;
  bool r = false;
  for (const Node* o : v->operands) r = r || varies_in(o, loop, memo, depth + 1);
  return memo[v] = r;
}

// A use of x that its sign does not change: x * x, fma(x, x, c).
bool even_use(const Node* u, const Node* x) {
  return (u->op == Op::mul || u->op == Op::fma) && u->operand(0) == x && u->operand(1) == x &&
         (u->op == Op::mul || u->operand(2) != x);
}

// c - a * b became fma(-a, b, c). Where a = p - q is used only negated and squared (a pairwise
// difference: its square in a distance, the negated product in a force sum), and p changes from
// one iteration of the innermost loop around a to the next while q does not, a becomes q - p and
// its negations go: the invariant operand first is the form whose varying load x86 takes as the
// memory operand of vsubps (p - q would need a load of its own), and the negated fmas become
// plain ones. Exact but for the sign of a zero: where p == q, -(p - q) is -0 and q - p is +0,
// which an fma's sum tells apart only when its addend is -0.
bool orient_differences(Program& p, const std::vector<Node*>& negs) {
  bool changed = false;
  std::unordered_map<const Node*, bool> memo;
  for (Node* n : negs) {
    if (n->dead || !is_f32_op(n->operand(0), Op::sub)) continue;
    Node* x = n->operand(0);
    const Node* loop = x->parent;
    while (loop && loop->op != Op::loop && loop->op != Op::kernel) loop = loop->parent;
    if (!loop || loop->op != Op::loop) continue;
    if (!varies_in(x->operand(0), loop, memo) || varies_in(x->operand(1), loop, memo)) continue;
    bool ok = true;
    for (const Node* u : x->users) ok &= u->op == Op::neg || even_use(u, x);
    if (!ok) continue;
    Builder b(p);
    b.set_insert_before(x);
    b.loc_of = x;
    Node* flipped = b.raw(Op::sub, DType::f32, x->shape, {x->operand(1), x->operand(0)});
    const std::vector<Node*> users = x->users;
    for (Node* u : users) {
      if (u->dead) continue;
      if (u->op == Op::neg) {
        p.replace_all_uses(u, flipped);
        p.erase(u);
      } else {
        p.set_operand(u, 0, flipped);
        p.set_operand(u, 1, flipped);
      }
    }
    p.erase(x);
    changed = true;
  }
  return changed;
}

}  // namespace

bool contract_fma(Program& p) {
  // One walk: the products inside kernels and the program's discrete uses.
  std::vector<Node*> products;
  std::vector<const Node*> uses;
  p.for_each([&](Node* n) {
    if (is_f32_op(n, Op::mul))
      products.push_back(n);
    else if (discrete_use(n))
      uses.push_back(n);
  });
  if (products.empty()) return false;
  const Discrete discrete = values_reaching(uses);
  // Contraction kernels (the cpp dialect's packed panels compute those sums): only a kernel with
  // a top-level loop can be one, and each is asked once.
  std::unordered_map<const Node*, bool> left_alone;
  auto leave = [&](const Node* k) {
    auto it = left_alone.find(k);
    if (it != left_alone.end()) return it->second;
    bool loop = false;
    for (const Node* c = k->first_child; c && !loop; c = c->next) loop = c->op == Op::loop;
    return left_alone[k] = loop && find_contraction(k, nullptr);
  };
  bool changed = false;
  std::vector<Node*> negs;
  for (Node* m : products) {
    // In program order: a sum contracted earlier is an fma now, no longer a product for later sums.
    if (m->dead || !contractible(m, discrete)) continue;
    const Node* k = m->enclosing_kernel();
    if (!k || leave(k)) continue;
    const std::vector<Node*> users = m->users;
    for (Node* u : users) contract(p, u, m, negs);
    p.erase(m);
    changed = true;
  }
  orient_differences(p, negs);
  return changed;
}

}  // namespace ember

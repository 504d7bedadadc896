// Adjoints of loads in reverse mode (struct Reverse, reverse.h; the overview is in reverse.cpp).
// A load from a memory adds into its adjoint buffer; a broadcast or permuted read of a value is
// deferred, and the deferred reads of one value are summed (one gathered at permuted
// coordinates, or shared where the adjoint is (anti)symmetric) before one reduction.
#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/autodiff/reverse.h"
#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember::autodiff_detail {

// Adds `g` (of the load's shape) into the adjoint of what load `n` read.
void Reverse::scatter_adjoint(Node* n, Node* g) {
  Node* src = n->operand(0);
  std::vector<Node*> idx(n->operands.begin() + 1, n->operands.end());
  g = fit(g, n->shape);
  if (src->is_memory() && !valuelike(src)) {
    auto it = state.find(src);
    if (it != state.end()) b.atomic(AtomicKind::add, it->second, g, idx, n->shape, n->mode);
    return;
  }
  if (!active.count(orig(src)) || tr.is_detached(orig(src))) return;
  auto r = route.find(src);
  if (r != route.end() && r->second.buf) {
    if (src->shape.empty()) idx = {b.i32(0)};
    b.atomic(AtomicKind::add, r->second.buf, g, idx, n->shape, n->mode);
    return;
  }
  // Broadcasts, transposes and size-1 axes: a sum over the unused axes and a permutation.
  const Shape& S = src->shape;
  std::vector<int> used(S.size(), -1);
  bool simple = !device_emission_scope() && r == route.end() && idx.size() == S.size() && n->rank() <= 32;
  uint32_t taken = 0;
  for (size_t k = 0; simple && k < idx.size(); ++k) {
    Node* i = idx[k];
    if (i->op == Op::index && same_shape(i->shape, n->shape) && same_dim(S[k], n->shape[static_cast<size_t>(i->axis)]) &&
        !(taken >> i->axis & 1)) {
      used[k] = i->axis;
      taken |= 1u << i->axis;
    } else if (i->op == Op::constant && i->i() == 0 && const_dim(S[k]) == 1) {
      used[k] = -2;
    } else {
      simple = false;
    }
  }
  if (simple) {
    // Deferred (flush()): several broadcast reads of one value (X[:, None] and X[None, :])
    // become one reduction of the sum of their adjoints.
    pending[src].push_back(Term{spread(g, n->shape), used, n->shape});
    return;
  }
  Node* buf = tr.zeros(S, DType::f32);
  b.atomic(AtomicKind::add, buf, g, idx, n->shape, n->mode);
  contribute(src, tr.value(buf));
}

std::vector<int> Reverse::dropped(const Term& t) {
  std::vector<int> d;
  for (int a = 0; a < static_cast<int>(t.nshape.size()); ++a)
    if (std::find(t.used.begin(), t.used.end(), a) == t.used.end()) d.push_back(a);
  return d;
}
// Sums the deferred terms of `src` into its adjoint: terms whose reads differ by a
// permutation of the read's axes are added (one gathered at permuted coordinates) before
// one reduction over the dropped axes, so they share one loop.
void Reverse::flush(Node* src) {
  auto it = pending.find(src);
  if (it == pending.end()) return;
  std::vector<Term> terms = std::move(it->second);
  pending.erase(it);
  std::vector<bool> done(terms.size(), false);
  const Shape& S = src->shape;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (done[i]) continue;
    const Term& base = terms[i];
    std::vector<int> bd = dropped(base);
    Node* h = base.g;
    for (size_t j = i + 1; j < terms.size(); ++j) {
      const Term& o = terms[j];
      if (done[j] || o.nshape.size() != base.nshape.size()) continue;
      std::vector<int> od = dropped(o);
      if (od.size() != bd.size()) continue;
      std::vector<int> from(o.nshape.size(), -1);  // o's axis q takes base's axis from[q]
      bool ok = true;
      for (size_t a = 0; a < S.size() && ok; ++a) {
        if ((o.used[a] == -2) != (base.used[a] == -2)) ok = false;
        else if (o.used[a] >= 0) from[static_cast<size_t>(o.used[a])] = base.used[a];
      }
      for (size_t k = 0; k < od.size(); ++k) from[static_cast<size_t>(od[k])] = bd[k];
      std::vector<Node*> idx;
      for (size_t q = 0; q < from.size() && ok; ++q) {
        ok = from[q] >= 0 && same_dim(o.nshape[q], base.nshape[static_cast<size_t>(from[q])]);
        if (ok) idx.push_back(b.index(from[q], base.nshape));
      }
      if (!ok) continue;
      bool same = true;
      std::vector<int> moved;
      for (size_t q = 0; q < from.size(); ++q) {
        same &= from[q] == static_cast<int>(q);
        if (from[q] != static_cast<int>(q)) moved.push_back(static_cast<int>(q));
      }
      // A swap of two axes of a (anti)symmetric adjoint needs no gather: the same values
      // (negated), so both reads' adjoints share one computation.
      int sym = moved.size() == 2 && from[static_cast<size_t>(moved[0])] == moved[1] ? symmetry(o.g, moved[0], moved[1]) : 0;
      Node* add = same || sym == 1 ? o.g : sym == -1 ? tr.unary(Op::neg, o.g) : b.load(o.g, idx, base.nshape, IndexMode::clamp);
      h = tr.binary(Op::add, h, add);
      done[j] = true;
    }
    Node* s = bd.empty() ? h : tr.reduce(ReduceKind::sum, h, bd, false);
    // s's axes are the read's kept axes in order; gather them into src's axis order.
    std::vector<int> kept;
    for (int a = 0; a < static_cast<int>(base.nshape.size()); ++a)
      if (std::find(bd.begin(), bd.end(), a) == bd.end()) kept.push_back(a);
    std::vector<Node*> sidx;
    bool identity = true;
    for (size_t q = 0; q < kept.size(); ++q) {
      size_t k = static_cast<size_t>(std::find(base.used.begin(), base.used.end(), kept[q]) - base.used.begin());
      sidx.push_back(b.index(static_cast<int>(k), S));
      identity &= kept.size() == S.size() && k == q;
    }
    contribute(src, identity || kept.empty() || s->shape.empty() ? s : b.load(s, sidx, S, IndexMode::clamp));
  }
}
// Symmetry of value `v` under swapping axes a0 and a1 of its shape: +1 unchanged, -1 negated,
// 0 unknown. Structural: X[:, None] - X[None, :] is antisymmetric, its square symmetric, and
// so on through elementwise math, relabeling gathers and reductions over other axes.
bool Reverse::refers(const Node* e, int axis, const Shape& shape, int depth) {
  if (e->op == Op::index) return e->axis == axis && same_shape(e->shape, shape);
  if (e->shape.empty() || depth > 16) return e->shape.empty() ? false : true;
  for (const Node* o : e->operands)
    if (!o->is_memory() && refers(o, axis, shape, depth + 1)) return true;
  return e->op == Op::var || e->op == Op::loop || e->op == Op::reduce;
}
bool Reverse::swapped_loads(const Node* x, const Node* y, int a0, int a1) {
  if (x->op != Op::load || y->op != Op::load || x->operand(0) != y->operand(0) || x->mode != y->mode ||
      x->num_operands() != y->num_operands() || !same_shape(x->shape, y->shape))
    return false;
  for (int k = 1; k < x->num_operands(); ++k) {
    const Node* p = x->operand(k);
    const Node* q = y->operand(k);
    auto is = [&](const Node* n, int a) { return n->op == Op::index && n->axis == a && same_shape(n->shape, x->shape); };
    if ((is(p, a0) && is(q, a1)) || (is(p, a1) && is(q, a0))) continue;
    if (p == q && !refers(p, a0, x->shape) && !refers(p, a1, x->shape)) continue;
    return false;
  }
  return true;
}
int Reverse::symmetry(Node* v, int a0, int a1, int depth) {
  if (v->shape.empty()) return 1;
  if (depth > 64 || std::max(a0, a1) >= v->rank() || !same_dim(v->shape[static_cast<size_t>(a0)], v->shape[static_cast<size_t>(a1)]))
    return 0;
  auto key = std::make_tuple(static_cast<const Node*>(v), a0, a1);
  auto it = sym_memo.find(key);
  if (it != sym_memo.end()) return it->second;
  auto S = [&](Node* x) { return symmetry(x, a0, a1, depth + 1); };
  int r = 0;
  switch (v->op) {
    case Op::constant: r = 1; break;
    case Op::index: r = v->axis == a0 || v->axis == a1 ? 0 : 1; break;
    case Op::neg: case Op::sin: case Op::tan: case Op::tanh: case Op::sinh: case Op::asin: case Op::atan:
    case Op::sign: case Op::trunc: case Op::cast:
      r = S(v->operand(0)); break;
    case Op::abs: case Op::cos: case Op::cosh: r = S(v->operand(0)) != 0 ? 1 : 0; break;
    case Op::add: case Op::sub:
      if (swapped_loads(v->operand(0), v->operand(1), a0, a1)) { r = v->op == Op::add ? 1 : -1; break; }
      { int x = S(v->operand(0)), y = S(v->operand(1)); r = x == y ? x : 0; }
      break;
    case Op::mul: case Op::div: r = S(v->operand(0)) * S(v->operand(1)); break;
    case Op::select: {
      int c = S(v->operand(0)), x = S(v->operand(1)), y = S(v->operand(2));
      r = c == 1 && x == y ? x : 0;
      break;
    }
    case Op::load: {
      Node* src = v->operand(0);
      int k0 = -1, k1 = -1;
      bool ok = true;
      for (int k = 1; k < v->num_operands() && ok; ++k) {
        Node* i = v->operand(k);
        bool is0 = i->op == Op::index && i->axis == a0 && same_shape(i->shape, v->shape);
        bool is1 = i->op == Op::index && i->axis == a1 && same_shape(i->shape, v->shape);
        if (is0) k0 = k - 1; else if (is1) k1 = k - 1;
        else ok = !refers(i, a0, v->shape) && !refers(i, a1, v->shape);
      }
      if (!ok) break;
      if (k0 < 0 && k1 < 0) { r = 1; break; }
      if (k0 >= 0 && k1 >= 0 && !src->is_memory() && v->num_operands() - 1 == src->rank()) r = symmetry(src, k0, k1, depth + 1);
      break;
    }
    case Op::reduce: {
      Node* x = v->operand(0);
      std::vector<int> in;  // result axis -> operand axis
      for (int a = 0; a < x->rank(); ++a)
        if (!(v->axes >> a & 1) || v->keepdims) in.push_back(a);
      int c0 = in[static_cast<size_t>(a0)], c1 = in[static_cast<size_t>(a1)];
      auto k = static_cast<ReduceKind>(v->kind);
      if (!(v->axes >> c0 & 1) && !(v->axes >> c1 & 1) && (k == ReduceKind::sum || k == ReduceKind::max || k == ReduceKind::min))
        r = S(x) == 1 || (k == ReduceKind::sum && S(x) == -1) ? symmetry(x, c0, c1, depth + 1) : 0;
      break;
    }
    default:
      if (has_flag(v->op, F_ELEMENTWISE)) {  // any function of symmetric operands is symmetric
        r = 1;
        for (Node* o : v->operands) r = r == 1 && S(o) == 1 ? 1 : 0;
      }
      break;
  }
  sym_memo[key] = r;
  return r;
}

void Reverse::flush_all() {
  while (!pending.empty()) flush(const_cast<Node*>(pending.begin()->first));
}

}  // namespace ember::autodiff_detail

// Reverse mode on the traced IR (core/IR.md "Derivatives").
//
// em.grad(y, xs) differentiates what was traced before it in the current scope (the *region*)
// and emits the adjoint code right there, through the tracer, so it fuses like any other code.
//   1. Analysis: a node is *live* when it depends on some x (active) and y depends on it
//      (useful). Only live nodes get adjoints.
//   2. Prepare the forward code: a live node that reads a var reads a *snapshot* of it (an
//      identity node at that point), so its operand keeps the value it had there; a live scope
//      records what its reverse needs: a host loop tapes its state (the vars and memories its
//      body changes) at the start of each iteration and counts its trips; other scopes
//      snapshot their state on entry, and per-thread loops count their trips.
//   3. Reverse sweep over the region, last node first. Values get SSA adjoints; a var has an
//      adjoint var, a memory an adjoint buffer (state, updated in reverse program order).
//      A nested scope is reversed by a scope of the same kind whose body first *replays* the
//      forward body (a clone reading restored state: the tape for host loops, the entry
//      snapshot for ifs and kernels, recomputation from entry for per-thread loops) and then
//      reverses that clone. break/continue become a predicate in the replay.
//
// The state of one em.grad is struct Reverse (reverse.h). This file: the analysis, the reverse
// sweep (adjoints of values, vars, stores and reductions) and grad(). reverse_prepare.cpp: step 2
// (snapshots, and what a live scope's reverse needs). reverse_scopes.cpp: replays and the
// reverse of each kind of scope. adjoint_sums.cpp: adjoints of loads, where broadcast reads of one value are summed before
// one reduction.
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "core/autodiff/autodiff.h"
#include "core/autodiff/reverse.h"
#include "core/autodiff/rules.h"
#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember {
namespace autodiff_detail {

// ---------------------------------------------------------------- analysis
void Reverse::analyze(const std::vector<Node*>& xs, Node* y) {
  std::vector<Node*> all = p.nodes();
  active = active_nodes(tr, all, xs);
  useful.insert(y);
  for (bool changed = true; changed;) {
    changed = false;
    auto mark = [&](Node* n) { if (useful.insert(n).second) changed = true; };
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      Node* n = *it;
      switch (n->op) {
        case Op::set: if (useful.count(n->operand(0))) mark(n), mark(n->operand(1)); break;
        case Op::store: case Op::atomic: if (useful.count(n->operand(0))) mark(n), mark(n->operand(1)); break;
        default:
          if (!useful.count(n) || n->is_scope()) break;
          for (Node* o : n->operands) mark(o);
      }
      // A var or memory is useful when a useful node reads it.
      if (n->op == Op::var || n->is_memory())
        for (Node* u : n->users)
          if (useful.count(u) && !(u->op == Op::set && u->operand(0) == n) &&
              !((u->op == Op::store || u->op == Op::atomic) && u->operand(0) == n))
            mark(n);
    }
  }
  for (Node* n : all)
    if (!n->is_scope() && active.count(n) && useful.count(n))
      for (Node* s = n->parent; s && s->op != Op::program; s = s->parent) live_scope.insert(s);
  for (Node* n : all)
    if (n->op == Op::else_ && live_scope.count(n) && n->prev) live_scope.insert(n->prev);
}

// ---------------------------------------------------------------- helpers
// An identity node reading var `v` here: its value is v's value at this point.
Node* Reverse::snapshot(Node* v) {
  Node* s = b.raw(Op::select, v->dtype, v->shape, {b.boolean(true), v, v});
  s->loc = b.loc;
  return s;
}
std::vector<Node*> Reverse::coords(const Shape& s) {
  std::vector<Node*> idx;
  for (int a = 0; a < static_cast<int>(s.size()); ++a) idx.push_back(b.index(a, s));
  return idx;
}
// Whole-memory copy into a new buffer (host level).
Node* Reverse::copy_memory(Node* m) {
  Node* c = b.buffer(m->dtype, m->shape, false);
  std::vector<Node*> idx = coords(m->shape);
  b.store(c, b.load(m, idx, m->shape, IndexMode::clamp), idx, m->shape, IndexMode::clamp);
  return c;
}

// ---------------------------------------------------------------- adjoint accumulation
// Inside a device scope every value is the running thread's: [] and the scope's shape agree.
bool Reverse::in_device() const {
  for (Node* s = b.scope(); s && s->op != Op::program; s = s->parent)
    if (device_scope(s)) return true;
  return false;
}
Node* Reverse::fit(Node* c, const Shape& shape) {
  if (same_shape(c->shape, shape)) return c;
  if (shape.empty() && in_device()) return c;
  if (shape.empty()) return tr.reduce(ReduceKind::sum, c, {}, false);
  if (c->shape.empty()) return tr.broadcast_to(c, shape);
  EMBER_INTERNAL_ASSERT(false, "adjoint of shape " << shape_str(c->shape) << " for a value of shape " << shape_str(shape));
}
void Reverse::contribute(Node* target, Node* c) {
  if (!c || !is_float(target) || !active.count(orig(target))) return;
  if (tr.is_detached(orig(target))) return;
  if (target->is_memory() && !valuelike(target)) {  // a memory read as a whole (scan operand)
    auto it = state.find(target);
    if (it == state.end()) return;
    std::vector<Node*> idx = coords(target->shape);
    b.atomic(AtomicKind::add, it->second, fit(c, target->shape), idx, target->shape, IndexMode::clamp);
    return;
  }
  auto r = route.find(target);
  if (r != route.end() && !r->second.var && r->second.buf) {
    add_to_buffer(r->second.buf, target, c);
    return;
  }
  if (r != route.end() && r->second.var) {
    Node* v = r->second.var;
    Node* val = v->shape.empty() || !c->shape.empty() ? c : tr.broadcast_to(c, v->shape);
    if (!same_shape(val->shape, v->shape)) val = fit(val, v->shape);
    b.set(v, b.binary(Op::add, v, val));
    return;
  }
  Node*& a = adj[target];
  c = fit(c, target->shape);
  a = a ? tr.binary(Op::add, a, c) : c;
}

// ---------------------------------------------------------------- reverse sweep
void Reverse::make_state_adjoints(const std::vector<Node*>& list) {
  for (Node* n : list) {
    if (n->dead || !live(n) || !is_float(n)) continue;
    if (n->op == Op::var && !state.count(n)) state[n] = new_var(zero(), n->shape);
    if (n->op == Op::buffer && !valuelike(n) && !state.count(n)) state[n] = tr.zeros(n->shape, DType::f32);
  }
}
void Reverse::reverse_list(const std::vector<Node*>& list) {
  make_state_adjoints(list);
  for (auto it = list.rbegin(); it != list.rend(); ++it) reverse_node(*it);
}

void Reverse::reverse_node(Node* n) {
  // Our own instrumentation (tapes, entry copies, counters) reads state without changing it:
  // its copies share the originals' adjoints.
  if (n->dead || instr.count(n) || has_flag(n->op, F_LEAF)) return;
  b.loc = n->loc;
  if (n->is_scope()) {
    if (skip.count(n) || !live(n)) return;
    reverse_scope(n);
    return;
  }
  switch (n->op) {
    case Op::set: {
      Node* v = n->operand(0);
      if (!state.count(v)) return;
      contribute(n->operand(1), read_state(v));
      b.set(state[v], zeros_like_shape(v->shape));
      return;
    }
    case Op::var:
      if (state.count(n)) contribute(n->operand(0), read_state(n));
      return;
    case Op::store: case Op::atomic: {
      Node* mem = n->operand(0);
      auto it = state.find(mem);
      if (it == state.end()) return;
      if (n->op == Op::atomic && static_cast<AtomicKind>(n->kind) != AtomicKind::add) {
        if (active.count(orig(n->operand(1))))
          EMBER_USER_ERROR(CompileError, n->loc, "em.grad through em.atomic_" << atomic_kind_name(static_cast<AtomicKind>(n->kind))
                                                     << " is not supported (only em.atomic_add is differentiated)");
        return;
      }
      std::vector<Node*> idx(n->operands.begin() + 2, n->operands.end());
      Node* g = b.load(it->second, idx, n->shape, n->mode);
      // Several elements of a store may write one target (y[P] = v with P repeating, or a
      // broadcast write): one value lands there, so the target's adjoint is split evenly
      // between its writers (exact when they write the same value; otherwise the store is a race).
      if (n->op == Op::store && !device_emission_scope() && !injective(idx, n->shape)) {
        Node* cnt = tr.zeros(mem->shape, DType::f32);
        b.atomic(AtomicKind::add, cnt, b.f32(1.0f), idx, n->shape, n->mode);
        g = tr.binary(Op::div, g, b.load(cnt, idx, n->shape, n->mode));
      }
      contribute(n->operand(1), g);
      if (n->op == Op::store) b.store(it->second, zeros_like_shape(n->shape), idx, n->shape, n->mode);
      return;
    }
    default: break;
  }
  if (!live(n)) return;
  flush(n);
  auto ai = adj.find(n);
  if (ai == adj.end()) return;
  Node* g = ai->second;
  adj.erase(ai);
  if (xset.count(n)) xadj[n] = g;  // an x's gradient; it still flows on to what x depends on
  if (snap_var.count(n)) {
    Node* v = snap_var[n];
    auto it = state.find(v);
    if (it != state.end()) b.set(it->second, b.binary(Op::add, it->second, fit(g, v->shape)));
    return;
  }
  if (has_flag(n->op, F_ELEMENTWISE) || n->op == Op::select) {
    // A masked adjoint (where(c, a, 0): what a where passed to one side) keeps its mask
    // outside the rule, so the side that was not taken contributes exactly 0 even where its
    // derivative is not finite (where(x > 0, sqrt(x), 0) at x < 0).
    Node* mask = nullptr;
    bool taken = true;
    auto zero_const = [](Node* z) { return z->op == Op::constant && z->bits == 0; };
    if (g->op == Op::select && !snap_var.count(g) && g->operand(0)->op != Op::constant) {
      if (zero_const(g->operand(2))) mask = g->operand(0), g = g->operand(1);
      else if (zero_const(g->operand(1))) mask = g->operand(0), g = g->operand(2), taken = false;
    }
    std::vector<Node*> cs = elementwise_vjp(tr, n, g);
    if (mask)
      for (Node*& c : cs)
        if (c) c = taken ? tr.select(mask, c, zero()) : tr.select(mask, zero(), c);
    for (int i = 0; i < n->num_operands() && i < static_cast<int>(cs.size()); ++i) {
      Node* c = cs[static_cast<size_t>(i)];
      // A scalar operand of a tensor node gets the sum over the node's elements; a contribution
      // that folded to a scalar (a uniform adjoint) counts once per element.
      if (c && c->shape.empty() && n->operand(i)->shape.empty() && !n->shape.empty()) c = spread(c, n->shape);
      contribute(n->operand(i), c);
    }
    return;
  }
  switch (n->op) {
    case Op::load: scatter_adjoint(n, g); return;
    case Op::reduce: reverse_reduce(n, g); return;
    case Op::scan: {
      // y = cumsum(x) along a: x_bar = reverse cumsum of y_bar.
      Node* gs = spread(fit(g, n->shape), n->shape);
      Node* r = tr.flip(tr.prefix_sum(tr.flip(gs, {n->axis}), n->axis), {n->axis});
      contribute(n->operand(0), r);
      return;
    }
    default:
      EMBER_INTERNAL_ASSERT(has_derivative_rule(n->op), "no derivative rule for " << op_name(n->op));
  }
}

// Whether the index tuple of an access of shape `shape` reaches each target element at most
// once: every index is a coordinate of its own axis of `shape` and every axis of extent other
// than 1 is one of them.
bool Reverse::injective(const std::vector<Node*>& idx, const Shape& shape) const {
  uint64_t seen = 0;
  for (Node* i : idx) {
    if (i->op == Op::constant) continue;
    if (i->op != Op::index || !same_shape(i->shape, shape) || i->axis >= 64 || (seen >> i->axis & 1)) return false;
    seen |= uint64_t{1} << i->axis;
  }
  for (size_t a = 0; a < shape.size(); ++a)
    if (!(a < 64 && (seen >> a & 1)) && const_dim(shape[a]) != 1) return false;
  return true;
}

// The adjoint of a reduction, broadcast back over the reduced axes.
void Reverse::reverse_reduce(Node* n, Node* g) {
  Node* x = n->operand(0);
  g = fit(g, n->shape);
  auto back = [&](Node* v) { return reduce_back(tr, n, v); };
  Node* gb = back(g);
  switch (static_cast<ReduceKind>(n->kind)) {
    case ReduceKind::sum: contribute(x, gb); return;
    case ReduceKind::prod: contribute(x, tr.binary(Op::mul, gb, prod_partial(tr, n))); return;
    case ReduceKind::max: case ReduceKind::min: {
      // Split evenly between the elements equal to the extreme (the subgradient JAX uses).
      Node* hit = tr.binary(Op::eq, x, back(n));
      Node* one = tr.select(hit, tr.constant(1.0, DType::f32), zero());
      std::vector<int> axes;
      for (int a = 0; a < x->rank(); ++a)
        if (n->axes >> a & 1) axes.push_back(a);
      Node* cnt = tr.reduce(ReduceKind::sum, one, axes, n->keepdims);
      contribute(x, tr.binary(Op::div, tr.binary(Op::mul, gb, one), back(cnt)));
      return;
    }
    default: return;
  }
}

}  // namespace autodiff_detail

using autodiff_detail::device_scope;
using autodiff_detail::is_float;
using autodiff_detail::Reverse;


std::vector<Node*> grad(Tracer& tr, Node* y, const std::vector<Node*>& xs, Node* dy) {
  Builder& b = tr.builder();
  const SourceLoc loc = tr.loc();
  Node* scope = b.scope();
  EMBER_INTERNAL_ASSERT(!b.before(), "em.grad must be traced at the end of its scope");
  for (Node* s = scope; s && s->op != Op::program; s = s->parent)
    if (s->op == Op::kernel && !s->group.empty())
      EMBER_USER_ERROR(CompileError, loc, "em.grad inside a kernel with workgroups is not supported");
  // Inside a kernel or per-element scope, x must belong to it (the outermost such scope).
  Node* dev_root = nullptr;
  for (Node* s = scope; s && s->op != Op::program; s = s->parent)
    if (device_scope(s)) dev_root = s;
  const bool in_device = dev_root != nullptr;
  Reverse R(tr);
  if (y->op == Op::var) y = R.snapshot(y);
  y = tr.value(y);
  for (Node* x : xs)
    if (in_device && !x->inside(dev_root))
      EMBER_USER_ERROR(CompileError, loc, "em.grad inside a kernel or per-element scope differentiates with respect "
                                          "to values of that scope; this x is defined outside it (call em.grad at "
                                          "host level to differentiate with respect to an argument)");
  R.analyze(xs, y);
  for (Node* x : xs) R.xset.insert(x);
  std::vector<Node*> region = R.prepare(scope->children());
  b.set_insert_end(scope);
  b.loc = loc;
  // Adjoint state for live vars and memories defined before the region (and memory xs).
  for (Node* n : R.p.nodes()) {
    if (n->dead || n->inside(scope) || !is_float(n)) continue;
    if ((n->op == Op::var || (n->is_memory() && !R.valuelike(n))) && R.live(n) && !R.state.count(n)) {
      if (n->is_memory() && in_device) continue;
      R.state[n] = n->op == Op::var ? R.new_var(R.zero(), n->shape) : tr.zeros(n->shape, DType::f32);
    }
  }
  for (Node* x : xs)
    if ((x->op == Op::var || (x->is_memory() && !R.valuelike(x))) && !R.state.count(x) && !in_device)
      R.state[x] = x->op == Op::var ? R.new_var(R.zero(), x->shape) : tr.zeros(x->shape, DType::f32);
  R.adj[y] = dy ? R.fit(tr.broadcast_to(tr.value(dy), y->shape), y->shape) : tr.constant(1.0, DType::f32);
  R.reverse_list(region);
  b.loc = loc;
  R.flush_all();
  std::vector<Node*> out;
  for (Node* x : xs) {
    auto st = R.state.find(x);
    if (st != R.state.end()) {
      out.push_back(x->op == Op::var ? R.snapshot(st->second) : tr.value(st->second));
      continue;
    }
    auto a = R.adj.find(x);
    auto xa = R.xadj.find(x);
    Node* g = xa != R.xadj.end() ? xa->second : a != R.adj.end() ? a->second : R.zero();
    // The result has x's shape (a uniform adjoint is spread over it).
    g = R.spread(g, x->shape);
    // A result independent of later state: an identity node, so a value is never a var.
    out.push_back(g->op == Op::var ? R.snapshot(g) : g);
  }
  return out;
}

}  // namespace ember

// Forward mode (em.jvp) on the traced IR: the tangent of every node that depends on x is
// computed right after the node, in place, in the same scope (core/IR.md "Derivatives"). A var
// gets a tangent var set alongside it, a memory a tangent buffer written alongside it, so loops,
// ifs, kernels, break/continue and in-place writes need no tape: the tangent code runs with the
// forward code it differentiates.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/autodiff/autodiff.h"
#include "core/autodiff/rules.h"
#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember {

namespace {


struct Forward {
  explicit Forward(Tracer& t) : tr(t), b(t.builder()), p(t.program()) {}
  Tracer& tr;
  Builder& b;
  Program& p;
  std::unordered_map<const Node*, Node*> tan;  // value -> tangent value; var -> tangent var; memory -> tangent memory
  std::unordered_set<const Node*> active;

  Node* zero() { return tr.constant(0.0, DType::f32); }
  // The tangent of operand `o` as read by a node here (a var's tangent var is read in place).
  Node* t(Node* o) {
    auto it = tan.find(o);
    return it == tan.end() ? nullptr : it->second;
  }
  void after(Node* n) {
    if (n->next) b.set_insert_before(n->next); else b.set_insert_end(n->parent);
    b.loc = n->loc;
  }
  Node* spread(Node* v, const Shape& s) { return b.spread(v, s); }

  Node* back(Node* n, Node* v) { return reduce_back(tr, n, v); }
  std::vector<int> reduced_axes(Node* n) {
    std::vector<int> axes;
    for (int a = 0; a < n->operand(0)->rank(); ++a)
      if (n->axes >> a & 1) axes.push_back(a);
    return axes;
  }

  void visit(Node* n) {
    if (n->is_scope() || n->dead) return;
    switch (n->op) {
      case Op::var: {
        if (!active.count(n)) return;
        after(n);
        Node* ti = t(n->operand(0));
        tan[n] = b.var(ti ? spread(ti, n->shape) : spread(zero(), n->shape), n->shape);
        return;
      }
      case Op::buffer: case Op::group_buffer: {
        if (!active.count(n)) return;
        after(n);
        if (n->op == Op::buffer) {
          tan[n] = b.buffer(DType::f32, n->shape, true);
        } else {  // a workgroup's memory: its tangent is one too (a direct child of the kernel)
          Node* g = b.raw(Op::group_buffer, DType::f32, n->shape, {});
          g->zero_init = true;
          tan[n] = g;
        }
        return;
      }
      case Op::set: {
        Node* tv = t(n->operand(0));
        if (!tv) return;
        after(n);
        Node* tval = t(n->operand(1));
        b.set(tv, spread(tval ? tval : zero(), tv->shape));
        return;
      }
      case Op::store: case Op::atomic: {
        Node* tm = t(n->operand(0));
        if (!tm || !tm->is_memory()) return;
        if (n->op == Op::atomic && static_cast<AtomicKind>(n->kind) != AtomicKind::add)
          EMBER_USER_ERROR(CompileError, n->loc, "em.jvp through em.atomic_" << atomic_kind_name(static_cast<AtomicKind>(n->kind))
                                                     << " is not supported (only em.atomic_add is differentiated)");
        after(n);
        Node* tval = t(n->operand(1));
        std::vector<Node*> idx(n->operands.begin() + 2, n->operands.end());
        if (n->op == Op::store) b.store(tm, tval ? tval : zero(), idx, n->shape, n->mode);
        else if (tval) b.atomic(AtomicKind::add, tm, tval, idx, n->shape, n->mode);
        return;
      }
      default: break;
    }
    if (!active.count(n) || tan.count(n)) return;
    Node* r = nullptr;
    after(n);
    if (has_flag(n->op, F_ELEMENTWISE) || n->op == Op::select) {
      for (int i = 0; i < n->num_operands(); ++i) {
        Node* ti = t(n->operand(i));
        if (!ti) continue;
        std::vector<Node*> cs = elementwise_vjp(tr, n, ti);  // linear in its adjoint argument
        Node* c = i < static_cast<int>(cs.size()) ? cs[static_cast<size_t>(i)] : nullptr;
        if (c) r = r ? tr.binary(Op::add, r, c) : c;
      }
    } else if (n->op == Op::load) {
      Node* ts = t(n->operand(0));
      if (ts) {
        std::vector<Node*> idx(n->operands.begin() + 1, n->operands.end());
        r = ts->shape.empty() && idx.empty() ? ts : b.load(ts, idx, n->shape, n->mode);
      }
    } else if (n->op == Op::reduce) {
      Node* x = n->operand(0);
      Node* tx = t(x);
      if (tx) {
        tx = spread(tx, x->shape);
        std::vector<int> axes = reduced_axes(n);
        switch (static_cast<ReduceKind>(n->kind)) {
          case ReduceKind::sum: r = tr.reduce(ReduceKind::sum, tx, axes, n->keepdims); break;
          case ReduceKind::prod:
            r = tr.reduce(ReduceKind::sum, tr.binary(Op::mul, tx, prod_partial(tr, n)), axes, n->keepdims);
            break;
          case ReduceKind::max: case ReduceKind::min: {
            Node* hit = tr.binary(Op::eq, x, back(n, n));
            Node* cnt = tr.reduce(ReduceKind::sum, tr.select(hit, tr.constant(1.0, DType::f32), zero()), axes, n->keepdims);
            r = tr.binary(Op::div, tr.reduce(ReduceKind::sum, tr.select(hit, tx, zero()), axes, n->keepdims), cnt);
            break;
          }
          default: break;
        }
      }
    } else if (n->op == Op::scan) {
      Node* tx = t(n->operand(0));
      if (tx) r = tr.prefix_sum(spread(tx, n->shape), n->axis);
    }
    if (r) tan[n] = r;
  }
};

}  // namespace

// J dx as the transpose of the vector-Jacobian product: g(u) = J^T u is linear in u, so
// d<g(u), dx>/du = J dx. Two reverse passes; used when a tangent is computed after its x.
Node* jvp_by_transpose(Tracer& tr, Node* y, const std::vector<Node*>& xs, const std::vector<Node*>& dxs) {
  Builder& b = tr.builder();
  y = tr.value(y);
  Node* zero = tr.constant(0.0, DType::f32);
  Node* u = b.raw(Op::select, DType::f32, y->shape, {b.boolean(true), zero, zero});  // a placeholder cotangent
  std::vector<Node*> g = grad(tr, y, xs, u);
  Node* s = nullptr;
  for (size_t k = 0; k < xs.size(); ++k) {
    Node* term = tr.reduce(ReduceKind::sum, tr.binary(Op::mul, g[k], tr.broadcast_to(tr.value(dxs[k]), g[k]->shape)), {}, false);
    s = s ? tr.binary(Op::add, s, term) : term;
  }
  return grad(tr, s, {u}, nullptr)[0];
}

Node* jvp(Tracer& tr, Node* y, const std::vector<Node*>& xs, const std::vector<Node*>& dxs) {
  Builder& b = tr.builder();
  const SourceLoc loc = tr.loc();
  Node* at_scope = b.scope();
  Forward F(tr);
  std::vector<Node*> all = tr.program().nodes();
  std::unordered_map<const Node*, size_t> pos;
  for (size_t k = 0; k < all.size(); ++k) pos[all[k]] = k;
  F.active = active_nodes(tr, all, xs);
  for (size_t k = 0; k < xs.size(); ++k) {
    Node* x = xs[k];
    Node* dx = dxs[k];
    const bool leaf = has_flag(dx->op, F_LEAF) && dx->op != Op::index && dx->op != Op::buffer;
    if (!leaf && !(pos.count(dx) && pos.count(x) && pos[dx] < pos[x] && dx->parent == x->parent))
      return jvp_by_transpose(tr, y, xs, dxs);  // the tangent is not available where x is
    if (x->op == Op::var) {
      F.after(x);
      F.tan[x] = b.var(F.spread(tr.value(dx), x->shape), x->shape);
    } else if (x->is_memory() && memory_is_written(x)) {
      // A written memory: its tangent is a buffer holding dx, made before anything runs.
      Node* first = tr.program().root()->first_child;
      while (first && has_flag(first->op, F_LEAF)) first = first->next;
      if (first) b.set_insert_before(first); else b.set_insert_end(tr.program().root());
      Node* tm = b.buffer(DType::f32, x->shape, false);
      std::vector<Node*> idx;
      for (int a = 0; a < x->rank(); ++a) idx.push_back(b.index(a, x->shape));
      b.store(tm, dx->is_memory() ? b.load(dx, idx, x->shape, IndexMode::clamp) : F.spread(dx, x->shape), idx, x->shape,
              IndexMode::clamp);
      F.tan[x] = tm;
    } else {
      F.tan[x] = dx;  // loads of x read dx at the same coordinates
    }
  }
  for (Node* n : all) {
    bool is_x = std::find(xs.begin(), xs.end(), n) != xs.end();
    if (!is_x) F.visit(n);
  }
  b.set_insert_end(at_scope);
  b.loc = loc;
  Node* ty = F.t(y);
  if (!ty) ty = F.zero();
  if (ty->op == Op::var) ty = b.raw(Op::select, DType::f32, ty->shape, {b.boolean(true), ty, ty});
  else if (ty->is_memory()) ty = tr.value(ty);
  return F.spread(ty, y->shape);
}

}  // namespace ember

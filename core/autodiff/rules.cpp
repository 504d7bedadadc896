// Derivative rules of the elementwise ops: for node n = op(a, b, c) and its adjoint g, the
// contribution g * dn/d(operand i). One table (a switch per op) for every differentiable
// elementwise op of core/ir/ops.def; the other differentiable ops (load, store, reduce, scan,
// atomic add, var/set) are structural and handled in reverse.cpp.
#include "core/autodiff/rules.h"

#include <cmath>

#include "core/trace/tracer.h"

namespace ember {

bool has_derivative_rule(Op op) {
  switch (op) {
    case Op::neg: case Op::abs: case Op::sign: case Op::floor: case Op::ceil: case Op::round: case Op::trunc:
    case Op::frac: case Op::exp: case Op::exp2: case Op::log: case Op::log2: case Op::sqrt: case Op::rsqrt:
    case Op::sin: case Op::cos: case Op::tan: case Op::asin: case Op::acos: case Op::atan: case Op::sinh:
    case Op::cosh: case Op::tanh: case Op::cast:
    case Op::add: case Op::sub: case Op::mul: case Op::div: case Op::mod: case Op::pow: case Op::atan2:
    case Op::min: case Op::max: case Op::select: case Op::fma:
    // Structural rules (reverse.cpp).
    case Op::load: case Op::store: case Op::atomic: case Op::reduce: case Op::scan: case Op::var: case Op::set:
    // Nodes that carry no value to differentiate: leaves and scopes.
    case Op::program: case Op::constant: case Op::input: case Op::scalar_arg: case Op::shape_arg: case Op::index:
    case Op::buffer: case Op::loop: case Op::if_: case Op::else_: case Op::break_: case Op::continue_:
    case Op::kernel: case Op::output: case Op::group_buffer: case Op::barrier: case Op::local_index:
    case Op::group_index: case Op::move_memory:
      return true;
    default:
      return false;
  }
}

std::unordered_set<const Node*> active_nodes(const Tracer& tr, const std::vector<Node*>& all,
                                             const std::vector<Node*>& xs) {
  auto is_float = [](const Node* n) { return n->dtype == DType::f32; };
  std::unordered_set<const Node*> active(xs.begin(), xs.end());
  for (bool changed = true; changed;) {
    changed = false;
    auto mark = [&](const Node* n) { if (active.insert(n).second) changed = true; };
    for (Node* n : all) {
      if (tr.is_detached(n)) continue;
      switch (n->op) {
        case Op::set: case Op::store: case Op::atomic:
          if (active.count(n->operand(1)) && is_float(n->operand(0))) mark(n->operand(0)), mark(n);
          // Overwriting an active var or memory with a constant still matters: it ends the
          // old value's gradient there (the scope holding it must be reversed).
          if (active.count(n->operand(0)) && n->op != Op::atomic) mark(n);
          break;
        case Op::var:
          if (active.count(n->operand(0)) && is_float(n)) mark(n);
          break;
        default: {
          if (!is_float(n) || has_flag(n->op, F_NONDIFF) || n->is_scope()) break;
          if (n->op == Op::reduce) {
            auto k = static_cast<ReduceKind>(n->kind);
            if (k != ReduceKind::sum && k != ReduceKind::prod && k != ReduceKind::max && k != ReduceKind::min) break;
          }
          for (Node* o : n->operands)
            if (active.count(o)) { mark(n); break; }
        }
      }
    }
  }
  return active;
}

Node* reduce_back(Tracer& tr, Node* n, Node* v) {
  Builder& b = tr.builder();
  Node* x = n->operand(0);
  if (v->shape.empty()) return tr.broadcast_to(v, x->shape);
  std::vector<Node*> idx;
  for (int a = 0; a < x->rank(); ++a) {
    bool red = n->axes >> a & 1;
    if (red && !n->keepdims) continue;
    idx.push_back(red ? b.i32(0) : b.index(a, x->shape));
  }
  return b.load(v, idx, x->shape, IndexMode::clamp);
}

Node* prod_partial(Tracer& tr, Node* n) {
  Node* x = n->operand(0);
  std::vector<int> axes;
  for (int a = 0; a < x->rank(); ++a)
    if (n->axes >> a & 1) axes.push_back(a);
  auto back = [&](Node* v) { return reduce_back(tr, n, v); };
  Node* zero = tr.constant(0.0, DType::f32);
  Node* one = tr.constant(1.0, DType::f32);
  Node* is0 = tr.binary(Op::eq, x, zero);
  Node* zeros = back(tr.reduce(ReduceKind::sum, tr.select(is0, one, zero), axes, n->keepdims));
  Node* nonzero_prod = back(tr.reduce(ReduceKind::prod, tr.select(is0, one, x), axes, n->keepdims));
  Node* none = tr.binary(Op::div, nonzero_prod, tr.select(is0, one, x));  // no zero: prod / x_i
  Node* only = tr.select(tr.binary(Op::land, is0, tr.binary(Op::eq, zeros, one)), nonzero_prod, zero);
  return tr.select(tr.binary(Op::eq, zeros, zero), none, only);
}

bool memory_is_written(const Node* m) {
  for (const Node* u : m->users)
    if ((u->op == Op::store || u->op == Op::atomic || u->op == Op::move_memory) && u->operand(0) == m) return true;
  return false;
}

std::vector<Node*> elementwise_vjp(Tracer& tr, Node* n, Node* g) {
  auto c = [&](double v) { return tr.constant(v, DType::f32); };
  auto mul = [&](Node* a, Node* b) { return tr.binary(Op::mul, a, b); };
  auto div = [&](Node* a, Node* b) { return tr.binary(Op::div, a, b); };
  auto add = [&](Node* a, Node* b) { return tr.binary(Op::add, a, b); };
  auto sub = [&](Node* a, Node* b) { return tr.binary(Op::sub, a, b); };
  auto neg = [&](Node* a) { return tr.unary(Op::neg, a); };
  auto un = [&](Op op, Node* a) { return tr.unary(op, a); };
  Node* a = n->num_operands() > 0 ? n->operand(0) : nullptr;
  Node* b = n->num_operands() > 1 ? n->operand(1) : nullptr;
  switch (n->op) {
    case Op::neg: return {neg(g)};
    case Op::abs: return {mul(g, un(Op::sign, a))};
    case Op::sign: case Op::floor: case Op::ceil: case Op::round: case Op::trunc: return {nullptr};  // zero a.e.
    case Op::frac: return {g};
    case Op::exp: return {mul(g, n)};
    case Op::exp2: return {mul(g, mul(n, c(std::log(2.0))))};
    case Op::log: return {div(g, a)};
    case Op::log2: return {div(g, mul(a, c(std::log(2.0))))};
    case Op::sqrt: return {div(mul(g, c(0.5)), n)};
    case Op::rsqrt: return {mul(g, mul(c(-0.5), mul(n, mul(n, n))))};
    case Op::sin: return {mul(g, un(Op::cos, a))};
    case Op::cos: return {neg(mul(g, un(Op::sin, a)))};
    case Op::tan: return {mul(g, add(c(1), mul(n, n)))};
    case Op::asin: return {mul(g, un(Op::rsqrt, sub(c(1), mul(a, a))))};
    case Op::acos: return {neg(mul(g, un(Op::rsqrt, sub(c(1), mul(a, a)))))};
    case Op::atan: return {div(g, add(c(1), mul(a, a)))};
    case Op::sinh: return {mul(g, un(Op::cosh, a))};
    case Op::cosh: return {mul(g, un(Op::sinh, a))};
    case Op::tanh: return {mul(g, sub(c(1), mul(n, n)))};
    case Op::cast: return {a->dtype == DType::f32 && n->dtype == DType::f32 ? g : nullptr};
    case Op::add: return {g, g};
    case Op::sub: return {g, neg(g)};
    case Op::mul: return {mul(g, b), mul(g, a)};
    case Op::div: return {div(g, b), neg(div(mul(g, n), b))};
    // a mod b = a - b * floor(a / b) (floor semantics on floats).
    case Op::mod: return {g, neg(mul(g, un(Op::floor, div(a, b))))};
    case Op::pow: {
      // d/da = b * a^(b-1); d/db = a^b * log(a), taken as 0 where a <= 0 (log undefined).
      Node* da = mul(g, mul(b, tr.binary(Op::pow, a, sub(b, c(1)))));
      Node* pos = tr.binary(Op::gt, a, c(0));
      Node* db = tr.select(pos, mul(g, mul(n, un(Op::log, tr.select(pos, a, c(1))))), c(0));
      return {da, db};
    }
    case Op::atan2: {  // atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)
      Node* r = add(mul(a, a), mul(b, b));
      return {div(mul(g, b), r), neg(div(mul(g, a), r))};
    }
    case Op::min: case Op::max: {
      // The operand that is the result gets g; at a tie each gets g / 2 (the symmetric
      // subgradient, as JAX's).
      Op wins = n->op == Op::min ? Op::lt : Op::gt;
      Node* half = mul(g, c(0.5));
      Node* tie = tr.binary(Op::eq, a, b);
      Node* ga = tr.select(tie, half, tr.select(tr.binary(wins, a, b), g, c(0)));
      Node* gb = tr.select(tie, half, tr.select(tr.binary(wins, a, b), c(0), g));
      return {ga, gb};
    }
    case Op::select: {
      Node* cnd = n->operand(0);
      return {nullptr, tr.select(cnd, g, c(0)), tr.select(cnd, c(0), g)};
    }
    case Op::fma: return {mul(g, b), mul(g, a), g};
    default: break;
  }
  EMBER_INTERNAL_ASSERT(false, "no elementwise derivative rule for " << op_name(n->op));
}

}  // namespace ember

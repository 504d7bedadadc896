#include "core/passes/simplify.h"

#include "core/ir/builder.h"
#include "core/ir/eval.h"
#include "core/ir/shape.h"

namespace ember {

namespace {

bool is_const(const Node* n, double v) {
  if (n->op != Op::constant) return false;
  return n->dtype == DType::f32 ? n->f() == static_cast<float>(v) : static_cast<double>(n->i()) == v;
}

// A load of value v at exactly v's own coordinates is v.
bool identity_load(const Node* n) {
  if (n->op != Op::load || n->flat || n->operand(0)->is_memory()) return false;
  const Node* v = n->operand(0);
  if (!same_shape(v->shape, n->shape) || v->rank() == 0) return false;
  for (int a = 0; a < v->rank(); ++a) {
    const Node* ix = n->operand(a + 1);
    if (ix->op != Op::index || ix->axis != a || !same_shape(ix->shape, n->shape)) return false;
  }
  return true;
}

// Returns the node that can replace n, or null.
Node* simplify_node(Builder& b, Node* n) {
  if (identity_load(n)) return n->operand(0);
  const OpInfo& info = op_info(n->op);
  if (!(info.flags & F_ELEMENTWISE)) return nullptr;
  bool all_const = true;
  for (Node* o : n->operands) all_const &= o->op == Op::constant;
  if (all_const && n->shape.empty()) {
    uint32_t w[3] = {0, 0, 0};
    for (int i = 0; i < n->num_operands(); ++i) w[i] = n->operand(i)->bits;
    DType in = n->op == Op::select ? n->operand(1)->dtype : n->operand(0)->dtype;
    return b.constant(n->dtype, eval_elementwise(n->op, n->dtype, in, w, n->num_operands()));
  }
  auto same = [&](Node* x) { return same_shape(x->shape, n->shape) ? x : nullptr; };
  switch (n->op) {
    case Op::add:
      if (is_const(n->operand(1), 0)) return same(n->operand(0));
      if (is_const(n->operand(0), 0)) return same(n->operand(1));
      break;
    case Op::sub:
      if (is_const(n->operand(1), 0)) return same(n->operand(0));
      break;
    case Op::mul:
      if (is_const(n->operand(1), 1)) return same(n->operand(0));
      if (is_const(n->operand(0), 1)) return same(n->operand(1));
      if (n->dtype != DType::f32 && n->shape.empty() && (is_const(n->operand(0), 0) || is_const(n->operand(1), 0)))
        return b.constant(n->dtype, 0);
      break;
    case Op::div:
      if (is_const(n->operand(1), 1)) return same(n->operand(0));
      break;
    case Op::select:
      if (n->operand(0)->op == Op::constant) return same(n->operand(0)->bits ? n->operand(1) : n->operand(2));
      if (n->operand(1) == n->operand(2)) return same(n->operand(1));
      break;
    case Op::neg:
      if (n->operand(0)->op == Op::neg) return same(n->operand(0)->operand(0));
      break;
    case Op::cast:
      if (n->operand(0)->dtype == n->dtype) return n->operand(0);
      break;
    default: break;
  }
  return nullptr;
}

}  // namespace

bool simplify(Program& p) {
  Builder b(p);
  bool changed = false;
  for (Node* n : p.nodes()) {
    if (n->dead) continue;
    b.set_insert_before(n);
    b.loc = n->loc;
    Node* r = simplify_node(b, n);
    if (!r || r == n) continue;
    // A var read here has the var's value at this point; the var node itself would read it
    // wherever it is used (later sets would change the result).
    if (has_flag(r->op, F_MUTABLE)) continue;
    p.replace_all_uses(n, r);
    p.erase(n);
    changed = true;
  }
  return changed;
}

}  // namespace ember

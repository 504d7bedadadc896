#include "core/analysis/reductions.h"

#include <functional>

namespace ember {

namespace {

void each_inside(const Node* scope, const std::function<void(const Node*)>& f) {
  for (const Node* c = scope->first_child; c; c = c->next) {
    f(c);
    each_inside(c, f);
  }
}

bool reorderable(Op op, DType t) {
  if (op == Op::add || op == Op::mul) return t == DType::f32 || t == DType::i32 || t == DType::u32;
  if (op == Op::min || op == Op::max) return t == DType::i32 || t == DType::u32;
  return false;
}

}  // namespace

std::vector<ReductionVar> reduction_vars(const Node* loop) {
  std::vector<ReductionVar> out;
  bool ok = loop->op == Op::loop;
  each_inside(loop, [&](const Node* n) {
    if (!ok) return;
    if (n->op == Op::store || n->op == Op::atomic) ok = false;
    if (n->op == Op::break_ || n->op == Op::continue_) {
      const Node* target = n->parent;
      while (target->op != Op::loop) target = target->parent;
      if (target == loop) ok = false;
    }
    if (n->op != Op::set) return;
    const Node* v = n->operand(0);
    if (v->inside(loop)) return;  // private to an iteration
    const Node* value = n->operand(1);
    // v = v - x accumulates like v = v + (-x).
    bool subtracts = value->op == Op::sub && value->operand(0) == v && value->operand(1) != v &&
                     (v->dtype == DType::f32 || v->dtype == DType::i32 || v->dtype == DType::u32);
    bool shape_ok = n->parent == loop && (reorderable(value->op, v->dtype) || subtracts) && value->parent == loop;
    bool reads_acc = shape_ok && (value->operand(0) == v) != (value->operand(1) == v);
    if (!reads_acc) { ok = false; return; }
    // The accumulator is used inside the loop by exactly this set and this op.
    for (const Node* u : v->users)
      if (u->inside(loop) && u != n && u != value) ok = false;
    for (const Node* u : value->users)
      if (u != n) ok = false;
    if (ok) out.push_back({v, subtracts ? Op::add : value->op});
  });
  if (!ok) out.clear();
  return out;
}

}  // namespace ember

#include "core/analysis/reductions.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

namespace ember {

namespace {

void each_inside(const Node* scope, const std::function<void(const Node*)>& f) {
  for (const Node* c = scope->first_child; c; c = c->next) {
    f(c);
    each_inside(c, f);
  }
}

bool reorderable(Op op, DType t, const ReductionOptions& o) {
  if (op == Op::add || op == Op::mul) return t == DType::f32 || t == DType::i32 || t == DType::u32;
  if (op == Op::min || op == Op::max) return t == DType::i32 || t == DType::u32 || (o.float_extrema && t == DType::f32);
  return false;
}

}  // namespace

std::vector<ReductionVar> reduction_vars(const Node* loop, const ReductionOptions& o) {
  std::vector<ReductionVar> out;
  std::unordered_set<const Node*> accumulation;  // the accumulating sets and their values
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
    // v = v - x accumulates like v = v + (-x), and v = fma(a, b, v) like v = v + a * b.
    bool subtracts = value->op == Op::sub && value->operand(0) == v && value->operand(1) != v &&
                     (v->dtype == DType::f32 || v->dtype == DType::i32 || v->dtype == DType::u32);
    bool fuses = value->op == Op::fma && value->operand(2) == v && value->operand(0) != v && value->operand(1) != v;
    bool shape_ok =
        (n->parent == loop || o.nested) && (reorderable(value->op, v->dtype, o) || subtracts || fuses) &&
        value->parent == n->parent;
    bool reads_acc = shape_ok && (fuses || (value->operand(0) == v) != (value->operand(1) == v));
    if (!reads_acc) { ok = false; return; }
    for (const Node* u : value->users)
      if (u != n) ok = false;
    const Op op = subtracts || fuses ? Op::add : value->op;
    // An accumulator may be accumulated several times per iteration (v += a; v += b), always
    // with the same op.
    auto same = std::find_if(out.begin(), out.end(), [&](const ReductionVar& r) { return r.var == v; });
    if (same != out.end() && same->op != op) ok = false;
    if (same == out.end()) out.push_back({v, op});
    accumulation.insert(n);
    accumulation.insert(value);
  });
  // Inside the loop each accumulator is used by its accumulations alone.
  for (const ReductionVar& r : out)
    for (const Node* u : r.var->users)
      if (u->inside(loop) && !accumulation.count(u)) ok = false;
  if (!ok) out.clear();
  return out;
}

}  // namespace ember

#include "core/passes/lower_algorithms.h"

#include "core/ir/builder.h"
#include "core/ir/eval.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// reduce(x) of shape S  =>  acc = var(identity); loop over each reduced axis { acc = acc op x[...] }
void lower_reduce(Program& p, Node* r) {
  Builder b(p);
  b.loc = r->loc;
  Node* x = r->operand(0);
  auto kind = static_cast<ReduceKind>(r->kind);
  const std::vector<Node*>& out = r->shape;
  b.set_insert_before(r);
  // A full reduction at host level runs as a one-thread kernel rather than on the host.
  bool host_level = !r->enclosing_kernel() && out.empty();
  for (Node* s = r->parent; s; s = s->parent)
    if (is_device_scope(s)) host_level = false;
  Node* result_buffer = nullptr;
  if (host_level) {
    result_buffer = b.buffer(r->dtype, {}, false);
    Node* k = b.kernel({});
    b.set_insert_end(k);
  }
  Node* acc = b.var(b.constant(r->dtype, reduce_identity(kind, r->dtype)), out);
  std::vector<Node*> idx(static_cast<size_t>(x->rank()), nullptr);
  int out_axis = 0;
  for (int a = 0; a < x->rank(); ++a) {
    bool reduced = r->axes & (1u << a);
    if (!reduced) {
      idx[static_cast<size_t>(a)] = b.index(out_axis++, out);
      continue;
    }
    if (r->keepdims) ++out_axis;
  }
  for (int a = 0; a < x->rank(); ++a) {
    if (!(r->axes & (1u << a))) continue;
    Node* l = b.loop(b.i32(0), x->shape[static_cast<size_t>(a)], b.i32(1), out);
    idx[static_cast<size_t>(a)] = l;
    b.set_insert_end(l);
  }
  Node* v = b.load(x, idx, out);
  if (v->dtype != r->dtype) v = b.cast(v, r->dtype);
  Node* next;
  switch (kind) {
    case ReduceKind::sum: next = b.binary(Op::add, acc, v); break;
    case ReduceKind::prod: next = b.binary(Op::mul, acc, v); break;
    case ReduceKind::max: next = b.binary(Op::max, acc, v); break;
    case ReduceKind::min: next = b.binary(Op::min, acc, v); break;
    case ReduceKind::any: next = b.binary(Op::lor, acc, v); break;
    case ReduceKind::all: next = b.binary(Op::land, acc, v); break;
  }
  b.set(acc, next);
  Node* result = acc;
  if (result_buffer) {
    // The one-thread kernel leaves its result in memory; the host reads it back.
    Node* k = acc->parent;
    b.set_insert_end(k);
    b.store(result_buffer, acc, {}, {});
    b.set_insert_before(r);
    result = b.load(result_buffer, {}, {});
  }
  p.replace_all_uses(r, result);
  p.erase(r);
}

}  // namespace

bool lower_algorithms(Program& p) {
  std::vector<Node*> todo;
  p.for_each([&](Node* n) {
    if (n->op == Op::reduce) todo.push_back(n);
  });
  for (Node* r : todo) lower_reduce(p, r);
  return !todo.empty();
}

}  // namespace ember

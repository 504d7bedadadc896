// Workgroup operations of the tracer: em.group_buffer, em.barrier, em.local_index and
// em.group_index (core/IR.md, "Workgroups"). User errors name the user's line and, for a
// barrier under control flow that differs between threads, the line of that scope.
#include <algorithm>

#include "core/analysis/uniformity.h"
#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember {

namespace {

constexpr int64_t kMaxGroupWords = 16384;  // 64 KiB of group memory per kernel, as on most GPUs

std::string scope_name(const Node* s) {
  switch (s->op) {
    case Op::loop: return "em.loop";
    case Op::if_: return "em.if_";
    case Op::else_: return "em.else_";
    default: return op_name(s->op);
  }
}

std::string opened_at(const Node* s) { return s->loc.known() ? " (opened at " + s->loc.str() + ")" : ""; }

}  // namespace

Node* Tracer::group_kernel(const char* what) {
  Node* k = nullptr;
  for (Node* s : scopes_)
    if (s->op == Op::kernel) k = s;
  if (!k)
    EMBER_USER_ERROR(CompileError, loc(), what << " outside an em.kernel: workgroup operations run inside a kernel "
                                                  "opened with a group, e.g. `with em.kernel(n, group=256) as i:`");
  if (k->group.empty())
    EMBER_USER_ERROR(CompileError, loc(), what << " in an em.kernel without a group: give the kernel of shape "
                                               << shape_str(k->shape) << " a workgroup shape, one int per axis, "
                                               << "e.g. em.kernel(n, group=256)" << opened_at(k));
  return k;
}

Node* Tracer::group_buffer(const std::vector<int64_t>& shape, DType t) {
  Node* k = group_kernel("em.group_buffer()");
  if (t == DType::none) EMBER_USER_ERROR(TypeError, loc(), "em.group_buffer needs a dtype (em.f32, em.i32, em.u32, em.bool)");
  if (shape.empty()) EMBER_USER_ERROR(ShapeError, loc(), "em.group_buffer needs at least one dimension");
  int64_t words = 1;
  std::vector<Node*> dims;
  for (int64_t d : shape) {
    if (d < 1) EMBER_USER_ERROR(ShapeError, loc(), "em.group_buffer: dimensions must be positive ints, got " << d);
    words *= std::min<int64_t>(d, kMaxGroupWords + 1);
    words = std::min<int64_t>(words, kMaxGroupWords + 1);
    dims.push_back(dim_const(d));
  }
  for (Node* c = k->first_child; c; c = c->next)
    if (c->op == Op::group_buffer) words += const_size(c->shape);
  if (words > kMaxGroupWords)
    EMBER_USER_ERROR(CompileError, loc(), "em.group_buffer: the group buffers of this kernel would take more than "
                                              << kMaxGroupWords << " words (64 KiB), the group memory of most GPUs");
  Node* n = prog_->create(Op::group_buffer, t, dims);
  n->loc = loc();
  n->zero_init = true;
  prog_->prepend(k, n);  // allocated once per group, before anything runs
  return n;
}

void Tracer::barrier() {
  group_kernel("em.barrier()");
  GroupUniformity u;
  const Node* s = divergent_scope(scopes_.back(), u);
  if (!s) {
    b_.raw(Op::barrier, DType::none, {}, {});
    return;
  }
  bool bounds_uniform = true;
  if (s->op == Op::loop)
    for (const Node* o : s->operands) bounds_uniform = bounds_uniform && u.uniform(o);
  if (s->op == Op::loop && bounds_uniform)
    EMBER_USER_ERROR(CompileError, loc(), "em.barrier() inside an em.loop that em.break_()/em.continue_() may leave "
                                          "early" << opened_at(s) << ": every thread of a workgroup must reach the same "
                                          "barriers");
  EMBER_USER_ERROR(CompileError, loc(), "em.barrier() inside an " << scope_name(s)
                                            << (s->op == Op::loop ? " whose bounds" : " whose condition")
                                            << " may differ between the threads of a workgroup" << opened_at(s)
                                            << ": every thread of a group must reach the same barriers; move the "
                                               "barrier out, or make it depend only on em.group_index(), scalars "
                                               "and counters of such loops");
}

std::vector<Node*> Tracer::local_index() {
  Node* k = group_kernel("em.local_index()");
  std::vector<Node*> out;
  for (int a = 0; a < k->rank(); ++a) out.push_back(b_.local_index(a, k->shape));
  return out;
}

std::vector<Node*> Tracer::group_index() {
  Node* k = group_kernel("em.group_index()");
  std::vector<Node*> out;
  for (int a = 0; a < k->rank(); ++a) out.push_back(b_.group_index(a, k->shape));
  return out;
}

void Tracer::check_group_access(Node* mem, const std::vector<IndexItem>& items) {
  Node* k = nullptr;
  for (Node* s : scopes_)
    if (s->op == Op::kernel) k = s;
  if (mem->parent != k)
    EMBER_USER_ERROR(CompileError, loc(), "a group buffer can only be used inside the kernel that made it"
                                              << (mem->loc.known() ? " (made at " + mem->loc.str() + ")" : ""));
  bool scalar = items.size() == static_cast<size_t>(mem->rank());
  for (const IndexItem& it : items) scalar = scalar && it.kind == IndexItem::tensor;
  if (!scalar)
    EMBER_USER_ERROR(ShapeError, loc(), "index a group buffer of shape " << shape_str(mem->shape)
                                                                         << " with one integer per axis, e.g. buf[i]; "
                                                                            "slices, None and ... are not supported");
}

void Tracer::check_jump(const char* what) {
  Node* target = nullptr;
  for (auto it = scopes_.rbegin(); it != scopes_.rend() && (*it)->op != Op::kernel && !target; ++it)
    if ((*it)->op == Op::loop) target = *it;
  if (target && holds_barrier(target))
    EMBER_USER_ERROR(CompileError, loc(), what << " in an em.loop that contains em.barrier()" << opened_at(target)
                                               << ": every thread of a workgroup must reach the same barriers, so "
                                                  "such a loop cannot be left early");
}

}  // namespace ember

// em.grad / em.jvp / x.detach() at trace time: argument checks with the user's line, then the
// transforms of core/autodiff.
#include "core/autodiff/autodiff.h"
#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember {

namespace {
std::string describe(const Node* n) {
  std::string s = std::string(dtype_name(n->dtype)) + shape_str(n->shape);
  if (!n->name.empty()) s = "'" + n->name + "' (" + s + ")";
  return s;
}
}  // namespace

std::vector<Node*> Tracer::grad(Node* y, const std::vector<Node*>& xs, Node* dy) {
  if (xs.empty()) EMBER_USER_ERROR(TypeError, loc(), "em.grad needs at least one x to differentiate with respect to");
  if (y->dtype != DType::f32) {
    std::string wrt;
    for (Node* x : xs) wrt += (wrt.empty() ? "" : ", ") + describe(x);
    EMBER_USER_ERROR(TypeError, loc(), "em.grad of a " << describe(y) << " value with respect to " << wrt
                                                       << ": only f32 values have gradients");
  }
  for (Node* x : xs)
    if (x->dtype != DType::f32)
      EMBER_USER_ERROR(TypeError, loc(), "em.grad of " << describe(y) << " with respect to a " << describe(x)
                                                       << " value: gradients exist only with respect to f32 values");
  if (dy && !dy->shape.empty() && !same_shape(broadcast_shapes(dy->shape, y->shape), y->shape))
    EMBER_USER_ERROR(ShapeError, loc(), "em.grad: dy of shape " << shape_str(dy->shape) << " does not broadcast to y's shape "
                                                                << shape_str(y->shape));
  if (dy && dy->dtype != DType::f32) dy = cast(dy, DType::f32);
  return ember::grad(*this, y, xs, dy);
}

Node* Tracer::jvp(Node* y, const std::vector<Node*>& xs, const std::vector<Node*>& dxs) {
  if (xs.size() != dxs.size())
    EMBER_USER_ERROR(TypeError, loc(), "em.jvp: " << xs.size() << " x values but " << dxs.size() << " tangents");
  if (y->dtype != DType::f32) {
    std::string wrt;
    for (Node* x : xs) wrt += (wrt.empty() ? "" : ", ") + describe(x);
    EMBER_USER_ERROR(TypeError, loc(), "em.jvp of a " << describe(y) << " value with respect to " << wrt
                                                      << ": only f32 values have derivatives");
  }
  std::vector<Node*> ts;
  for (size_t k = 0; k < xs.size(); ++k) {
    if (xs[k]->dtype != DType::f32)
      EMBER_USER_ERROR(TypeError, loc(), "em.jvp of " << describe(y) << " with respect to a " << describe(xs[k])
                                                      << " value: derivatives exist only with respect to f32 values");
    Node* t = dxs[k]->dtype == DType::f32 ? dxs[k] : cast(dxs[k], DType::f32);
    if (!t->shape.empty() && !same_shape(t->shape, xs[k]->shape))
      EMBER_USER_ERROR(ShapeError, loc(), "em.jvp: tangent " << k << " has shape " << shape_str(t->shape) << " but x has "
                                                             << shape_str(xs[k]->shape));
    ts.push_back(t);
  }
  return ember::jvp(*this, y, xs, ts);
}

Node* Tracer::detach(Node* x) {
  x = value(x);
  if (x->dtype != DType::f32) return x;
  Node* d = b_.raw(Op::select, x->dtype, x->shape, {b_.boolean(true), x, x});
  detached_.insert(d);
  return d;
}

}  // namespace ember

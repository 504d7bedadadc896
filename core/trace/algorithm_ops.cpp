// Algorithms of the tensor language that are not plain reductions: norm, prefix_sum (a `scan`
// node, lowered by lower_algorithms to a blocked parallel scan) and matmul/dot, which are a sum
// over the shared axis of a broadcast product: the product is a gather of each operand at the
// product's coordinates, so after lower_algorithms and fuse_loads it is recomputed inside the
// reduction loop (no [.., n, k, m] temporary) and the loop is a SIMD-annotatable reduction.
#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember {

namespace {

int checked_axis(const Tracer& t, int axis, int rank, const char* what) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    EMBER_USER_ERROR(ShapeError, t.loc(), what << ": axis " << axis << " is out of range for a tensor of rank " << rank);
  return a;
}

std::string dim_text(Node* d) {
  std::string s = shape_str(Shape{d});
  return s.substr(1, s.size() - 2);
}

}  // namespace

Node* Tracer::norm(Node* x, std::vector<int> axes, bool keepdims) {
  x = value(x);
  Node* xf = x->dtype == DType::f32 ? x : b_.cast(x, DType::f32);
  return unary(Op::sqrt, reduce(ReduceKind::sum, b_.binary(Op::mul, xf, xf), std::move(axes), keepdims));
}

Node* Tracer::prefix_sum(Node* x, int axis) {
  for (Node* s : scopes_)
    if (s->op == Op::kernel || !s->shape.empty())
      EMBER_USER_ERROR(Error, loc(), "em.prefix_sum must be called at host level, not inside a kernel or a "
                                     "per-element loop/if");
  // A memory is scanned as it is (the lowered kernels load it directly, in range).
  if (x->rank() == 0) EMBER_USER_ERROR(ShapeError, loc(), "em.prefix_sum of a scalar; it needs a tensor with an axis");
  int a = checked_axis(*this, axis, x->rank(), "em.prefix_sum");
  DType t = x->dtype;
  if (t == DType::boolean) {
    x = b_.cast(value(x), DType::i32);  // NumPy sums bools as integers
    t = DType::i32;
  }
  Node* n = b_.raw(Op::scan, t, x->shape, {x});
  n->kind = static_cast<uint8_t>(ReduceKind::sum);
  n->axis = a;
  return n;
}

// sum over `axis` of a[ia] * b[ib], both gathered at coordinates of `shape` (bool: any of a & b).
Node* Tracer::contract(Node* a, Node* b, const std::vector<Node*>& shape, const std::vector<Node*>& ia,
                       const std::vector<Node*>& ib, int axis) {
  DType t = promote(a->dtype, b->dtype);
  auto conv = [&](Node* x) { return x->dtype == t ? x : b_.cast(value(x), t); };  // memories stay memories
  Node* pa = gather_at(conv(a), ia, shape, IndexMode::clamp);
  Node* pb = gather_at(conv(b), ib, shape, IndexMode::clamp);
  if (t == DType::boolean) return reduce(ReduceKind::any, b_.binary(Op::land, pa, pb), {axis}, false);
  return reduce(ReduceKind::sum, b_.binary(Op::mul, pa, pb), {axis}, false);
}

Node* Tracer::matmul(Node* a, Node* b) {
  const int ra = a->rank(), rb = b->rank();
  if (ra == 0 || rb == 0)
    EMBER_USER_ERROR(ShapeError, loc(), "matmul: operands must have at least one dimension, got shapes "
                                            << shape_str(a->shape) << " and " << shape_str(b->shape)
                                            << " (use * to multiply by a scalar)");
  Node* ka = a->shape.back();
  Node* kb = rb == 1 ? b->shape[0] : b->shape[static_cast<size_t>(rb - 2)];
  if (!same_dim(ka, kb))
    EMBER_USER_ERROR(ShapeError, loc(), "matmul: shapes " << shape_str(a->shape) << " and " << shape_str(b->shape)
                                                          << " do not align: " << dim_text(ka) << " (last axis of a) vs "
                                                          << dim_text(kb) << (rb == 1 ? " (b)" : " (second-to-last axis of b)"));
  std::vector<Node*> abatch, bbatch;
  if (ra > 2) abatch.assign(a->shape.begin(), a->shape.end() - 2);
  if (rb > 2) bbatch.assign(b->shape.begin(), b->shape.end() - 2);
  std::vector<Node*> batch = broadcast_shapes(abatch, bbatch);
  // Product coordinates: batch..., [n], k, [m].
  std::vector<Node*> shape = batch;
  if (ra >= 2) shape.push_back(a->shape[static_cast<size_t>(ra - 2)]);
  const int kaxis = static_cast<int>(shape.size());
  shape.push_back(ka);
  if (rb >= 2) shape.push_back(b->shape.back());
  auto batch_index = [&](const std::vector<Node*>& own, std::vector<Node*>& idx) {
    size_t off = batch.size() - own.size();
    for (size_t d = 0; d < own.size(); ++d) {
      bool stretched = const_dim(own[d]) == 1 && const_dim(batch[d + off]) != 1;
      idx.push_back(stretched ? b_.i32(0) : b_.index(static_cast<int>(d + off), shape));
    }
  };
  std::vector<Node*> ia, ib;
  batch_index(abatch, ia);
  if (ra >= 2) ia.push_back(b_.index(kaxis - 1, shape));
  ia.push_back(b_.index(kaxis, shape));
  batch_index(bbatch, ib);
  ib.push_back(b_.index(kaxis, shape));
  if (rb >= 2) ib.push_back(b_.index(kaxis + 1, shape));
  return contract(a, b, shape, ia, ib, kaxis);
}

Node* Tracer::dot(Node* a, Node* b) {
  const int ra = a->rank(), rb = b->rank();
  if (ra == 0 || rb == 0) return binary(Op::mul, a, b);
  if (rb <= 2 && ra <= 2) return matmul(a, b);
  if (rb == 1) return matmul(a, b);  // sum over the last axis of a
  // np.dot(a, b)[i..., j..., m] = sum_k a[i..., k] * b[j..., k, m]
  Node* ka = a->shape.back();
  Node* kb = b->shape[static_cast<size_t>(rb - 2)];
  if (!same_dim(ka, kb))
    EMBER_USER_ERROR(ShapeError, loc(), "dot: shapes " << shape_str(a->shape) << " and " << shape_str(b->shape)
                                                       << " do not align: " << dim_text(ka) << " (last axis of a) vs "
                                                       << dim_text(kb) << " (second-to-last axis of b)");
  std::vector<Node*> shape(a->shape.begin(), a->shape.end() - 1);
  shape.insert(shape.end(), b->shape.begin(), b->shape.end() - 2);
  const int kaxis = static_cast<int>(shape.size());
  shape.push_back(ka);
  shape.push_back(b->shape.back());
  std::vector<Node*> ia, ib;
  for (int d = 0; d < ra - 1; ++d) ia.push_back(b_.index(d, shape));
  ia.push_back(b_.index(kaxis, shape));
  for (int d = 0; d < rb - 2; ++d) ib.push_back(b_.index(ra - 1 + d, shape));
  ib.push_back(b_.index(kaxis, shape));
  ib.push_back(b_.index(kaxis + 1, shape));
  return contract(a, b, shape, ia, ib, kaxis);
}

}  // namespace ember

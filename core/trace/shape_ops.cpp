// Shape operations as index remaps: every result is a gather of its source at coordinates
// computed from the result's (integer index math on `index` nodes and dimension nodes), made by
// gather_at. A gather of a memory or of another gather becomes one load with substituted index
// math; a gather of a computed value is a "load from a value" that fuse_loads recomputes inside
// the consumer. So reshape/transpose/flip/concat/... do not force a kernel boundary.
#include <algorithm>

#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember {

namespace {

int norm_axis(const Tracer& t, int axis, int rank, const char* what) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    EMBER_USER_ERROR(ShapeError, t.loc(), what << ": axis " << axis << " is out of range for a tensor of rank " << rank);
  return a;
}

// The factors of a dimension: a product of dims (from an earlier reshape, or N * 3 written by
// the user) is split so that equal symbolic factors cancel.
void factors(Node* d, std::vector<Node*>& out) {
  if (d->op == Op::mul && d->shape.empty() && d->dtype == DType::i32) {
    factors(d->operand(0), out);
    factors(d->operand(1), out);
    return;
  }
  out.push_back(d);
}

}  // namespace

// Dims are host values: when tracing inside a device scope (a kernel, or a loop/if of non-empty
// shape), their arithmetic is emitted before the outermost one.
Node* Tracer::dim_math(Op op, Node* a, Node* c) {
  if (a->op == Op::constant && c->op == Op::constant) return b_.binary(op, a, c);  // folds
  Node* dev = nullptr;
  for (Node* s = b_.scope(); s && s->op != Op::program; s = s->parent)
    if (s->op == Op::kernel || !s->shape.empty()) dev = s;
  if (!dev) return b_.binary(op, a, c);
  if (dev->op == Op::else_ && dev->prev) dev = dev->prev;  // an else must follow its if
  Node* scope = b_.scope();
  Node* before = b_.before();
  b_.set_insert_before(dev);
  Node* r = b_.binary(op, a, c);
  if (before) b_.set_insert_before(before); else b_.set_insert_end(scope);
  return r;
}

Node* Tracer::reshape(Node* x, const std::vector<Node*>& shape_in) {
  const std::vector<Node*> src = x->shape;
  int infer = -1;
  for (size_t k = 0; k < shape_in.size(); ++k) {
    Node* d = shape_in[k];
    if (!d) {
      if (infer >= 0) EMBER_USER_ERROR(ShapeError, loc(), "reshape: only one dimension can be -1 (inferred)");
      infer = static_cast<int>(k);
      continue;
    }
    if (!d->shape.empty() || d->dtype != DType::i32)
      EMBER_USER_ERROR(TypeError, loc(), "reshape: a dimension must be a scalar i32 value");
    if (d->op == Op::constant && d->i() < 0)
      EMBER_USER_ERROR(ShapeError, loc(), "reshape: dimension " << d->i() << " is negative (only -1, inferred, is allowed)");
  }
  auto target_str = [&] {
    std::string s = "[";
    for (size_t k = 0; k < shape_in.size(); ++k) {
      if (k) s += ", ";
      s += shape_in[k] ? shape_str(Shape{shape_in[k]}).substr(1, shape_str(Shape{shape_in[k]}).size() - 2) : "-1";
    }
    return s + "]";
  };
  // Cancel equal symbolic factors; the rest must be constant (and agree) or be inferred.
  std::vector<Node*> sf, tf;
  for (Node* d : src) factors(d, sf);
  for (Node* d : shape_in)
    if (d) factors(d, tf);
  int64_t cs = 1, ct = 1;
  std::vector<Node*> s_sym, t_sym;
  for (Node* d : sf) {
    if (const_dim(d) >= 0) cs *= const_dim(d); else s_sym.push_back(d);
  }
  for (Node* d : tf) {
    if (const_dim(d) >= 0) { ct *= const_dim(d); continue; }
    auto it = std::find_if(s_sym.begin(), s_sym.end(), [&](Node* s) { return same_dim(s, d); });
    if (it != s_sym.end()) s_sym.erase(it); else t_sym.push_back(d);
  }
  std::vector<Node*> shape = shape_in;
  if (infer >= 0) {
    if (!t_sym.empty())
      EMBER_USER_ERROR(ShapeError, loc(), "reshape: cannot infer the -1 dimension of " << target_str() << " from a tensor of shape "
                                              << shape_str(src) << " (its symbolic dimensions do not match)");
    if (ct == 0 || cs % ct != 0)
      EMBER_USER_ERROR(ShapeError, loc(), "cannot reshape a tensor of shape " << shape_str(src) << " into shape " << target_str());
    Node* d = dim_const(cs / ct);
    for (Node* s : s_sym) d = dim_math(Op::mul, d, s);
    shape[static_cast<size_t>(infer)] = d;
  } else if (!s_sym.empty() || !t_sym.empty()) {
    EMBER_USER_ERROR(ShapeError, loc(), "reshape: cannot tell at trace time that shapes " << shape_str(src) << " and "
                                            << target_str() << " have the same size");
  } else if (cs != ct) {
    EMBER_USER_ERROR(ShapeError, loc(), "cannot reshape a tensor of shape " << shape_str(src) << " (" << cs
                                            << " elements) into shape " << target_str() << " (" << ct << " elements)");
  }
  if (same_shape(src, shape)) return x;
  if (src.empty()) return x->is_memory() ? b_.load(x, {}, shape) : b_.spread(x, shape);

  // Source coordinates. Axes of size 1 are dropped on both sides; the rest is split into groups
  // of consecutive axes with equal sizes (a dim kept as is, or constant runs of equal product),
  // each a row-major flat index over its result axes, then div/mod by its source dims.
  std::vector<Node*> idx(src.size(), nullptr);
  std::vector<size_t> sa, ta;
  for (size_t a = 0; a < src.size(); ++a) {
    if (const_dim(src[a]) == 1) idx[a] = b_.i32(0); else sa.push_back(a);
  }
  for (size_t a = 0; a < shape.size(); ++a)
    if (const_dim(shape[a]) != 1) ta.push_back(a);
  bool zero = cs == 0;
  size_t i = 0, j = 0;
  while (i < sa.size() || j < ta.size()) {
    size_t i2 = sa.size(), j2 = ta.size();  // default: the rest is one group
    if (!zero && i < sa.size() && j < ta.size()) {
      if (same_dim(src[sa[i]], shape[ta[j]])) {
        i2 = i + 1;
        j2 = j + 1;
      } else {
        int64_t ps = 1, pt = 1;
        size_t a = i, c = j;
        bool ok = true;
        do {
          if (ps <= pt) {
            if (a == sa.size() || const_dim(src[sa[a]]) < 0) { ok = false; break; }
            ps *= const_dim(src[sa[a++]]);
          } else {
            if (c == ta.size() || const_dim(shape[ta[c]]) < 0) { ok = false; break; }
            pt *= const_dim(shape[ta[c++]]);
          }
        } while (ps != pt);
        if (ok) { i2 = a; j2 = c; }
      }
    }
    Node* flat = nullptr;
    for (size_t k = j; k < j2; ++k) {
      Node* ix = b_.index(static_cast<int>(ta[k]), shape);
      flat = flat ? b_.binary(Op::add, b_.binary(Op::mul, flat, shape[ta[k]]), ix) : ix;
    }
    if (!flat) flat = b_.i32(0);
    for (size_t k = i2; k-- > i;) {
      Node* d = src[sa[k]];
      if (k == i) { idx[sa[k]] = flat; break; }
      idx[sa[k]] = b_.binary(Op::mod, flat, d);
      flat = b_.binary(Op::div, flat, d);
    }
    i = i2;
    j = j2;
  }
  return gather_at(x, idx, shape, IndexMode::clamp);
}

Node* Tracer::transpose(Node* x, std::vector<int> axes) {
  int r = x->rank();
  if (axes.empty())
    for (int a = r - 1; a >= 0; --a) axes.push_back(a);
  if (static_cast<int>(axes.size()) != r)
    EMBER_USER_ERROR(ShapeError, loc(), "transpose: " << axes.size() << " axes for a tensor of rank " << r);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (int& a : axes) {
    a = norm_axis(*this, a, r, "transpose");
    if (seen[static_cast<size_t>(a)]) EMBER_USER_ERROR(ShapeError, loc(), "transpose: axis " << a << " repeated");
    seen[static_cast<size_t>(a)] = true;
  }
  bool identity = true;
  for (int k = 0; k < r; ++k) identity &= axes[static_cast<size_t>(k)] == k;
  if (identity) return x;
  std::vector<Node*> shape, idx(static_cast<size_t>(r));
  for (int a : axes) shape.push_back(x->shape[static_cast<size_t>(a)]);
  for (int k = 0; k < r; ++k) idx[static_cast<size_t>(axes[static_cast<size_t>(k)])] = b_.index(k, shape);
  return gather_at(x, idx, shape, IndexMode::clamp);
}

Node* Tracer::squeeze(Node* x, std::vector<int> axes) {
  int r = x->rank();
  std::vector<bool> drop(static_cast<size_t>(r), false);
  if (axes.empty()) {
    for (int a = 0; a < r; ++a) drop[static_cast<size_t>(a)] = const_dim(x->shape[static_cast<size_t>(a)]) == 1;
  } else {
    for (int a : axes) {
      int aa = norm_axis(*this, a, r, "squeeze");
      Node* d = x->shape[static_cast<size_t>(aa)];
      if (const_dim(d) != 1)
        EMBER_USER_ERROR(ShapeError, loc(), "cannot squeeze axis " << a << " of a tensor of shape " << shape_str(x->shape)
                                                << ": its size is not 1");
      drop[static_cast<size_t>(aa)] = true;
    }
  }
  std::vector<Node*> shape;
  for (int a = 0; a < r; ++a)
    if (!drop[static_cast<size_t>(a)]) shape.push_back(x->shape[static_cast<size_t>(a)]);
  if (static_cast<int>(shape.size()) == r) return x;
  std::vector<Node*> idx;
  int k = 0;
  for (int a = 0; a < r; ++a) idx.push_back(drop[static_cast<size_t>(a)] ? b_.i32(0) : b_.index(k++, shape));
  return gather_at(x, idx, shape, IndexMode::clamp);
}

Node* Tracer::unsqueeze(Node* x, int axis) {
  int r = x->rank();
  int a = norm_axis(*this, axis, r + 1, "unsqueeze");
  std::vector<Node*> shape = x->shape;
  shape.insert(shape.begin() + a, b_.i32(1));
  if (r == 0) return x->is_memory() ? b_.load(x, {}, shape) : b_.spread(x, shape);
  std::vector<Node*> idx;
  for (int k = 0; k < r; ++k) idx.push_back(b_.index(k < a ? k : k + 1, shape));
  return gather_at(x, idx, shape, IndexMode::clamp);
}

Node* Tracer::flip(Node* x, std::vector<int> axes) {
  int r = x->rank();
  if (axes.empty())
    for (int a = 0; a < r; ++a) axes.push_back(a);
  std::vector<bool> rev(static_cast<size_t>(r), false);
  for (int a : axes) {
    int aa = norm_axis(*this, a, r, "flip");
    if (rev[static_cast<size_t>(aa)]) EMBER_USER_ERROR(ShapeError, loc(), "flip: axis " << a << " repeated");
    rev[static_cast<size_t>(aa)] = true;
  }
  std::vector<Node*> idx;
  bool any = false;
  for (int a = 0; a < r; ++a) {
    Node* d = x->shape[static_cast<size_t>(a)];
    Node* i = b_.index(a, x->shape);
    if (rev[static_cast<size_t>(a)] && const_dim(d) != 1) {
      i = b_.binary(Op::sub, dim_math(Op::sub, d, b_.i32(1)), i);
      any = true;
    }
    idx.push_back(i);
  }
  if (!any) return x;
  return gather_at(x, idx, x->shape, IndexMode::clamp);
}

Node* Tracer::concat(const std::vector<Node*>& xs_in, int axis) {
  if (xs_in.empty()) EMBER_USER_ERROR(ShapeError, loc(), "concat needs at least one tensor");
  int r = xs_in[0]->rank();
  if (r == 0) EMBER_USER_ERROR(ShapeError, loc(), "concat: a scalar (0-d value) cannot be concatenated");
  int ax = norm_axis(*this, axis, r, "concat");
  DType t = xs_in[0]->dtype;
  for (Node* x : xs_in) {
    if (x->rank() != r)
      EMBER_USER_ERROR(ShapeError, loc(), "concat: all tensors need the same rank, got " << shape_str(xs_in[0]->shape)
                                              << " and " << shape_str(x->shape));
    for (int a = 0; a < r; ++a)
      if (a != ax && !same_dim(x->shape[static_cast<size_t>(a)], xs_in[0]->shape[static_cast<size_t>(a)]))
        EMBER_USER_ERROR(ShapeError, loc(), "concat along axis " << ax << ": shapes " << shape_str(xs_in[0]->shape) << " and "
                                                << shape_str(x->shape) << " differ in axis " << a);
    t = promote(t, x->dtype);
  }
  // Inputs of fixed size 0 along the axis contribute nothing.
  std::vector<Node*> xs;
  for (Node* x : xs_in)
    if (const_dim(x->shape[static_cast<size_t>(ax)]) != 0) xs.push_back(x->dtype == t ? x : to_dtype(x, t));
  if (xs.empty()) xs.push_back(xs_in[0]->dtype == t ? xs_in[0] : to_dtype(xs_in[0], t));
  if (xs.size() == 1) return xs[0];

  std::vector<Node*> shape = xs[0]->shape;
  std::vector<Node*> offsets;  // where each input starts along the axis
  Node* total = b_.i32(0);
  for (Node* x : xs) {
    offsets.push_back(total);
    total = dim_math(Op::add, total, x->shape[static_cast<size_t>(ax)]);
  }
  shape[static_cast<size_t>(ax)] = total;
  Node* c = b_.index(ax, shape);
  std::vector<Node*> parts;
  for (size_t k = 0; k < xs.size(); ++k) {
    Node* d = xs[k]->shape[static_cast<size_t>(ax)];
    // The coordinate inside input k, clamped into it so that every gather stays in range.
    Node* ck = b_.binary(Op::sub, c, offsets[k]);
    if (k > 0) ck = b_.binary(Op::max, ck, b_.i32(0));
    if (k + 1 < xs.size()) ck = b_.binary(Op::min, ck, dim_math(Op::sub, d, b_.i32(1)));
    std::vector<Node*> idx;
    for (int a = 0; a < r; ++a) idx.push_back(a == ax ? ck : b_.index(a, shape));
    parts.push_back(gather_at(xs[k], idx, shape, IndexMode::clamp));
  }
  Node* out = parts.back();
  for (size_t k = parts.size() - 1; k-- > 0;) out = b_.select(b_.binary(Op::lt, c, offsets[k + 1]), parts[k], out);
  return out;
}

Node* Tracer::stack(const std::vector<Node*>& xs, int axis) {
  if (xs.empty()) EMBER_USER_ERROR(ShapeError, loc(), "stack needs at least one tensor");
  for (Node* x : xs)
    if (!same_shape(x->shape, xs[0]->shape))
      EMBER_USER_ERROR(ShapeError, loc(), "stack: all tensors need the same shape, got " << shape_str(xs[0]->shape)
                                              << " and " << shape_str(x->shape));
  int a = norm_axis(*this, axis, xs[0]->rank() + 1, "stack");
  std::vector<Node*> parts;
  for (Node* x : xs) parts.push_back(unsqueeze(x, a));
  return concat(parts, a);
}

Node* Tracer::repeat(Node* x, int64_t repeats, std::optional<int> axis) {
  if (repeats < 0) EMBER_USER_ERROR(ShapeError, loc(), "repeat: the count " << repeats << " is negative");
  if (!axis) {
    if (x->rank() != 1) x = reshape(x, {nullptr});
    axis = 0;
  }
  int r = x->rank();
  int ax = norm_axis(*this, *axis, r, "repeat");
  if (repeats == 1) return x;
  std::vector<Node*> shape = x->shape;
  Node* n = dim_const(repeats);
  shape[static_cast<size_t>(ax)] = dim_math(Op::mul, shape[static_cast<size_t>(ax)], n);
  std::vector<Node*> idx;
  for (int a = 0; a < r; ++a) {
    Node* i = b_.index(a, shape);
    idx.push_back(a == ax ? b_.binary(Op::div, i, n) : i);
  }
  return gather_at(x, idx, shape, IndexMode::clamp);
}

}  // namespace ember

#include "core/trace/tracer.h"

#include <algorithm>

#include "core/analysis/thread_axes.h"
#include "core/ir/shape.h"

namespace ember {

namespace {
// Ops whose result is float even for integer inputs (their integer inputs convert to f32).
bool float_op(Op op) { return op_info(op).rule == DTypeRule::Float; }
}  // namespace

Tracer::Tracer(const std::string& name) : prog_(std::make_unique<Program>()), b_(*prog_) { prog_->name = name; }

ShapeView Tracer::scope_shape() const { return scopes_.empty() ? ShapeView{} : ShapeView(scopes_.back()->shape); }

Node* Tracer::dim_const(int64_t v) {
  if (v < 0 || v > INT32_MAX) EMBER_USER_ERROR(ShapeError, loc(), "dimension " << v << " is out of range");
  return b_.i32(static_cast<int32_t>(v));
}

Node* Tracer::input(DType t, const std::vector<DimSpec>& dims, const std::string& name) {
  std::vector<Node*> shape;
  int free_count = 0;
  for (const DimSpec& d : dims) {
    switch (d.kind) {
      case DimSpec::fixed: shape.push_back(dim_const(d.size)); break;
      case DimSpec::symbolic: shape.push_back(b_.shape_arg(d.name)); break;
      case DimSpec::free:
        shape.push_back(b_.shape_arg(name + ".shape[" + std::to_string(free_count) + "]"));
        break;
    }
    ++free_count;
  }
  return b_.input(t, shape, num_args_++, name);
}

Node* Tracer::scalar(DType t, const std::string& name) { return b_.scalar_arg(t, num_args_++, name); }

void Tracer::output(Node* value) {
  if (!scopes_.empty()) EMBER_USER_ERROR(Error, loc(), "return inside an open scope (loop/if/kernel)");
  // Results become NumPy arrays, which have at most 32 dimensions (values inside may have more).
  constexpr size_t kMaxResultRank = 32;
  if (value->shape.size() > kMaxResultRank)
    EMBER_USER_ERROR(ShapeError, loc(), "return value " << num_outputs_ << " has " << value->shape.size()
                                                        << " dimensions; a result has at most " << kMaxResultRank
                                                        << " (NumPy's limit)");
  // A buffer made by the program is returned as it is; an argument is copied so the result
  // never aliases the caller's input.
  b_.output(value->op == Op::buffer ? value : this->value(value), num_outputs_++);
}

Node* Tracer::constant(double v, DType t) {
  switch (t) {
    case DType::f32: return b_.f32(static_cast<float>(v));
    case DType::i32: return b_.i32(static_cast<int32_t>(v));
    case DType::u32: return b_.u32(static_cast<uint32_t>(v));
    case DType::boolean: return b_.boolean(v != 0);
    default: break;
  }
  EMBER_USER_ERROR(TypeError, loc(), "cannot make a constant of dtype " << dtype_name(t));
}

Node* Tracer::to_dtype(Node* v, DType t) { return b_.cast(value(v), t); }

Node* Tracer::value(Node* x) {
  if (!x->is_memory()) return x;
  if (x->op == Op::group_buffer)
    EMBER_USER_ERROR(TypeError, loc(), "a group buffer cannot be used as a whole value; read or write one element "
                                       "at a time (buf[i], buf[i] = v)");
  std::vector<Node*> idx;
  for (int a = 0; a < x->rank(); ++a) idx.push_back(b_.index(a, x->shape));
  return b_.load(x, idx, x->shape, IndexMode::clamp);
}

std::vector<Node*> Tracer::broadcast_shapes(const std::vector<Node*>& a, const std::vector<Node*>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<Node*> out(n);
  for (size_t k = 0; k < n; ++k) {
    Node* da = k < n - a.size() ? nullptr : a[k - (n - a.size())];
    Node* db = k < n - b.size() ? nullptr : b[k - (n - b.size())];
    if (!da) { out[k] = db; continue; }
    if (!db) { out[k] = da; continue; }
    if (same_dim(da, db) || const_dim(db) == 1) { out[k] = da; continue; }
    if (const_dim(da) == 1) { out[k] = db; continue; }
    EMBER_USER_ERROR(ShapeError, loc(), "cannot broadcast shapes " << shape_str(a) << " and " << shape_str(b)
                                            << ": dimension " << k << " is " << shape_str(Shape{da}).substr(1, shape_str(Shape{da}).size() - 2)
                                            << " vs " << shape_str(Shape{db}).substr(1, shape_str(Shape{db}).size() - 2));
  }
  return out;
}

// Rewrites expression `e` (of shape `from`) as if evaluated at coordinates `idx` of `shape`:
// index(a) becomes idx[a]. Only cheap index math and loads (of memory, or of a value: a gather
// of a gather is one gather) are rewritten; anything else sets ok = false so the caller gathers
// from the value instead.
Node* Tracer::substitute(Node* e, const std::vector<Node*>& from, const std::vector<Node*>& idx,
                         const std::vector<Node*>& shape, bool& ok) {
  if (!ok) return e;
  if (e->shape.empty() && e->op != Op::load) return e;  // uniform values need no rewriting
  if (!e->shape.empty() && !same_shape(e->shape, from)) { ok = false; return e; }
  switch (e->op) {
    case Op::index: return idx[static_cast<size_t>(e->axis)];
    case Op::load: {
      // A load of memory written since (A[:] = ... after y = A[i]) has the old contents as its
      // value; reading the memory again elsewhere would see the new ones.
      for (const Node* u : e->operand(0)->users)
        if ((u->op == Op::store || u->op == Op::atomic || u->op == Op::move_memory) && u->operand(0) == e->operand(0) &&
            u->id > e->id) {
          ok = false;
          return e;
        }
      std::vector<Node*> ni;
      for (int i = 1; i < e->num_operands(); ++i) ni.push_back(substitute(e->operand(i), from, idx, shape, ok));
      if (!ok) return e;
      return b_.load(e->operand(0), ni, shape, e->mode);
    }
    case Op::add: case Op::sub: case Op::mul: case Op::div: case Op::mod: case Op::min: case Op::max:
      if (e->dtype == DType::f32) break;
      {
        Node* a = substitute(e->operand(0), from, idx, shape, ok);
        Node* c = substitute(e->operand(1), from, idx, shape, ok);
        if (!ok) return e;
        return b_.binary(e->op, a, c);
      }
    case Op::cast:
      if (e->dtype == DType::f32 || e->operand(0)->dtype == DType::f32) break;
      {
        Node* a = substitute(e->operand(0), from, idx, shape, ok);
        return ok ? b_.cast(a, e->dtype) : e;
      }
    default: break;
  }
  ok = false;
  return e;
}

Node* Tracer::gather_at(Node* x, const std::vector<Node*>& idx, const std::vector<Node*>& shape, IndexMode m) {
  if (x->is_memory()) return b_.load(x, idx, shape, m);
  // A uniform value spread over `shape` (s[None], or s + i folded to s where i is the
  // coordinate of a size-1 axis): an elementwise node of that shape.
  auto spread = [&](Node* v) { return b_.spread(v, shape); };
  if (x->shape.empty()) return spread(x);
  // A gather of a gather is one gather only where the outer indices need no clamping: the
  // inner expression is rewritten at the raw indices (a clamped outer index would be lost).
  bool in_range = m == IndexMode::clamp && idx.size() == x->shape.size();
  for (size_t a = 0; in_range && a < idx.size(); ++a) in_range = index_in_range(idx[a], x->shape[a], nullptr);
  if (in_range) {
    bool ok = true;
    Node* r = substitute(x, x->shape, idx, shape, ok);
    if (ok) return spread(r);
  }
  return b_.load(x, idx, shape, m);  // gather from a computed value; fuse_loads decides later
}

Node* Tracer::broadcast_to(Node* x, const std::vector<Node*>& shape) {
  if (x->is_memory() && !same_shape(x->shape, shape)) return gather_at(x, broadcast_index(x, shape), shape, IndexMode::clamp);
  x = value(x);
  if (x->shape.empty() || same_shape(x->shape, shape)) return x;
  return gather_at(x, broadcast_index(x, shape), shape, IndexMode::clamp);
}

Node* Tracer::spread(Node* x, const std::vector<Node*>& shape) {
  x = value(x);
  if (!x->shape.empty() || shape.empty()) return broadcast_to(x, shape);
  if (!scope_shape().empty() && !same_shape(shape, scope_shape()))
    EMBER_USER_ERROR(ShapeError, loc(), "a value of shape " << shape_str(shape) << " inside a scope of shape "
                                                            << shape_str(scope_shape()));
  return b_.spread(x, shape);
}

std::vector<Node*> Tracer::broadcast_index(Node* x, const std::vector<Node*>& shape) {
  std::vector<Node*> full = broadcast_shapes(x->shape, shape);
  if (!same_shape(full, shape))
    EMBER_USER_ERROR(ShapeError, loc(), "cannot broadcast shape " << shape_str(x->shape) << " to " << shape_str(shape));
  size_t off = shape.size() - x->shape.size();
  std::vector<Node*> idx;
  for (size_t k = 0; k < x->shape.size(); ++k) {
    bool stretched = const_dim(x->shape[k]) == 1 && const_dim(shape[k + off]) != 1;
    idx.push_back(stretched ? b_.i32(0) : b_.index(static_cast<int>(k + off), shape));
  }
  return idx;
}

Node* Tracer::unary(Op op, Node* x) {
  x = value(x);
  if (float_op(op) && x->dtype != DType::f32) x = to_dtype(x, DType::f32);
  if ((op == Op::bnot) && x->dtype == DType::f32)
    EMBER_USER_ERROR(TypeError, loc(), "bitwise not of a float tensor");
  if (op == Op::bnot && x->dtype == DType::boolean) op = Op::lnot;
  if (op == Op::neg && x->dtype == DType::boolean) x = to_dtype(x, DType::i32);
  return b_.unary(op, x);
}

Node* Tracer::binary(Op op, Node* a, Node* c) {
  a = value(a);
  c = value(c);
  DType t = promote(a->dtype, c->dtype);
  switch (op) {
    case Op::land: case Op::lor: t = DType::boolean; break;
    case Op::band: case Op::bor: case Op::bxor: case Op::shl: case Op::shr:
      if (t == DType::f32) EMBER_USER_ERROR(TypeError, loc(), op_name(op) << " needs integer or bool operands, got "
                                                              << dtype_name(a->dtype) << " and " << dtype_name(c->dtype));
      if (op == Op::band && t == DType::boolean) op = Op::land;
      if (op == Op::bor && t == DType::boolean) op = Op::lor;
      break;
    case Op::add: case Op::sub: case Op::mul: case Op::div: case Op::mod:
      if (t == DType::boolean) t = DType::i32;
      break;
    default:
      if (float_op(op)) t = DType::f32;
      break;
  }
  a = to_dtype(a, t);
  c = to_dtype(c, t);
  std::vector<Node*> shape = broadcast_shapes(a->shape, c->shape);
  if (!shape.empty()) {
    a = broadcast_to(a, shape);
    c = broadcast_to(c, shape);
  }
  return b_.binary(op, a, c);
}

Node* Tracer::select(Node* c, Node* a, Node* x) {
  c = value(c);
  a = value(a);
  x = value(x);
  if (c->dtype != DType::boolean) c = b_.binary(Op::ne, c, to_dtype(b_.i32(0), c->dtype));
  DType t = promote(a->dtype, x->dtype);
  a = to_dtype(a, t);
  x = to_dtype(x, t);
  std::vector<Node*> shape = broadcast_shapes(broadcast_shapes(c->shape, a->shape), x->shape);
  if (!shape.empty()) {
    c = broadcast_to(c, shape);
    a = broadcast_to(a, shape);
    x = broadcast_to(x, shape);
  }
  return b_.select(c, a, x);
}

Node* Tracer::cast(Node* x, DType t) { return b_.cast(value(x), t); }
Node* Tracer::bitcast(Node* x, DType t) {
  if (t == DType::boolean || x->dtype == DType::boolean)
    EMBER_USER_ERROR(TypeError, loc(), "bitcast between " << dtype_name(x->dtype) << " and " << dtype_name(t)
                                                          << " (bool has no bit pattern)");
  return b_.bitcast(value(x), t);
}

Node* Tracer::indices(const std::vector<Node*>& shape, int axis) {
  if (axis < 0 || axis >= static_cast<int>(shape.size()))
    EMBER_USER_ERROR(ShapeError, loc(), "indices axis " << axis << " out of range for shape " << shape_str(shape));
  return b_.index(axis, shape);
}

Node* Tracer::dim(Node* x, int axis) {
  int r = x->rank();
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) EMBER_USER_ERROR(ShapeError, loc(), "axis " << axis << " out of range for shape " << shape_str(x->shape));
  return x->shape[static_cast<size_t>(axis)];
}

namespace {
IndexItem full_slice() {
  IndexItem it;
  it.kind = IndexItem::slice;
  return it;
}
}  // namespace

struct Tracer::Resolved {
  std::vector<Node*> shape;  // result shape
  std::vector<Node*> idx;    // one coordinate per source axis, each of `shape` or []
};

Tracer::Resolved Tracer::resolve(Node* x, const std::vector<IndexItem>& items_in) {
  // Expand the ellipsis and pad with full slices.
  int consumed = 0;
  bool has_ellipsis = false;
  for (const IndexItem& it : items_in) {
    if (it.kind == IndexItem::ellipsis) {
      if (has_ellipsis) EMBER_USER_ERROR(ShapeError, loc(), "an index can only have one ellipsis");
      has_ellipsis = true;
    } else if (it.kind != IndexItem::newaxis) {
      ++consumed;
    }
  }
  if (consumed > x->rank())
    EMBER_USER_ERROR(ShapeError, loc(), "too many indices: " << consumed << " for a tensor of shape " << shape_str(x->shape));
  std::vector<IndexItem> items;
  for (const IndexItem& it : items_in) {
    if (it.kind == IndexItem::ellipsis) {
      for (int k = 0; k < x->rank() - consumed; ++k) items.push_back(full_slice());
    } else {
      items.push_back(it);
    }
  }
  if (!has_ellipsis)
    for (int k = consumed; k < x->rank(); ++k) items.push_back(full_slice());

  // Advanced (tensor) indices broadcast together; NumPy puts their dims where the first one is
  // when they are adjacent, else first.
  std::vector<Node*> adv_shape;
  int first_adv = -1, last_adv = -1, n_adv = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    if (items[k].kind != IndexItem::tensor) continue;
    items[k].value = value(items[k].value);
    Node* v = items[k].value;
    if (v->dtype != DType::i32 && v->dtype != DType::u32 && v->dtype != DType::boolean)
      EMBER_USER_ERROR(TypeError, loc(), "index " << k << " has dtype " << dtype_name(v->dtype) << ", expected an integer");
    if (v->shape.empty()) continue;  // scalar indices drop the axis and add no dims
    adv_shape = broadcast_shapes(adv_shape, v->shape);
    if (first_adv < 0) first_adv = static_cast<int>(k);
    last_adv = static_cast<int>(k);
    ++n_adv;
  }
  bool adjacent = true;
  for (int k = first_adv; k >= 0 && k <= last_adv; ++k)
    if (items[static_cast<size_t>(k)].kind != IndexItem::tensor) adjacent = false;

  // Result axes: slices/newaxis in order, advanced block inserted.
  std::vector<int> result_items;
  bool adv_placed = false;
  auto place_adv = [&] {
    if (adv_placed || n_adv == 0) return;
    for (size_t k = 0; k < adv_shape.size(); ++k) result_items.push_back(-1 - static_cast<int>(k));
    adv_placed = true;
  };
  if (!adjacent) place_adv();
  Resolved r;
  std::vector<int64_t> slice_start(items.size()), slice_step(items.size());
  std::vector<Node*> slice_start_node(items.size(), nullptr);  // a symbolic start (x[::-1])
  for (size_t k = 0; k < items.size(); ++k) {
    if (items[k].kind != IndexItem::tensor) result_items.push_back(static_cast<int>(k));  // a slice or newaxis
    else if (static_cast<int>(k) == first_adv) place_adv();
  }
  // Result shape.
  std::vector<int> src_axis_of_item(items.size());
  for (size_t k = 0, src = 0; k < items.size(); ++k) {
    src_axis_of_item[k] = items[k].kind == IndexItem::newaxis ? -1 : static_cast<int>(src);
    if (items[k].kind != IndexItem::newaxis) ++src;
  }
  for (int ri : result_items) {
    if (ri < 0) { r.shape.push_back(adv_shape[static_cast<size_t>(-1 - ri)]); continue; }
    const IndexItem& it = items[static_cast<size_t>(ri)];
    if (it.kind == IndexItem::newaxis) { r.shape.push_back(b_.i32(1)); continue; }
    Node* d = x->shape[static_cast<size_t>(src_axis_of_item[ri])];
    int64_t n = const_dim(d);
    bool full = !it.start && !it.stop && it.step == 1;
    if (full) { r.shape.push_back(d); slice_start[static_cast<size_t>(ri)] = 0; slice_step[static_cast<size_t>(ri)] = 1; continue; }
    if (it.step == 0) EMBER_USER_ERROR(ShapeError, loc(), "slice step cannot be zero");
    if (n < 0 && !it.start && !it.stop) {  // x[::s] of a symbolic dim: its length is host math
      int64_t as = it.step < 0 ? -it.step : it.step;
      r.shape.push_back(as == 1 ? d : dim_math(Op::div, dim_math(Op::add, d, b_.i32(static_cast<int32_t>(as - 1))),
                                                b_.i32(static_cast<int32_t>(as))));
      slice_start[static_cast<size_t>(ri)] = 0;
      slice_step[static_cast<size_t>(ri)] = it.step;
      if (it.step < 0) slice_start_node[static_cast<size_t>(ri)] = dim_math(Op::sub, d, b_.i32(1));
      continue;
    }
    if (n < 0)
      EMBER_USER_ERROR(ShapeError, loc(), "slicing with bounds needs a fixed dimension; axis "
                                              << src_axis_of_item[ri] << " of " << shape_str(x->shape) << " is symbolic");
    int64_t step = it.step, start, stop;
    auto norm = [&](int64_t v, int64_t lo, int64_t hi) { if (v < 0) v += n; return std::clamp(v, lo, hi); };
    if (step > 0) {
      start = it.start ? norm(*it.start, 0, n) : 0;
      stop = it.stop ? norm(*it.stop, 0, n) : n;
    } else {
      start = it.start ? norm(*it.start, -1, n - 1) : n - 1;
      stop = it.stop ? norm(*it.stop, -1, n - 1) : -1;
    }
    int64_t len = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                           : (start > stop ? (start - stop - step - 1) / -step : 0);
    r.shape.push_back(dim_const(len));
    slice_start[static_cast<size_t>(ri)] = start;
    slice_step[static_cast<size_t>(ri)] = step;
  }
  // Coordinates per source axis.
  int adv_pos = -1;
  for (size_t a = 0; a < result_items.size(); ++a)
    if (result_items[a] < 0 && adv_pos < 0) adv_pos = static_cast<int>(a);
  for (size_t k = 0; k < items.size(); ++k) {
    const IndexItem& it = items[k];
    if (it.kind == IndexItem::newaxis) continue;
    if (it.kind == IndexItem::tensor) {
      Node* v = cast(it.value, DType::i32);
      if (v->shape.empty() && v->op == Op::constant && v->i() < 0) {  // counts from the end, as in NumPy
        Node* d = x->shape[static_cast<size_t>(src_axis_of_item[k])];
        if (const_dim(d) >= 0 && v->i() + const_dim(d) < 0)
          EMBER_USER_ERROR(ShapeError, loc(), "index " << v->i() << " is out of range for axis " << src_axis_of_item[k]
                                                       << " of size " << const_dim(d));
        v = dim_math(Op::add, d, v);
      }
      if (v->shape.empty()) { r.idx.push_back(v); continue; }
      // Place the advanced value inside the result shape: its dims are the advanced block.
      std::vector<Node*> sub_idx;
      size_t off = adv_shape.size() - v->shape.size();
      for (size_t d = 0; d < v->shape.size(); ++d) {
        bool stretched = const_dim(v->shape[d]) == 1 && const_dim(adv_shape[d + off]) != 1;
        sub_idx.push_back(stretched ? b_.i32(0) : b_.index(adv_pos + static_cast<int>(d + off), r.shape));
      }
      r.idx.push_back(same_shape(v->shape, r.shape) ? v : gather_at(v, sub_idx, r.shape, IndexMode::clamp));
      continue;
    }
    int ra = static_cast<int>(std::find(result_items.begin(), result_items.end(), static_cast<int>(k)) - result_items.begin());
    Node* i = b_.index(ra, r.shape);
    int64_t st = slice_start[k], sp = slice_step[k];
    if (sp != 1) i = b_.binary(Op::mul, i, b_.i32(static_cast<int32_t>(sp)));
    if (st != 0) i = b_.binary(Op::add, i, b_.i32(static_cast<int32_t>(st)));
    if (slice_start_node[k]) i = b_.binary(Op::add, i, slice_start_node[k]);
    r.idx.push_back(i);
  }
  return r;
}

Node* Tracer::gather(Node* x, const std::vector<IndexItem>& items, IndexMode m) {
  if (x->op == Op::group_buffer) check_group_access(x, items);
  Resolved r = resolve(x, items);
  if (r.shape.empty() && x->shape.empty()) return x;
  return gather_at(x, r.idx, r.shape, m);
}

void Tracer::scatter(Node* mem, const std::vector<IndexItem>& items, Node* value, IndexMode m) {
  if (!mem->is_memory())
    EMBER_USER_ERROR(TypeError, loc(), "cannot assign into a computed value; assign into an argument or a tensor made by "
                                       "em.zeros/em.buffer");
  if (mem->op == Op::group_buffer) check_group_access(mem, items);
  Resolved r = resolve(mem, items);
  value = this->value(value);
  if (value->dtype != mem->dtype) {
    if (value->dtype == DType::f32 && mem->dtype != DType::f32)
      EMBER_USER_ERROR(TypeError, loc(), "assigning a f32 value into a " << dtype_name(mem->dtype)
                                                                         << " tensor; cast it explicitly");
    value = b_.cast(value, mem->dtype);
  }
  value = align_scatter_value(r, value);
  std::vector<Node*> shape = broadcast_shapes(r.shape, value->shape);
  std::vector<Node*> idx;
  for (Node* i : r.idx) idx.push_back(broadcast_to(i, shape));
  value = broadcast_to(value, shape);
  b_.store(mem, value, idx, shape, m);
}

// `A[idx] = v` broadcasts v against the indices as NumPy does, except where that would have
// threads that write one element write different values: v varies along an axis that no index
// varies along (y[t, i] = em.sum(w[i, k] * x[t, k], axis=1) with i, k = em.indices([4, 4]):
// NumPy would align the sum's axis with k). Then v's axes are matched, in order, with the last
// axes the indices vary along, when their sizes agree, so each element gets one value.
Node* Tracer::align_scatter_value(const Resolved& r, Node* value) {
  const size_t rank = r.shape.size(), vr = value->shape.size();
  if (vr == 0 || vr >= rank || rank > 64) return value;
  ThreadAxes thread_axes(r.shape);
  uint64_t used = 0;
  for (Node* i : r.idx) used |= thread_axes.varying(i);
  const size_t off = rank - vr;
  bool conflict = false;
  for (size_t k = 0; k < vr; ++k)
    if (const_dim(value->shape[k]) != 1 && !(used >> (k + off) & 1)) conflict = true;
  if (!conflict) return value;
  std::vector<int> axes;
  for (size_t a = 0; a < rank; ++a)
    if (used >> a & 1) axes.push_back(static_cast<int>(a));
  if (axes.size() < vr) return value;
  axes.erase(axes.begin(), axes.end() - static_cast<std::ptrdiff_t>(vr));
  std::vector<Node*> sub;
  for (size_t k = 0; k < vr; ++k) {
    Node* dv = value->shape[k];
    Node* dt = r.shape[static_cast<size_t>(axes[k])];
    if (const_dim(dv) == 1) { sub.push_back(b_.i32(0)); continue; }
    if (!same_dim(dv, dt)) return value;
    sub.push_back(b_.index(axes[k], r.shape));
  }
  return gather_at(value, sub, r.shape, IndexMode::clamp);
}

Node* Tracer::atomic(AtomicKind k, Node* target, Node* value) {
  if (target->op != Op::load || !target->operand(0)->is_memory())
    EMBER_USER_ERROR(TypeError, loc(), "the target of an atomic must be an element of an argument or of em.zeros/em.buffer, "
                                       "e.g. em.atomic_add(A[i], v)");
  Node* mem = target->operand(0);
  value = this->value(value);
  if (value->dtype != mem->dtype) {
    if (value->dtype == DType::f32 && mem->dtype != DType::f32)
      EMBER_USER_ERROR(TypeError, loc(), "atomic of a f32 value into a " << dtype_name(mem->dtype) << " tensor");
    value = b_.cast(value, mem->dtype);
  }
  std::vector<Node*> shape = broadcast_shapes(target->shape, value->shape);
  std::vector<Node*> idx;
  for (int i = 1; i < target->num_operands(); ++i) idx.push_back(broadcast_to(target->operand(i), shape));
  value = broadcast_to(value, shape);
  Node* a = b_.atomic(k, mem, value, idx, shape, target->mode);
  if (target->users.empty()) program().erase(target);
  return a;
}

Node* Tracer::reduce(ReduceKind k, Node* x, std::vector<int> axes, bool keepdims) {
  x = value(x);
  int r = x->rank();
  if (axes.empty())
    for (int a = 0; a < r; ++a) axes.push_back(a);
  uint32_t mask = 0;
  for (int a : axes) {
    int aa = a < 0 ? a + r : a;
    if (aa < 0 || aa >= r) EMBER_USER_ERROR(ShapeError, loc(), "reduction axis " << a << " out of range for shape " << shape_str(x->shape));
    if (mask & (1u << aa)) EMBER_USER_ERROR(ShapeError, loc(), "reduction axis " << a << " repeated");
    mask |= 1u << aa;
  }
  const bool arg = k == ReduceKind::argmax || k == ReduceKind::argmin;
  if (r == 0) return arg ? b_.i32(0) : x;
  DType t = arg ? DType::i32 : x->dtype;  // argmax/argmin: the index
  if (k == ReduceKind::any || k == ReduceKind::all) {
    if (t != DType::boolean) x = b_.binary(Op::ne, x, b_.cast(b_.i32(0), t));
    t = DType::boolean;
  } else if ((k == ReduceKind::sum || k == ReduceKind::prod) && t == DType::boolean) {
    x = b_.cast(x, DType::i32);
    t = DType::i32;
  }
  std::vector<Node*> out;
  for (int a = 0; a < r; ++a) {
    if (!(mask & (1u << a))) out.push_back(x->shape[static_cast<size_t>(a)]);
    else if (keepdims) out.push_back(b_.i32(1));
  }
  return b_.reduce(k, x, mask, keepdims, out, t);
}

Node* Tracer::mean(Node* x, std::vector<int> axes, bool keepdims) {
  Node* xf = x->dtype == DType::f32 ? x : b_.cast(value(x), DType::f32);  // a memory is read first
  Node* s = reduce(ReduceKind::sum, xf, axes, keepdims);
  int r = x->rank();
  if (axes.empty()) for (int a = 0; a < r; ++a) axes.push_back(a);
  Node* count = b_.i32(1);
  for (int a : axes) count = b_.binary(Op::mul, count, x->shape[static_cast<size_t>(a < 0 ? a + r : a)]);
  return binary(Op::div, s, b_.cast(count, DType::f32));
}

Node* Tracer::zeros(const std::vector<Node*>& shape, DType t) { return b_.buffer(t, shape, true); }
Node* Tracer::buffer(const std::vector<Node*>& shape, DType t) { return b_.buffer(t, shape, false); }


Node* Tracer::begin_loop(Node* begin, Node* end, Node* step) {
  for (Node** p : {&begin, &end, &step}) {
    *p = value(*p);
    if ((*p)->dtype != DType::i32) {
      if ((*p)->dtype == DType::f32) EMBER_USER_ERROR(TypeError, loc(), "loop bounds must be integers, got f32");
      *p = b_.cast(*p, DType::i32);
    }
  }
  std::vector<Node*> shape = to_shape(scope_shape());
  for (Node* v : {begin, end, step})
    if (!v->shape.empty()) shape = broadcast_shapes(shape, v->shape);
  if (!scope_shape().empty() && !same_shape(shape, scope_shape()))
    EMBER_USER_ERROR(ShapeError, loc(), "loop bounds of shape " << shape_str(shape) << " inside a scope of shape "
                                                                << shape_str(scope_shape()));
  begin = broadcast_to(begin, shape);
  end = broadcast_to(end, shape);
  step = broadcast_to(step, shape);
  if (step->op == Op::constant && step->i() == 0) EMBER_USER_ERROR(ShapeError, loc(), "loop step cannot be zero");
  Node* l = b_.loop(begin, end, step, shape);
  scopes_.push_back(l);
  b_.set_insert_end(l);
  return l;
}

Node* Tracer::begin_if(Node* cond) {
  cond = value(cond);
  if (cond->dtype != DType::boolean) cond = b_.binary(Op::ne, cond, b_.cast(b_.i32(0), cond->dtype));
  const std::vector<Node*> shape = to_shape(cond->shape.empty() ? scope_shape() : ShapeView(cond->shape));
  if (!scope_shape().empty() && !same_shape(shape, scope_shape()))
    EMBER_USER_ERROR(ShapeError, loc(), "if condition of shape " << shape_str(cond->shape) << " inside a scope of shape "
                                                                 << shape_str(scope_shape()));
  Node* n = b_.if_(cond, shape);
  scopes_.push_back(n);
  b_.set_insert_end(n);
  return n;
}

Node* Tracer::begin_else() {
  Node* last = b_.scope()->last_child;
  if (!last || last->op != Op::if_) EMBER_USER_ERROR(Error, loc(), "em.else_() must directly follow an em.if_() block");
  Node* n = b_.else_(last->shape);
  scopes_.push_back(n);
  b_.set_insert_end(n);
  return n;
}

std::vector<Node*> Tracer::begin_kernel(const std::vector<Node*>& shape, const std::vector<int64_t>& group) {
  for (Node* s : scopes_)
    if (s->op == Op::kernel) EMBER_USER_ERROR(Error, loc(), "em.kernel cannot be nested inside another kernel");
  if (!scope_shape().empty()) EMBER_USER_ERROR(Error, loc(), "em.kernel must be opened at host level");
  if (!group.empty() && group.size() != shape.size())
    EMBER_USER_ERROR(ShapeError, loc(), "em.kernel: the group has " << group.size() << " dims but the kernel shape "
                                                                    << shape_str(shape) << " has " << shape.size());
  int64_t threads = 1;
  for (int64_t g : group) {
    if (g < 1) EMBER_USER_ERROR(ShapeError, loc(), "em.kernel: group dims must be positive, got " << g);
    threads = std::min<int64_t>(threads * std::min<int64_t>(g, 1 << 20), 1 << 20);
  }
  if (threads > 1024)
    EMBER_USER_ERROR(CompileError, loc(), "em.kernel: a group of " << threads << " threads; at most 1024 are supported");
  Node* k = b_.kernel(shape);
  k->loc = loc();
  k->user_kernel = true;
  for (int64_t g : group) k->group.push_back(static_cast<int>(g));
  scopes_.push_back(k);
  b_.set_insert_end(k);
  std::vector<Node*> idx;
  for (size_t a = 0; a < shape.size(); ++a) idx.push_back(b_.index(static_cast<int>(a), shape));
  return idx;
}

void Tracer::end_scope() {
  EMBER_INTERNAL_ASSERT(!scopes_.empty(), "end_scope without an open scope");
  Node* s = scopes_.back();
  scopes_.pop_back();
  b_.set_insert_end(s->parent);
}

// A jump under a per-element condition must leave a per-element loop: a host loop (scalar
// bounds) runs its body for all elements at once, so one element cannot leave it alone.
void Tracer::check_jump_target(const char* what) {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    if ((*it)->op != Op::loop) continue;
    if ((*it)->shape.empty() && !scope_shape().empty() && !(*it)->enclosing_kernel())
      EMBER_USER_ERROR(CompileError, loc(), what << " under a per-element condition of shape " << shape_str(scope_shape())
                                                 << " inside a host loop (scalar bounds); make the loop per-element "
                                                    "(em.loop with bounds of that shape) or use an em.kernel");
    return;
  }
}

void Tracer::break_() {
  bool in_loop = false;
  for (auto it = scopes_.rbegin(); it != scopes_.rend() && (*it)->op != Op::kernel; ++it) in_loop |= (*it)->op == Op::loop;
  if (!in_loop) EMBER_USER_ERROR(CompileError, loc(), "em.break_() outside a loop");
  check_jump("em.break_()");
  check_jump_target("em.break_()");
  b_.break_(to_shape(scope_shape()));
}

void Tracer::continue_() {
  bool in_loop = false;
  for (auto it = scopes_.rbegin(); it != scopes_.rend() && (*it)->op != Op::kernel; ++it) in_loop |= (*it)->op == Op::loop;
  if (!in_loop) EMBER_USER_ERROR(CompileError, loc(), "em.continue_() outside a loop");
  check_jump("em.continue_()");
  check_jump_target("em.continue_()");
  b_.continue_(to_shape(scope_shape()));
}

Node* Tracer::var(Node* init) {
  init = value(init);
  const std::vector<Node*> shape = to_shape(init->shape.empty() ? scope_shape() : ShapeView(init->shape));
  if (!scope_shape().empty() && !init->shape.empty() && !same_shape(init->shape, scope_shape()))
    EMBER_USER_ERROR(ShapeError, loc(), "var of shape " << shape_str(init->shape) << " inside a scope of shape "
                                                        << shape_str(scope_shape()));
  return b_.var(broadcast_to(init, shape), shape);
}

void Tracer::set(Node* v, Node* value) {
  if (v->op != Op::var) EMBER_USER_ERROR(TypeError, loc(), "only em.var values can be assigned with .val");
  value = this->value(value);
  if (value->dtype != v->dtype) {
    if (value->dtype == DType::f32 && v->dtype != DType::f32)
      EMBER_USER_ERROR(TypeError, loc(), "assigning a f32 value to a " << dtype_name(v->dtype) << " var; cast it explicitly");
    value = b_.cast(value, v->dtype);
  }
  if (!value->shape.empty() && !same_shape(value->shape, v->shape)) {
    if (v->shape.empty())
      EMBER_USER_ERROR(ShapeError, loc(), "assigning a value of shape " << shape_str(value->shape) << " to a scalar var");
    value = broadcast_to(value, v->shape);
  }
  if (value->shape.empty() && !v->shape.empty()) value = broadcast_to(value, v->shape);
  // Inside an em.if_/em.loop of a tensor shape the assignment runs per element of that shape.
  Node* scope = b_.scope();
  if (scope && scope->op != Op::program && scope->op != Op::kernel && !scope->shape.empty() && !v->shape.empty() &&
      !same_shape(scope->shape, v->shape))
    EMBER_USER_ERROR(ShapeError, loc(), "assigning a var of shape " << shape_str(v->shape) << " inside an em."
                                            << (scope->op == Op::loop ? "loop" : scope->op == Op::if_ ? "if_" : "else_")
                                            << " of shape " << shape_str(scope->shape)
                                            << "; the condition (or loop bounds) must have the var's shape");
  b_.set(v, value);
}

}  // namespace ember

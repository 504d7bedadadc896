// The reference interpreter: setup (dense node numbering, device-scope classification, bound
// arguments) and the host level, which runs node-at-a-time over whole shapes. Device scopes
// (kernels; loops/ifs of non-empty shape at host level) run per thread in device.cpp.
#include "core/interp/interp.h"

#include <algorithm>

#include "core/interp/machine.h"

namespace ember {

namespace interp_detail {

std::string tuple_str(const int64_t* s, int rank) {
  std::string out = "(";
  for (int i = 0; i < rank; ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  if (rank == 1) out += ",";
  return out + ")";
}

static std::string tuple_str(const std::vector<int64_t>& s) {
  return tuple_str(s.data(), static_cast<int>(s.size()));
}

namespace {

void collect(const Node* scope, std::vector<const Node*>& out) {
  for (const Node* c = scope->first_child; c; c = c->next) {
    out.push_back(c);
    if (c->first_child) collect(c, out);
  }
}

// Operand-count checks, so that malformed IR throws instead of reading past operand lists.
void validate(const Node* n) {
  const OpInfo& info = op_info(n->op);
  int no = n->num_operands();
  if (info.arity >= 0)
    EMBER_INTERNAL_ASSERT(no == info.arity, op_name(n->op) << " %" << n->id << " has " << no << " operands, expected "
                                                           << info.arity);
  if (info.flags & F_ELEMENTWISE) EMBER_INTERNAL_ASSERT(no >= 1 && no <= 3, "elementwise arity");
  if (n->op == Op::load || n->op == Op::store || n->op == Op::atomic)
    EMBER_INTERNAL_ASSERT(no >= n->first_index_operand(), op_name(n->op) << " %" << n->id << " lacks operands");
  if (n->op == Op::set) EMBER_INTERNAL_ASSERT(n->operand(0)->op == Op::var, "set %" << n->id << " of a non-var");
  if (n->op == Op::reduce)
    EMBER_INTERNAL_ASSERT(n->kind <= static_cast<uint8_t>(ReduceKind::argmin), "reduce %" << n->id << ": bad kind");
  if (n->op == Op::scan)
    EMBER_INTERNAL_ASSERT(n->kind == static_cast<uint8_t>(ReduceKind::sum), "scan %" << n->id << ": bad kind");
  if (n->op == Op::atomic)
    EMBER_INTERNAL_ASSERT(n->kind <= static_cast<uint8_t>(AtomicKind::exchange), "atomic %" << n->id << ": bad kind");
  if (n->op == Op::index) EMBER_INTERNAL_ASSERT(n->axis >= 0, "index %" << n->id << ": negative axis");
}

}  // namespace

Machine::Machine(const Program& p, const std::vector<ArgValue>& args, KernelRunner* runner)
    : p_(p), runner_(runner) {
  dim_values_ = bind_arguments(p, args);

  std::vector<const Node*> order{p.root()};
  collect(p.root(), order);
  int max_id = 0;
  for (const Node* n : order) max_id = std::max(max_id, n->id);
  EMBER_INTERNAL_ASSERT(max_id < (1 << 30), "node ids out of range");
  slot_.assign(static_cast<size_t>(max_id) + 1, -1);
  for (size_t i = 0; i < order.size(); ++i) {
    EMBER_INTERNAL_ASSERT(order[i]->id >= 0 && slot_[static_cast<size_t>(order[i]->id)] < 0,
                          "node id " << order[i]->id << " is not unique");
    slot_[static_cast<size_t>(order[i]->id)] = static_cast<int>(i);
  }
  for (const Node* n : order) {
    if (n == p.root()) continue;
    validate(n);
    for (const Node* o : n->operands) require_known(n, o);
    for (const Node* o : n->shape) require_known(n, o);
    for (const Node* o : n->params()) require_known(n, o);
    for (const Node* o : n->memories()) require_known(n, o);
  }
  check_static_sizes(order);
  host_.resize(order.size());
  words_.assign(order.size(), 0);
  dev_.assign(order.size(), nullptr);
  classify(p.root(), nullptr);

  // Leaves bound at call time; constants are known everywhere.
  for (const Node* n : order) {
    HostVal& h = hv(n);
    switch (n->op) {
      case Op::constant: h.w = n->bits; break;
      case Op::shape_arg:
        EMBER_INTERNAL_ASSERT(n->index >= 0 && static_cast<size_t>(n->index) < dim_values_.size(),
                              "shape_arg " << n->name << " is not in Program::dims");
        h.w = i2w(static_cast<int32_t>(dim_values_[static_cast<size_t>(n->index)]));
        break;
      case Op::scalar_arg:
      case Op::input: {
        EMBER_INTERNAL_ASSERT(n->index >= 0 && static_cast<size_t>(n->index) < p.args.size() &&
                                  p.args[static_cast<size_t>(n->index)] == n,
                              op_name(n->op) << " " << n->name << " is not in Program::args");
        const ArgValue& a = args[static_cast<size_t>(n->index)];
        if (n->op == Op::input) {
          h.t = runner_ ? runner_->bind_input(n, a.tensor) : a.tensor;
          h.tensor = true;
        } else {
          h.w = a.word;
        }
        break;
      }
      default: break;
    }
  }
  EMBER_INTERNAL_ASSERT(p.num_outputs >= 0, "negative output count");
  outputs_.resize(static_cast<size_t>(p.num_outputs));
  output_set_.assign(static_cast<size_t>(p.num_outputs), false);
}

// Every shape made of constants and symbolic dimensions (allocations such as em.zeros([N, N]),
// values, kernels' index spaces) is checked against kMaxTensorElements once the arguments are
// bound, so a shape too large is a ShapeError before anything is allocated or run. Shapes of
// computed dimensions are checked as they are evaluated (eval_dims).
void Machine::check_static_sizes(const std::vector<const Node*>& order) const {
  std::vector<int64_t> dims;
  for (const Node* n : order) {
    if (n->shape.empty()) continue;
    dims.clear();
    bool known = true;
    for (const Node* d : n->shape) {
      if (d->op == Op::constant) dims.push_back(d->i());
      else if (d->op == Op::shape_arg && d->index >= 0 && static_cast<size_t>(d->index) < dim_values_.size())
        dims.push_back(dim_values_[static_cast<size_t>(d->index)]);
      else { known = false; break; }
    }
    if (known && elements_capped(dims) > kMaxTensorElements) too_large(n, n->shape, dims);
  }
}

void Machine::too_large(const Node* n, const Shape& s, const std::vector<int64_t>& dims) const {
  throw_too_large(n, s, dims);
}

void Machine::require_known(const Node* user, const Node* n) const {
  EMBER_INTERNAL_ASSERT(n && n->id >= 0 && static_cast<size_t>(n->id) < slot_.size() && slot_[static_cast<size_t>(n->id)] >= 0,
                        op_name(user->op) << " %" << user->id << " refers to a node that is not in the program");
}

void Machine::classify(const Node* scope, const Node* cur) {
  for (const Node* c = scope->first_child; c; c = c->next) {
    const Node* d = cur;
    if (!cur) {
      if (c->op == Op::kernel || ((c->op == Op::loop || c->op == Op::if_) && !c->shape.empty())) d = c;
      else if (c->op == Op::else_ && c->prev && c->prev->op == Op::if_ && dev(c->prev) == c->prev) d = c->prev;
    }
    dev_[static_cast<size_t>(slot(c))] = d;
    if (c->first_child) classify(c, d);
  }
}

std::vector<HostTensor> Machine::run() {
  Flow f = run_host_block(p_.root()->first_child);
  EMBER_INTERNAL_ASSERT(f == Flow::normal, "break/continue outside a loop at host level");
  for (size_t i = 0; i < outputs_.size(); ++i)
    EMBER_INTERNAL_ASSERT(output_set_[i], "output slot " << i << " was never written");
  return std::move(outputs_);
}

// ---- host level ----------------------------------------------------------------------------

Flow Machine::run_host_block(const Node* first) {
  for (const Node* n = first; n; n = n->next) {
    if (n->op == Op::else_) continue;  // run by its if
    if (dev(n) == n) { run_device(n); continue; }
    Flow f = exec_host(n);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

void Machine::eval_dims(const Shape& s, std::vector<int64_t>& out) {
  out.resize(s.size());
  for (size_t k = 0; k < s.size(); ++k) {
    const Node* d = s[k];
    int64_t v;
    if (d->op == Op::constant) {
      v = d->i();
    } else {
      EMBER_INTERNAL_ASSERT(!dev(d), "dimension %" << d->id << " is computed inside a device scope");
      const HostVal& h = hv(d);
      EMBER_INTERNAL_ASSERT(!h.tensor, "dimension %" << d->id << " is not a scalar");
      v = w2i(h.w);
    }
    if (v < 0) {
      EMBER_INTERNAL_ASSERT(d->op != Op::shape_arg, "symbolic dimension '" << d->name << "' was never bound");
      throw_negative_dim(d, v);
    }
    out[k] = v;
  }
  if (!s.empty() && elements_capped(out) > kMaxTensorElements) too_large(s.back(), s, out);
}

uint32_t Machine::host_scalar(const Node* o) {
  EMBER_INTERNAL_ASSERT(!dev(o), op_name(o->op) << " %" << o->id << " from a device scope used at host level");
  const HostVal& h = hv(o);
  if (!h.tensor) return h.w;
  EMBER_INTERNAL_ASSERT(h.t.size() == 1, op_name(o->op) << " %" << o->id << " of shape " << tuple_str(h.t.shape)
                                                        << " used as a scalar");
  return h.t.data[0];
}

void Machine::stream(const Node* o, const std::vector<int64_t>& dims, const uint32_t*& ptr, int64_t& stride) {
  EMBER_INTERNAL_ASSERT(!dev(o), op_name(o->op) << " %" << o->id << " from a device scope used at host level");
  const HostVal& h = hv(o);
  if (!h.tensor) { ptr = &h.w; stride = 0; return; }
  ptr = h.t.data;
  if (h.t.shape.empty()) { stride = 0; return; }
  EMBER_INTERNAL_ASSERT(h.t.shape == dims, op_name(o->op) << " %" << o->id << " has shape " << tuple_str(h.t.shape)
                                                          << ", its user runs over " << tuple_str(dims));
  stride = 1;
}

void Machine::prepare(HostVal& h, DType t, const std::vector<int64_t>& dims) {
  if (h.tensor && h.t.owner && h.t.owner.use_count() == 1 && h.t.dtype == t && h.t.shape == dims) return;
  h.t = HostTensor::alloc(t, dims, false);
  h.tensor = true;
}

void Machine::make_unique(const Node* n) {
  HostVal& h = hv(n);
  if (n->is_memory() || !h.tensor || (h.t.owner && h.t.owner.use_count() == 1)) return;
  HostTensor c = HostTensor::alloc(h.t.dtype, h.t.shape, false);
  std::copy(h.t.data, h.t.data + h.t.size(), c.data);
  h.t = std::move(c);
}

MemView Machine::view(const Node* mem) {
  HostVal& h = hv(mem);
  MemView v;
  if (h.tensor) {
    v.data = h.t.data;
    v.shape = h.t.shape.data();
    v.rank = static_cast<int>(h.t.shape.size());
    v.size = h.t.size();
  } else {
    EMBER_INTERNAL_ASSERT(!mem->is_memory(), op_name(mem->op) << " %" << mem->id << " accessed before it was allocated");
    v.data = &h.w;
    v.size = 1;
  }
  return v;
}

Flow Machine::exec_host(const Node* n) {
  // Host work on tensors reads memory kernels may still be writing (a device runner queues them).
  if (runner_ && (n->op == Op::load || n->op == Op::store || n->op == Op::atomic || n->op == Op::reduce ||
                  n->op == Op::scan || (!n->shape.empty() && n->op != Op::buffer && n->op != Op::index)))
    runner_->synchronize();
  if (op_info(n->op).flags & F_ELEMENTWISE) { host_elementwise(n); return Flow::normal; }
  HostVal& h = hv(n);
  switch (n->op) {
    case Op::constant: h.w = n->bits; h.tensor = false; break;
    case Op::input: case Op::scalar_arg: case Op::shape_arg: break;  // bound before the run
    case Op::buffer:
      eval_dims(n->shape, dims_);
      // zero-filled whether or not zero_init
      h.t = runner_ ? runner_->allocate(n->dtype, dims_) : HostTensor::alloc(n->dtype, dims_, true);
      h.tensor = true;
      if (n->name == "tape") {
        int64_t words = 1;
        for (int64_t d : dims_) words *= d;
        tape_bytes_ += words * 4;
      }
      break;
    case Op::index: host_index(n); break;
    case Op::load: case Op::store: case Op::atomic: host_access(n); break;
    case Op::reduce: host_reduce(n); break;
    case Op::scan: host_scan(n); break;
    case Op::var: host_var(n, false); break;
    case Op::set: host_var(n, true); break;
    case Op::output: host_output(n); break;
    case Op::move_memory: h.tensor = false; hv(n->operand(0)).t = hv(n->operand(1)).t; break;
    case Op::break_: return Flow::brk;
    case Op::continue_: return Flow::cont;
    case Op::loop: {
      int64_t b = w2i(host_scalar(n->operand(0))), e = w2i(host_scalar(n->operand(1)));
      int64_t s = w2i(host_scalar(n->operand(2)));
      EMBER_INTERNAL_ASSERT(s != 0, "loop %" << n->id << " has step 0");
      h.tensor = false;
      for (int64_t k = b; s > 0 ? k < e : k > e; k += s) {
        h.w = i2w(static_cast<int32_t>(k));
        if (run_host_block(n->first_child) == Flow::brk) break;
      }
      break;
    }
    case Op::if_: {
      bool c = host_scalar(n->operand(0)) != 0;
      const Node* els = n->next && n->next->op == Op::else_ ? n->next : nullptr;
      if (c) return run_host_block(n->first_child);
      if (els) return run_host_block(els->first_child);
      break;
    }
    default:
      EMBER_INTERNAL_ASSERT(false, "op " << op_name(n->op) << " (%" << n->id << ") cannot run at host level");
  }
  return Flow::normal;
}

void Machine::host_elementwise(const Node* n) {
  const int na = n->num_operands();
  const DType in = n->op == Op::select ? n->operand(1)->dtype : n->operand(0)->dtype;
  HostVal& out = hv(n);
  uint32_t a[3] = {0, 0, 0};
  if (n->shape.empty()) {
    for (int k = 0; k < na; ++k) a[k] = host_scalar(n->operand(k));
    out.w = eval_elementwise(n->op, n->dtype, in, a, na);
    out.tensor = false;
    return;
  }
  eval_dims(n->shape, dims_);
  const uint32_t* ptr[3] = {nullptr, nullptr, nullptr};
  int64_t stride[3] = {0, 0, 0};
  for (int k = 0; k < na; ++k) stream(n->operand(k), dims_, ptr[k], stride[k]);
  prepare(out, n->dtype, dims_);
  uint32_t* o = out.t.data;
  const int64_t size = out.t.size();
  const Op op = n->op;
  const DType t = n->dtype;
  for (int64_t i = 0; i < size; ++i) {
    for (int k = 0; k < na; ++k) a[k] = ptr[k][i * stride[k]];
    o[i] = eval_elementwise(op, t, in, a, na);
  }
}

void Machine::host_index(const Node* n) {
  EMBER_INTERNAL_ASSERT(!n->shape.empty(), "index %" << n->id << " of shape [] at host level");
  EMBER_INTERNAL_ASSERT(n->axis < n->rank(), "index %" << n->id << ": axis " << n->axis << " of a rank-" << n->rank()
                                                       << " shape");
  eval_dims(n->shape, dims_);
  HostVal& out = hv(n);
  prepare(out, n->dtype, dims_);
  int64_t inner = 1;
  for (size_t k = static_cast<size_t>(n->axis) + 1; k < dims_.size(); ++k) inner *= dims_[k];
  const int64_t d = dims_[static_cast<size_t>(n->axis)], size = out.t.size();
  for (int64_t i = 0; i < size; ++i) out.t.data[i] = i2w(static_cast<int32_t>((i / inner) % d));
}

void Machine::host_access(const Node* n) {
  const Node* mem = n->operand(0);
  EMBER_INTERNAL_ASSERT(!dev(mem), op_name(n->op) << " %" << n->id << " accesses a value of a device scope");
  if (n->op != Op::load) make_unique(mem);  // stores into a non-memory value never touch a shared copy
  const MemView m = view(mem);
  HostVal& out = hv(n);
  const AtomicKind ak = static_cast<AtomicKind>(n->kind);
  const int no = n->num_operands();
  if (n->shape.empty()) {
    int64_t off = mem_offset(n, m, [&](int k) { return host_scalar(n->operand(k)); });
    if (n->op == Op::load) {
      out.w = m.data[off];
    } else if (n->op == Op::store) {
      m.data[off] = host_scalar(n->operand(1));
    } else {
      out.w = m.data[off];
      m.data[off] = atomic_step(ak, n->dtype, out.w, host_scalar(n->operand(1)));
    }
    out.tensor = false;
    return;
  }
  eval_dims(n->shape, dims_);
  std::vector<const uint32_t*> ptr(static_cast<size_t>(no), nullptr);
  std::vector<int64_t> stride(static_cast<size_t>(no), 0);
  for (int k = 1; k < no; ++k) stream(n->operand(k), dims_, ptr[static_cast<size_t>(k)], stride[static_cast<size_t>(k)]);
  int64_t size = 1;
  for (int64_t d : dims_) size *= d;
  uint32_t* o = nullptr;
  if (n->op != Op::store) {
    prepare(out, n->dtype, dims_);
    o = out.t.data;
  }
  for (int64_t i = 0; i < size; ++i) {
    auto word = [&](int k) { return ptr[static_cast<size_t>(k)][i * stride[static_cast<size_t>(k)]]; };
    int64_t off = mem_offset(n, m, word);
    if (n->op == Op::load) {
      o[i] = m.data[off];
    } else if (n->op == Op::store) {
      m.data[off] = word(1);
    } else {
      o[i] = m.data[off];
      m.data[off] = atomic_step(ak, n->dtype, o[i], word(1));
    }
  }
}

void Machine::host_reduce(const Node* n) {
  const Node* x = n->operand(0);
  EMBER_INTERNAL_ASSERT(!dev(x), "reduce %" << n->id << " of a value from a device scope");
  const HostVal& hx = hv(x);
  const std::vector<int64_t> in = hx.tensor ? hx.t.shape : std::vector<int64_t>{};
  const uint32_t* src = hx.tensor ? hx.t.data : &hx.w;
  const int rank = static_cast<int>(in.size());
  EMBER_INTERNAL_ASSERT(rank < 32 && (n->axes >> rank) == 0,
                        "reduce %" << n->id << ": axes mask " << n->axes << " for a rank-" << rank << " operand");
  // Output dims, and the output stride of every input axis (0 for reduced axes).
  std::vector<int64_t> out_dims, ostride(static_cast<size_t>(rank), 0);
  for (int k = 0; k < rank; ++k) {
    bool red = (n->axes >> k) & 1u;
    if (!red) out_dims.push_back(in[static_cast<size_t>(k)]);
    else if (n->keepdims) out_dims.push_back(1);
  }
  eval_dims(n->shape, dims_);
  EMBER_INTERNAL_ASSERT(dims_ == out_dims, "reduce %" << n->id << " of " << tuple_str(in) << " over mask " << n->axes
                                                      << " gives " << tuple_str(out_dims) << ", node shape is "
                                                      << tuple_str(dims_));
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    if ((n->axes >> k) & 1u) continue;
    ostride[static_cast<size_t>(k)] = s;
    s *= in[static_cast<size_t>(k)];
  }
  HostVal& out = hv(n);
  uint32_t* acc;
  if (out_dims.empty()) {
    out.tensor = false;
    acc = &out.w;
  } else {
    prepare(out, n->dtype, out_dims);
    acc = out.t.data;
  }
  const ReduceKind kind = static_cast<ReduceKind>(n->kind);
  const bool arg = kind == ReduceKind::argmax || kind == ReduceKind::argmin;
  const DType xt = x->dtype;
  const DType t = arg ? xt : n->dtype;  // argmax/argmin: `acc` holds indices, `best` values
  EMBER_INTERNAL_ASSERT(!arg || n->dtype == DType::i32, "reduce %" << n->id << ": argmax/argmin must be i32");
  int64_t in_size = 1;
  for (int64_t d : in) in_size *= d;
  // As lower_algorithms starts it: empty only where a reduced extent is the constant 0.
  bool nonempty = true;
  for (int k = 0; k < rank && k < x->rank(); ++k)
    if (((n->axes >> k) & 1u) && const_dim(x->shape[static_cast<size_t>(k)]) == 0) nonempty = false;
  const uint32_t id = reduce_start(kind, t, nonempty);
  std::vector<uint32_t> best;
  // Row-major stride over the reduced axes (0 for kept ones): the index argmax/argmin report.
  std::vector<int64_t> rstride(static_cast<size_t>(rank), 0);
  if (arg) {
    best.assign(static_cast<size_t>(s), id);
    std::fill(acc, acc + s, 0u);
    int64_t r = 1;
    for (int k = rank - 1; k >= 0; --k) {
      if (!((n->axes >> k) & 1u)) continue;
      rstride[static_cast<size_t>(k)] = r;
      r *= in[static_cast<size_t>(k)];
    }
  } else {
    std::fill(acc, acc + s, id);
  }
  std::vector<int64_t> c(static_cast<size_t>(rank), 0);
  int64_t o = 0, ri = 0;
  for (int64_t i = 0; i < in_size; ++i) {
    uint32_t v = xt == t ? src[i] : convert_word(src[i], xt, t);
    if (!arg) {
      acc[o] = reduce_step(kind, t, acc[o], v);
    } else if (arg_replaces(kind, t, best[static_cast<size_t>(o)], v)) {
      best[static_cast<size_t>(o)] = v;
      acc[o] = i2w(static_cast<int32_t>(ri));
    }
    for (int k = rank - 1; k >= 0; --k) {
      size_t uk = static_cast<size_t>(k);
      o += ostride[uk];
      ri += rstride[uk];
      if (++c[uk] < in[uk]) break;
      o -= ostride[uk] * in[uk];
      ri -= rstride[uk] * in[uk];
      c[uk] = 0;
    }
  }
}

// Inclusive scan along n->axis, element by element in row-major order of the other axes.
void Machine::host_scan(const Node* n) {
  const Node* x = n->operand(0);
  EMBER_INTERNAL_ASSERT(!dev(x), "scan %" << n->id << " of a value from a device scope");
  const HostVal& hx = hv(x);
  EMBER_INTERNAL_ASSERT(hx.tensor && !hx.t.shape.empty(), "scan %" << n->id << " of a scalar");
  const std::vector<int64_t> in = hx.t.shape;
  const int rank = static_cast<int>(in.size());
  EMBER_INTERNAL_ASSERT(n->axis >= 0 && n->axis < rank, "scan %" << n->id << ": axis " << n->axis << " of a rank-"
                                                                 << rank << " operand");
  eval_dims(n->shape, dims_);
  EMBER_INTERNAL_ASSERT(dims_ == in, "scan %" << n->id << " of " << tuple_str(in) << " has shape " << tuple_str(dims_));
  EMBER_INTERNAL_ASSERT(x->dtype == n->dtype, "scan %" << n->id << ": dtype differs from its operand's");
  const ReduceKind kind = static_cast<ReduceKind>(n->kind);
  HostVal& out = hv(n);
  const uint32_t* src = hx.t.data;  // read before `out` may be reallocated
  HostTensor result = HostTensor::alloc(n->dtype, in, false);
  int64_t inner = 1, outer = 1;
  for (int k = n->axis + 1; k < rank; ++k) inner *= in[static_cast<size_t>(k)];
  for (int k = 0; k < n->axis; ++k) outer *= in[static_cast<size_t>(k)];
  const int64_t len = in[static_cast<size_t>(n->axis)];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      uint32_t acc = reduce_identity(kind, n->dtype);
      for (int64_t k = 0; k < len; ++k) {
        const int64_t at = (o * len + k) * inner + i;
        acc = reduce_step(kind, n->dtype, acc, src[at]);
        result.data[at] = acc;
      }
    }
  out.t = std::move(result);
  out.tensor = true;
}

void Machine::host_var(const Node* n, bool is_set) {
  const Node* var = is_set ? n->operand(0) : n;
  const Node* v = is_set ? n->operand(1) : n->operand(0);
  EMBER_INTERNAL_ASSERT(!dev(var), "set %" << n->id << " at host level of a var inside a device scope");
  HostVal& h = hv(var);
  if (var->shape.empty()) {
    h.w = host_scalar(v);
    h.tensor = false;
    return;
  }
  if (is_set) {
    EMBER_INTERNAL_ASSERT(h.tensor, "set %" << n->id << " of a var that was never initialized");
    make_unique(var);
    dims_ = h.t.shape;
  } else {
    eval_dims(var->shape, dims_);
    prepare(h, var->dtype, dims_);
  }
  const uint32_t* ptr;
  int64_t stride;
  stream(v, dims_, ptr, stride);
  const int64_t size = h.t.size();
  for (int64_t i = 0; i < size; ++i) h.t.data[i] = ptr[i * stride];
}

void Machine::host_output(const Node* n) {
  EMBER_INTERNAL_ASSERT(n->index >= 0 && static_cast<size_t>(n->index) < outputs_.size(),
                        "output slot " << n->index << " of " << outputs_.size());
  const Node* v = n->operand(0);
  EMBER_INTERNAL_ASSERT(!dev(v), "output of a value from a device scope");
  const HostVal& h = hv(v);
  const size_t s = static_cast<size_t>(n->index);
  // Tensors share storage: memories by design, values because they are copy-on-write.
  outputs_[s] = h.tensor ? h.t : HostTensor::scalar(v->dtype, h.w);
  output_set_[s] = true;
}

}  // namespace interp_detail

void throw_too_large(const Node* n, const std::vector<Node*>& s, const std::vector<int64_t>& dims) {
  long double total = 1;
  for (int64_t d : dims) total *= static_cast<long double>(d);
  EMBER_USER_ERROR(ShapeError, n->loc, (n->op == Op::buffer ? "an allocation" : n->op == Op::kernel ? "a kernel" : "a value")
                                           << " of shape " << shape_str(s) << " = " << interp_detail::tuple_str(dims)
                                           << " has " << static_cast<unsigned long long>(total)
                                           << " elements; a tensor holds at most 2147483647 (2^31 - 1)");
}

void throw_negative_dim(const Node* d, int64_t v) {
  EMBER_USER_ERROR(ShapeError, d->loc, "dimension " << shape_str(Shape{const_cast<Node*>(d)}) << " is negative (" << v << ")");
}

std::vector<HostTensor> interpret(const Program& p, const std::vector<ArgValue>& args, KernelRunner* runner,
                                  RunStats* stats) {
  if (!runner) {
    interp_detail::Machine m(p, args, nullptr);
    std::vector<HostTensor> out = m.run();
    if (stats) stats->tape_bytes = m.tape_bytes();
    return out;
  }
  runner->begin_run();
  try {
    interp_detail::Machine m(p, args, runner);
    std::vector<HostTensor> out = m.run();
    if (stats) stats->tape_bytes = m.tape_bytes();
    runner->end_run(true);
    return out;
  } catch (...) {
    runner->end_run(false);
    throw;
  }
}

}  // namespace ember

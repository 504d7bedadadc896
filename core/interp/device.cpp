// Device scopes of the reference interpreter: a kernel, or a loop/if(+else) of non-empty shape at
// host level, runs its children once per thread, in row-major thread order, on scalar words.
// Values from outside the scope are read at the thread index (or as scalars for shape []).
#include "core/interp/machine.h"

namespace ember::interp_detail {

const ScopeInfo& Machine::scope_info(const Node* d) {
  auto it = scopes_.find(d);
  if (it != scopes_.end()) return it->second;
  ScopeInfo& si = scopes_[d];
  std::vector<char> seen(host_.size(), 0);
  auto add = [&](std::vector<const Node*>& list, const Node* o) {
    char& s = seen[static_cast<size_t>(slot(o))];
    char bit = &list == &si.reads ? 1 : 2;
    if (!(s & bit)) { s = static_cast<char>(s | bit); list.push_back(o); }
  };
  auto visit = [&](const Node* x) {
    for (int i = 0; i < x->num_operands(); ++i) {
      const Node* o = x->operand(i);
      if (dev(o) == d) continue;
      bool access = x->op == Op::load || x->op == Op::store || x->op == Op::atomic;
      if (access && i == 0) {
        if (x->op != Op::load && !o->is_memory()) add(si.writes, o);
        continue;  // addressed through bounds-checked views
      }
      if (x->op == Op::set && i == 0) { add(si.writes, o); add(si.reads, o); continue; }
      add(si.reads, o);
    }
  };
  struct Walk {
    static void run(const Node* s, decltype(visit)& f) {
      for (const Node* c = s->first_child; c; c = c->next) {
        f(c);
        if (c->first_child) run(c, f);
      }
    }
  };
  visit(d);
  Walk::run(d, visit);
  if (d->op == Op::if_ && d->next && d->next->op == Op::else_) Walk::run(d->next, visit);
  return si;
}

void Machine::run_device(const Node* d) {
  eval_dims(d->shape, dev_dims_);
  int64_t total = 1;
  for (int64_t x : dev_dims_) total *= x;

  if (d->op == Op::kernel && runner_) {
    std::vector<HostTensor*> mems;
    mems.reserve(d->memories().size());
    for (const Node* m : d->memories()) {
      EMBER_INTERNAL_ASSERT(m->is_memory() && !dev(m) && hv(m).tensor,
                            "kernel " << d->name << ": memory " << op_name(m->op) << " %" << m->id << " is not allocated");
      mems.push_back(&hv(m).t);
    }
    std::vector<uint32_t> params;
    params.reserve(d->params().size());
    for (const Node* p : d->params()) params.push_back(host_scalar(p));
    runner_->run_kernel(d, mems, params, dev_dims_);
    return;
  }

  if (runner_) runner_->synchronize();  // interpreted on the host: queued kernels finish first
  const ScopeInfo& si = scope_info(d);
  for (const Node* w : si.writes) make_unique(w);
  for (const Node* o : si.reads) {
    const HostVal& h = hv(o);
    EMBER_INTERNAL_ASSERT(!h.tensor || h.t.shape.empty() || h.t.shape == dev_dims_,
                          op_name(o->op) << " %" << o->id << " of shape " << tuple_str(h.t.shape.data(), static_cast<int>(h.t.shape.size()))
                                         << " is read per thread in a " << op_name(d->op) << " of shape "
                                         << tuple_str(dev_dims_.data(), static_cast<int>(dev_dims_.size())));
  }

  if (d->op == Op::kernel && !d->group.empty()) {
    run_group_kernel(d);
    return;
  }
  const int rank = static_cast<int>(dev_dims_.size());
  coords_.assign(static_cast<size_t>(rank), 0);
  cur_dev_ = d;
  for (flat_ = 0; flat_ < total; ++flat_) {
    Flow f = d->op == Op::kernel ? run_dev_block(d->first_child) : exec_dev(d);
    EMBER_INTERNAL_ASSERT(f == Flow::normal, "break/continue leaves the " << op_name(d->op) << " %" << d->id
                                                                          << " it runs in (no enclosing loop in the scope)");
    for (int k = rank - 1; k >= 0; --k) {
      size_t uk = static_cast<size_t>(k);
      if (++coords_[uk] < dev_dims_[uk]) break;
      coords_[uk] = 0;
    }
  }
  cur_dev_ = nullptr;
  flat_ = 0;
}

Flow Machine::run_dev_block(const Node* first) {
  for (const Node* n = first; n; n = n->next) {
    Flow f = exec_dev(n);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Flow Machine::exec_dev(const Node* n) {
  const Op op = n->op;
  if (op_info(op).flags & F_ELEMENTWISE) {
    uint32_t a[3];
    const int na = n->num_operands();
    for (int k = 0; k < na; ++k) a[k] = rd(n->operand(k));
    const DType in = op == Op::select ? n->operand(1)->dtype : n->operand(0)->dtype;
    wr(n) = eval_elementwise(op, n->dtype, in, a, na);
    return Flow::normal;
  }
  switch (op) {
    case Op::constant: wr(n) = n->bits; break;
    case Op::index:
      EMBER_INTERNAL_ASSERT(static_cast<size_t>(n->axis) < coords_.size(),
                            "index %" << n->id << ": axis " << n->axis << " in a scope of rank " << coords_.size());
      wr(n) = i2w(static_cast<int32_t>(coords_[static_cast<size_t>(n->axis)]));
      break;
    case Op::load: case Op::store: case Op::atomic: {
      const Node* mem = n->operand(0);
      EMBER_INTERNAL_ASSERT(dev(mem) != cur_dev_ || mem->op == Op::group_buffer,
                            op_name(op) << " %" << n->id << " addresses a per-thread value");
      const MemView m = view(mem);
      const int64_t off = mem_offset(n, m, [this, n](int k) { return rd(n->operand(k)); });
      if (op == Op::load) {
        wr(n) = m.data[off];
      } else if (op == Op::store) {
        m.data[off] = rd(n->operand(1));
      } else {
        uint32_t old = m.data[off];
        m.data[off] = atomic_step(static_cast<AtomicKind>(n->kind), n->dtype, old, rd(n->operand(1)));
        wr(n) = old;
      }
      break;
    }
    case Op::var: wr(n) = rd(n->operand(0)); break;
    case Op::set: {
      const Node* var = n->operand(0);
      const uint32_t v = rd(n->operand(1));
      if (dev(var) == cur_dev_) {
        wr(var) = v;
      } else {  // a host var: element t of its tensor (shape checked at scope entry), or the scalar
        HostVal& h = hv(var);
        if (h.tensor) h.t.data[h.t.shape.empty() ? 0 : flat_] = v; else h.w = v;
      }
      break;
    }
    case Op::loop: {
      const int64_t b = w2i(rd(n->operand(0))), e = w2i(rd(n->operand(1))), s = w2i(rd(n->operand(2)));
      EMBER_INTERNAL_ASSERT(s != 0, "loop %" << n->id << " has step 0");
      uint32_t& k_word = wr(n);
      for (int64_t k = b; s > 0 ? k < e : k > e; k += s) {
        k_word = i2w(static_cast<int32_t>(k));
        if (run_dev_block(n->first_child) == Flow::brk) break;
      }
      break;
    }
    case Op::if_: {
      if (rd(n->operand(0)) != 0) return run_dev_block(n->first_child);
      if (n->next && n->next->op == Op::else_) return run_dev_block(n->next->first_child);
      break;
    }
    case Op::else_: break;  // run by its if
    case Op::group_buffer: alloc_group_buffer(n); break;  // a kernel without a group: per thread
    case Op::barrier: break;  // a group's barriers are run by run_group_block
    case Op::local_index: case Op::group_index: {
      const std::vector<int64_t>& c = op == Op::local_index ? local_ : group_;
      EMBER_INTERNAL_ASSERT(static_cast<size_t>(n->axis) < c.size(), op_name(op) << " %" << n->id << " outside a workgroup");
      wr(n) = i2w(static_cast<int32_t>(c[static_cast<size_t>(n->axis)]));
      break;
    }
    case Op::break_: return Flow::brk;
    case Op::continue_: return Flow::cont;
    case Op::reduce: case Op::scan:
      EMBER_INTERNAL_ASSERT(false, op_name(op) << " %" << n->id << " inside a device scope is not supported by the interpreter "
                                                 "(run lower_algorithms first)");
      break;
    default:
      EMBER_INTERNAL_ASSERT(false, "op " << op_name(op) << " (%" << n->id << ") cannot run inside a device scope");
  }
  return Flow::normal;
}

}  // namespace ember::interp_detail

// plan_executor: the HostPlan's steps compiled once into a tree of executable steps over numbered
// name slots (export/plan_eval.h) and plan buffers; each run binds the arguments, allocates every
// buffer up front (as the manifest specifies), walks the steps and returns the outputs.
#include "backends/plan_executor.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <unordered_map>

#include "core/ir/eval.h"
#include "export/plan_eval.h"

namespace ember {

namespace {

struct XBuffer {
  const Node* node = nullptr;
  int arg = -1;  // an input: its argument position
  DType dtype = DType::f32;
  std::vector<PlanValue> shape;
};

// A let of an IR value (runtime plans): host scalar math in postorder, as the interpreter does it.
struct NodeEval {
  struct Operand {
    uint8_t kind = 0;  // 0: an earlier instruction's result, 1: a slot, 2: a constant word
    int64_t v = 0;
  };
  struct Ins {
    Op op;
    DType out, in;
    int n = 0;
    Operand a[3];
  };
  std::vector<Ins> code;

  uint32_t eval(const int64_t* slots) const {
    uint32_t small[16];
    std::vector<uint32_t> big;
    uint32_t* r = small;
    if (code.size() > 16) {
      big.resize(code.size());
      r = big.data();
    }
    for (size_t i = 0; i < code.size(); ++i) {
      const Ins& x = code[i];
      uint32_t a[3] = {0, 0, 0};
      for (int k = 0; k < x.n; ++k)
        a[k] = x.a[k].kind == 0 ? r[x.a[k].v] : static_cast<uint32_t>(x.a[k].kind == 1 ? slots[x.a[k].v] : x.a[k].v);
      r[i] = eval_elementwise(x.op, x.out, x.in, a, x.n);
    }
    return r[code.size() - 1];
  }
};

struct XStep {
  PlanStep::Kind kind = PlanStep::Kind::dispatch;
  const Node* kernel = nullptr;          // dispatch
  std::vector<int> memories;             // dispatch: buffer per kernel->memories slot
  std::vector<PlanValue> dims, params;   // dispatch
  int slot = -1;                         // loop var, let var, readback result
  PlanValue a, b, c;                     // loop: begin end step; if: cond; let: value; copy/fill: count; readback/store: index; store: value (b)
  int buffer = -1, src = -1;             // fill/readback/store: buffer; copy: dst (buffer) and src
  bool swap = false;                     // copy: move the storage (src is dead until written again)
  uint32_t word = 0;                     // fill
  DType dtype = DType::i32;              // readback, let, store
  NodeEval node;                         // let of an IR value (when node.code is not empty)
  std::vector<XStep> body, else_body;    // loop, if
};

struct XOutput {
  int buffer = -1;  // -1: a scalar value
  PlanValue value;
  DType dtype = DType::f32;
};

// A shape of constants and symbolic dims, checked against kMaxTensorElements once the arguments
// are bound (the interpreter's check_static_sizes); `dims[k]` >= 0 is a constant, else -1 - index
// of the shape_arg.
struct StaticShape {
  const Node* node = nullptr;
  std::vector<int64_t> dims;
};

[[noreturn]] void cannot(const std::string& why) {
  throw CompileError("the runtime cannot run this host plan: " + why);
}

}  // namespace

struct PlanExecutor::Impl {
  const Program& p;
  HostPlan plan;
  PlanSymbols symbols;
  std::vector<XBuffer> buffers;
  std::unordered_map<std::string, int> buffer_index;
  std::vector<std::pair<int, std::pair<int, int>>> dims;  // slot <- (argument, axis)
  std::vector<std::pair<int, int>> scalars;               // slot <- argument
  std::vector<XStep> prologue, steps;
  std::vector<XOutput> outputs;
  std::vector<StaticShape> static_shapes;

  Impl(const Program& prog, HostPlan hp) : p(prog), plan(std::move(hp)) {}

  // The position of the plan's argument `name` (the plan lists the program's arguments in order,
  // under identifiers: a runtime plan renames the ones that are not).
  int arg_of(const std::string& name) const {
    if (plan.args.size() != p.args.size()) cannot("the plan lists another number of arguments than the program");
    for (size_t i = 0; i < plan.args.size(); ++i)
      if (plan.args[i].name == name) return static_cast<int>(i);
    cannot("no argument named '" + name + "'");
  }

  int buffer_of(const std::string& name) const {
    auto it = buffer_index.find(name);
    if (it == buffer_index.end()) cannot("no buffer named '" + name + "'");
    return it->second;
  }

  void prepare() {
    for (const PlanDim& d : plan.dims) {
      if (d.value >= 0) cannot("dim " + d.name + " is fixed (an export's plan)");
      dims.push_back({symbols.add(d.name, DType::i32), {arg_of(d.input), d.axis}});
    }
    for (const PlanScalar& s : plan.scalars) scalars.push_back({symbols.add(s.name, s.dtype), arg_of(s.name)});
    compile(plan.prologue, prologue);
    for (const PlanBuffer& b : plan.buffers) {
      XBuffer x;
      x.node = b.node;
      x.dtype = b.dtype;
      if (b.node->op == Op::input) {
        x.arg = b.node->index;
      } else {
        if (b.node->op != Op::buffer || b.shape.size() != b.node->shape.size()) cannot("buffer " + b.name + " is not an allocation");
        for (const std::string& e : b.shape) x.shape.emplace_back(e, DType::i32, symbols);
      }
      buffer_index[b.name] = static_cast<int>(buffers.size());
      buffers.push_back(std::move(x));
    }
    compile(plan.steps, steps);
    outputs.resize(static_cast<size_t>(p.num_outputs));
    std::vector<bool> set(outputs.size(), false);
    for (const PlanOutput& o : plan.outputs) {
      if (o.index < 0 || static_cast<size_t>(o.index) >= outputs.size() || set[static_cast<size_t>(o.index)])
        cannot("output slot " + std::to_string(o.index) + " is returned more than once");
      set[static_cast<size_t>(o.index)] = true;
      XOutput& x = outputs[static_cast<size_t>(o.index)];
      x.dtype = o.dtype;
      if (!o.buffer.empty()) x.buffer = buffer_of(o.buffer);
      else x.value = PlanValue(o.value, o.dtype, symbols);
    }
    for (size_t i = 0; i < set.size(); ++i)
      if (!set[i]) cannot("output slot " + std::to_string(i) + " is never returned");
    check_outputs();
    collect_static_shapes(p.root());
  }

  // Outputs are read when the plan ends; the interpreter reads each where its node runs. They
  // agree for outputs at top level: a buffer's storage is never replaced after it is returned
  // (forward_copies), and a returned scalar must not read a host variable set later.
  void check_outputs() const {
    bool scalar_seen = false;
    for (const Node* n = p.root()->first_child; n; n = n->next) {
      if (n->op == Op::output) {
        scalar_seen |= !n->operand(0)->is_memory();
        continue;
      }
      if (scalar_seen && (n->op == Op::set || n->op == Op::var || n->op == Op::loop || n->op == Op::if_))
        cannot("a scalar is returned before a later host step (" + std::string(op_name(n->op)) + ") may change it");
    }
    p.for_each([&](Node* n) {
      if (n->op == Op::output && n->parent != p.root()) cannot("an output is returned inside a loop or branch");
    });
  }

  void collect_static_shapes(const Node* scope) {
    for (const Node* n = scope->first_child; n; n = n->next) {
      if (!n->shape.empty()) {
        StaticShape s;
        s.node = n;
        bool known = true;
        for (const Node* d : n->shape) {
          if (d->op == Op::constant) s.dims.push_back(d->i());
          else if (d->op == Op::shape_arg && d->index >= 0) s.dims.push_back(-1 - d->index);
          else { known = false; break; }
        }
        bool seen = false;
        for (const StaticShape& o : static_shapes) seen |= o.dims == s.dims;
        if (known && !seen) static_shapes.push_back(std::move(s));
      }
      if (n->first_child) collect_static_shapes(n);
    }
  }

  void compile_node(const PlanStep& s, NodeEval& out) const {
    std::unordered_map<const Node*, int> at;
    std::unordered_map<const Node*, int> leaf;
    for (const auto& [n, name] : s.leaves) {
      const int slot = symbols.find(name);
      if (slot < 0) cannot("the host value " + s.var + " reads '" + name + "' before the plan defines it");
      leaf[n] = slot;
    }
    std::function<NodeEval::Operand(const Node*)> visit = [&](const Node* n) -> NodeEval::Operand {
      if (n != s.node) {
        if (auto it = leaf.find(n); it != leaf.end()) return {1, it->second};
        if (n->op == Op::constant) return {2, n->bits};
      }
      if (auto it = at.find(n); it != at.end()) return {0, it->second};
      if (!n->shape.empty() || !(op_info(n->op).flags & F_ELEMENTWISE) || n->num_operands() > 3)
        cannot("the host value " + s.var + " needs " + op_name(n->op) + ", not host scalar math");
      NodeEval::Ins ins;
      ins.op = n->op;
      ins.out = n->dtype;
      ins.in = n->op == Op::select ? n->operand(1)->dtype : n->operand(0)->dtype;
      ins.n = n->num_operands();
      for (int k = 0; k < ins.n; ++k) ins.a[k] = visit(n->operand(k));
      out.code.push_back(ins);
      at[n] = static_cast<int>(out.code.size()) - 1;
      return {0, at[n]};
    };
    visit(s.node);
  }

  void compile(const std::vector<PlanStep>& in, std::vector<XStep>& out) {
    for (const PlanStep& s : in) {
      XStep x;
      x.kind = s.kind;
      switch (s.kind) {
        case PlanStep::Kind::dispatch: {
          const PlanKernel& k = plan.kernels.at(s.kernel);
          x.kernel = k.kernel;
          if (k.binding_buffers.size() != x.kernel->memories().size() || s.shape.size() != x.kernel->shape.size())
            cannot("dispatch of " + k.name + " does not match its kernel's memories or shape");
          for (const std::string& b : k.binding_buffers) x.memories.push_back(buffer_of(b));
          for (const std::string& d : s.shape) x.dims.emplace_back(d, DType::i32, symbols);
          const std::vector<ParamField>& fields = k.abi.params.fields;
          if (fields.size() != s.params.size()) cannot("dispatch of " + k.name + " lacks parameter values");
          for (size_t i = 0; i < fields.size(); ++i)
            if (fields[i].value) x.params.emplace_back(s.params[i].second, fields[i].type, symbols);
          if (x.params.size() != x.kernel->params().size()) cannot("dispatch of " + k.name + " has the wrong parameter count");
          break;
        }
        case PlanStep::Kind::loop:
          x.a = PlanValue(s.begin, DType::i32, symbols);
          x.b = PlanValue(s.end, DType::i32, symbols);
          x.c = PlanValue(s.step, DType::i32, symbols);
          x.slot = symbols.add(s.var, DType::i32);
          compile(s.body, x.body);
          break;
        case PlanStep::Kind::if_:
          x.a = PlanValue(s.cond, DType::boolean, symbols);
          compile(s.body, x.body);
          compile(s.else_body, x.else_body);
          break;
        case PlanStep::Kind::let:
          if (s.node) compile_node(s, x.node);
          else x.a = PlanValue(s.value, s.dtype, symbols);
          x.slot = symbols.add(s.var, s.dtype);
          x.dtype = s.dtype;
          break;
        case PlanStep::Kind::copy: {
          x.buffer = buffer_of(s.dst);
          x.src = buffer_of(s.src);
          x.a = PlanValue(s.count, DType::i32, symbols);
          const PlanBuffer& src = plan.buffers[static_cast<size_t>(x.src)];
          const PlanBuffer& dst = plan.buffers[static_cast<size_t>(x.buffer)];
          // The storage moves as in the interpreter when both are allocations of the plan and
          // no output returns src (outputs are read when the plan ends).
          x.swap = src.node->op == Op::buffer && dst.node->op == Op::buffer && src.role != BufferRole::output &&
                   src.count == s.count && dst.count == s.count && src.dtype == dst.dtype;
          break;
        }
        case PlanStep::Kind::fill:
          x.buffer = buffer_of(s.buffer);
          x.a = PlanValue(s.count, DType::i32, symbols);
          x.word = static_cast<uint32_t>(s.fill_word);
          break;
        case PlanStep::Kind::store:
          x.buffer = buffer_of(s.buffer);
          x.a = PlanValue(s.index, DType::i32, symbols);
          x.b = PlanValue(s.value, s.dtype, symbols);
          x.dtype = s.dtype;
          break;
        case PlanStep::Kind::readback:
          x.buffer = buffer_of(s.buffer);
          x.a = PlanValue(s.index, DType::i32, symbols);
          x.slot = symbols.add(s.into, s.dtype);
          x.dtype = s.dtype;
          break;
      }
      out.push_back(std::move(x));
    }
  }
};

namespace {

// One run's state: name slots, buffers (and their shapes), scratch for dispatches.
struct Frame {
  KernelRunner& runner;
  std::vector<int64_t> slots;
  std::vector<HostTensor> buffers;
  std::vector<std::vector<int64_t>> shapes;
  // Per buffer, the ShapeError of a size that failed when the plan started (empty: none failed).
  // It is raised where the buffer is first used: the interpreter allocates a buffer where its
  // node runs, so one in a branch not taken never fails.
  std::vector<std::exception_ptr> bad;
  std::vector<HostTensor*> memories;
  std::vector<uint32_t> params;
  std::vector<int64_t> dims;
};

void eval_shape(const std::vector<PlanValue>& exprs, const Node* n, Frame& f, std::vector<int64_t>& out) {
  out.resize(exprs.size());
  for (size_t k = 0; k < exprs.size(); ++k) {
    const int64_t v = plan_slot_value(exprs[k].eval(f.slots.data()), DType::i32);
    if (v < 0) throw_negative_dim(n->shape[k], v);
    out[k] = v;
  }
  if (!out.empty() && elements_capped(out) > kMaxTensorElements) throw_too_large(n, n->shape, out);
}

HostTensor& buffer(Frame& f, int i) {
  const size_t u = static_cast<size_t>(i);
  if (!f.bad.empty() && f.bad[u]) std::rethrow_exception(f.bad[u]);
  return f.buffers[u];
}

void exec(const std::vector<XStep>& steps, Frame& f) {
  int64_t* s = f.slots.data();
  for (const XStep& x : steps) {
    switch (x.kind) {
      case PlanStep::Kind::dispatch: {
        eval_shape(x.dims, x.kernel, f, f.dims);
        f.memories.clear();
        for (int m : x.memories) f.memories.push_back(&buffer(f, m));
        f.params.clear();
        for (const PlanValue& v : x.params) f.params.push_back(v.word(s));
        f.runner.run_kernel(x.kernel, f.memories, f.params, f.dims);
        break;
      }
      case PlanStep::Kind::loop: {
        const int64_t b = plan_slot_value(x.a.eval(s), DType::i32), e = plan_slot_value(x.b.eval(s), DType::i32);
        const int64_t st = plan_slot_value(x.c.eval(s), DType::i32);
        EMBER_INTERNAL_ASSERT(st != 0, "a host plan loop has step 0");
        for (int64_t k = b; st > 0 ? k < e : k > e; k += st) {
          s[x.slot] = plan_slot_value(k, DType::i32);
          exec(x.body, f);
        }
        break;
      }
      case PlanStep::Kind::if_:
        exec(x.a.eval(s) != 0 ? x.body : x.else_body, f);
        break;
      case PlanStep::Kind::let:
        s[x.slot] = x.node.code.empty() ? plan_slot_value(x.a.eval(s), x.dtype) : plan_word_value(x.node.eval(s), x.dtype);
        break;
      case PlanStep::Kind::copy: {
        HostTensor& dst = buffer(f, x.buffer);
        HostTensor& src = buffer(f, x.src);
        const int64_t count = x.a.eval(s);
        EMBER_INTERNAL_ASSERT(count >= 0 && count <= dst.size() && count <= src.size(),
                              "a host plan copy of " << count << " words between buffers of " << src.size() << " and "
                                                     << dst.size());
        if (x.swap && dst.size() == src.size()) {
          std::swap(dst, src);
        } else {
          f.runner.synchronize();
          std::memmove(dst.data, src.data, static_cast<size_t>(count) * 4);
        }
        break;
      }
      case PlanStep::Kind::fill: {
        HostTensor& b = buffer(f, x.buffer);
        const int64_t count = x.a.eval(s);
        EMBER_INTERNAL_ASSERT(count >= 0 && count <= b.size(), "a host plan fill of " << count << " words of " << b.size());
        if (x.word == 0 && count == b.size()) {
          // A fresh zero-filled allocation, as the interpreter makes each time it runs `buffer`.
          b = f.runner.allocate(b.dtype, f.shapes[static_cast<size_t>(x.buffer)]);
        } else {
          f.runner.synchronize();
          std::fill(b.data, b.data + count, x.word);
        }
        break;
      }
      case PlanStep::Kind::store: {
        f.runner.synchronize();
        HostTensor& b = buffer(f, x.buffer);
        const int64_t i = x.a.eval(s);
        EMBER_INTERNAL_ASSERT(i >= 0 && i < b.size(), "a host plan store to element " << i << " of " << b.size());
        b.data[i] = x.b.word(s);
        break;
      }
      case PlanStep::Kind::readback: {
        f.runner.synchronize();
        const HostTensor& b = buffer(f, x.buffer);
        const int64_t i = x.a.eval(s);
        EMBER_INTERNAL_ASSERT(i >= 0 && i < b.size(), "a host plan readback of element " << i << " of " << b.size());
        s[x.slot] = plan_word_value(b.data[i], x.dtype);
        break;
      }
    }
  }
}

}  // namespace

PlanExecutor::PlanExecutor(const Program& p, HostPlan plan) : impl_(std::make_unique<Impl>(p, std::move(plan))) {
  impl_->prepare();
}

PlanExecutor::~PlanExecutor() = default;

const HostPlan& PlanExecutor::plan() const { return impl_->plan; }

std::vector<HostTensor> PlanExecutor::run(const std::vector<ArgValue>& args, KernelRunner& runner) const {
  const Impl& m = *impl_;
  runner.begin_run();
  try {
    const std::vector<int64_t> dim_values = bind_arguments(m.p, args);
    std::vector<int64_t> dims;
    for (const StaticShape& st : m.static_shapes) {
      dims.clear();
      for (int64_t d : st.dims) dims.push_back(d >= 0 ? d : dim_values.at(static_cast<size_t>(-1 - d)));
      if (elements_capped(dims) > kMaxTensorElements) throw_too_large(st.node, st.node->shape, dims);
    }
    Frame f{runner, std::vector<int64_t>(static_cast<size_t>(m.symbols.size()), 0), {}, {}, {}, {}, {}, {}};
    for (const auto& [slot, at] : m.dims)
      f.slots[static_cast<size_t>(slot)] = args[static_cast<size_t>(at.first)].tensor.shape[static_cast<size_t>(at.second)];
    for (const auto& [slot, arg] : m.scalars)
      f.slots[static_cast<size_t>(slot)] = plan_word_value(args[static_cast<size_t>(arg)].word, m.symbols.dtype(slot));
    exec(m.prologue, f);
    f.buffers.resize(m.buffers.size());
    f.shapes.resize(m.buffers.size());
    for (size_t i = 0; i < m.buffers.size(); ++i) {
      const XBuffer& b = m.buffers[i];
      if (b.arg >= 0) {
        f.buffers[i] = runner.bind_input(b.node, args[static_cast<size_t>(b.arg)].tensor);
        continue;
      }
      try {
        eval_shape(b.shape, b.node, f, f.shapes[i]);
      } catch (const ShapeError&) {
        f.bad.resize(m.buffers.size());
        f.bad[i] = std::current_exception();
        continue;
      }
      f.buffers[i] = runner.allocate(b.dtype, f.shapes[i]);  // zero-filled
    }
    exec(m.steps, f);
    std::vector<HostTensor> out(m.outputs.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const XOutput& o = m.outputs[i];
      out[i] = o.buffer >= 0 ? buffer(f, o.buffer) : HostTensor::scalar(o.dtype, o.value.word(f.slots.data()));
    }
    runner.end_run(true);
    return out;
  } catch (...) {
    runner.end_run(false);
    throw;
  }
}

}  // namespace ember

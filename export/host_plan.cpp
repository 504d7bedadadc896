#include "export/host_plan.h"

#include <unordered_map>
#include <unordered_set>

#include "backends/gpu_kernel.h"
#include "codegen/kernel_signature.h"
#include "export/plan_expr.h"

namespace ember {

const char* buffer_role_name(BufferRole r) {
  switch (r) {
    case BufferRole::input: return "input";
    case BufferRole::output: return "output";
    case BufferRole::inout: return "inout";
    case BufferRole::temp: return "temp";
    case BufferRole::state: return "state";
  }
  return "?";
}

namespace {

constexpr int64_t kMaxGroupsX = 65535;  // the group count every Vulkan/D3D11/GL device allows per axis

bool identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

bool simple(const std::string& e) { return identifier(e) || e.find_first_not_of("0123456789") == std::string::npos; }

// The product of expressions, constant factors folded ("N*3"; "12"; "1" for none).
std::string product(const std::vector<std::string>& factors) {
  int64_t c = 1;
  std::string s;
  for (const std::string& f : factors) {
    if (!f.empty() && f.find_first_not_of("0123456789") == std::string::npos) {
      c *= std::stoll(f);
      continue;
    }
    s += (s.empty() ? "" : "*") + (simple(f) ? f : "(" + f + ")");
  }
  if (c == 0) return "0";
  if (s.empty()) return std::to_string(c);
  return c == 1 ? s : s + "*" + std::to_string(c);
}

bool constant_text(const std::string& e) { return !e.empty() && e.find_first_not_of("0123456789") == std::string::npos; }

class PlanBuilder {
 public:
  PlanBuilder(const Program& p, KernelApi api, const std::vector<std::pair<std::string, int64_t>>& fixed,
              const Program* traced, bool runtime)
      : p_(p), traced_(traced), x_(p.name), fixed_(fixed), runtime_(runtime) {
    plan_.program = p.name;
    plan_.api = api;
    if (runtime) x_.allow_host_values();
  }

  HostPlan run() {
    // Which kernels share a file matters only to an export (the runtime binds each kernel node to
    // its compiled function itself): runtime plans skip grouping the kernels.
    if (!runtime_) {
      const KernelClasses classes = group_kernels(p_);
      for (size_t i = 0; i < classes.kernels.size(); ++i)
        class_first_[classes.kernels[i]] = classes.representative(static_cast<size_t>(classes.class_of[i]));
    }
    arguments();
    flush(plan_.steps, 0);
    name_outputs(p_.root());
    steps(p_.root()->first_child, plan_.steps, 0);
    std::sort(plan_.outputs.begin(), plan_.outputs.end(), [](const PlanOutput& a, const PlanOutput& b) { return a.index < b.index; });
    return std::move(plan_);
  }

 private:
  [[noreturn]] void fail(const Node* n, const std::string& why) {
    EMBER_USER_ERROR(CompileError, n->loc, "cannot export " << p_.name << ": the host step " << op_name(n->op) << " "
                                                            << why);
  }

  void arguments() {
    std::unordered_set<std::string> used;
    for (const Node* a : p_.args) used.insert(a->name);
    for (size_t j = 0; j < p_.dims.size(); ++j) {
      const Node* d = p_.dims[j];
      std::string name = identifier(d->name) && !used.count(d->name) ? d->name.str() : "dim" + std::to_string(j);
      used.insert(name);
      PlanDim pd;
      pd.name = name;
      for (const auto& [n, v] : fixed_)
        if (n == d->name) pd.value = v;
      bool found = false;
      // A fixed dim no longer appears in the lowered inputs' shapes: find it as traced.
      const Program& shapes = traced_ && j < traced_->dims.size() ? *traced_ : p_;
      const Node* dn = &shapes == &p_ ? d : shapes.dims[j];
      for (const Node* a : shapes.args) {
        if (a->op != Op::input) continue;
        for (size_t k = 0; k < a->shape.size() && !found; ++k)
          if (a->shape[k] == dn) {
            pd.input = a->name;
            pd.axis = static_cast<int>(k);
            found = true;
          }
        if (found) break;
      }
      x_.name(d, name, true);
      if (found) plan_.dims.push_back(pd);
    }
    const std::vector<int> written = written_inputs(p_);
    for (const Node* a : p_.args) {
      std::string name = a->name;
      if (!identifier(name)) {
        // A runtime plan binds arguments by position, so a name like 'model.fc1.weight' (a
        // Module argument's leaf) gets an identifier of its own; an export's manifest names them.
        if (!runtime_) fail(a, "argument '" + a->name + "' has no identifier name");
        name = runtime_arg_name(a->name, used);
      }
      used.insert(name);
      if (a->op == Op::scalar_arg) {
        plan_.args.push_back({name, false});
        plan_.scalars.push_back({name, a->dtype});
        x_.name(a, name, true);
        continue;
      }
      plan_.args.push_back({name, true});
      const bool w = std::find(written.begin(), written.end(), a->index) != written.end();
      add_buffer(a, name, w ? BufferRole::inout : BufferRole::input);
    }
  }

  // `name` with every character that is not a letter, digit or '_' made '_', prefixed "arg_" and
  // numbered until no argument, dim or buffer name uses it.
  static std::string runtime_arg_name(const std::string& name, const std::unordered_set<std::string>& used) {
    std::string base = "arg_";
    for (char c : name) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    std::string s = base;
    for (int k = 1; used.count(s); ++k) s = base + "_" + std::to_string(k);
    return s;
  }

  void add_buffer(const Node* n, const std::string& name, BufferRole role) {
    PlanBuffer b;
    b.name = name;
    b.node = n;
    b.role = role;
    b.dtype = n->dtype;
    b.zero_init = n->op == Op::buffer && n->zero_init;
    for (const Node* d : n->shape) {
      bool start = true;
      b.shape.push_back(x_.start_expr(d, "the size of a buffer", &start));
      if (!start) fail(n, "allocates a buffer whose size depends on a value the plan computes (a loop counter, "
                          "a host variable or a readback); an export allocates every buffer before the plan runs");
    }
    b.count = product(b.shape);
    buffer_names_[n] = plan_.buffers.size();
    plan_.buffers.push_back(std::move(b));
  }

  const PlanBuffer& buffer_of(const Node* mem, const Node* user) {
    auto it = buffer_names_.find(mem);
    if (it == buffer_names_.end()) fail(user, "uses memory " + std::string(op_name(mem->op)) + " that is not a buffer of the plan");
    return plan_.buffers[it->second];
  }

  void name_outputs(const Node* scope) {
    for (const Node* c = scope->first_child; c; c = c->next) {
      if (c->op == Op::kernel) continue;
      if (c->op == Op::output && c->operand(0)->op == Op::buffer && !output_names_.count(c->operand(0)))
        output_names_[c->operand(0)] = "out" + std::to_string(c->index);
      if (c->first_child) name_outputs(c);
    }
  }

  void steps(const Node* first, std::vector<PlanStep>& out, int depth) {
    for (const Node* n = first; n; n = n->next) {
      const size_t at = out.size();
      step(n, out, depth);
      flush(out, at);
    }
  }

  // Runtime plans: the host values the expressions just built need, as `let`s at `at` (or in the
  // prologue when the dims and scalars alone give them).
  void flush(std::vector<PlanStep>& out, size_t at) {
    std::vector<PlanStep> lets;
    for (HostValue& v : x_.take_host_values()) {
      PlanStep s;
      s.kind = PlanStep::Kind::let;
      s.var = v.name;
      s.value = v.name;
      s.dtype = v.node->dtype;
      s.node = v.node;
      s.leaves = std::move(v.leaves);
      (v.at_start ? plan_.prologue : lets).push_back(std::move(s));
    }
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), std::make_move_iterator(lets.begin()),
               std::make_move_iterator(lets.end()));
  }

  // A let's value: f32 values of a runtime plan are names, literals or host values.
  std::string let_value(const Node* v, const char* what) {
    return runtime_ && v->dtype == DType::f32 ? x_.value(v, what) : x_.expr(v, what);
  }

  void step(const Node* n, std::vector<PlanStep>& out, int depth) {
    PlanStep s;
    switch (n->op) {
      case Op::else_: case Op::constant: case Op::input: case Op::scalar_arg: case Op::shape_arg: return;
      case Op::kernel: dispatch(n, out); return;
      case Op::buffer: {
        auto o = output_names_.find(n);
        std::string name = o != output_names_.end() ? o->second
                           : identifier(n->name) && !taken(n->name) ? n->name.str()
                                                                    : "tmp" + std::to_string(temps_++);
        add_buffer(n, name, o != output_names_.end() ? BufferRole::output : BufferRole::temp);
        if (depth > 0 && n->zero_init) {
          s.kind = PlanStep::Kind::fill;
          s.buffer = name;
          s.count = plan_.buffers.back().count;
          out.push_back(std::move(s));
        }
        return;
      }
      case Op::loop: {
        if (!n->shape.empty()) fail(n, "is a device loop outside a kernel");
        s.kind = PlanStep::Kind::loop;
        s.var = "k" + std::to_string(loops_++);
        s.begin = x_.expr(n->operand(0), "a host loop's start");
        s.end = x_.expr(n->operand(1), "a host loop's end");
        s.step = x_.expr(n->operand(2), "a host loop's step");
        flush(out, out.size());
        x_.name(n, s.var, false);
        steps(n->first_child, s.body, depth + 1);
        out.push_back(std::move(s));
        return;
      }
      case Op::if_: {
        if (!n->shape.empty()) fail(n, "is a device branch outside a kernel");
        s.kind = PlanStep::Kind::if_;
        s.cond = x_.expr(n->operand(0), "a host branch's condition");
        flush(out, out.size());
        steps(n->first_child, s.body, depth + 1);
        if (n->next && n->next->op == Op::else_) steps(n->next->first_child, s.else_body, depth + 1);
        out.push_back(std::move(s));
        return;
      }
      case Op::var: case Op::set: {
        const Node* var = n->op == Op::var ? n : n->operand(0);
        if (!var->shape.empty()) fail(n, "is a tensor variable outside a kernel");
        s.kind = PlanStep::Kind::let;
        if (n->op == Op::var) x_.name(n, "v" + std::to_string(vars_++), false);
        s.var = *x_.name_of(var);
        s.dtype = var->dtype;
        s.value = let_value(n->operand(n->op == Op::var ? 0 : 1), "a host variable");
        out.push_back(std::move(s));
        return;
      }
      case Op::move_memory: {
        s.kind = PlanStep::Kind::copy;
        const PlanBuffer& src = buffer_of(n->operand(1), n);
        s.src = src.name;
        s.count = src.count;
        s.dst = buffer_of(n->operand(0), n).name;
        out.push_back(std::move(s));
        return;
      }
      case Op::load: {
        if (!n->shape.empty() || !n->flat || n->num_operands() != 2) fail(n, "reads a tensor outside a kernel");
        s.kind = PlanStep::Kind::readback;
        s.buffer = buffer_of(n->operand(0), n).name;
        s.index = x_.expr(n->operand(1), "a readback's index");
        s.into = "r" + std::to_string(readbacks_++);
        s.dtype = n->dtype;
        x_.name(n, s.into, false);
        out.push_back(std::move(s));
        return;
      }
      case Op::store: {
        // A host write of one element (e.g. an optimizer's step counter): runtime plans only.
        if (!runtime_ || !n->shape.empty() || !n->flat || n->num_operands() != 3) break;
        s.kind = PlanStep::Kind::store;
        s.buffer = buffer_of(n->operand(0), n).name;
        s.dtype = n->operand(1)->dtype;
        s.value = let_value(n->operand(1), "a stored value");
        s.index = x_.expr(n->operand(2), "a store's index");
        out.push_back(std::move(s));
        return;
      }
      case Op::output: {
        PlanOutput o;
        o.index = n->index;
        const Node* v = n->operand(0);
        o.dtype = v->dtype;
        if (v->is_memory()) o.buffer = buffer_of(v, n).name;
        else o.value = x_.value(v, "a returned scalar");
        plan_.outputs.push_back(std::move(o));
        return;
      }
      default: break;
    }
    if ((op_info(n->op).flags & F_ELEMENTWISE) && n->shape.empty()) {
      // Pure host math is inlined where it is used; a value of a host variable is taken here.
      bool reads_var = false;
      for (int k = 0; k < n->num_operands(); ++k) reads_var |= n->operand(k)->op == Op::var;
      if (!reads_var || (n->dtype == DType::f32 && !runtime_)) return;
      s.kind = PlanStep::Kind::let;
      s.var = "h" + std::to_string(lets_++);
      s.dtype = n->dtype;
      s.value = let_value(n, "a host value");
      x_.name(n, s.var, false);
      out.push_back(std::move(s));
      return;
    }
    fail(n, n->op == Op::store || n->op == Op::atomic ? "writes a buffer element from the host; the manifest's plan has "
                                                        "no such step (write it inside a kernel)"
                                                      : "has no manifest step (dispatch, loop, if, let, copy, fill, "
                                                        "readback)");
  }

  bool taken(const std::string& name) const {
    for (const PlanBuffer& b : plan_.buffers)
      if (b.name == name) return true;
    for (const auto& kv : output_names_)
      if (kv.second == name) return true;
    for (const PlanScalar& s : plan_.scalars)
      if (s.name == name) return true;
    return false;
  }

  void dispatch(const Node* k, std::vector<PlanStep>& out) {
    PlanKernel pk;
    pk.name = p_.name + "_k" + std::to_string(plan_.kernels.size());
    pk.kernel = k;
    pk.abi = kernel_abi(k, plan_.api);
    pk.file_of = plan_.kernels.size();
    const auto first = class_first_.find(k);
    if (first != class_first_.end() && first->second != k) {
      const auto it = kernel_index_.find(first->second);
      if (it != kernel_index_.end()) pk.file_of = plan_.kernels[it->second].file_of;
    }
    kernel_index_.emplace(k, plan_.kernels.size());
    for (const KernelBinding& b : pk.abi.bindings) pk.binding_buffers.push_back(buffer_of(b.memory, k).name);

    PlanStep s;
    s.kind = PlanStep::Kind::dispatch;
    s.kernel = plan_.kernels.size();
    const bool grouped = !k->group.empty() && plan_.api != KernelApi::cpp;
    std::vector<std::string> factors;
    int64_t group_threads = 1;
    for (size_t a = 0; a < k->shape.size(); ++a) {
      std::string d = x_.expr(k->shape[a], "a kernel's thread count");
      s.shape.push_back(d);
      if (grouped) {
        const int g = k->group[a];
        group_threads *= g;
        if (g != 1) {
          if (constant_text(d)) d = std::to_string((std::stoll(d) + g - 1) / g);
          else d = "(" + d + "+" + std::to_string(g - 1) + ")/" + std::to_string(g);
        }
      }
      factors.push_back(d);
    }
    if (grouped) factors.push_back(std::to_string(group_threads));
    s.threads = product(factors);
    std::string row;
    if (plan_.api != KernelApi::cpp) {
      const int64_t L = pk.abi.local_size;
      if (constant_text(s.threads)) {
        const int64_t g = (std::stoll(s.threads) + L - 1) / L, gx = std::min(g, kMaxGroupsX);
        s.groups = {std::to_string(gx), std::to_string((g + kMaxGroupsX - 1) / kMaxGroupsX), "1"};
        row = std::to_string(gx * L);
      } else {
        const std::string t = simple(s.threads) ? s.threads : "(" + s.threads + ")";
        const std::string g = "(" + t + "+" + std::to_string(L - 1) + ")/" + std::to_string(L);
        s.groups = {"min(" + g + "," + std::to_string(kMaxGroupsX) + ")",
                    "(" + g + "+" + std::to_string(kMaxGroupsX - 1) + ")/" + std::to_string(kMaxGroupsX), "1"};
        row = s.groups[0] + "*" + std::to_string(L);
      }
    }
    for (const ParamField& f : pk.abi.params.fields) {
      if (!f.value) s.params.emplace_back(f.name, f.name == "threads" ? s.threads : row);
      else s.params.emplace_back(f.name, x_.value(f.value, "a kernel parameter"));
    }
    plan_.kernels.push_back(std::move(pk));
    out.push_back(std::move(s));
  }

  const Program& p_;
  const Program* traced_;
  PlanExprs x_;
  std::vector<std::pair<std::string, int64_t>> fixed_;
  HostPlan plan_;
  std::unordered_map<const Node*, size_t> buffer_names_;
  std::unordered_map<const Node*, std::string> output_names_;
  std::unordered_map<const Node*, const Node*> class_first_;
  std::unordered_map<const Node*, size_t> kernel_index_;  // kernel node -> its first index in plan_.kernels
  int temps_ = 0, loops_ = 0, vars_ = 0, lets_ = 0, readbacks_ = 0;
  bool runtime_ = false;
};

}  // namespace

HostPlan build_host_plan(const Program& p, KernelApi api, const std::vector<std::pair<std::string, int64_t>>& fixed,
                         const Program* traced) {
  return PlanBuilder(p, api, fixed, traced, false).run();
}

HostPlan build_runtime_plan(const Program& p, KernelApi api) { return PlanBuilder(p, api, {}, nullptr, true).run(); }

}  // namespace ember

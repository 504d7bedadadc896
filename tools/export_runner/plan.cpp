// The plan executor of plan.h.
#include "plan.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace runner {

namespace {

constexpr uint32_t kPoison = 0x7FC0DEADu;  // a quiet NaN as f32, a large value as an integer

std::string shape_text(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

uint32_t f32_word(double v) {
  const float f = float(v);
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return w;
}

// A scalar given on the command line, as its dtype reads it.
Num parse_scalar(const ScalarSpec& s, const std::string& text) {
  const std::string what = "--scalar " + s.name + "=" + text;
  try {
    size_t used = 0;
    if (s.dtype == DType::boolean) {
      if (text == "true" || text == "1" || text == "True") return Num::of_int(1);
      if (text == "false" || text == "0" || text == "False") return Num::of_int(0);
      throw std::invalid_argument("bool");
    }
    if (s.dtype == DType::f32) {
      const double v = std::stod(text, &used);
      if (used != text.size()) throw std::invalid_argument("f32");
      return Num::of_float(double(float(v)));  // the program sees an f32
    }
    const long long v = std::stoll(text, &used, 0);
    if (used != text.size()) throw std::invalid_argument("int");
    if (s.dtype == DType::i32 && (v < INT32_MIN || v > INT32_MAX)) throw std::out_of_range("i32");
    if (s.dtype == DType::u32 && (v < 0 || v > UINT32_MAX)) throw std::out_of_range("u32");
    return Num::of_int(v);
  } catch (const std::logic_error&) {
    throw std::runtime_error(what + ": not a valid " + dtype_name(s.dtype) + " value");
  }
}

class Executor {
 public:
  Executor(const Manifest& m, Device& dev, const RunOptions& opt) : m_(m), dev_(dev), opt_(opt) {}

  RunResult run() {
    const auto t0 = std::chrono::steady_clock::now();
    Env env;
    bind_dims(env);
    bind_scalars(env);
    create_buffers(env);
    for (size_t k = 0; k < m_.kernels.size(); ++k) dev_.load_kernel(int(k), m_.kernels[k], m_);
    dev_.finish();
    const auto t1 = std::chrono::steady_clock::now();
    const Env start = env;
    double best_ms = 0;
    std::ofstream trace_file;
    if (!opt_.trace_path.empty()) {
      trace_file.open(opt_.trace_path);
      if (!trace_file) throw std::runtime_error("--trace: cannot create " + opt_.trace_path);
    }
    for (int r = 0; r <= opt_.repeat; ++r) {  // extra runs time the plan once shaders are warm
      trace_ = r == 0 && trace_file.is_open() ? &trace_file : nullptr;
      env = start;
      init_buffers();
      dispatches_ = 0;
      const auto a = std::chrono::steady_clock::now();
      run_steps(m_.plan, env);
      dev_.finish();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
      best_ms = r == 0 ? ms : std::min(best_ms, ms);
      if (r == 0) first_ms_ = ms;
    }
    for (const OutputSpec& o : m_.outputs) {
      if (!o.value) continue;
      const Num v = convert(o.value->eval(env), o.dtype);
      NpyArray a;
      a.dtype = o.dtype;
      a.words = {o.dtype == DType::f32 ? f32_word(v.f) : uint32_t(v.i)};
      value_outputs_["out" + std::to_string(o.index)] = std::move(a);
    }
    RunResult r;
    for (size_t i = 0; i < m_.buffers.size(); ++i) {
      const BufferSpec& b = m_.buffers[i];
      if (b.role != Role::output && b.role != Role::inout && b.role != Role::state) continue;
      NpyArray a;
      a.dtype = b.dtype;
      a.shape = shapes_[i];
      a.words.resize(counts_[i]);
      if (counts_[i]) dev_.read(int(i), 0, a.words.data(), counts_[i]);
      r.outputs[b.name] = std::move(a);
    }
    for (auto& kv : value_outputs_) r.outputs[kv.first] = std::move(kv.second);
    r.setup_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    r.plan_ms = first_ms_;
    r.best_plan_ms = best_ms;
    r.dispatches = dispatches_;
    return r;
  }

 private:
  const Manifest& m_;
  Device& dev_;
  const RunOptions& opt_;
  std::vector<int64_t> counts_;
  std::vector<std::vector<int64_t>> shapes_;
  int64_t dispatches_ = 0;
  double first_ms_ = 0;
  std::ostream* trace_ = nullptr;  // --trace: the first run's dispatches, copies, fills, readbacks

  void trace(const std::string& line) {
    if (trace_) *trace_ << line << "\n";
  }

  static std::string hex(uint32_t w) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08X", w);
    return buf;
  }

  // The kernel's file name without folder and extension: its entry in HLSL, the same in every target.
  static std::string kernel_stem(const KernelSpec& k) {
    std::string f = k.file.substr(k.file.find_last_of('/') + 1);
    return f.substr(0, f.find('.'));
  }
  std::map<std::string, NpyArray> value_outputs_;  // host-value outputs, 0-d, named out<index>

  void bind_dims(Env& env) {
    for (const auto& kv : opt_.dims) {
      bool known = false;
      for (const auto& d : m_.dims) known |= d.name == kv.first;
      if (!known) throw std::runtime_error("--dim " + kv.first + ": the export has no dim named " + kv.first);
    }
    for (const DimSpec& d : m_.dims) {
      int64_t v = -1;
      std::string how;
      if (!d.from_input.empty()) {
        auto it = opt_.inputs.find(d.from_input);
        if (it != opt_.inputs.end()) {
          const auto& shape = it->second.shape;
          if (d.axis < 0 || d.axis >= int(shape.size()))
            throw std::runtime_error("dim " + d.name + " is axis " + std::to_string(d.axis) + " of input " + d.from_input +
                                     ", which has shape " + shape_text(shape));
          v = shape[d.axis];
          how = "input " + d.from_input;
        }
      }
      if (auto it = opt_.dims.find(d.name); it != opt_.dims.end()) {
        how = how.empty() ? "--dim " + d.name : how;
        if (v >= 0 && v != it->second)
          throw std::runtime_error("--dim " + d.name + "=" + std::to_string(it->second) + " disagrees with " + how +
                                   " (" + std::to_string(v) + ")");
        v = it->second;
      }
      if (d.value && v >= 0 && v != *d.value)
        throw std::runtime_error("dim " + d.name + " was fixed to " + std::to_string(*d.value) + " at export; " + how +
                                 " gives " + std::to_string(v) + " (re-export for this size)");
      if (v < 0 && d.value) v = *d.value;
      if (v < 0)
        throw std::runtime_error("dim " + d.name + " is unbound: " +
                                 (d.from_input.empty() ? "give --dim " + d.name + "=VALUE"
                                                       : "give --in " + d.from_input + "=FILE.npy"));
      env[d.name] = Num::of_int(v);
    }
  }

  void bind_scalars(Env& env) {
    for (const auto& kv : opt_.scalars) {
      bool known = false;
      for (const auto& s : m_.scalars) known |= s.name == kv.first;
      if (!known) throw std::runtime_error("--scalar " + kv.first + ": the export has no scalar named " + kv.first + known_scalars());
    }
    for (const ScalarSpec& s : m_.scalars) {
      auto it = opt_.scalars.find(s.name);
      if (it != opt_.scalars.end()) env[s.name] = parse_scalar(s, it->second);
      else if (s.default_value) env[s.name] = *s.default_value;
      else throw std::runtime_error("missing scalar " + s.name + " (" + dtype_name(s.dtype) + "): give --scalar " + s.name + "=VALUE");
    }
  }

  std::string known_scalars() const {
    std::string r;
    for (const auto& s : m_.scalars) r += (r.empty() ? " (scalars: " : ", ") + s.name;
    return r.empty() ? " (it has none)" : r + ")";
  }

  void create_buffers(const Env& env) {
    for (const auto& kv : opt_.inputs) {
      const int i = m_.buffer_index(kv.first);
      const bool is_input = i >= 0 && (m_.buffers[i].role == Role::input || m_.buffers[i].role == Role::inout ||
                                       m_.buffers[i].role == Role::state);
      if (!is_input) {
        std::string names;
        for (const auto& b : m_.buffers)
          if (b.role == Role::input || b.role == Role::inout || b.role == Role::state) names += (names.empty() ? "" : ", ") + b.name;
        throw std::runtime_error("--in " + kv.first + ": the export has no input named " + kv.first + " (inputs: " + names + ")");
      }
    }
    counts_.resize(m_.buffers.size());
    shapes_.resize(m_.buffers.size());
    for (size_t i = 0; i < m_.buffers.size(); ++i) {
      const BufferSpec& b = m_.buffers[i];
      for (const Expr& e : b.shape) shapes_[i].push_back(int_value(e.eval(env), "extent of buffer " + b.name));
      const int64_t count = int_value(b.count.eval(env), "element count of buffer " + b.name);
      if (count < 0 || count > (int64_t(1) << 31) - 1)
        throw std::runtime_error("buffer " + b.name + " has " + std::to_string(count) + " elements (" + b.count.text() + ")");
      counts_[i] = count;
      dev_.create_buffer(int(i), size_t(std::max<int64_t>(count, 1)));
      auto in = opt_.inputs.find(b.name);
      if (in != opt_.inputs.end()) {
        const NpyArray& a = in->second;
        if (a.dtype != b.dtype)
          throw std::runtime_error("--in " + b.name + ": the file holds " + dtype_name(a.dtype) + ", the export expects " +
                                   dtype_name(b.dtype));
        if (a.shape != shapes_[i])
          throw std::runtime_error("--in " + b.name + ": shape " + shape_text(a.shape) + ", the export expects " +
                                   shape_text(shapes_[i]));
        if (int64_t(a.words.size()) != count)
          throw std::runtime_error("--in " + b.name + ": " + std::to_string(a.words.size()) + " elements, the manifest counts " +
                                   std::to_string(count) + " (" + b.count.text() + ")");
      } else if (b.role == Role::input || b.role == Role::inout) {
        throw std::runtime_error("missing input " + b.name + " (" + dtype_name(b.dtype) + ", shape " + shape_text(shapes_[i]) +
                                 "): give --in " + b.name + "=FILE.npy");
      }
    }
  }

  // Every buffer's contents before a run: the inputs uploaded, the rest zeroed (or poisoned).
  void init_buffers() {
    for (size_t i = 0; i < m_.buffers.size(); ++i) {
      const BufferSpec& b = m_.buffers[i];
      if (!counts_[i]) continue;
      auto in = opt_.inputs.find(b.name);
      if (in != opt_.inputs.end()) dev_.write(int(i), 0, in->second.words.data(), size_t(counts_[i]));
      else dev_.fill(int(i), 0, size_t(counts_[i]), b.zero_init || !opt_.poison ? 0u : kPoison);
      if (in == opt_.inputs.end() && b.zero_init) trace("fill " + b.name + " 0 " + std::to_string(counts_[i]) + " 0x00000000");
    }
    dev_.finish();
  }

  static int64_t int_value(const Num& n, const std::string& what) {
    if (n.is_float) throw std::runtime_error(what + " is a float (" + std::to_string(n.f) + "), expected an integer");
    return n.i;
  }

  void run_steps(const std::vector<Step>& steps, Env& env) {
    for (const Step& s : steps) run_step(s, env);
  }

  void check_range(int buf, int64_t offset, int64_t count, const Step& s) const {
    if (offset < 0 || count < 0 || offset + count > counts_[buf])
      throw std::runtime_error(s.where + ": elements [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                               ") are outside buffer " + m_.buffers[buf].name + " (" + std::to_string(counts_[buf]) +
                               " elements)");
  }

  void run_step(const Step& s, Env& env) {
    switch (s.op) {
      case Step::dispatch: return dispatch(s, env);
      case Step::loop: {
        const int64_t begin = s.begin ? int_value(s.begin->eval(env), s.where + " begin") : 0;
        const int64_t step = s.step ? int_value(s.step->eval(env), s.where + " step") : 1;
        if (step == 0) return;
        if (s.count) {
          const int64_t count = int_value(s.count->eval(env), s.where + " count");
          for (int64_t k = 0; k < count; ++k) {
            Env inner = env;
            if (!s.var.empty()) inner[s.var] = Num::of_int(begin + k * step);
            run_steps(s.body, inner);
            carry_back(env, inner, s.var);
          }
        } else {
          const int64_t end = int_value(s.end->eval(env), s.where + " end");
          for (int64_t v = begin; step > 0 ? v < end : v > end; v += step) {
            Env inner = env;
            if (!s.var.empty()) inner[s.var] = Num::of_int(v);
            run_steps(s.body, inner);
            carry_back(env, inner, s.var);
          }
        }
        return;
      }
      case Step::if_:
        run_steps(s.cond->eval(env).as_double() != 0 ? s.body : s.else_body, env);
        return;
      case Step::copy: {
        const int64_t n = int_value(s.count->eval(env), s.where + " count");
        const int64_t so = s.src_offset ? int_value(s.src_offset->eval(env), s.where + " src_offset") : 0;
        const int64_t d = s.dst_offset ? int_value(s.dst_offset->eval(env), s.where + " dst_offset") : 0;
        check_range(s.src, so, n, s);
        check_range(s.dst, d, n, s);
        if (n) dev_.copy(s.src, size_t(so), s.dst, size_t(d), size_t(n));
        if (n)
          trace("copy " + m_.buffers[s.src].name + " " + m_.buffers[s.dst].name + " " + std::to_string(so) + " " +
                std::to_string(d) + " " + std::to_string(n));
        return;
      }
      case Step::fill: {
        const int64_t off = s.offset ? int_value(s.offset->eval(env), s.where + " offset") : 0;
        const int64_t n = s.count ? int_value(s.count->eval(env), s.where + " count") : counts_[s.buffer] - off;
        check_range(s.buffer, off, n, s);
        const uint32_t w = s.fill_word ? *s.fill_word : word_of(s.value->eval(env), m_.buffers[s.buffer].dtype, s.where);
        if (n) dev_.fill(s.buffer, size_t(off), size_t(n), w);
        if (n) trace("fill " + m_.buffers[s.buffer].name + " " + std::to_string(off) + " " + std::to_string(n) + " " + hex(w));
        return;
      }
      case Step::readback: {
        const int64_t idx = s.index ? int_value(s.index->eval(env), s.where + " index") : 0;
        check_range(s.buffer, idx, 1, s);
        uint32_t w = 0;
        dev_.read(s.buffer, size_t(idx), &w, 1);
        trace("readback " + m_.buffers[s.buffer].name + " " + std::to_string(idx) + " = " + hex(w));
        env[s.into] = value_of(w, s.dtype ? *s.dtype : m_.buffers[s.buffer].dtype);
        if (opt_.verbose) std::cerr << "export_runner: " << s.where << ": " << s.into << " = " << env[s.into].as_double() << "\n";
        return;
      }
      case Step::let: {
        const Num v = s.value->eval(env);
        env[s.into] = s.dtype ? convert(v, *s.dtype) : v;
        return;
      }
    }
  }

  // Names a loop body set (readbacks, set steps) stay visible after it, as in C's outer scope.
  static void carry_back(Env& outer, const Env& inner, const std::string& var) {
    for (const auto& kv : inner)
      if (kv.first != var) outer[kv.first] = kv.second;
  }

  static uint32_t word_of(const Num& v, DType t, const std::string& where) {
    switch (t) {
      case DType::f32: return f32_word(v.as_double());
      case DType::boolean: return v.as_double() != 0;
      case DType::i32:
      case DType::u32:
        if (v.is_float) throw std::runtime_error(where + ": a float value for an integer buffer");
        return uint32_t(v.i);
    }
    return 0;
  }

  // A host value as the dtype holds it (C conversions: f32 rounds, i32/u32 wrap, bool tests != 0).
  static Num convert(const Num& v, DType t) {
    switch (t) {
      case DType::f32: return Num::of_float(double(float(v.as_double())));
      case DType::i32: return Num::of_int(int32_t(uint32_t(v.is_float ? int64_t(v.f) : v.i)));
      case DType::u32: return Num::of_int(uint32_t(v.is_float ? int64_t(v.f) : v.i));
      case DType::boolean: return Num::of_int(v.as_double() != 0);
    }
    return v;
  }

  static Num value_of(uint32_t w, DType t) {
    switch (t) {
      case DType::f32: {
        float f;
        std::memcpy(&f, &w, 4);
        return Num::of_float(f);
      }
      case DType::i32: return Num::of_int(int32_t(w));
      case DType::u32: return Num::of_int(w);
      case DType::boolean: return Num::of_int(w != 0);
    }
    return {};
  }

  void dispatch(const Step& s, const Env& env) {
    const KernelSpec& k = m_.kernels[s.kernel];
    std::array<uint32_t, 3> groups{1, 1, 1};
    for (int a = 0; a < 3; ++a) {
      if (!s.groups[a]) continue;
      const int64_t g = int_value(s.groups[a]->eval(env), s.where + " groups[" + std::to_string(a) + "]");
      if (g < 0 || g > UINT32_MAX)
        throw std::runtime_error(s.where + ": group count " + std::to_string(g) + " (" + s.groups[a]->text() + ") out of range");
      groups[a] = uint32_t(g);
    }
    if (groups[0] == 0 || groups[1] == 0 || groups[2] == 0) return;
    std::vector<uint8_t> bytes(size_t(k.params.size), 0);
    for (const auto& [f, e] : s.param_values) {
      const ParamField& pf = k.params.fields[f];
      const Num v = e.eval(env);
      uint32_t w;
      const std::string what = s.where + ": parameter " + pf.name + " (" + pf.type + ") = " + e.text();
      if (pf.type == "f32") {
        w = f32_word(v.as_double());
      } else if (pf.type == "bool") {
        w = v.as_double() != 0;
      } else {
        if (v.is_float) throw std::runtime_error(what + " is a float");
        if (pf.type == "i32" && (v.i < INT32_MIN || v.i > INT32_MAX))
          throw std::runtime_error(what + " = " + std::to_string(v.i) + " does not fit in i32");
        if (pf.type == "u32" && (v.i < INT32_MIN || v.i > UINT32_MAX))
          throw std::runtime_error(what + " = " + std::to_string(v.i) + " does not fit in u32");
        w = uint32_t(v.i);
      }
      std::memcpy(bytes.data() + pf.offset, &w, 4);
    }
    ++dispatches_;
    dev_.dispatch(s.kernel, groups, bytes);
    if (trace_) {
      std::string line = "dispatch " + kernel_stem(k) + " " + std::to_string(groups[0]) + " " + std::to_string(groups[1]) +
                         " " + std::to_string(groups[2]);
      for (const ParamField& f : k.params.fields) {
        uint32_t w;
        std::memcpy(&w, bytes.data() + f.offset, 4);
        line += " " + f.name + "=" + hex(w);
      }
      trace(line);
    }
  }
};

}  // namespace

RunResult run_export(const Manifest& m, Device& dev, const RunOptions& opt) { return Executor(m, dev, opt).run(); }

}  // namespace runner

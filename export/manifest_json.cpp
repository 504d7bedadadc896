#include "export/manifest_json.h"

#include <vector>

namespace ember {

namespace {

// A JSON value built in key order and printed deterministically.
struct J {
  enum class K { object, array, string, number, boolean } k = K::object;
  std::string text;  // string / number / boolean
  std::vector<std::pair<std::string, J>> fields;
  std::vector<J> items;

  static J str(const std::string& s) { J j; j.k = K::string; j.text = s; return j; }
  static J num(int64_t v) { J j; j.k = K::number; j.text = std::to_string(v); return j; }
  static J boolean(bool b) { J j; j.k = K::boolean; j.text = b ? "true" : "false"; return j; }
  static J arr() { J j; j.k = K::array; return j; }
  J& add(const std::string& key, J v) { fields.emplace_back(key, std::move(v)); return *this; }
  J& push(J v) { items.push_back(std::move(v)); return *this; }
  bool scalar() const { return k != K::object && k != K::array; }
};

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out + "\"";
}

std::string inline_text(const J& j) {
  switch (j.k) {
    case J::K::string: return quote(j.text);
    case J::K::number: case J::K::boolean: return j.text;
    case J::K::array: {
      std::string s = "[";
      for (size_t i = 0; i < j.items.size(); ++i) s += (i ? ", " : "") + inline_text(j.items[i]);
      return s + "]";
    }
    case J::K::object: {
      std::string s = "{";
      for (size_t i = 0; i < j.fields.size(); ++i)
        s += (i ? ", " : "") + quote(j.fields[i].first) + ": " + inline_text(j.fields[i].second);
      return s + "}";
    }
  }
  return "";
}

// Whether `j` prints on one line: scalars, arrays of scalars, and small flat objects.
bool flat(const J& j) {
  if (j.scalar()) return true;
  if (j.k == J::K::array) {
    for (const J& i : j.items)
      if (!i.scalar()) return false;
    return true;
  }
  for (const auto& f : j.fields)
    if (!flat(f.second) || (f.second.k == J::K::array && !f.second.items.empty() && f.first != "shape" &&
                            f.first != "groups" && f.first != "workgroup_size"))
      return false;
  return inline_text(j).size() <= 110;
}

void print(const J& j, int depth, std::string& out) {
  if (flat(j)) {
    out += inline_text(j);
    return;
  }
  const std::string pad(static_cast<size_t>(2 * (depth + 1)), ' '), end(static_cast<size_t>(2 * depth), ' ');
  if (j.k == J::K::array) {
    if (j.items.empty()) { out += "[]"; return; }
    out += "[\n";
    for (size_t i = 0; i < j.items.size(); ++i) {
      out += pad;
      print(j.items[i], depth + 1, out);
      out += i + 1 < j.items.size() ? ",\n" : "\n";
    }
    out += end + "]";
    return;
  }
  out += "{\n";
  for (size_t i = 0; i < j.fields.size(); ++i) {
    out += pad + quote(j.fields[i].first) + ": ";
    print(j.fields[i].second, depth + 1, out);
    out += i + 1 < j.fields.size() ? ",\n" : "\n";
  }
  out += end + "}";
}

J strings(const std::vector<std::string>& v) {
  J a = J::arr();
  for (const std::string& s : v) a.push(J::str(s));
  return a;
}

J steps_json(const HostPlan& plan, const std::vector<PlanStep>& steps) {
  J a = J::arr();
  for (const PlanStep& s : steps) {
    J o;
    switch (s.kind) {
      case PlanStep::Kind::dispatch: {
        o.add("op", J::str("dispatch")).add("kernel", J::str(plan.kernels[s.kernel].name)).add("threads", J::str(s.threads));
        if (!s.groups.empty()) o.add("groups", strings(s.groups));
        J p;
        for (const auto& [k, v] : s.params) p.add(k, J::str(v));
        o.add("params", p);
        break;
      }
      case PlanStep::Kind::loop:
        o.add("op", J::str("loop")).add("var", J::str(s.var)).add("begin", J::str(s.begin)).add("end", J::str(s.end))
            .add("step", J::str(s.step)).add("body", steps_json(plan, s.body));
        break;
      case PlanStep::Kind::if_:
        o.add("op", J::str("if")).add("cond", J::str(s.cond)).add("then", steps_json(plan, s.body))
            .add("else", steps_json(plan, s.else_body));
        break;
      case PlanStep::Kind::let:
        o.add("op", J::str("let")).add("var", J::str(s.var)).add("dtype", J::str(dtype_name(s.dtype)))
            .add("value", J::str(s.value));
        break;
      case PlanStep::Kind::copy:
        o.add("op", J::str("copy")).add("src", J::str(s.src)).add("dst", J::str(s.dst)).add("count", J::str(s.count));
        break;
      case PlanStep::Kind::fill:
        o.add("op", J::str("fill")).add("buffer", J::str(s.buffer)).add("value", J::num(s.fill_word))
            .add("count", J::str(s.count));
        break;
      case PlanStep::Kind::readback:
        o.add("op", J::str("readback")).add("buffer", J::str(s.buffer)).add("index", J::str(s.index))
            .add("into", J::str(s.into)).add("dtype", J::str(dtype_name(s.dtype)));
        break;
      case PlanStep::Kind::store:  // runtime plans only: build_host_plan never makes one
        throw InternalError("a store step in an export's host plan");
    }
    a.push(std::move(o));
  }
  return a;
}

}  // namespace

std::string manifest_json(const HostPlan& plan, const ExportTarget& target) {
  J m;
  m.add("format", J::str("ember-export")).add("version", J::num(kManifestVersion)).add("program", J::str(plan.program))
      .add("target", J::str(target.name));
  J args = J::arr();
  for (const PlanArg& a : plan.args) args.push(J().add("name", J::str(a.name)).add("kind", J::str(a.buffer ? "buffer" : "scalar")));
  m.add("args", args);
  J dims = J::arr();
  for (const PlanDim& d : plan.dims) {
    J o;
    o.add("name", J::str(d.name)).add("from", J().add("input", J::str(d.input)).add("axis", J::num(d.axis)));
    if (d.value >= 0) o.add("value", J::num(d.value));
    dims.push(o);
  }
  m.add("dims", dims);
  J scalars = J::arr();
  for (const PlanScalar& s : plan.scalars) scalars.push(J().add("name", J::str(s.name)).add("dtype", J::str(dtype_name(s.dtype))));
  m.add("scalars", scalars);
  J buffers = J::arr();
  for (const PlanBuffer& b : plan.buffers)
    buffers.push(J().add("name", J::str(b.name)).add("role", J::str(buffer_role_name(b.role)))
                     .add("dtype", J::str(dtype_name(b.dtype))).add("shape", strings(b.shape)).add("count", J::str(b.count))
                     .add("zero_init", J::boolean(b.zero_init)));
  m.add("buffers", buffers);
  J outputs = J::arr();
  for (const PlanOutput& o : plan.outputs) {
    J j;
    j.add("index", J::num(o.index));
    if (!o.buffer.empty()) j.add("buffer", J::str(o.buffer));
    else j.add("value", J::str(o.value)).add("dtype", J::str(dtype_name(o.dtype)));
    outputs.push(j);
  }
  m.add("outputs", outputs);
  J kernels = J::arr();
  for (const PlanKernel& k : plan.kernels) {
    const std::string file = plan.kernels[k.file_of].name;
    J j;
    j.add("name", J::str(k.name)).add("file", J::str(file + target.ext)).add("source", J::str(file + target.source_ext));
    if (target.api == KernelApi::cpp) j.add("header", J::str(plan.program + "_kernels.h"));
    const bool named_entry = target.api == KernelApi::cpp || target.api == KernelApi::d3d11_hlsl;
    j.add("entry", J::str(named_entry ? file : "main"));
    if (target.api != KernelApi::cpp) {
      J wg = J::arr();
      wg.push(J::num(k.abi.local_size)).push(J::num(1)).push(J::num(1));
      j.add("workgroup_size", wg);
    }
    J bindings = J::arr();
    for (size_t i = 0; i < k.abi.bindings.size(); ++i) {
      const KernelBinding& b = k.abi.bindings[i];
      bindings.push(J().add("set", J::num(0)).add("binding", J::num(b.binding)).add("var", J::str(b.var))
                        .add("buffer", J::str(k.binding_buffers[i])).add("access", J::str(access_name(b.access)))
                        .add("elem", J::str(b.elem)));
    }
    j.add("bindings", bindings);
    const ParamBlock& pb = k.abi.params;
    J fields = J::arr();
    for (const ParamField& f : pb.fields)
      fields.push(J().add("name", J::str(f.name)).add("type", J::str(dtype_name(f.type))).add("offset", J::num(f.offset)));
    j.add("params", J().add("kind", J::str(param_block_kind_name(pb.kind))).add("binding", J::num(pb.binding))
                        .add("layout", J::str(pb.layout)).add("size", J::num(pb.size)).add("fields", fields));
    kernels.push(j);
  }
  m.add("kernels", kernels);
  m.add("plan", steps_json(plan, plan.steps));
  std::string out;
  print(m, 0, out);
  return out + "\n";
}

}  // namespace ember

// Reader for manifest.h: JSON -> checked structs.
#include "manifest.h"

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace runner {

int Manifest::buffer_index(const std::string& name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name) return int(i);
  return -1;
}

namespace {

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& msg) const {
    throw std::runtime_error(file_ + ": " + path + ": " + msg);
  }

  const Json& member(const Json& o, const std::string& key, const std::string& path) const {
    if (!o.is_object()) fail(path, "expected an object");
    const Json* v = o.find(key);
    if (!v) fail(path, "missing \"" + key + "\"");
    return *v;
  }
  std::string str(const Json& o, const std::string& key, const std::string& path) const {
    const Json& v = member(o, key, path);
    if (!v.is_string()) fail(path + "." + key, "expected a string");
    return v.str;
  }
  std::string str_or(const Json& o, const std::string& key, const std::string& dflt, const std::string& path) const {
    return o.find(key) ? str(o, key, path) : dflt;
  }
  int64_t integer(const Json& v, const std::string& path) const {
    if (!v.is_number() || !v.is_integer) fail(path, "expected an integer");
    return int64_t(v.num);
  }
  const std::vector<Json>& array(const Json& o, const std::string& key, const std::string& path) const {
    const Json& v = member(o, key, path);
    if (!v.is_array()) fail(path + "." + key, "expected an array");
    return v.arr;
  }
  // An expression: a string, or a number (an integer or float literal).
  Expr expr(const Json& v, const std::string& path) const {
    if (v.is_string()) return Expr::parse(v.str, file_ + ": " + path);
    if (v.is_number()) {
      std::ostringstream os;
      os.precision(17);
      os << v.num;
      std::string t = os.str();
      if (!v.is_integer && t.find_first_of(".eE") == std::string::npos) t += ".0";
      return Expr::parse(t, file_ + ": " + path);
    }
    if (v.kind == Json::Kind::boolean) return Expr::parse(v.b ? "1" : "0", file_ + ": " + path);
    fail(path, "expected an expression (a string or a number)");
  }
  std::optional<Expr> opt_expr(const Json& o, const std::string& key, const std::string& path) const {
    const Json* v = o.find(key);
    if (!v) return std::nullopt;
    return expr(*v, path + "." + key);
  }

  int buffer(const Manifest& m, const Json& o, const std::string& key, const std::string& path) const {
    const std::string name = str(o, key, path);
    const int i = m.buffer_index(name);
    if (i < 0) fail(path + "." + key, "no buffer named \"" + name + "\" in \"buffers\"");
    return i;
  }

  std::vector<Step> steps(const Manifest& m, const std::vector<Json>& list, const std::string& path) const {
    std::vector<Step> out;
    for (size_t i = 0; i < list.size(); ++i) out.push_back(step(m, list[i], path + "[" + std::to_string(i) + "]"));
    return out;
  }

  Step step(const Manifest& m, const Json& j, const std::string& path) const {
    const std::string op = str(j, "op", path);
    Step s;
    s.where = path + " (" + op + ")";
    if (op == "dispatch") {
      s.op = Step::dispatch;
      const std::string k = str(j, "kernel", path);
      for (size_t i = 0; i < m.kernels.size(); ++i)
        if (m.kernels[i].name == k) s.kernel = int(i);
      if (s.kernel < 0) fail(path + ".kernel", "no kernel named \"" + k + "\" in \"kernels\"");
      const auto& g = array(j, "groups", path);
      if (g.empty() || g.size() > 3) fail(path + ".groups", "expected 1 to 3 group counts");
      for (size_t a = 0; a < g.size(); ++a) s.groups[a] = expr(g[a], path + ".groups[" + std::to_string(a) + "]");
      const ParamBlock& pb = m.kernels[s.kernel].params;
      std::set<std::string> given;
      if (const Json* pv = j.find("params")) {
        if (!pv->is_object()) fail(path + ".params", "expected an object of field: value");
        for (const auto& kv : pv->obj) {
          int f = -1;
          for (size_t i = 0; i < pb.fields.size(); ++i)
            if (pb.fields[i].name == kv.first) f = int(i);
          if (f < 0) fail(path + ".params." + kv.first, "kernel \"" + k + "\" has no parameter field \"" + kv.first + "\"");
          s.param_values.emplace_back(f, expr(kv.second, path + ".params." + kv.first));
          given.insert(kv.first);
        }
      }
      for (const auto& f : pb.fields)
        if (!given.count(f.name)) fail(path + ".params", "no value for parameter field \"" + f.name + "\" of kernel \"" + k + "\"");
    } else if (op == "loop") {
      s.op = Step::loop;
      s.var = str_or(j, "var", "", path);
      s.count = opt_expr(j, "count", path);
      s.begin = opt_expr(j, "begin", path);
      s.end = opt_expr(j, "end", path);
      s.step = opt_expr(j, "step", path);
      if (!s.count && !s.end) fail(path, "a loop needs \"count\" (or \"begin\"/\"end\"/\"step\")");
      s.body = steps(m, array(j, "body", path), path + ".body");
    } else if (op == "if") {
      s.op = Step::if_;
      s.cond = expr(member(j, "cond", path), path + ".cond");
      s.body = steps(m, array(j, "then", path), path + ".then");
      if (j.find("else")) s.else_body = steps(m, array(j, "else", path), path + ".else");
    } else if (op == "copy") {
      s.op = Step::copy;
      s.src = buffer(m, j, "src", path);
      s.dst = buffer(m, j, "dst", path);
      s.count = expr(member(j, "count", path), path + ".count");
      s.src_offset = opt_expr(j, "src_offset", path);
      s.dst_offset = opt_expr(j, "dst_offset", path);
    } else if (op == "fill") {
      s.op = Step::fill;
      s.buffer = buffer(m, j, "buffer", path);
      const Json& v = member(j, "value", path);
      if (v.is_number() && v.is_integer) {  // the word itself (two's complement for negatives)
        if (v.num < -2147483648.0 || v.num > 4294967295.0) fail(path + ".value", "not a 32-bit word");
        s.fill_word = uint32_t(int64_t(v.num));
      } else {
        s.value = expr(v, path + ".value");
      }
      s.count = opt_expr(j, "count", path);
      s.offset = opt_expr(j, "offset", path);
    } else if (op == "readback") {
      s.op = Step::readback;
      s.buffer = buffer(m, j, "buffer", path);
      s.index = j.find("index") ? std::optional<Expr>(expr(*j.find("index"), path + ".index")) : std::nullopt;
      s.into = str(j, "into", path);
      if (j.find("dtype")) s.dtype = dtype_from_name(str(j, "dtype", path), file_ + ": " + path + ".dtype");
    } else if (op == "let" || op == "set") {
      s.op = Step::let;
      s.into = str(j, "var", path);
      s.value = expr(member(j, "value", path), path + ".value");
      if (j.find("dtype")) s.dtype = dtype_from_name(str(j, "dtype", path), file_ + ": " + path + ".dtype");
    } else {
      fail(path + ".op", "unknown step \"" + op + "\" (expected dispatch, loop, if, let, copy, fill or readback)");
    }
    return s;
  }

 private:
  std::string file_;
};

Role role_from(const std::string& r, const Reader& rd, const std::string& path) {
  if (r == "input") return Role::input;
  if (r == "output") return Role::output;
  if (r == "inout") return Role::inout;
  if (r == "temp") return Role::temp;
  if (r == "state") return Role::state;
  rd.fail(path, "unknown role \"" + r + "\" (expected input, output, inout, temp or state)");
}

}  // namespace

Manifest load_manifest(const std::string& dir) {
  const std::string file = dir + "/manifest.json";
  std::ifstream f(file);
  if (!f) throw std::runtime_error(file + ": cannot open (is " + dir + " an Ember export folder?)");
  std::stringstream ss;
  ss << f.rdbuf();
  const Json j = parse_json(ss.str(), file);
  Reader rd(file);
  Manifest m;
  m.dir = dir;
  if (rd.str(j, "format", "$") != "ember-export") rd.fail("$.format", "expected \"ember-export\"");
  m.version = int(rd.integer(rd.member(j, "version", "$"), "$.version"));
  if (m.version != 1) rd.fail("$.version", "this runner reads version 1, the manifest is version " + std::to_string(m.version));
  m.program = rd.str_or(j, "program", "", "$");
  m.target = rd.str(j, "target", "$");

  if (j.find("dims"))
    for (size_t i = 0; i < rd.array(j, "dims", "$").size(); ++i) {
      const Json& d = rd.array(j, "dims", "$")[i];
      const std::string p = "$.dims[" + std::to_string(i) + "]";
      DimSpec ds;
      ds.name = rd.str(d, "name", p);
      if (const Json* from = d.find("from")) {
        if (from->is_object()) {
          ds.from_input = rd.str(*from, "input", p + ".from");
          ds.axis = int(rd.integer(rd.member(*from, "axis", p + ".from"), p + ".from.axis"));
        } else if (from->is_number()) {
          ds.value = rd.integer(*from, p + ".from");
        } else if (!(from->is_string() && (from->str == "arg" || from->str == "argument"))) {
          rd.fail(p + ".from", "expected {\"input\": NAME, \"axis\": K} or a number");
        }
      }
      if (const Json* v = d.find("value"))
        if (v->kind != Json::Kind::null) ds.value = rd.integer(*v, p + ".value");
      m.dims.push_back(ds);
    }
  if (j.find("scalars"))
    for (size_t i = 0; i < rd.array(j, "scalars", "$").size(); ++i) {
      const Json& d = rd.array(j, "scalars", "$")[i];
      const std::string p = "$.scalars[" + std::to_string(i) + "]";
      ScalarSpec s;
      s.name = rd.str(d, "name", p);
      s.dtype = dtype_from_name(rd.str(d, "dtype", p), file + ": " + p);
      if (const Json* v = d.find("default"))
        if (v->is_number()) s.default_value = v->is_integer && s.dtype != DType::f32 ? Num::of_int(int64_t(v->num)) : Num::of_float(v->num);
      m.scalars.push_back(s);
    }
  const auto& bufs = rd.array(j, "buffers", "$");
  for (size_t i = 0; i < bufs.size(); ++i) {
    const Json& b = bufs[i];
    const std::string p = "$.buffers[" + std::to_string(i) + "]";
    BufferSpec s;
    s.name = rd.str(b, "name", p);
    if (m.buffer_index(s.name) >= 0) rd.fail(p, "duplicate buffer \"" + s.name + "\"");
    s.role = role_from(rd.str(b, "role", p), rd, p + ".role");
    s.dtype = dtype_from_name(rd.str(b, "dtype", p), file + ": " + p);
    const auto& shape = rd.array(b, "shape", p);
    for (size_t a = 0; a < shape.size(); ++a) s.shape.push_back(rd.expr(shape[a], p + ".shape[" + std::to_string(a) + "]"));
    if (b.find("count")) {
      s.count = rd.expr(*b.find("count"), p + ".count");
    } else {  // the product of the shape
      std::string prod;
      for (const auto& e : s.shape) prod += (prod.empty() ? "(" : "*(") + e.text() + ")";
      s.count = Expr::parse(prod.empty() ? "1" : prod, file + ": " + p + ".shape");
    }
    if (const Json* z = b.find("zero_init")) s.zero_init = z->kind == Json::Kind::boolean && z->b;
    m.buffers.push_back(std::move(s));
  }
  const auto& kernels = rd.array(j, "kernels", "$");
  for (size_t i = 0; i < kernels.size(); ++i) {
    const Json& k = kernels[i];
    const std::string p = "$.kernels[" + std::to_string(i) + "]";
    KernelSpec ks;
    ks.name = rd.str(k, "name", p);
    ks.file = rd.str(k, "file", p);
    ks.source = rd.str_or(k, "source", "", p);
    ks.entry = rd.str_or(k, "entry", "main", p);
    const auto& wg = rd.array(k, "workgroup_size", p);
    if (wg.size() != 3) rd.fail(p + ".workgroup_size", "expected [x, y, z]");
    for (int a = 0; a < 3; ++a) ks.workgroup_size[a] = int(rd.integer(wg[a], p + ".workgroup_size"));
    const auto& bl = rd.array(k, "bindings", p);
    for (size_t b = 0; b < bl.size(); ++b) {
      const std::string bp = p + ".bindings[" + std::to_string(b) + "]";
      BindingSpec bs;
      if (const Json* s = bl[b].find("set")) bs.set = int(rd.integer(*s, bp + ".set"));
      bs.binding = int(rd.integer(rd.member(bl[b], "binding", bp), bp + ".binding"));
      bs.buffer = rd.buffer(m, bl[b], "buffer", bp);
      bs.access = rd.str_or(bl[b], "access", "read_write", bp);
      ks.bindings.push_back(bs);
    }
    ks.params.kind = "none";
    if (const Json* pj = k.find("params"); pj && pj->kind != Json::Kind::null) {
      const std::string pp = p + ".params";
      ParamBlock& pb = ks.params;
      pb.kind = rd.str(*pj, "kind", pp);
      if (pb.kind != "push_constant" && pb.kind != "uniform_block" && pb.kind != "storage_buffer" && pb.kind != "cbuffer" &&
          pb.kind != "word_array")
        rd.fail(pp + ".kind", "unknown parameter block kind \"" + pb.kind + "\"");
      if (const Json* s = pj->find("set")) pb.set = int(rd.integer(*s, pp + ".set"));
      if (const Json* b = pj->find("binding"); b && b->kind != Json::Kind::null) pb.binding = int(rd.integer(*b, pp + ".binding"));
      pb.layout = rd.str_or(*pj, "layout", "", pp);
      pb.size = int(rd.integer(rd.member(*pj, "size", pp), pp + ".size"));
      const auto& fl = rd.array(*pj, "fields", pp);
      for (size_t f = 0; f < fl.size(); ++f) {
        const std::string fp = pp + ".fields[" + std::to_string(f) + "]";
        ParamField pf;
        pf.name = rd.str(fl[f], "name", fp);
        pf.type = rd.str(fl[f], "type", fp);
        if (pf.type != "u32" && pf.type != "i32" && pf.type != "f32" && pf.type != "bool")
          rd.fail(fp + ".type", "unknown field type \"" + pf.type + "\" (expected u32, i32, f32 or bool)");
        pf.offset = int(rd.integer(rd.member(fl[f], "offset", fp), fp + ".offset"));
        if (pf.offset < 0 || pf.offset + 4 > pb.size) rd.fail(fp + ".offset", "outside the block's " + std::to_string(pb.size) + " bytes");
        pb.fields.push_back(pf);
      }
    }
    m.kernels.push_back(std::move(ks));
  }
  if (j.find("outputs"))
    for (size_t i = 0; i < rd.array(j, "outputs", "$").size(); ++i) {
      const Json& o = rd.array(j, "outputs", "$")[i];
      const std::string p = "$.outputs[" + std::to_string(i) + "]";
      OutputSpec os;
      os.index = int(rd.integer(rd.member(o, "index", p), p + ".index"));
      if (o.find("buffer")) {
        os.buffer = rd.str(o, "buffer", p);
        if (m.buffer_index(os.buffer) < 0) rd.fail(p + ".buffer", "no buffer named \"" + os.buffer + "\"");
      } else {
        os.value = rd.expr(rd.member(o, "value", p), p + ".value");
        os.dtype = dtype_from_name(rd.str(o, "dtype", p), file + ": " + p + ".dtype");
      }
      m.outputs.push_back(std::move(os));
    }
  m.plan = rd.steps(m, rd.array(j, "plan", "$"), "$.plan");
  return m;
}

}  // namespace runner

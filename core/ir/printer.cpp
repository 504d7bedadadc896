#include "core/ir/printer.h"

#include <cstdio>
#include <sstream>
#include <unordered_map>

#include "core/ir/shape.h"

namespace ember {

namespace {

class Printer {
 public:
  explicit Printer(const Program& p) {
    int k = 0;
    p.for_each([&](Node* n) { num_[n] = k++; });
  }

  std::string ref(const Node* n) const {
    if (n->op == Op::constant) return constant(n);
    if (n->op == Op::shape_arg) return n->name;
    auto it = num_.find(n);
    return it == num_.end() ? "%?" + std::to_string(n->id) : "%" + std::to_string(it->second);
  }

  static std::string constant(const Node* n) {
    char buf[64];
    switch (n->dtype) {
      case DType::f32: std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(n->f())); {
        std::string s = buf;
        if (s.find_first_of(".einn") == std::string::npos) s += ".0";
        return s + "f";
      }
      case DType::i32: return std::to_string(n->i());
      case DType::u32: return std::to_string(n->bits) + "u";
      case DType::boolean: return n->bits ? "true" : "false";
      default: return "?";
    }
  }

  std::string shape(const Shape& s) const {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + ref(s[i]);
    return out + "]";
  }

  std::string line(const Node* n) const {
    std::ostringstream os;
    bool value = n->dtype != DType::none;
    if (value) os << ref(n) << " = ";
    os << op_name(n->op);
    if (n->op == Op::kernel) os << " #" << n->index;
    if (value) os << " " << dtype_name(n->dtype);
    if (!n->shape.empty() || n->op == Op::kernel) os << shape(n->shape);
    if (!n->group.empty()) {
      os << " group(";
      for (size_t i = 0; i < n->group.size(); ++i) os << (i ? ", " : "") << n->group[i];
      os << ")";
    }
    switch (n->op) {
      case Op::constant: os << " " << constant(n); break;
      case Op::index: case Op::local_index: case Op::group_index: os << " axis=" << n->axis; break;
      case Op::group_buffer: if (n->zero_init) os << " zero"; break;
      case Op::input: case Op::scalar_arg: os << " '" << n->name << "' arg=" << n->index; break;
      case Op::shape_arg: os << " '" << n->name << "'"; break;
      case Op::buffer: if (n->zero_init) os << " zero"; break;
      case Op::output: os << " slot=" << n->index; break;
      case Op::reduce:
        os << " " << reduce_kind_name(static_cast<ReduceKind>(n->kind)) << " axes=0x" << std::hex << n->axes
           << std::dec << (n->keepdims ? " keepdims" : "");
        break;
      case Op::scan: os << " " << reduce_kind_name(static_cast<ReduceKind>(n->kind)) << " axis=" << n->axis; break;
      case Op::atomic: os << " " << atomic_kind_name(static_cast<AtomicKind>(n->kind)); break;
      default: break;
    }
    if (!n->operands.empty()) {
      os << " (";
      for (size_t i = 0; i < n->operands.size(); ++i) os << (i ? ", " : "") << ref(n->operands[i]);
      os << ")";
    }
    if (n->op == Op::load || n->op == Op::store || n->op == Op::atomic) {
      if (n->mode != IndexMode::clamp) os << " " << index_mode_name(n->mode);
      if (n->flat) os << " flat";
    }
    if (n->op == Op::kernel && (!n->params().empty() || !n->memories().empty())) {
      os << " mem(";
      for (size_t i = 0; i < n->memories().size(); ++i) os << (i ? ", " : "") << ref(n->memories()[i]);
      os << ") params(";
      for (size_t i = 0; i < n->params().size(); ++i) os << (i ? ", " : "") << ref(n->params()[i]);
      os << ")";
    }
    return os.str();
  }

  void scope(std::ostringstream& os, const Node* s, int depth) const {
    for (const Node* c = s->first_child; c; c = c->next) {
      if (c->op == Op::constant || c->op == Op::shape_arg) {
        // Constants and dims print inline where used; list them once for completeness.
        os << std::string(static_cast<size_t>(depth) * 2, ' ') << "// " << op_name(c->op) << " "
           << dtype_name(c->dtype) << " " << ref(c) << "\n";
        continue;
      }
      os << std::string(static_cast<size_t>(depth) * 2, ' ') << line(c);
      if (c->is_scope()) {
        os << " {\n";
        scope(os, c, depth + 1);
        os << std::string(static_cast<size_t>(depth) * 2, ' ') << "}";
      }
      os << "\n";
    }
  }

 private:
  std::unordered_map<const Node*, int> num_;
};

}  // namespace

std::string print_program(const Program& p) {
  Printer pr(p);
  std::ostringstream os;
  os << "program " << p.name << " {\n";
  pr.scope(os, p.root(), 1);
  os << "}\n";
  return os.str();
}

std::string print_node(const Program& p, const Node* n) { return Printer(p).line(n); }

bool printer_omits(Op op, const char* attr) {
  const std::string a = attr;
  switch (op) {
    case Op::shape_arg: return a == "index";                      // its place in Program::dims; shown by name
    case Op::kernel: return a == "name" || a == "user_kernel";    // diagnostics / hoist_grid_loops input
    default: return false;
  }
}

}  // namespace ember

#include "export/plan_expr.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace ember {

std::string float_literal(float f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

void PlanExprs::name(const Node* n, const std::string& name, bool at_start) { names_[n] = {name, at_start}; }

const std::string* PlanExprs::name_of(const Node* n) const {
  auto it = names_.find(n);
  return it == names_.end() ? nullptr : &it->second.name;
}

void PlanExprs::fail(const Node* n, const char* what, const std::string& why) const {
  EMBER_USER_ERROR(CompileError, n->loc,
                   "cannot export " << program_ << ": " << what << " needs the host value " << op_name(n->op) << " ("
                                    << dtype_name(n->dtype) << "), " << why
                                    << "; the manifest's host expressions are integer math on dims, scalars and loop "
                                       "counters (docs/export.md). Fix the dims it depends on with example_args= or "
                                       "--dim NAME=VALUE, or compute it inside a kernel");
}

std::string PlanExprs::expr(const Node* n, const char* what) { return build(n, what).text; }

std::string PlanExprs::start_expr(const Node* n, const char* what, bool* at_start) {
  E e = build(n, what);
  *at_start = !e.late;
  return e.text;
}

std::string PlanExprs::value(const Node* n, const char* what) {
  if (n->dtype != DType::f32) return expr(n, what);
  if (auto it = names_.find(n); it != names_.end()) return it->second.name;
  if (n->op == Op::constant) return float_literal(n->f());
  if (const E* e = host_value(n)) return e->text;
  fail(n, what, "float math on the host");
}

std::vector<HostValue> PlanExprs::take_host_values() {
  for (const HostValue& v : pending_) {
    auto it = names_.find(v.node);
    if (!v.at_start && it != names_.end() && it->second.name == v.name) names_.erase(it);  // not renamed since
  }
  return std::move(pending_);
}

const PlanExprs::E* PlanExprs::host_value(const Node* n) {
  if (!host_values_ || !n->shape.empty() || !(op_info(n->op).flags & F_ELEMENTWISE)) return nullptr;
  HostValue v;
  v.node = n;
  v.at_start = true;
  // The operands down to named values and constants: all host scalar math.
  std::vector<const Node*> todo{n}, seen;
  while (!todo.empty()) {
    const Node* x = todo.back();
    todo.pop_back();
    if (std::find(seen.begin(), seen.end(), x) != seen.end()) continue;
    seen.push_back(x);
    if (x != n) {
      if (auto it = names_.find(x); it != names_.end()) {
        v.leaves.emplace_back(x, it->second.name);
        v.at_start &= it->second.at_start;
        continue;
      }
      if (x->op == Op::constant) continue;
    }
    if (!x->shape.empty() || !(op_info(x->op).flags & F_ELEMENTWISE)) return nullptr;
    for (int k = 0; k < x->num_operands(); ++k) todo.push_back(x->operand(k));
  }
  v.name = "x" + std::to_string(host_value_count_++);
  names_[n] = {v.name, v.at_start};
  host_e_ = {v.name, 100, !v.at_start};
  pending_.push_back(std::move(v));
  return &host_e_;
}

namespace {

bool integral(DType t) { return t == DType::i32 || t == DType::u32 || t == DType::boolean; }

}  // namespace

PlanExprs::E PlanExprs::build(const Node* n, const char* what) {
  if (auto it = names_.find(n); it != names_.end()) {
    if (!integral(n->dtype)) fail(n, what, "an f32 value used in integer math");
    return {it->second.name, 100, !it->second.at_start};
  }
  if (n->op == Op::constant) {
    if (n->dtype == DType::i32) {
      const int32_t v = n->i();
      return {std::to_string(v), v < 0 ? 7 : 100, false};
    }
    if (integral(n->dtype)) return {std::to_string(n->bits), 100, false};
    fail(n, what, "an f32 constant in integer math");
  }
  if (!n->shape.empty()) fail(n, what, "a tensor, not a host scalar");
  const int na = n->num_operands();
  bool in_grammar = integral(n->dtype);
  for (int k = 0; k < na; ++k) in_grammar &= integral(n->operand(k)->dtype);
  if (!in_grammar) {
    if (const E* e = host_value(n)) return *e;
    fail(n, what, "float math on the host");
  }
  auto paren = [](const E& e, int prec) { return e.prec < prec ? "(" + e.text + ")" : e.text; };
  auto arg = [&](int k) { return build(n->operand(k), what); };
  auto binary = [&](const char* op, int prec) {
    E a = arg(0), b = arg(1);
    // Left-associative: the right operand needs parentheses at equal strength.
    // Comparisons do not chain in the grammar: both operands bind more strongly.
    return E{paren(a, prec == 4 ? 5 : prec) + op + (b.prec <= prec ? "(" + b.text + ")" : b.text), prec, a.late || b.late};
  };
  auto call = [&](const char* fn) {
    std::string s = std::string(fn) + "(";
    bool late = false;
    for (int k = 0; k < na; ++k) {
      E a = arg(k);
      late |= a.late;
      s += (k ? "," : "") + a.text;
    }
    return E{s + ")", 100, late};
  };
  const bool is_signed = na > 0 && n->operand(0)->dtype == DType::i32;
  // A u32 value that may have left [0, 2^32) in 64-bit math (a sum, a product, a difference, a
  // negation, a negative i32 cast to u32) is brought back as Ember's u32 arithmetic wraps it, so
  // `/`, `%`, comparisons, min and max see the u32 value (u32(-5) % 7 is 6, not -5; 2^32 - 2 + 48
  // is 46). Products wrap too: the evaluators multiply modulo 2^64, whose low 32 bits are right.
  auto wrap_u32 = [](const E& e) { return E{"floormod(" + e.text + ",4294967296)", 100, e.late}; };
  switch (n->op) {
    case Op::add: return n->dtype == DType::u32 ? wrap_u32(binary("+", 5)) : binary("+", 5);
    case Op::sub: return n->dtype == DType::u32 ? wrap_u32(binary("-", 5)) : binary("-", 5);
    case Op::mul: return n->dtype == DType::u32 ? wrap_u32(binary("*", 6)) : binary("*", 6);
    case Op::div: return is_signed ? call("floordiv") : binary("/", 6);
    case Op::mod: return is_signed ? call("floormod") : binary("%", 6);
    case Op::min: return call("min");
    case Op::max: return call("max");
    case Op::select: return call("select");
    case Op::eq: return binary("==", 4);
    case Op::ne: return binary("!=", 4);
    case Op::lt: return binary("<", 4);
    case Op::le: return binary("<=", 4);
    case Op::gt: return binary(">", 4);
    case Op::ge: return binary(">=", 4);
    case Op::land: return binary("&&", 3);
    case Op::lor: return binary("||", 2);
    case Op::neg: {
      E a = arg(0);
      E r{"-" + paren(a, 7), 7, a.late};
      return n->dtype == DType::u32 ? wrap_u32(r) : r;
    }
    case Op::lnot: {
      E a = arg(0);
      return {"!" + paren(a, 7), 7, a.late};
    }
    case Op::cast: {
      E a = arg(0);
      if (n->dtype == DType::boolean && n->operand(0)->dtype != DType::boolean) return {paren(a, 5) + "!=0", 4, a.late};
      const DType from = n->operand(0)->dtype;
      const Node* src = n->operand(0);
      const bool known_small = src->op == Op::constant && src->i() >= 0;  // i32 constant 0..2^31-1 or bool
      if (n->dtype == DType::u32 && from == DType::i32 && !known_small) return wrap_u32(a);
      if (n->dtype == DType::i32 && from == DType::u32 && !(src->op == Op::constant && src->bits < 0x80000000u))
        // u32 -> i32: values from 2^31 up become negative, as the 32-bit word reads.
        return {"floormod(" + a.text + "+2147483648,4294967296)-2147483648", 5, a.late};
      return a;  // bool -> integer, and casts of in-range constants, keep the value
    }
    default: break;
  }
  if (const E* e = host_value(n)) return *e;
  fail(n, what, "an op outside the grammar");
}

}  // namespace ember

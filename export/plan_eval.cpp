// plan_eval: a recursive-descent parser of the manifest's expression grammar (docs/export.md)
// into postfix code, and its evaluator. Semantics follow the manifest: 64-bit signed integers,
// `/` and `%` truncate, floordiv/floormod round toward minus infinity, a zero divisor gives 0.
#include "export/plan_eval.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/ir/error.h"

namespace ember {

int PlanSymbols::add(const std::string& name, DType dtype) {
  auto [it, fresh] = slots_.emplace(name, static_cast<int>(dtypes_.size()));
  if (fresh) dtypes_.push_back(dtype);
  return it->second;
}

int PlanSymbols::find(const std::string& name) const {
  auto it = slots_.find(name);
  return it == slots_.end() ? -1 : it->second;
}

int64_t plan_slot_value(int64_t v, DType dtype) {
  switch (dtype) {
    case DType::i32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DType::boolean: return v != 0;
    default: return static_cast<uint32_t>(v);
  }
}

int64_t plan_word_value(uint32_t w, DType dtype) {
  return dtype == DType::i32 ? static_cast<int64_t>(static_cast<int32_t>(w)) : static_cast<int64_t>(w);
}

namespace {

constexpr int kMaxDepth = 64;

}  // namespace

class PlanParser {
 public:
  PlanParser(PlanValue& v, const PlanSymbols& symbols) : v_(v), s_(v.text_), symbols_(symbols) {}

  void integer() {
    expr();
    if (at_ < s_.size()) fail("unexpected '" + s_.substr(at_) + "'");
  }

  void f32() {
    const int slot = symbols_.find(s_);
    if (slot >= 0) {
      emit(PlanValue::Code::slot, slot, 1);
      return;
    }
    float f;
    if (s_ == "inf") f = INFINITY;
    else if (s_ == "-inf") f = -INFINITY;
    else if (s_ == "nan") f = NAN;
    else {
      char* end = nullptr;
      f = std::strtof(s_.c_str(), &end);
      if (s_.empty() || end != s_.c_str() + s_.size() || !(std::isdigit(static_cast<unsigned char>(s_[0])) || s_[0] == '-'))
        fail("not an f32 name or float literal");
    }
    emit(PlanValue::Code::lit, f2w(f), 1);
  }

 private:
  using Code = PlanValue::Code;

  [[noreturn]] void fail(const std::string& why) const {
    throw CompileError("the host plan's expression '" + s_ + "' cannot run: " + why);
  }

  void emit(Code c, int64_t arg, int push) {
    v_.code_.push_back({c, arg});
    depth_ += push;
    if (depth_ > v_.depth_) v_.depth_ = depth_;
    if (v_.depth_ > kMaxDepth) fail("nested too deeply");
  }
  void op(Code c, int arity) { emit(c, 0, 1 - arity); }

  bool eat(const char* tok) {
    const size_t n = std::char_traits<char>::length(tok);
    if (s_.compare(at_, n, tok) != 0) return false;
    at_ += n;
    return true;
  }

  void expr() {
    conj();
    while (eat("||")) { conj(); op(Code::lor, 2); }
  }
  void conj() {
    cmp();
    while (eat("&&")) { cmp(); op(Code::land, 2); }
  }
  void cmp() {
    sum();
    static const std::pair<const char*, Code> ops[] = {{"==", Code::eq}, {"!=", Code::ne}, {"<=", Code::le},
                                                       {">=", Code::ge}, {"<", Code::lt},  {">", Code::gt}};
    for (const auto& [tok, c] : ops)
      if (eat(tok)) {
        sum();
        op(c, 2);
        return;
      }
  }
  void sum() {
    term();
    for (;;) {
      if (eat("+")) { term(); op(Code::add, 2); }
      else if (eat("-")) { term(); op(Code::sub, 2); }
      else return;
    }
  }
  void term() {
    unary();
    for (;;) {
      if (eat("*")) { unary(); op(Code::mul, 2); }
      else if (eat("/")) { unary(); op(Code::div, 2); }
      else if (eat("%")) { unary(); op(Code::mod, 2); }
      else return;
    }
  }
  void unary() {
    if (eat("-")) { unary(); op(Code::neg, 1); return; }
    if (eat("!") ) { unary(); op(Code::lnot, 1); return; }
    primary();
  }
  void primary() {
    if (at_ >= s_.size()) fail("ends early");
    const char c = s_[at_];
    if (eat("(")) {
      expr();
      if (!eat(")")) fail("a '(' is not closed");
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t v = 0;
      while (at_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[at_]))) {
        v = v * 10 + (s_[at_++] - '0');
        if (v > (int64_t{1} << 40)) fail("an integer literal out of range");
      }
      emit(Code::lit, v, 1);
      return;
    }
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '_') fail("unexpected '" + s_.substr(at_) + "'");
    const size_t start = at_;
    while (at_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[at_])) || s_[at_] == '_')) ++at_;
    const std::string name = s_.substr(start, at_ - start);
    if (!eat("(")) {
      const int slot = symbols_.find(name);
      if (slot < 0) fail("'" + name + "' is not a name the plan defines");
      if (symbols_.dtype(slot) == DType::f32) fail("'" + name + "' is an f32 value in integer math");
      emit(Code::slot, slot, 1);
      return;
    }
    static const std::pair<const char*, std::pair<Code, int>> fns[] = {
        {"min", {Code::min, 2}},           {"max", {Code::max, 2}},           {"select", {Code::select, 3}},
        {"floordiv", {Code::floordiv, 2}}, {"floormod", {Code::floormod, 2}}};
    for (const auto& [fn, ca] : fns) {
      if (name != fn) continue;
      for (int k = 0; k < ca.second; ++k) {
        if (k && !eat(",")) fail(name + "() takes " + std::to_string(ca.second) + " arguments");
        expr();
      }
      if (!eat(")")) fail(name + "() takes " + std::to_string(ca.second) + " arguments");
      op(ca.first, ca.second);
      return;
    }
    fail("unknown function " + name + "()");
  }

  PlanValue& v_;
  const std::string& s_;
  const PlanSymbols& symbols_;
  size_t at_ = 0;
  int depth_ = 0;
};

PlanValue::PlanValue(const std::string& text, DType dtype, const PlanSymbols& symbols) : text_(text), dtype_(dtype) {
  PlanParser p(*this, symbols);
  if (dtype == DType::f32) p.f32();
  else p.integer();
}

namespace {

int64_t floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t floormod(int64_t a, int64_t b) { return b == 0 ? 0 : a - floordiv(a, b) * b; }

}  // namespace

int64_t PlanValue::eval(const int64_t* s) const {
  int64_t st[kMaxDepth];
  int sp = 0;
  using U = uint64_t;
  for (const Ins& i : code_) {
    switch (i.code) {
      case Code::lit: st[sp++] = i.arg; continue;
      case Code::slot: st[sp++] = s[i.arg]; continue;
      case Code::neg: st[sp - 1] = static_cast<int64_t>(U{0} - static_cast<U>(st[sp - 1])); continue;
      case Code::lnot: st[sp - 1] = st[sp - 1] == 0; continue;
      case Code::select: sp -= 2; st[sp - 1] = st[sp - 1] ? st[sp] : st[sp + 1]; continue;
      default: break;
    }
    const int64_t b = st[--sp], a = st[sp - 1];
    int64_t r = 0;
    switch (i.code) {
      case Code::add: r = static_cast<int64_t>(static_cast<U>(a) + static_cast<U>(b)); break;
      case Code::sub: r = static_cast<int64_t>(static_cast<U>(a) - static_cast<U>(b)); break;
      case Code::mul: r = static_cast<int64_t>(static_cast<U>(a) * static_cast<U>(b)); break;
      case Code::div: r = b == 0 || (b == -1 && a == INT64_MIN) ? 0 : a / b; break;
      case Code::mod: r = b == 0 || b == -1 ? 0 : a % b; break;
      case Code::floordiv: r = b == -1 && a == INT64_MIN ? 0 : floordiv(a, b); break;
      case Code::floormod: r = b == -1 ? 0 : floormod(a, b); break;
      case Code::min: r = a < b ? a : b; break;
      case Code::max: r = a > b ? a : b; break;
      case Code::eq: r = a == b; break;
      case Code::ne: r = a != b; break;
      case Code::lt: r = a < b; break;
      case Code::le: r = a <= b; break;
      case Code::gt: r = a > b; break;
      case Code::ge: r = a >= b; break;
      case Code::land: r = a != 0 && b != 0; break;
      case Code::lor: r = a != 0 || b != 0; break;
      default: break;
    }
    st[sp - 1] = r;
  }
  return st[0];
}

uint32_t PlanValue::word(const int64_t* s) const {
  const int64_t v = eval(s);
  return dtype_ == DType::boolean ? static_cast<uint32_t>(v != 0) : static_cast<uint32_t>(v);
}

}  // namespace ember

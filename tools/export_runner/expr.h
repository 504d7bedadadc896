// Expressions of the manifest's host plan: a tiny C-like grammar over integer literals, float
// literals, names (dims, scalars, loop variables, readback results), + - * / % (C int64
// semantics: / truncates, % keeps the dividend's sign, a zero divisor gives 0), unary - and !,
// comparisons, && ||, c ? a : b, parentheses, min(a, b), max(a, b), abs(a), floordiv(a, b) and
// floormod(a, b) (rounded toward minus infinity), select(c, a, b), and the float literals inf and
// nan (docs/export.md). An operation on a float operand (an f32 value or a float literal) is done
// in double.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace runner {

struct Num {
  bool is_float = false;
  int64_t i = 0;
  double f = 0;
  static Num of_int(int64_t v) { return Num{false, v, double(v)}; }
  static Num of_float(double v) { return Num{true, int64_t(v), v}; }
  double as_double() const { return is_float ? f : double(i); }
};

using Env = std::map<std::string, Num>;

struct ExprNode;

// A parsed expression; parse once, evaluate many times.
class Expr {
 public:
  // Parses `text`; throws std::runtime_error("<where>: bad expression '...': ...").
  static Expr parse(const std::string& text, const std::string& where);
  // Evaluates with the names in `env`; throws on unknown names.
  Num eval(const Env& env) const;
  const std::string& text() const { return text_; }

 private:
  std::shared_ptr<const ExprNode> root_;
  std::string text_, where_;
};

}  // namespace runner

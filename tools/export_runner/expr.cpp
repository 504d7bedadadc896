// Parser (precedence climbing, C's precedence levels) and evaluator for expr.h.
#include "expr.h"

#include <cmath>
#include <stdexcept>
#include <vector>

namespace runner {

struct ExprNode {
  enum Kind { num, name, unary, binary, call, ternary } kind;
  Num value;
  std::string op;  // name, operator or function
  std::vector<std::shared_ptr<const ExprNode>> args;
};

namespace {

using NodeP = std::shared_ptr<const ExprNode>;

class Parser {
 public:
  Parser(const std::string& t, const std::string& where) : t_(t), where_(where) {}

  NodeP all() {
    NodeP n = ternary();
    skip();
    if (p_ != t_.size()) fail("unexpected '" + t_.substr(p_) + "'");
    return n;
  }

 private:
  const std::string& t_;
  const std::string& where_;
  size_t p_ = 0;

  [[noreturn]] void fail(const std::string& msg) const {
    throw std::runtime_error(where_ + ": bad expression '" + t_ + "': " + msg);
  }
  void skip() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t')) ++p_;
  }
  bool eat(const std::string& s) {
    skip();
    if (t_.compare(p_, s.size(), s) != 0) return false;
    // "<" must not swallow "<=", "&" is not an operator, "=" alone is not either.
    p_ += s.size();
    return true;
  }
  static NodeP make(ExprNode::Kind k, std::string op, std::vector<NodeP> args) {
    auto n = std::make_shared<ExprNode>();
    n->kind = k;
    n->op = std::move(op);
    n->args = std::move(args);
    return n;
  }

  NodeP ternary() {
    NodeP c = binary(0);
    if (!eat("?")) return c;
    NodeP a = ternary();
    if (!eat(":")) fail("expected ':' of '?:'");
    NodeP b = ternary();
    return make(ExprNode::ternary, "?", {c, a, b});
  }

  // Binary levels, loosest first.
  NodeP binary(int level) {
    static const std::vector<std::vector<std::string>> levels = {
        {"||"}, {"&&"}, {"==", "!="}, {"<=", ">=", "<", ">"}, {"+", "-"}, {"*", "/", "%"}};
    if (level == int(levels.size())) return unary();
    NodeP lhs = binary(level + 1);
    while (true) {
      std::string found;
      for (const auto& op : levels[level])
        if (eat(op)) {
          found = op;
          break;
        }
      if (found.empty()) return lhs;
      lhs = make(ExprNode::binary, found, {lhs, binary(level + 1)});
    }
  }

  NodeP unary() {
    skip();
    if (p_ < t_.size() && (t_[p_] == '-' || t_[p_] == '!' || t_[p_] == '+')) {
      const std::string op(1, t_[p_++]);
      return make(ExprNode::unary, op, {unary()});
    }
    return primary();
  }

  NodeP primary() {
    skip();
    if (p_ >= t_.size()) fail("unexpected end");
    const char c = t_[p_];
    if (c == '(') {
      ++p_;
      NodeP n = ternary();
      if (!eat(")")) fail("expected ')'");
      return n;
    }
    if ((c >= '0' && c <= '9') || c == '.') {
      const size_t s = p_;
      bool is_float = false;
      while (p_ < t_.size() && ((t_[p_] >= '0' && t_[p_] <= '9') || t_[p_] == '.' || t_[p_] == 'e' || t_[p_] == 'E' ||
                                ((t_[p_] == '-' || t_[p_] == '+') && (t_[p_ - 1] == 'e' || t_[p_ - 1] == 'E')))) {
        if (t_[p_] == '.' || t_[p_] == 'e' || t_[p_] == 'E') is_float = true;
        ++p_;
      }
      if (p_ < t_.size() && (t_[p_] == 'f' || t_[p_] == 'F')) ++p_, is_float = true;  // 1.5f
      const std::string lit = t_.substr(s, p_ - s);
      auto n = std::make_shared<ExprNode>();
      n->kind = ExprNode::num;
      try {
        size_t used = 0;
        if (is_float) n->value = Num::of_float(std::stod(lit, &used));
        else n->value = Num::of_int(std::stoll(lit, &used));
        if (used != lit.size() && !(is_float && used + 1 == lit.size())) fail("bad number '" + lit + "'");
      } catch (const std::logic_error&) {
        fail("bad number '" + lit + "'");
      }
      return n;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t s = p_;
      while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_' || t_[p_] == '.')) ++p_;
      const std::string id = t_.substr(s, p_ - s);
      if (eat("(")) {
        std::vector<NodeP> args;
        if (!eat(")")) {
          do args.push_back(ternary());
          while (eat(","));
          if (!eat(")")) fail("expected ')' after the arguments of " + id);
        }
        const size_t want = id == "abs" ? 1 : id == "select" ? 3 : 2;
        const bool known = id == "min" || id == "max" || id == "abs" || id == "floordiv" || id == "floormod" || id == "select";
        if (!known || args.size() != want)
          fail("unknown function " + id + " with " + std::to_string(args.size()) +
               " argument(s) (known: min(a, b), max(a, b), abs(a), floordiv(a, b), floormod(a, b), select(c, a, b))");
        return make(ExprNode::call, id, args);
      }
      if (id == "inf" || id == "nan") {  // float literals (docs/export.md)
        auto n = std::make_shared<ExprNode>();
        n->kind = ExprNode::num;
        n->value = Num::of_float(id == "inf" ? HUGE_VAL : std::nan(""));
        return n;
      }
      return make(ExprNode::name, id, {});
    }
    fail(std::string("unexpected '") + c + "'");
  }
};

Num eval_node(const ExprNode& n, const Env& env, const std::string& text, const std::string& where) {
  auto fail = [&](const std::string& msg) -> Num {
    throw std::runtime_error(where + ": expression '" + text + "': " + msg);
  };
  switch (n.kind) {
    case ExprNode::num: return n.value;
    case ExprNode::name: {
      auto it = env.find(n.op);
      if (it == env.end()) {
        std::string known;
        for (const auto& kv : env) known += (known.empty() ? "" : ", ") + kv.first;
        return fail("unknown name '" + n.op + "' (known here: " + (known.empty() ? "none" : known) + ")");
      }
      return it->second;
    }
    case ExprNode::ternary: {
      const Num c = eval_node(*n.args[0], env, text, where);
      return eval_node(*n.args[c.as_double() != 0 ? 1 : 2], env, text, where);
    }
    case ExprNode::unary: {
      const Num a = eval_node(*n.args[0], env, text, where);
      if (n.op == "!") return Num::of_int(a.as_double() == 0);
      if (n.op == "+") return a;
      return a.is_float ? Num::of_float(-a.f) : Num::of_int(-a.i);
    }
    case ExprNode::call: {
      if (n.op == "select") {
        const Num c = eval_node(*n.args[0], env, text, where);
        return eval_node(*n.args[c.as_double() != 0 ? 1 : 2], env, text, where);
      }
      const Num a = eval_node(*n.args[0], env, text, where);
      if (n.op == "abs") return a.is_float ? Num::of_float(std::fabs(a.f)) : Num::of_int(a.i < 0 ? -a.i : a.i);
      const Num b = eval_node(*n.args[1], env, text, where);
      if (n.op == "floordiv" || n.op == "floormod") {  // rounded toward minus infinity; divisor 0 gives 0
        if (a.is_float || b.is_float) {
          const double x = a.as_double(), y = b.as_double();
          if (y == 0) return Num::of_float(0);
          const double q = std::floor(x / y);
          return Num::of_float(n.op == "floordiv" ? q : x - q * y);
        }
        if (b.i == 0) return Num::of_int(0);
        int64_t q = a.i / b.i, r = a.i % b.i;
        if (r != 0 && ((r < 0) != (b.i < 0))) --q, r += b.i;
        return Num::of_int(n.op == "floordiv" ? q : r);
      }
      const bool mx = n.op == "max";
      if (a.is_float || b.is_float) {
        const double x = a.as_double(), y = b.as_double();
        return Num::of_float(mx ? std::fmax(x, y) : std::fmin(x, y));
      }
      return Num::of_int(mx ? std::max(a.i, b.i) : std::min(a.i, b.i));
    }
    case ExprNode::binary: break;
  }
  const std::string& op = n.op;
  const Num a = eval_node(*n.args[0], env, text, where);
  if (op == "&&" || op == "||") {  // short-circuit
    const bool l = a.as_double() != 0;
    if (op == "&&" && !l) return Num::of_int(0);
    if (op == "||" && l) return Num::of_int(1);
    return Num::of_int(eval_node(*n.args[1], env, text, where).as_double() != 0);
  }
  const Num b = eval_node(*n.args[1], env, text, where);
  if (a.is_float || b.is_float) {
    const double x = a.as_double(), y = b.as_double();
    if (op == "+") return Num::of_float(x + y);
    if (op == "-") return Num::of_float(x - y);
    if (op == "*") return Num::of_float(x * y);
    if (op == "/") return Num::of_float(x / y);
    if (op == "%") return Num::of_float(std::fmod(x, y));
    if (op == "==") return Num::of_int(x == y);
    if (op == "!=") return Num::of_int(x != y);
    if (op == "<") return Num::of_int(x < y);
    if (op == "<=") return Num::of_int(x <= y);
    if (op == ">") return Num::of_int(x > y);
    if (op == ">=") return Num::of_int(x >= y);
  } else {
    const int64_t x = a.i, y = b.i;
    if (op == "+") return Num::of_int(int64_t(uint64_t(x) + uint64_t(y)));
    if (op == "-") return Num::of_int(int64_t(uint64_t(x) - uint64_t(y)));
    if (op == "*") return Num::of_int(int64_t(uint64_t(x) * uint64_t(y)));
    if (op == "/" || op == "%") {
      if (y == 0) return Num::of_int(0);  // docs/export.md: a zero divisor gives 0
      if (x == INT64_MIN && y == -1) return Num::of_int(op == "/" ? INT64_MIN : 0);
      return Num::of_int(op == "/" ? x / y : x % y);
    }
    if (op == "==") return Num::of_int(x == y);
    if (op == "!=") return Num::of_int(x != y);
    if (op == "<") return Num::of_int(x < y);
    if (op == "<=") return Num::of_int(x <= y);
    if (op == ">") return Num::of_int(x > y);
    if (op == ">=") return Num::of_int(x >= y);
  }
  return fail("unknown operator " + op);
}

}  // namespace

Expr Expr::parse(const std::string& text, const std::string& where) {
  Expr e;
  e.text_ = text;
  e.where_ = where;
  e.root_ = Parser(text, where).all();
  return e;
}

Num Expr::eval(const Env& env) const { return eval_node(*root_, env, text_, where_); }

}  // namespace runner

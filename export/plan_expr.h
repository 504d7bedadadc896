// Host values of a lowered program as expressions of the manifest's grammar (docs/export.md):
// integer math on dims, scalar arguments, loop counters, `let` names and readback results, C
// operators plus min/max/floordiv/floormod/select. Pure values are inlined where they are used;
// values that read a host var are named by a `let` where they are computed (the caller decides).
#pragma once
#include <string>
#include <unordered_map>

#include "core/ir/node.h"

namespace ember {

class PlanExprs {
 public:
  explicit PlanExprs(std::string program) : program_(std::move(program)) {}
  // Gives `n` a name; `at_start`: the name has its value before the plan's first step (dims
  // and scalar arguments), so expressions of it may size buffers.
  void name(const Node* n, const std::string& name, bool at_start);
  const std::string* name_of(const Node* n) const;
  // `n` as an integer expression. Throws CompileError naming the step (`what`) that needs it,
  // the op and the user's line when `n` has no form in the grammar (f32 math, bit operations).
  std::string expr(const Node* n, const char* what);
  // The same, and whether it names only values known at the plan's start.
  std::string start_expr(const Node* n, const char* what, bool* at_start);
  // A parameter or output value of `n`'s dtype: for f32, a named f32 value or a float literal.
  std::string value(const Node* n, const char* what);

 private:
  struct E {
    std::string text;
    int prec = 100;  // binding strength: 100 primary, 7 unary, 6 * / %, 5 + -, 4 comparisons, 3 &&, 2 ||
    bool late = false;
  };
  E build(const Node* n, const char* what);
  [[noreturn]] void fail(const Node* n, const char* what, const std::string& why) const;

  std::string program_;
  struct Named {
    std::string name;
    bool at_start = false;
  };
  std::unordered_map<const Node*, Named> names_;
};

// A float literal of the grammar: up to 9 significant digits, inf, -inf or nan.
std::string float_literal(float f);

}  // namespace ember

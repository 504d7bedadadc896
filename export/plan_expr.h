// Host values of a lowered program as expressions of the manifest's grammar (docs/export.md):
// integer math on dims, scalar arguments, loop counters, `let` names and readback results, C
// operators plus min/max/floordiv/floormod/select. Pure values are inlined where they are used;
// values that read a host var are named by a `let` where they are computed (the caller decides).
#pragma once
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/ir/node.h"

namespace ember {

// A host value outside the grammar (float math, bit operations) that a runtime plan computes from
// the IR: `node` evaluated as the interpreter evaluates host scalars, its operands down to the
// named values in `leaves`. Only plans built for the runtime have them (no manifest form).
struct HostValue {
  std::string name;
  const Node* node = nullptr;
  std::vector<std::pair<const Node*, std::string>> leaves;
  bool at_start = false;  // every leaf is known before the plan's first step
};

class PlanExprs {
 public:
  explicit PlanExprs(std::string program) : program_(std::move(program)) {}
  // Runtime plans: a value outside the grammar becomes a HostValue instead of a CompileError.
  void allow_host_values() { host_values_ = true; }
  // The HostValues made since the last call. Late ones (not `at_start`) are forgotten: each later
  // use computes its own, where it is used (as pure values are inlined).
  std::vector<HostValue> take_host_values();
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
  // `n` as a HostValue when runtime plans allow it and n is host scalar math; else null.
  const E* host_value(const Node* n);
  [[noreturn]] void fail(const Node* n, const char* what, const std::string& why) const;

  std::string program_;
  struct Named {
    std::string name;
    bool at_start = false;
  };
  std::unordered_map<const Node*, Named> names_;
  bool host_values_ = false;
  std::vector<HostValue> pending_;
  int host_value_count_ = 0;
  E host_e_;
};

// A float literal of the grammar: up to 9 significant digits, inf, -inf or nan.
std::string float_literal(float f);

}  // namespace ember

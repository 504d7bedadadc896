// Evaluates the host plan's expressions (export/plan_expr.h; grammar in docs/export.md) for the
// runtime's plan executor: each expression string is parsed once into postfix code over numbered
// name slots, then evaluated per call with 64-bit signed integers, as the manifest specifies.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ir/dtype.h"

namespace ember {

// The names an expression may use, each bound to a slot of the executor's frame.
class PlanSymbols {
 public:
  // Adds `name` (or returns its slot when it exists already: a `let` assigned again).
  int add(const std::string& name, DType dtype);
  // The slot of `name`, or -1.
  int find(const std::string& name) const;
  DType dtype(int slot) const { return dtypes_[static_cast<size_t>(slot)]; }
  int size() const { return static_cast<int>(dtypes_.size()); }

 private:
  std::unordered_map<std::string, int> slots_;
  std::vector<DType> dtypes_;
};

// One parsed expression. A slot holds a name's value as the manifest reads it: i32 sign-extended,
// u32 zero-extended, bool 0/1, f32 its IEEE-754 bits (f32 names appear only as whole values).
class PlanValue {
 public:
  PlanValue() = default;
  // Parses `text` as an integer expression, or (`dtype` f32) as an f32 name or float literal.
  // Throws CompileError naming the expression when it does not parse or names an unknown value.
  PlanValue(const std::string& text, DType dtype, const PlanSymbols& symbols);
  // The value for the slots `s`, as a 64-bit integer (f32: the bits).
  int64_t eval(const int64_t* s) const;
  // The value as the 32-bit word of `dtype_` (the dtype given when parsed).
  uint32_t word(const int64_t* s) const;
  const std::string& text() const { return text_; }

 private:
  enum class Code : uint8_t {
    lit, slot, add, sub, mul, div, mod, floordiv, floormod, min, max, select,
    eq, ne, lt, le, gt, ge, land, lor, neg, lnot
  };
  struct Ins {
    Code code;
    int64_t arg;  // lit: the value; slot: the slot
  };
  friend class PlanParser;
  std::string text_;
  DType dtype_ = DType::i32;
  std::vector<Ins> code_;
  int depth_ = 0;  // the stack the code needs
};

// `v` (a 64-bit expression value) stored as a slot of `dtype`: wrapped to 32 bits as Ember's
// arithmetic does (sign-extended for i32, zero-extended for u32 and f32 bits, 0/1 for bool).
int64_t plan_slot_value(int64_t v, DType dtype);
// A word of `dtype` (a scalar argument, a readback) as a slot value.
int64_t plan_word_value(uint32_t w, DType dtype);

}  // namespace ember

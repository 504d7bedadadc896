// What the GLSL and HLSL dialects share. Scalar helpers reproducing core/ir/eval.cpp: floor
// div/mod with x/0 == 0 (on magnitudes in uint, so no signed `/` or `%` of a negative operand
// runs), shifts by >= 32, saturating float->int, fmin/fmax returning the non-NaN operand,
// NaN/inf tests on the bits and sqrt outside its domain (the transcendental functions are
// codegen/shader_math.h's). Written once in the common subset of the languages; each dialect
// defines the spelling macros first. Also the parts of the GLSL and HLSL dialect tables that
// differ only in how a conversion is spelled (set_shader_common).
#pragma once
#include <string>

#include "codegen/dialect.h"

namespace ember {

// Conversions the text uses: EMBER_U(x), EMBER_I(x) (value casts), EMBER_AS_U(x), EMBER_AS_F(x)
// (bit casts between float and uint); codegen/shader_math_text.h also EMBER_F(x) (to float) and
// EMBER_OUT(T) (an out parameter's type).
extern const char* const kShaderHelpers;

// How a shader language spells conversions: templates of one operand {0}.
struct ShaderSpelling {
  std::string to_int, to_uint, to_float;  // value conversions: "int({0})" / "((int)({0}))"
  std::string float_as_int, float_as_uint;  // bit casts: "floatBitsToInt({0})" / "asint({0})"
  std::string int_as_float, uint_as_float;
  std::string float_suffix;               // on float literals: "" / "f"
};
// Fills the table entries GLSL and HLSL write alike but for `s`: types, every expression but
// sign, round and the transcendental functions (set_shader_math), casts and bit casts, loads and stores of values, native workgroups' common parts, loops,
// and the kernel's thread guard's close. The dialect sets the rest (and may override any).
void set_shader_common(Dialect& d, const ShaderSpelling& s);
// Atomic functions by AtomicKind, after the language's prefix ("atomic", "Interlocked"), and
// those on bool words, which combine as 0/1 (add and max are or, min is and), as eval.cpp does.
extern const char* const kAtomicFunctions[kAtomicKinds];
extern const char* const kBoolAtomicFunctions[kAtomicKinds];

}  // namespace ember

// The GPU dialects' transcendental functions (issue 39): float-only implementations of exp, exp2,
// log, log2, sin, cos, tan, sinh, cosh, tanh, asin, acos, atan, atan2 and pow, written once in
// codegen/shader_math_text.h with the spelling macros of the GLSL, HLSL and CUDA dialects, so that
// a kernel's numbers do not depend on the driver's builtins (NumPy's accuracy vectors on every
// backend: tests/python/test_math_accuracy.py). Each dialect prints its math ops as calls to them
// (set_shader_math) and adds the pieces a kernel calls after its prelude (Dialect::gated_prelude).
// Fast math (README "Backends": EMBER_FAST_MATH / em.compile(fast_math=True)) prints the
// language's builtins instead, as Ember did before.
#pragma once
#include <string>
#include <vector>

#include "codegen/dialect.h"

namespace ember {

// The pieces of codegen/shader_math_text.h in order, each with the function names whose calls
// need it. `device`: every function made a CUDA __device__ inline function.
std::vector<GatedPrelude> shader_math_pieces(bool device = false);

// The math ops' expression templates (exp ... tanh, pow, atan2, asin, acos, atan) and gated
// prelude: Ember's functions, or the builtins `builtin_math` spells ({0}: the operand) with `fast`.
struct BuiltinMath {
  std::string exp, exp2, sin, cos, tan, sinh, cosh, tanh;  // "exp({0})" / "expf({0})"
};
void set_shader_math(Dialect& d, bool fast, const BuiltinMath& builtin_math, bool device = false);

}  // namespace ember

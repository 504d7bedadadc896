// Scalar helpers shared by the GLSL and HLSL dialects, reproducing core/ir/eval.cpp: floor
// div/mod with x/0 == 0 (on magnitudes in uint, so no signed `/` or `%` of a negative operand
// runs), shifts by >= 32, saturating float->int, fmin/fmax returning the non-NaN operand,
// NaN/inf tests on the bits, pow/log/sqrt outside their domain, and asin/acos/atan as in Cephes
// (about 1 ulp; driver builtins may be far coarser). Written once in the common subset of the
// two languages; each dialect defines the four spelling macros first.
#pragma once

namespace ember {

// Conversions the text uses: EMBER_U(x), EMBER_I(x) (value casts), EMBER_AS_U(x), EMBER_AS_F(x)
// (bit casts between float and uint).
extern const char* const kShaderHelpers;

}  // namespace ember

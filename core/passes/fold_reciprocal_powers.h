// The cube of a reciprocal square root, q * (q * q) with q = 1 / sqrt(a) or rsqrt(a), becomes
// 1 / (a * sqrt(a)) when q is used for nothing else: one multiply instead of two, one rounding
// of a instead of three of q, and a shorter chain after the division. Reverse mode makes that
// cube for the derivative of every a^(-1/2) (rsqrt's rule; 1 / sqrt(a)'s quotient and square
// root rules once share_reciprocals has turned their two divisions by sqrt(a) into products):
// the gradient of an inverse-distance potential, of a normalization. Not exact: a * sqrt(a)
// rounds where sqrt(a)^2 would, so it is left alone where the cube reaches a use whose result its
// last bit can decide (pass_util's reaches_discrete_use), and a must be provably non-negative and never -0
// (squares, sums and products of such values, positive constants...), so that a negative a
// (NaN either way) and a = -0 (-inf against +inf) keep their results.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool fold_reciprocal_powers(Program& p);

}  // namespace ember

// Fused multiply-add for targets with it in hardware (PipelineOptions::contract_fma: the CPU
// backend on a host with FMA): inside kernels, an f32 a * b + c (or a * b - c, c - a * b) becomes
// fma(a, b, c), one rounding instead of two and one instruction instead of two. The interpreter
// evaluates fma exactly as the kernels do (std::fma; eval.cpp), so the CPU backend still matches
// it bit for bit, where -ffp-contract=fast would have let the C++ compiler fuse as it pleases.
//
// A product is contracted only when every user of it is an add or sub in its own block that
// takes it (the product then disappears, as GCC's contraction requires), and never:
//   - when the other addend is a product too, unless both are squares added (x*x + y*y: both
//     >= 0, nothing cancels). a*d - b*c of a singular matrix, x*x - y*y at x == y: the unfused
//     difference is exactly 0, the fused one the rounding error of the other product, which a
//     sqrt would turn into NaN;
//   - when the sum reaches, in its kernel, a use where its last bit can decide something discrete
//     (a comparison, min/max, floor, a conversion to an integer...; at any distance, also through
//     the vars it is set to: pass_util's values_reaching_discrete_uses, found for the whole
//     kernel at once): branches, counts and masks then
//     come out as an unfused evaluation of the same operations gives them (NumPy's float32 steps
//     of examples/mandelbrot.py, the GPU backends), and a copy of the value computed elsewhere
//     unfused compares equal. A value stored and compared by another kernel is not followed;
//     there the fused result differs from the unfused one by its rounding only;
//   - when a factor is a var (its value at the product may not be its value at the sum);
//   - in a contraction kernel (core/analysis/contraction.h): the cpp dialect computes its sums
//     with packed panels, from the product and the add it finds there.
//
// c - a * b becomes fma(-a, b, c). Where a is a difference p - q used only so and squared (a
// pairwise distance and force: x_j - x_i), and p changes with the innermost loop around it while
// q does not, a becomes q - p and the negations go (invariant operand first: x86 then takes the
// varying load as vsubps's memory operand; exact but for the sign of a zero).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool contract_fma(Program& p);

}  // namespace ember

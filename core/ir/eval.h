// Scalar semantics of every elementwise op, on 32-bit words. This one definition is shared by
// constant folding, the reference interpreter and the CPU host plan; code generators must match
// it (tests compare them). Integer div/mod use floor semantics and return 0 for a zero divisor.
#pragma once
#include <cstdint>

#include "core/ir/node.h"

namespace ember {

// Result of an elementwise op. `in` is the operands' dtype (the first operand's for select's
// value operands; casts read `in`, write `out`).
uint32_t eval_elementwise(Op op, DType out, DType in, const uint32_t* args, int nargs);

// Converts a word of dtype `from` to dtype `to` (value conversion, as casts do).
uint32_t convert_word(uint32_t w, DType from, DType to);

// Combines an accumulator with a value for a reduction or an atomic of the given kind.
// For argmax/argmin the accumulator is the best value so far (of the operand's dtype `t`): the
// identity is max's/min's, the step keeps the better one (arg_replaces); the index is tracked
// by the caller.
uint32_t reduce_step(ReduceKind k, DType t, uint32_t acc, uint32_t v);
uint32_t reduce_identity(ReduceKind k, DType t);
// What a reduction's accumulator starts from: the identity, except that a non-empty f32 sum
// starts from -0.0, an exact identity (-0.0 + x == x for every x, +0.0 included), so the result
// is the IEEE sum of the terms: -0.0 only when every term is -0.0 (np.sum would give +0.0 there).
// GPU drivers fold `0.0 + x` into x, which a +0.0 start made visible as a -0.0 one-term sum on
// the GPUs alone (tests/fuzz/FINDINGS.md, F10); `-0.0 + x` folds to the same x everywhere.
uint32_t reduce_start(ReduceKind k, DType t, bool nonempty);
// argmax/argmin: whether value v (later in row-major order) replaces the best value so far:
// strictly greater (less), or v is the first NaN (NumPy: the first NaN is the extreme).
bool arg_replaces(ReduceKind k, DType t, uint32_t best, uint32_t v);
uint32_t atomic_step(AtomicKind k, DType t, uint32_t old, uint32_t v);

// Applies an index mode to a coordinate in [0, n).
int64_t apply_index_mode(IndexMode m, int64_t i, int64_t n);

}  // namespace ember

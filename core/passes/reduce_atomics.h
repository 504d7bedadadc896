// Atomics that need no atomicity (core/analysis/dependence.h decides, with isl):
//  - an atomic add/min/max/and/or/xor whose address ignores some axes of its kernel (S[i] in a
//    kernel over [N, M]) becomes a reduction over those axes inside each remaining thread: the
//    kernel runs over [N] with a loop over M accumulating in a var, then one update of S[i]
//    (not when fewer than 64 threads would remain, or each would loop over more than 16 times
//    the thread count: a GPU would idle);
//  - an atomic whose address isl proves injective over the threads (A[2 * i + 1], a transpose, a
//    shift: no two threads touch one element) and whose memory no other thread touches becomes a
//    plain load, op and store (so does the update after such a reduction).
// Indirect addresses (histograms) keep their atomics. Float sums change order (the loop sums
// first, then adds to memory), within the tolerance of an unordered atomic sum.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool reduce_atomics(Program& p);

}  // namespace ember

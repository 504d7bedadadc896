// Loop-invariant code motion inside kernels: a computation in a kernel's loop body whose operands
// are all defined outside the loop moves to just before the loop, so each thread computes it once
// instead of once per iteration. E.g. the gathered row X[idx[i]] of a matmul's thread: its index
// (a load of idx and the clamping math) no longer sits in the k loop, where the cpp dialect's
// `omp simd` loop turned every read of X into a gather.
// Moved: pure values, and loads of memories the kernel never writes when the loop runs at least
// once (constant bounds) and has no break or continue (a load is never speculated). Only the
// loop's own statements move, not those under an `if` in it; inner loops are done first. A loop
// (runs at least once, no jump) whose only statement is a store of an invariant value at an
// invariant index becomes that one store.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool hoist_invariants(Program& p);

}  // namespace ember

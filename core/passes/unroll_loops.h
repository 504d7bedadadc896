// Full unrolling of short constant loops inside kernels: a loop with constant bounds and at most
// kMaxUnrollTrips iterations (the xyz sum of a distance, a 3x3 stencil row) becomes straight-line
// code, so that cse can share its loads with the rest of the thread and the C compiler can
// vectorize the loop around it.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool unroll_loops(Program& p);

}  // namespace ember

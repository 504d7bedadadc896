// Refuses stores that race silently: a store (tensor-level or in an em.kernel) whose value varies
// along an axis of its threads that none of its indices varies along would have several threads
// write different values into one element, and which one lands would depend on the backend's
// thread order. Reports an ember::ShapeError naming the target, the axis and the user's line
// (core/analysis/thread_axes.h decides what varies; ifs of the form `index(a) == v` fix axis a).
// Atomics combine their threads' values by definition and are not checked. Never changes the IR.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool check_races(Program& p);

}  // namespace ember

// Hoists grid-synchronizing loops out of explicit kernels. A loop inside a kernel whose
// iterations read what other threads wrote in earlier iterations (the stages of a bitonic sort)
// needs every thread to finish one iteration before any starts the next; when its bounds are
// the same for every thread, the kernel is split around it and the loop runs on the host, one
// dispatch of its body per iteration. The user writes one kernel; the compiler decides.
// Only kernels the user wrote are considered (passes make race-free ones). The dependence
// analysis (core/analysis/dependence.h) decides whether the loop's accesses meet across threads;
// it over-approximates indices it cannot model, so a loop may be hoisted that did not need it:
// still correct, one dispatch per iteration.
// Part of kernel formation: fuse_kernels calls it first, then turns values that now cross
// kernels into buffers.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool hoist_grid_loops(Program& p);

}  // namespace ember

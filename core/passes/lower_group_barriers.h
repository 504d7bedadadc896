// Workgroups on a CPU: one CPU thread runs a whole workgroup. A kernel with a group shape G
// over shape S becomes a kernel over the ceil(S / G) groups whose body runs each phase (the
// code between two barriers) as a loop nest over the group's threads; threads outside S skip
// the phase's statements. Values live across a barrier are kept in per-thread arrays of group
// size, group buffers become arrays of the CPU thread, barriers disappear, and control flow
// around barriers (uniform by construction) runs once per group. Runs after lower_indexing, only
// for backends that run a group on one thread (PipelineOptions::lower_groups).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool lower_group_barriers(Program& p);

}  // namespace ember

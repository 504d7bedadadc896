// Lowers high-level algorithm nodes into loops of scalar ops. A reduction becomes an accumulator
// var, one loop per reduced axis, a load of the operand and a set per step (argmax/argmin: two
// vars, the best value and its index, updated with selects). A scan becomes a blocked parallel
// scan of three explicit kernels (per-block scans, a scan of the block totals, block offsets).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool lower_algorithms(Program& p);

}  // namespace ember

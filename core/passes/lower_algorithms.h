// Lowers high-level algorithm nodes (reductions) into loops of scalar ops: an accumulator
// var, one loop per reduced axis, a load of the operand and a set per step.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool lower_algorithms(Program& p);

}  // namespace ember

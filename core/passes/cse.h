// Common-subexpression elimination: merges identical pure nodes, and identical loads with no
// write to their memory in between, where the first is visible from the second.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool cse(Program& p);

}  // namespace ember

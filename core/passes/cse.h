// Common-subexpression elimination: merges identical pure nodes, and identical loads with no
// write to their memory in between, where the first is visible from the second.
#pragma once
#include "core/ir/node.h"
#include "core/passes/simplify.h"

namespace ember {

bool cse(Program& p);
// The same, noting in `resimplify` what it changed that simplify's answers depend on.
bool cse(Program& p, Resimplify* resimplify);

}  // namespace ember

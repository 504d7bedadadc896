// Dead-code elimination: removes nodes whose results are unused, stores to buffers nobody
// reads, vars that are only assigned, and scopes left empty.
#pragma once
#include "core/ir/node.h"
#include "core/passes/simplify.h"

namespace ember {

// It reaches its own fixed point: a second run finds nothing (removing the last loads of a
// buffer makes its stores dead, and it runs again when that happens).
bool dce(Program& p);
// The same, noting in `resimplify` the values that lost uses (simplify's single-use folds).
bool dce(Program& p, Resimplify* resimplify);

}  // namespace ember

// Algebraic simplification: folds constants, removes identities (x*1, x+0, select on a
// constant), and replaces loads of a value at its own coordinates by the value.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool simplify(Program& p);

}  // namespace ember

// Algebraic simplification: folds constants, removes identities (x*1, x+0, select on a
// constant), folds signs and power-of-two factors of f32 products together (exact up to
// over/underflow), and replaces loads of a value at its own coordinates by the value.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool simplify(Program& p);

}  // namespace ember

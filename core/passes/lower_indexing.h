// Lowers multi-dimensional memory accesses to one flat row-major index, making the index
// mode explicit (clamp/wrap) except where the index is provably in range.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool lower_indexing(Program& p);

}  // namespace ember

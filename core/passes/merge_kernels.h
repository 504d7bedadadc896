// Merges adjacent kernels when no dependence crosses threads (core/analysis/dependence.h): kernels
// of the same shape whose dependences all stay in one thread (not only at its own element: a row
// written and read by the same row thread), and a row kernel (shape P or P + [1]) with a
// neighbouring kernel over its rows' elements (P + [T]) whose dependences stay in the row, which
// becomes a loop over T inside each row's thread. Then forwards stored values to the loads that now follow them in the
// same thread. Load fusion often leaves such neighbours (softmax's and longformer's row max and row sum, and the
// normalized weights after them).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool merge_kernels(Program& p);

}  // namespace ember

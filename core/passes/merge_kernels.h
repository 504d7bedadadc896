// Merges adjacent kernels when no dependence crosses threads: kernels of the same shape whose
// shared memories are accessed only at the thread's own element, and a row kernel (shape P or
// P + [1]) with a neighbouring kernel over its rows' elements (P + [T]) that reads and writes
// shared memories only in the thread's own row, which becomes a loop over T inside each row's
// thread. Then forwards stored values to the loads that now follow them in the same thread.
// Load fusion often leaves such neighbours (softmax's and longformer's row max and row sum, and
// the normalized weights after them).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool merge_kernels(Program& p);

}  // namespace ember

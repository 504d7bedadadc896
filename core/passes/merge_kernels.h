// Merges adjacent kernels of the same shape when every memory one writes and the other touches
// is accessed only at the thread's own element (no dependence crosses threads), and forwards
// stored values to the loads that now follow them in the same thread. Load fusion often leaves
// such neighbours (softmax's row max and row sum).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool merge_kernels(Program& p);

}  // namespace ember

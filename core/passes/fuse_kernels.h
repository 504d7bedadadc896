// Kernel fusion: groups consecutive non-scalar nodes of one shape at each host scope level
// into kernel nodes when no dependence crosses threads, and turns values that cross kernels
// into buffers (store in the producer, load in the consumer).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool fuse_kernels(Program& p);

}  // namespace ember

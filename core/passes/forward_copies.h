// A kernel that only copies a buffer allocated in its own scope into another buffer of the same
// shape, when the source is not used afterwards (the `p.val = new_p` of a Jacobi loop), becomes
// a host move_memory: the destination takes over the source's storage and no data moves. Both
// accesses must be the thread's own element (DependenceAnalysis::own_element).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool forward_copies(Program& p);

}  // namespace ember

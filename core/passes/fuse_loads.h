// Load fusion: replaces a load of a buffer written by another kernel with a recomputation of
// the producer at the load's indices, when that is legal and cheaper than the memory traffic.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool fuse_loads(Program& p);

}  // namespace ember

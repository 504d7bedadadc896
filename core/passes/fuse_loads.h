// Load fusion: replaces a load of a buffer written by another kernel with a recomputation of
// the producer at the load's indices, when that is legal and cheaper than the memory traffic.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool fuse_loads(Program& p);
// The same, then (EMBER_VERIFY) tries every load it left once more, with the pass's state (what
// it copied, the buffers' loads), and asserts that none fuses: one sweep is enough.
bool fuse_loads_checking_one_sweep(Program& p);

}  // namespace ember

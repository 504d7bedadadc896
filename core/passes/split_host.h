// Splits host from device: fills every kernel's memories (buffers it touches) and params
// (host scalars it reads), after which a kernel refers outside itself only to those and to
// constants. The host level that remains is the host plan the runtime interprets.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool split_host(Program& p);

}  // namespace ember

// Kernel formation: drops empty kernels and numbers the kernels in program order (the ids
// name the generated functions and the dispatches).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool form_kernels(Program& p);

}  // namespace ember

// Dead-code elimination: removes nodes whose results are unused, stores to buffers nobody
// reads, vars that are only assigned, and scopes left empty.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool dce(Program& p);

}  // namespace ember

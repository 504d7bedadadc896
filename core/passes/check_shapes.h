// Checks shapes and index dtypes of every node and reports user errors (ember::ShapeError /
// ember::TypeError) at the user's source line. Never changes the IR.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool check_shapes(Program& p);

}  // namespace ember

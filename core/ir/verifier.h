// Checks the IR's invariants: links, use lists, scoping (operands visible where used), arity,
// dtypes and shapes. Tests run it after every pass; a failure throws ember::InternalError.
#pragma once
#include "core/ir/node.h"

namespace ember {

struct VerifyOptions {
  // After fuse_kernels: every load/store reads real memory, and every non-scalar node is in a kernel.
  bool kernels_formed = false;
};

void verify(const Program& p, const VerifyOptions& opt = {});

}  // namespace ember

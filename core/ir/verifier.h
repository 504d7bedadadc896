// Checks the IR's invariants: links, use lists, scoping (operands visible where used), arity,
// dtypes and shapes. Tests run it after every pass; a failure throws ember::InternalError.
#pragma once
#include "core/ir/node.h"

namespace ember {

struct VerifyOptions {
  // After fuse_kernels: every load/store reads real memory, and every non-scalar node is in a kernel.
  bool kernels_formed = false;
  // Check every use list and dim use list against the operands and shapes (the incremental
  // upkeep passes do). Off for a program whose lists were just built from its operands and
  // shapes (deserialize_program): then they hold by construction, and this check is most of the
  // verifier's time on large programs.
  bool use_lists = true;
};

void verify(const Program& p, const VerifyOptions& opt = {});

}  // namespace ember

// apply_schedule: applies the user's schedule (Program::schedule, from em.Program.schedule) to the
// kernels' loops before merge_kernels. Requests, one a line, in order:
//   interchange A B   swap loop A and loop B (perfectly nested, B directly in A, or A in B), or
//                     a kernel axis A and the loop B that is its kernel's body
//   tile A T          strip-mine loop A by T: an outer loop A_tile steps by T, A runs one tile
//   parallelize A     loop A (its kernel's whole body) becomes the kernel's last axis
//   fuse K1 K2        kernel K2 joins kernel K1 (same shape, adjacent)
// Loops are named as the user's `with em.loop(...) as A:` line names them (A_tile after tile);
// kernels by a name of their `with em.kernel(...) as (i, j):` axes, or by number in program order
// at this point (prog.ir("parallelize_host_loops")). Every request is checked first: interchange
// and parallelize by the isl dependence analysis (core/analysis/schedule_legality.h), fuse by
// DependenceAnalysis::within_thread; tile only strip-mines, which keeps every order. A request
// that would break a dependence, or that does not fit the program, is an ember CompileError
// naming it (the memory, its index and the source line).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool apply_schedule(Program& p);

}  // namespace ember

// Turns a host loop whose iterations carry no dependence (core/analysis/dependence.h,
// DependenceAnalysis::loop_carries) into a leading parallel axis of the kernels in its body: one
// dispatch over [trips] + S instead of one dispatch over S per iteration. The counter becomes
// begin + step * index(0); buffers allocated in the body get a leading axis (one row per
// iteration). A loop that carries a dependence (a scan over t) stays sequential.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool parallelize_host_loops(Program& p);

}  // namespace ember

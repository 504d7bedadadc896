// Legality of user schedules (core/passes/apply_schedule.h), decided by isl on the dependence
// analysis's access relations: a loop transformation is legal when no pair of accesses that may
// touch one element (at least one a write; updates of one kind commute) in one thread would run
// in the other order afterwards. Both queries look only inside one thread of one kernel: threads
// stay unordered, and the loops outside the transformed ones are held equal.
#pragma once
#include "core/analysis/dependence.h"
#include "core/ir/node.h"

namespace ember {

// Whether loop `outer` and loop `inner` (nested in it; every access under `outer` is under
// `inner`) of `kernel` may swap: no dependence has distance (+, -) on (outer, inner), which the
// swap would make (-, +). `why` gets the pair that would be reversed, the earlier access first.
bool interchange_keeps_dependences(DependenceAnalysis& da, const Node* kernel, const Node* outer, const Node* inner,
                                   DepWhy* why);

// Whether the iterations of loop `loop` of `kernel` are independent within a thread: no two
// accesses in different iterations may touch one element (vars made inside the loop are each
// iteration's own), so they may run as threads of a new kernel axis. `why`: the pair, earlier
// iteration's access first.
bool iterations_independent(DependenceAnalysis& da, const Node* kernel, const Node* loop, DepWhy* why);

}  // namespace ember

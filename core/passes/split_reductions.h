// Parallel reductions for GPU targets (PipelineOptions::split_reductions): a kernel with few
// threads (a full sum: one; column sums of a tall matrix: its columns) whose top-level loop is a
// reduction (core/analysis/reductions.h: sums, products, integer min/max into vars) would run
// that loop serially in each of its threads and leave the device idle. The loop moves into a
// kernel of its own before it, over the old threads times C workgroups of kSplitGroup threads:
//
//   part = buffer[S..., C]                          (C chosen on the host from the trip count)
//   kernel[S..., C * G] group [1..., G] {           the stage: thread j of output s takes the
//     p = identity                                  iterations j, j + C*G, ... (coalesced)
//     loop(begin + step * j, end, step * C * G) { p = p op x }
//     sh[l] = p; barrier                            then a tree in shared memory, log2 G steps
//     if (l < G/2) sh[l] = sh[l] op sh[l + G/2]; barrier ...
//     if (l == 0) part[s, g] = sh[0]
//   }
//   kernel[S...] { acc = init; loop c < C { acc = acc op part[s, c] }; the rest as before }
//
// The order of the terms is fixed by C and G (C is a function of the trip count only), so a
// result has the same bits on every run and every call; float sums are rounded in another order
// than the sequential loop's (within the rounding of a sum). The rest of the kernel (the code
// after the loop: a loss's scaling, a norm's sqrt, stores) stays in the combining kernel.
#pragma once
#include "core/ir/node.h"

namespace ember {

// Splits the qualifying loops of at least `min_trips` trips (a trip count known only at run time
// always qualifies).
bool split_reductions(Program& p, int64_t min_trips);

// The trips a loop needs (PipelineOptions::split_reductions on GPU backends): shorter loops are
// cheaper in one thread than a second dispatch.
constexpr int64_t kSplitMinTrips = 2048;

// Threads per workgroup of a split reduction's stage.
constexpr int kSplitGroup = 128;

}  // namespace ember

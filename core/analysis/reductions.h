// Reduction loops: a loop whose only effect on values outside it is accumulating into vars
// with one associative op (v = v + x; also v = v - x and v = fma(a, b, v), which add). Such a
// loop's iterations may be reordered and split into SIMD lanes (the float result then differs
// from the sequential order by rounding only).
#pragma once
#include <vector>

#include "core/ir/node.h"

namespace ember {

struct ReductionVar {
  const Node* var;
  Op op;  // add (also for v = v - x and v = fma(a, b, v)) or mul (any dtype); min or max (integers only)
};

struct ReductionOptions {
  // f32 min and max accumulate too: reordered, they give the same value but for the sign of a
  // zero extreme when both +0 and -0 are among the terms (min/max of equal operands give the
  // second).
  bool float_extrema = false;
  // Accumulations may sit in scopes inside the loop (an inner loop of a multi-axis sum, an if),
  // not only directly in it.
  bool nested = false;
};

// The accumulators of `loop` when it is a reduction loop; empty otherwise (also when it has no
// accumulator). A reduction loop has no break/continue of its own, no memory writes, and no
// var from outside that is read or written other than through its accumulations (one or more
// per iteration, all with the same op). One entry per accumulator.
std::vector<ReductionVar> reduction_vars(const Node* loop, const ReductionOptions& o = {});

}  // namespace ember

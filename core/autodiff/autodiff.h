// Automatic differentiation of traced programs (core/IR.md "Derivatives"). Both modes are
// program transforms on the traced, tensor-level IR: they emit the derivative code at the
// tracer's insertion point, as ordinary traced ops, so it goes through the same fusion as the
// rest of the program.
#pragma once
#include <vector>

#include "core/ir/node.h"

namespace ember {

class Tracer;

// Reverse mode: the vector-Jacobian product of `y` with `dy` (ones when null) with respect to
// each of `xs` (values, vars: the var's value where the enclosing scope begins, or memories:
// the argument's contents), in the same order. `y` is differentiated through everything traced
// before this point in the current scope: ops, gathers and scatters, reductions, vars, host
// loops (taped), ifs, per-thread loops and kernels (recomputed).
std::vector<Node*> grad(Tracer& tr, Node* y, const std::vector<Node*>& xs, Node* dy);

// Forward mode: the derivative of `y` along `dxs` at `xs` (the Jacobian-vector product),
// computed as the transpose of the vector-Jacobian product (grad of <grad(y, xs, u), dxs> with
// respect to u), which is exact because the VJP is linear in u.
Node* jvp(Tracer& tr, Node* y, const std::vector<Node*>& xs, const std::vector<Node*>& dxs);

// Whether reverse mode has a derivative rule for `op` (every op without F_NONDIFF must).
bool has_derivative_rule(Op op);

}  // namespace ember

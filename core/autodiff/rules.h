// The derivative table of the elementwise ops (rules.cpp), shared by reverse and forward mode.
#pragma once
#include <vector>

#include "core/autodiff/autodiff.h"

namespace ember {

class Tracer;

// The adjoint contributions of elementwise node `n` (result adjoint `g`) to each operand, in
// operand order: g * dn/d(operand). Null where an operand gets nothing (an integer or boolean
// operand, or a derivative that is zero almost everywhere). Emitted through `tr` at its
// insertion point; operands of `n` must be visible there.
std::vector<Node*> elementwise_vjp(Tracer& tr, Node* n, Node* g);

// d prod(x over reduce node n's axes) / d x_i = the product of the other elements, exact where
// x has zeros (one zero: only that element's partial is nonzero; two or more: all are 0). Has
// x's shape.
Node* prod_partial(Tracer& tr, Node* n);

// Whether anything stores into (or atomically updates, or moves into) memory `m`; a memory
// nothing writes is differentiated like a value.
bool memory_is_written(const Node* m);

}  // namespace ember

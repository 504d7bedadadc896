// The derivative table of the elementwise ops (rules.cpp), shared by reverse and forward mode.
#pragma once
#include <unordered_set>
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

// Forward activity over `all` (program order): the nodes that depend on some x, to a fixpoint
// (loops carry dependences backwards). f32 values of differentiable ops; vars set and memories
// written (stored, or updated by an atomic of any kind: the transforms report the kinds they
// cannot differentiate) with active values, those set/store/atomic nodes, and sets/stores
// that overwrite an active var or memory with anything (they end its gradient). Detached values
// and what only they reach are inactive.
std::unordered_set<const Node*> active_nodes(const Tracer& tr, const std::vector<Node*>& all,
                                             const std::vector<Node*>& xs);

// `v`, a value of reduce node `n`'s result shape, broadcast back over its operand's shape.
Node* reduce_back(Tracer& tr, Node* n, Node* v);

// Whether anything stores into (or atomically updates, or moves into) memory `m`; a memory
// nothing writes is differentiated like a value.
bool memory_is_written(const Node* m);

}  // namespace ember

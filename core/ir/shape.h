// Shapes are lists of dimension nodes (scalar i32 host values: constants, symbolic dims or
// computed). Two dims are equal when they are the same node or equal constants.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "core/ir/node.h"

namespace ember {

using Shape = std::vector<Node*>;
// A read-only view of a shape: a Shape or a node's DimList, without copying either.
using ShapeView = std::span<Node* const>;
inline Shape to_shape(ShapeView s) { return Shape(s.begin(), s.end()); }

// The value of a constant dimension, or -1 when it is only known at run time.
int64_t const_dim(const Node* d);
bool same_dim(const Node* a, const Node* b);
bool same_shape(ShapeView a, ShapeView b);
// "[N, 3]" using dimension names and constants.
std::string shape_str(ShapeView s);
// Product of the constant dims, or -1 when any is symbolic.
int64_t const_size(ShapeView s);
// Whether index `i` is certainly in [0, d) without clamping: a constant in range, a coordinate
// of its own shape or of `kernel` (the scope i is evaluated in, or null) along a dim equal to d, a loop counter
// bounded by d, x % d.
bool index_in_range(const Node* i, const Node* d, const Node* kernel);

}  // namespace ember

// The stable text form of the IR: C-like, one node per line, `{}` around children, names
// numbered in program order. Used for EMBER_DEBUG=ir, golden tests and the compile-cache key.
#pragma once
#include <string>

#include "core/ir/node.h"

namespace ember {

std::string print_program(const Program& p);
// One node (without children), using program-order numbering of `p`.
std::string print_node(const Program& p, const Node* n);

}  // namespace ember

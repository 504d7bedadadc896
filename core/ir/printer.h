// The stable text form of the IR: C-like, one node per line, `{}` around children, names
// numbered in program order. Used for EMBER_DEBUG=ir, golden tests and the compile-cache key.
#pragma once
#include <string>

#include "core/ir/node.h"

namespace ember {

std::string print_program(const Program& p);
// One node (without children), using program-order numbering of `p`.
std::string print_node(const Program& p, const Node* n);

// The semantic attributes (EMBER_NODE_ATTRS) that the text of `op` leaves out although they may
// differ from their defaults; every other one is shown where it differs (checked for every
// attribute of the list by tests/cpp/test_node_attrs.cpp).
bool printer_omits(Op op, const char* attr);

}  // namespace ember

// Algebraic simplification: folds constants, removes identities (x*1, x+0, select on a
// constant), folds signs and power-of-two factors of f32 products together (exact up to
// over/underflow), and replaces loads of a value at its own coordinates by the value.
#pragma once
#include <vector>

#include "core/ir/node.h"

namespace ember {

bool simplify(Program& p);

// What cse and dce changed that simplify's answer for a node depends on, noted while simplify
// is at its fixed point, so the cleanup re-simplifies those nodes instead of every node (issue
// 17: a full walk per cleanup round). A node's answer depends on the node, its operands (their
// kind, constants, shapes and identity) and how many users each operand has (single-use folds).
struct Resimplify {
  std::vector<Node*> nodes;  // nodes whose operands were replaced (cse)
  std::vector<Node*> lost;   // values that lost uses: each one left with one user is re-simplified there
  bool all = false;          // a change the lists cannot describe (a dim replaced in shapes): every node
  bool empty() const { return nodes.empty() && lost.empty() && !all; }
  void clear() { *this = Resimplify{}; }
};
// Simplifies the nodes `r` names (r.all is the caller's to handle: it runs simplify). Returns
// whether anything changed; a change may enable more, which only a full simplify finds.
bool simplify_nodes(Program& p, const Resimplify& r);

}  // namespace ember

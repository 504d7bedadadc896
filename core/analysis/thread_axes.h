// Thread axes: along which axes of a domain (the shape a store runs over: its threads) a value
// may differ from one thread to another. index(a) varies along a; loads and elementwise math
// along their indices' and operands' axes; a var along its initial value's, every set value's
// and the axes of the conditions and loop bounds those sets sit under; shape-[] values along none
// (they are uniform); anything else of the domain's shape (a reduction's result, an argument,
// an atomic's old value) along every axis of extent other than 1. An over-approximation: a value
// may be equal on threads the analysis says it differs on, never the reverse.
//
// Used by the tracer (a scatter value lower-rank than its indices is aligned with the axes they
// vary along) and by check_races (a store whose value varies along an axis none of its indices
// varies along is a race: ShapeError).
#pragma once
#include <cstdint>
#include <unordered_map>

#include "core/ir/node.h"
#include "core/ir/shape.h"

namespace ember {

class ThreadAxes {
 public:
  // Axes as bits (axis a is bit a); domains of more than 64 axes vary along every axis.
  explicit ThreadAxes(ShapeView domain);

  // Bits of the domain's axes of extent other than 1 (a symbolic extent counts).
  uint64_t all() const { return all_; }
  // The axes along which `e` (of the domain's shape or []) may vary. Vars vary along every axis
  // unless solve() ran over their program.
  uint64_t varying(const Node* e);
  // Computes every var's axes of the domain's shape in `p`, to a fixpoint over its sets.
  void solve(const Program& p);
  // Axes that the conditions of the ifs around `n` (of the domain's shape) fix to one value:
  // `index(a) == v` with v not varying along a, and conjunctions of such; with `group_local`,
  // `local_index(a) == v` too (a group buffer is per group: one thread per group writes it).
  uint64_t pinned(const Node* n, bool group_local);

 private:
  uint64_t rule(const Node* e);
  uint64_t control(const Node* set, const Node* stop);
  uint64_t pins(const Node* cond, bool group_local);
  bool in_domain(const Node* e) const;

  Shape domain_;
  uint64_t all_ = 0;
  bool solved_ = false;
  std::unordered_map<const Node*, uint64_t> memo_;
};

}  // namespace ember

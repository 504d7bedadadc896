// Group uniformity: which values inside a workgroup kernel are equal on every thread of a group,
// and which scopes let only some of a group's threads run their children. Every thread of a
// group must reach the same barriers, so a barrier may only sit under uniform control flow
// (core/IR.md, "Workgroups"). Used by the tracer (user errors), the verifier, the interpreter
// and lower_group_barriers.
#pragma once
#include <unordered_map>
#include <unordered_set>

#include "core/ir/node.h"

namespace ember {

class GroupUniformity {
 public:
  // Uniform: constants, host scalars (not host vars), group_index, counters of loops with
  // uniform bounds, and pure ops of uniform values. Everything else (index, local_index, loads,
  // atomics, vars) may differ between the threads of a group.
  bool uniform(const Node* v);

 private:
  std::unordered_map<const Node*, bool> memo_;
};

// The innermost scope from `scope` up to (not including) its kernel that not every thread of a
// group runs alike: an if/else whose condition is not uniform, a loop whose bounds are not, or a
// loop that a break_/continue_ of its own may leave early. Null when control flow is uniform.
const Node* divergent_scope(const Node* scope, GroupUniformity& u);

// Whether `n` is a barrier or a scope holding one; an if and its else count as one.
bool holds_barrier(const Node* n);

// The nodes of kernel k's subtree that hold a barrier (see holds_barrier), in one walk.
std::unordered_set<const Node*> barrier_holders(const Node* k);

}  // namespace ember

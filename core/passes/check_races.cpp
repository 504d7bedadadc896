#include "core/passes/check_races.h"

#include <vector>

#include "core/analysis/thread_axes.h"
#include "core/ir/shape.h"

namespace ember {

namespace {
std::string target_text(const Node* mem) {
  if (!mem->name.empty()) return "'" + std::string(mem->name) + "'";
  std::string what = mem->op == Op::group_buffer ? "the group buffer" : "the tensor";
  return mem->loc.known() ? what + " made at line " + std::to_string(mem->loc.line) : what;
}
std::string dim_text(Node* d) {
  std::string t = shape_str(ShapeView(&d, 1));  // "[n]"
  return t.substr(1, t.size() - 2);
}
}  // namespace

bool check_races(Program& p) {
  // Stores grouped by shape: one analysis (and one var fixpoint) per distinct domain.
  std::vector<std::pair<Node*, std::vector<Node*>>> domains;
  p.for_each([&](Node* n) {
    if (n->op != Op::store || n->shape.empty()) return;
    for (auto& [d, stores] : domains)
      if (same_shape(d->shape, n->shape)) {
        stores.push_back(n);
        return;
      }
    domains.push_back({n, {n}});
  });
  for (auto& [first, stores] : domains) {
    ThreadAxes axes(first->shape);
    axes.solve(p);
    for (Node* s : stores) {
      Node* mem = s->operand(0);
      uint64_t written = 0;
      for (int k = s->first_index_operand(); k < s->num_operands(); ++k) written |= axes.varying(s->operand(k));
      const uint64_t race =
          axes.varying(s->operand(1)) & axes.all() & ~written & ~axes.pinned(s, mem->op == Op::group_buffer);
      if (!race) continue;
      size_t a = 0;
      while (!(race >> a & 1)) ++a;
      EMBER_USER_ERROR(
          ShapeError, s->loc,
          "assignment into "
              << target_text(mem) << " races: over the assignment's shape " << shape_str(s->shape)
              << ", the value varies along axis " << a << " (of size " << dim_text(s->shape[a])
              << ") but no index of the target does, "
                 "so threads that write one element would write different values. Make the value "
                 "constant along that axis (a reduction with keepdims=True keeps its axes where they were; "
                 "index the value with the target's indices), index the target along it, or combine "
                 "the values with an atomic (em.atomic_add)");
    }
  }
  return false;
}

}  // namespace ember

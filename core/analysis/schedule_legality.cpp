#include "core/analysis/schedule_legality.h"

#include <vector>

#include "core/analysis/isl_ptr.h"

namespace ember {

namespace {

bool writes(const MemAccess& x) { return x.kind != AccessKind::read; }

// Whether an order between x and y matters: one writes, and they are not two updates of one
// commuting kind.
bool ordered_pair(const MemAccess& x, const MemAccess& y) {
  if (!writes(x) && !writes(y)) return false;
  if (x.kind == AccessKind::update && y.kind == AccessKind::update)
    return x.node->kind != y.node->kind || static_cast<AtomicKind>(x.node->kind) == AtomicKind::exchange;
  return true;
}

// The position of loop l among the loops around n inside its kernel (outermost 0), or -1.
int loop_depth(const Node* n, const Node* l) {
  std::vector<const Node*> loops;
  for (const Node* p = n->parent; p && p->op != Op::kernel && p->op != Op::program; p = p->parent)
    if (p->op == Op::loop) loops.insert(loops.begin(), p);
  for (size_t j = 0; j < loops.size(); ++j)
    if (loops[j] == l) return static_cast<int>(j);
  return -1;
}

// For every ordered pair of accesses under `scope` (x, y on one memory made outside `fresh`),
// `test` gets the instances that touch one element in one thread with equal counters of the
// loops outside `scope` (S_x -> S_y; the dims of scope's loop are at `base`), and says whether
// the pair breaks the request. Returns false at the first such pair (in `why`).
template <typename Test>
bool no_pair(DependenceAnalysis& da, const Node* kernel, const Node* scope, const Node* fresh, DepWhy* why, Test test) {
  AccessGroup g(kernel->shape, kernel->rank());
  g.add(const_cast<Node*>(scope));
  const auto rank = static_cast<unsigned>(kernel->rank());
  for (const auto& [mem, all] : g.by_memory()) {
    if (all.writes == 0 || mem->inside(fresh)) continue;
    std::vector<Isl<isl_map>> maps(all.all.size());  // each access's relation, built once
    auto relation = [&](size_t i) -> const Isl<isl_map>& {
      if (!maps[i]) maps[i] = Isl<isl_map>(da.access_relation(all.all[i], kernel->shape));
      return maps[i];
    };
    for (size_t i = 0; i < all.all.size(); ++i) {
      for (size_t j = 0; j < all.all.size(); ++j) {
        const MemAccess& x = all.all[i];
        const MemAccess& y = all.all[j];
        if (!ordered_pair(x, y)) continue;
        const Node* xn = x.node;
        const int base = loop_depth(xn, scope);
        if (base < 0 || loop_depth(y.node, scope) != base) {  // not an access under the loop
          if (why) *why = DepWhy{DepWhy::Cause::unknown, x, y};
          return false;
        }
        const Isl<isl_map>& mx = relation(i);
        const Isl<isl_map>& my = relation(j);
        if (!mx || !my) {
          if (why) *why = DepWhy{DepWhy::Cause::unknown, x, y};
          return false;
        }
        isl_map* meet = isl_map_apply_range(mx.copy(), isl_map_reverse(my.copy()));
        // Same thread, same iteration of every loop outside scope's.
        for (unsigned d = 0; meet && d < rank + static_cast<unsigned>(base); ++d)
          meet = isl_map_equate(meet, isl_dim_in, d, isl_dim_out, d);
        Isl<isl_map> m(meet);
        if (!m) {
          if (why) *why = DepWhy{DepWhy::Cause::unknown, x, y};
          return false;
        }
        const isl_bool broken = test(m, rank + static_cast<unsigned>(base));
        if (broken != isl_bool_false) {
          if (why) *why = DepWhy{broken == isl_bool_true ? DepWhy::Cause::crosses : DepWhy::Cause::unknown, x, y};
          return false;
        }
      }
    }
  }
  return true;
}

}  // namespace

bool interchange_keeps_dependences(DependenceAnalysis& da, const Node* kernel, const Node* outer, const Node* inner,
                                   DepWhy* why) {
  return no_pair(da, kernel, outer, inner, why, [](const Isl<isl_map>& meet, unsigned a) {
    // x before y on the outer loop, after it on the inner one: the swap would run y first.
    isl_map* r = isl_map_order_lt(meet.copy(), isl_dim_in, a, isl_dim_out, a);
    r = isl_map_order_gt(r, isl_dim_in, a + 1, isl_dim_out, a + 1);
    Isl<isl_map> rev(r);
    if (!rev) return isl_bool_error;
    const isl_bool empty = isl_map_is_empty(rev.get());
    return empty == isl_bool_error ? isl_bool_error : empty == isl_bool_true ? isl_bool_false : isl_bool_true;
  });
}

bool iterations_independent(DependenceAnalysis& da, const Node* kernel, const Node* loop, DepWhy* why) {
  return no_pair(da, kernel, loop, loop, why, [](const Isl<isl_map>& meet, unsigned a) {
    Isl<isl_map> r(isl_map_order_lt(meet.copy(), isl_dim_in, a, isl_dim_out, a));
    if (!r) return isl_bool_error;
    const isl_bool empty = isl_map_is_empty(r.get());
    return empty == isl_bool_error ? isl_bool_error : empty == isl_bool_true ? isl_bool_false : isl_bool_true;
  });
}

}  // namespace ember

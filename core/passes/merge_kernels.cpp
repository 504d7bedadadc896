#include "core/passes/merge_kernels.h"

#include <unordered_map>
#include <unordered_set>

#include "core/analysis/dependence.h"
#include "core/analysis/explain.h"
#include "core/ir/builder.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// Whether same-shaped kernels a and b may run as one: every dependence between them stays in one
// thread (the dependence analysis decides).
// `why` (prog.explain) receives the refusal when the shapes are the same.
bool compatible(DependenceAnalysis& dep, Node* a, Node* b, std::string* why) {
  if (!same_shape(a->shape, b->shape)) return false;
  AccessGroup x(a->shape, a->rank()), y(b->shape, b->rank());
  x.add(a);
  y.add(b);
  DepWhy w;
  if (dep.within_thread(x, y, DepPairs::all, why ? &w : nullptr)) return true;
  if (why) *why = dependence_text(w, kernel_ref(a), kernel_ref(b), "at another thread");
  return false;
}

// ---- Row merges: a row kernel and a kernel over its rows' elements ----------------------------
//
// A row kernel r of shape P or P + [1] next to a wide kernel w of shape P + [T]: thread p of r
// can run the T threads (p, t) of w itself, as a loop over t appended to its body (w after r)
// or prepended to it (w before r). Legal when no dependence crosses rows: the dependence
// analysis shows that every dependence between them relates r's thread p to w's threads (p, t),
// so thread p reads and writes only what thread p of the other kernel reads and writes, in the
// original order. The t-loop runs w's threads of a row in one order, which any order of w's
// threads allows. Profitable (and not a loss of
// parallelism worth counting) when w does O(1) work per element (no loop) and r already loops
// over [0, T): the merged thread does a constant factor more work than r did, with r's
// parallelism, and the row values r computes reach w without a round trip through memory
// (longformer's and softmax's row max/sum followed by the normalized weights).

bool has_loop(Node* k) {
  bool found = false;
  walk_subtree(k, [&](Node* n) { found |= n->op == Op::loop; });
  return found;
}

// Whether r is a row kernel of wide kernel w (see above) that may take w's body. `why`
// (prog.explain) receives the refusal of a row pair; `r_first`: r runs before w.
bool row_mergeable(DependenceAnalysis& dep, Node* r, Node* w, bool r_first, std::string* why) {
  if (!r->group.empty() || !w->group.empty() || w->rank() < 2) return false;
  const int lead = w->rank() - 1;
  const bool unit = r->rank() == lead + 1 && const_dim(r->shape.back()) == 1;
  if (r->rank() != lead && !unit) return false;
  for (int a = 0; a < lead; ++a)
    if (!same_dim(r->shape[static_cast<size_t>(a)], w->shape[static_cast<size_t>(a)])) return false;
  if (has_loop(w)) {  // O(1) per element, so the merged thread's work stays r's order
    if (why)
      *why = kernel_ref(r_first ? w : r) + " stays apart from " + kernel_ref(r_first ? r : w) + ": " + kernel_ref(w) +
             " loops in each thread, so row kernel " + kernel_ref(r) + " does not take it as a loop (cost model)";
    return false;
  }
  Node* t = w->shape.back();
  bool loops_over_t = false;
  walk_subtree(r, [&](Node* n) {
    loops_over_t |= n->op == Op::loop && same_dim(n->operand(1), t);
  });
  if (!loops_over_t) {
    if (why)
      *why = kernel_ref(r_first ? w : r) + " stays apart from " + kernel_ref(r_first ? r : w) + ": row kernel " +
             kernel_ref(r) + " has no loop over " + index_text(t) + ", so taking " + kernel_ref(w) +
             "'s threads as one would cost parallelism (cost model)";
    return false;
  }
  AccessGroup x(r->shape, lead), y(w->shape, lead);
  x.add(r);
  y.add(w);
  DepWhy d;
  if (dep.within_thread(x, y, DepPairs::all, why ? &d : nullptr)) return true;
  if (why) {
    if (!r_first) std::swap(d.first, d.second);
    *why = dependence_text(d, kernel_ref(r_first ? r : w), kernel_ref(r_first ? w : r), "in another row");
  }
  return false;
}

// Moves w's body into r as `loop t in [0, T)` (after r's body when w ran after r, else before),
// with w's last coordinate replaced by t, and removes w.
void merge_rows(Program& p, Node* r, Node* w, bool w_after) {
  const int lead = w->rank() - 1;
  Builder b(p);
  b.loc = w->loc;
  if (w_after || !r->first_child) b.set_insert_end(r); else b.set_insert_before(r->first_child);
  Node* l = b.loop(b.i32(0), w->shape.back(), b.i32(1), r->shape);
  while (Node* c = w->first_child) {
    p.unlink(c);
    p.append(l, c);
  }
  std::vector<Node*> last_coord;
  walk_subtree(l, [&](Node* n) {
    if (n == l) return;
    if (!n->shape.empty()) p.set_shape(n, r->shape);
    if (n->op == Op::index && n->axis == lead) last_coord.push_back(n);
  });
  for (Node* n : last_coord) {
    p.replace_all_uses(n, l);
    p.erase(n);
  }
  p.replace_all_uses(w, r);
  p.erase(w);
}

// Whether var v keeps its value from top-level child c of kernel k on: every set of it lies in
// a child before c.
bool var_final_after(const Node* v, const Node* c, const Node* k) {
  if (!v->inside(k)) return false;
  for (const Node* u : v->users) {
    if (u->op != Op::set || u->operand(0) != v) continue;
    const Node* top = u;
    while (top->parent != k) top = top->parent;
    for (const Node* s = c->next; s; s = s->next)
      if (s == top) return false;
  }
  return true;
}

// After merging, a load of an element this thread stored earlier at the kernel's top level
// reads the stored value (a var's, when the var is not set again later).
void forward_stores(Program& p, Node* k) {
  std::unordered_map<const Node*, Node*> last;  // memory -> value of the last top-level store
  for (Node* c = k->first_child; c; c = c->next) {
    // What c writes itself (a loop: in an earlier iteration) may stand between a load and the
    // top-level store before c.
    std::unordered_set<const Node*> written;
    memory_effects(c, nullptr, &written);
    walk_subtree(c, [&](Node* n) {
      if (n->op == Op::load && at_own_element(n, k) && !written.count(n->operand(0))) {
        auto it = last.find(n->operand(0));
        if (it != last.end() && same_shape(it->second->shape, n->shape)) {
          p.replace_all_uses(n, it->second);
        }
      }
    });
    const Node* stored = c->op == Op::store ? c->operand(1) : nullptr;
    if (stored && at_own_element(c, k) && (stored->op != Op::var || var_final_after(stored, c, k))) {
      last[c->operand(0)] = c->operand(1);
      continue;
    }
    // A nested write (or an atomic) makes what was stored uncertain.
    walk_subtree(c, [&](Node* n) {
      if (n->op == Op::store || n->op == Op::atomic) last.erase(n->operand(0));
    });
  }
}

// The prog.explain() line for adjacent kernels a and b that stay apart; `why`: the dependence or
// cost-model refusal, when there was one.
std::string refusal(const Node* a, const Node* b, const std::string& why) {
  const std::string apart = kernel_ref(b) + " stays apart from " + kernel_ref(a) + ": ";
  if (!a->group.empty() || !b->group.empty())
    return apart + kernel_ref(a->group.empty() ? b : a) + " runs in workgroups (its barriers would span both)";
  if (!why.empty()) return why;
  auto shape = [](const Node* k) {
    std::string s = "[";
    for (size_t i = 0; i < k->shape.size(); ++i) s += (i ? ", " : "") + index_text(k->shape[i]);
    return s + "]";
  };
  return apart + "different shapes, " + shape(b) + " and " + shape(a) +
         (b->loc.known() ? " (line " + std::to_string(b->loc.line) + ")" : "");
}

}  // namespace

bool merge_kernels(Program& p) {
  bool changed = false;
  DependenceAnalysis dep;
  std::vector<Node*> kernels = kernels_of(p);
  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    Node* k = kernels[ki];
    if (k->dead) continue;
    // Pure host values and allocations between two kernels can move before the first.
    Node* next = k->next;
    auto movable = [](const Node* n) { return (has_flag(n->op, F_PURE) && !n->is_scope()) || n->op == Op::buffer; };
    while (next && next->op != Op::kernel && movable(next)) next = next->next;
    const bool explain = explain_log() != nullptr;
    if (next && next->op != Op::kernel && explain) {
      for (Node* after = next->next; after; after = after->next)
        if (after->op == Op::kernel) {
          explain_separated(k, next, after);
          break;
        }
    }
    if (!next || next->op != Op::kernel) continue;
    // Groups: barriers would cover the other kernel too.
    std::string why_same, why_first, why_second;
    const bool same = k->group.empty() && next->group.empty() && compatible(dep, k, next, explain ? &why_same : nullptr);
    const bool row_first = !same && row_mergeable(dep, k, next, true, explain ? &why_first : nullptr);
    const bool row_second = !same && !row_first && row_mergeable(dep, next, k, false, explain ? &why_second : nullptr);
    if (!same && !row_first && !row_second) {
      if (explain) explain_pair(k, next, refusal(k, next, why_same + why_first + why_second));
      continue;
    }
    for (Node* h = k->next; h != next;) {
      Node* after = h->next;
      p.unlink(h);
      p.insert_before(k, h);
      h = after;
    }
    Node* merged = k;
    if (row_first) {
      merge_rows(p, k, next, true);
    } else if (row_second) {
      merge_rows(p, next, k, false);
      merged = next;
    } else {
      while (Node* c = next->first_child) {
        p.unlink(c);
        p.append(k, c);
      }
      p.replace_all_uses(next, k);
      p.erase(next);
    }
    forward_stores(p, merged);
    changed = true;
    --ki;  // retry k: the merged kernel may take the next one too (at ki == 0 this wraps, ++ki restores it;
           // a k merged into the next kernel is dead and skipped)
  }
  return changed;
}

}  // namespace ember

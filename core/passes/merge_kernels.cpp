#include "core/passes/merge_kernels.h"

#include <unordered_map>
#include <unordered_set>

#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

struct Access {
  std::unordered_map<const Node*, bool> reads, writes;  // memory -> all at own element
  std::unordered_set<const Node*> atomics;
};

Access accesses(Node* k) {
  Access acc;
  walk_subtree(k, [&](Node* n) {
    if (n->op != Op::load && n->op != Op::store && n->op != Op::atomic) return;
    const Node* m = n->operand(0);
    if (n->op == Op::atomic) { acc.atomics.insert(m); return; }
    auto& map = n->op == Op::load ? acc.reads : acc.writes;
    auto it = map.find(m);
    bool own = at_own_element(n, k);
    if (it == map.end()) map[m] = own; else it->second = it->second && own;
  });
  return acc;
}

bool compatible(Node* a, Node* b) {
  if (!same_shape(a->shape, b->shape)) return false;
  Access x = accesses(a), y = accesses(b);
  auto conflict = [](const Access& p, const Access& q) {
    for (auto& [m, own] : p.writes) {
      if (q.atomics.count(m)) return true;
      auto r = q.reads.find(m);
      if (r != q.reads.end() && !(own && r->second)) return true;
      auto w = q.writes.find(m);
      if (w != q.writes.end() && !(own && w->second)) return true;
    }
    for (const Node* m : p.atomics)
      if (q.reads.count(m) || q.writes.count(m)) return true;
    return false;
  };
  return !conflict(x, y) && !conflict(y, x);
}

// After merging, a load of an element this thread stored earlier at the kernel's top level
// reads the stored value.
void forward_stores(Program& p, Node* k) {
  std::unordered_map<const Node*, Node*> last;  // memory -> value of the last top-level store
  for (Node* c = k->first_child; c; c = c->next) {
    walk_subtree(c, [&](Node* n) {
      if (n->op == Op::load && at_own_element(n, k)) {
        auto it = last.find(n->operand(0));
        if (it != last.end() && same_shape(it->second->shape, n->shape)) {
          p.replace_all_uses(n, it->second);
        }
      }
    });
    if (c->op == Op::store && at_own_element(c, k) && c->operand(1)->op != Op::var) {
      last[c->operand(0)] = c->operand(1);
      continue;
    }
    // A nested write (or an atomic) makes what was stored uncertain.
    walk_subtree(c, [&](Node* n) {
      if (n->op == Op::store || n->op == Op::atomic) last.erase(n->operand(0));
    });
  }
}

}  // namespace

bool merge_kernels(Program& p) {
  bool changed = false;
  std::vector<Node*> kernels;
  p.for_each([&](Node* n) {
    if (n->op == Op::kernel) kernels.push_back(n);
  });
  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    Node* k = kernels[ki];
    if (k->dead) continue;
    // Pure host values and allocations between two kernels can move before the first.
    Node* next = k->next;
    auto movable = [](const Node* n) { return (has_flag(n->op, F_PURE) && !n->is_scope()) || n->op == Op::buffer; };
    while (next && next->op != Op::kernel && movable(next)) next = next->next;
    if (!next || next->op != Op::kernel || !compatible(k, next)) continue;
    if (!k->group.empty() || !next->group.empty()) continue;  // barriers would cover the other kernel too
    for (Node* h = k->next; h != next;) {
      Node* after = h->next;
      p.unlink(h);
      p.insert_before(k, h);
      h = after;
    }
    while (Node* c = next->first_child) {
      p.unlink(c);
      p.append(k, c);
    }
    p.replace_all_uses(next, k);
    p.erase(next);
    forward_stores(p, k);
    changed = true;
    --ki;  // retry k: the merged kernel may take the next one too (at ki == 0 this wraps, ++ki restores it)
  }
  return changed;
}

}  // namespace ember

#include "core/passes/hoist_grid_loops.h"

#include <unordered_map>
#include <unordered_set>

#include "core/analysis/dependence.h"
#include "core/ir/builder.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// Nodes of kernel k whose value may differ between threads.
std::unordered_set<const Node*> thread_varying(Node* k) {
  std::unordered_set<const Node*> v;
  for (bool grew = true; grew;) {
    grew = false;
    walk_subtree(k, [&](Node* n) {
      if (n == k || v.count(n)) return;
      bool dep = n->op == Op::index || n->op == Op::load || n->op == Op::atomic;
      for (Node* o : n->operands) dep |= v.count(o) > 0;
      if (dep) {
        v.insert(n);
        if (n->op == Op::set) v.insert(n->operand(0));
        grew = true;
      }
    });
  }
  return v;
}

// Whether an iteration of `loop` may read memory another thread wrote in an earlier one: a flow
// or anti dependence between the loop's accesses in different threads (the dependence analysis
// decides; an atomic whose old value is unused only accumulates, so it is not a read). E.g. the
// per-token accumulation Y[i, j, p] in a loop over p of a kernel over (i, j) stays in its thread.
bool carries_cross_thread_dependence(DependenceAnalysis& dep, Node* loop, Node* k) {
  AccessGroup g(k->shape, k->rank());
  g.add(loop);
  return !dep.within_thread(g, g, DepPairs::flow_anti);
}

bool breaks_out_of(Node* loop) {
  bool found = false;
  walk_subtree(loop, [&](Node* n) {
    if (n->op != Op::break_ && n->op != Op::continue_) return;
    Node* target = n->parent;
    while (target->op != Op::loop) target = target->parent;
    if (target == loop) found = true;
  });
  return found;
}

// A new kernel shaped like `like`, linked before `pos` (or at the end of `scope` when pos is
// null), holding the nodes from `first` to the end of their scope.
Node* kernel_of_rest(Program& p, const Node* like, Node* first, Node* pos, Node* scope) {
  std::vector<Node*> moved;
  for (Node* c = first; c; c = c->next) moved.push_back(c);
  Builder b(p);
  if (pos) b.set_insert_before(pos); else b.set_insert_end(scope);
  b.loc = like->loc;
  Node* k = kernel_like(b, like, like->shape);  // a user kernel (hoist_one takes only those)
  for (Node* c : moved) {
    p.unlink(c);
    p.append(k, c);
  }
  return k;
}

// Moves the uniform, pure computation of `v` (inside kernel k) to just before k.
bool hoist_uniform(Program& p, Node* v, Node* k, const std::unordered_set<const Node*>& varying) {
  if (!v->inside(k)) return true;
  if (varying.count(v) || !has_flag(v->op, F_PURE) || v->is_scope() || v->op == Op::index || v->parent != k)
    return false;
  for (Node* o : v->operands)
    if (o->op == Op::var || !hoist_uniform(p, o, k, varying)) return false;
  p.unlink(v);
  p.insert_before(k, v);
  p.set_shape(v, {});
  return true;
}

bool hoist_one(Program& p, DependenceAnalysis& dep, Node* k) {
  // Kernels made by passes are race-free by construction, and one thread needs no barrier.
  // A workgroup kernel synchronizes through its own barriers and group buffers.
  if (!k->user_kernel || !k->group.empty() || const_size(k->shape) == 1) return false;
  std::unordered_set<const Node*> varying = thread_varying(k);
  for (Node* l = k->first_child; l; l = l->next) {
    if (l->op != Op::loop) continue;
    bool uniform = true;
    for (Node* o : l->operands) uniform &= !varying.count(o);
    if (!uniform || breaks_out_of(l) || !carries_cross_thread_dependence(dep, l, k)) continue;
    bool movable = true;
    for (Node* o : l->operands) movable = movable && hoist_uniform(p, o, k, varying);
    if (!movable) continue;
    // k { pre; l { body }; post }  =>  k { pre }; l { k' { body } }; k'' { post }
    Node* post_first = l->next;
    p.unlink(l);
    p.insert_after(k, l);
    p.set_shape(l, {});
    if (post_first) kernel_of_rest(p, k, post_first, l->next, l->parent);
    kernel_of_rest(p, k, l->first_child, nullptr, l);
    return true;
  }
  return false;
}

}  // namespace

bool hoist_grid_loops(Program& p) {
  bool changed = false;
  DependenceAnalysis dep;
  for (bool again = true; again;) {
    again = false;
    std::vector<Node*> kernels;
    p.for_each([&](Node* n) {
      if (n->op == Op::kernel) kernels.push_back(n);
    });
    for (Node* k : kernels)
      if (hoist_one(p, dep, k)) {
        again = changed = true;
        break;
      }
  }
  return changed;
}

}  // namespace ember

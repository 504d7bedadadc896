#include "core/passes/hoist_invariants.h"

#include <unordered_set>
#include <vector>

#include "core/passes/pass_util.h"

namespace ember {

namespace {

// Whether `loop` runs its body at least once: constant bounds begin < end, step > 0.
bool runs_once(const Node* loop) {
  const Node *b = loop->operand(0), *e = loop->operand(1), *s = loop->operand(2);
  return b->op == Op::constant && e->op == Op::constant && s->op == Op::constant && b->dtype == DType::i32 &&
         b->i() < e->i() && s->i() > 0;
}

bool has_jump(Node* loop) {
  bool found = false;
  walk_subtree(loop, [&](Node* n) { found |= n->op == Op::break_ || n->op == Op::continue_; });
  return found;
}

// Whether n's value is the same in every iteration of `loop`.
bool invariant(const Node* n, const Node* loop, bool loads_ok, const std::unordered_set<const Node*>& written) {
  if (n->is_scope() || has_flag(n->op, F_LEAF)) return false;
  if (n->op == Op::load) {
    if (!loads_ok || written.count(n->operand(0))) return false;
  } else if (!has_flag(n->op, F_PURE)) {
    return false;
  }
  for (const Node* o : n->operands)
    if (o == loop || o->inside(loop) || has_flag(o->op, F_MUTABLE)) return false;
  return true;
}

bool hoist_kernel(Program& p, Node* k) {
  std::unordered_set<const Node*> written;
  std::vector<Node*> loops;
  walk_subtree(k, [&](Node* n) {
    if (n->op == Op::store || n->op == Op::atomic) written.insert(n->operand(0));
    if (n->op == Op::loop) loops.push_back(n);
  });
  bool changed = false;
  for (auto it = loops.rbegin(); it != loops.rend(); ++it) {  // inner loops first
    Node* loop = *it;
    const bool loads_ok = runs_once(loop) && !has_jump(loop);
    for (Node* c = loop->first_child; c;) {
      Node* next = c->next;
      if (invariant(c, loop, loads_ok, written)) {
        p.unlink(c);
        p.insert_before(loop, c);
        changed = true;
      }
      c = next;
    }
    // A loop whose only statement stores one value at one place (operands from outside it, vars
    // included: nothing in the loop sets them) stores it once: a row kernel merged as a loop over
    // columns all writing y[i] leaves such loops.
    Node* st = loop->first_child;
    if (loads_ok && st && !st->next && st->op == Op::store && loop->users.empty()) {
      bool outside = true;
      for (const Node* o : st->operands) outside &= o != loop && !o->inside(loop);
      if (outside) {
        p.unlink(st);
        p.insert_before(loop, st);
        p.erase(loop);
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace

bool hoist_invariants(Program& p) {
  std::vector<Node*> kernels = kernels_of(p);
  bool changed = false;
  for (Node* k : kernels) changed |= hoist_kernel(p, k);
  return changed;
}

}  // namespace ember

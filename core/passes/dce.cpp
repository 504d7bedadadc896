#include "core/passes/dce.h"

#include <vector>

#include "core/passes/pass_util.h"

namespace ember {

namespace {

// A buffer nobody reads (only stored into, not returned) makes its stores dead.
bool unread_buffer(const Node* mem) {
  if (mem->op != Op::buffer) return false;
  for (const Node* u : mem->users)
    if (u->op != Op::store || u->operand(0) != mem) return false;
  return true;
}

bool root_effect(const Node* n) {
  switch (n->op) {
    case Op::store: return !unread_buffer(n->operand(0));
    // A set matters only if its var is read by something live (marked through the var below).
    case Op::atomic: case Op::output: case Op::barrier: case Op::move_memory: return true;
    case Op::input: case Op::scalar_arg: case Op::shape_arg: case Op::constant: return true;
    default: return false;
  }
}

// One mark and sweep; `emptied`: buffers whose last loads it removed while they are still stored
// to (their stores are dead now, which only another run finds).
bool dce_once(Program& p, Resimplify* resimplify, std::vector<const Node*>& emptied) {
  // Liveness by node id (dense: a hash set of every node made dce the slowest cleanup pass).
  // One walk collects the nodes (with their ids, so the sweep below skips a live node without
  // reading it), marks the roots and notes the breaks and continues.
  std::vector<char> live_by_id(static_cast<size_t>(p.id_bound()), 0);
  auto is_live = [&](const Node* n) { return live_by_id[static_cast<size_t>(n->id)] != 0; };
  std::vector<Node*> work;
  auto mark = [&](Node* n) {
    if (!n || is_live(n)) return;
    live_by_id[static_cast<size_t>(n->id)] = 1;
    work.push_back(n);
  };
  std::vector<Node*> all, jumps;
  std::vector<int> ids;
  all.reserve(static_cast<size_t>(p.id_bound()));
  ids.reserve(static_cast<size_t>(p.id_bound()));
  p.for_each([&](Node* n) {
    all.push_back(n);
    ids.push_back(n->id);
    if (root_effect(n)) mark(n);
    if (n->op == Op::break_ || n->op == Op::continue_) jumps.push_back(n);
  });
  // A node inside a kernel has the kernel's shape or none (the verifier checks it; constant dims
  // may be other constant nodes, which are roots), except a group buffer: its dims are marked
  // with the kernel's, and its own shape, in the node's second cache line, is not read (issue
  // 17: one line less per node and dce run; the parents it reads instead are few and hot).
  auto kernel_shaped = [&](const Node* n) {
    if (n->op == Op::group_buffer) return false;
    for (const Node* s = n->parent; s && s != p.root(); s = s->parent)
      if (s->op == Op::kernel) return true;
    return false;
  };
  auto propagate = [&] {
    while (!work.empty()) {
      Node* n = work.back();
      work.pop_back();
      for (Node* o : n->operands) mark(o);
      if (!kernel_shaped(n)) for (Node* d : n->shape) mark(d);
      // A live scope's enclosing scopes are marked (or queued) already.
      for (Node* s = n->parent; s && s != p.root() && !is_live(s); s = s->parent) mark(s);
      if (n->op == Op::else_ && n->prev) mark(n->prev);  // an else needs its if
      if (n->op == Op::var)
        for (Node* u : n->users)
          if (u->op == Op::set && u->operand(0) == n) mark(u);  // a read var needs every assignment
    }
  };
  propagate();
  // break/continue are live when the loop they leave is; marking them can make more live.
  for (bool grew = true; grew;) {
    grew = false;
    for (Node* n : jumps) {
      if (is_live(n)) continue;
      Node* loop = n->parent;
      while (loop && loop->op != Op::loop) loop = loop->parent;
      if (loop && is_live(loop)) {
        mark(n);
        grew = true;
      }
    }
    propagate();
  }
  bool changed = false;
  std::vector<const Node*> unloaded;  // buffers of the loads removed
  auto note = [&](Node* x) {
    if (resimplify) resimplify->lost.insert(resimplify->lost.end(), x->operands.begin(), x->operands.end());
    if (x->op == Op::load && x->operand(0)->op == Op::buffer) unloaded.push_back(x->operand(0));
  };
  auto erase = [&](Node* n) {
    if (n->first_child) walk_subtree(n, note);  // (n and what is inside it)
    else note(n);
    p.erase(n);
  };
  for (size_t k = all.size(); k-- > 0;) {
    if (live_by_id[static_cast<size_t>(ids[k])]) continue;
    Node* n = all[k];
    if (n->dead) continue;
    // Uses by other dead nodes are gone by now (reverse order); a dead var's sets went first.
    // A node still used by a live node, as an operand or as a dim of its shape, stays.
    std::vector<Node*> users = n->users;
    users.insert(users.end(), n->dim_users().begin(), n->dim_users().end());
    if (!users.empty()) {
      bool all_dead = true;
      for (Node* u : users) all_dead &= !is_live(u);
      if (!all_dead) continue;
      for (Node* u : users)
        if (!u->dead) erase(u);
    }
    erase(n);
    changed = true;
  }
  for (const Node* b : unloaded)
    if (!b->dead && !b->users.empty() && unread_buffer(b)) emptied.push_back(b);
  return changed;
}

}  // namespace

bool dce(Program& p) { return dce(p, nullptr); }

bool dce(Program& p, Resimplify* resimplify) {
  bool changed = false;
  for (std::vector<const Node*> emptied; ; emptied.clear()) {
    changed |= dce_once(p, resimplify, emptied);
    if (emptied.empty()) return changed;
  }
}

}  // namespace ember

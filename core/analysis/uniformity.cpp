#include "core/analysis/uniformity.h"

#include <vector>

namespace ember {

namespace {

bool has_barrier(const Node* n) {
  if (n->op == Op::barrier) return true;
  for (const Node* c = n->first_child; c; c = c->next)
    if (has_barrier(c)) return true;
  return false;
}

// Whether a break_/continue_ inside `loop` leaves or restarts `loop` itself.
bool has_own_jump(const Node* loop, const Node* n) {
  for (const Node* c = n->first_child; c; c = c->next) {
    if (c->op == Op::break_ || c->op == Op::continue_) {
      const Node* target = c->parent;
      while (target->op != Op::loop) target = target->parent;
      if (target == loop) return true;
    }
    if (c->op != Op::loop && has_own_jump(loop, c)) return true;  // a nested loop catches its own
  }
  return false;
}

}  // namespace

bool GroupUniformity::uniform(const Node* v) {
  auto it = memo_.find(v);
  if (it != memo_.end()) return it->second;
  bool u;
  if (v->op == Op::constant || v->op == Op::group_index) {
    u = true;
  } else if (!v->enclosing_kernel()) {
    u = v->shape.empty() && v->op != Op::var;  // a host scalar (a host var may change inside)
  } else if (v->op == Op::loop || (has_flag(v->op, F_PURE) && !has_flag(v->op, F_LEAF))) {
    u = true;
    for (const Node* o : v->operands) u = u && uniform(o);
  } else {
    u = false;
  }
  memo_[v] = u;
  return u;
}

const Node* divergent_scope(const Node* scope, GroupUniformity& u) {
  for (const Node* s = scope; s && s->op != Op::kernel && s->op != Op::program; s = s->parent) {
    const Node* cond = s->op == Op::if_ ? s->operand(0)
                       : s->op == Op::else_ && s->prev && s->prev->op == Op::if_ ? s->prev->operand(0)
                                                                                 : nullptr;
    if (cond && !u.uniform(cond)) return s;
    if (s->op == Op::loop) {
      for (const Node* o : s->operands)
        if (!u.uniform(o)) return s;
      if (has_own_jump(s, s)) return s;
    }
  }
  return nullptr;
}

bool holds_barrier(const Node* n) {
  if (has_barrier(n)) return true;
  if (n->op == Op::if_ && n->next && n->next->op == Op::else_) return has_barrier(n->next);
  if (n->op == Op::else_ && n->prev && n->prev->op == Op::if_) return has_barrier(n->prev);
  return false;
}

std::unordered_set<const Node*> barrier_holders(const Node* k) {
  std::unordered_set<const Node*> out;
  std::vector<const Node*> stack{k};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n->op != Op::barrier) {
      for (const Node* c = n->first_child; c; c = c->next) stack.push_back(c);
      continue;
    }
    for (const Node* s = n; s && s != k; s = s->parent) {
      if (!out.insert(s).second) break;  // its ancestors are in already
      if (s->op == Op::if_ && s->next && s->next->op == Op::else_) out.insert(s->next);
      if (s->op == Op::else_ && s->prev && s->prev->op == Op::if_) out.insert(s->prev);
    }
  }
  return out;
}

}  // namespace ember

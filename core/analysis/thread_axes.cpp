#include "core/analysis/thread_axes.h"

#include <vector>

namespace ember {

ThreadAxes::ThreadAxes(ShapeView domain) : domain_(to_shape(domain)) {
  if (domain_.size() > 64) {
    all_ = ~uint64_t{0};
    return;
  }
  for (size_t a = 0; a < domain_.size(); ++a)
    if (const_dim(domain_[a]) != 1) all_ |= uint64_t{1} << a;
}

bool ThreadAxes::in_domain(const Node* e) const { return !domain_.empty() && same_shape(e->shape, domain_); }

uint64_t ThreadAxes::varying(const Node* e) {
  if (e->shape.empty()) return 0;
  if (!in_domain(e) || domain_.size() > 64) return all_;
  auto it = memo_.find(e);
  if (it != memo_.end()) return it->second;
  uint64_t m = rule(e);
  memo_[e] = m;
  return m;
}

uint64_t ThreadAxes::rule(const Node* e) {
  switch (e->op) {
    case Op::index:
    case Op::local_index:
    case Op::group_index: return (uint64_t{1} << e->axis) & all_;
    case Op::load: {
      uint64_t m = 0;
      for (int k = e->first_index_operand(); k < e->num_operands(); ++k) m |= varying(e->operand(k));
      return m;
    }
    case Op::cast:
    case Op::bitcast:
    case Op::select:
    case Op::loop: {  // a loop as a value: its counter
      uint64_t m = 0;
      for (int k = 0; k < e->num_operands(); ++k) m |= varying(e->operand(k));
      return m;
    }
    case Op::var: {
      if (!solved_) return all_;
      uint64_t m = varying(e->operand(0));
      for (const Node* u : e->users)
        if (u->op == Op::set && u->operand(0) == e) m |= varying(u->operand(1)) | control(u, e->parent);
      return m;
    }
    default: break;
  }
  if (has_flag(e->op, F_ELEMENTWISE)) {
    uint64_t m = 0;
    for (int k = 0; k < e->num_operands(); ++k) m |= varying(e->operand(k));
    return m;
  }
  return all_;
}

namespace {
bool holds_jump(const Node* s) {
  for (const Node* c = s->first_child; c; c = c->next)
    if (c->op == Op::break_ || c->op == Op::continue_ || (c->is_scope() && holds_jump(c))) return true;
  return false;
}
}  // namespace

// The axes along which whether (and how often) `set` runs may vary: the conditions of the ifs
// and the bounds of the loops of the domain's shape between it and `stop` (the var's scope).
uint64_t ThreadAxes::control(const Node* set, const Node* stop) {
  uint64_t m = 0;
  for (const Node* s = set->parent; s && s != stop; s = s->parent) {
    if (!in_domain(s)) continue;
    if (s->op == Op::if_) m |= varying(s->operand(0));
    if (s->op == Op::else_ && s->prev && s->prev->op == Op::if_) m |= varying(s->prev->operand(0));
    if (s->op == Op::loop)
      m |= varying(s->operand(0)) | varying(s->operand(1)) | varying(s->operand(2)) | (holds_jump(s) ? all_ : 0);
  }
  return m;
}

void ThreadAxes::solve(const Program& p) {
  solved_ = true;
  if (domain_.empty() || domain_.size() > 64) return;
  std::vector<const Node*> nodes, vars;
  p.for_each([&](Node* n) {
    if (!in_domain(n)) return;
    nodes.push_back(n);
    if (n->op == Op::var) vars.push_back(n);
  });
  std::unordered_map<const Node*, uint64_t> var_axes;
  for (const Node* v : vars) var_axes[v] = 0;
  // Every node after its operands (program order), vars from their last value: the axes only
  // grow, so this ends (at most one round per axis and var).
  for (bool changed = true; changed;) {
    changed = false;
    memo_.clear();
    for (const auto& [v, m] : var_axes) memo_[v] = m;
    for (const Node* n : nodes)
      if (n->op != Op::var) memo_[n] = rule(n);
    for (auto& [v, m] : var_axes) {
      uint64_t now = rule(v);
      if (now != m) {
        m = now;
        changed = true;
      }
    }
  }
  for (const auto& [v, m] : var_axes) memo_[v] = m;
}

uint64_t ThreadAxes::pins(const Node* c, bool group_local) {
  if (c->op == Op::land) return pins(c->operand(0), group_local) | pins(c->operand(1), group_local);
  if (c->op != Op::eq) return 0;
  uint64_t m = 0;
  for (int k = 0; k < 2; ++k) {
    const Node* x = c->operand(k);
    const Node* y = c->operand(1 - k);
    const bool pin = x->op == Op::index || (group_local && x->op == Op::local_index);
    if (pin && in_domain(x) && !(varying(y) >> x->axis & 1)) m |= uint64_t{1} << x->axis;
  }
  return m;
}

uint64_t ThreadAxes::pinned(const Node* n, bool group_local) {
  uint64_t m = 0;
  for (const Node* s = n->parent; s && s->op != Op::program; s = s->parent) {
    if (s->op == Op::if_ && in_domain(s)) m |= pins(s->operand(0), group_local);
    if (s->op == Op::kernel) break;
  }
  return m;
}

}  // namespace ember

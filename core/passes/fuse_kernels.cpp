#include "core/passes/fuse_kernels.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "core/analysis/dependence.h"
#include "core/ir/builder.h"
#include "core/ir/shape.h"
#include "core/passes/hoist_grid_loops.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// A node placed in a kernel: it runs per element of a non-empty shape, or it is a shaped scope.
bool device_node(const Node* n) {
  if (n->is_memory() || n->op == Op::kernel || n->op == Op::output) return false;
  return !n->shape.empty();
}

// Pure host computations that may run before an open kernel without changing the result.
bool hoistable(const Node* n, const Node* group) {
  if (!has_flag(n->op, F_PURE) || n->is_scope()) return false;
  for (const Node* o : n->operands)
    if (o->op == Op::var || (group && o->inside(group))) return false;
  return true;
}

// Whether n may access memory or a var (a scope: whatever it holds). Most elementwise nodes do
// not, and skip the dependence analysis.
bool may_access(const Node* n) {
  if (n->is_scope() || n->op == Op::load || n->op == Op::store || n->op == Op::atomic || n->op == Op::var ||
      n->op == Op::set || n->op == Op::move_memory)
    return true;
  for (const Node* o : n->operands)
    if (o->op == Op::var) return true;
  return false;
}

// Whether some access of `m` is a load of it (a gather), not an elementwise use or a set.
bool gathers(const MemoryAccesses& m) {
  for (const MemAccess& a : m.all)
    if (a.node->op == Op::load && a.node->operand(0) == a.memory) return true;
  return false;
}

class Grouper {
 public:
  explicit Grouper(Program& p) : p_(p), b_(p) {}

  // Groups the children of a host-level scope into kernels; recurses into host loops/ifs.
  bool scope(Node* s) {
    bool changed = false;
    close();
    for (Node* c = s->first_child; c;) {
      Node* next = c->next;
      if (c->op == Op::kernel) {
        close();
      } else if (device_node(c)) {
        place(c);
        changed = true;
      } else if (c->is_scope()) {
        close();
        changed |= scope(c);
        close();
      } else if (k_ && hoistable(c, k_)) {
        p_.unlink(c);
        p_.insert_before(k_, c);
      } else {
        close();
      }
      c = next;
    }
    close();
    return changed;
  }

 private:
  void close() {
    k_ = nullptr;
    open_.reset();
  }

  // Whether adding n to the open kernel would make a dependence cross threads (the dependence
  // analysis decides, for memories and vars). A gather of a value or var the open kernel makes
  // always conflicts: it would have to live in memory to be read by a load (and only values used
  // outside their kernel are moved to memory).
  bool conflicts(Node* n) {
    if (!may_access(n)) return false;
    if (n->op == Op::load && !n->operand(0)->is_memory() && n->operand(0)->inside(k_))
      return true;  // (the common case of the rule below, without building a group)
    AccessGroup next(k_->shape, k_->rank());
    next.add(n);
    for (const auto& entry : next.by_memory()) {
      const Node* m = entry.first;
      if (!m->is_memory() && m->inside(k_) && gathers(entry.second)) return true;
    }
    return !dep_.within_thread(*open_, next);
  }

  void place(Node* n) {
    // An else always joins the kernel of its if (the if was the last node placed).
    bool follows_if = n->op == Op::else_ && k_ && k_->last_child && k_->last_child->op == Op::if_;
    if (!follows_if && (!k_ || !same_shape(k_->shape, n->shape) || conflicts(n))) {
      close();
      b_.set_insert_before(n);
      b_.loc = n->loc;
      k_ = b_.kernel(n->shape);
      open_ = std::make_unique<AccessGroup>(k_->shape, k_->rank());
    }
    p_.unlink(n);
    p_.append(k_, n);
    if (may_access(n)) open_->add(n);
  }

  Program& p_;
  Builder b_;
  Node* k_ = nullptr;
  DependenceAnalysis dep_;
  std::unique_ptr<AccessGroup> open_;  // the accesses of the open kernel k_
};

// Identity coordinates of `shape` at the builder's insertion point.
std::vector<Node*> thread_index(Builder& b, const std::vector<Node*>& shape) {
  std::vector<Node*> idx;
  for (int a = 0; a < static_cast<int>(shape.size()); ++a) idx.push_back(b.index(a, shape));
  return idx;
}

// Values used outside the kernel that made them are stored into buffers and loaded back.
class Materializer {
 public:
  explicit Materializer(Program& p) : p_(p), b_(p) {}

  bool run() {
    bool changed = false;
    // Program positions: a value's outside users are handled in program order, so the load made
    // for the first one is seen (and reused) by the later ones. In `users` order, a user handled
    // first but placed later made a load that an earlier one could not see. With the indices at
    // the kernel's start (insert_indices), the 400-step stencil leaves this pass with 12061 nodes,
    // not 13859: the cleanup after it merged 1800 twins.
    std::vector<Node*> order;
    order.reserve(static_cast<size_t>(p_.id_bound()));
    pos_ = program_positions(p_, [&](Node* n) { order.push_back(n); });
    std::vector<Node*> outside;
    for (Node* n : order) {
      if (n->dead) continue;
      Node* k = n->enclosing_kernel();
      if (!k || n->dtype == DType::none || n->is_scope()) continue;
      outside.clear();
      for (Node* u : n->users)
        if (!u->inside(k)) outside.push_back(u);
      if (outside.empty()) continue;
      std::stable_sort(outside.begin(), outside.end(),
                       [&](const Node* a, const Node* b) { return pos_.at(a) < pos_.at(b); });
      outside.erase(std::unique(outside.begin(), outside.end()), outside.end());  // (a user using n twice)
      if (n->op == Op::var && assigned_outside(n, k)) {
        var_to_buffer(n);
      } else {
        for (Node* u : outside) replace_use(n, k, u);
      }
      changed = true;
    }
    return changed;
  }

 private:
  static bool assigned_outside(Node* v, Node* k) {
    for (Node* u : v->users)
      if (u->op == Op::set && u->operand(0) == v && !u->inside(k)) return true;
    return false;
  }

  // The buffer that holds n's value, stored at the end of n's kernel.
  Node* buffer_for(Node* n, Node* k) {
    auto it = buffers_.find(n);
    if (it != buffers_.end()) return it->second;
    b_.set_insert_before(k);
    b_.loc = n->loc;
    Node* buf = b_.buffer(n->dtype, n->shape, false);
    b_.set_insert_end(k);
    seed(k);
    b_.store(buf, n, thread_index(b_, n->shape), n->shape);
    buffers_[n] = buf;
    return buf;
  }

  void replace_use(Node* n, Node* k, Node* u) {
    // A gather from the value becomes a gather from memory. This comes first: the value is
    // read at the load's coordinates, not the thread's, so even an index must be stored.
    if (u->op == Op::load && u->operand(0) == n) {
      p_.set_operand(u, 0, buffer_for(n, k));
      bool other_uses = false;
      for (size_t i = 1; i < u->operands.size(); ++i) other_uses |= u->operands[i] == n;
      if (!other_uses) return;
    }
    // An index node read elementwise is recomputed in the consumer kernel rather than stored.
    Node* uk = u->enclosing_kernel();
    if (n->op == Op::index && uk && same_shape(uk->shape, n->shape)) {
      insert_indices(u, n->shape);
      Node* copy = b_.index(n->axis, n->shape);
      swap_operand(u, n, copy);
      return;
    }
    Node* buf = buffer_for(n, k);
    if (u->op == Op::output) {
      swap_operand(u, n, buf);
      return;
    }
    // Elementwise use at the consumer's coordinates (same shape) or of a scalar: one load per
    // value in each place its later users see (users come in program order).
    b_.set_insert_before(u);
    auto seen = loads_.find(n);
    if (seen != loads_.end() && b_.visible(seen->second)) {
      swap_operand(u, n, seen->second);
      return;
    }
    std::vector<Node*> idx = thread_index_for(u, n->shape);
    b_.loc = u->loc;
    Node* ld = b_.load(buf, idx, n->shape.empty() ? std::vector<Node*>{} : n->shape);
    loads_[n] = ld;
    swap_operand(u, n, ld);
  }

  // Where the thread indices for a use `u` of a value of `shape` go: at the start of u's kernel,
  // after the indices there, when they index the kernel's threads (every node of the kernel sees
  // them, so each is made once per kernel); else right before u.
  void insert_indices(Node* u, ShapeView shape) {
    Node* uk = u->enclosing_kernel();
    if (!uk || !same_shape(uk->shape, shape)) {
      b_.set_insert_before(u);
      return;
    }
    seed(uk);
    Node* c = uk->first_child;
    while (c && c->op == Op::index) c = c->next;
    if (c) b_.set_insert_before(c); else b_.set_insert_end(uk);
  }

  // The thread indices of `shape` for a use u (made where insert_indices says; none for a
  // scalar), leaving the insertion point right before u.
  std::vector<Node*> thread_index_for(Node* u, const std::vector<Node*>& shape) {
    std::vector<Node*> idx;
    if (!shape.empty()) {
      insert_indices(u, shape);
      idx = thread_index(b_, shape);
    }
    b_.set_insert_before(u);
    return idx;
  }

  // The thread indices kernel k starts with are reused by the indices made in it (the builder
  // numbers only what it makes): without, each store and load made here had its own twins.
  void seed(Node* k) {
    if (!seeded_.insert(k).second) return;
    for (Node* c = k->first_child; c; c = c->next)
      if (c->op == Op::index) b_.number_index(c);
  }

  void swap_operand(Node* u, Node* from, Node* to) {
    for (size_t i = 0; i < u->operands.size(); ++i)
      if (u->operands[i] == from) p_.set_operand(u, static_cast<int>(i), to);
  }

  // A var assigned in several kernels lives in memory: init, sets and reads become accesses.
  void var_to_buffer(Node* v) {
    Node* k = v->enclosing_kernel();
    b_.set_insert_before(k);
    b_.loc = v->loc;
    Node* buf = b_.buffer(v->dtype, v->shape, false);
    std::vector<Node*> users = v->users;
    for (Node* u : users) {
      if (u->op == Op::set && u->operand(0) == v) {
        std::vector<Node*> idx = thread_index_for(u, v->shape);
        pos_.set(b_.store(buf, u->operand(1), idx, v->shape), pos_.at(u));  // (a user of the set's value)
        p_.erase(u);
        continue;
      }
      if (u->op == Op::output || (u->op == Op::load && u->operand(0) == v)) {
        swap_operand(u, v, buf);  // returned as memory, or gathered from memory
        continue;
      }
      std::vector<Node*> idx = thread_index_for(u, v->shape);
      Node* ld = b_.load(buf, idx, v->shape);
      swap_operand(u, v, ld);
    }
    std::vector<Node*> idx = thread_index_for(v, v->shape);
    pos_.set(b_.store(buf, v->operand(0), idx, v->shape), pos_.at(v));
    p_.erase(v);
  }

  Program& p_;
  Builder b_;
  std::unordered_map<Node*, Node*> buffers_;
  std::unordered_set<Node*> seeded_;  // kernels whose indices the builder numbers
  std::unordered_map<Node*, Node*> loads_;  // value -> the last load of its buffer made for a use
  Positions pos_;  // program order of the nodes at the start (stores made for a var's sets take theirs)
};

}  // namespace

bool fuse_kernels(Program& p) {
  bool changed = hoist_grid_loops(p);
  changed |= Grouper(p).scope(p.root());
  changed |= Materializer(p).run();
  return changed;
}

}  // namespace ember

#include "core/passes/unroll_small_dims.h"

#include <unordered_map>
#include <unordered_set>

#include "core/ir/builder.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

constexpr int kMaxLanes = 4;

class Unroller {
 public:
  Unroller(Program& p, Node* k) : p_(p), k_(k), lanes_(static_cast<int>(const_dim(k->shape.back()))) {
    axis_ = k->rank() - 1;
    shape_.assign(k->shape.begin(), k->shape.end() - 1);
  }

  // False when some lane-dependent control flow cannot be unrolled (break in a per-lane if).
  bool analyze() {
    for (bool grew = true; grew;) {
      grew = false;
      walk_subtree(k_, [&](Node* n) {
        if (n == k_ || lane_.count(n)) return;
        // An atomic runs once per thread even when nothing in it depends on the lane (each
        // lane's add counts), so it is always emitted per lane.
        bool dep = (n->op == Op::index && n->axis == axis_) || n->op == Op::atomic;
        for (Node* o : n->operands) dep |= lane_.count(o) > 0;
        for (Node* s = n->parent; s != k_; s = s->parent) dep |= lane_.count(s) > 0;
        if (n->op == Op::else_ && n->prev) dep |= lane_.count(n->prev) > 0;
        if (n->op == Op::if_ && n->next && n->next->op == Op::else_) dep |= lane_.count(n->next) > 0;
        if (dep) {
          lane_.insert(n);
          if (n->op == Op::set) lane_.insert(n->operand(0));
          grew = true;
        }
      });
    }
    bool ok = true;
    walk_subtree(k_, [&](Node* n) {
      if ((n->op != Op::break_ && n->op != Op::continue_) || !lane_.count(n)) return;
      Node* loop = n->parent;
      while (loop->op != Op::loop) loop = loop->parent;
      if (!lane_.count(loop)) ok = false;  // one lane would stop the loop for all
    });
    return ok;
  }

  void run() {
    Builder b(p_);
    b.set_insert_before(k_);
    b.loc = k_->loc;
    Node* nk = kernel_like(b, k_, shape_);
    maps_.assign(static_cast<size_t>(lanes_), {});
    emit_children(k_, nk, -1);
    p_.replace_all_uses(k_, nk);
    p_.erase(k_);
  }

 private:
  Node* mapped(Node* o, int lane) {
    auto& m = maps_[static_cast<size_t>(lane)];
    auto it = m.find(o);
    return it == m.end() ? o : it->second;
  }

  Node* copy(Node* n, Node* scope, int lane) {
    Builder b(p_);
    b.set_insert_end(scope);
    b.loc = n->loc;
    if (n->op == Op::index) return n->axis == axis_ ? b.i32(lane) : b.index(n->axis, shape_);
    std::vector<Node*> ops;
    for (Node* o : n->operands) ops.push_back(mapped(o, lane));
    Node* c = b.raw(n->op, n->dtype, n->shape.empty() ? Shape{} : shape_, ops);
    copy_attrs(*c, *n);
    return c;
  }

  // lane < 0: emit each node once if it does not depend on the lane, else once per lane.
  // lane >= 0: inside a lane-dependent scope; everything is that lane's copy.
  void emit_children(Node* from, Node* to, int lane) {
    for (Node* c = from->first_child; c; c = c->next) {
      if (lane >= 0) {
        emit_one(c, to, lane);
      } else if (!lane_.count(c)) {
        Node* n = emit_one(c, to, 0);
        for (int l = 1; l < lanes_; ++l) maps_[static_cast<size_t>(l)][c] = n;
      } else if (c->op == Op::else_) {
        continue;  // emitted with its if, lane by lane
      } else {
        for (int l = 0; l < lanes_; ++l) {
          emit_one(c, to, l);
          if (c->op == Op::if_ && c->next && c->next->op == Op::else_) emit_one(c->next, to, l);
        }
      }
    }
  }

  Node* emit_one(Node* c, Node* to, int lane) {
    Node* n = copy(c, to, lane);
    maps_[static_cast<size_t>(lane)][c] = n;
    if (c->is_scope()) {
      if (!lane_.count(c)) {
        // Shared scope: its own lane-independent nodes are visible to every lane.
        for (int l = 0; l < lanes_; ++l) maps_[static_cast<size_t>(l)][c] = n;
        emit_children(c, n, -1);
      } else {
        emit_children(c, n, lane);
      }
    }
    return n;
  }

  Program& p_;
  Node* k_;
  int lanes_;
  int axis_;
  Shape shape_;
  std::unordered_set<Node*> lane_;
  std::vector<std::unordered_map<Node*, Node*>> maps_;
};

}  // namespace

bool unroll_small_dims(Program& p) {
  std::vector<Node*> kernels;
  for (Node* n : kernels_of(p)) {
    if (n->rank() < 2 || !n->group.empty()) continue;  // lanes would split workgroups
    int64_t c = const_dim(n->shape.back());
    if (c >= 2 && c <= kMaxLanes) kernels.push_back(n);
  }
  bool changed = false;
  for (Node* k : kernels) {
    Unroller u(p, k);
    if (!u.analyze()) continue;
    u.run();
    changed = true;
  }
  return changed;
}

}  // namespace ember

#include "core/passes/parallelize_host_loops.h"

#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "core/analysis/dependence.h"
#include "core/ir/builder.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

bool is_access(const Node* n) { return n->op == Op::load || n->op == Op::store || n->op == Op::atomic; }

// Pure host scalar math that may sit in the loop body (index arithmetic on the counter).
bool host_pure(const Node* n) {
  if (!has_flag(n->op, F_PURE) || n->is_scope() || !n->shape.empty() || n->op == Op::index) return false;
  for (const Node* o : n->operands)
    if (o->op == Op::var || o->is_memory()) return false;
  return true;
}

// The plan for one loop, checked before anything is changed.
struct Plan {
  std::vector<Node*> kernels;
  std::vector<Node*> buffers;                  // allocated in the body: get a leading axis
  std::unordered_set<const Node*> on_counter;  // host math in the body that depends on the counter
  // Per kernel: its scalar nodes that depend on the counter (they become per-thread).
  std::unordered_map<const Node*, std::vector<Node*>> uniform_to_thread;
};

class Parallelizer {
 public:
  explicit Parallelizer(Program& p) : p_(p), b_(p) {}

  bool scope(Node* s) {
    bool changed = false;
    for (Node* c = s->first_child; c;) {
      Node* next = c->next;
      if (c->op != Op::kernel && c->is_scope() && c->shape.empty()) {
        changed |= scope(c);  // inner loops first: a nest of independent loops gives several axes
        if (c->op == Op::loop) changed |= try_loop(c);
      }
      c = next;
    }
    return changed;
  }

 private:
  bool depends_on(const Node* n, const Node* loop, const std::unordered_set<const Node*>& d) {
    for (const Node* o : n->operands)
      if (o == loop || d.count(o)) return true;
    return false;
  }

  bool plan(Node* loop, Plan& pl) {
    const Node* step = loop->operand(2);
    if (step->op != Op::constant || step->dtype != DType::i32 || static_cast<int32_t>(step->i()) <= 0) return false;
    for (Node* c = loop->first_child; c; c = c->next) {
      if (c->op == Op::kernel) {
        if (!c->group.empty()) return false;
        pl.kernels.push_back(c);
      } else if (c->op == Op::buffer) {
        pl.buffers.push_back(c);
      } else if (host_pure(c)) {
        if (depends_on(c, loop, pl.on_counter)) {
          if (!c->dim_users().empty()) return false;  // a dim that changes per iteration
          pl.on_counter.insert(c);
        }
      } else {
        return false;
      }
    }
    if (pl.kernels.empty()) return false;
    for (const Node* buf : pl.buffers) {
      for (const Node* d : buf->shape)
        if (d == loop || d->inside(loop)) return false;
      for (const Node* u : buf->users) {
        if (!is_access(u) || u->flat || u->operand(0) != buf || !u->enclosing_kernel()) return false;
        for (size_t i = 1; i < u->operands.size(); ++i)
          if (u->operands[i] == buf) return false;
      }
    }
    for (Node* k : pl.kernels) {
      for (const Node* d : k->shape)
        if (d == loop || pl.on_counter.count(d)) return false;  // a triangular nest
      std::unordered_set<const Node*> td;                       // the kernel's scalars that depend on the counter
      std::vector<Node*>& conv = pl.uniform_to_thread[k];
      bool ok = true;
      walk_subtree(k, [&](Node* n) {
        if (!ok || n == k) return;
        if (n->op == Op::local_index || n->op == Op::group_index || n->op == Op::barrier || n->op == Op::group_buffer)
          ok = false;
        if (!n->shape.empty() || (!depends_on(n, loop, pl.on_counter) && !depends_on(n, nullptr, td))) return;
        if (!has_flag(n->op, F_PURE) || n->is_scope() || (n->parent != k && n->parent->shape.empty())) {
          ok = false;
          return;
        }
        td.insert(n);
        conv.push_back(n);
      });
      if (!ok) return false;
    }
    std::vector<std::unique_ptr<AccessGroup>> groups;
    std::vector<const AccessGroup*> views;
    for (Node* k : pl.kernels) {
      groups.push_back(std::make_unique<AccessGroup>(k->shape, 0));
      groups.back()->add(k);
      views.push_back(groups.back().get());
    }
    return !dep_.loop_carries(loop, views);
  }

  bool try_loop(Node* loop) {
    Plan pl;
    if (!plan(loop, pl)) return false;
    Node* begin = loop->operand(0);
    Node* end = loop->operand(1);
    Node* step = loop->operand(2);
    const int32_t s = static_cast<int32_t>(step->i());
    // Trips: max(ceil((end - begin) / step), 0).
    b_.set_insert_before(loop);
    b_.loc = loop->loc;
    Node* trips = b_.binary(Op::sub, end, begin);
    if (s > 1) trips = b_.binary(Op::div, b_.binary(Op::add, trips, b_.i32(s - 1)), step);
    trips = b_.binary(Op::max, trips, b_.i32(0));
    std::unordered_set<const Node*> is_buffer(pl.buffers.begin(), pl.buffers.end());
    for (Node* c = loop->first_child; c;) {
      Node* next = c->next;
      if (c->op == Op::buffer) {
        std::vector<Node*> shape{trips};
        for (Node* d : c->shape) shape.push_back(d);
        p_.set_shape(c, shape);
        p_.unlink(c);
        p_.insert_before(loop, c);
      } else if (c->op == Op::kernel) {
        widen(c, loop, trips, pl, is_buffer);
        p_.unlink(c);
        p_.insert_before(loop, c);
      } else if (!pl.on_counter.count(c)) {
        p_.unlink(c);
        p_.insert_before(loop, c);
      }
      c = next;
    }
    // What is left: host math on the counter, now unused.
    std::vector<Node*> left;
    for (Node* c = loop->first_child; c; c = c->next) left.push_back(c);
    for (auto it = left.rbegin(); it != left.rend(); ++it) {
      EMBER_INTERNAL_ASSERT((*it)->users.empty(), "parallelize_host_loops: host value still used");
      p_.erase(*it);
    }
    EMBER_INTERNAL_ASSERT(loop->users.empty(), "parallelize_host_loops: counter still used");
    p_.erase(loop);
    return true;
  }

  // Kernel k over S becomes a kernel over [trips] + S whose thread (t, s) runs iteration t's thread s.
  void widen(Node* k, Node* loop, Node* trips, const Plan& pl, const std::unordered_set<const Node*>& is_buffer) {
    const std::vector<Node*> old_shape = k->shape;
    std::vector<Node*> shape{trips};
    for (Node* d : old_shape) shape.push_back(d);
    std::vector<Node*> inner;
    walk_subtree(k, [&](Node* n) {
      if (n != k) inner.push_back(n);
    });
    p_.set_shape(k, shape);
    for (Node* n : inner) {
      if (!same_shape(n->shape, old_shape)) continue;
      if (n->op == Op::index) n->axis += 1;
      p_.set_shape(n, shape);
    }
    auto it = pl.uniform_to_thread.find(k);
    if (it != pl.uniform_to_thread.end())
      for (Node* n : it->second) p_.set_shape(n, shape);
    // The iteration number and the counter's value at the kernel's start.
    b_.set_insert_before(k->first_child);
    b_.loc = k->loc;
    Node* t = b_.raw(Op::index, DType::i32, shape, {});
    t->axis = 0;
    Node* counter = t;
    if (loop->operand(2)->i() != 1) counter = b_.raw(Op::mul, DType::i32, shape, {counter, loop->operand(2)});
    if (!(loop->operand(0)->op == Op::constant && loop->operand(0)->i() == 0))
      counter = b_.raw(Op::add, DType::i32, shape, {counter, loop->operand(0)});
    // Host math on the counter, copied into the kernel (per thread) where the kernel uses it.
    std::unordered_map<const Node*, Node*> copies;
    Node* last = counter;
    std::function<Node*(Node*)> value = [&](Node* v) -> Node* {
      if (v == loop) return counter;
      if (!pl.on_counter.count(v)) return v;
      auto c = copies.find(v);
      if (c != copies.end()) return c->second;
      std::vector<Node*> ops;
      for (Node* o : v->operands) ops.push_back(value(o));
      Node* n = p_.create(v->op, v->dtype, shape, ops);
      copy_attrs(*n, *v);
      p_.insert_after(last, n);  // before every use: it only reads t and host values
      last = n;
      return copies[v] = n;
    };
    for (Node* n : inner) {
      for (size_t i = 0; i < n->operands.size(); ++i) {
        Node* o = n->operands[i];
        if (o == loop || pl.on_counter.count(o)) p_.set_operand(n, static_cast<int>(i), value(o));
      }
      // Buffers of the body: one row per iteration.
      if (is_access(n) && is_buffer.count(n->operand(0))) {
        std::vector<Node*> ops(n->operands.begin() + n->first_index_operand(), n->operands.end());
        p_.truncate_operands(n, static_cast<size_t>(n->first_index_operand()));
        p_.add_operand(n, t);
        for (Node* o : ops) p_.add_operand(n, o);
      }
    }
  }

  Program& p_;
  Builder b_;
  DependenceAnalysis dep_;
};

}  // namespace

bool parallelize_host_loops(Program& p) { return Parallelizer(p).scope(p.root()); }

}  // namespace ember

#include "core/passes/lower_group_barriers.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/analysis/uniformity.h"
#include "core/ir/builder.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// A value used after a barrier is recomputed there when it is at most this many pure ops of the
// thread's coordinates (index math), instead of being kept in a per-thread array.
constexpr size_t kMaxRecompute = 8;

// One phase: a loop nest over the threads of the group.
struct Phase {
  int id = 0;
  Node* root = nullptr;       // the outermost loop of the nest
  Node* body = nullptr;       // holds the statements: the range guard, or the innermost loop
  Node* first = nullptr;      // the first statement (values from earlier phases reload before it)
  std::vector<Node*> local;   // the thread's coordinates in the group (the loop counters)
  std::vector<Node*> global;  // its coordinates in the kernel's original shape
  Node* flat = nullptr;       // its row-major number in the group
  std::vector<Node*> moved;   // the statements, in order
};

class Lowering {
 public:
  Lowering(Program& p, Node* k) : p_(p), k_(k), b_(p) { b_.loc = k->loc; }

  void run() {
    sync_ = barrier_holders(k_);
    walk_subtree(k_, [&](Node* n) {
      if (n->op == Op::index || n->op == Op::local_index || n->op == Op::group_index || n->op == Op::barrier)
        old_.push_back(n);
    });
    const Shape shape = k_->shape;
    for (size_t a = 0; a < k_->group.size(); ++a) {
      group_.push_back(k_->group[a]);
      threads_ *= k_->group[a];
      const int64_t s = const_dim(shape[a]);
      guard_ = guard_ || s < 0 || s % k_->group[a] != 0;
    }
    // The grid of groups, ceil(S / G) per axis (0 when S is 0), computed on the host.
    b_.set_insert_before(k_);
    for (size_t a = 0; a < shape.size(); ++a) {
      Node* g = b_.i32(group_[a]);
      grid_.push_back(b_.binary(Op::add, b_.binary(Op::div, b_.binary(Op::sub, shape[a], b_.i32(1)), g), b_.i32(1)));
    }
    size_ = shape;
    walk_subtree(k_, [&](Node* n) {
      if (n != k_ && !n->shape.empty() && n->op != Op::group_buffer) p_.set_shape(n, grid_);
    });
    p_.set_shape(k_, grid_);
    // The group's coordinates are the new kernel's.
    Node* first = k_->first_child;
    if (first) b_.set_insert_before(first); else b_.set_insert_end(k_);
    for (size_t a = 0; a < shape.size(); ++a) group_coord_.push_back(b_.index(static_cast<int>(a), grid_));
    for (Node* c = k_->first_child; c && c != first; c = c->next) top_.insert(c);

    process(k_);
    spill();
    for (Node* n : old_)
      if (n->op == Op::group_index) p_.replace_all_uses(n, group_coord_[static_cast<size_t>(n->axis)]);
    for (auto it = old_.rbegin(); it != old_.rend(); ++it) {
      EMBER_INTERNAL_ASSERT((*it)->users.empty(), op_name((*it)->op) << " %" << (*it)->id << " of kernel #" << k_->index
                                                                       << " is still used at group level");
      p_.erase(*it);
    }
    k_->group.clear();
  }

 private:
  // Statements that stay at group level: uniform pure values (computed once per group), the
  // coordinates (replaced per phase), group buffers and barriers.
  bool stays(Node* n) {
    if (top_.count(n)) return true;
    if (n->op == Op::index || n->op == Op::local_index || n->op == Op::group_index || n->op == Op::group_buffer ||
        n->op == Op::barrier)
      return true;
    return has_flag(n->op, F_PURE) && !n->is_scope() && uniform_.uniform(n);
  }

  // Splits the children of `scope` (the kernel, or a loop/if holding a barrier) into phases.
  void process(Node* scope) {
    std::vector<Node*> kids = scope->children();
    for (size_t i = 0; i < kids.size();) {
      if (sync_.count(kids[i])) {
        if (kids[i]->op != Op::barrier) process(kids[i]);
        ++i;
        continue;
      }
      std::vector<Node*> moved;
      for (; i < kids.size() && !sync_.count(kids[i]); ++i)
        if (!stays(kids[i])) moved.push_back(kids[i]);
      if (moved.empty()) continue;
      Phase& ph = open_phase(scope, i < kids.size() ? kids[i] : nullptr);
      for (Node* n : moved) {
        p_.unlink(n);
        p_.append(ph.body, n);
      }
      ph.first = moved.front();
      ph.moved = moved;
      for (Node* n : moved)
        walk_subtree(n, [&](Node* x) {
          for (int j = 0; j < x->num_operands(); ++j) {
            Node* o = x->operand(j);
            if (o->op == Op::index && o->inside(k_) && !is_group_coord(o))
              p_.set_operand(x, j, ph.global[static_cast<size_t>(o->axis)]);
            else if (o->op == Op::local_index)
              p_.set_operand(x, j, ph.local[static_cast<size_t>(o->axis)]);
          }
        });
    }
  }

  bool is_group_coord(const Node* n) const {
    for (const Node* g : group_coord_)
      if (g == n) return true;
    return false;
  }

  // A loop nest over the group's threads before `after` (or at the end of `scope`), with the
  // thread's coordinates and, when some threads fall outside the shape, a guard.
  Phase& open_phase(Node* scope, Node* after) {
    if (after) b_.set_insert_before(after); else b_.set_insert_end(scope);
    phases_.push_back(std::make_unique<Phase>());
    Phase& ph = *phases_.back();
    ph.id = static_cast<int>(phases_.size()) - 1;
    for (size_t a = 0; a < group_.size(); ++a) {
      Node* l = b_.loop(b_.i32(0), b_.i32(group_[a]), b_.i32(1), grid_);
      if (!ph.root) ph.root = l;
      ph.local.push_back(l);
      b_.set_insert_end(l);
    }
    Node* cond = nullptr;
    for (size_t a = 0; a < group_.size(); ++a) {
      Node* g = b_.binary(Op::add, b_.binary(Op::mul, group_coord_[a], b_.i32(group_[a])), ph.local[a]);
      ph.global.push_back(g);
      ph.flat = a == 0 ? ph.local[0] : b_.binary(Op::add, b_.binary(Op::mul, ph.flat, b_.i32(group_[a])), ph.local[a]);
      if (guard_) {
        Node* in = b_.binary(Op::lt, g, size_[a]);
        cond = cond ? b_.binary(Op::land, cond, in) : in;
      }
    }
    ph.body = guard_ ? b_.if_(cond, grid_) : ph.local.back();
    root_of_[ph.root] = &ph;
    return ph;
  }

  Phase* phase_of(Node* n) const {
    for (Node* s = n->parent; s; s = s->parent) {
      auto it = root_of_.find(s);
      if (it != root_of_.end()) return it->second;
    }
    return nullptr;
  }

  Node* array(DType t) {
    Node* const dims[1] = {b_.i32(static_cast<int32_t>(threads_))};
    Node* a = p_.create(Op::group_buffer, t, dims);
    a->loc = k_->loc;
    p_.prepend(k_, a);
    return a;
  }
  Node* load(Node* arr, const Phase& ph) {
    Node* n = b_.load(arr, {ph.flat}, grid_, IndexMode::unsafe);
    n->flat = true;
    return n;
  }
  void store(Node* arr, Node* v, const Phase& ph) { b_.store(arr, v, {ph.flat}, grid_, IndexMode::unsafe)->flat = true; }
  void insert_after(Node* n) {
    if (n->next) b_.set_insert_before(n->next); else b_.set_insert_end(n->parent);
  }

  // Whether n is cheap index math of phase ph (pure ops of its coordinates and of values from
  // outside the phase); `cone` receives the phase's nodes it needs.
  bool recomputable(Node* n, const Phase& ph, std::unordered_set<Node*>& cone) const {
    if (cone.count(n) || n == ph.flat) return true;
    for (size_t a = 0; a < ph.local.size(); ++a)
      if (n == ph.local[a] || n == ph.global[a]) return true;
    if (!n->inside(ph.root)) return true;  // visible in every later phase
    if (n->parent != ph.body || !has_flag(n->op, F_PURE) || n->is_scope() || cone.size() >= kMaxRecompute) return false;
    cone.insert(n);
    for (Node* o : n->operands)
      if (!recomputable(o, ph, cone)) return false;
    return true;
  }

  // Copies the cone of v into phase q (at q's coordinates) for v's users there.
  void recompute(Node* v, const Phase& ph, const std::unordered_set<Node*>& cone, const Phase& q,
                 const std::vector<Node*>& users) {
    std::unordered_map<Node*, Node*> map;
    for (size_t a = 0; a < ph.local.size(); ++a) {
      map[ph.local[a]] = q.local[a];
      map[ph.global[a]] = q.global[a];
    }
    map[ph.flat] = q.flat;
    b_.set_insert_before(q.first);
    clone_nodes(b_, ph.body, cone, map, grid_);
    Node* copy = map.at(v);
    for (Node* u : users)
      for (int j = 0; j < u->num_operands(); ++j)
        if (u->operand(j) == v) p_.set_operand(u, j, copy);
  }

  // Values and vars used by a later phase live in per-thread arrays: stored where they are
  // made (a var: at the end of every phase that sets it), reloaded at the start of each phase
  // that uses them (a var: into a var of that phase).
  void spill() {
    for (auto& owner : phases_) {
      Phase& ph = *owner;
      for (Node* v : ph.moved) {
        if (v->dead || v->dtype == DType::none || v->is_scope()) continue;
        std::map<int, std::vector<Node*>> uses;  // phase id -> users there
        std::unordered_set<Node*> seen;
        for (Node* u : v->users) {
          Phase* q = phase_of(u);
          EMBER_INTERNAL_ASSERT(q, op_name(v->op) << " %" << v->id << " of kernel #" << k_->index
                                                  << " is used at group level by " << op_name(u->op));
          if (q != &ph && seen.insert(u).second) uses[q->id].push_back(u);
        }
        if (uses.empty()) continue;
        std::unordered_set<Node*> cone;
        if (v->op != Op::var && recomputable(v, ph, cone)) {
          for (auto& [id, users] : uses) recompute(v, ph, cone, *phases_[static_cast<size_t>(id)], users);
          continue;
        }
        Node* arr = array(v->dtype);
        if (v->op == Op::var) {
          b_.set_insert_end(ph.body);
          store(arr, v, ph);
        } else {
          insert_after(v);
          store(arr, v, ph);
        }
        for (auto& [id, users] : uses) {
          Phase& q = *phases_[static_cast<size_t>(id)];
          bool sets = false;  // a var only read in this phase is its value at the phase's start
          for (Node* u : users) sets = sets || (u->op == Op::set && u->operand(0) == v);
          b_.set_insert_before(q.first);
          Node* copy = load(arr, q);
          if (sets) copy = b_.var(copy, grid_);
          for (Node* u : users)
            for (int j = 0; j < u->num_operands(); ++j)
              if (u->operand(j) == v) p_.set_operand(u, j, copy);
          if (sets) {
            b_.set_insert_end(q.body);
            store(arr, copy, q);
          }
        }
      }
    }
  }

  Program& p_;
  Node* k_;
  Builder b_;
  GroupUniformity uniform_;
  std::unordered_set<const Node*> sync_;
  std::vector<Node*> old_;          // coordinates and barriers of the original kernel
  std::vector<int32_t> group_;
  int64_t threads_ = 1;
  bool guard_ = false;
  Shape size_, grid_;
  std::vector<Node*> group_coord_;
  std::unordered_set<const Node*> top_;  // made here at the kernel's top, before every phase
  std::vector<std::unique_ptr<Phase>> phases_;
  std::unordered_map<const Node*, Phase*> root_of_;
};

}  // namespace

bool lower_group_barriers(Program& p) {
  std::vector<Node*> kernels;
  for (Node* k : kernels_of(p))
    if (!k->group.empty()) kernels.push_back(k);
  for (Node* k : kernels) Lowering(p, k).run();
  return !kernels.empty();
}

}  // namespace ember

#include "core/passes/reduce_atomics.h"

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

// Kernels whose remaining threads would be fewer than this (all dims constant) keep their axes:
// a reduction loop per thread would leave a GPU mostly idle.
constexpr int64_t kMinThreads = 64;
// Nor when each remaining thread would loop over more than this many times its count of
// threads (column sums of a tall matrix: a few threads each summing a million rows).
constexpr int64_t kMaxLoopPerThread = 16;

bool is_access(const Node* n) { return n->op == Op::load || n->op == Op::store || n->op == Op::atomic; }

// The op that combines two values as atomic kind k does; none for exchange.
bool combine_op(AtomicKind k, Op* op) {
  switch (k) {
    case AtomicKind::add: *op = Op::add; return true;
    case AtomicKind::min: *op = Op::min; return true;
    case AtomicKind::max: *op = Op::max; return true;
    case AtomicKind::band: *op = Op::band; return true;
    case AtomicKind::bor: *op = Op::bor; return true;
    case AtomicKind::bxor: *op = Op::bxor; return true;
    case AtomicKind::exchange: return false;
  }
  return false;
}

// The value v with op(x, v) == x for every x (float min/max: NaN, which they ignore; add: -0).
uint32_t identity_bits(AtomicKind k, DType t) {
  const bool f = t == DType::f32, i = t == DType::i32;
  switch (k) {
    case AtomicKind::add: return f ? 0x80000000u : 0u;
    case AtomicKind::min: return f ? 0x7fc00000u : i ? 0x7fffffffu : 0xffffffffu;
    case AtomicKind::max: return f ? 0x7fc00000u : i ? 0x80000000u : 0u;
    case AtomicKind::band: return 0xffffffffu;
    default: return 0u;
  }
}

// An atomic whose old value is unused, with a multi-dimensional index.
bool candidate(const Node* n) {
  Op op = Op::add;
  return n->op == Op::atomic && n->users.empty() && !n->flat && n->mode != IndexMode::unsafe &&
         combine_op(static_cast<AtomicKind>(n->kind), &op) &&
         (n->dtype == DType::f32 || n->dtype == DType::i32 || n->dtype == DType::u32) &&
         (n->dtype != DType::f32 || n->kind <= static_cast<uint8_t>(AtomicKind::max));
}

// Whether n sits in no loop of its kernel (only ifs between them).
bool outside_loops(const Node* n, const Node* k) {
  for (const Node* p = n->parent; p && p != k; p = p->parent)
    if (p->op == Op::loop) return false;
  return true;
}

// Whether the index operands of atomic a are pure computations inside kernel k.
bool pure_indices(const Node* a, const Node* k) {
  std::function<bool(const Node*)> pure = [&](const Node* x) {
    if (!x->inside(k)) return true;
    if (!has_flag(x->op, F_PURE) || x->is_scope()) return false;
    for (const Node* o : x->operands)
      if (!pure(o)) return false;
    return true;
  };
  for (int i = a->first_index_operand(); i < a->num_operands(); ++i)
    if (!pure(a->operand(i))) return false;
  return true;
}

class Reducer {
 public:
  explicit Reducer(Program& p) : p_(p), b_(p) {}

  bool run() {
    bool changed = false;
    std::vector<Node*> kernels;
    for (Node* k : kernels_of(p_))
      if (k->group.empty()) kernels.push_back(k);
    for (Node* k : kernels) {
      Node* now = reduce_axes(k);
      changed |= now != k;
      changed |= plain_updates(now);
    }
    return changed;
  }

 private:
  // Accesses in k per memory.
  static std::unordered_map<const Node*, std::vector<Node*>> accesses(Node* k) {
    std::unordered_map<const Node*, std::vector<Node*>> by_mem;
    walk_subtree(k, [&](Node* n) {
      if (is_access(n)) by_mem[n->operand(0)].push_back(n);
    });
    return by_mem;
  }

  // Atomics whose address ignores some axes: those axes become loops in each remaining thread.
  // Returns the kernel that replaces k (k itself when nothing changed).
  Node* reduce_axes(Node* k) {
    const int rank = k->rank();
    if (rank < 2 || rank > 64) return k;
    bool uniform_state = false;  // a uniform var, or a jump outside any loop: keep the kernel
    walk_subtree(k, [&](Node* n) {
      if (((n->op == Op::var || n->op == Op::set) && n->shape.empty()) ||
          ((n->op == Op::break_ || n->op == Op::continue_) && outside_loops(n, k)))
        uniform_state = true;
    });
    if (uniform_state) return k;
    auto by_mem = accesses(k);
    uint64_t axes = 0;
    std::vector<Node*> atomics;
    std::vector<Node*> all;
    walk_subtree(k, [&](Node* n) {
      if (candidate(n) && outside_loops(n, k)) all.push_back(n);
    });
    const uint64_t every = (rank == 64 ? ~uint64_t{0} : (uint64_t{1} << rank) - 1);
    for (Node* a : all) {
      // Its memory is touched only by atomics of this kernel that reduce with it.
      bool alone = true;
      for (const Node* o : by_mem[a->operand(0)]) alone &= o->op == Op::atomic && candidate(o) && outside_loops(o, k);
      if (!alone || !pure_indices(a, k)) continue;
      uint64_t ign = dep_.ignored_axes(a, k->shape);
      if (ign == 0 || ign == every) continue;
      if (axes == 0) axes = ign;
      if ((ign & axes) == axes) atomics.push_back(a);
    }
    if (atomics.empty()) return k;
    // Every atomic of a memory must be converted, or none (the others would see partial updates).
    std::unordered_set<const Node*> chosen(atomics.begin(), atomics.end());
    std::vector<Node*> keep;
    for (Node* a : atomics) {
      bool all_in = true;
      for (const Node* o : by_mem[a->operand(0)]) all_in &= chosen.count(o) > 0;
      if (all_in) keep.push_back(a);
    }
    atomics = keep;
    if (atomics.empty()) return k;
    std::vector<Node*> kept, reduced;
    int64_t threads = 1;
    bool symbolic = false;
    for (int a = 0; a < rank; ++a) {
      Node* d = k->shape[static_cast<size_t>(a)];
      if (axes >> a & 1) {
        reduced.push_back(d);
        continue;
      }
      kept.push_back(d);
      if (const_dim(d) < 0)
        symbolic = true;
      else
        threads *= const_dim(d);
    }
    int64_t trips = 1;
    bool symbolic_trips = false;
    for (Node* d : reduced) {
      if (const_dim(d) < 0)
        symbolic_trips = true;
      else
        trips *= const_dim(d);
    }
    if (!symbolic && threads < kMinThreads) return k;
    if (!symbolic && !symbolic_trips && trips > kMaxLoopPerThread * threads) return k;
    // Final updates are plain when the memory has one atomic here and isl shows its address is
    // injective on the remaining axes (one thread per element).
    std::unordered_map<const Node*, int> per_mem;
    for (Node* a : atomics) ++per_mem[a->operand(0)];
    std::unordered_map<const Node*, bool> plain;
    for (Node* a : atomics) plain[a] = per_mem[a->operand(0)] == 1 && dep_.injective_on(a, k->shape, every & ~axes);

    // The new kernel over the kept axes: accumulators, then loops over the reduced axes.
    b_.set_insert_before(k);
    b_.loc = k->loc;
    Node* k2 = kernel_like(b_, k, kept);
    b_.set_insert_end(k2);
    std::unordered_map<const Node*, Node*> acc;
    for (Node* a : atomics) {
      AtomicKind kind = static_cast<AtomicKind>(a->kind);
      b_.loc = a->loc;
      acc[a] = b_.var(b_.constant(a->dtype, identity_bits(kind, a->dtype)), kept);
    }
    b_.loc = k->loc;
    std::vector<Node*> counters(static_cast<size_t>(rank), nullptr);
    Node* outer = nullptr;
    for (int a = 0; a < rank; ++a) {
      if (!(axes >> a & 1)) continue;
      Node* l = b_.loop(b_.i32(0), k->shape[static_cast<size_t>(a)], b_.i32(1), kept);
      if (!outer) outer = l;
      counters[static_cast<size_t>(a)] = l;
      b_.set_insert_end(l);
    }
    Node* body = b_.scope();
    const std::vector<Node*> old_shape = k->shape;
    std::vector<Node*> inner;
    walk_subtree(k, [&](Node* n) {
      if (n != k) inner.push_back(n);
    });
    while (Node* c = k->first_child) {
      p_.unlink(c);
      p_.append(body, c);
    }
    std::vector<int> new_axis(static_cast<size_t>(rank), -1);
    for (int a = 0, j = 0; a < rank; ++a)
      if (!(axes >> a & 1)) new_axis[static_cast<size_t>(a)] = j++;
    for (Node* n : inner) {
      if (!same_shape(n->shape, old_shape)) continue;
      if (n->op == Op::index && counters[static_cast<size_t>(n->axis)]) {
        p_.replace_all_uses(n, counters[static_cast<size_t>(n->axis)]);
        p_.set_shape(n, kept);
        n->axis = 0;
        continue;  // now unused (dce)
      }
      if (n->op == Op::index) n->axis = new_axis[static_cast<size_t>(n->axis)];
      p_.set_shape(n, kept);
    }
    // Each atomic accumulates in its var; after the loops, one update per thread.
    for (Node* a : atomics) {
      Op op = Op::add;
      combine_op(static_cast<AtomicKind>(a->kind), &op);
      b_.set_insert_before(a);
      b_.loc = a->loc;
      Node* v = acc[a];
      b_.set(v, b_.binary(op, v, a->operand(1)));
      b_.set_insert_end(k2);
      std::unordered_map<const Node*, Node*> copies;
      std::function<Node*(Node*)> at_zero = [&](Node* x) -> Node* {
        for (Node* c : counters)
          if (x == c) return b_.i32(0);
        if (!x->inside(outer)) return x;
        auto it = copies.find(x);
        if (it != copies.end()) return it->second;
        std::vector<Node*> ops;
        for (Node* o : x->operands) ops.push_back(at_zero(o));
        Node* c = p_.create(x->op, x->dtype, x->shape, ops);
        copy_attrs(*c, *x);
        p_.append(k2, c);
        return copies[x] = c;
      };
      std::vector<Node*> idx;
      for (int i = a->first_index_operand(); i < a->num_operands(); ++i) idx.push_back(at_zero(a->operand(i)));
      Node* mem = a->operand(0);
      if (plain[a]) {
        Node* old = b_.load(mem, idx, kept, a->mode);
        b_.store(mem, b_.binary(op, old, v), idx, kept, a->mode);
      } else {
        b_.atomic(static_cast<AtomicKind>(a->kind), mem, v, idx, kept, a->mode);
      }
      p_.erase(a);
    }
    p_.erase(k);
    return k2;
  }

  // An atomic whose address is injective over k's threads, on a memory nothing else in k
  // touches from another thread, becomes load, op, store.
  bool plain_updates(Node* k) {
    if (k->rank() > 64) return false;
    auto by_mem = accesses(k);
    const uint64_t every = k->rank() == 64 ? ~uint64_t{0} : (uint64_t{1} << k->rank()) - 1;
    bool changed = false;
    std::vector<Node*> atomics;
    walk_subtree(k, [&](Node* n) {
      if (candidate(n) || (n->op == Op::atomic && n->users.empty() && !n->flat && n->mode != IndexMode::unsafe &&
                           static_cast<AtomicKind>(n->kind) == AtomicKind::exchange))
        atomics.push_back(n);
    });
    for (Node* a : atomics) {
      const std::vector<Node*>& others = by_mem[a->operand(0)];
      int n_atomics = 0;
      for (const Node* o : others) n_atomics += o->op == Op::atomic;
      if (n_atomics != 1 || !dep_.injective_on(a, k->shape, every)) continue;
      AccessGroup mine(k->shape, k->rank()), rest(k->shape, k->rank());
      mine.add_access({a, a->operand(0), AccessKind::write});
      for (Node* o : others)
        if (o != a) rest.add(o);
      if (!dep_.within_thread(mine, rest)) continue;
      b_.set_insert_before(a);
      b_.loc = a->loc;
      std::vector<Node*> idx(a->operands.begin() + a->first_index_operand(), a->operands.end());
      Node* v = a->operand(1);
      Op op = Op::add;
      if (combine_op(static_cast<AtomicKind>(a->kind), &op))
        v = b_.binary(op, b_.load(a->operand(0), idx, a->shape, a->mode), v);
      b_.store(a->operand(0), v, idx, a->shape, a->mode);
      p_.erase(a);
      changed = true;
    }
    return changed;
  }

  Program& p_;
  Builder b_;
  DependenceAnalysis dep_;
};

}  // namespace

bool reduce_atomics(Program& p) { return Reducer(p).run(); }

}  // namespace ember

#include "core/passes/split_reductions.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/analysis/reductions.h"
#include "core/ir/builder.h"
#include "core/ir/eval.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// A kernel of at most this many threads has too few to fill a GPU (at least 4 workgroups of the
// stage per output below kGpuThreads).
constexpr int64_t kFewThreads = 256;
// The threads a split aims at (over all outputs): an H100 runs about 270K at once; half of that
// keeps every SM busy with enough loads in flight, and lavapipe/llvmpipe run them as a loop.
constexpr int64_t kGpuThreads = 131072;
// Iterations each stage thread takes at least (a small sum stays at one workgroup), and at most
// (llvmpipe and lavapipe stop a shader loop after 65 535 iterations).
constexpr int64_t kMinPerThread = 32;
constexpr int64_t kMaxPerThread = 32768;
// Partials per output at most: the combining kernel reads them in one loop.
constexpr int64_t kMaxParts = 1024;

ReduceKind kind_of(Op op) {
  switch (op) {
    case Op::add: return ReduceKind::sum;
    case Op::mul: return ReduceKind::prod;
    case Op::min: return ReduceKind::min;
    default: return ReduceKind::max;
  }
}

bool host_value(const Node* v, const Node* k) { return v->op == Op::constant || !v->inside(k); }

class Splitter {
 public:
  Splitter(Program& p, Node* k, int64_t min_trips) : p_(p), k_(k), min_trips_(min_trips) {}

  // Splits loop l of the kernel when it qualifies; whether it did.
  bool split(Node* l) {
    ReductionOptions o;
    o.float_extrema = o.nested = true;
    accs_ = reduction_vars(l, o);
    if (accs_.empty()) return false;
    for (const ReductionVar& a : accs_)
      if (a.var->parent != k_ ||
          (a.var->dtype != DType::f32 && a.var->dtype != DType::i32 && a.var->dtype != DType::u32))
        return false;
    for (int i = 0; i < 3; ++i)
      if (!host_value(l->operand(i), k_) || l->operand(i)->dtype != DType::i32) return false;
    if (l->operand(2)->op != Op::constant || l->operand(2)->i() == 0) return false;
    if (l->operand(0)->op == Op::constant && l->operand(1)->op == Op::constant) {
      const int64_t span = static_cast<int64_t>(l->operand(1)->i()) - l->operand(0)->i();
      if (span / l->operand(2)->i() < min_trips_) return false;
    }
    if (!collect_cone(l)) return false;
    rewrite(l);
    return true;
  }

 private:
  // The values of the kernel outside l that l reads, with what they read in turn: pure values and
  // loads of memories the kernel does not write (they are computed again in the stage). False
  // when l reads anything else (a var other than its accumulators, an atomic's old value).
  bool collect_cone(Node* l) {
    std::unordered_set<const Node*> written;
    walk_subtree(k_, [&](Node* n) {
      if (const Node* m = written_memory(n)) written.insert(m);
    });
    std::unordered_set<const Node*> accs;
    for (const ReductionVar& a : accs_) accs.insert(a.var);
    std::vector<Node*> todo;
    auto need = [&](Node* o) {
      if (o->op == Op::constant || !o->inside(k_) || o->inside(l) || o == l || accs.count(o)) return true;
      if (o->op == Op::index) return true;  // mapped to the stage's own coordinates
      if (o->op == Op::load ? written.count(o->operand(0)) > 0 : !has_flag(o->op, F_PURE)) return false;
      if (cone_.insert(o).second) todo.push_back(o);
      return true;
    };
    bool ok = true;
    walk_subtree(l, [&](Node* n) {
      if (n->op == Op::load && written.count(n->operand(0))) ok = false;
      if (n->op == Op::local_index || n->op == Op::group_index) ok = false;
      for (Node* o : n->operands) ok = ok && need(o);
    });
    while (ok && !todo.empty()) {
      Node* n = todo.back();
      todo.pop_back();
      for (Node* o : n->operands) ok = ok && need(o);
    }
    return ok;
  }

  // The trips of loop(begin, end, step) (host values, a constant step), never negative.
  static Node* trip_count(Builder& b, Node* begin, Node* end, int32_t step) {
    Node* span = step > 0 ? b.binary(Op::sub, end, begin) : b.binary(Op::sub, begin, end);
    span = b.binary(Op::max, span, b.i32(0));
    const int32_t astep = step > 0 ? step : -step;
    if (astep == 1) return span;
    return b.binary(Op::div, b.binary(Op::add, span, b.i32(astep - 1)), b.i32(astep));
  }

  static Node* cap15(Builder& b, Node* x) { return b.binary(Op::min, x, b.i32(32768)); }

  // The loop iterations one iteration of `scope` runs (nested loops multiply, siblings add; a
  // loop whose bounds are not host values counts as one trip, as the GPU backends' loop limit
  // check counts it), as host math before the kernel; at least 1.
  Node* inner_trips(Builder& b, const Node* scope) {
    Node* sum = nullptr;
    for (const Node* c = scope->first_child; c; c = c->next) {
      Node* here = nullptr;
      if (c->op == Op::loop) {
        bool host = c->operand(2)->op == Op::constant && c->operand(2)->i() != 0;
        for (int i = 0; i < 2; ++i) host = host && host_value(c->operand(i), k_) && c->operand(i)->dtype == DType::i32;
        Node* t = host ? trip_count(b, c->operand(0), c->operand(1), c->operand(2)->i()) : b.i32(1);
        // Each factor capped at 2^15 (a product under 2^30): past that C is at its cap anyway.
        here = b.binary(Op::mul, cap15(b, t), cap15(b, inner_trips(b, c)));
      } else if (c->first_child) {
        here = inner_trips(b, c);
      }
      if (here) sum = sum ? cap15(b, b.binary(Op::add, sum, here)) : here;
    }
    return sum ? b.binary(Op::max, sum, b.i32(1)) : b.i32(1);
  }

  Node* identity(Builder& b, const ReductionVar& a) {
    // An f32 sum from -0.0, the exact identity (core/ir/eval.h, reduce_start): a partial of
    // terms that are all -0.0 stays -0.0.
    return b.constant(a.var->dtype, reduce_start(kind_of(a.op), a.var->dtype, true));
  }

  void rewrite(Node* l) {
    Builder b(p_);
    b.loc_of = l;
    const int rank = k_->rank();
    const Shape outer(k_->shape.begin(), k_->shape.end());
    const int64_t threads = const_size(k_->shape);

    // Host: the trip count, the work per iteration (the trips of the loops inside, as far as the
    // host knows them), the partials per output C, the stage's threads per output C * G and the
    // iterations per thread.
    b.set_insert_before(k_);
    Node* begin = l->operand(0);
    Node* end = l->operand(1);
    const int32_t step = l->operand(2)->i();
    Node* trips = trip_count(b, begin, end, step);
    Node* inner = inner_trips(b, l);
    auto ceil_div = [&](Node* x, int64_t d) {
      return b.binary(Op::div, b.binary(Op::add, x, b.i32(static_cast<int32_t>(d - 1))),
                      b.i32(static_cast<int32_t>(d)));
    };
    auto at_most = [&](Node* x, int64_t m) { return b.binary(Op::min, x, b.i32(static_cast<int32_t>(m))); };
    const int64_t cap = std::max<int64_t>(1, std::min(kMaxParts, kGpuThreads / (threads * kSplitGroup)));
    // Groups that would each get at least one iteration; both products below stay under 2^31
    // (a and the work are capped where the cap decides anyway).
    Node* groups = ceil_div(trips, kSplitGroup);
    Node* a = at_most(groups, kMaxParts * kMinPerThread);
    Node* w = at_most(inner, 32768);
    Node* want = ceil_div(b.binary(Op::mul, a, w), kMinPerThread);  // kMinPerThread iterations of work each
    Node* limit = ceil_div(b.binary(Op::mul, a, b.binary(Op::add, w, b.i32(1))), kMaxPerThread);
    Node* parts = b.binary(Op::max, at_most(want, cap), limit);
    parts = b.binary(Op::max, b.binary(Op::min, parts, groups), b.i32(1));
    Node* width = b.binary(Op::mul, parts, b.i32(kSplitGroup));
    Node* per = b.binary(Op::div, b.binary(Op::sub, b.binary(Op::add, trips, width), b.i32(1)), width);

    Shape part_shape = outer;
    part_shape.push_back(parts);
    std::vector<Node*> part_buffers;
    for (const ReductionVar& a : accs_) part_buffers.push_back(b.buffer(a.var->dtype, part_shape, false));

    // The stage kernel.
    Shape shape = outer;
    shape.push_back(width);
    Node* stage = kernel_like(b, k_, shape);
    stage->user_kernel = false;
    std::vector<int> group(rank, 1);
    group.push_back(kSplitGroup);
    stage->group = group;
    b.set_insert_end(stage);
    std::unordered_map<Node*, Node*> map;
    std::vector<Node*> coords;
    for (int a = 0; a < rank; ++a) coords.push_back(b.index(a, shape));
    Node* j = b.index(rank, shape);
    Node* lid = b.local_index(rank, shape);
    Node* gid = b.group_index(rank, shape);
    walk_subtree(l, [&](Node* n) {
      for (Node* o : n->operands)
        if (o->op == Op::index && o->inside(k_)) map[o] = coords[o->axis];
    });
    for (Node* n : cone_)
      for (Node* o : n->operands)
        if (o->op == Op::index && o->inside(k_)) map[o] = coords[o->axis];
    std::unordered_set<Node*> cone(cone_.begin(), cone_.end());
    clone_into_stage(b, cone, map, shape);
    std::vector<Node*> partial;
    for (const ReductionVar& a : accs_) {
      partial.push_back(b.var(identity(b, a), shape));
      map[const_cast<Node*>(a.var)] = partial.back();
    }
    // Iteration i = j + t * C * G of the loop, for t < per (the same bounds in every thread, as
    // the host can count them), when i < trips.
    Node* loop = b.loop(b.i32(0), per, b.i32(1), shape);
    b.set_insert_end(loop);
    Node* i = b.binary(Op::add, j, b.binary(Op::mul, loop, width));
    Node* guard = b.if_(b.binary(Op::lt, i, trips), shape);
    b.set_insert_end(guard);
    map[l] = b.binary(Op::add, begin, b.binary(Op::mul, i, b.i32(step)));
    std::unordered_set<Node*> body;
    walk_subtree(l, [&](Node* n) {
      if (n != l) body.insert(n);
    });
    clone_into_stage(b, body, map, shape, l);
    b.set_insert_end(stage);

    // The workgroup's tree in shared memory, one array per accumulator.
    std::vector<Node*> shared;
    for (size_t i = 0; i < accs_.size(); ++i) {
      Node* const dims[1] = {b.i32(kSplitGroup)};
      Node* s = p_.create(Op::group_buffer, accs_[i].var->dtype, dims);
      s->loc = l->loc;
      p_.prepend(stage, s);
      shared.push_back(s);
      b.store(s, partial[i], {lid}, shape, IndexMode::unsafe);
    }
    b.raw(Op::barrier, DType::none, {}, {});
    for (int half = kSplitGroup / 2; half >= 1; half /= 2) {
      Node* cond = b.binary(Op::lt, lid, b.i32(half));
      Node* branch = b.if_(cond, shape);
      b.set_insert_end(branch);
      Node* other = b.binary(Op::add, lid, b.i32(half));
      for (size_t i = 0; i < accs_.size(); ++i) {
        Node* x = b.load(shared[i], {lid}, shape, IndexMode::unsafe);
        Node* y = b.load(shared[i], {other}, shape, IndexMode::unsafe);
        b.store(shared[i], b.binary(accs_[i].op, x, y), {lid}, shape, IndexMode::unsafe);
      }
      b.set_insert_end(stage);
      b.raw(Op::barrier, DType::none, {}, {});
    }
    Node* leader = b.if_(b.binary(Op::eq, lid, b.i32(0)), shape);
    b.set_insert_end(leader);
    std::vector<Node*> at = coords;
    at.push_back(gid);
    for (size_t i = 0; i < accs_.size(); ++i)
      b.store(part_buffers[i], b.load(shared[i], {b.i32(0)}, shape, IndexMode::unsafe), at, shape, IndexMode::unsafe);

    // The kernel combines the partials in order where the loop was.
    b.set_insert_before(l);
    const Shape& ks = outer;
    Node* c = b.loop(b.i32(0), parts, b.i32(1), ks);
    b.set_insert_end(c);
    std::vector<Node*> idx;
    for (int a = 0; a < rank; ++a) idx.push_back(b.index(a, ks));
    idx.push_back(c);
    for (size_t i = 0; i < accs_.size(); ++i) {
      Node* acc = const_cast<Node*>(accs_[i].var);
      Node* v = b.load(part_buffers[i], idx, ks, IndexMode::unsafe);
      b.set(acc, b.binary(accs_[i].op, acc, v));
    }
    p_.erase(l);
  }

  // Copies `keep` (nodes inside the kernel, or inside `scope` when given) to the builder's
  // insertion point; every copy runs per thread of the stage (shape `shape`).
  void clone_into_stage(Builder& b, const std::unordered_set<Node*>& keep, std::unordered_map<Node*, Node*>& map,
                        const Shape& shape, Node* scope = nullptr) {
    clone_nodes(b, scope ? scope : k_, keep, map, shape);
    for (Node* n : keep) {
      Node* copy = map.at(n);
      if (copy->shape.empty() && copy->op != Op::constant && copy->op != Op::break_ && copy->op != Op::continue_)
        p_.set_shape(copy, shape);
    }
  }

  Program& p_;
  Node* k_;
  int64_t min_trips_;
  std::vector<ReductionVar> accs_;
  std::unordered_set<Node*> cone_;
};

}  // namespace

bool split_reductions(Program& p, int64_t min_trips) {
  bool changed = false;
  for (Node* k : kernels_of(p)) {
    if (!k->group.empty()) continue;
    bool constant = true;
    for (const Node* d : k->shape) constant = constant && d->op == Op::constant;
    if (!constant || const_size(k->shape) > kFewThreads) continue;
    std::vector<Node*> loops;
    for (Node* c = k->first_child; c; c = c->next)
      if (c->op == Op::loop) loops.push_back(c);
    for (Node* l : loops) changed |= Splitter(p, k, min_trips).split(l);
  }
  return changed;
}

}  // namespace ember

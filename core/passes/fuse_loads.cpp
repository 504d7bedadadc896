#include "core/passes/fuse_loads.h"

#include <algorithm>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "core/analysis/dependence.h"
#include "core/ir/builder.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// Recomputing a producer costs its ops (times loop trips); above this it is stored instead.
constexpr int64_t kMaxRecomputeCost = 512;
constexpr int64_t kUnknownTrips = 64;
// When the consumer would recompute each produced element several times (a load inside a loop
// that the producer's shape does not account for, e.g. sin(A) inside a matmul's k loop), only
// producers about as cheap as the load itself are recomputed.
constexpr int64_t kCheapRecomputeCost = 6;
// Trailing constant dims up to this size are unrolled into registers (unroll_small_dims), so
// they do not multiply the work.
constexpr int64_t kUnrolledDim = 4;
// The most loop work (ops times trips) a fusion may duplicate: work in loops of the producer that
// the producer still does after the fusion (it stores other values computed from it).
constexpr int64_t kMaxDuplicatedLoopCost = 64;

// Small lists of dims, kept on the stack: recompute_factor runs for every candidate load.
using DimVec = SmallVec<Node*, 8>;

// The non-trivial dims of a shape: dims of constant size 1, and a trailing dim the unroller
// keeps in registers, do not count.
void work_dims(std::span<Node* const> shape, DimVec& out) {
  for (size_t a = 0; a < shape.size(); ++a) {
    int64_t c = const_dim(shape[a]);
    if (c == 1) continue;
    if (a + 1 == shape.size() && shape.size() >= 2 && c >= 2 && c <= kUnrolledDim) continue;
    out.push_back(shape[a]);
  }
}

// A consumer may evaluate a non-trivial producer up to this many times per produced element on
// average: a concat's select chain evaluates every part at every element, a repeat reads each
// element `repeats` times. A factor that grows with a dimension is never allowed.
constexpr int64_t kMaxRepeat = 4;

// A dim as its factors: a product of dims (a reshape's [N * 3]) matches the dims [N, 3].
void dim_factors(Node* d, DimVec& out) {
  if (d->op == Op::mul && d->shape.empty() && d->dtype == DType::i32) {
    dim_factors(d->operand(0), out);
    dim_factors(d->operand(1), out);
    return;
  }
  if (const_dim(d) != 1) out.push_back(d);
}

// A loop from 0 by 1 with a constant trip count of at most kUnrolledDim (a 3-component dot
// product): unrolled into registers like a small dim, so work inside it is per-element work, not
// a long loop's. recompute_factor and the cone's loop accounting share this one definition.
bool short_constant_loop(const Node* loop) {
  const Node* b = loop->operand(0);
  const Node* st = loop->operand(2);
  const int64_t trips = const_dim(loop->operand(1));
  return b->op == Op::constant && b->i() == 0 && st->op == Op::constant && st->i() == 1 && trips >= 1 &&
         trips <= kUnrolledDim;
}

// Whether recomputing at `load` evaluates each element of the producer (shape `produced`) at most
// about once: the dims the load runs over (its kernel's dims, and the extents of the loops
// around it) match dims of the producer, up to a constant factor of at most kMaxRepeat (so
// reshapes, transposes, concats and repeats between them are fine).
// Returns that factor (1 when each element is evaluated once), or 0 when the work may grow with a
// dimension or exceeds kMaxRepeat.
int64_t recompute_factor(const Node* load, std::span<Node* const> produced) {
  DimVec have;
  for (Node* d : produced) dim_factors(d, have);
  DimVec runs;
  work_dims(load->enclosing_kernel()->shape, runs);
  for (const Node* s = load->parent; s && s->op != Op::kernel; s = s->parent) {
    if (s->op != Op::loop) continue;
    if (short_constant_loop(s)) continue;
    const Node* b = s->operand(0);
    const Node* st = s->operand(2);
    bool unit = b->op == Op::constant && b->i() == 0 && st->op == Op::constant && st->i() == 1;
    if (!unit) return 0;  // unknown extent: assume it repeats work
    runs.push_back(s->operand(1));
  }
  DimVec run_factors;
  for (Node* d : runs) dim_factors(d, run_factors);
  int64_t run_const = 1, have_const = 1;
  for (Node* d : run_factors) {
    // A sum of equal dims (a concat of k parts of size N along an axis): N, k times over.
    DimVec terms;
    DimVec pending;
    pending.push_back(d);
    while (!pending.empty()) {
      Node* t = pending.back();
      pending.pop_back();
      if (t->op == Op::add && t->shape.empty() && t->dtype == DType::i32 && terms.size() < 64) {
        pending.push_back(t->operand(0));
        pending.push_back(t->operand(1));
      } else {
        terms.push_back(t);
      }
    }
    bool equal_terms = terms.size() > 1 && std::all_of(terms.begin(), terms.end(), [&](Node* t) { return same_dim(t, terms[0]); });
    if (equal_terms) {
      d = terms[0];
      run_const *= static_cast<int64_t>(terms.size());
    }
    auto it = std::find_if(have.begin(), have.end(), [&](Node* h) { return same_dim(h, d); });
    if (it != have.end()) { have.erase(it); continue; }
    if (const_dim(d) < 0) return 0;  // a symbolic dim the producer does not have
    run_const *= const_dim(d);
  }
  for (Node* h : have)
    if (const_dim(h) > 0) have_const *= const_dim(h);  // symbolic leftovers count as >= 1
  if (run_const > have_const * kMaxRepeat) return 0;
  return std::max<int64_t>(1, (run_const + have_const - 1) / have_const);
}

// Whether `st`, buf's only user other than loads of it, is a store that fills buffer `buf` with a
// value over the whole buffer (see BufferUses::identity_store).
bool fills_whole_buffer(const Node* buf, const Node* st) {
  if (buf->op != Op::buffer || st->op != Op::store) return false;
  if (st->operand(0) != buf || st->operand(1) == buf) return false;
  const Node* k = st->parent;
  if (!k || k->op != Op::kernel || !same_shape(k->shape, buf->shape)) return false;
  for (int a = 0; a < buf->rank(); ++a) {
    const Node* ix = st->operand(2 + a);
    if (ix->op != Op::index || ix->axis != a) return false;
  }
  return true;
}

// Marks by node id for one cone at a time. A cone is a few dozen nodes, built for every candidate
// load: hash sets cost an allocation per node, this table the pass keeps costs none.
class ConeMarks {
 public:
  void clear() { ++gen_; }  // forgets every mark
  bool has(const Node* n) const {
    const size_t i = static_cast<size_t>(n->id);
    return i < v_.size() && v_[i] == gen_;
  }
  void mark(const Node* n) {
    const size_t i = static_cast<size_t>(n->id);
    if (i >= v_.size()) v_.resize(i * 3 / 2 + 64, 0);
    v_[i] = gen_;
  }

 private:
  std::vector<uint32_t> v_;
  uint32_t gen_ = 1;
};

class Cone {
 public:
  // `copies`: nodes earlier fusions of this pass made (by id; see fuse_loads). `marks` is
  // cleared and then records what the cone holds (keep and indices).
  Cone(Node* k, int64_t limit, const std::vector<char>& copies, ConeMarks& marks)
      : k_(k), limit_(limit), copies_(copies), marks_(marks), visits_(node_visit_counter()) {
    marks_.clear();
  }

  // Adds v and everything in the kernel it depends on. False if some part cannot be recomputed
  // or the cone costs more than the limit (it is then never recomputed, so the walk stops
  // there: a consumer of a large kernel costs O(limit), not O(kernel)).
  bool add(Node* v) {
    ++visits_;
    if (!v->inside(k_) || marks_.has(v)) return true;
    if (v->op == Op::store || v->op == Op::atomic) return false;
    marks_.mark(v);
    if (v->op == Op::index) {
      indices.push_back(v);
      return true;
    }
    keep.push_back(v);
    const int64_t c = node_cost(v);
    cost_ += c;
    if (cost_ > limit_) return false;
    const size_t id = static_cast<size_t>(v->id);
    if (id < copies_.size() && copies_[id]) copied.emplace_back(v, c);
    if (in_loop(v)) looped.emplace_back(v, c);
    for (Node* o : v->operands)
      if (!add(o)) return false;
    for (Node* s = v->parent; s != k_; s = s->parent)
      if (!add(s)) return false;
    if (v->op == Op::else_ && !add(v->prev)) return false;
    if (v->op == Op::var)
      for (Node* u : v->users) {
        ++visits_;
        if (u->op == Op::set && u->operand(0) == v && !add(u)) return false;
      }
    if (v->op == Op::loop) {
      bool ok = true;
      walk_subtree(v, [&](Node* x) {
        if (x->op == Op::break_ || x->op == Op::continue_) ok = ok && add(x);
      });
      if (!ok) return false;
    }
    if (v->op == Op::load && !reads_memory(v->operand(0))) reads.push_back(v->operand(0));
    return true;
  }

  // Whether a load of the cone reads memory m.
  bool reads_memory(const Node* m) const { return std::find(reads.begin(), reads.end(), m) != reads.end(); }

  // Whether n is one of the nodes the cone copies (keep).
  bool kept(const Node* n) const { return n->op != Op::index && marks_.has(n); }

  std::vector<Node*> keep;          // what the copy recomputes, each once
  std::vector<const Node*> reads;   // the memories its loads read, each once
  std::vector<Node*> indices;       // k1's index nodes the cone uses, each once
  std::vector<std::pair<Node*, int64_t>> copied;  // nodes of the cone earlier fusions made, with their cost
  std::vector<std::pair<Node*, int64_t>> looped;  // nodes of the cone inside a long loop of k1, with their cost

  // Inside a loop of k1 other than a short constant one (a 3-component dot product is unrolled
  // into registers like a small dim: recomputing it is per-element work, not a matmul's loop).
  bool in_loop(const Node* n) const {
    for (const Node* s = n->parent; s && s != k_; s = s->parent) {
      if (s->op == Op::loop && !short_constant_loop(s)) return true;
    }
    return false;
  }

 private:
  // n's op cost times the trips of the loops around it inside the kernel.
  int64_t node_cost(const Node* n) const {
    int64_t c = op_info(n->op).cost;
    for (Node* s = n->parent; s != k_; s = s->parent) {
      if (s->op != Op::loop) continue;
      Node* b = s->operand(0);
      Node* e = s->operand(1);
      Node* st = s->operand(2);
      int64_t trips = kUnknownTrips;
      if (b->op == Op::constant && e->op == Op::constant && st->op == Op::constant && st->i() > 0)
        trips = std::max<int64_t>(0, (e->i() - b->i() + st->i() - 1) / st->i());
      c *= trips;
    }
    return c;
  }

  Node* k_;
  int64_t limit_;
  const std::vector<char>& copies_;
  ConeMarks& marks_;
  uint64_t& visits_;  // node_visit_counter()
  int64_t cost_ = 0;
};

// The cost of the `part` of the cone (its copies: nodes an earlier fusion made; or its looped
// nodes) that k1 still computes after this fusion: all of them when the store stays (other loads of the buffer remain), else those
// that something outside the cone needs. A recomputation is recomputed again only when that
// duplicated part is cheap: each fusion is judged alone, so copies of copies that k1 keeps would
// grow a chain (v_{k+1} = v_k + sin(u_k) unrolled: every step's kernel recomputed the dozens of
// steps before it, up to the cost limit: kernels 20x larger and 10x slower), while a copy that
// moves on (its only consumer takes it) duplicates nothing.
int64_t duplicated_cost(const Cone& cone, const std::vector<std::pair<Node*, int64_t>>& part, const Node* st,
                        bool store_stays) {
  int64_t total = 0;
  if (part.empty()) return 0;
  if (store_stays) {
    for (const auto& [n, c] : part) total += c;
    return total;
  }
  std::unordered_set<const Node*> shared;
  std::vector<const Node*> work;
  uint64_t& visits = node_visit_counter();
  for (Node* n : cone.keep)
    for (Node* u : n->users) {
      ++visits;
      if (u != st && !cone.kept(u)) {
        if (shared.insert(n).second) work.push_back(n);
        break;
      }
    }
  while (!work.empty()) {
    const Node* n = work.back();
    work.pop_back();
    auto need = [&](const Node* o) {
      if (cone.kept(o) && shared.insert(o).second) work.push_back(o);
    };
    // What computes n: its operands, the scopes around it, and a var's assignments (a shared
    // accumulator keeps its whole loop, unless that loop is short and constant: then recomputing
    // it is per-element work, as for in_loop).
    for (Node* o : n->operands) need(o);
    for (const Node* s = n->parent; s; s = s->parent) need(s);
    if (n->op == Op::var)
      for (Node* u : n->users) {
        ++visits;
        if (u->op == Op::set && u->operand(0) == n && cone.in_loop(u)) need(u);
      }
  }
  for (const auto& [n, c] : part)
    if (shared.count(n)) total += c;
  return total;
}

// The stores and atomics into memory m (from its user list: no walk over the program).
template <class F>
void for_each_writer(const Node* m, F&& f) {
  uint64_t& visits = node_visit_counter();
  for (Node* u : m->users) {
    ++visits;
    if ((u->op == Op::store || u->op == Op::atomic) && u->operand(0) == m) f(u);
  }
}

// Whether any memory in `reads` may be written after kernel k1 starts and before `load` runs
// (including later iterations of loops around the load that do not contain k1).
bool written_between(Node* k1, Node* load, const std::vector<const Node*>& reads, const Positions& pos) {
  if (reads.empty()) return false;
  int from = pos.at(k1), to = pos.at(load);
  std::vector<const Node*> loops;
  for (Node* s = load->parent; s; s = s->parent)
    if (s->op == Op::loop && !k1->inside(s)) loops.push_back(s);
  bool hit = false;
  for (const Node* m : reads)
    for_each_writer(m, [&](Node* x) {
      if (hit) return;
      int at = pos.at(x);
      if (at > from && at < to) hit = true;
      for (const Node* l : loops)
        if (x->inside(l)) hit = true;
    });
  return hit;
}

// Whether the recomputation at `load` in consumer k2 and k2's writes of the memories the cone
// reads all touch only the thread's own element: k1 and k2 have one shape, `load` reads k2's
// element, every cone load of a memory k2 writes reads k1's element (so its copy reads k2's),
// and every write of such a memory in k2 is its thread's element. No dependence then crosses
// k2's threads.
bool own_elements_only(DependenceAnalysis& dep, const Cone& cone, Node* load, Node* k1, Node* k2) {
  if (!same_shape(k1->shape, k2->shape) || !dep.own_element(load, k2->shape)) return false;
  bool ok = true;
  for (Node* n : cone.keep) {
    if (!ok) break;
    if (n->op != Op::load) continue;
    const Node* m = n->operand(0);
    bool written = false;
    for_each_writer(m, [&](Node* x) {
      if (!x->inside(k2)) return;
      written = true;
      ok = ok && dep.own_element(x, k2->shape);
    });
    ok = ok && (!written || dep.own_element(n, k1->shape));
  }
  return ok;
}

// Coordinate `a` of `load` brought into [0, dim) the way the load's mode does (clamp, wrap;
// unsafe as is), with no code where it is already in range. Host math goes before kernel `k`.
Node* in_mode_range(Builder& b, Node* load, int a, Node* k) {
  Node* i = load->operand(1 + a);
  Node* d = load->operand(0)->shape[static_cast<size_t>(a)];
  if (load->mode == IndexMode::unsafe || index_in_range(i, d, k)) return i;
  b.set_insert_before(load);
  if (i->dtype != DType::i32) i = b.cast(i, DType::i32);
  if (load->mode == IndexMode::wrap) return b.binary(Op::mod, i, d);
  return clamp_index(b, i, d, load, k);
}

// What fuse_one asks of a buffer's users, counted once per buffer and kept up to date as loads
// are fused (a fusion removes one load and adds the recomputation's loads; it never adds or
// removes a store, and in a kernel only loads, stores and atomics use a memory). How many loads
// each kernel has, so asking whether some kernel reads a buffer at several places costs O(1)
// instead of a scan of its users per load (fused chains give a buffer many loads: the scans made
// the pass quadratic); and the buffer's identity store, which a scan per load made quadratic too
// (a buffer every step reads has a user per step, and each step's loads of it asked).
class BufferUses {
 public:
  bool repeated(const Node* buf) { return entry(buf).repeated > 0; }
  int total(const Node* buf) { return entry(buf).total; }
  // The single store that fills buf over the whole buffer, when buf has no other user than it
  // and loads; else null.
  Node* identity_store(const Node* buf) { return entry(buf).store; }
  void added(const Node* load) { change(load, +1); }
  void removed(const Node* load) { change(load, -1); }

 private:
  struct Entry {
    std::unordered_map<const Node*, int> per_kernel;
    int repeated = 0;  // kernels with more than one load
    int total = 0;     // loads
    Node* store = nullptr;
  };
  Entry& entry(const Node* buf) {
    auto it = m_.find(buf);
    if (it != m_.end()) return it->second;
    Entry& e = m_[buf];
    Node* other = nullptr;  // the one user that is not a load, if there is one
    int others = 0;
    uint64_t& visits = node_visit_counter();
    for (Node* u : buf->users) {
      ++visits;
      if (u->op != Op::load) {
        other = u;
        ++others;
        continue;
      }
      ++e.total;
      if (++e.per_kernel[u->enclosing_kernel()] == 2) ++e.repeated;
    }
    if (others == 1 && fills_whole_buffer(buf, other)) e.store = other;
    return e;
  }
  void change(const Node* load, int by) {
    auto it = m_.find(load->operand(0));
    if (it == m_.end()) return;  // counted from the users when first asked
    it->second.total += by;
    int& n = it->second.per_kernel[load->enclosing_kernel()];
    if (by > 0 && ++n == 2) ++it->second.repeated;
    if (by < 0 && n-- == 2) --it->second.repeated;
  }
  std::unordered_map<const Node*, Entry> m_;
};

// A buffer read by at most this many loads may have them all fused at once (see fuse_one).
constexpr int kMaxGroupLoads = 4;

// A buffer's size class: its symbolic dims, then its constant elements.
std::pair<int, int64_t> size_class(std::span<Node* const> shape) {
  int symbolic = 0;
  int64_t elements = 1;
  for (Node* d : shape) {
    const int64_t c = const_dim(d);
    if (c < 0) ++symbolic;
    else elements *= c;
  }
  return {symbolic, elements};
}

// Whether `buf` outgrows every argument of the program (a pair matrix [N, N] of [N, 3] points):
// only such temporaries have all their loads fused at once (fuse_one), as then memory grows
// faster than the program's own data; a smaller one stays stored where its consumers would
// otherwise split into more kernels.
bool outgrows_arguments(const Program& p, const Node* buf) {
  const auto b = size_class(buf->shape);
  for (const Node* n = p.root()->first_child; n; n = n->next)
    if (n->op == Op::input && !(size_class(n->shape) < b)) return false;
  return true;
}

// Fuses `load` if legal and cheap; the loads of the recomputation are appended to `new_loads`.
// `dry_run`: only says whether it would. `sole`: judged as if the buffer's store went away with
// this fusion (its other loads are being fused too), so nothing the producer does is duplicated.
// When the work the producer would still do for the buffer's other loads (a reduction's loop, an
// earlier recomputation) is what stops a fusion, the buffer outgrows every argument, and every
// other load of it would fuse on its own as the sole one, this load fuses as the sole one: then
// all of them do, one after the other, and the producer and its buffer go (a full sum and a
// gradient that both read an [N, N] temporary of [N, 3] points).
bool fuse_one(Program& p, DependenceAnalysis& dep, Node* load, Positions& pos, BufferUses& counts,
              std::vector<char>& copies, ConeMarks& marks, std::vector<Node*>& new_loads, bool dry_run = false,
              bool sole = false) {
  Node* buf = load->operand(0);
  Node* st = counts.identity_store(buf);
  if (!st) return false;
  Node* k1 = st->parent;
  if (!k1->group.empty()) return false;  // its values may depend on barriers and group buffers
  Node* k2 = load->enclosing_kernel();
  if (!k2 || k2 == k1 || pos.at(k1) >= pos.at(load)) return false;
  Node* v = st->operand(1);
  // Only a producer about as cheap as the load itself (kCheapRecomputeCost) may be recomputed
  // when the consumer would evaluate it more than once per element, when an expensive producer
  // is read at several places by one consumer (a stencil's neighbours: it stays stored, and once
  // stored anyway its other consumers load it too), or when the consumer sits in a host loop
  // the producer is outside of (the divergence of a fluid step inside its Jacobi loop). These
  // do not depend on the cone, so they set its cost limit before it is built.
  // A consumer that evaluates each element `factor` times (a [B, 3, 32] product reading a
  // [B, 32] layer once per output: the layer's matmul three times over) may spend at most
  // kMaxRecomputeCost on all of them together.
  const int64_t factor = recompute_factor(load, buf->shape);
  bool cheap_only = factor == 0;
  if (!cheap_only) cheap_only = counts.repeated(buf);
  for (Node* s = k2->parent; s && !cheap_only; s = s->parent)
    if (s->op == Op::loop && !k1->inside(s)) cheap_only = true;
  const int64_t limit = cheap_only ? kCheapRecomputeCost : std::max(kCheapRecomputeCost, kMaxRecomputeCost / factor);
  Cone cone(k1, limit, copies, marks);
  if (!cone.add(v)) return false;
  // Recomputed work k1 keeps doing after the fusion: copies an earlier fusion made (a chain of
  // recomputations would grow), and a loop (a matmul's or a reduction's) that k1 runs anyway is
  // not run again per consumer: the consumer loads its result (a ReLU's mask beside the
  // activation it also stores).
  auto duplicates = [&](bool stays) {
    return duplicated_cost(cone, cone.copied, st, stays) > kCheapRecomputeCost ||
           duplicated_cost(cone, cone.looped, st, stays) > kMaxDuplicatedLoopCost;
  };
  const bool store_stays = counts.total(buf) > 1 && !sole;
  if (duplicates(store_stays)) {
    if (!store_stays || dry_run || counts.total(buf) > kMaxGroupLoads || duplicates(false) ||
        !outgrows_arguments(p, buf))
      return false;
    std::vector<Node*> others;
    for (Node* u : buf->users)
      if (u->op == Op::load && u != load) others.push_back(u);
    std::vector<Node*> none;
    for (Node* o : others)
      if (o->dead || o->flat || !o->enclosing_kernel() ||
          !fuse_one(p, dep, o, pos, counts, copies, marks, none, true, true))
        return false;
    return fuse_one(p, dep, load, pos, counts, copies, marks, new_loads, false, true);
  }
  if (cone.reads_memory(buf) || written_between(k1, load, cone.reads, pos)) return false;
  // Other threads of the consumer may write what the recomputation reads before it runs, unless
  // every such access is the thread's own element (an optimizer's update reading the parameter
  // it writes in place): then only the consumer's own thread writes it, after the load (a write
  // before it, or in a loop around it, is a write between, refused above).
  bool consumer_writes = false;
  for (const Node* m : cone.reads)
    for_each_writer(m, [&](Node* x) { consumer_writes = consumer_writes || x->inside(k2); });
  if (consumer_writes && !own_elements_only(dep, cone, load, k1, k2)) return false;
  // Everything the cone uses from outside k1 must be visible at the load.
  uint64_t& visits = node_visit_counter();
  for (Node* n : cone.keep)
    for (Node* o : n->operands) {
      ++visits;
      if (!o->inside(k1) && o->enclosing_kernel() != nullptr && o->enclosing_kernel() != k2) return false;
    }
  if (dry_run) return true;

  Builder b(p);
  b.set_insert_before(load);
  b.loc = load->loc;
  std::unordered_map<Node*, Node*> map;
  // k1's coordinates become the load's indices, brought into the buffer's range as the load's
  // mode says (the recomputed value must be the element the load would have read).
  std::vector<Node*> coords;
  for (int a = 0; a < buf->rank(); ++a) coords.push_back(in_mode_range(b, load, a, k2));
  b.set_insert_before(load);
  for (Node* x : cone.indices) map[x] = coords[static_cast<size_t>(x->axis)];
  if (v->op == Op::index) map[v] = coords[static_cast<size_t>(v->axis)];
  clone_nodes(b, k1, cone.keep, [&](const Node* n) { return cone.kept(n); }, map, load->shape);
  Node* value = map.count(v) ? map[v] : v;
  // The copies sit where the load was: they take its position (stores are never copied, so the
  // positions the legality checks compare stay exact).
  const int at = pos.at(load);
  for (Node* n : cone.keep) {
    Node* c = map.at(n);
    pos.set(c, at);
    if (static_cast<size_t>(c->id) >= copies.size()) copies.resize(static_cast<size_t>(c->id) * 2 + 1, 0);
    copies[static_cast<size_t>(c->id)] = 1;
    if (c->op == Op::load) {
      new_loads.push_back(c);
      counts.added(c);
    }
  }
  counts.removed(load);
  p.replace_all_uses(load, value);
  p.erase(load);
  return true;
}

bool fuse_loads_sweep(Program& p, bool check_one_sweep) {
  // Loads are tried in program order; the loads of a recomputation are tried right after the
  // load they replaced (where they now are). One sweep visits each load once, so node visits
  // grow linearly with the program, and a second sweep would fuse nothing (EMBER_VERIFY checks
  // it: fuse_loads_checking_one_sweep): what a failed attempt depends on is either the
  // load's own (its consumer's loops, writes and operands; its reading factor; the stores and
  // positions, which no fusion changes) or the producer kernel's cone and its buffer's loads.
  // The producer precedes the load, so every fusion into it was made before the load was tried;
  // a later load of the same buffer meets the same cone, the same buffer-wide limits and the
  // same duplicated cost, so it fuses (changing the buffer's loads) only where this one would.
  auto candidate = [](const Node* n) {
    return n->op == Op::load && !n->dead && !n->flat && n->operand(0)->op == Op::buffer && n->enclosing_kernel();
  };
  bool changed = false;
  std::vector<char> copies;  // by node id: made by a fusion of this pass
  ConeMarks marks;           // the cone being built
  DependenceAnalysis dep;
  BufferUses counts;  // kept up to date by every fusion
  // The positions and the loads come from one walk; a copy takes the position of the load it
  // replaces (nothing else this pass makes is asked for one), so the positions stay exact.
  std::vector<Node*> work;  // a stack: the next load is at the back
  Positions pos = program_positions(p, [&](Node* n) {
    if (candidate(n)) work.push_back(n);
  });
  std::reverse(work.begin(), work.end());
  std::vector<Node*> fresh, unfused;
  while (!work.empty()) {
    Node* l = work.back();
    work.pop_back();
    if (!candidate(l)) continue;
    fresh.clear();
    if (!fuse_one(p, dep, l, pos, counts, copies, marks, fresh)) {
      if (check_one_sweep) unfused.push_back(l);
      continue;
    }
    changed = true;
    // Copies are made in program order, so ids order them: the first is tried first.
    std::sort(fresh.begin(), fresh.end(), [](const Node* a, const Node* b) { return a->id > b->id; });
    for (Node* f : fresh)
      if (candidate(f)) work.push_back(f);
  }
  // check_one_sweep (EMBER_VERIFY): each load the sweep left, tried again in order with the
  // sweep's state, fuses no more. (A new run of the pass may: it does not know what this one
  // copied, which the duplicated-cost limit counts.)
  for (Node* l : unfused) {
    if (!candidate(l)) continue;
    fresh.clear();
    EMBER_INTERNAL_ASSERT(!fuse_one(p, dep, l, pos, counts, copies, marks, fresh),
                          "fuse_loads fused load %" << l->id << " on a second sweep: one sweep was not enough");
  }
  return changed;
}

}  // namespace

bool fuse_loads(Program& p) { return fuse_loads_sweep(p, false); }

bool fuse_loads_checking_one_sweep(Program& p) { return fuse_loads_sweep(p, true); }

}  // namespace ember

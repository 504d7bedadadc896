#include "core/analysis/dependence.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_set>
#include <utility>

#include "core/analysis/isl_ptr.h"
#include "core/ir/shape.h"

namespace ember {

namespace {

// At most this many pairs per within_thread query go to isl; beyond it the answer is "dependent"
// (compile time stays bounded on programs with thousands of accesses to one memory).
constexpr int kMaxIslPairs = 256;
// At most this many nodes of one access's index expressions are turned into isl expressions.
constexpr int kMaxExprNodes = 256;

bool is_access(const Node* n) { return n->op == Op::load || n->op == Op::store || n->op == Op::atomic; }

// Whether x is coordinate `axis` of a thread of `shape`.
bool is_coordinate(const Node* x, const std::vector<Node*>& shape, int axis) {
  return x->op == Op::index && x->axis == axis && axis < static_cast<int>(shape.size()) && same_shape(x->shape, shape);
}

// Whether scope p runs per thread (inside a kernel, or a shaped scope before fusion).
bool device_scope(const Node* p) { return !p->shape.empty() || p->enclosing_kernel() != nullptr; }

// A host scalar: one value for every thread of a dispatch (an isl parameter).
bool host_scalar(const Node* x) {
  if (!x->shape.empty() || x->op == Op::var || x->is_memory() || x->dtype != DType::i32) return false;
  if (x->op == Op::index || x->op == Op::local_index || x->op == Op::group_index) return false;
  for (const Node* p = x->parent; p; p = p->parent)
    if (p->op == Op::kernel || !p->shape.empty()) return false;
  return true;
}

// The loops around n inside its thread scope, outermost first.
std::vector<const Node*> enclosing_loops(const Node* n) {
  std::vector<const Node*> loops;
  for (const Node* p = n->parent; p && p->op != Op::kernel && p->op != Op::program && device_scope(p); p = p->parent)
    if (p->op == Op::loop) loops.insert(loops.begin(), p);
  return loops;
}

// Whether access x touches only the row of its thread: the first `lead` indices are the thread's
// coordinates on the memory's leading dims (equal to the thread shape's), and the others cannot
// leave the row (not unsafe). Syntax only; isl decides the rest.
bool own_row(const MemAccess& x, const std::vector<Node*>& shape, int lead) {
  // A var made inside a kernel or shaped scope is each thread's own, whatever its shape.
  if (x.own && x.memory->op == Op::var && x.memory->parent && device_scope(x.memory->parent)) return true;
  if (x.own) {
    if (x.memory->rank() < lead) return false;
    for (int a = 0; a < lead; ++a)
      if (!same_dim(x.memory->shape[static_cast<size_t>(a)], shape[static_cast<size_t>(a)])) return false;
    return true;
  }
  const Node* n = x.node;
  if (!is_access(n) || n->flat) return false;
  const Node* mem = n->operand(0);
  if (mem->rank() < lead || (mem->rank() > lead && n->mode == IndexMode::unsafe)) return false;
  for (int a = 0; a < lead; ++a) {
    const Node* d = mem->shape[static_cast<size_t>(a)];
    if (!same_dim(d, shape[static_cast<size_t>(a)])) return false;
    const Node* ix = n->operand(n->first_index_operand() + a);
    bool unit_axis = const_dim(d) == 1 && ix->op == Op::constant && ix->i() == 0;
    if (!unit_axis && !is_coordinate(ix, shape, a)) return false;
  }
  return true;
}

// Whether index ix is `coordinate axis + c` of a thread of `shape` (c may be 0 or negative).
bool coordinate_offset(const Node* ix, const std::vector<Node*>& shape, int axis, long* c) {
  if (is_coordinate(ix, shape, axis)) {
    *c = 0;
    return true;
  }
  if ((ix->op != Op::add && ix->op != Op::sub) || ix->dtype != DType::i32) return false;
  const Node* k = ix->operand(1);
  const Node* v = ix->operand(0);
  if (ix->op == Op::add && v->op == Op::constant) std::swap(k, v);
  if (k->op != Op::constant || !is_coordinate(v, shape, axis)) return false;
  *c = ix->op == Op::add ? k->i() : -static_cast<long>(k->i());
  return true;
}

// A cheap, conservative "crosses threads": x and y index a leading axis as the coordinate plus
// different constants (a stencil's neighbour U[i + 1] against U[i]), so threads t and t + 1 meet
// once the axis is long enough. Answering "dependent" without isl only loses a fusion of
// kernels too short to need it.
bool offsets_differ(const MemAccess& x, const std::vector<Node*>& xs, const MemAccess& y,
                    const std::vector<Node*>& ys, int lead) {
  for (const MemAccess* m : {&x, &y})
    if (m->own || !is_access(m->node) || m->node->flat || m->memory->rank() < lead) return false;
  for (int a = 0; a < lead; ++a) {
    long cx = 0, cy = 0;
    if (!coordinate_offset(x.node->operand(x.node->first_index_operand() + a), xs, a, &cx)) continue;
    if (!coordinate_offset(y.node->operand(y.node->first_index_operand() + a), ys, a, &cy)) continue;
    if (cx != cy) return true;
  }
  return false;
}

// The thread axes (a bit each, in *axes) that index expression x of an access in a thread of
// `shape` may depend on, where x is built only from what the isl model turns into exact
// expressions (constants, the thread's coordinates, counters of loops inside the thread, host
// scalars, and + - neg, * by a constant, // and % by a positive constant, min, max): then the
// element is a function of the coordinates it names, the counters and the host values. False
// where x reads anything else (a load, a var, a cast, ...). Syntax only: no isl.
bool index_axes(const Node* x, const std::vector<Node*>& shape, const std::vector<const Node*>& loops, uint64_t* axes,
                int* budget) {
  if (--*budget < 0 || x->dtype != DType::i32) return false;
  auto const_operand = [&](int i) {
    const Node* o = x->operand(i);
    return o->op == Op::constant && o->dtype == DType::i32;
  };
  switch (x->op) {
    case Op::constant: return true;
    case Op::index:
      if (!is_coordinate(x, shape, x->axis) || x->axis >= 64) return false;
      *axes |= uint64_t{1} << x->axis;
      return true;
    case Op::loop:  // a counter of a loop around the access inside the thread, or a host loop's
      return std::find(loops.begin(), loops.end(), x) != loops.end() || host_scalar(x);
    case Op::add: case Op::sub: case Op::min: case Op::max: {
      uint64_t a = 0;
      if (index_axes(x->operand(0), shape, loops, &a, budget) && index_axes(x->operand(1), shape, loops, &a, budget)) {
        *axes |= a;
        return true;
      }
      return host_scalar(x);
    }
    case Op::neg: return index_axes(x->operand(0), shape, loops, axes, budget);
    case Op::mul:
      if (const_operand(0) || const_operand(1)) {
        uint64_t a = 0;
        if (index_axes(x->operand(const_operand(0) ? 1 : 0), shape, loops, &a, budget)) {
          *axes |= a;
          return true;
        }
      }
      return host_scalar(x);
    case Op::div: case Op::mod:
      if (const_operand(1) && x->operand(1)->i() > 0) {
        uint64_t a = 0;
        if (index_axes(x->operand(0), shape, loops, &a, budget)) {
          *axes |= a;
          return true;
        }
      }
      return host_scalar(x);
    default: return host_scalar(x);
  }
}

bool reads(const MemAccess& x) {
  return x.kind == AccessKind::read || (x.kind == AccessKind::write && x.node->op == Op::atomic);
}
bool writes(const MemAccess& x) { return x.kind != AccessKind::read; }

// Whether access x of a group of `shape` writes every element of its memory in each dispatch:
// the memory is shaped like the threads, each index is the thread's coordinate (or 0 on an axis
// of size 1), and no loop of the thread repeats or skips it.
bool covers_memory(const MemAccess& x, const std::vector<Node*>& shape) {
  if (x.own || !writes(x) || !is_access(x.node) || x.node->flat) return false;
  const int rank = static_cast<int>(shape.size());
  if (x.memory->rank() != rank || !enclosing_loops(x.node).empty()) return false;
  for (const Node* d : shape)
    if (const_dim(d) == 0) return false;
  return own_row(x, shape, rank);
}

// Whether access y of a group of `shape` runs at least once per dispatch in the model: a plain
// access in no loop of its thread, over threads that may exist.
bool runs_in_model(const MemAccess& y, const std::vector<Node*>& shape) {
  if (y.own || !is_access(y.node) || !enclosing_loops(y.node).empty()) return false;
  for (const Node* d : shape)
    if (const_dim(d) == 0) return false;
  return true;
}

// Whether host loop `loop` may run two iterations as the model sees it (the stride is dropped,
// bounds that are not constants may take any value).
bool may_repeat(const Node* loop) {
  const Node *b = loop->operand(0), *e = loop->operand(1), *st = loop->operand(2);
  if (b->op != Op::constant || e->op != Op::constant || st->op != Op::constant || st->i() == 0) return true;
  const long trips_span = st->i() > 0 ? static_cast<long>(e->i()) - b->i() : static_cast<long>(b->i()) - e->i();
  return trips_span >= 2;
}

enum class Syntax : uint8_t { yes, no, open };

// injective_on by syntax, for an access that is not unsafe (clamp and wrap keep every index in
// its axis, so two instances touch one element exactly when all their indices are equal):
// - yes: each axis in `axes` is the whole index of some memory axis, in range (the coordinate on
//   an axis at least as long; under wrap also plus a constant on an axis as long: a rotation);
// - no (for an access in no loop of its thread): some axis a in `axes` of possibly two or more
//   threads collides: no index the model reads exactly names a; or the indices are all exact
//   and a reaches only memory axes whose constant sizes multiply to fewer than its constant
//   size (pigeonhole), or its only index is clamp(a + c), c != 0, on an axis as long (the last
//   |c| + 1 threads clamp to one element; for some size, as isl's parameters are existential);
// - open: isl decides.
Syntax injective_by_syntax(const Node* n, const std::vector<Node*>& shape, uint64_t axes) {
  const Node* mem = n->operand(0);
  const int rank = static_cast<int>(shape.size());
  const std::vector<const Node*> loops = enclosing_loops(n);
  uint64_t pinned = 0;
  std::vector<uint64_t> named(static_cast<size_t>(mem->rank()), 0);
  uint64_t any_named = 0;  // the axes some exact index names
  bool exact = true;
  for (int d = 0; d < mem->rank(); ++d) {
    const Node* ix = n->operand(n->first_index_operand() + d);
    const Node* md = mem->shape[static_cast<size_t>(d)];
    for (int a = 0; a < rank && a < 64; ++a) {
      const Node* td = shape[static_cast<size_t>(a)];
      const bool as_long = same_dim(md, td) || (const_dim(md) >= 0 && const_dim(td) >= 0 && const_dim(td) <= const_dim(md));
      long c = 0;
      if ((is_coordinate(ix, shape, a) && as_long) ||
          (n->mode == IndexMode::wrap && same_dim(md, td) && coordinate_offset(ix, shape, a, &c)))
        pinned |= uint64_t{1} << a;
    }
    int budget = kMaxExprNodes;
    uint64_t ax = 0;
    if (index_axes(ix, shape, loops, &ax, &budget)) {
      named[static_cast<size_t>(d)] = ax;
      any_named |= ax;
    } else {
      exact = false;
    }
  }
  if ((axes & ~pinned) == 0) return Syntax::yes;
  if (!loops.empty()) return Syntax::open;  // counters whose bounds depend on a thread axis: isl
  for (int a = 0; a < rank && a < 64; ++a) {
    if (!(axes >> a & 1)) continue;
    const Node* td = shape[static_cast<size_t>(a)];
    // No exact index names a: the model's indices do not tell two values of a apart (an index
    // it over-approximates may be any element), so threads that differ only in a meet.
    if (!(any_named >> a & 1) && const_dim(td) != 1 && const_dim(td) != 0) return Syntax::no;
    if (!exact) continue;
    int64_t reach = 1;  // product of the constant sizes of the memory axes a reaches
    int only = -1, count = 0;
    for (int d = 0; d < mem->rank() && reach >= 0; ++d) {
      if (!(named[static_cast<size_t>(d)] >> a & 1)) continue;
      ++count;
      only = d;
      const int64_t m = const_dim(mem->shape[static_cast<size_t>(d)]);
      reach = m < 0 || m > (int64_t{1} << 40) ? -1 : reach * m;
    }
    if (const_dim(td) >= 2 && reach >= 0 && reach < const_dim(td)) return Syntax::no;
    long c = 0;
    if (count == 1 && n->mode == IndexMode::clamp && same_dim(mem->shape[static_cast<size_t>(only)], td) &&
        coordinate_offset(n->operand(n->first_index_operand() + only), shape, a, &c) && c != 0 &&
        (const_dim(td) < 0 || const_dim(td) >= std::abs(c) + 1))
      return Syntax::no;
  }
  return Syntax::open;
}


// ---- "Crosses" by a witness, without isl ------------------------------------------------------
// For a pair whose indices are each a thread coordinate in range (C), a constant in range (K), or
// an expression the model over-approximates as any element of its axis (A), an explicit instance
// pair shows that they meet at different threads; isl would find the same pair (the model only
// adds instances), so the answer is identical, only cheaper (a gather along an axis against a
// write of one element, a sort whose indices are shifts).

// Whether the value of host expression d can be made as large as wanted by choosing parameters
// (a parameter, or + - * // of such with positive constants): every bound the witness needs of
// the parameters is a lower bound, so all of them hold at once for large enough parameters.
bool unbounded_above(const Node* d, int depth = 0) {
  if (depth > 8 || d->dtype != DType::i32 || !host_scalar(d)) return false;
  auto pos_const = [](const Node* o) { return o->op == Op::constant && o->dtype == DType::i32 && o->i() > 0; };
  switch (d->op) {
    case Op::constant: case Op::sub: case Op::neg: case Op::mod: case Op::min: case Op::max: case Op::index:
      return false;
    case Op::add:
      return (unbounded_above(d->operand(0), depth + 1) && (d->operand(1)->op == Op::constant || unbounded_above(d->operand(1), depth + 1))) ||
             (d->operand(0)->op == Op::constant && unbounded_above(d->operand(1), depth + 1));
    case Op::mul:
      return (pos_const(d->operand(0)) && unbounded_above(d->operand(1), depth + 1)) ||
             (pos_const(d->operand(1)) && unbounded_above(d->operand(0), depth + 1));
    case Op::div:
      return pos_const(d->operand(1)) && unbounded_above(d->operand(0), depth + 1);
    default:  // any other host value is a free parameter of the model (a host loop's counter too:
      return true;  // within_thread carries none)
  }
}

// Whether dim d may be at least k (a constant, or unbounded above).
bool may_be_at_least(const Node* d, long k) {
  const int64_t c = const_dim(d);
  return c >= 0 ? c >= k : unbounded_above(d);
}

// The value of bound b at the witness (constants and counters of the loops already given a
// value), or false.
bool witness_value(const Node* b, const std::vector<const Node*>& loops, const std::vector<long>& at, long* v) {
  if (b->op == Op::constant && b->dtype == DType::i32) {
    *v = b->i();
    return true;
  }
  for (size_t j = 0; j < at.size(); ++j)
    if (loops[j] == b) {
      *v = at[j];
      return true;
    }
  return false;
}

// Whether access m's loops (inside its thread) all run at least once with each counter at its
// first value, given that every parameter may be large.
bool loops_run_once(const MemAccess& m) {
  const std::vector<const Node*> loops = enclosing_loops(m.node);
  std::vector<long> at;
  for (const Node* l : loops) {
    const Node* st = l->operand(2);
    if (st->op != Op::constant || st->i() == 0) return false;
    long b = 0, e = 0;
    if (!witness_value(l->operand(0), loops, at, &b)) {
      // A downward loop from a large begin to a known end: the counter at end + 1.
      if (!(st->i() < 0 && unbounded_above(l->operand(0)) && witness_value(l->operand(1), loops, at, &e))) return false;
      at.push_back(e + 1);
      continue;
    }
    if (witness_value(l->operand(1), loops, at, &e)) {
      if (st->i() > 0 ? !(b < e) : !(e < b)) return false;
    } else if (!(st->i() > 0 && unbounded_above(l->operand(1)))) {
      return false;
    }
    at.push_back(b);
  }
  return true;
}

// Index a of access m as the witness reads it: 'c' the coordinate *axis in range, 'k' the
// constant *axis in range, 'l' the counter of a loop around m (inside its thread) from 0 by 1
// that may reach *which (0 or 1) and bounds no other loop there, 'a' any element (not an
// expression the model makes exact), 0 other.
char index_form(const MemAccess& m, const std::vector<Node*>& shape, int a, long* which) {
  const Node* md = m.memory->shape[static_cast<size_t>(a)];
  if (m.own) {  // a value fusion would store: the thread's element where the dims agree, else any
    if (a < static_cast<int>(shape.size()) && same_dim(md, shape[static_cast<size_t>(a)])) {
      *which = a;
      return 'c';
    }
    return 'a';
  }
  const Node* n = m.node;
  const Node* ix = n->operand(n->first_index_operand() + a);
  if (ix->op == Op::index && is_coordinate(ix, shape, ix->axis)) {
    const Node* td = shape[static_cast<size_t>(ix->axis)];
    *which = ix->axis;
    return same_dim(md, td) || (const_dim(md) >= 0 && const_dim(td) >= 0 && const_dim(td) <= const_dim(md)) ? 'c' : 0;
  }
  if (ix->op == Op::constant && ix->dtype == DType::i32) {
    *which = ix->i();
    return ix->i() >= 0 && const_dim(md) > ix->i() ? 'k' : 0;
  }
  if (ix->op == Op::loop) {
    const std::vector<const Node*> loops = enclosing_loops(n);
    if (std::find(loops.begin(), loops.end(), ix) == loops.end()) return 0;
    const Node* b = ix->operand(0);
    const Node* e = ix->operand(1);
    const Node* st = ix->operand(2);
    if (b->op != Op::constant || b->i() != 0 || st->op != Op::constant || st->i() != 1) return 0;
    for (const Node* l : loops)
      for (const Node* o : l->operands)
        if (o == ix) return 0;
    if (e->op == Op::constant && e->dtype == DType::i32) *which = e->i() >= 2 ? 1 : 0;
    else if (unbounded_above(e)) *which = 1;
    else return 0;
    return 'l';
  }
  uint64_t axes = 0;
  int budget = 64;  // small expressions only: the model's own budget is not in question
  if (index_axes(ix, shape, enclosing_loops(n), &axes, &budget) || budget < 0) return 0;
  return 'a';
}

// Whether x (group of shape xs) and y (shape ys) provably meet at threads that differ in a lead
// coordinate, by the witness above.
bool crosses_by_witness(const MemAccess& x, const std::vector<Node*>& xs, const MemAccess& y,
                        const std::vector<Node*>& ys, int lead) {
  for (const MemAccess* m : {&x, &y}) {
    if (m->memory != x.memory) return false;
    if (!m->own && (!is_access(m->node) || m->node->flat)) return false;
  }
  const Node* mem = x.memory;
  for (const std::vector<Node*>* sh : {&xs, &ys})
    for (const Node* d : *sh)
      if (!may_be_at_least(d, 1)) return false;
  if (!loops_run_once(x) || !loops_run_once(y)) return false;
  std::vector<char> fx(static_cast<size_t>(mem->rank())), fy(fx.size());
  std::vector<long> wx(fx.size()), wy(fx.size());
  for (int a = 0; a < mem->rank(); ++a) {
    fx[static_cast<size_t>(a)] = index_form(x, xs, a, &wx[static_cast<size_t>(a)]);
    fy[static_cast<size_t>(a)] = index_form(y, ys, a, &wy[static_cast<size_t>(a)]);
    if (!fx[static_cast<size_t>(a)] || !fy[static_cast<size_t>(a)]) return false;
    if (fx[static_cast<size_t>(a)] == 'a' && fy[static_cast<size_t>(a)] == 'a' &&
        !may_be_at_least(mem->shape[static_cast<size_t>(a)], 1))
      return false;
  }
  // A counter indexes one axis at most (its value is chosen per axis below).
  for (const MemAccess* m : {&x, &y}) {
    const std::vector<char>& f = m == &x ? fx : fy;
    for (size_t a = 0; a < f.size(); ++a)
      for (size_t b = a + 1; b < f.size() && f[a] == 'l'; ++b)
        if (f[b] == 'l' && m->node->operand(m->node->first_index_operand() + static_cast<int>(a)) ==
                               m->node->operand(m->node->first_index_operand() + static_cast<int>(b)))
          return false;
  }
  // The two threads: one side's coordinates all 0, the other side's 0 but coordinate d, which is
  // 1; counters at their first values, but a counter indexing the memory takes the value the
  // other side's index has there (0, or 1 where its loop may reach it).
  for (int d = 0; d < lead && d < static_cast<int>(xs.size()) && d < static_cast<int>(ys.size()); ++d) {
    for (int one = 0; one < 2; ++one) {  // one: 0 x's thread has the 1, 1 y's
      if (!may_be_at_least((one == 0 ? xs : ys)[static_cast<size_t>(d)], 2)) continue;
      bool ok = true;
      for (int a = 0; a < mem->rank() && ok; ++a) {
        const size_t i = static_cast<size_t>(a);
        const char f[2] = {fx[i], fy[i]};
        const long w[2] = {wx[i], wy[i]};
        if (f[0] == 'a' || f[1] == 'a') continue;
        long v[2] = {0, 0};  // each side's index value; a counter's is its reach
        for (int s = 0; s < 2; ++s) v[s] = f[s] == 'c' ? (s == one && w[s] == d ? 1 : 0) : w[s];
        if (f[0] == 'l' && f[1] == 'l') continue;  // both at 0
        if (f[0] == 'l') ok = v[1] <= v[0];
        else if (f[1] == 'l') ok = v[0] <= v[1];
        else ok = v[0] == v[1];
      }
      if (ok) return true;
    }
  }
  return false;
}

// Whether accesses x and y of one memory are ordered by a dependence of the kind asked for.
bool dependent_kinds(const MemAccess& x, const MemAccess& y, DepPairs pairs) {
  if (pairs == DepPairs::flow_anti) return (writes(x) && reads(y)) || (writes(y) && reads(x));
  if (!writes(x) && !writes(y)) return false;
  if (x.kind == AccessKind::update && y.kind == AccessKind::update)
    return x.node->kind != y.node->kind || static_cast<AtomicKind>(x.node->kind) == AtomicKind::exchange;
  return true;
}

// EMBER_VERIFY=1 (tests, the fuzzer): relations built from affine constraints are checked
// against the piecewise builder's.
bool verify_builders() {
  static const bool on = [] {
    const char* v = std::getenv("EMBER_VERIFY");
    return v && *v && *v != '0';
  }();
  return on;
}

// EMBER_DEPENDENCE=syntactic: no isl (pairs the syntactic rule leaves open are dependent).
bool syntactic_only() {
  static const bool on = [] {
    const char* e = std::getenv("EMBER_DEPENDENCE");
    return e && std::strcmp(e, "syntactic") == 0;
  }();
  return on;
}

// Adds one query's time and pair counts to dependence_totals().
class QueryTimer {
 public:
  explicit QueryTimer(const DependenceStats& s) : s_(s), start_(s), t0_(std::chrono::steady_clock::now()) {}
  ~QueryTimer() {
    DependenceTotals& t = dependence_totals();
    ++t.queries;
    t.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
    t.pairs.pairs += s_.pairs - start_.pairs;
    t.pairs.fast += s_.fast - start_.fast;
    t.pairs.isl += s_.isl - start_.isl;
    t.pairs.too_many += s_.too_many - start_.too_many;
  }

 private:
  const DependenceStats& s_;
  DependenceStats start_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

DependenceTotals& dependence_totals() {
  static thread_local DependenceTotals t;
  return t;
}

bool at_own_element(const Node* n, const Node* k) {
  const Node* mem = n->operand(0);
  if (n->flat || !same_shape(mem->shape, k->shape)) return false;
  for (int a = 0; a < mem->rank(); ++a) {
    const Node* ix = n->operand(n->first_index_operand() + a);
    bool unit_axis = const_dim(mem->shape[static_cast<size_t>(a)]) == 1 && ix->op == Op::constant && ix->i() == 0;
    if (!unit_axis && (ix->op != Op::index || ix->axis != a)) return false;
  }
  return true;
}

// ---- Access groups --------------------------------------------------------------------------

AccessGroup::AccessGroup(const std::vector<Node*>& shape, int lead) : shape_(shape), lead_(lead) {}

void AccessGroup::add_access(const MemAccess& a) {
  MemoryAccesses& m = by_memory_[a.memory];
  m.all.push_back(a);
  m.writes += a.kind != AccessKind::read;
}

void AccessGroup::add(Node* root) {
  uint64_t& visits = node_visit_counter();
  std::function<void(Node*)> visit = [&](Node* x) {
    ++visits;
    if (x->op == Op::load) {
      add_access({x, x->operand(0), AccessKind::read});
    } else if (x->op == Op::store) {
      add_access({x, x->operand(0), AccessKind::write});
    } else if (x->op == Op::atomic) {
      add_access({x, x->operand(0), x->users.empty() ? AccessKind::update : AccessKind::write});
    } else if (x->op == Op::move_memory) {
      add_access({x, x->operand(0), AccessKind::write});
      add_access({x, x->operand(1), AccessKind::read});
    } else if (x->op == Op::var) {
      add_access({x, x, AccessKind::write, true});  // its initialization
    }
    // A var used as a value is read at the thread's element; set writes it there.
    for (size_t i = 0; i < x->operands.size(); ++i) {
      Node* o = x->operands[i];
      if (o->op != Op::var) continue;
      if (i == 0 && x->op == Op::load) continue;
      if (i == 0 && x->op == Op::set) {
        add_access({x, o, AccessKind::write, true});
        continue;
      }
      add_access({x, o, AccessKind::read, true});
    }
    for (Node* c = x->first_child; c; c = c->next) visit(c);
  };
  visit(root);
}

// ---- isl access relations -----------------------------------------------------------------------

struct DependenceAnalysis::Impl {
  IslCtx ctx;

  // The relation from an access's iteration space S[thread coordinates, loop counters] to the
  // memory's index space M[...]; empty when isl failed (the caller then assumes dependence).
  // `carried`: a host loop around the access whose counter is the first loop dimension (after
  // the thread's coordinates) instead of a parameter; host values computed inside it that are not
  // affine in its counter are unknown (they may differ between iterations).
  Isl<isl_map> access_map(const MemAccess& x, const std::vector<Node*>& shape, Isl<isl_set>* domain_out = nullptr,
                          const Node* carried = nullptr);

  // access_map, kept for the life of this analysis (one pass run) under a key that spells out
  // everything access_map reads (the index expressions node by node, the modes, the memory's
  // dims, the thread shape, the loops around the access and their bounds, `carried`): an access
  // the pass has since edited gets a new key, and accesses with equal keys share one relation.
  const Isl<isl_map>& cached_map(const MemAccess& x, const std::vector<Node*>& shape, const Node* carried = nullptr);
  // access_map built from affine constraints (basic sets of isl_aff equalities and bounds), when
  // every expression it needs is affine without pieces (no min/max) and every index is known in
  // range by syntax; null otherwise (access_map then builds it with piecewise expressions).
  Isl<isl_map> affine_access_map(const MemAccess& x, const std::vector<Node*>& shape, const Node* carried);
  // Whether instances of x (thread shape xs) and y (ys) touch one element from threads that differ
  // in one of the first `lead` coordinates: 'y' yes, 'n' no, '?' isl could not tell.
  char crosses(const MemAccess& x, const std::vector<Node*>& xs, const MemAccess& y, const std::vector<Node*>& ys,
               int lead);
  long built = 0, reused = 0;

 private:
  std::unordered_map<std::string, Isl<isl_map>> maps_;
  // Builds expressions on the set space [S dims..., M dims...] of one access.
  struct Env {
    Isl<isl_space> space;
    const std::vector<Node*>* shape;
    std::vector<const Node*> loops;
    const Node* carried = nullptr;
    std::unordered_map<const Node*, Isl<isl_pw_aff>> memo;
    int budget = kMaxExprNodes;
  };
  Isl<isl_pw_aff> expr(Env& env, const Node* x);
  Isl<isl_pw_aff> var(Env& env, int pos) {
    return Isl<isl_pw_aff>(isl_pw_aff_var_on_domain(isl_local_space_from_space(env.space.copy()), isl_dim_set, pos));
  }
  Isl<isl_pw_aff> constant(Env& env, long v) {
    return Isl<isl_pw_aff>(isl_pw_aff_val_on_domain(isl_set_universe(env.space.copy()), isl_val_int_from_si(ctx.get(), v)));
  }
};

Isl<isl_pw_aff> DependenceAnalysis::Impl::expr(Env& env, const Node* x) {
  auto it = env.memo.find(x);
  if (it != env.memo.end()) return it->second;
  if (--env.budget < 0) return {};
  Isl<isl_pw_aff> r;
  const int rank = static_cast<int>(env.shape->size());
  auto operand = [&](int i) { return expr(env, x->operand(i)); };
  auto const_operand = [&](int i, long* v) {
    const Node* o = x->operand(i);
    if (o->op != Op::constant || o->dtype != DType::i32) return false;
    *v = o->i();
    return true;
  };
  // A host value: a parameter named after the node (the same node is the same value on both
  // sides of a query: both run after it, in one iteration of any host loop around them).
  auto param = [&] {
    if (env.carried && x->inside(env.carried)) return Isl<isl_pw_aff>();  // differs between iterations
    std::string name = "p" + std::to_string(x->id);
    isl_id* id = isl_id_alloc(ctx.get(), name.c_str(), const_cast<Node*>(x));
    isl_space* sp = isl_space_add_param_id(env.space.copy(), isl_id_copy(id));
    return Isl<isl_pw_aff>(isl_pw_aff_from_aff(isl_aff_param_on_domain_space_id(sp, id)));
  };
  long c = 0;
  if (x->dtype != DType::i32) {
    // not an index expression
  } else if (x->op == Op::constant) {
    r = constant(env, x->i());
  } else if (x->op == Op::index && is_coordinate(x, *env.shape, x->axis)) {
    r = var(env, x->axis);
  } else if (x->op == Op::loop) {
    for (size_t j = 0; j < env.loops.size(); ++j)
      if (env.loops[j] == x) r = var(env, rank + static_cast<int>(j));
    if (!r && host_scalar(x)) r = param();
  } else if (x->op == Op::add || x->op == Op::sub || x->op == Op::min || x->op == Op::max) {
    Isl<isl_pw_aff> a = operand(0), b = operand(1);
    if (a && b) {
      auto f = x->op == Op::add ? isl_pw_aff_add : x->op == Op::sub ? isl_pw_aff_sub
             : x->op == Op::min ? isl_pw_aff_min : isl_pw_aff_max;
      r = Isl<isl_pw_aff>(f(a.take(), b.take()));
    } else if (host_scalar(x)) {
      r = param();
    }
  } else if (x->op == Op::neg) {
    Isl<isl_pw_aff> a = operand(0);
    if (a) r = Isl<isl_pw_aff>(isl_pw_aff_neg(a.take()));
  } else if (x->op == Op::mul && (const_operand(0, &c) || const_operand(1, &c))) {
    Isl<isl_pw_aff> a = operand(x->operand(0)->op == Op::constant ? 1 : 0);
    if (a) r = Isl<isl_pw_aff>(isl_pw_aff_scale_val(a.take(), isl_val_int_from_si(ctx.get(), c)));
    else if (host_scalar(x)) r = param();
  } else if ((x->op == Op::div || x->op == Op::mod) && const_operand(1, &c) && c > 0) {
    // Ember's integer / and % round toward -inf (core/ir/eval.cpp), as isl's floor and mod.
    Isl<isl_pw_aff> a = operand(0);
    Isl<isl_val> v(isl_val_int_from_si(ctx.get(), c));
    if (a && x->op == Op::div) r = Isl<isl_pw_aff>(isl_pw_aff_floor(isl_pw_aff_scale_down_val(a.take(), v.take())));
    else if (a) r = Isl<isl_pw_aff>(isl_pw_aff_mod_val(a.take(), v.take()));
    else if (host_scalar(x)) r = param();
  } else if (host_scalar(x)) {
    r = param();
  }
  env.memo[x] = r;
  return r;
}

namespace {

// An access relation S -> M from a set over [S dims..., M dims...] (the builders' working space):
// the last `mrank` dims become the memory's.
Isl<isl_map> set_to_access(isl_set* acc, int sdims, int mrank) {
  isl_map* m = isl_map_from_domain(acc);
  m = isl_map_move_dims(m, isl_dim_out, 0, isl_dim_in, static_cast<unsigned>(sdims), static_cast<unsigned>(mrank));
  m = isl_map_set_tuple_name(m, isl_dim_in, "S");
  m = isl_map_set_tuple_name(m, isl_dim_out, "M");
  return Isl<isl_map>(m);
}

}  // namespace

Isl<isl_map> DependenceAnalysis::Impl::access_map(const MemAccess& x, const std::vector<Node*>& shape,
                                                  Isl<isl_set>* domain_out, const Node* carried) {
  const Node* mem = x.memory;
  const int rank = static_cast<int>(shape.size());
  const int mrank = mem->rank();
  Env env;
  env.shape = &shape;
  env.loops = enclosing_loops(x.node);
  if (carried) {
    env.loops.insert(env.loops.begin(), carried);
    env.carried = carried;
  }
  const int loops = static_cast<int>(env.loops.size());
  const int sdims = rank + loops;
  env.space = Isl<isl_space>(isl_space_set_alloc(ctx.get(), 0, static_cast<unsigned>(sdims + mrank)));
  Isl<isl_set> dom(isl_set_universe(env.space.copy()));
  auto restrict = [&](isl_set* s) { dom = Isl<isl_set>(isl_set_intersect(dom.take(), s)); };
  auto zero = [&] { return constant(env, 0); };
  // Threads: 0 <= t < dim.
  for (int a = 0; a < rank; ++a) {
    restrict(isl_pw_aff_ge_set(var(env, a).take(), zero().take()));
    Isl<isl_pw_aff> d = expr(env, shape[static_cast<size_t>(a)]);
    if (d) restrict(isl_pw_aff_lt_set(var(env, a).take(), d.take()));
  }
  // Loops: b <= c < e for a positive constant step, e < c <= b for a negative one (the stride
  // itself is dropped: more counter values than run, an over-approximation).
  for (int j = 0; j < loops; ++j) {
    const Node* l = env.loops[static_cast<size_t>(j)];
    const Node* s = l->operand(2);
    if (s->op != Op::constant || s->i() == 0) continue;
    Isl<isl_pw_aff> b = expr(env, l->operand(0)), e = expr(env, l->operand(1));
    Isl<isl_pw_aff> c = var(env, rank + j);
    if (s->i() > 0) {
      if (b) restrict(isl_pw_aff_le_set(b.take(), c.copy()));
      if (e) restrict(isl_pw_aff_lt_set(c.copy(), e.take()));
    } else {
      if (b) restrict(isl_pw_aff_le_set(c.copy(), b.take()));
      if (e) restrict(isl_pw_aff_lt_set(e.take(), c.copy()));
    }
  }
  if (domain_out) *domain_out = dom;
  // Coordinates: e_a = the index (after its mode), or any element of the axis.
  const Node* n = x.node;
  const bool whole = !x.own && (!is_access(n) || n->flat);
  std::vector<Isl<isl_pw_aff>> coord(static_cast<size_t>(mrank));
  for (int a = 0; a < mrank && !whole; ++a) {
    if (x.own) {
      if (a < rank && same_dim(mem->shape[static_cast<size_t>(a)], shape[static_cast<size_t>(a)])) coord[a] = var(env, a);
      continue;
    }
    Isl<isl_pw_aff> f = expr(env, n->operand(n->first_index_operand() + a));
    Isl<isl_pw_aff> d = expr(env, mem->shape[static_cast<size_t>(a)]);
    if (!f || !d) {
      if (n->mode == IndexMode::unsafe) { coord.assign(coord.size(), Isl<isl_pw_aff>()); break; }
      continue;
    }
    // Only the iteration domain matters: pieces of min/max (a clamp written in the program) that
    // no iteration reaches are dropped, so relations stay small (their pieces multiply).
    f = Isl<isl_pw_aff>(isl_pw_aff_coalesce(isl_pw_aff_intersect_domain(f.take(), dom.copy())));
    if (!f) continue;
    if (n->mode == IndexMode::clamp) {
      Isl<isl_pw_aff> hi(isl_pw_aff_sub(d.copy(), constant(env, 1).take()));
      coord[a] = Isl<isl_pw_aff>(isl_pw_aff_coalesce(isl_pw_aff_min(isl_pw_aff_max(f.take(), zero().take()), hi.take())));
      continue;
    }
    // wrap and unsafe: the index itself where it is always in range.
    Isl<isl_set> in_range(isl_set_intersect(isl_pw_aff_ge_set(f.copy(), zero().take()), isl_pw_aff_lt_set(f.copy(), d.copy())));
    isl_bool ok = isl_set_is_subset(dom.get(), in_range.get());
    if (ok == isl_bool_true) {
      coord[a] = f;
    } else if (n->mode == IndexMode::wrap && d && isl_pw_aff_is_cst(d.get()) == isl_bool_true && const_dim(mem->shape[static_cast<size_t>(a)]) > 0) {
      coord[a] = Isl<isl_pw_aff>(isl_pw_aff_mod_val(f.take(), isl_val_int_from_si(ctx.get(), const_dim(mem->shape[static_cast<size_t>(a)]))));
    } else if (n->mode == IndexMode::unsafe) {
      coord.assign(coord.size(), Isl<isl_pw_aff>());  // may leave its row: anywhere in the memory
      break;
    }
  }
  Isl<isl_set> acc = dom;
  for (int a = 0; a < mrank; ++a) {
    Isl<isl_pw_aff> e = var(env, sdims + a);
    if (coord[static_cast<size_t>(a)]) {
      acc = Isl<isl_set>(isl_set_intersect(acc.take(), isl_pw_aff_eq_set(e.copy(), coord[static_cast<size_t>(a)].take())));
    } else {
      // Any element of the axis: 0 <= e (< dim where the dim is affine).
      acc = Isl<isl_set>(isl_set_intersect(acc.take(), isl_pw_aff_ge_set(e.copy(), zero().take())));
      Isl<isl_pw_aff> d = expr(env, mem->shape[static_cast<size_t>(a)]);
      if (d) acc = Isl<isl_set>(isl_set_intersect(acc.take(), isl_pw_aff_lt_set(e.copy(), d.take())));
    }
  }
  if (!acc) return {};
  return set_to_access(isl_set_coalesce(acc.take()), sdims, mrank);
}

namespace {

// The operands of a chain of `op` (min or max) nodes at x, or x itself (i32 only).
void bound_terms(const Node* x, Op op, std::vector<const Node*>& out) {
  if (x->op == op && x->dtype == DType::i32) {
    bound_terms(x->operand(0), op, out);
    bound_terms(x->operand(1), op, out);
    return;
  }
  out.push_back(x);
}

// Index expressions as isl_aff on one access's set space [S dims..., M dims...]: collect() first
// decides, node by node, what access_map's expr() would make of it (the same cases, without
// min/max, which need pieces) and gathers the host values that become parameters, so that
// build() works in one space that has them all.
struct AffineExprs {
  const std::vector<Node*>& shape;
  const std::vector<const Node*>& loops;
  const Node* carried;
  std::unordered_map<const Node*, char> kind;  // 'c' const, 't' coordinate, 'l' loop, 'p' param, 'o' op, 'x' not affine
  std::vector<const Node*> params;
  bool pieces = false;  // a min or max: leave it to the piecewise builder
  int budget = kMaxExprNodes;
  Isl<isl_local_space> ls;
  std::unordered_map<const Node*, Isl<isl_aff>> memo;

  bool param(const Node* x) {
    if (carried && x->inside(carried)) return false;
    if (std::find(params.begin(), params.end(), x) == params.end()) params.push_back(x);
    return true;
  }
  static bool const_i32(const Node* o) { return o->op == Op::constant && o->dtype == DType::i32; }
  // Whether x is affine; records its kind.
  bool collect(const Node* x) {
    auto it = kind.find(x);
    if (it != kind.end()) return it->second != 'x';
    char k = 'x';
    if (--budget < 0 || x->dtype != DType::i32) {
    } else if (x->op == Op::constant) {
      k = 'c';
    } else if (x->op == Op::index && is_coordinate(x, shape, x->axis)) {
      k = 't';
    } else if (x->op == Op::loop && std::find(loops.begin(), loops.end(), x) != loops.end()) {
      k = 'l';
    } else if (x->op == Op::min || x->op == Op::max) {
      pieces = true;
    } else if (x->op == Op::add || x->op == Op::sub) {
      if (collect(x->operand(0)) && collect(x->operand(1))) k = 'o';
    } else if (x->op == Op::neg) {
      if (collect(x->operand(0))) k = 'o';
    } else if (x->op == Op::mul && (const_i32(x->operand(0)) || const_i32(x->operand(1)))) {
      if (collect(x->operand(const_i32(x->operand(0)) ? 1 : 0))) k = 'o';
    } else if ((x->op == Op::div || x->op == Op::mod) && const_i32(x->operand(1)) && x->operand(1)->i() > 0) {
      if (collect(x->operand(0))) k = 'o';
    }
    if (k == 'x' && !pieces && x->dtype == DType::i32 && x->op != Op::index && host_scalar(x) && param(x)) k = 'p';
    kind[x] = k;
    return k != 'x';
  }
  // The aff of an expression collect() accepted.
  Isl<isl_aff> build(const Node* x) {
    auto it = memo.find(x);
    if (it != memo.end()) return it->second;
    isl_ctx* ctx = isl_local_space_get_ctx(ls.get());
    const int rank = static_cast<int>(shape.size());
    Isl<isl_aff> r;
    switch (kind.at(x)) {
      case 'c': r = Isl<isl_aff>(isl_aff_val_on_domain(ls.copy(), isl_val_int_from_si(ctx, x->i()))); break;
      case 't': r = Isl<isl_aff>(isl_aff_var_on_domain(ls.copy(), isl_dim_set, static_cast<unsigned>(x->axis))); break;
      case 'l': {
        const auto j = std::find(loops.begin(), loops.end(), x) - loops.begin();
        r = Isl<isl_aff>(isl_aff_var_on_domain(ls.copy(), isl_dim_set, static_cast<unsigned>(rank + j)));
        break;
      }
      case 'p': {
        const auto j = std::find(params.begin(), params.end(), x) - params.begin();
        r = Isl<isl_aff>(isl_aff_var_on_domain(ls.copy(), isl_dim_param, static_cast<unsigned>(j)));
        break;
      }
      default: {
        if (x->op == Op::add || x->op == Op::sub) {
          Isl<isl_aff> a = build(x->operand(0)), b = build(x->operand(1));
          if (a && b) r = Isl<isl_aff>((x->op == Op::add ? isl_aff_add : isl_aff_sub)(a.take(), b.take()));
        } else if (x->op == Op::neg) {
          Isl<isl_aff> a = build(x->operand(0));
          if (a) r = Isl<isl_aff>(isl_aff_neg(a.take()));
        } else if (x->op == Op::mul) {
          const bool c0 = const_i32(x->operand(0));
          Isl<isl_aff> a = build(x->operand(c0 ? 1 : 0));
          const long c = x->operand(c0 ? 0 : 1)->i();
          if (a) r = Isl<isl_aff>(isl_aff_scale_val(a.take(), isl_val_int_from_si(ctx, c)));
        } else {  // div, mod by a positive constant (floor semantics, as Ember's integer ops)
          Isl<isl_aff> a = build(x->operand(0));
          isl_val* v = isl_val_int_from_si(ctx, x->operand(1)->i());
          if (a && x->op == Op::div) r = Isl<isl_aff>(isl_aff_floor(isl_aff_scale_down_val(a.take(), v)));
          else if (a) r = Isl<isl_aff>(isl_aff_mod_val(a.take(), v));
          else isl_val_free(v);
        }
      }
    }
    memo[x] = r;
    return r;
  }
};

}  // namespace

Isl<isl_map> DependenceAnalysis::Impl::affine_access_map(const MemAccess& x, const std::vector<Node*>& shape,
                                                         const Node* carried) {
  const Node* mem = x.memory;
  const Node* n = x.node;
  const int rank = static_cast<int>(shape.size());
  const int mrank = mem->rank();
  std::vector<const Node*> loops = enclosing_loops(n);
  if (carried) loops.insert(loops.begin(), carried);
  const int nloops = static_cast<int>(loops.size());
  const int sdims = rank + nloops;
  AffineExprs ax{shape, loops, carried, {}, {}, false, kMaxExprNodes, {}, {}};
  const bool whole = !x.own && (!is_access(n) || n->flat);
  // Decide every expression first (and gather the parameters).
  std::vector<bool> dim_ok(static_cast<size_t>(rank)), mdim_ok(static_cast<size_t>(mrank));
  for (int a = 0; a < rank; ++a) dim_ok[static_cast<size_t>(a)] = ax.collect(shape[static_cast<size_t>(a)]);
  for (int a = 0; a < mrank; ++a) mdim_ok[static_cast<size_t>(a)] = ax.collect(mem->shape[static_cast<size_t>(a)]);
  std::vector<char> loop_ok(static_cast<size_t>(nloops), 0);  // 0 unbounded, 1 up, -1 down
  // A loop's bounds as terms: c >= every lower term and c < every upper one (step > 0), or
  // c <= every upper term and c > every lower one (step < 0); a max lower bound or a min upper
  // one is the conjunction of its operands' bounds (b <= c < min(e1, e2): c < e1 and c < e2).
  std::vector<std::vector<const Node*>> lower(static_cast<size_t>(nloops)), upper(static_cast<size_t>(nloops));
  for (int j = 0; j < nloops; ++j) {
    const Node* l = loops[static_cast<size_t>(j)];
    const Node* st = l->operand(2);
    if (st->op != Op::constant || st->i() == 0) continue;
    const bool up = st->i() > 0;
    std::vector<const Node*>& lo = lower[static_cast<size_t>(j)];
    std::vector<const Node*>& hi = upper[static_cast<size_t>(j)];
    bound_terms(l->operand(0), up ? Op::max : Op::min, up ? lo : hi);
    bound_terms(l->operand(1), up ? Op::min : Op::max, up ? hi : lo);
    for (const std::vector<const Node*>* terms : {&lo, &hi})
      for (const Node* t : *terms)
        if (!ax.collect(t)) return {};  // a half-bounded loop: piecewise builder
    loop_ok[static_cast<size_t>(j)] = up ? 1 : -1;
  }
  // Per memory axis: 'e' the index exactly, 'a' any element of the axis.
  std::vector<char> coord(static_cast<size_t>(mrank), 'a');
  bool any_everywhere = whole;
  for (int a = 0; a < mrank && !whole; ++a) {
    const Node* md = mem->shape[static_cast<size_t>(a)];
    if (x.own) {
      if (a < rank && same_dim(md, shape[static_cast<size_t>(a)])) coord[static_cast<size_t>(a)] = 't';
      continue;
    }
    const Node* ix = n->operand(n->first_index_operand() + a);
    if (!ax.collect(ix) || !mdim_ok[static_cast<size_t>(a)]) {
      if (ax.pieces) return {};
      if (n->mode == IndexMode::unsafe) any_everywhere = true;
      continue;
    }
    // In range by syntax: the coordinate on an axis at least as long, or a constant inside it.
    bool in_range = false;
    if (ix->op == Op::index && ix->axis < rank && is_coordinate(ix, shape, ix->axis)) {
      const Node* td = shape[static_cast<size_t>(ix->axis)];
      in_range = same_dim(md, td) || (const_dim(md) >= 0 && const_dim(td) >= 0 && const_dim(td) <= const_dim(md));
    } else if (ix->op == Op::constant) {
      in_range = ix->i() >= 0 && const_dim(md) > ix->i();
    }
    // Otherwise isl checks the range on the iteration domain below ('r').
    coord[static_cast<size_t>(a)] = in_range ? 'e' : 'r';
  }
  if (ax.pieces) return {};
  if (any_everywhere) coord.assign(coord.size(), 'a');
  // The space [S dims..., M dims...] with every parameter.
  isl_space* sp = isl_space_set_alloc(ctx.get(), static_cast<unsigned>(ax.params.size()), static_cast<unsigned>(sdims + mrank));
  for (size_t k = 0; k < ax.params.size(); ++k) {
    std::string name = "p" + std::to_string(ax.params[k]->id);
    sp = isl_space_set_dim_id(sp, isl_dim_param, static_cast<unsigned>(k),
                              isl_id_alloc(ctx.get(), name.c_str(), const_cast<Node*>(ax.params[k])));
  }
  ax.ls = Isl<isl_local_space>(isl_local_space_from_space(sp));
  Isl<isl_basic_set> acc(isl_basic_set_universe(isl_local_space_get_space(ax.ls.get())));
  bool failed = false;
  auto add = [&](isl_basic_set* c) {
    if (!c) failed = true;
    acc = Isl<isl_basic_set>(isl_basic_set_intersect(acc.take(), c));
  };
  auto var = [&](int pos) { return isl_aff_var_on_domain(ax.ls.copy(), isl_dim_set, static_cast<unsigned>(pos)); };
  auto zero = [&] { return isl_aff_zero_on_domain(ax.ls.copy()); };
  auto of = [&](const Node* e) { return ax.build(e).take(); };
  for (int a = 0; a < rank; ++a) {
    add(isl_aff_ge_basic_set(var(a), zero()));
    if (dim_ok[static_cast<size_t>(a)]) add(isl_aff_lt_basic_set(var(a), of(shape[static_cast<size_t>(a)])));
  }
  for (int j = 0; j < nloops; ++j) {
    for (const Node* t : lower[static_cast<size_t>(j)])
      add(loop_ok[static_cast<size_t>(j)] > 0 ? isl_aff_le_basic_set(of(t), var(rank + j))
                                              : isl_aff_lt_basic_set(of(t), var(rank + j)));
    for (const Node* t : upper[static_cast<size_t>(j)])
      add(loop_ok[static_cast<size_t>(j)] > 0 ? isl_aff_lt_basic_set(var(rank + j), of(t))
                                              : isl_aff_le_basic_set(var(rank + j), of(t)));
  }
  if (failed || !acc) return {};
  // Indices not in range by syntax: in range on the whole iteration domain (no point below 0 or
  // at the dim and beyond), the index itself in every mode; otherwise an unsafe access may leave
  // its row (anywhere in the memory), and a clamp or wrap that acts is the piecewise builder's.
  for (int a = 0; a < mrank; ++a) {
    if (coord[static_cast<size_t>(a)] != 'r') continue;
    const Node* ix = n->operand(n->first_index_operand() + a);
    Isl<isl_basic_set> below(isl_basic_set_intersect(acc.copy(), isl_aff_lt_basic_set(of(ix), zero())));
    Isl<isl_basic_set> beyond(
        isl_basic_set_intersect(acc.copy(), isl_aff_ge_basic_set(of(ix), of(mem->shape[static_cast<size_t>(a)]))));
    if (!below || !beyond) return {};
    if (isl_basic_set_is_empty(below.get()) == isl_bool_true && isl_basic_set_is_empty(beyond.get()) == isl_bool_true) {
      coord[static_cast<size_t>(a)] = 'e';
    } else if (n->mode == IndexMode::unsafe) {
      any_everywhere = true;
    } else {
      return {};
    }
  }
  if (any_everywhere) coord.assign(coord.size(), 'a');
  for (int a = 0; a < mrank; ++a) {
    const int e = sdims + a;
    const char c = coord[static_cast<size_t>(a)];
    if (c == 't') {
      add(isl_aff_eq_basic_set(var(e), var(a)));
    } else if (c == 'e') {
      add(isl_aff_eq_basic_set(var(e), of(n->operand(n->first_index_operand() + a))));
    } else {
      add(isl_aff_ge_basic_set(var(e), zero()));
      if (mdim_ok[static_cast<size_t>(a)]) add(isl_aff_lt_basic_set(var(e), of(mem->shape[static_cast<size_t>(a)])));
    }
  }
  if (failed || !acc) return {};
  return set_to_access(isl_set_from_basic_set(acc.take()), sdims, mrank);
}

namespace {

// Appends to `out` what access_map reads of expression x (see cached_map).
void key_of(const Node* x, const std::vector<Node*>& shape, const std::vector<const Node*>& loops, const Node* carried,
            std::unordered_set<const Node*>& seen, std::string& out) {
  out += std::to_string(x->id);
  if (!seen.insert(x).second) {
    out += ';';
    return;
  }
  out += ':' + std::to_string(static_cast<int>(x->op)) + ',' + std::to_string(static_cast<int>(x->dtype));
  if (x->dtype != DType::i32) {
    out += ';';
    return;
  }
  if (x->op == Op::constant) out += '=' + std::to_string(x->i());
  if (x->op == Op::index) out += is_coordinate(x, shape, x->axis) ? 't' + std::to_string(x->axis) : std::string("?");
  if (x->op == Op::loop) {
    auto it = std::find(loops.begin(), loops.end(), x);
    out += it == loops.end() ? std::string("h") : 'c' + std::to_string(it - loops.begin());
  }
  if (host_scalar(x)) out += carried && x->inside(carried) ? "Hc" : "H";
  switch (x->op) {
    case Op::add: case Op::sub: case Op::min: case Op::max: case Op::neg: case Op::mul: case Op::div: case Op::mod:
      out += '(';
      for (const Node* o : x->operands) {
        key_of(o, shape, loops, carried, seen, out);
        out += ' ';
      }
      out += ')';
      break;
    default: break;
  }
  out += ';';
}

}  // namespace

const Isl<isl_map>& DependenceAnalysis::Impl::cached_map(const MemAccess& x, const std::vector<Node*>& shape,
                                                        const Node* carried) {
  std::vector<const Node*> loops = enclosing_loops(x.node);
  if (carried) loops.insert(loops.begin(), carried);
  std::unordered_set<const Node*> seen;
  std::string key = carried ? "C" + std::to_string(carried->id) : std::string("-");
  const Node* n = x.node;
  const bool whole = !x.own && (!is_access(n) || n->flat);
  key += x.own ? "o" : whole ? "w" : "i" + std::to_string(static_cast<int>(n->mode));
  key += "|S";
  for (const Node* d : shape) key_of(d, shape, loops, carried, seen, key);
  key += "|L";
  for (const Node* l : loops) {
    key += std::to_string(l->id) + '[';
    for (int i = 0; i < 3; ++i) key_of(l->operand(i), shape, loops, carried, seen, key);
    key += ']';
  }
  key += "|M";
  for (size_t a = 0; a < x.memory->shape.size(); ++a) {
    const Node* d = x.memory->shape[a];
    key_of(d, shape, loops, carried, seen, key);
    if (x.own) key += a < shape.size() && same_dim(d, shape[a]) ? "=" : "!";
  }
  if (!x.own && !whole) {
    key += "|I";
    for (int i = n->first_index_operand(); i < n->num_operands(); ++i) key_of(n->operand(i), shape, loops, carried, seen, key);
  }
  auto it = maps_.find(key);
  if (it != maps_.end()) {
    ++reused;
    return it->second;
  }
  ++built;
  Isl<isl_map> m = affine_access_map(x, shape, carried);
  if (!m) {
    m = access_map(x, shape, nullptr, carried);
  } else if (verify_builders()) {  // EMBER_VERIFY (tests, the fuzzer): both builders agree
    Isl<isl_map> pw = access_map(x, shape, nullptr, carried);
    if (pw && isl_map_is_equal(m.get(), pw.get()) != isl_bool_true) {
      char* a = isl_map_to_str(m.get());
      char* b = isl_map_to_str(pw.get());
      std::string msg = std::string("affine relation ") + (a ? a : "?") + " differs from " + (b ? b : "?");
      std::free(a);
      std::free(b);
      EMBER_INTERNAL_ASSERT(false, msg);
    }
  }
  return maps_.emplace(std::move(key), std::move(m)).first->second;
}

// ---- Queries ----------------------------------------------------------------------------------

char DependenceAnalysis::Impl::crosses(const MemAccess& x, const std::vector<Node*>& xs, const MemAccess& y,
                                      const std::vector<Node*>& ys, int lead) {
  const Isl<isl_map>& mx = cached_map(x, xs);
  const Isl<isl_map>& my = cached_map(y, ys);
  if (!mx || !my) return '?';
  // Pairs of instances that touch one element: S_x -> S_y. None may differ in a lead coordinate.
  Isl<isl_map> meet(isl_map_coalesce(isl_map_apply_range(mx.copy(), isl_map_reverse(my.copy()))));
  if (!meet) return '?';
  for (int d = 0; d < lead; ++d) {
    Isl<isl_map> lt(isl_map_order_lt(meet.copy(), isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d)));
    Isl<isl_map> gt(isl_map_order_gt(meet.copy(), isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d)));
    if (!lt || !gt) return '?';
    if (isl_map_is_empty(lt.get()) != isl_bool_true || isl_map_is_empty(gt.get()) != isl_bool_true) return 'y';
  }
  return 'n';
}

DependenceAnalysis::DependenceAnalysis() = default;
DependenceAnalysis::Impl& DependenceAnalysis::impl() {
  if (!impl_) impl_ = std::make_unique<Impl>();  // the isl context, made on first use
  return *impl_;
}
DependenceAnalysis::~DependenceAnalysis() = default;

bool DependenceAnalysis::within_thread(const AccessGroup& a, const AccessGroup& b, DepPairs pairs, DepWhy* why) {
  EMBER_INTERNAL_ASSERT(a.lead() == b.lead(), "within_thread: leads " << a.lead() << " and " << b.lead());
  QueryTimer timer(stats_);
  const int lead = a.lead();
  int isl_pairs = 0;
  auto dependent = [&](DepWhy::Cause cause, const MemAccess& x, const MemAccess& y) {
    if (why) *why = DepWhy{cause, x, y};
    return false;
  };
  // A pair the syntactic rules leave open, by isl: true when its instances never meet across
  // threads, else false (dependent, `why` filled).
  auto by_isl = [&](const MemAccess& x, const MemAccess& y) {
    if (syntactic_only()) return dependent(DepWhy::Cause::unknown, x, y);
    if (++isl_pairs > kMaxIslPairs) {
      ++stats_.too_many;
      return dependent(DepWhy::Cause::too_many, x, y);
    }
    ++stats_.isl;
    switch (impl().crosses(x, a.shape(), y, b.shape(), lead)) {
      case 'y': return dependent(DepWhy::Cause::crosses, x, y);
      case '?': return dependent(DepWhy::Cause::unknown, x, y);
      default: return true;
    }
  };
  // Without `why` (a compile), every pair gets the syntactic rules before any gets isl: one pair
  // that crosses by syntax answers the query. With it, pairs go in order, so the reason given is
  // the first dependent pair's.
  std::vector<std::pair<const MemAccess*, const MemAccess*>> open;
  // Visit the memories of the smaller group and look each up in the other.
  const bool a_small = a.by_memory().size() <= b.by_memory().size();
  const AccessGroup& small = a_small ? a : b;
  const AccessGroup& large = a_small ? b : a;
  uint64_t& visits = node_visit_counter();
  for (const auto& [mem, sm] : small.by_memory()) {
    auto it = large.by_memory().find(mem);
    if (it == large.by_memory().end() || (sm.writes == 0 && it->second.writes == 0)) continue;
    const std::vector<MemAccess>& xs = a_small ? sm.all : it->second.all;
    const std::vector<MemAccess>& ys = a_small ? it->second.all : sm.all;
    for (const MemAccess& x : xs) {
      for (const MemAccess& y : ys) {
        ++visits;
        if (!dependent_kinds(x, y, pairs)) continue;
        ++stats_.pairs;
        if (own_row(x, a.shape(), lead) && own_row(y, b.shape(), lead)) {
          ++stats_.fast;
          continue;
        }
        if (offsets_differ(x, a.shape(), y, b.shape(), lead)) {  // conservative: also on axes of length 1
          ++stats_.fast;
          return dependent(DepWhy::Cause::crosses, x, y);
        }
        if (crosses_by_witness(x, a.shape(), y, b.shape(), lead)) {
          ++stats_.fast;
          if (verify_builders() && !syntactic_only()) {  // EMBER_VERIFY: the witness is exact, isl must agree
            EMBER_INTERNAL_ASSERT(impl().crosses(x, a.shape(), y, b.shape(), lead) != 'n',
                                  "within_thread: the witness found a crossing isl rules out");
          }
          return dependent(DepWhy::Cause::crosses, x, y);
        }
        if (!why) {
          open.emplace_back(&x, &y);
          continue;
        }
        if (!by_isl(x, y)) return false;
      }
    }
  }
  for (const auto& [x, y] : open)
    if (!by_isl(*x, *y)) return false;
  return true;
}

bool DependenceAnalysis::loop_carries(const Node* loop, const std::vector<const AccessGroup*>& groups, DepWhy* why) {
  QueryTimer timer(stats_);
  auto dependent = [&](DepWhy::Cause cause, const MemAccess& x, const MemAccess& y, bool x_first) {
    if (why) *why = x_first ? DepWhy{cause, x, y} : DepWhy{cause, y, x};
    return true;
  };
  // A pair the syntactic rule leaves open, by isl: 'd' dependent (`why` filled), 'n' not, 'o' over
  // the pair limit in the flow-first pass (which then gives up quietly).
  auto by_isl = [&](const MemAccess& x, const AccessGroup& a, const MemAccess& y, const AccessGroup& b,
                    bool flow_only, int* isl_pairs) {
    auto found = [&](DepWhy::Cause cause, bool x_first) {
      dependent(cause, x, y, x_first);
      return 'd';
    };
    if (syntactic_only()) return found(DepWhy::Cause::unknown, true);
    if (++*isl_pairs > kMaxIslPairs) {
      ++stats_.too_many;
      if (flow_only) return 'o';
      return found(DepWhy::Cause::too_many, true);
    }
    ++stats_.isl;
    Impl& isl = impl();
    const Isl<isl_map>& mx = isl.cached_map(x, a.shape(), loop);
    const Isl<isl_map>& my = isl.cached_map(y, b.shape(), loop);
    if (!mx || !my) return found(DepWhy::Cause::unknown, true);
    Isl<isl_map> meet(isl_map_apply_range(mx.copy(), isl_map_reverse(my.copy())));
    if (!meet) return found(DepWhy::Cause::unknown, true);
    // The counter is each side's first loop dimension, after its thread's coordinates.
    const auto dx = static_cast<unsigned>(a.shape().size());
    const auto dy = static_cast<unsigned>(b.shape().size());
    Isl<isl_map> lt(isl_map_order_lt(meet.copy(), isl_dim_in, dx, isl_dim_out, dy));
    Isl<isl_map> gt(isl_map_order_gt(meet.copy(), isl_dim_in, dx, isl_dim_out, dy));
    if (!lt || !gt) return found(DepWhy::Cause::unknown, true);
    const bool x_then_y = isl_map_is_empty(lt.get()) != isl_bool_true;
    const bool y_then_x = isl_map_is_empty(gt.get()) != isl_bool_true;
    if (flow_only) {  // only the order that makes it a flow dependence
      const bool x_writes = writes(x);
      return (x_writes ? x_then_y : y_then_x) ? found(DepWhy::Cause::crosses, x_writes) : 'n';
    }
    return x_then_y || y_then_x ? found(DepWhy::Cause::crosses, x_then_y) : 'n';
  };
  struct Open {
    const MemAccess* x;
    const AccessGroup* a;
    const MemAccess* y;
    const AccessGroup* b;
  };
  // Without `why` (a compile), every pair gets the syntactic rule before any gets isl: one pair
  // dependent by syntax answers the query. With it, pass 0 first looks for a flow dependence (a
  // write, then a read of it in a later iteration: the clearest reason to give) and gives up
  // quietly at the pair limit; pass 1, the only one a compile runs, looks for any dependence with
  // the limit of its own.
  uint64_t& visits = node_visit_counter();
  for (int pass = why ? 0 : 1; pass < 2; ++pass) {
    const bool flow_only = pass == 0;
    int isl_pairs = 0;
    bool over_limit = false;
    std::vector<Open> open;
    for (size_t ga = 0; ga < groups.size() && !over_limit; ++ga) {
      for (size_t gb = ga; gb < groups.size() && !over_limit; ++gb) {
        const AccessGroup& a = *groups[ga];
        const AccessGroup& b = *groups[gb];
        for (const auto& [mem, am] : a.by_memory()) {
          if (mem->inside(loop)) continue;  // allocated in the loop: each iteration's own
          auto it = b.by_memory().find(mem);
          if (it == b.by_memory().end() || (am.writes == 0 && it->second.writes == 0)) continue;
          const std::vector<MemAccess>& xs = am.all;
          const std::vector<MemAccess>& ys = it->second.all;
          for (size_t ix = 0; ix < xs.size() && !over_limit; ++ix) {
            // Within one group, pass 1 checks both orders of a pair at once: (y, x) repeats (x, y).
            for (size_t iy = ga == gb && !flow_only ? ix : 0; iy < ys.size(); ++iy) {
              const MemAccess& x = xs[ix];
              const MemAccess& y = ys[iy];
              ++visits;
              if (!dependent_kinds(x, y, flow_only ? DepPairs::flow_anti : DepPairs::all)) continue;
              ++stats_.pairs;
              // By syntax: one side writes its whole memory in every iteration and the other
              // touches some element of it in another iteration (flow-first: the writer first).
              if (may_repeat(loop)) {
                if (covers_memory(x, a.shape()) && runs_in_model(y, b.shape()) && (!flow_only || reads(y))) {
                  ++stats_.fast;
                  return dependent(DepWhy::Cause::crosses, x, y, true);
                }
                if (covers_memory(y, b.shape()) && runs_in_model(x, a.shape()) && (!flow_only || reads(x))) {
                  ++stats_.fast;
                  return dependent(DepWhy::Cause::crosses, x, y, false);
                }
              }
              if (!why) {
                open.push_back({&x, &a, &y, &b});
                continue;
              }
              const char r = by_isl(x, a, y, b, flow_only, &isl_pairs);
              if (r == 'd') return true;
              if (r == 'o') {
                over_limit = true;
                break;
              }
            }
          }
          if (over_limit) break;
        }
      }
    }
    for (const Open& o : open)
      if (by_isl(*o.x, *o.a, *o.y, *o.b, false, &isl_pairs) == 'd') return true;
  }
  return false;
}

namespace {
MemAccess access_of(const Node* n) {
  return {n, n->operand(0), n->op == Op::load ? AccessKind::read : AccessKind::write};
}
}  // namespace

uint64_t DependenceAnalysis::ignored_axes(const Node* n, const std::vector<Node*>& shape) {
  if (!is_access(n) || n->flat || shape.size() > 64) return 0;
  QueryTimer timer(stats_);
  ++stats_.fast;
  // By syntax: when every index is exact in the model, the element is a function of the
  // coordinates the indices name (an axis of constant size 1 is always 0 under clamp and wrap,
  // whatever its index), so the other axes are ignored. An index the model over-approximates
  // would make the relation not single-valued (any element of an axis): none then. isl finds
  // more only for indices that name a coordinate they do not depend on (i * 0, i - i), which
  // simplify folds first.
  const Node* mem = n->operand(0);
  const std::vector<const Node*> loops = enclosing_loops(n);
  uint64_t named = 0;
  for (int a = 0; a < mem->rank(); ++a) {
    if (const_dim(mem->shape[static_cast<size_t>(a)]) == 1 && n->mode != IndexMode::unsafe) continue;
    int budget = kMaxExprNodes;
    if (!index_axes(n->operand(n->first_index_operand() + a), shape, loops, &named, &budget)) return 0;
  }
  const uint64_t every = shape.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << shape.size()) - 1;
  return every & ~named;
}

bool DependenceAnalysis::injective_on(const Node* n, const std::vector<Node*>& shape, uint64_t axes) {
  if (!is_access(n) || n->flat) return false;
  QueryTimer timer(stats_);
  if (n->mode != IndexMode::unsafe) {  // every index lands in its axis: an element is its indices
    ++stats_.fast;
    switch (injective_by_syntax(n, shape, axes)) {
      case Syntax::yes: return true;
      case Syntax::no: return false;
      case Syntax::open: --stats_.fast; break;
    }
  }
  if (syntactic_only()) return false;
  ++stats_.isl;
  Isl<isl_map> m = impl().cached_map(access_of(n), shape);
  if (!m) return false;
  Isl<isl_map> meet(isl_map_apply_range(m.copy(), isl_map_reverse(m.copy())));
  if (!meet) return false;
  for (int d = 0; d < static_cast<int>(shape.size()) && d < 64; ++d) {
    if (!(axes >> d & 1)) continue;
    Isl<isl_map> lt(isl_map_order_lt(meet.copy(), isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d)));
    Isl<isl_map> gt(isl_map_order_gt(meet.copy(), isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d)));
    if (!lt || !gt || isl_map_is_empty(lt.get()) != isl_bool_true || isl_map_is_empty(gt.get()) != isl_bool_true)
      return false;
  }
  return true;
}

bool DependenceAnalysis::own_element(const Node* n, const std::vector<Node*>& shape) {
  const Node* mem = n->operand(0);
  if (n->flat || !same_shape(mem->shape, shape)) return false;
  QueryTimer timer(stats_);
  MemAccess x{n, mem, n->op == Op::load ? AccessKind::read : AccessKind::write};
  if (own_row(x, shape, static_cast<int>(shape.size()))) {
    ++stats_.fast;
    return true;
  }
  // isl: no instance touches an element off its thread's (vacuously so when none runs).
  auto by_isl = [&](bool* vacuous) {
    const Isl<isl_map>& m = impl().cached_map(x, shape);
    if (!m) return false;
    if (vacuous) *vacuous = isl_map_is_empty(m.get()) == isl_bool_true;
    for (int d = 0; d < mem->rank(); ++d) {
      Isl<isl_map> lt(isl_map_order_lt(m.copy(), isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d)));
      Isl<isl_map> gt(isl_map_order_gt(m.copy(), isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d)));
      if (!lt || !gt || isl_map_is_empty(lt.get()) != isl_bool_true || isl_map_is_empty(gt.get()) != isl_bool_true)
        return false;
    }
    return true;
  };
  // By syntax: an index the model over-approximates (any element of its axis, 'a') on an axis
  // that may be 2 or longer lets thread t meet another element, as isl would find.
  for (int a = 0; a < mem->rank(); ++a) {
    long which = 0;
    if (index_form(x, shape, a, &which) == 'a' && may_be_at_least(mem->shape[static_cast<size_t>(a)], 2)) {
      ++stats_.fast;
      if (verify_builders() && !syntactic_only()) {  // EMBER_VERIFY: isl agrees, or no instance runs
        bool vacuous = false;
        EMBER_INTERNAL_ASSERT(!by_isl(&vacuous) || vacuous, "own_element: isl proves an access own the syntax rules out");
      }
      return false;
    }
  }
  if (syntactic_only()) return false;
  ++stats_.isl;
  return by_isl(nullptr);
}

isl_map* DependenceAnalysis::access_relation(const MemAccess& x, const std::vector<Node*>& shape) {
  return impl().access_map(x, shape).take();
}

}  // namespace ember

// Internal to reverse mode (em.grad). Not part of the public API.
//
// struct Reverse is the state of one em.grad: the analysis (live nodes), what prepare() made
// for each live scope, and the adjoints of the reverse sweep. Its member functions are defined in
//   reverse.cpp: the analysis, helpers, the reverse sweep over nodes and contribute(); grad();
//   reverse_prepare.cpp: prepare() and the instrumentation of scopes (snapshots, copies, tapes);
//   reverse_scopes.cpp: replays (clones) and the reverse of ifs, kernels and loops, with the
//     routes of adjoints out of a scope;
//   adjoint_sums.cpp: adjoints of loads, and the deferred sums of broadcast reads (flush()).
// core/autodiff/reverse.cpp has the overview.
#pragma once
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/autodiff/rules.h"
#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember::autodiff_detail {

inline bool is_float(const Node* n) { return n->dtype == DType::f32; }
inline bool device_scope(const Node* s) { return s->op == Op::kernel || (s->is_scope() && !s->shape.empty()); }
// Calls f on every node inside scope s, in program order (a scope before its children).
inline void for_descendants(Node* s, const std::function<void(Node*)>& f) {
  for (Node* c = s->first_child; c; c = c->next) {
    f(c);
    if (c->first_child) for_descendants(c, f);
  }
}

struct Reverse {
  explicit Reverse(Tracer& t) : tr(t), b(t.builder()), p(t.program()) {}
  Tracer& tr;
  Builder& b;
  Program& p;

  std::unordered_set<const Node*> active, useful, live_scope;
  std::unordered_map<const Node*, const Node*> origin;  // replay clone / restored state -> original
  std::unordered_map<const Node*, Node*> adj;           // SSA adjoints of values of the region
  std::unordered_map<const Node*, Node*> state;         // var -> adjoint var; memory -> adjoint buffer
  std::unordered_map<const Node*, Node*> snap_var;      // snapshot -> the var it reads
  struct Route { Node* var = nullptr; Node* buf = nullptr; };
  std::unordered_map<const Node*, Route> route;         // adjoints of values outside the scope being reversed
  // What a scope's reverse needs to replay it (made by prepare() before the scope runs).
  // vars: every var the scope reads or sets, defined outside it; mems: memories it writes, and
  // memories it reads that are written elsewhere. Each gets a local copy in the replay, so a
  // replay never changes the program's own state and reads the versions the forward run read.
  enum MemKind { kReadWrite, kWriteOnly, kReadOnly };
  struct Entry {
    std::vector<Node*> vars;
    std::vector<bool> var_set;                          // set inside (host loops tape these)
    std::vector<Node*> mems;
    std::vector<MemKind> mem_kind;
    std::vector<Node*> vals;                            // per var, then per memory: entry snapshot /
                                                        // entry copy / scratch buffer, or null (taped)
    Node* count = nullptr;                              // loops: trips started
    Node* bound = nullptr;                              // host loops: trip bound
    Node* every = nullptr;                              // host loops: iterations per checkpoint (K)
    Node* slots = nullptr;                              // host loops: checkpoints (tape length)
    std::vector<Node*> tapes;                           // host loops: per var, then per memory, or null
    bool host_loop = false;
  };
  std::unordered_map<const Node*, Entry> entry;
  std::unordered_set<const Node*> skip;                 // if_ nodes reversed with their else_
  std::unordered_set<const Node*> xset;                 // the xs of em.grad
  std::unordered_map<const Node*, Node*> xadj;          // their adjoints, once complete
  std::unordered_set<const Node*> instr;                // made by instrument(): never replayed

  // A memory nothing writes (an input, or em.zeros only read): its loads are gathers of a
  // value, so its adjoint is an SSA value like any other (sums, not atomics, where it can be).
  static bool valuelike(const Node* m) { return m->is_memory() && !memory_is_written(m); }
  const Node* orig(const Node* n) const {
    for (auto it = origin.find(n); it != origin.end(); it = origin.find(n)) n = it->second;
    return n;
  }
  bool live(const Node* n) const {
    const Node* o = orig(n);
    if (o->is_scope()) return live_scope.count(o) > 0;
    return active.count(o) && useful.count(o);
  }
  void mark_live(Node* n) { active.insert(n); useful.insert(n); }

  // ---------------------------------------------------------------- analysis (reverse.cpp)
  void analyze(const std::vector<Node*>& xs, Node* y);

  // ---------------------------------------------------------------- helpers (reverse.cpp)
  Node* zero() { return tr.constant(0.0, DType::f32); }
  Node* zeros_like_shape(const Shape& s) { return s.empty() ? zero() : tr.broadcast_to(zero(), s); }
  // An identity node reading var `v` here: its value is v's value at this point.
  Node* snapshot(Node* v);
  Node* new_var(Node* init, const Shape& shape) { return b.var(shape.empty() || !init->shape.empty() ? init : tr.broadcast_to(init, shape), shape); }
  std::vector<Node*> coords(const Shape& s);
  // Whole-memory copy into a new buffer (host level).
  Node* copy_memory(Node* m);

  // ---------------------------------------------------------------- adjoint accumulation (reverse.cpp)
  bool in_device() const;
  Node* fit(Node* c, const Shape& shape);
  void contribute(Node* target, Node* c);
  // A uniform adjoint as a tensor of `shape` (where its sum over axes or its layout matters).
  Node* spread(Node* v, const Shape& shape) { return b.spread(v, shape); }

  // ---------------------------------------------------------------- reverse sweep (reverse.cpp)
  void make_state_adjoints(const std::vector<Node*>& list);
  void reverse_list(const std::vector<Node*>& list);
  Node* read_state(Node* v) { return snapshot(state.at(v)); }
  void reverse_node(Node* n);
  bool injective(const std::vector<Node*>& idx, const Shape& shape) const;
  void reverse_reduce(Node* n, Node* g);

  // ---------------------------------------------------------------- prepare (reverse_prepare.cpp)
  void scope_state(Node* s, Entry& e);
  std::vector<Node*> prepare(const std::vector<Node*>& list);
  Node* trip_bound(Node* l);
  void instrument(Node* s);
  void plan_checkpoints(Entry& e);
  bool promote_own_elements(Node* s, const Entry& e);
  void instrument_scope(Node* s);

  // ---------------------------------------------------------------- replay (reverse_scopes.cpp)
  // The replay being emitted: forward node -> the node that stands for it (its clone, restored
  // state, the iteration's loop index).
  std::unordered_map<const Node*, Node*> map;
  Node* m(Node* n) {
    auto it = map.find(n);
    return it == map.end() ? n : it->second;
  }
  static bool jumps_to(Node* n, Node* loop);
  Node* clone_node(Node* n, Node* loop, Node* alive);
  std::vector<Node*> clone_list(const std::vector<Node*>& list, Node* loop, Node* alive);
  std::vector<Node*> replay(Node* s, bool prepare_clone);

  // ---------------------------------------------------------------- reverse of scopes (reverse_scopes.cpp)
  // The routes open_routes() replaced, and the accumulators it opened (added up by close_routes()).
  struct Saved { std::unordered_map<const Node*, Route> route; std::vector<std::pair<Node*, Route>> opened; };
  void outer_targets(Node* s, std::vector<Node*>& direct, std::vector<Node*>& gathered);
  Saved open_routes(Node* s);
  void close_routes(Saved& sv);
  Node* device_emission_scope() const;
  void add_to_buffer(Node* buf, Node* t, Node* c);
  void reverse_scope(Node* s);
  void restore_state(Entry& e, const std::vector<Node*>& vals);
  void reverse_host_loop(Node* l, Entry& e);
  void reverse_device_loop(Node* l, Entry& e);

  // ---------------------------------------------------------------- adjoints of loads (adjoint_sums.cpp)
  void scatter_adjoint(Node* n, Node* g);
  // Adjoint of a broadcast/permuted read of a value: `g` over the read's shape `nshape`; used[a]
  // is the read's axis that the value's axis a is indexed by (-2: a size-1 axis read at 0).
  struct Term { Node* g; std::vector<int> used; Shape nshape; };
  std::unordered_map<const Node*, std::vector<Term>> pending;
  static std::vector<int> dropped(const Term& t);
  void flush(Node* src);
  // symmetry() results by (value, a0, a1).
  std::map<std::tuple<const Node*, int, int>, int> sym_memo;
  bool refers(const Node* e, int axis, const Shape& shape, int depth = 0);
  bool swapped_loads(const Node* x, const Node* y, int a0, int a1);
  int symmetry(Node* v, int a0, int a1, int depth = 0);
  void flush_all();
};

}  // namespace ember::autodiff_detail

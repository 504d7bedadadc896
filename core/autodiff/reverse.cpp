// Reverse mode on the traced IR (core/IR.md "Derivatives").
//
// em.grad(y, xs) differentiates what was traced before it in the current scope (the *region*)
// and emits the adjoint code right there, through the tracer, so it fuses like any other code.
//   1. Analysis: a node is *live* when it depends on some x (active) and y depends on it
//      (useful). Only live nodes get adjoints.
//   2. Prepare the forward code: a live node that reads a var reads a *snapshot* of it (an
//      identity node at that point), so its operand keeps the value it had there; a live scope
//      records what its reverse needs: a host loop tapes its state (the vars and memories its
//      body changes) at the start of each iteration and counts its trips; other scopes
//      snapshot their state on entry, and per-thread loops count their trips.
//   3. Reverse sweep over the region, last node first. Values get SSA adjoints; a var has an
//      adjoint var, a memory an adjoint buffer (state, updated in reverse program order).
//      A nested scope is reversed by a scope of the same kind whose body first *replays* the
//      forward body (a clone reading restored state: the tape for host loops, the entry
//      snapshot for ifs and kernels, recomputation from entry for per-thread loops) and then
//      reverses that clone. break/continue become a predicate in the replay.
#include <algorithm>
#include <map>
#include <tuple>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "core/autodiff/autodiff.h"
#include "core/autodiff/rules.h"
#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember {

namespace {

bool is_float(const Node* n) { return n->dtype == DType::f32; }
bool device_scope(const Node* s) { return s->op == Op::kernel || (s->is_scope() && !s->shape.empty()); }

void for_descendants(Node* s, const std::function<void(Node*)>& f) {
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

  // ---------------------------------------------------------------- analysis
  void analyze(const std::vector<Node*>& xs, Node* y) {
    std::vector<Node*> all = p.nodes();
    for (Node* x : xs) active.insert(x);
    for (bool changed = true; changed;) {
      changed = false;
      auto mark = [&](Node* n) { if (active.insert(n).second) changed = true; };
      for (Node* n : all) {
        if (tr.is_detached(n)) continue;
        switch (n->op) {
          case Op::set:
            if (active.count(n->operand(1)) && is_float(n->operand(0))) mark(n->operand(0)), mark(n);
            break;
          case Op::store:
            if (active.count(n->operand(1)) && is_float(n->operand(0))) mark(n->operand(0)), mark(n);
            break;
          case Op::atomic:
            // (Any kind: reverse_node reports the kinds it cannot differentiate.)
            if (active.count(n->operand(1)) && is_float(n->operand(0))) mark(n->operand(0)), mark(n);
            break;
          case Op::var: if (active.count(n->operand(0)) && is_float(n)) mark(n); break;
          case Op::load: case Op::reduce: case Op::scan: case Op::select: case Op::cast:
          default:
            if (!is_float(n) || has_flag(n->op, F_NONDIFF) || n->is_scope() || n->op == Op::atomic) break;
            if (n->op == Op::reduce) {
              auto k = static_cast<ReduceKind>(n->kind);
              if (k != ReduceKind::sum && k != ReduceKind::prod && k != ReduceKind::max && k != ReduceKind::min) break;
            }
            for (int i = 0; i < n->num_operands(); ++i)
              if (active.count(n->operand(i))) { mark(n); break; }
        }
      }
    }
    useful.insert(y);
    for (bool changed = true; changed;) {
      changed = false;
      auto mark = [&](Node* n) { if (useful.insert(n).second) changed = true; };
      for (auto it = all.rbegin(); it != all.rend(); ++it) {
        Node* n = *it;
        switch (n->op) {
          case Op::set: if (useful.count(n->operand(0))) mark(n), mark(n->operand(1)); break;
          case Op::store: case Op::atomic: if (useful.count(n->operand(0))) mark(n), mark(n->operand(1)); break;
          default:
            if (!useful.count(n) || n->is_scope()) break;
            for (Node* o : n->operands) mark(o);
        }
        // A var or memory is useful when a useful node reads it.
        if (n->op == Op::var || n->is_memory())
          for (Node* u : n->users)
            if (useful.count(u) && !(u->op == Op::set && u->operand(0) == n) &&
                !((u->op == Op::store || u->op == Op::atomic) && u->operand(0) == n))
              mark(n);
      }
    }
    for (Node* n : all)
      if (!n->is_scope() && active.count(n) && useful.count(n))
        for (Node* s = n->parent; s && s->op != Op::program; s = s->parent) live_scope.insert(s);
    for (Node* n : all)
      if (n->op == Op::else_ && live_scope.count(n) && n->prev) live_scope.insert(n->prev);
  }

  // ---------------------------------------------------------------- helpers
  Node* zero() { return tr.constant(0.0, DType::f32); }
  Node* zeros_like_shape(const Shape& s) { return s.empty() ? zero() : tr.broadcast_to(zero(), s); }
  // An identity node reading var `v` here: its value is v's value at this point.
  Node* snapshot(Node* v) {
    Node* s = b.raw(Op::select, v->dtype, v->shape, {b.boolean(true), v, v});
    s->loc = b.loc;
    return s;
  }
  Node* new_var(Node* init, const Shape& shape) { return b.var(shape.empty() || !init->shape.empty() ? init : tr.broadcast_to(init, shape), shape); }
  std::vector<Node*> coords(const Shape& s) {
    std::vector<Node*> idx;
    for (int a = 0; a < static_cast<int>(s.size()); ++a) idx.push_back(b.index(a, s));
    return idx;
  }
  // Whole-memory copy into a new buffer (host level).
  Node* copy_memory(Node* m) {
    Node* c = b.buffer(m->dtype, m->shape, false);
    std::vector<Node*> idx = coords(m->shape);
    b.store(c, b.load(m, idx, m->shape, IndexMode::clamp), idx, m->shape, IndexMode::clamp);
    return c;
  }

  // ---------------------------------------------------------------- prepare (forward side)
  // The state of scope `s` (see Entry).
  void scope_state(Node* s, Entry& e) {
    auto var_at = [&](Node* v, bool set) {
      if (v->inside(s)) return;
      auto it = std::find(e.vars.begin(), e.vars.end(), v);
      if (it == e.vars.end()) { e.vars.push_back(v); e.var_set.push_back(set); }
      else if (set) e.var_set[static_cast<size_t>(it - e.vars.begin())] = true;
    };
    std::vector<Node*> read, written;
    auto add = [](std::vector<Node*>& l, Node* x) { if (std::find(l.begin(), l.end(), x) == l.end()) l.push_back(x); };
    auto visit = [&](Node* n) {
      if (instr.count(n)) return;
      for (int i = 0; i < n->num_operands(); ++i) {
        Node* o = n->operand(i);
        if (o->op == Op::var) var_at(o, i == 0 && n->op == Op::set);
        if (!o->is_memory() || o->inside(s) || o->op == Op::group_buffer) continue;
        const bool writes = i == 0 && (n->op == Op::store || n->op == Op::atomic || n->op == Op::move_memory);
        if (writes) add(written, o);
        // An atomic whose old value is unused only accumulates: a write.
        if (!writes || (n->op == Op::atomic && !n->users.empty())) add(read, o);
      }
    };
    for_descendants(s, visit);
    if (s->op == Op::if_ && s->next && s->next->op == Op::else_) for_descendants(s->next, visit);
    for (Node* m : written) {
      e.mems.push_back(m);
      e.mem_kind.push_back(std::find(read.begin(), read.end(), m) != read.end() ? kReadWrite : kWriteOnly);
    }
    for (Node* m : read) {
      if (std::find(written.begin(), written.end(), m) != written.end()) continue;
      bool elsewhere = false;
      for (Node* u : m->users)
        if ((u->op == Op::store || u->op == Op::atomic || u->op == Op::move_memory) && u->operand(0) == m &&
            !u->inside(s) && !instr.count(u))
          elsewhere = true;
      if (elsewhere) { e.mems.push_back(m); e.mem_kind.push_back(kReadOnly); }
    }
  }

  // Snapshots var reads of the live nodes of `list` and instruments its live scopes.
  // Returns the list with what it inserted, in order.
  std::vector<Node*> prepare(const std::vector<Node*>& list) {
    if (list.empty()) return list;
    Node* scope = list.front()->parent;
    Node* lo = list.front()->prev;
    Node* hi = list.back()->next;
    Node* at_scope = b.scope();
    Node* at_before = b.before();
    for (Node* n : list) {
      if (n->dead || snap_var.count(n)) continue;
      if (n->is_scope()) {
        if (live(n) && n->op != Op::else_) instrument(n);
        continue;
      }
      if (!live(n) && n->op != Op::set && n->op != Op::store && n->op != Op::atomic) continue;
      for (int i = 0; i < n->num_operands(); ++i) {
        Node* o = n->operand(i);
        if (o->op != Op::var) continue;
        if (i == 0 && n->op == Op::set) continue;
        b.set_insert_before(n);
        Node* s = snapshot(o);
        snap_var[s] = o;
        if (live(o)) mark_live(s);
        p.set_operand(n, i, s);
      }
    }
    if (at_before) b.set_insert_before(at_before); else b.set_insert_end(at_scope);
    std::vector<Node*> out;
    for (Node* n = lo ? lo->next : scope->first_child; n && n != hi; n = n->next) out.push_back(n);
    return out;
  }

  Node* trip_bound(Node* l) {
    Node* lo = l->operand(0);
    Node* hi = l->operand(1);
    Node* st = l->operand(2);
    Node* z = b.i32(0);
    Node* one = b.i32(1);
    auto ceil_div = [&](Node* span, Node* step) {  // span >= 0, step > 0
      return b.binary(Op::div, b.binary(Op::add, span, b.binary(Op::sub, step, one)), step);
    };
    Node* up = ceil_div(b.binary(Op::max, b.binary(Op::sub, hi, lo), z), b.binary(Op::max, st, one));
    if (st->op == Op::constant && st->i() > 0) return up;
    Node* down = ceil_div(b.binary(Op::max, b.binary(Op::sub, lo, hi), z), b.binary(Op::max, b.unary(Op::neg, st), one));
    if (st->op == Op::constant) return down;
    return b.select(b.binary(Op::gt, st, z), up, down);
  }

  void instrument(Node* s) {
    Node* at_scope = b.scope();
    Node* at_before = b.before();
    std::unordered_set<Node*> before;
    for (Node* n : p.nodes()) before.insert(n);
    instrument_scope(s);
    for (Node* n : p.nodes())
      if (!before.count(n)) instr.insert(n);
    if (at_before) b.set_insert_before(at_before); else b.set_insert_end(at_scope);
  }
  // Tape or checkpoint (DESIGN §3 step 3): a host loop whose full tape (trips x state) fits in
  // the budget tapes every iteration (K = 1); a longer one keeps every K-th state with
  // K = ceil(sqrt(trips)) and recomputes each segment of K iterations once more in reverse.
  // Decided at run time from the trip bound; the budget is EMBER_TAPE_BUDGET_MB (default 64).
  void plan_checkpoints(Entry& e) {
    double words = 0;
    Node* dyn = nullptr;  // the state size in words as a host f32 value
    for (size_t k = 0; k < e.vars.size() + e.mems.size(); ++k) {
      const bool is_var = k < e.vars.size();
      if (is_var ? !e.var_set[k] : e.mem_kind[k - e.vars.size()] != kReadWrite) continue;
      Node* x = is_var ? e.vars[k] : e.mems[k - e.vars.size()];
      double c = 1;
      Node* size = nullptr;
      for (Node* d : x->shape) {
        if (const_dim(d) >= 0) { c *= static_cast<double>(const_dim(d)); continue; }
        Node* df = b.cast(d, DType::f32);
        size = size ? b.binary(Op::mul, size, df) : df;
      }
      if (!size) { words += c; continue; }
      Node* term = b.binary(Op::mul, size, b.f32(static_cast<float>(c)));
      dyn = dyn ? b.binary(Op::add, dyn, term) : term;
    }
    if (words > 0) dyn = dyn ? b.binary(Op::add, dyn, b.f32(static_cast<float>(words))) : b.f32(static_cast<float>(words));
    double mb = 64;
    if (const char* env = std::getenv("EMBER_TAPE_BUDGET_MB")) mb = std::max(0.0, std::atof(env));
    const float budget_words = static_cast<float>(mb * 1024 * 1024 / 4);
    Node* one = b.i32(1);
    if (!dyn) {
      e.every = one;
    } else {
      Node* tf = b.cast(e.bound, DType::f32);
      Node* over = b.binary(Op::gt, b.binary(Op::mul, tf, dyn), b.f32(budget_words));
      Node* k = b.cast(b.unary(Op::ceil, b.unary(Op::sqrt, tf)), DType::i32);
      e.every = b.select(over, b.binary(Op::max, k, one), one);
    }
    e.slots = b.binary(Op::div, b.binary(Op::add, e.bound, b.binary(Op::sub, e.every, one)), e.every);
  }

  void instrument_scope(Node* s) {
    Entry e;
    scope_state(s, e);
    if (s->op == Op::kernel && !s->group.empty())
      EMBER_USER_ERROR(CompileError, s->loc, "em.grad through a kernel with workgroups (em.kernel(..., group=)) "
                                             "is not supported");
    b.set_insert_before(s);
    b.loc = s->loc;
    const bool in_kernel = s->enclosing_kernel() != nullptr;
    e.host_loop = s->op == Op::loop && s->shape.empty() && !in_kernel;
    if (s->op == Op::loop && !e.host_loop) {
      for (size_t k = 0; k < e.mems.size(); ++k)
        if (e.mem_kind[k] == kReadWrite)
          EMBER_USER_ERROR(CompileError, s->loc, "em.grad through a per-thread loop that writes memory ('"
                                                     << (e.mems[k]->name.empty() ? "a buffer" : e.mems[k]->name)
                                                     << "') is not supported yet; carry the value in an em.var");
    }
    auto tape_of = [&](Node* x) {
      Shape ts{e.slots};
      ts.insert(ts.end(), x->shape.begin(), x->shape.end());
      Node* t = b.buffer(x->dtype, ts, false);
      t->name = "tape";
      return t;
    };
    // A per-thread loop whose bounds are host values (the same for every thread) is taped too:
    // its tape of trip bound x the scope's shape is allocated at host level, before the
    // outermost kernel or per-element scope around it. Other per-thread loops recompute.
    bool thread_taped = false;
    Node* tape_at = nullptr;
    if (s->op == Op::loop && !e.host_loop) {
      Node* dev_root = s;
      for (Node* a = s->parent; a && a->op != Op::program; a = a->parent)
        if (device_scope(a)) dev_root = a;
      bool uniform = true;
      for (Node* o : s->operands) uniform &= o->shape.empty() && o->op != Op::var && (dev_root == s || !o->inside(dev_root));
      if (uniform) {
        b.set_insert_before(dev_root);
        e.bound = trip_bound(s);
        e.slots = e.bound;
        e.every = b.i32(1);
        thread_taped = true;
        tape_at = dev_root;
      }
    }
    b.set_insert_before(s);
    if (s->op == Op::loop && e.host_loop) {
      e.bound = trip_bound(s);
      plan_checkpoints(e);
    }
    for (size_t k = 0; k < e.vars.size(); ++k) {
      Node* v = e.vars[k];
      const bool taped = (e.host_loop || thread_taped) && e.var_set[k];
      if (taped && thread_taped) b.set_insert_before(tape_at);
      Node* tape = taped ? tape_of(v) : nullptr;
      b.set_insert_before(s);
      e.vals.push_back(taped ? nullptr : snapshot(v));
      e.tapes.push_back(tape);
    }
    if (s->op == Op::loop) e.count = b.var(b.i32(0), s->shape);
    for (size_t k = 0; k < e.mems.size(); ++k) {
      Node* m = e.mems[k];
      Node* val = nullptr;
      Node* tape = nullptr;
      if (in_kernel) {
        // Inside a kernel the scope's memories are already the kernel reverse's copies (or
        // scratch); a replay that reads what it writes would see its own earlier writes.
        if (e.mem_kind[k] == kReadWrite)
          EMBER_USER_ERROR(CompileError, s->loc, "em.grad through an em.if_/em.loop inside a kernel that reads and "
                                                 "writes memory ('" << (m->name.empty() ? "a buffer" : m->name)
                                                 << "') is not supported yet; read it into an em.var first");
        val = m;
      } else if (e.mem_kind[k] == kWriteOnly) {
        val = b.buffer(m->dtype, m->shape, false);
      } else if (e.mem_kind[k] == kReadWrite && e.host_loop) {
        tape = tape_of(m);
      } else {
        val = copy_memory(m);
      }
      e.vals.push_back(val);
      e.tapes.push_back(tape);
    }
    // At the start of each iteration: tape the state, count the trip.
    if (s->op == Op::loop) {
      if (s->first_child) b.set_insert_before(s->first_child); else b.set_insert_end(s);
      // Host loops keep every K-th iteration's state (a checkpoint; K = 1 tapes them all).
      Node* guard = nullptr;
      bool any_tape = false;
      for (Node* t : e.tapes) any_tape |= t != nullptr;
      if (e.host_loop && any_tape) {
        guard = b.if_(b.binary(Op::eq, b.binary(Op::mod, e.count, e.every), b.i32(0)), {});
        b.set_insert_end(guard);
      }
      for (size_t k = 0; k < e.vars.size() + e.mems.size(); ++k) {
        Node* t = e.tapes[k];
        if (!t) continue;
        Node* x = k < e.vars.size() ? e.vars[k] : e.mems[k - e.vars.size()];
        std::vector<Node*> c = coords(x->shape);
        std::vector<Node*> idx{e.count};
        idx.insert(idx.end(), c.begin(), c.end());
        Node* val = x->op == Op::var ? snapshot(x) : b.load(x, c, x->shape, IndexMode::clamp);
        if (e.host_loop) idx[0] = b.binary(Op::div, e.count, e.every);
        b.store(t, val, idx, x->shape, IndexMode::unsafe);
      }
      if (guard) {
        if (guard->next) b.set_insert_before(guard->next); else b.set_insert_end(guard->parent);
      }
      Node* one = s->shape.empty() ? b.i32(1) : tr.broadcast_to(b.i32(1), s->shape);
      b.set(e.count, b.binary(Op::add, e.count, one));
    }
    entry[s] = std::move(e);
  }

  // ---------------------------------------------------------------- replay (clone)
  std::unordered_map<const Node*, Node*> map;
  Node* m(Node* n) {
    auto it = map.find(n);
    return it == map.end() ? n : it->second;
  }
  // Whether `n` holds a break/continue of `loop` (not of a loop nested inside n).
  static bool jumps_to(Node* n, Node* loop) {
    if (n->op == Op::break_ || n->op == Op::continue_) {
      Node* l = n->parent;
      while (l && l->op != Op::loop) l = l->parent;
      return l == loop;
    }
    for (Node* c = n->first_child; c; c = c->next)
      if (jumps_to(c, loop)) return true;
    return false;
  }
  Node* clone_node(Node* n, Node* loop, Node* alive) {
    if (instr.count(n)) return nullptr;
    if (n->op == Op::break_ || n->op == Op::continue_) {
      Node* l = n->parent;
      while (l && l->op != Op::loop) l = l->parent;
      if (l == loop) return b.set(alive, alive->shape.empty() ? b.boolean(false) : tr.broadcast_to(b.boolean(false), alive->shape));
    }
    std::vector<Node*> ops;
    for (Node* o : n->operands) ops.push_back(m(o));
    Shape shape;
    for (Node* d : n->shape) shape.push_back(m(d));
    Node* c = b.raw(n->op, n->dtype, shape, ops);
    copy_attrs(*c, *n);  // every attribute (core/ir/node.h); a cloned kernel gets a fresh id
    if (c->op == Op::kernel) c->index = p.next_kernel_id++;
    map[n] = c;
    origin[c] = n;
    if (snap_var.count(n)) snap_var[c] = c->operand(1);
    if (n->first_child) {
      Node* save_scope = b.scope();
      Node* save_before = b.before();
      b.set_insert_end(c);
      clone_list(n->children(), loop, alive);
      if (save_before) b.set_insert_before(save_before); else b.set_insert_end(save_scope);
    }
    return c;
  }
  // Clones `list` at the insertion point; once a statement may have jumped out of `loop`, the
  // rest of the list runs under if_(alive).
  std::vector<Node*> clone_list(const std::vector<Node*>& list, Node* loop, Node* alive) {
    std::vector<Node*> out;
    for (size_t k = 0; k < list.size(); ++k) {
      Node* c = clone_node(list[k], loop, alive);
      if (!c) continue;
      out.push_back(c);
      if (loop && jumps_to(list[k], loop) && k + 1 < list.size()) {
        Node* g = b.if_(snapshot(alive), alive->shape);
        out.push_back(g);
        b.set_insert_end(g);
        std::vector<Node*> rest(list.begin() + static_cast<std::ptrdiff_t>(k + 1), list.end());
        clone_list(rest, loop, alive);
        b.set_insert_end(g->parent);
        bool any = false;
        for (Node* r : rest) any |= live(r);
        if (any) live_scope.insert(g);
        return out;
      }
    }
    return out;
  }
  // Replays `body` (children of forward scope `s`) here with `map` preset for state and
  // counter; returns the top-level clones, prepared for reversal.
  std::vector<Node*> replay(Node* s, bool prepare_clone) {
    Node* alive = nullptr;
    if (s->op == Op::loop) {
      for_descendants(s, [&](Node* n) {
        if (!alive && (n->op == Op::break_ || n->op == Op::continue_) && jumps_to(n, s))
          alive = b.var(b.boolean(true), n->shape);
      });
      if (alive) {
        for_descendants(s, [&](Node* n) {
          if ((n->op == Op::break_ || n->op == Op::continue_) && jumps_to(n, s) && !same_shape(n->shape, alive->shape))
            EMBER_USER_ERROR(CompileError, n->loc, "em.grad through a loop whose break/continue differ in shape "
                                                   "is not supported");
        });
        if (s->shape.empty() && !alive->shape.empty())
          EMBER_USER_ERROR(CompileError, s->loc, "em.grad through a host loop with a per-element break/continue "
                                                 "is not supported yet; use a per-element loop (em.loop with tensor "
                                                 "bounds) or an em.kernel");
      }
    }
    std::vector<Node*> out = clone_list(s->children(), alive ? s : nullptr, alive);
    if (prepare_clone) out = prepare(out);
    return out;
  }

  // ---------------------------------------------------------------- adjoint accumulation
  // Inside a device scope every value is the running thread's: [] and the scope's shape agree.
  bool in_device() const {
    for (Node* s = b.scope(); s && s->op != Op::program; s = s->parent)
      if (device_scope(s)) return true;
    return false;
  }
  Node* fit(Node* c, const Shape& shape) {
    if (same_shape(c->shape, shape)) return c;
    if (shape.empty() && in_device()) return c;
    if (shape.empty()) return tr.reduce(ReduceKind::sum, c, {}, false);
    if (c->shape.empty()) return tr.broadcast_to(c, shape);
    EMBER_INTERNAL_ASSERT(false, "adjoint of shape " << shape_str(c->shape) << " for a value of shape " << shape_str(shape));
  }
  void contribute(Node* target, Node* c) {
    if (!c || !is_float(target) || !active.count(orig(target))) return;
    if (tr.is_detached(orig(target))) return;
    if (target->is_memory() && !valuelike(target)) {  // a memory read as a whole (scan operand)
      auto it = state.find(target);
      if (it == state.end()) return;
      std::vector<Node*> idx = coords(target->shape);
      b.atomic(AtomicKind::add, it->second, fit(c, target->shape), idx, target->shape, IndexMode::clamp);
      return;
    }
    auto r = route.find(target);
    if (r != route.end() && !r->second.var && r->second.buf) {
      add_to_buffer(r->second.buf, target, c);
      return;
    }
    if (r != route.end() && r->second.var) {
      Node* v = r->second.var;
      Node* val = v->shape.empty() || !c->shape.empty() ? c : tr.broadcast_to(c, v->shape);
      if (!same_shape(val->shape, v->shape)) val = fit(val, v->shape);
      b.set(v, b.binary(Op::add, v, val));
      return;
    }
    Node*& a = adj[target];
    c = fit(c, target->shape);
    a = a ? tr.binary(Op::add, a, c) : c;
  }
  // Adds `g` (of the load's shape) into the adjoint of what load `n` read.
  // A uniform adjoint as a tensor of `shape` (where its sum over axes or its layout matters).
  Node* spread(Node* v, const Shape& shape) {
    return v->shape.empty() && !shape.empty() ? b.raw(Op::select, v->dtype, shape, {b.boolean(true), v, v}) : v;
  }
  void scatter_adjoint(Node* n, Node* g) {
    Node* src = n->operand(0);
    std::vector<Node*> idx(n->operands.begin() + 1, n->operands.end());
    g = fit(g, n->shape);
    if (src->is_memory() && !valuelike(src)) {
      auto it = state.find(src);
      if (it != state.end()) b.atomic(AtomicKind::add, it->second, g, idx, n->shape, n->mode);
      return;
    }
    if (!active.count(orig(src)) || tr.is_detached(orig(src))) return;
    auto r = route.find(src);
    if (r != route.end() && r->second.buf) {
      if (src->shape.empty()) idx = {b.i32(0)};
      b.atomic(AtomicKind::add, r->second.buf, g, idx, n->shape, n->mode);
      return;
    }
    // Broadcasts, transposes and size-1 axes: a sum over the unused axes and a permutation.
    const Shape& S = src->shape;
    std::vector<int> used(S.size(), -1);
    bool simple = !b.scope() || !device_scope(b.scope()) ? true : false;
    simple = simple && r == route.end() && idx.size() == S.size();
    uint32_t taken = 0;
    for (size_t k = 0; simple && k < idx.size(); ++k) {
      Node* i = idx[k];
      if (i->op == Op::index && same_shape(i->shape, n->shape) && same_dim(S[k], n->shape[static_cast<size_t>(i->axis)]) &&
          !(taken >> i->axis & 1)) {
        used[k] = i->axis;
        taken |= 1u << i->axis;
      } else if (i->op == Op::constant && i->i() == 0 && const_dim(S[k]) == 1) {
        used[k] = -2;
      } else {
        simple = false;
      }
    }
    if (simple && n->shape.size() <= 32) {
      // Deferred (flush()): several broadcast reads of one value (X[:, None] and X[None, :])
      // become one reduction of the sum of their adjoints.
      pending[src].push_back(Term{spread(g, n->shape), used, n->shape});
      return;
    }
    Node* buf = tr.zeros(S, DType::f32);
    b.atomic(AtomicKind::add, buf, g, idx, n->shape, n->mode);
    contribute(src, tr.value(buf));
  }

  // Adjoint of a broadcast/permuted read of a value: `g` over the read's shape `nshape`; used[a]
  // is the read's axis that the value's axis a is indexed by (-2: a size-1 axis read at 0).
  struct Term { Node* g; std::vector<int> used; Shape nshape; };
  std::unordered_map<const Node*, std::vector<Term>> pending;
  static std::vector<int> dropped(const Term& t) {
    std::vector<int> d;
    for (int a = 0; a < static_cast<int>(t.nshape.size()); ++a)
      if (std::find(t.used.begin(), t.used.end(), a) == t.used.end()) d.push_back(a);
    return d;
  }
  // Sums the deferred terms of `src` into its adjoint: terms whose reads differ by a
  // permutation of the read's axes are added (one gathered at permuted coordinates) before
  // one reduction over the dropped axes, so they share one loop.
  void flush(Node* src) {
    auto it = pending.find(src);
    if (it == pending.end()) return;
    std::vector<Term> terms = std::move(it->second);
    pending.erase(it);
    std::vector<bool> done(terms.size(), false);
    const Shape& S = src->shape;
    for (size_t i = 0; i < terms.size(); ++i) {
      if (done[i]) continue;
      const Term& base = terms[i];
      std::vector<int> bd = dropped(base);
      Node* h = base.g;
      for (size_t j = i + 1; j < terms.size(); ++j) {
        const Term& o = terms[j];
        if (done[j] || o.nshape.size() != base.nshape.size()) continue;
        std::vector<int> od = dropped(o);
        if (od.size() != bd.size()) continue;
        std::vector<int> from(o.nshape.size(), -1);  // o's axis q takes base's axis from[q]
        bool ok = true;
        for (size_t a = 0; a < S.size() && ok; ++a) {
          if ((o.used[a] == -2) != (base.used[a] == -2)) ok = false;
          else if (o.used[a] >= 0) from[static_cast<size_t>(o.used[a])] = base.used[a];
        }
        for (size_t k = 0; k < od.size(); ++k) from[static_cast<size_t>(od[k])] = bd[k];
        std::vector<Node*> idx;
        for (size_t q = 0; q < from.size() && ok; ++q) {
          ok = from[q] >= 0 && same_dim(o.nshape[q], base.nshape[static_cast<size_t>(from[q])]);
          if (ok) idx.push_back(b.index(from[q], base.nshape));
        }
        if (!ok) continue;
        bool same = true;
        std::vector<int> moved;
        for (size_t q = 0; q < from.size(); ++q) {
          same &= from[q] == static_cast<int>(q);
          if (from[q] != static_cast<int>(q)) moved.push_back(static_cast<int>(q));
        }
        // A swap of two axes of a (anti)symmetric adjoint needs no gather: the same values
        // (negated), so both reads' adjoints share one computation.
        int sym = moved.size() == 2 && from[static_cast<size_t>(moved[0])] == moved[1] ? symmetry(o.g, moved[0], moved[1]) : 0;
        Node* add = same || sym == 1 ? o.g : sym == -1 ? tr.unary(Op::neg, o.g) : b.load(o.g, idx, base.nshape, IndexMode::clamp);
        h = tr.binary(Op::add, h, add);
        done[j] = true;
      }
      Node* s = bd.empty() ? h : tr.reduce(ReduceKind::sum, h, bd, false);
      // s's axes are the read's kept axes in order; gather them into src's axis order.
      std::vector<int> kept;
      for (int a = 0; a < static_cast<int>(base.nshape.size()); ++a)
        if (std::find(bd.begin(), bd.end(), a) == bd.end()) kept.push_back(a);
      std::vector<Node*> sidx;
      bool identity = true;
      for (size_t q = 0; q < kept.size(); ++q) {
        size_t k = static_cast<size_t>(std::find(base.used.begin(), base.used.end(), kept[q]) - base.used.begin());
        sidx.push_back(b.index(static_cast<int>(k), S));
        identity &= kept.size() == S.size() && k == q;
      }
      contribute(src, identity || kept.empty() || s->shape.empty() ? s : b.load(s, sidx, S, IndexMode::clamp));
    }
  }
  // Symmetry of value `v` under swapping axes a0 and a1 of its shape: +1 unchanged, -1 negated,
  // 0 unknown. Structural: X[:, None] - X[None, :] is antisymmetric, its square symmetric, and
  // so on through elementwise math, relabeling gathers and reductions over other axes.
  std::map<std::tuple<const Node*, int, int>, int> sym_memo;
  bool refers(const Node* e, int axis, const Shape& shape, int depth = 0) {
    if (e->op == Op::index) return e->axis == axis && same_shape(e->shape, shape);
    if (e->shape.empty() || depth > 16) return e->shape.empty() ? false : true;
    for (const Node* o : e->operands)
      if (!o->is_memory() && refers(o, axis, shape, depth + 1)) return true;
    return e->op == Op::var || e->op == Op::loop || e->op == Op::reduce;
  }
  bool swapped_loads(const Node* x, const Node* y, int a0, int a1) {
    if (x->op != Op::load || y->op != Op::load || x->operand(0) != y->operand(0) || x->mode != y->mode ||
        x->num_operands() != y->num_operands() || !same_shape(x->shape, y->shape))
      return false;
    for (int k = 1; k < x->num_operands(); ++k) {
      const Node* p = x->operand(k);
      const Node* q = y->operand(k);
      auto is = [&](const Node* n, int a) { return n->op == Op::index && n->axis == a && same_shape(n->shape, x->shape); };
      if ((is(p, a0) && is(q, a1)) || (is(p, a1) && is(q, a0))) continue;
      if (p == q && !refers(p, a0, x->shape) && !refers(p, a1, x->shape)) continue;
      return false;
    }
    return true;
  }
  int symmetry(Node* v, int a0, int a1, int depth = 0) {
    if (v->shape.empty()) return 1;
    if (depth > 64 || std::max(a0, a1) >= v->rank() || !same_dim(v->shape[static_cast<size_t>(a0)], v->shape[static_cast<size_t>(a1)]))
      return 0;
    auto key = std::make_tuple(static_cast<const Node*>(v), a0, a1);
    auto it = sym_memo.find(key);
    if (it != sym_memo.end()) return it->second;
    auto S = [&](Node* x) { return symmetry(x, a0, a1, depth + 1); };
    int r = 0;
    switch (v->op) {
      case Op::constant: r = 1; break;
      case Op::index: r = v->axis == a0 || v->axis == a1 ? 0 : 1; break;
      case Op::neg: case Op::sin: case Op::tan: case Op::tanh: case Op::sinh: case Op::asin: case Op::atan:
      case Op::sign: case Op::trunc: case Op::cast:
        r = S(v->operand(0)); break;
      case Op::abs: case Op::cos: case Op::cosh: r = S(v->operand(0)) != 0 ? 1 : 0; break;
      case Op::add: case Op::sub:
        if (swapped_loads(v->operand(0), v->operand(1), a0, a1)) { r = v->op == Op::add ? 1 : -1; break; }
        { int x = S(v->operand(0)), y = S(v->operand(1)); r = x == y ? x : 0; }
        break;
      case Op::mul: case Op::div: r = S(v->operand(0)) * S(v->operand(1)); break;
      case Op::select: {
        int c = S(v->operand(0)), x = S(v->operand(1)), y = S(v->operand(2));
        r = c == 1 && x == y ? x : 0;
        break;
      }
      case Op::load: {
        Node* src = v->operand(0);
        int k0 = -1, k1 = -1;
        bool ok = true;
        for (int k = 1; k < v->num_operands() && ok; ++k) {
          Node* i = v->operand(k);
          bool is0 = i->op == Op::index && i->axis == a0 && same_shape(i->shape, v->shape);
          bool is1 = i->op == Op::index && i->axis == a1 && same_shape(i->shape, v->shape);
          if (is0) k0 = k - 1; else if (is1) k1 = k - 1;
          else ok = !refers(i, a0, v->shape) && !refers(i, a1, v->shape);
        }
        if (!ok) break;
        if (k0 < 0 && k1 < 0) { r = 1; break; }
        if (k0 >= 0 && k1 >= 0 && !src->is_memory() && v->num_operands() - 1 == src->rank()) r = symmetry(src, k0, k1, depth + 1);
        break;
      }
      case Op::reduce: {
        Node* x = v->operand(0);
        std::vector<int> in;  // result axis -> operand axis
        for (int a = 0; a < x->rank(); ++a)
          if (!(v->axes >> a & 1) || v->keepdims) in.push_back(a);
        int c0 = in[static_cast<size_t>(a0)], c1 = in[static_cast<size_t>(a1)];
        auto k = static_cast<ReduceKind>(v->kind);
        if (!(v->axes >> c0 & 1) && !(v->axes >> c1 & 1) && (k == ReduceKind::sum || k == ReduceKind::max || k == ReduceKind::min))
          r = S(x) == 1 || (k == ReduceKind::sum && S(x) == -1) ? symmetry(x, c0, c1, depth + 1) : 0;
        break;
      }
      default:
        if (has_flag(v->op, F_ELEMENTWISE)) {  // any function of symmetric operands is symmetric
          r = 1;
          for (Node* o : v->operands) r = r == 1 && S(o) == 1 ? 1 : 0;
        }
        break;
    }
    sym_memo[key] = r;
    return r;
  }

  void flush_all() {
    while (!pending.empty()) flush(const_cast<Node*>(pending.begin()->first));
  }

  // ---------------------------------------------------------------- reverse sweep
  void make_state_adjoints(const std::vector<Node*>& list) {
    for (Node* n : list) {
      if (n->dead || !live(n) || !is_float(n)) continue;
      if (n->op == Op::var && !state.count(n)) state[n] = new_var(zero(), n->shape);
      if (n->op == Op::buffer && !valuelike(n) && !state.count(n)) state[n] = tr.zeros(n->shape, DType::f32);
    }
  }
  void reverse_list(const std::vector<Node*>& list) {
    make_state_adjoints(list);
    for (auto it = list.rbegin(); it != list.rend(); ++it) reverse_node(*it);
  }
  Node* read_state(Node* v) { return snapshot(state.at(v)); }

  void reverse_node(Node* n) {
    // Our own instrumentation (tapes, entry copies, counters) reads state without changing it:
    // its copies share the originals' adjoints.
    if (n->dead || instr.count(n) || has_flag(n->op, F_LEAF)) return;
    b.loc = n->loc;
    if (n->is_scope()) {
      if (skip.count(n) || !live(n)) return;
      reverse_scope(n);
      return;
    }
    switch (n->op) {
      case Op::set: {
        Node* v = n->operand(0);
        if (!state.count(v)) return;
        contribute(n->operand(1), read_state(v));
        b.set(state[v], zeros_like_shape(v->shape));
        return;
      }
      case Op::var:
        if (state.count(n)) contribute(n->operand(0), read_state(n));
        return;
      case Op::store: case Op::atomic: {
        Node* mem = n->operand(0);
        auto it = state.find(mem);
        if (it == state.end()) return;
        if (n->op == Op::atomic && static_cast<AtomicKind>(n->kind) != AtomicKind::add) {
          if (active.count(orig(n->operand(1))))
            EMBER_USER_ERROR(CompileError, n->loc, "em.grad through em.atomic_" << atomic_kind_name(static_cast<AtomicKind>(n->kind))
                                                       << " is not supported (only em.atomic_add is differentiated)");
          return;
        }
        std::vector<Node*> idx(n->operands.begin() + 2, n->operands.end());
        Node* g = b.load(it->second, idx, n->shape, n->mode);
        contribute(n->operand(1), g);
        if (n->op == Op::store) b.store(it->second, zeros_like_shape(n->shape), idx, n->shape, n->mode);
        return;
      }
      default: break;
    }
    if (getenv("EMBER_AD_DEBUG")) fprintf(stderr, "rev %%%d %s live=%d adj=%d\n", n->id, op_name(n->op), (int)live(n), (int)adj.count(n));
    if (!live(n)) return;
    flush(n);
    auto ai = adj.find(n);
    if (ai == adj.end()) return;
    Node* g = ai->second;
    adj.erase(ai);
    if (xset.count(n)) xadj[n] = g;  // an x's gradient; it still flows on to what x depends on
    if (snap_var.count(n)) {
      Node* v = snap_var[n];
      auto it = state.find(v);
      if (it != state.end()) b.set(it->second, b.binary(Op::add, it->second, fit(g, v->shape)));
      return;
    }
    if (has_flag(n->op, F_ELEMENTWISE) || n->op == Op::select) {
      // A masked adjoint (where(c, a, 0): what a where passed to one side) keeps its mask
      // outside the rule, so the side that was not taken contributes exactly 0 even where its
      // derivative is not finite (where(x > 0, sqrt(x), 0) at x < 0).
      Node* mask = nullptr;
      bool taken = true;
      auto zero_const = [](Node* z) { return z->op == Op::constant && z->bits == 0; };
      if (g->op == Op::select && !snap_var.count(g) && g->operand(0)->op != Op::constant) {
        if (zero_const(g->operand(2))) mask = g->operand(0), g = g->operand(1);
        else if (zero_const(g->operand(1))) mask = g->operand(0), g = g->operand(2), taken = false;
      }
      std::vector<Node*> cs = elementwise_vjp(tr, n, g);
      if (mask)
        for (Node*& c : cs)
          if (c) c = taken ? tr.select(mask, c, zero()) : tr.select(mask, zero(), c);
      for (int i = 0; i < n->num_operands() && i < static_cast<int>(cs.size()); ++i) contribute(n->operand(i), cs[i]);
      return;
    }
    switch (n->op) {
      case Op::load: scatter_adjoint(n, g); return;
      case Op::reduce: reverse_reduce(n, g); return;
      case Op::scan: {
        // y = cumsum(x) along a: x_bar = reverse cumsum of y_bar.
        Node* gs = spread(fit(g, n->shape), n->shape);
        Node* r = tr.flip(tr.prefix_sum(tr.flip(gs, {n->axis}), n->axis), {n->axis});
        contribute(n->operand(0), r);
        return;
      }
      default:
        EMBER_INTERNAL_ASSERT(has_derivative_rule(n->op), "no derivative rule for " << op_name(n->op));
    }
  }

  // The adjoint of a reduction, broadcast back over the reduced axes.
  void reverse_reduce(Node* n, Node* g) {
    Node* x = n->operand(0);
    g = fit(g, n->shape);
    // Coordinates of x's shape into the (keepdims or not) reduced shape.
    std::vector<Node*> idx;
    for (int a = 0, k = 0; a < x->rank(); ++a) {
      bool red = n->axes >> a & 1;
      if (red && !n->keepdims) continue;
      idx.push_back(red ? b.i32(0) : b.index(a, x->shape));
      ++k;
    }
    auto back = [&](Node* v) { return v->shape.empty() ? tr.broadcast_to(v, x->shape) : b.load(v, idx, x->shape, IndexMode::clamp); };
    Node* gb = back(g);
    switch (static_cast<ReduceKind>(n->kind)) {
      case ReduceKind::sum: contribute(x, gb); return;
      case ReduceKind::prod: contribute(x, tr.binary(Op::mul, gb, prod_partial(tr, n))); return;
      case ReduceKind::max: case ReduceKind::min: {
        // Split evenly between the elements equal to the extreme (the subgradient JAX uses).
        Node* hit = tr.binary(Op::eq, x, back(n));
        Node* one = tr.select(hit, tr.constant(1.0, DType::f32), zero());
        std::vector<int> axes;
        for (int a = 0; a < x->rank(); ++a)
          if (n->axes >> a & 1) axes.push_back(a);
        Node* cnt = tr.reduce(ReduceKind::sum, one, axes, n->keepdims);
        contribute(x, tr.binary(Op::div, tr.binary(Op::mul, gb, one), back(cnt)));
        return;
      }
      default: return;
    }
  }

  // Values defined outside scope `s` whose adjoints the reverse of `s` contributes to.
  void outer_targets(Node* s, std::vector<Node*>& direct, std::vector<Node*>& gathered) {
    auto add = [](std::vector<Node*>& l, Node* x) { if (std::find(l.begin(), l.end(), x) == l.end()) l.push_back(x); };
    auto visit = [&](Node* n) {
      if (!live(n) || n->is_scope()) return;
      for (int i = 0; i < n->num_operands(); ++i) {
        Node* o = n->operand(i);
        if (o->inside(s) || (o->is_memory() && !valuelike(o)) || o->op == Op::var || !is_float(o) || !active.count(orig(o))) continue;
        if (o->op == Op::loop || o->op == Op::constant) continue;
        if (n->op == Op::load && i == 0) add(gathered, o); else add(direct, o);
      }
    };
    for_descendants(s, visit);
    if (s->op == Op::if_ && s->next && s->next->op == Op::else_) for_descendants(s->next, visit);
  }

  // Opens accumulators for the adjoints of values outside `s` (at the current point, before
  // the reverse construct) and returns the saved routes.
  struct Saved { std::unordered_map<const Node*, Route> route; std::vector<std::pair<Node*, Route>> opened; };
  Saved open_routes(Node* s) {
    Saved sv;
    sv.route = route;
    std::vector<Node*> direct, gathered;
    outer_targets(s, direct, gathered);
    const bool dev = device_scope(s);
    // Inside the reverse of a kernel or per-element scope, values from outside it already have
    // buffer routes (no buffers can be made here); only that scope's own values get new ones.
    if (device_emission_scope()) {
      auto keep = [&](std::vector<Node*>& l) {
        l.erase(std::remove_if(l.begin(), l.end(), [&](Node* t) { return route.count(t) > 0; }), l.end());
      };
      keep(direct);
      keep(gathered);
      EMBER_INTERNAL_ASSERT(gathered.empty(), "a gather inside a per-thread scope from a value of that scope");
    }
    for (Node* t : direct) flush(t);
    for (Node* t : gathered) flush(t);
    for (Node* t : direct) {
      Route r;
      if (s->op == Op::kernel) {
        r.buf = tr.zeros(t->shape.empty() ? Shape{b.i32(1)} : t->shape, DType::f32);  // scalars: [1]
      } else {
        Shape vs = dev && t->shape.empty() ? s->shape : t->shape;
        Node* init = zeros_like_shape(vs);
        if (!dev || !t->shape.empty()) {
          auto a = adj.find(t);
          if (a != adj.end() && route.find(t) == route.end()) { init = fit(a->second, vs); adj.erase(a); }
        }
        r.var = new_var(init, vs);
      }
      route[t] = r;
      sv.opened.push_back({t, r});
    }
    for (Node* t : gathered) {
      Route r = route.count(t) && std::find(direct.begin(), direct.end(), t) != direct.end() ? route[t] : Route{};
      r.buf = tr.zeros(t->shape.empty() ? Shape{b.i32(1)} : t->shape, DType::f32);
      r.var = s->op == Op::kernel ? nullptr : r.var;
      route[t] = r;
      bool found = false;
      for (auto& o : sv.opened) if (o.first == t) { o.second = r; found = true; }
      if (!found) sv.opened.push_back({t, r});
    }
    return sv;
  }
  void close_routes(Saved& sv) {
    route = sv.route;
    for (auto& [t, r] : sv.opened) {
      if (r.var) contribute(t, r.var->shape.empty() ? snapshot(r.var) : snapshot(r.var));
      if (r.buf) {
        Node* v = tr.value(r.buf);
        if (t->shape.empty()) v = b.load(r.buf, {b.i32(0)}, {}, IndexMode::clamp);
        contribute(t, v);
      }
    }
  }

  // The innermost device scope being emitted into (kernel, per-element if/loop), or null.
  Node* device_emission_scope() const {
    for (Node* s = b.scope(); s && s->op != Op::program; s = s->parent)
      if (device_scope(s)) return s;
    return nullptr;
  }
  // Adds contribution `c` to outer value `t` through its accumulator buffer: in a device scope
  // the running thread's element (atomic: a scalar gets one from every thread), at host level
  // the whole tensor.
  void add_to_buffer(Node* buf, Node* t, Node* c) {
    Node* dev = device_emission_scope();
    if (dev) {
      const Shape& S = dev->shape;
      EMBER_INTERNAL_ASSERT(t->shape.empty() || same_shape(t->shape, S), "per-thread adjoint of a value of shape "
                                                                           << shape_str(t->shape) << " in a scope of shape "
                                                                           << shape_str(S));
      std::vector<Node*> idx = t->shape.empty() ? std::vector<Node*>{b.i32(0)} : coords(S);
      b.atomic(AtomicKind::add, buf, c, idx, S, IndexMode::clamp);
      return;
    }
    std::vector<Node*> idx = t->shape.empty() ? std::vector<Node*>{b.i32(0)} : coords(t->shape);
    b.atomic(AtomicKind::add, buf, fit(c, t->shape), idx, t->shape, IndexMode::clamp);
  }

  void reverse_scope(Node* s) {
    Node* els = nullptr;
    Node* iff = s;
    if (s->op == Op::else_) {
      els = s;
      iff = s->prev;
      EMBER_INTERNAL_ASSERT(iff && iff->op == Op::if_, "else without if");
      skip.insert(iff);
    }
    const Node* key = iff;
    auto ei = entry.find(key);
    EMBER_INTERNAL_ASSERT(ei != entry.end(), "scope %" << s->id << " was not prepared for reversal");
    Entry& e = ei->second;
    Saved sv = open_routes(iff);
    if (els) {
      Saved sv2 = open_routes(els);
      for (auto& o : sv2.opened) sv.opened.push_back(o);
    }
    switch (iff->op) {
      case Op::if_: {
        for (int branch = 0; branch < (els ? 2 : 1); ++branch) {
          Node* body = branch == 0 ? iff : els;
          if (branch == 0) tr.begin_if(iff->operand(0)); else tr.begin_else();
          map.clear();
          restore_state(e, e.vals);
          reverse_list(replay(body, true));
          tr.end_scope();
        }
        break;
      }
      case Op::kernel: {
        std::vector<Node*> idx = tr.begin_kernel(iff->shape);
        (void)idx;
        map.clear();
        kernel_ = iff;
        restore_state(e, e.vals);
        reverse_list(replay(iff, true));
        kernel_ = nullptr;
        tr.end_scope();
        break;
      }
      case Op::loop:
        if (e.host_loop) reverse_host_loop(iff, e); else reverse_device_loop(iff, e);
        break;
      default:
        EMBER_INTERNAL_ASSERT(false, "cannot reverse " << op_name(iff->op));
    }
    close_routes(sv);
  }
  Node* kernel_ = nullptr;

  // Maps the state of `e` to local copies for a replay: vars to new vars initialized from
  // `vals` (entry snapshots or taped values), memories to their copies; the copies' adjoints are
  // the originals'.
  void restore_state(Entry& e, const std::vector<Node*>& vals) {
    size_t k = 0;
    for (Node* v : e.vars) {
      Node* lv = new_var(vals[k++], v->shape);
      map[v] = lv;
      origin[lv] = v;
      if (state.count(v)) state[lv] = state[v];
    }
    for (size_t i = 0; i < e.mems.size(); ++i) {
      Node* mem = e.mems[i];
      Node* lm = vals[k++];
      map[mem] = lm;
      if (lm == mem) continue;
      origin[lm] = mem;
      if (state.count(mem)) state[lm] = state[mem];
    }
  }

  // Segments of K iterations, last first: restore the segment's checkpoint, run it forward
  // once keeping each iteration's state in a segment tape, then reverse its iterations.
  void reverse_host_loop(Node* l, Entry& e) {
    Node* one = b.i32(1);
    Node* cnt = snapshot(e.count);
    Node* nseg = b.binary(Op::div, b.binary(Op::add, cnt, b.binary(Op::sub, e.every, one)), e.every);
    const size_t n = e.vars.size() + e.mems.size();
    auto item = [&](size_t k) { return k < e.vars.size() ? e.vars[k] : e.mems[k - e.vars.size()]; };
    auto slice = [&](Node* tape, Node* at, Node* x) {  // tape[at] as a value of x's shape
      std::vector<Node*> c = coords(x->shape);
      std::vector<Node*> idx{at};
      idx.insert(idx.end(), c.begin(), c.end());
      return b.load(tape, idx, x->shape, IndexMode::unsafe);
    };
    auto restored = [&](Node* tape, Node* at, Node* x) -> Node* {  // a var's value, or a memory copy
      Node* v = slice(tape, at, x);
      if (x->op == Op::var) return v;
      Node* copy = b.buffer(x->dtype, x->shape, false);
      b.store(copy, v, coords(x->shape), x->shape, IndexMode::clamp);
      return copy;
    };
    std::vector<Node*> seg(n, nullptr);
    for (size_t k = 0; k < n; ++k)
      if (e.tapes[k]) {
        Node* x = item(k);
        Shape ts{e.every};
        ts.insert(ts.end(), x->shape.begin(), x->shape.end());
        seg[k] = b.buffer(x->dtype, ts, false);
        seg[k]->name = "tape";
      }
    Node* rs = tr.begin_loop(b.i32(0), nseg, one);
    Node* sidx = b.binary(Op::sub, b.binary(Op::sub, nseg, one), rs);
    Node* start = b.binary(Op::mul, sidx, e.every);
    Node* len = b.binary(Op::min, e.every, b.binary(Op::sub, cnt, start));
    std::vector<Node*> vals = e.vals;
    for (size_t k = 0; k < n; ++k)
      if (e.tapes[k]) vals[k] = restored(e.tapes[k], sidx, item(k));
    map.clear();
    restore_state(e, vals);
    Node* j = tr.begin_loop(b.i32(0), len, one);
    for (size_t k = 0; k < n; ++k) {
      if (!seg[k]) continue;
      Node* x = item(k);
      Node* cur = map.at(x);
      std::vector<Node*> c = coords(x->shape);
      std::vector<Node*> idx{j};
      idx.insert(idx.end(), c.begin(), c.end());
      Node* v = cur->op == Op::var ? snapshot(cur) : b.load(cur, c, x->shape, IndexMode::clamp);
      b.store(seg[k], v, idx, x->shape, IndexMode::unsafe);
    }
    auto saved = map;
    map[l] = b.binary(Op::add, l->operand(0), b.binary(Op::mul, b.binary(Op::add, start, j), l->operand(2)));
    replay(l, false);
    map = saved;
    tr.end_scope();
    Node* rj = tr.begin_loop(b.i32(0), len, one);
    Node* jj = b.binary(Op::sub, b.binary(Op::sub, len, one), rj);
    Node* t = b.binary(Op::add, start, jj);
    vals = e.vals;
    for (size_t k = 0; k < n; ++k)
      if (seg[k]) vals[k] = restored(seg[k], jj, item(k));
    map.clear();
    restore_state(e, vals);
    map[l] = b.binary(Op::add, l->operand(0), b.binary(Op::mul, t, l->operand(2)));
    reverse_list(replay(l, true));
    tr.end_scope();
    tr.end_scope();
  }

  // Per-thread loops: iteration t's state is recomputed from the entry snapshot (t forward
  // iterations), then iteration t is replayed and reversed. No tape; quadratic in the trips.
  void reverse_device_loop(Node* l, Entry& e) {
    Node* r = tr.begin_loop(b.i32(0), e.count, b.i32(1));
    Node* t = tr.binary(Op::sub, tr.binary(Op::sub, e.count, b.i32(1)), r);
    bool taped = true;  // every var the body sets is taped (or it sets none)
    for (size_t k = 0; k < e.vars.size(); ++k) taped &= !e.var_set[k] || e.tapes[k] != nullptr;
    if (taped) {  // restore iteration t's state from the per-thread tape
      std::vector<Node*> vals = e.vals;
      for (size_t k = 0; k < e.vars.size(); ++k) {
        if (!e.tapes[k]) continue;
        std::vector<Node*> idx{t};
        std::vector<Node*> c = coords(l->shape);
        idx.insert(idx.end(), c.begin(), c.end());
        vals[k] = b.load(e.tapes[k], idx, l->shape, IndexMode::unsafe);
      }
      map.clear();
      restore_state(e, vals);
      map[l] = tr.binary(Op::add, l->operand(0), tr.binary(Op::mul, t, l->operand(2)));
      reverse_list(replay(l, true));
      tr.end_scope();
      return;
    }
    map.clear();
    restore_state(e, e.vals);
    auto saved = map;
    Node* j = tr.begin_loop(b.i32(0), t, b.i32(1));
    map[l] = tr.binary(Op::add, l->operand(0), tr.binary(Op::mul, j, l->operand(2)));
    replay(l, false);
    tr.end_scope();
    map = saved;
    map[l] = tr.binary(Op::add, l->operand(0), tr.binary(Op::mul, t, l->operand(2)));
    reverse_list(replay(l, true));
    tr.end_scope();
  }
};

}  // namespace

std::vector<Node*> grad(Tracer& tr, Node* y, const std::vector<Node*>& xs, Node* dy) {
  Builder& b = tr.builder();
  const SourceLoc loc = tr.loc();
  Node* scope = b.scope();
  EMBER_INTERNAL_ASSERT(!b.before(), "em.grad must be traced at the end of its scope");
  for (Node* s = scope; s && s->op != Op::program; s = s->parent)
    if (s->op == Op::kernel && !s->group.empty())
      EMBER_USER_ERROR(CompileError, loc, "em.grad inside a kernel with workgroups is not supported");
  // Inside a kernel or per-element scope, x must belong to it (the outermost such scope).
  Node* dev_root = nullptr;
  for (Node* s = scope; s && s->op != Op::program; s = s->parent)
    if (device_scope(s)) dev_root = s;
  const bool in_device = dev_root != nullptr;
  Reverse R(tr);
  if (y->op == Op::var) y = R.snapshot(y);
  y = tr.value(y);
  for (Node* x : xs)
    if (in_device && !x->inside(dev_root))
      EMBER_USER_ERROR(CompileError, loc, "em.grad inside a kernel or per-element scope differentiates with respect "
                                          "to values of that scope; this x is defined outside it (call em.grad at "
                                          "host level to differentiate with respect to an argument)");
  R.analyze(xs, y);
  for (Node* x : xs) R.xset.insert(x);
  std::vector<Node*> region = R.prepare(scope->children());
  b.set_insert_end(scope);
  b.loc = loc;
  // Adjoint state for live vars and memories defined before the region (and memory xs).
  for (Node* n : R.p.nodes()) {
    if (n->dead || n->inside(scope) || !is_float(n)) continue;
    if ((n->op == Op::var || (n->is_memory() && !R.valuelike(n))) && R.live(n) && !R.state.count(n)) {
      if (n->is_memory() && in_device) continue;
      R.state[n] = n->op == Op::var ? R.new_var(R.zero(), n->shape) : tr.zeros(n->shape, DType::f32);
    }
  }
  for (Node* x : xs)
    if ((x->op == Op::var || (x->is_memory() && !R.valuelike(x))) && !R.state.count(x) && !in_device)
      R.state[x] = x->op == Op::var ? R.new_var(R.zero(), x->shape) : tr.zeros(x->shape, DType::f32);
  R.adj[y] = dy ? R.fit(tr.broadcast_to(tr.value(dy), y->shape), y->shape) : tr.constant(1.0, DType::f32);
  R.reverse_list(region);
  b.loc = loc;
  R.flush_all();
  std::vector<Node*> out;
  for (Node* x : xs) {
    auto st = R.state.find(x);
    if (st != R.state.end()) {
      out.push_back(x->op == Op::var ? R.snapshot(st->second) : tr.value(st->second));
      continue;
    }
    auto a = R.adj.find(x);
    auto xa = R.xadj.find(x);
    Node* g = xa != R.xadj.end() ? xa->second : a != R.adj.end() ? a->second : R.zero();
    // The result has x's shape (a uniform adjoint is spread over it).
    if (g->shape.empty() && !x->shape.empty()) g = b.raw(Op::select, DType::f32, x->shape, {b.boolean(true), g, g});
    // A result independent of later state: an identity node, so a value is never a var.
    out.push_back(g->op == Op::var ? R.snapshot(g) : g);
  }
  return out;
}

}  // namespace ember

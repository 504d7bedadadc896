// Reverse mode through scopes (struct Reverse, reverse.h; the overview is in reverse.cpp):
// replaying a scope's body on restored state (reverse_prepare.cpp records it), and the reverse
// of ifs, kernels, host loops and per-thread loops.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/autodiff/reverse.h"
#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember::autodiff_detail {

// ---------------------------------------------------------------- replay (clone)
// Whether `n` holds a break/continue of `loop` (not of a loop nested inside n).
bool Reverse::jumps_to(Node* n, Node* loop) {
  if (n->op == Op::break_ || n->op == Op::continue_) {
    Node* l = n->parent;
    while (l && l->op != Op::loop) l = l->parent;
    return l == loop;
  }
  for (Node* c = n->first_child; c; c = c->next)
    if (jumps_to(c, loop)) return true;
  return false;
}
Node* Reverse::clone_node(Node* n, Node* loop, Node* alive) {
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
std::vector<Node*> Reverse::clone_list(const std::vector<Node*>& list, Node* loop, Node* alive) {
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
std::vector<Node*> Reverse::replay(Node* s, bool prepare_clone) {
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
      EMBER_INTERNAL_ASSERT(!s->shape.empty() || alive->shape.empty(),
                            "per-element break/continue out of host loop %" << s->id << " (the tracer rejects it)");
    }
  }
  std::vector<Node*> out = clone_list(s->children(), alive ? s : nullptr, alive);
  if (prepare_clone) out = prepare(out);
  return out;
}

// ---------------------------------------------------------------- reverse of scopes
// Values defined outside scope `s` whose adjoints the reverse of `s` contributes to.
void Reverse::outer_targets(Node* s, std::vector<Node*>& direct, std::vector<Node*>& gathered) {
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
Reverse::Saved Reverse::open_routes(Node* s) {
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
void Reverse::close_routes(Saved& sv) {
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
Node* Reverse::device_emission_scope() const {
  for (Node* s = b.scope(); s && s->op != Op::program; s = s->parent)
    if (device_scope(s)) return s;
  return nullptr;
}
// Adds contribution `c` to outer value `t` through its accumulator buffer: in a device scope
// the running thread's element (atomic: a scalar gets one from every thread), at host level
// the whole tensor.
void Reverse::add_to_buffer(Node* buf, Node* t, Node* c) {
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

void Reverse::reverse_scope(Node* s) {
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
      restore_state(e, e.vals);
      reverse_list(replay(iff, true));
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

// Maps the state of `e` to local copies for a replay: vars to new vars initialized from
// `vals` (entry snapshots or taped values), memories to their copies; the copies' adjoints are
// the originals'.
void Reverse::restore_state(Entry& e, const std::vector<Node*>& vals) {
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
void Reverse::reverse_host_loop(Node* l, Entry& e) {
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
void Reverse::reverse_device_loop(Node* l, Entry& e) {
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

}  // namespace ember::autodiff_detail

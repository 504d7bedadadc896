// Reverse mode, the forward side (struct Reverse, reverse.h; the overview is in reverse.cpp):
// step 2. Var reads of live nodes read snapshots; a live scope records on entry, or per
// iteration, the state its reverse needs (snapshots, copies, tapes or checkpoints, trip counts).
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/analysis/dependence.h"
#include "core/autodiff/reverse.h"
#include "core/passes/pass_util.h"
#include "core/ir/shape.h"
#include "core/trace/tracer.h"


namespace ember::autodiff_detail {

// ---------------------------------------------------------------- prepare (forward side)
// The state of scope `s` (see Entry).
void Reverse::scope_state(Node* s, Entry& e) {
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
std::vector<Node*> Reverse::prepare(const std::vector<Node*>& list) {
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

Node* Reverse::trip_bound(Node* l) {
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

void Reverse::instrument(Node* s) {
  Node* at_scope = b.scope();
  Node* at_before = b.before();
  if (s->op != Op::kernel) {  // a rewrite of the forward code, replayed like the rest
    Entry e;
    scope_state(s, e);
    promote_own_elements(s, e);
  }
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
void Reverse::plan_checkpoints(Entry& e) {
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

// A memory that a per-thread scope reads and writes only at the running thread's own element
// (A[i] = f(A[i]) in a loop of a kernel over i) is a per-thread value: it becomes a var around
// the scope (loaded before it, stored after it), which the scope's reverse tapes or snapshots
// like any var. Same semantics: no other thread touches the element.
bool Reverse::promote_own_elements(Node* s, const Entry& e) {
  Node* k = s->enclosing_kernel();
  if (!k && device_scope(s)) k = s;
  if (!k) return false;
  bool changed = false;
  for (size_t i = 0; i < e.mems.size(); ++i) {
    if (e.mem_kind[i] != kReadWrite) continue;
    Node* m = e.mems[i];
    std::vector<Node*> acc;
    bool own = true;
    for_descendants(s, [&](Node* n) {
      if ((n->op == Op::load || n->op == Op::store || n->op == Op::atomic) && n->operand(0) == m) {
        acc.push_back(n);
        own &= n->op != Op::atomic && at_own_element(n, k) && same_shape(n->shape, k->shape);
      }
    });
    if (!own || acc.empty()) continue;
    std::vector<Node*> idx(acc[0]->operands.begin() + acc[0]->first_index_operand(), acc[0]->operands.end());
    b.set_insert_before(s);
    Node* first = b.load(m, idx, k->shape, acc[0]->mode);
    Node* v = b.var(first, k->shape);
    if (active.count(orig(m))) { mark_live(first); mark_live(v); }
    for (Node* n : acc) {
      b.set_insert_before(n);
      if (n->op == Op::load) {
        Node* r = snapshot(v);
        snap_var[r] = v;
        if (live(v)) mark_live(r);
        p.replace_all_uses(n, r);
      } else {
        Node* st = b.set(v, n->operand(1));
        if (live(v)) mark_live(st);
      }
      p.erase(n);
    }
    if (s->next) b.set_insert_before(s->next); else b.set_insert_end(s->parent);
    Node* out = snapshot(v);
    snap_var[out] = v;
    if (live(v)) mark_live(out);
    b.store(m, out, idx, k->shape, acc[0]->mode);
    changed = true;
  }
  return changed;
}

void Reverse::instrument_scope(Node* s) {
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


}  // namespace ember::autodiff_detail

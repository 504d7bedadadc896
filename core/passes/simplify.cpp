#include "core/passes/simplify.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/ir/builder.h"
#include "core/ir/eval.h"
#include "core/ir/shape.h"

namespace ember {

namespace {

bool is_const(const Node* n, double v) {
  if (n->op != Op::constant) return false;
  return n->dtype == DType::f32 ? n->f() == static_cast<float>(v) : static_cast<double>(n->i()) == v;
}

// A load of value v at exactly v's own coordinates is v.
bool identity_load(const Node* n) {
  // (A memory first: loads of memories, most of them, are told apart without reading `flat` in
  // the node's second cache line.)
  if (n->op != Op::load || n->operand(0)->is_memory() || n->flat) return false;
  const Node* v = n->operand(0);
  if (!same_shape(v->shape, n->shape) || v->rank() == 0) return false;
  for (int a = 0; a < v->rank(); ++a) {
    const Node* ix = n->operand(a + 1);
    if (ix->op != Op::index || ix->axis != a || !same_shape(ix->shape, n->shape)) return false;
  }
  return true;
}

// r when it can stand in for n (it has n's shape), else null.
Node* same_as(const Node* n, Node* r) { return r && same_shape(r->shape, n->shape) ? r : nullptr; }

// A finite f32 constant +-2^k: scaling by it commutes with rounding (barring over/underflow).
bool is_pow2_const(const Node* n) {
  if (n->op != Op::constant || n->dtype != DType::f32) return false;
  int e = 0;
  const float m = std::frexp(std::fabs(n->f()), &e);
  return std::isfinite(n->f()) && m == 0.5f;
}

// Splits an f32 mul into (non-constant, constant) operands, or returns false.
bool mul_by_const(const Node* n, Node*& x, Node*& c) {
  if (n->op != Op::mul || n->dtype != DType::f32) return false;
  Node* a = n->operand(0);
  Node* k = n->operand(1);
  if (a->op == Op::constant) std::swap(a, k);
  if (k->op != Op::constant || a->op == Op::constant) return false;
  x = a;
  c = k;
  return true;
}

// A value that can be re-read at a later point: one use (so rewriting its user leaves it dead)
// and, for the operand it is built from, not a var (whose value could have changed since).
bool single_use(const Node* n) { return n->users.size() == 1; }
bool rereadable(const Node* n) { return !has_flag(n->op, F_MUTABLE); }

// x * k as few operations as it takes: x, -x or a multiply (null when k is not finite and nonzero).
Node* scaled(Builder& b, Node* x, float k) {
  if (!std::isfinite(k) || k == 0.0f) return nullptr;
  if (k == 1.0f) return x;
  if (k == -1.0f) return b.unary(Op::neg, x);
  return b.binary(Op::mul, x, b.f32(k));
}

// Sign and power-of-two scaling folds on f32, exact up to over/underflow: negations move into
// constants or into add/sub, and power-of-two factors move outward until they meet and merge.
// They clean up what reverse mode emits (d(x*x) = g*x + g*x, -(-0.5 * ...) * 0.5 chains).
Node* fold_scaling(Builder& b, Node* n) {
  if (n->dtype != DType::f32) return nullptr;
  Node *x, *c;
  auto same = [&](Node* r) { return same_as(n, r); };
  switch (n->op) {
    case Op::add: {
      Node* l = n->operand(0);
      Node* r = n->operand(1);
      if (l == r && l->op != Op::constant) return same(b.binary(Op::mul, l, b.f32(2.0f)));
      if (r->op == Op::neg && single_use(r) && rereadable(r->operand(0)))
        return same(b.binary(Op::sub, l, r->operand(0)));
      if (l->op == Op::neg && single_use(l) && rereadable(l->operand(0)))
        return same(b.binary(Op::sub, r, l->operand(0)));
      break;
    }
    case Op::sub: {
      Node* r = n->operand(1);
      if (r->op == Op::neg && single_use(r) && rereadable(r->operand(0)))
        return same(b.binary(Op::add, n->operand(0), r->operand(0)));
      break;
    }
    case Op::neg: {
      Node* in = n->operand(0);
      if (single_use(in) && mul_by_const(in, x, c) && rereadable(x)) return same(b.binary(Op::mul, x, b.f32(-c->f())));
      break;
    }
    case Op::mul: {
      if (mul_by_const(n, x, c)) {
        Node *y, *d;
        if (x->op == Op::neg && single_use(x) && rereadable(x->operand(0)))
          return same(b.binary(Op::mul, x->operand(0), b.f32(-c->f())));
        if (single_use(x) && mul_by_const(x, y, d) && rereadable(y) && (is_pow2_const(c) || is_pow2_const(d)))
          return same(scaled(b, y, c->f() * d->f()));
        // (a * (t * d)) * c -> (a * t) * (c * d) for a power-of-two d, even when t * d has other
        // users: the product keeps its two multiplies (or fewer when c * d is +-1).
        if (single_use(x) && x->op == Op::mul && x->operand(0) != x->operand(1) && is_pow2_const(c)) {
          for (int i = 0; i < 2; ++i) {
            Node* a = x->operand(1 - i);
            if (mul_by_const(x->operand(i), y, d) && is_pow2_const(d) && rereadable(a) && rereadable(y))
              return same(scaled(b, b.binary(Op::mul, a, y), c->f() * d->f()));
          }
        }
        break;
      }
      for (int i = 0; i < 2; ++i) {
        Node* in = n->operand(i);
        Node* other = n->operand(1 - i);
        if (!single_use(in) || in == other) continue;
        if (in->op == Op::neg && rereadable(in->operand(0)))
          return same(b.unary(Op::neg, b.binary(Op::mul, in->operand(0), other)));
        Node *y, *d;
        if (mul_by_const(in, y, d) && is_pow2_const(d) && rereadable(y))
          return same(b.binary(Op::mul, b.binary(Op::mul, y, other), d));
      }
      break;
    }
    default: break;
  }
  return nullptr;
}

// Returns the node that can replace n, or null.
Node* simplify_node(Builder& b, Node* n) {
  if (identity_load(n)) return n->operand(0);
  const OpInfo& info = op_info(n->op);
  if (!(info.flags & F_ELEMENTWISE)) return nullptr;
  bool all_const = true;
  for (Node* o : n->operands) all_const &= o->op == Op::constant;
  if (all_const && n->shape.empty()) {
    uint32_t w[3] = {0, 0, 0};
    for (int i = 0; i < n->num_operands(); ++i) w[i] = n->operand(i)->bits;
    DType in = n->op == Op::select ? n->operand(1)->dtype : n->operand(0)->dtype;
    return b.constant(n->dtype, eval_elementwise(n->op, n->dtype, in, w, n->num_operands()));
  }
  auto same = [&](Node* r) { return same_as(n, r); };
  switch (n->op) {
    case Op::add:
      if (is_const(n->operand(1), 0)) return same(n->operand(0));
      if (is_const(n->operand(0), 0)) return same(n->operand(1));
      break;
    case Op::sub:
      if (is_const(n->operand(1), 0)) return same(n->operand(0));
      break;
    case Op::mul:
      if (is_const(n->operand(1), 1)) return same(n->operand(0));
      if (is_const(n->operand(0), 1)) return same(n->operand(1));
      if (n->dtype != DType::f32 && n->shape.empty() && (is_const(n->operand(0), 0) || is_const(n->operand(1), 0)))
        return b.constant(n->dtype, 0);
      break;
    case Op::div:
      if (is_const(n->operand(1), 1)) return same(n->operand(0));
      break;
    case Op::select:
      if (n->operand(0)->op == Op::constant) return same(n->operand(0)->bits ? n->operand(1) : n->operand(2));
      if (n->operand(1) == n->operand(2)) return same(n->operand(1));
      break;
    case Op::neg:
      if (n->operand(0)->op == Op::neg) return same(n->operand(0)->operand(0));
      break;
    case Op::cast:
      if (n->operand(0)->dtype == n->dtype) return n->operand(0);
      break;
    default: break;
  }
  return fold_scaling(b, n);
}

// Var forwarding: a var read where the var certainly holds a known value (its initial value, or
// the value of its last set before the read in the same or an enclosing block) reads that value
// instead. From each read, back through its earlier siblings and up through its scopes, to the
// var's last set or the var itself; it gives up at a scope that sets the var and at a loop around
// the read that sets it (an earlier iteration may have); reads inside a loop that sets the var
// (the var outside it) stay reads: the loop is an accumulation. The value must be rereadable (not a var)
// with the var's shape, or a constant (then only for pure readers: a set or store keeps its
// shape): it is visible wherever the set or the var is, so at the read too. A reduction lowered
// and unrolled (`acc = 0; acc = acc + x0; ...`) then starts from x0 once simplify folds 0 + x0.
// Every full simplify does it, for every read of every var, with no distance limit (a
// sibling scope is one step): cse and dce, which never add a set or remove one of a var still
// read, leave it nothing to find, so the cleanup's fixed point holds. It runs for each var as
// simplify's walk reaches it (its reads all come later), so it costs the walks from the reads only.
class VarForwarding {
 public:
  explicit VarForwarding(Program& p) : p_(p) {}

  // Forwards the reads of `var` it can; whether it did.
  bool forward_reads(Node* var) {
    changed_ = false;
    readers_.clear();
    setting_.clear();
    for (Node* u : var->users) {
      if (u->op == Op::set && u->operand(0) == var) {
        for (const Node* a = u->parent; a && a != var->parent; a = a->parent) setting_.push_back(a);
      }
      if (reads(u, var) && (readers_.empty() || readers_.back() != u)) readers_.push_back(u);
    }
    for (Node* r : readers_) {
      if (in_carrying_loop(r, var)) continue;
      Node* x = known_value(r, var);
      if (!x) continue;
      const bool pure = has_flag(r->op, F_PURE);
      if (x->op == Op::constant && !pure) continue;
      for (int i = r->op == Op::set ? 1 : 0; i < r->num_operands(); ++i)
        if (r->operand(i) == var) {
          p_.set_operand(r, i, x);
          changed_ = true;
        }
    }
    return changed_;
  }

 private:
  static bool reads(const Node* u, const Node* var) {
    if (u->op == Op::set) return u->operand(1) == var;
    return has_flag(u->op, F_PURE) || u->op == Op::store;
  }

  // Whether r is inside a loop that carries the var (sets it, the var being outside): there the
  // reads stay reads, so that `v = v + a; v = v + b` in a loop stays a chain of accumulations
  // (core/analysis/reductions.h), which the CPU's chunked and SIMD sums and the GPU's split
  // reductions recognize; forwarded, the second read would be the first sum, no longer the var.
  bool in_carrying_loop(const Node* r, const Node* var) const {
    for (const Node* a = r->parent; a && a != var->parent; a = a->parent)
      if (a->op == Op::loop && sets_inside(a)) return true;
    return false;
  }

  bool sets_inside(const Node* scope) const {
    return std::find(setting_.begin(), setting_.end(), scope) != setting_.end();
  }

  Node* known_value(const Node* r, Node* var) const {
    auto usable = [&](Node* x) -> Node* {
      return rereadable(x) && (x->op == Op::constant || same_shape(x->shape, var->shape)) ? x : nullptr;
    };
    for (const Node* at = r;;) {
      if (!at->prev) {
        const Node* s = at->parent;
        if (!s || s->op == Op::kernel || s->op == Op::program) return nullptr;  // the var is not before r here
        if (s->op == Op::loop && sets_inside(s)) return nullptr;  // unless the var is inside the loop: found first
        at = s;
        continue;
      }
      at = at->prev;
      ++node_visit_counter();
      if (at == var) return usable(var->operand(0));
      if (at->op == Op::set && at->operand(0) == var) return usable(at->operand(1));
      if (at->first_child && sets_inside(at)) return nullptr;
    }
  }

  Program& p_;
  bool changed_ = false;
  std::vector<Node*> readers_;        // of the var at hand
  std::vector<const Node*> setting_;  // scopes (below the var's) holding a set of it
};

// Replaces n by what simplify_node gives for it, if anything; whether it did.
bool simplify_one(Program& p, Builder& b, Node* n) {
  b.set_insert_before(n);
  b.loc_of = n;
  Node* r = simplify_node(b, n);
  if (!r || r == n) return false;
  // A var read here has the var's value at this point; the var node itself would read it
  // wherever it is used (later sets would change the result).
  if (has_flag(r->op, F_MUTABLE)) return false;
  p.replace_all_uses(n, r);
  p.erase(n);
  return true;
}
}  // namespace

bool simplify(Program& p) {
  VarForwarding forwarding(p);
  Builder b(p);
  bool changed = false;
  // During the walk (no snapshot of the nodes first: one read of each node instead of two). A
  // rewrite makes its nodes before n and erases only n, so the walk sees what a snapshot would.
  p.for_each([&](Node* n) {
    if (n->op == Op::var) changed |= forwarding.forward_reads(n);
    changed |= simplify_one(p, b, n);
  });
  return changed;
}

bool simplify_nodes(Program& p, const Resimplify& r) {
  Builder b(p);
  bool changed = false;
  uint64_t& visits = node_visit_counter();
  auto one = [&](Node* n) {
    ++visits;
    if (!n->dead) changed |= simplify_one(p, b, n);
  };
  for (Node* n : r.nodes) one(n);
  for (Node* x : r.lost)
    if (!x->dead && x->users.size() == 1) one(x->users[0]);
  return changed;
}

}  // namespace ember

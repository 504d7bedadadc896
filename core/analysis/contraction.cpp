#include "core/analysis/contraction.h"

#include <functional>
#include <unordered_map>

#include "core/ir/shape.h"

namespace ember {

namespace {

// Whether n depends on `on` (a node inside the kernel) through its operands, within kernel k.
class DependsOn {
 public:
  DependsOn(const Node* k, std::function<bool(const Node*)> leaf) : k_(k), leaf_(std::move(leaf)) {}
  bool operator()(const Node* n) {
    if (!n->inside(k_)) return false;
    auto it = memo_.find(n);
    if (it != memo_.end()) return it->second;
    bool d = leaf_(n);
    for (size_t i = 0; i < n->operands.size() && !d; ++i) {
      const Node* o = n->operands[i];
      if ((n->op == Op::load || n->op == Op::store) && i == 0) continue;  // the memory
      d = (*this)(o);
    }
    return memo_[n] = d;
  }

 private:
  const Node* k_;
  std::function<bool(const Node*)> leaf_;
  std::unordered_map<const Node*, bool> memo_;
};

// Whether index math e reads x (not through a load's memory, a var or more than 32 levels).
bool uses(const Node* e, const Node* x, int depth = 0) {
  if (e == x) return true;
  if (depth > 32) return true;  // too deep to tell: treated as dependent (and rejected)
  if (e->op == Op::var || e->is_memory()) return false;
  for (const Node* o : e->operands)
    if (uses(o, x, depth + 1)) return true;
  return false;
}

bool affine(const Node* e, const Node* loop, int depth) {
  if (e == loop) return true;
  if (depth > 32) return false;
  if (!uses(e, loop)) return e->op != Op::var;
  if (e->dtype != DType::i32) return false;
  if (e->op == Op::add || e->op == Op::sub)
    return affine(e->operand(0), loop, depth + 1) && affine(e->operand(1), loop, depth + 1);
  if (e->op == Op::mul) {
    const bool u0 = uses(e->operand(0), loop), u1 = uses(e->operand(1), loop);
    if (u0 && u1) return false;
    return affine(e->operand(u0 ? 0 : 1), loop, depth + 1) && e->operand(u0 ? 1 : 0)->op != Op::var;
  }
  return false;
}

// A coordinate of a not yet flat load that lower_indexing will leave unclamped: k itself, with
// the memory's dimension at least the loop's end.
bool in_range_k(const Node* load, int axis, const Node* loop) {
  const Node* d = load->operand(0)->shape[static_cast<size_t>(axis)];
  const Node* end = loop->operand(1);
  if (load->mode == IndexMode::wrap) return false;
  return same_dim(d, end) || (end->op == Op::constant && const_dim(d) >= end->i());
}

bool addressable(const Node* load, const Node* loop) {
  const Node* mem = load->operand(0);
  if (!mem->is_memory() || mem->dtype != DType::f32 || load->dtype != DType::f32) return false;
  const int first = load->first_index_operand();
  if (load->flat) return k_affine(load->operand(first), loop);
  for (int a = 0; a < mem->rank(); ++a) {
    const Node* c = load->operand(first + a);
    if (c == loop) {
      if (!in_range_k(load, a, loop)) return false;
    } else if (uses(c, loop)) {
      return false;
    }
  }
  return true;
}

bool contraction_loop(const Node* k, const Node* l, Contraction* c) {
  if (l->op != Op::loop) return false;
  const Node* b = l->operand(0);
  const Node* e = l->operand(1);
  const Node* s = l->operand(2);
  if (b->op != Op::constant || b->i() != 0 || s->op != Op::constant || s->i() != 1) return false;
  if (e->op != Op::constant && e->inside(k)) return false;
  const Node* set = nullptr;
  std::vector<const Node*> loads;
  for (const Node* n = l->first_child; n; n = n->next) {
    if (n->first_child || n->is_scope()) return false;
    if (n->op == Op::set) {
      if (set) return false;
      set = n;
    } else if (n->op == Op::load && n->dtype == DType::f32) {
      loads.push_back(n);
    } else if (n->dtype == DType::f32 && (n->op == Op::mul || n->op == Op::add)) {
      // checked through the set below
    } else if (!(has_flag(n->op, F_PURE) || n->op == Op::load) || n->dtype == DType::f32 ||
               n->dtype == DType::none) {
      return false;
    }
  }
  if (!set || loads.size() != 2) return false;
  const Node* var = set->operand(0);
  const Node* add = set->operand(1);
  if (var->op != Op::var || var->parent != k || var->dtype != DType::f32) return false;
  const Node* init = var->operand(0);
  // -0.0: a lowered sum's start (core/ir/eval.h, reduce_start), as ember_gemm::run's sums start.
  if (init->op != Op::constant || init->bits != 0x80000000u) return false;
  if (add->op != Op::add || add->parent != l || add->users.size() != 1) return false;
  const Node* mul = add->operand(0) == var ? add->operand(1) : add->operand(1) == var ? add->operand(0) : nullptr;
  if (!mul || mul->op != Op::mul || mul->parent != l || mul->users.size() != 1) return false;
  const Node* la = mul->operand(0);
  const Node* lb = mul->operand(1);
  if (la == lb || !((la == loads[0] && lb == loads[1]) || (la == loads[1] && lb == loads[0]))) return false;
  if (la->users.size() != 1 || lb->users.size() != 1) return false;
  // The f32 nodes of the body are exactly the loads, the product and the add.
  int f32_nodes = 0;
  for (const Node* n = l->first_child; n; n = n->next) f32_nodes += n->dtype == DType::f32;
  if (f32_nodes != 4) return false;
  for (const Node* u : var->users)
    if (u->op == Op::set && u != set) return false;
  if (!addressable(la, l) || !addressable(lb, l)) return false;
  const int r = k->rank();
  DependsOn on_i(k, [&](const Node* n) { return n->op == Op::index && n->axis == r - 2; });
  DependsOn on_j(k, [&](const Node* n) { return n->op == Op::index && n->axis == r - 1; });
  if (on_j(la) || on_i(lb)) std::swap(la, lb);
  if (on_j(la) || on_i(lb)) return false;
  c->var = var;
  c->loop = l;
  c->a = la;
  c->b = lb;
  return true;
}

}  // namespace

bool k_affine(const Node* e, const Node* loop) { return affine(e, loop, 0); }

bool find_contraction(const Node* k, Contraction* out) {
  if (k->op != Op::kernel || k->rank() < 2 || !k->group.empty()) return false;
  bool ok = true;
  std::vector<const Node*> written;
  std::function<void(const Node*)> walk = [&](const Node* s) {
    for (const Node* n = s->first_child; n && ok; n = n->next) {
      switch (n->op) {
        case Op::atomic: case Op::barrier: case Op::break_: case Op::continue_: case Op::group_buffer:
        case Op::local_index: case Op::group_index:
          ok = false;
          break;
        case Op::store: written.push_back(n->operand(0)); break;
        default: break;
      }
      walk(n);
    }
  };
  walk(k);
  if (!ok) return false;
  Contraction c;
  for (const Node* l = k->first_child; l; l = l->next) {
    if (!contraction_loop(k, l, &c)) continue;
    for (const Node* m : written)
      if (m == c.a->operand(0) || m == c.b->operand(0)) return false;
    if (out) *out = c;
    return true;
  }
  return false;
}

}  // namespace ember

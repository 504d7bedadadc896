#include "core/ir/shape.h"

#include <algorithm>

namespace ember {

int64_t const_dim(const Node* d) { return d && d->op == Op::constant ? d->i() : -1; }

bool same_dim(const Node* a, const Node* b) {
  if (a == b) return true;
  int64_t ca = const_dim(a), cb = const_dim(b);
  return ca >= 0 && ca == cb;
}

bool same_shape(ShapeView a, ShapeView b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_dim(a[i], b[i])) return false;
  return true;
}

std::string shape_str(ShapeView s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    const Node* d = s[i];
    if (const_dim(d) >= 0) out += std::to_string(const_dim(d));
    else if (!d->name.empty()) out += d->name;
    else out += "%" + std::to_string(d->id);
  }
  return out + "]";
}

int64_t const_size(ShapeView s) {
  int64_t n = 1;
  for (Node* d : s) {
    int64_t c = const_dim(d);
    if (c < 0) return -1;
    n *= c;
  }
  return n;
}

namespace {
constexpr int64_t kBoundLimit = int64_t{1} << 40;

// Constant bounds [lo, hi] of an i32 index expression, when they follow from constant dims,
// loop bounds and constants through + - * min max and floor div/mod by positive constants.
bool index_bounds(const Node* i, int64_t& lo, int64_t& hi, int depth = 0) {
  if (depth > 16 || i->dtype != DType::i32) return false;
  switch (i->op) {
    case Op::constant: lo = hi = i->i(); return true;
    case Op::index: {
      if (i->axis >= static_cast<int>(i->shape.size())) return false;
      int64_t n = const_dim(i->shape[static_cast<size_t>(i->axis)]);
      if (n < 1) return false;
      lo = 0, hi = n - 1;
      return true;
    }
    case Op::loop: {
      const Node* b = i->operand(0);
      const Node* e = i->operand(1);
      const Node* s = i->operand(2);
      if (b->op != Op::constant || e->op != Op::constant || s->op != Op::constant || s->i() <= 0 || e->i() <= b->i())
        return false;
      lo = b->i(), hi = e->i() - 1;
      return true;
    }
    case Op::add: case Op::sub: case Op::mul: case Op::min: case Op::max: case Op::div: case Op::mod: {
      int64_t al, ah, bl, bh;
      if (i->op == Op::mod || i->op == Op::div) {
        const Node* c = i->operand(1);
        if (c->op != Op::constant || c->i() <= 0) return false;
        if (i->op == Op::mod) { lo = 0, hi = c->i() - 1; return true; }
        if (!index_bounds(i->operand(0), al, ah, depth + 1)) return false;
        auto fdiv = [&](int64_t a) { return a >= 0 ? a / c->i() : -((-a + c->i() - 1) / c->i()); };
        lo = fdiv(al), hi = fdiv(ah);
        return true;
      }
      if (!index_bounds(i->operand(0), al, ah, depth + 1) || !index_bounds(i->operand(1), bl, bh, depth + 1)) return false;
      if (i->op == Op::add) lo = al + bl, hi = ah + bh;
      else if (i->op == Op::sub) lo = al - bh, hi = ah - bl;
      else if (i->op == Op::min) lo = std::min(al, bl), hi = std::min(ah, bh);
      else if (i->op == Op::max) lo = std::max(al, bl), hi = std::max(ah, bh);
      else {
        int64_t p[] = {al * bl, al * bh, ah * bl, ah * bh};
        lo = *std::min_element(p, p + 4), hi = *std::max_element(p, p + 4);
      }
      return lo > -kBoundLimit && hi < kBoundLimit;
    }
    default: return false;
  }
}

// Whether x is certainly in [0, d * c) (a flattened index of a reshape: y * c + z, y in [0, d)).
bool in_range_times(const Node* x, const Node* d, int64_t c, const Node* kernel) {
  if (x->op == Op::index && x->axis < static_cast<int>(x->shape.size())) {
    const Node* n = x->shape[static_cast<size_t>(x->axis)];
    if (n->op == Op::mul && n->shape.empty())
      for (int s = 0; s < 2; ++s)
        if (same_dim(n->operand(s), d) && const_dim(n->operand(1 - s)) == c) return true;
  }
  if (x->op != Op::add) return false;
  for (int s = 0; s < 2; ++s) {
    const Node* m = x->operand(s);
    int64_t lo, hi;
    if (m->op != Op::mul || !index_bounds(x->operand(1 - s), lo, hi) || lo < 0 || hi >= c) continue;
    for (int t = 0; t < 2; ++t)
      if (const_dim(m->operand(t)) == c && index_in_range(m->operand(1 - t), d, kernel)) return true;
  }
  return false;
}
}  // namespace

bool index_in_range(const Node* i, const Node* d, const Node* kernel) {
  int64_t lo, hi, n = const_dim(d);
  if (n > 0 && index_bounds(i, lo, hi) && lo >= 0 && hi < n) return true;
  if (i->op == Op::div && i->operand(1)->op == Op::constant && i->operand(1)->i() > 0 &&
      in_range_times(i->operand(0), d, i->operand(1)->i(), kernel))
    return true;
  if (i->op == Op::index && i->axis < static_cast<int>(i->shape.size()) &&
      same_dim(i->shape[static_cast<size_t>(i->axis)], d))  // a coordinate of its own shape
    return true;
  if (i->op == Op::index && kernel && i->axis < kernel->rank() && same_dim(kernel->shape[static_cast<size_t>(i->axis)], d))
    return true;
  if (i->op == Op::local_index && kernel && i->axis < static_cast<int>(kernel->group.size()))
    return const_dim(d) >= kernel->group[static_cast<size_t>(i->axis)];
  if (i->op == Op::mod && same_dim(i->operand(1), d)) return true;  // floor mod by the dim
  if (i->op == Op::loop) {
    const Node* b = i->operand(0);
    const Node* e = i->operand(1);
    const Node* s = i->operand(2);
    if (b->op != Op::constant || b->i() < 0 || s->op != Op::constant || s->i() <= 0) return false;
    if (same_dim(e, d)) return true;
    return e->op == Op::constant && const_dim(d) >= e->i();
  }
  return false;
}

}  // namespace ember

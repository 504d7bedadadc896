#include "core/ir/builder.h"

#include <algorithm>

#include "core/ir/eval.h"

namespace ember {

Builder::Builder(Program& p) : prog_(p), scope_(p.root()) {}

Node* Builder::place(Node* n) {
  n->loc = loc_of ? loc_of->loc : loc;
  if (before_) prog_.insert_before(before_, n); else prog_.append(scope_, n);
  return n;
}

Node* Builder::raw(Op op, DType t, const Shape& shape, const std::vector<Node*>& operands) {
  return place(prog_.create(op, t, shape, operands));
}

// Whether n is defined before the insertion point, in its scope or an enclosing one (a node of
// an enclosing scope must come before the child of that scope that holds the insertion point).
bool Builder::visible(const Node* n) const {
  if (n->dead || !n->parent) return false;
  const Node* pos = before_;  // n must come before pos in pos's scope (null: the end)
  for (const Node* s = scope_; s; s = s->parent) {
    if (n->parent == s) {
      if (!pos) return true;
      if (n == pos) return pos != before_;  // an enclosing loop's counter is visible inside it
      return n->order < pos->order;
    }
    pos = s;
  }
  return false;
}

// Value numbering key: op, dtype, shape, operands and the semantic attributes (hash_attrs).
static size_t hash_key(Op op, DType t, ShapeView shape, std::span<Node* const> ops, const NodeAttrs& attrs) {
  size_t h = static_cast<size_t>(op) * 1000003u ^ static_cast<size_t>(t) * 7919u ^ hash_attrs(attrs) * 2654435761u;
  auto mix = [&](const void* p) { h = (h ^ reinterpret_cast<size_t>(p)) * 1099511628211ull; };
  for (Node* d : shape) mix(d);
  h ^= 0x9e3779b97f4a7c15ull;
  for (Node* o : ops) mix(o);
  return h;
}

// A value-numbering key within the scope a candidate sits in (Builder::numbered).
static size_t scoped_key(size_t key, const Node* scope) {
  return (key ^ reinterpret_cast<size_t>(scope)) * 1099511628211ull;
}

static NodeAttrs axis_attrs(int axis) {
  NodeAttrs a;
  a.axis = axis;
  return a;
}

Node* Builder::numbered(Op op, DType t, ShapeView shape, std::span<Node* const> operands, const NodeAttrs& attrs) {
  bool reads_var = false;
  for (Node* o : operands) reads_var |= has_flag(o->op, F_MUTABLE) || o->op == Op::loop;
  size_t key = hash_key(op, t, shape, operands, attrs);
  // Candidates are kept per (key, scope they were placed in): only those in the insertion scope
  // or a scope around it can be visible, so a lookup never scans the copies in other kernels
  // (every kernel has its own index nodes: one shared bucket made fusion quadratic).
  if (!reads_var) {
    for (const Node* s = scope_; s; s = s->parent) {
      // The newest visible twin (largest id: candidates are inserted as they are made).
      Node* best = nullptr;
      vn_.find(scoped_key(key, s), [&](Node* c) {
        if (c->op != op || c->dtype != t || !std::ranges::equal(c->operands, operands) ||
            !std::ranges::equal(c->shape, shape))
          return false;
        if ((!best || c->id > best->id) && same_attrs(*c, attrs) && visible(c)) best = c;
        return false;
      });
      if (best) return best;
    }
  }
  Node* n = prog_.create(op, t, shape, operands);
  copy_attrs(*n, attrs);
  place(n);  // stamps loc
  if (!reads_var) vn_.insert(scoped_key(key, n->parent), n);
  return n;
}

void Builder::Candidates::insert(size_t key, Node* n) {
  if ((used_ + 1) * 2 > slots_.size()) {
    std::vector<Entry> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, Entry{});
    for (const Entry& e : old)
      if (e.n) put(e);
  }
  put({key, n});
  ++used_;
}

void Builder::Candidates::put(const Entry& e) {
  size_t i = home(e.key);
  while (slots_[i].n) i = (i + 1) & (slots_.size() - 1);
  slots_[i] = e;
}

Node* Builder::constant(DType t, uint32_t bits) {
  NodeAttrs attrs;
  attrs.bits = bits;
  size_t key = hash_key(Op::constant, t, {}, {}, attrs);
  if (Node* c = vn_.find(key, [&](Node* c) {
        return !c->dead && c->op == Op::constant && c->dtype == t && same_attrs(*c, attrs) && c->parent;
      }))
    return c;
  // Another builder may have made it already: constants sit in the leading leaves of the root.
  for (Node* c = prog_.root()->first_child; c && has_flag(c->op, F_LEAF); c = c->next)
    if (c->op == Op::constant && c->dtype == t && same_attrs(*c, attrs)) {
      vn_.insert(key, c);
      return c;
    }
  Node* n = prog_.create(Op::constant, t);
  copy_attrs(*n, attrs);
  // After the leading run of leaves at the top of the program.
  Node* pos = prog_.root()->first_child;
  while (pos && has_flag(pos->op, F_LEAF) && pos->op != Op::index && pos->op != Op::buffer) pos = pos->next;
  if (pos) prog_.insert_before(pos, n); else prog_.append(prog_.root(), n);
  vn_.insert(key, n);
  return n;
}

Node* Builder::index(int axis, const Shape& shape) {
  return numbered(Op::index, DType::i32, shape, {}, axis_attrs(axis));
}

void Builder::number_index(Node* n) {
  EMBER_INTERNAL_ASSERT(n->op == Op::index && n->parent, "number_index of a " << op_name(n->op));
  const size_t key = hash_key(Op::index, n->dtype, n->shape, {}, axis_attrs(n->axis));
  vn_.insert(scoped_key(key, n->parent), n);
}

Node* Builder::local_index(int axis, const Shape& shape) {
  return numbered(Op::local_index, DType::i32, shape, {}, axis_attrs(axis));
}

Node* Builder::group_index(int axis, const Shape& shape) {
  return numbered(Op::group_index, DType::i32, shape, {}, axis_attrs(axis));
}

static ShapeView result_shape(std::span<Node* const> ops) {
  ShapeView s;
  for (Node* o : ops) {
    if (o->shape.empty()) continue;
    EMBER_INTERNAL_ASSERT(s.empty() || same_shape(s, o->shape),
                          "elementwise operands " << shape_str(s) << " vs " << shape_str(o->shape));
    s = o->shape;
  }
  return s;
}

Node* Builder::fold(Op op, DType t, std::span<Node* const> operands) {
  bool all_const = !operands.empty();
  for (Node* o : operands) all_const &= o->op == Op::constant;
  if (all_const) {
    uint32_t w[3] = {0, 0, 0};
    for (size_t i = 0; i < operands.size(); ++i) w[i] = operands[i]->bits;
    DType in = op == Op::select ? operands[1]->dtype : operands[0]->dtype;
    return constant(t, eval_elementwise(op, t, in, w, static_cast<int>(operands.size())));
  }
  if (operands.size() != 2) return nullptr;
  Node* a = operands[0];
  Node* b = operands[1];
  auto is = [](Node* n, double v) {
    if (n->op != Op::constant) return false;
    return n->dtype == DType::f32 ? n->f() == static_cast<float>(v) : static_cast<double>(n->i()) == v;
  };
  const ShapeView rs = result_shape(operands);
  // Never fold to a var: the result must keep the value the var has here.
  auto keep = [&](Node* x) { return same_shape(x->shape, rs) && !has_flag(x->op, F_MUTABLE) ? x : nullptr; };
  switch (op) {
    case Op::add: if (is(b, 0)) return keep(a); if (is(a, 0)) return keep(b); break;
    case Op::sub: if (is(b, 0)) return keep(a); break;
    case Op::mul: if (is(b, 1)) return keep(a); if (is(a, 1)) return keep(b); break;
    case Op::div: if (is(b, 1) && t == DType::f32) return keep(a); break;
    default: break;
  }
  return nullptr;
}

Node* Builder::unary(Op op, Node* x) {
  const OpInfo& info = op_info(op);
  EMBER_INTERNAL_ASSERT(info.arity == 1 && (info.flags & F_ELEMENTWISE), op_name(op) << " is not unary");
  DType t = info.rule == DTypeRule::Bool ? DType::boolean : info.rule == DTypeRule::Float ? DType::f32 : x->dtype;
  Node* const ops[1] = {x};
  if (Node* f = fold(op, t, ops)) return f;
  return numbered(op, t, x->shape, ops, {});
}

Node* Builder::binary(Op op, Node* a, Node* b) {
  const OpInfo& info = op_info(op);
  EMBER_INTERNAL_ASSERT(info.arity == 2 && (info.flags & F_ELEMENTWISE), op_name(op) << " is not binary");
  EMBER_INTERNAL_ASSERT(a->dtype == b->dtype, op_name(op) << ": operand dtypes " << dtype_name(a->dtype) << " and "
                                                          << dtype_name(b->dtype));
  DType t = info.rule == DTypeRule::Bool ? DType::boolean : info.rule == DTypeRule::Float ? DType::f32 : a->dtype;
  Node* ops[2] = {a, b};
  if (Node* f = fold(op, t, ops)) return f;
  if ((info.flags & F_COMMUTATIVE) && b->id < a->id) std::swap(ops[0], ops[1]);  // canonical order
  return numbered(op, t, result_shape(ops), ops, {});
}

Node* Builder::select(Node* c, Node* a, Node* b) {
  EMBER_INTERNAL_ASSERT(a->dtype == b->dtype && c->dtype == DType::boolean, "select operand types");
  Node* pick = c->op == Op::constant ? (c->bits ? a : b) : a == b ? a : nullptr;
  Node* const ops[3] = {c, a, b};
  if (pick && !has_flag(pick->op, F_MUTABLE) && same_shape(result_shape(ops), pick->shape)) return pick;
  if (Node* f = fold(Op::select, a->dtype, ops)) return f;
  return numbered(Op::select, a->dtype, result_shape(ops), ops, {});
}

Node* Builder::fma(Node* a, Node* b, Node* c) {
  EMBER_INTERNAL_ASSERT(a->dtype == DType::f32 && b->dtype == DType::f32 && c->dtype == DType::f32, "fma operand types");
  Node* const ops[3] = {a, b, c};
  if (Node* f = fold(Op::fma, DType::f32, ops)) return f;
  return numbered(Op::fma, DType::f32, result_shape(ops), ops, {});
}

Node* Builder::spread(Node* v, const Shape& shape) {
  return v->shape.empty() && !shape.empty() ? raw(Op::select, v->dtype, shape, {boolean(true), v, v}) : v;
}

Node* Builder::cast(Node* x, DType t) {
  if (x->dtype == t) return x;
  Node* const ops[1] = {x};
  if (Node* f = fold(Op::cast, t, ops)) return f;
  return numbered(Op::cast, t, x->shape, ops, {});
}

Node* Builder::bitcast(Node* x, DType t) {
  if (x->dtype == t) return x;
  if (x->op == Op::constant) return constant(t, x->bits);
  Node* const ops[1] = {x};
  return numbered(Op::bitcast, t, x->shape, ops, {});
}

static std::vector<Node*> cat(std::initializer_list<Node*> a, const std::vector<Node*>& b) {
  std::vector<Node*> v(a);
  v.insert(v.end(), b.begin(), b.end());
  return v;
}

Node* Builder::load(Node* mem, const std::vector<Node*>& idx, const Shape& shape, IndexMode m) {
  Node* n = raw(Op::load, mem->dtype, shape, cat({mem}, idx));
  n->mode = m;
  return n;
}

Node* Builder::store(Node* mem, Node* value, const std::vector<Node*>& idx, const Shape& shape, IndexMode m) {
  Node* n = raw(Op::store, DType::none, shape, cat({mem, value}, idx));
  n->mode = m;
  return n;
}

Node* Builder::atomic(AtomicKind k, Node* mem, Node* value, const std::vector<Node*>& idx, const Shape& shape,
                      IndexMode m) {
  Node* n = raw(Op::atomic, mem->dtype, shape, cat({mem, value}, idx));
  n->kind = static_cast<uint8_t>(k);
  n->mode = m;
  return n;
}

Node* Builder::reduce(ReduceKind k, Node* x, uint32_t axes, bool keepdims, const Shape& out_shape, DType out) {
  Node* n = raw(Op::reduce, out, out_shape, {x});
  n->kind = static_cast<uint8_t>(k);
  n->axes = axes;
  n->keepdims = keepdims;
  return n;
}

Node* Builder::loop(Node* begin, Node* end, Node* step, const Shape& shape) {
  return raw(Op::loop, DType::i32, shape, {begin, end, step});
}
Node* Builder::if_(Node* cond, const Shape& shape) { return raw(Op::if_, DType::none, shape, {cond}); }
Node* Builder::else_(const Shape& shape) { return raw(Op::else_, DType::none, shape, {}); }
Node* Builder::kernel(const Shape& shape) {
  Node* k = raw(Op::kernel, DType::none, shape, {});
  k->index = prog_.next_kernel_id++;
  return k;
}
Node* Builder::var(Node* init, const Shape& shape) { return raw(Op::var, init->dtype, shape, {init}); }
Node* Builder::set(Node* v, Node* value) {
  EMBER_INTERNAL_ASSERT(v->op == Op::var && v->dtype == value->dtype, "set needs a var of the value's dtype");
  return raw(Op::set, DType::none, v->shape, {v, value});
}
Node* Builder::break_(const Shape& shape) { return raw(Op::break_, DType::none, shape, {}); }
Node* Builder::continue_(const Shape& shape) { return raw(Op::continue_, DType::none, shape, {}); }

static Node* append_leaf(Program& p, Node* n) {
  // Arguments go to the top of the program, in creation order, before constants.
  Node* pos = p.root()->first_child;
  while (pos && (pos->op == Op::input || pos->op == Op::scalar_arg || pos->op == Op::shape_arg)) pos = pos->next;
  if (pos) p.insert_before(pos, n); else p.append(p.root(), n);
  return n;
}

Node* Builder::argument(Op op, DType t, const Shape& shape, int position, const std::string& name) {
  Node* n = prog_.create(op, t, shape);
  n->index = position;
  n->name = name;
  n->loc = loc;
  if (prog_.args.size() <= static_cast<size_t>(position)) prog_.args.resize(static_cast<size_t>(position) + 1);
  prog_.args[static_cast<size_t>(position)] = n;
  return append_leaf(prog_, n);
}

Node* Builder::input(DType t, const Shape& shape, int position, const std::string& name) {
  return argument(Op::input, t, shape, position, name);
}

Node* Builder::scalar_arg(DType t, int position, const std::string& name) {
  return argument(Op::scalar_arg, t, {}, position, name);
}

Node* Builder::shape_arg(const std::string& name) {
  for (Node* d : prog_.dims)
    if (d->name == name) return d;
  Node* n = prog_.create(Op::shape_arg, DType::i32);
  n->name = name;
  n->index = static_cast<int>(prog_.dims.size());
  prog_.dims.push_back(n);
  return append_leaf(prog_, n);
}

Node* Builder::buffer(DType t, const Shape& shape, bool zero_init) {
  Node* n = raw(Op::buffer, t, shape, {});
  n->zero_init = zero_init;
  return n;
}

Node* Builder::output(Node* value, int slot) {
  Node* n = raw(Op::output, DType::none, {}, {value});
  n->index = slot;
  if (prog_.num_outputs <= slot) prog_.num_outputs = slot + 1;
  return n;
}

}  // namespace ember

#include "core/passes/pass_util.h"

#include <algorithm>

#include "core/analysis/explain.h"
#include "core/ir/shape.h"

namespace ember {

int Positions::at(const Node* n) const {
  const size_t i = static_cast<size_t>(n->id);
  EMBER_INTERNAL_ASSERT(i < v_.size() && v_[i] >= 0, "no program position for " << op_name(n->op) << " %" << n->id);
  return v_[i];
}

void Positions::set(const Node* n, int v) {
  const size_t i = static_cast<size_t>(n->id);
  if (i >= v_.size()) v_.resize(std::max(i + 1, v_.size() * 2), -1);
  v_[i] = v;
}

Positions program_positions(const Program& p, const std::function<void(Node*)>& also) {
  Positions pos;
  int k = 0;
  pos.set(p.root(), k++);
  p.for_each([&](Node* n) {
    pos.set(n, k++);
    if (also) also(n);
  });
  return pos;
}

const Node* written_memory(const Node* x) {
  const bool writes = x->op == Op::store || x->op == Op::atomic || x->op == Op::move_memory;
  return writes ? x->operand(0) : nullptr;
}

namespace {
void host_kernels(Node* scope, std::vector<Node*>& out, uint64_t& visits) {
  for (Node* c = scope->first_child; c; c = c->next) {
    ++visits;
    if (c->op == Op::kernel)
      out.push_back(c);
    else if (c->first_child)
      host_kernels(c, out, visits);
  }
}
}  // namespace

std::vector<Node*> kernels_of(const Program& p) {
  std::vector<Node*> out;
  host_kernels(p.root(), out, node_visit_counter());
  return out;
}

static void walk_subtree(Node* n, const std::function<void(Node*)>& f, uint64_t& visits) {
  ++visits;
  f(n);
  for (Node* c = n->first_child; c;) {
    Node* next = c->next;
    prefetch_node(next);
    walk_subtree(c, f, visits);
    c = next;
  }
}

void walk_subtree(Node* n, const std::function<void(Node*)>& f) { walk_subtree(n, f, node_visit_counter()); }

namespace {
// Walks v0's users through f32 elementwise math (and, with through_vars, through the vars it is
// set to and their reads) until `stop` holds for one (true), or 64 nodes are seen (true).
template <class Stop>
bool reaches(const Node* v0, bool through_vars, Stop&& stop) {
  // At most 64 nodes: flat arrays on the stack, searched linearly (no allocation per question:
  // contract_fma asks it for every sum of a product).
  constexpr int kMax = 64;
  const Node* seen[kMax + 1];
  const Node* todo[kMax + 1];
  int n_seen = 1, n_todo = 1;
  seen[0] = todo[0] = v0;
  auto follow = [&](const Node* x) {
    for (int i = 0; i < n_seen; ++i)
      if (seen[i] == x) return true;
    if (n_seen == kMax) return false;
    seen[n_seen++] = x;
    todo[n_todo++] = x;
    return true;
  };
  while (n_todo > 0) {
    const Node* v = todo[--n_todo];
    for (const Node* u : v->users) {
      if (stop(u)) return true;
      if (through_vars && u->op == Op::set && u->operand(1) == v) {
        if (!follow(u->operand(0))) return true;
        continue;
      }
      if (u->dtype != DType::f32 || !has_flag(u->op, F_PURE) || !has_flag(u->op, F_ELEMENTWISE)) continue;
      if (!follow(u)) return true;
    }
  }
  return false;
}
}  // namespace

bool reaches_exact_comparison(const Node* v) {
  return reaches(v, false, [](const Node* u) {
    return u->op == Op::eq || u->op == Op::ne || u->op == Op::min || u->op == Op::max;
  });
}

bool discrete_use(const Node* u) {
  switch (u->op) {
    case Op::eq:
    case Op::ne:
    case Op::lt:
    case Op::le:
    case Op::gt:
    case Op::ge:
    case Op::min:
    case Op::max:
    case Op::floor:
    case Op::ceil:
    case Op::round:
    case Op::trunc:
    case Op::frac:
    case Op::mod:
    case Op::sign:
    case Op::isnan:
    case Op::isinf:
    case Op::bitcast: return true;
    case Op::cast: return u->dtype != DType::f32;
    default: return false;
  }
}

bool reaches_discrete_use(const Node* v) { return reaches(v, true, discrete_use); }

std::unordered_set<const Node*> values_reaching(const std::vector<const Node*>& uses) {
  std::unordered_set<const Node*> marked;
  std::vector<const Node*> todo;
  auto mark = [&](const Node* x) {
    if (marked.insert(x).second) todo.push_back(x);
  };
  for (const Node* u : uses)
    for (const Node* o : u->operands) mark(o);
  // Backwards along the edges reaches() follows: an operand of a pure f32 elementwise node, the
  // value of a set of a var.
  while (!todo.empty()) {
    const Node* x = todo.back();
    todo.pop_back();
    if (x->op == Op::var) {
      for (const Node* u : x->users)
        if (u->op == Op::set && u->operand(0) == x) mark(u->operand(1));
    } else if (x->dtype == DType::f32 && has_flag(x->op, F_PURE) && has_flag(x->op, F_ELEMENTWISE)) {
      for (const Node* o : x->operands) mark(o);
    }
  }
  return marked;
}

void memory_effects(const Node* n, std::unordered_set<const Node*>* reads, std::unordered_set<const Node*>* writes) {
  walk_subtree(const_cast<Node*>(n), [&](Node* x) {
    if (x->op == Op::load && reads) reads->insert(x->operand(0));
    if (const Node* m = written_memory(x); m && writes) writes->insert(m);
    if (x->op == Op::atomic && reads) reads->insert(x->operand(0));
    if (x->op == Op::move_memory && reads) reads->insert(x->operand(1));
  });
}

bool is_device_scope(const Node* n) {
  if (n->op == Op::kernel) return true;
  return n->is_scope() && !n->shape.empty();
}

// Copies c to b's insertion point, its operands substituted through `map` (which receives c).
static Node* clone_one(Builder& b, Node* c, std::unordered_map<Node*, Node*>& map, const std::vector<Node*>& shape) {
  Program& p = b.program();
  SmallVec<Node*, 4> ops;
  for (Node* o : c->operands) {
    auto it = map.find(o);
    ops.push_back(it != map.end() ? it->second : o);
  }
  Node* n = p.create(c->op, c->dtype, c->shape.empty() ? ShapeView{} : ShapeView(shape), {ops.data(), ops.size()});
  copy_attrs(*n, *c);
  if (b.before())
    p.insert_before(b.before(), n);
  else
    p.append(b.scope(), n);
  map[c] = n;
  return n;
}

static void clone_rec(Builder& b, Node* scope, const std::function<bool(const Node*)>& kept,
                      std::unordered_map<Node*, Node*>& map, const std::vector<Node*>& shape) {
  for (Node* c = scope->first_child; c; c = c->next) {
    ++node_visit_counter();
    if (!kept(c)) continue;
    Node* n = clone_one(b, c, map, shape);
    if (c->is_scope()) {
      Node* saved_scope = b.scope();
      Node* saved_before = b.before();
      b.set_insert_end(n);
      clone_rec(b, c, kept, map, shape);
      if (saved_before)
        b.set_insert_before(saved_before);
      else
        b.set_insert_end(saved_scope);
    }
  }
}

void clone_nodes(Builder& b, Node* src_scope, std::span<Node* const> keep, const std::function<bool(const Node*)>& kept,
                 std::unordered_map<Node*, Node*>& map, const std::vector<Node*>& shape) {
  // The usual set: values right inside src_scope, no scope among them (a fused load's cone in an
  // elementwise kernel). Their order labels give program order, so they are copied without a
  // walk over all of src_scope (a fusion per load of a large kernel would read it every time).
  std::vector<Node*> direct(keep.begin(), keep.end());
  uint64_t& visits = node_visit_counter();
  for (Node* n : direct) {
    ++visits;
    if (n->parent != src_scope || n->is_scope()) {
      clone_rec(b, src_scope, kept, map, shape);
      return;
    }
  }
  std::sort(direct.begin(), direct.end(), [](const Node* x, const Node* y) { return x->order < y->order; });
  for (Node* c : direct) clone_one(b, c, map, shape);
}

void clone_nodes(Builder& b, Node* src_scope, const std::unordered_set<Node*>& keep,
                 std::unordered_map<Node*, Node*>& map, const std::vector<Node*>& shape) {
  const std::vector<Node*> nodes(keep.begin(), keep.end());
  clone_nodes(
      b, src_scope, nodes, [&](const Node* n) { return keep.count(const_cast<Node*>(n)) > 0; }, map, shape);
}

Node* kernel_like(Builder& b, const Node* like, const Shape& shape) {
  Node* k = b.kernel(shape);
  const int id = k->index;
  copy_attrs(*k, *like);
  k->index = id;
  explain_replaced(like, k);
  EMBER_INTERNAL_ASSERT(k->group.empty() || k->group.size() == shape.size(),
                        "kernel_like: group of rank " << k->group.size() << " for a shape of rank " << shape.size());
  return k;
}

Node* clamp_index(Builder& b, Node* i, Node* d, Node* at, Node* host_pos) {
  b.set_insert_before(host_pos);
  Node* hi = b.binary(Op::sub, d, b.i32(1));
  b.set_insert_before(at);
  return b.binary(Op::min, b.binary(Op::max, i, b.i32(0)), hi);
}

}  // namespace ember

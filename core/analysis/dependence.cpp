#include "core/analysis/dependence.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>
#include <string>

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

bool reads(const MemAccess& x) {
  return x.kind == AccessKind::read || (x.kind == AccessKind::write && x.node->op == Op::atomic);
}
bool writes(const MemAccess& x) { return x.kind != AccessKind::read; }

// Whether accesses x and y of one memory are ordered by a dependence of the kind asked for.
bool dependent_kinds(const MemAccess& x, const MemAccess& y, DepPairs pairs) {
  if (pairs == DepPairs::flow_anti) return (writes(x) && reads(y)) || (writes(y) && reads(x));
  if (!writes(x) && !writes(y)) return false;
  if (x.kind == AccessKind::update && y.kind == AccessKind::update)
    return x.node->kind != y.node->kind || static_cast<AtomicKind>(x.node->kind) == AtomicKind::exchange;
  return true;
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
  std::function<void(Node*)> visit = [&](Node* x) {
    ++node_visit_counter();
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

 private:
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
  isl_map* m = isl_map_from_domain(isl_set_coalesce(acc.take()));
  m = isl_map_move_dims(m, isl_dim_out, 0, isl_dim_in, static_cast<unsigned>(sdims), static_cast<unsigned>(mrank));
  m = isl_map_set_tuple_name(m, isl_dim_in, "S");
  m = isl_map_set_tuple_name(m, isl_dim_out, "M");
  return Isl<isl_map>(m);
}

// ---- Queries ----------------------------------------------------------------------------------

DependenceAnalysis::DependenceAnalysis() = default;
DependenceAnalysis::~DependenceAnalysis() = default;

bool DependenceAnalysis::within_thread(const AccessGroup& a, const AccessGroup& b, DepPairs pairs, DepWhy* why) {
  EMBER_INTERNAL_ASSERT(a.lead() == b.lead(), "within_thread: leads " << a.lead() << " and " << b.lead());
  QueryTimer timer(stats_);
  const int lead = a.lead();
  int isl_pairs = 0;
  // Visit the memories of the smaller group and look each up in the other.
  const bool a_small = a.by_memory().size() <= b.by_memory().size();
  const AccessGroup& small = a_small ? a : b;
  const AccessGroup& large = a_small ? b : a;
  for (const auto& [mem, sm] : small.by_memory()) {
    auto it = large.by_memory().find(mem);
    if (it == large.by_memory().end() || (sm.writes == 0 && it->second.writes == 0)) continue;
    const std::vector<MemAccess>& xs = a_small ? sm.all : it->second.all;
    const std::vector<MemAccess>& ys = a_small ? it->second.all : sm.all;
    std::unordered_map<const MemAccess*, Isl<isl_map>> maps_a;
    std::unordered_map<const MemAccess*, Isl<isl_map>> maps_b;
    for (const MemAccess& x : xs) {
      for (const MemAccess& y : ys) {
        ++node_visit_counter();
        if (!dependent_kinds(x, y, pairs)) continue;
        auto dependent = [&](DepWhy::Cause cause) {
          if (why) *why = DepWhy{cause, x, y};
          return false;
        };
        ++stats_.pairs;
        if (own_row(x, a.shape(), lead) && own_row(y, b.shape(), lead)) {
          ++stats_.fast;
          continue;
        }
        if (offsets_differ(x, a.shape(), y, b.shape(), lead)) {
          ++stats_.fast;
          return dependent(DepWhy::Cause::crosses);
        }
        if (syntactic_only()) return dependent(DepWhy::Cause::unknown);
        if (++isl_pairs > kMaxIslPairs) {
          ++stats_.too_many;
          return dependent(DepWhy::Cause::too_many);
        }
        ++stats_.isl;
        auto get = [&](std::unordered_map<const MemAccess*, Isl<isl_map>>& cache, const MemAccess& m,
                       const std::vector<Node*>& shape) -> const Isl<isl_map>& {
          auto c = cache.find(&m);
          if (c == cache.end()) c = cache.emplace(&m, impl_->access_map(m, shape)).first;
          return c->second;
        };
        if (!impl_) impl_ = std::make_unique<Impl>();  // the isl context, made on first use
        const Isl<isl_map>& mx = get(maps_a, x, a.shape());
        const Isl<isl_map>& my = get(maps_b, y, b.shape());
        if (!mx || !my) return dependent(DepWhy::Cause::unknown);
        // Pairs of instances that touch one element: S_x -> S_y. None may differ in a lead coordinate.
        Isl<isl_map> meet(isl_map_coalesce(isl_map_apply_range(mx.copy(), isl_map_reverse(my.copy()))));
        if (!meet) return dependent(DepWhy::Cause::unknown);
        for (int d = 0; d < lead; ++d) {
          Isl<isl_map> lt(isl_map_order_lt(meet.copy(), isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d)));
          Isl<isl_map> gt(isl_map_order_gt(meet.copy(), isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d)));
          if (!lt || !gt) return dependent(DepWhy::Cause::unknown);
          if (isl_map_is_empty(lt.get()) != isl_bool_true || isl_map_is_empty(gt.get()) != isl_bool_true)
            return dependent(DepWhy::Cause::crosses);
        }
      }
    }
  }
  return true;
}

bool DependenceAnalysis::carried(const Node* loop, const std::vector<const AccessGroup*>& groups, DepWhy* why) {
  if (!impl_) impl_ = std::make_unique<Impl>();
  int isl_pairs = 0;
  std::unordered_map<const MemAccess*, Isl<isl_map>> maps;
  auto map_of = [&](const MemAccess& m, const AccessGroup& g) -> const Isl<isl_map>& {
    auto c = maps.find(&m);
    if (c == maps.end()) c = maps.emplace(&m, impl_->access_map(m, g.shape(), nullptr, loop)).first;
    return c->second;
  };
  // Pass 0 looks for a flow dependence (a write, then a read in a later iteration: the clearest
  // reason to give), pass 1 for any.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < groups.size(); ++i) {
      for (size_t j = i; j < groups.size(); ++j) {
        for (const auto& [mem, am] : groups[i]->by_memory()) {
          auto it = groups[j]->by_memory().find(mem);
          if (it == groups[j]->by_memory().end() || (am.writes == 0 && it->second.writes == 0)) continue;
          if (mem->inside(loop)) continue;  // made afresh by each iteration
          for (const MemAccess& x : am.all) {
            for (const MemAccess& y : it->second.all) {
              if (!dependent_kinds(x, y, pass == 0 ? DepPairs::flow_anti : DepPairs::all)) continue;
              auto dependent = [&](DepWhy::Cause cause, bool x_first) {
                if (why) *why = x_first ? DepWhy{cause, x, y} : DepWhy{cause, y, x};
                return true;
              };
              if (++isl_pairs > kMaxIslPairs) return dependent(DepWhy::Cause::too_many, true);
              const Isl<isl_map>& mx = map_of(x, *groups[i]);
              const Isl<isl_map>& my = map_of(y, *groups[j]);
              if (!mx || !my) return dependent(DepWhy::Cause::unknown, true);
              Isl<isl_map> meet(isl_map_apply_range(mx.copy(), isl_map_reverse(my.copy())));
              if (!meet) return dependent(DepWhy::Cause::unknown, true);
              // The counter is each side's first loop dimension, after its thread's coordinates.
              const auto dx = static_cast<unsigned>(groups[i]->shape().size());
              const auto dy = static_cast<unsigned>(groups[j]->shape().size());
              Isl<isl_map> lt(isl_map_order_lt(meet.copy(), isl_dim_in, dx, isl_dim_out, dy));
              Isl<isl_map> gt(isl_map_order_gt(meet.copy(), isl_dim_in, dx, isl_dim_out, dy));
              if (!lt || !gt) return dependent(DepWhy::Cause::unknown, true);
              const bool x_writes = x.kind != AccessKind::read;
              const bool x_then_y = isl_map_is_empty(lt.get()) != isl_bool_true;
              const bool y_then_x = isl_map_is_empty(gt.get()) != isl_bool_true;
              if (pass == 0) {  // only the order that makes it a flow dependence
                if (x_writes ? x_then_y : y_then_x) return dependent(DepWhy::Cause::crosses, x_writes);
                continue;
              }
              if (x_then_y || y_then_x) return dependent(DepWhy::Cause::crosses, x_then_y);
            }
          }
        }
      }
    }
  }
  return false;
}

bool DependenceAnalysis::loop_carries(const Node* loop, const std::vector<const AccessGroup*>& groups) {
  int isl_pairs = 0;
  for (size_t ga = 0; ga < groups.size(); ++ga) {
    for (size_t gb = ga; gb < groups.size(); ++gb) {
      const AccessGroup& a = *groups[ga];
      const AccessGroup& b = *groups[gb];
      for (const auto& [mem, am] : a.by_memory()) {
        if (mem->inside(loop)) continue;  // allocated in the loop: each iteration's own
        auto it = b.by_memory().find(mem);
        if (it == b.by_memory().end() || (am.writes == 0 && it->second.writes == 0)) continue;
        for (const MemAccess& x : am.all) {
          for (const MemAccess& y : it->second.all) {
            ++node_visit_counter();
            if (!dependent_kinds(x, y, DepPairs::all)) continue;
            ++stats_.pairs;
            if (++isl_pairs > kMaxIslPairs) {
              ++stats_.too_many;
              return true;
            }
            ++stats_.isl;
            if (!impl_) impl_ = std::make_unique<Impl>();
            Isl<isl_map> mx = impl_->access_map(x, a.shape(), nullptr, loop);
            Isl<isl_map> my = impl_->access_map(y, b.shape(), nullptr, loop);
            if (!mx || !my) return true;
            Isl<isl_map> meet(isl_map_apply_range(mx.take(), isl_map_reverse(my.take())));
            if (!meet) return true;
            // The counter is dimension rank(a) of x's space and rank(b) of y's.
            const auto ta = static_cast<unsigned>(a.shape().size()), tb = static_cast<unsigned>(b.shape().size());
            Isl<isl_map> lt(isl_map_order_lt(meet.copy(), isl_dim_in, ta, isl_dim_out, tb));
            Isl<isl_map> gt(isl_map_order_gt(meet.copy(), isl_dim_in, ta, isl_dim_out, tb));
            if (!lt || !gt || isl_map_is_empty(lt.get()) != isl_bool_true || isl_map_is_empty(gt.get()) != isl_bool_true)
              return true;
          }
        }
      }
    }
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
  ++stats_.isl;
  if (!impl_) impl_ = std::make_unique<Impl>();
  Isl<isl_map> m = impl_->access_map(access_of(n), shape);
  if (!m || isl_map_is_single_valued(m.get()) != isl_bool_true) return 0;
  // Pairs of instances that touch one element (a function: pairs with equal values).
  Isl<isl_map> meet(isl_map_apply_range(m.copy(), isl_map_reverse(m.copy())));
  Isl<isl_set> dom(isl_map_domain(m.copy()));
  if (!meet || !dom) return 0;
  const int sdims = static_cast<int>(isl_set_dim(dom.get(), isl_dim_set));
  uint64_t out = 0;
  for (int a = 0; a < static_cast<int>(shape.size()); ++a) {
    // Every pair of instances equal except in coordinate a must meet.
    isl_map* r = isl_map_from_domain_and_range(dom.copy(), dom.copy());
    for (int d = 0; d < sdims; ++d)
      if (d != a) r = isl_map_equate(r, isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d));
    Isl<isl_map> same(r);
    if (same && isl_map_is_subset(same.get(), meet.get()) == isl_bool_true) out |= uint64_t{1} << a;
  }
  return out;
}

bool DependenceAnalysis::injective_on(const Node* n, const std::vector<Node*>& shape, uint64_t axes) {
  if (!is_access(n) || n->flat) return false;
  ++stats_.isl;
  if (!impl_) impl_ = std::make_unique<Impl>();
  Isl<isl_map> m = impl_->access_map(access_of(n), shape);
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
  if (syntactic_only()) return false;
  ++stats_.isl;
  if (!impl_) impl_ = std::make_unique<Impl>();
  Isl<isl_map> m = impl_->access_map(x, shape);
  if (!m) return false;
  for (int d = 0; d < mem->rank(); ++d) {
    Isl<isl_map> lt(isl_map_order_lt(m.copy(), isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d)));
    Isl<isl_map> gt(isl_map_order_gt(m.copy(), isl_dim_in, static_cast<unsigned>(d), isl_dim_out, static_cast<unsigned>(d)));
    if (!lt || !gt || isl_map_is_empty(lt.get()) != isl_bool_true || isl_map_is_empty(gt.get()) != isl_bool_true)
      return false;
  }
  return true;
}

isl_map* DependenceAnalysis::access_relation(const MemAccess& x, const std::vector<Node*>& shape) {
  if (!impl_) impl_ = std::make_unique<Impl>();
  return impl_->access_map(x, shape).take();
}

}  // namespace ember

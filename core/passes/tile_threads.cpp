#include "core/passes/tile_threads.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/analysis/contraction.h"
#include "core/ir/builder.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// Lanes per thread along the last axis (two 8-wide f32 vectors) and along the one before it:
// a matmul tile keeps 64 accumulators in eight AVX registers and loads, per iteration of its
// loop, 4 values of A and 16 contiguous values of B.
constexpr int kCols = 16;
constexpr int kRows = 4;
// At most this many lane copies of nodes per kernel, so that a big body is not multiplied into a
// kernel the C++ compiler takes long over.
constexpr size_t kMaxCopies = 4096;

// The tiled axes of a kernel and the lanes along each (i < 0: only the last axis is tiled).
struct Tile {
  int i = -1, j = -1;
  int fi = 1, fj = 1;
};

// Which nodes of kernel k depend on the thread's coordinate on axis tile.i and on tile.j:
// through operands, vars set from them, and enclosing scopes. A scope that depends on either
// makes itself and everything inside it depend on both (it is emitted once per lane).
struct Deps {
  std::unordered_set<const Node*> i, j;
  bool on_i(const Node* n) const { return i.count(n) > 0; }
  bool on_j(const Node* n) const { return j.count(n) > 0; }
  bool any(const Node* n) const { return on_i(n) || on_j(n); }
};

Deps dependences(Node* k, const Tile& t) {
  Deps d;
  for (bool grew = true; grew;) {
    grew = false;
    walk_subtree(k, [&](Node* n) {
      if (n == k) return;
      bool di = t.i >= 0 && n->op == Op::index && n->axis == t.i;
      bool dj = n->op == Op::index && n->axis == t.j;
      for (Node* o : n->operands) {
        di |= d.on_i(o);
        dj |= d.on_j(o);
      }
      bool scoped = n->is_scope() && (di || dj);
      for (Node* s = n->parent; s != k; s = s->parent) scoped |= d.any(s);
      if (n->op == Op::else_ && n->prev) scoped |= d.any(n->prev);
      if (n->op == Op::if_ && n->next && n->next->op == Op::else_) scoped |= d.any(n->next);
      if (scoped) {
        di = t.i >= 0;
        dj = true;
      }
      auto add = [&](std::unordered_set<const Node*>& set, bool on, const Node* x) {
        if (on && set.insert(x).second) grew = true;
      };
      add(d.i, di, n);
      add(d.j, dj, n);
      if (n->op == Op::set) {
        add(d.i, di, n->operand(0));
        add(d.j, dj, n->operand(0));
      }
    });
  }
  return d;
}

// Whether coordinate i is certainly within [0, d) in kernel k, by lower_indexing's rules (so an
// access whose coordinates all are needs no clamping).
bool in_range(const Node* i, const Node* d, const Node* k) {
  if (i->op == Op::constant) return i->i() >= 0 && const_dim(d) > i->i();
  if (i->op == Op::index) return i->axis < k->rank() && same_dim(k->shape[static_cast<size_t>(i->axis)], d);
  if (i->op == Op::mod) return same_dim(i->operand(1), d);
  if (i->op == Op::loop) {
    const Node* b = i->operand(0);
    const Node* e = i->operand(1);
    const Node* s = i->operand(2);
    if (b->op != Op::constant || b->i() < 0 || s->op != Op::constant || s->i() <= 0) return false;
    return same_dim(e, d) || (e->op == Op::constant && const_dim(d) >= e->i());
  }
  return false;
}

bool all_in_range(const Node* access, const Node* k) {
  const Node* mem = access->operand(0);
  for (int a = 0; a < mem->rank(); ++a)
    if (!in_range(access->operand(access->first_index_operand() + a), mem->shape[static_cast<size_t>(a)], k)) return false;
  return true;
}

// A load whose lanes along j read consecutive elements: j is its last coordinate, in range, and
// nothing else in it depends on j.
bool contiguous_in_j(const Node* n, const Deps& d, const Tile& t, const Node* k) {
  const Node* mem = n->operand(0);
  if (n->flat || n->mode == IndexMode::wrap || mem->rank() == 0) return false;
  const int first = n->first_index_operand();
  const Node* last = n->operand(first + mem->rank() - 1);
  if (last->op != Op::index || last->axis != t.j || !same_dim(mem->shape.back(), k->shape[static_cast<size_t>(t.j)]))
    return false;
  for (int a = 0; a + 1 < mem->rank(); ++a)
    if (d.on_j(n->operand(first + a))) return false;
  return true;
}

// Whether lanes may run interleaved in one thread: no workgroup, no break or continue that one
// lane takes while its loop is shared by the lanes, and no atomic (one that does not depend on
// the lane would run once for all of them).
bool legal(Node* k, const Deps& d) {
  if (!k->group.empty()) return false;
  bool ok = true;
  walk_subtree(k, [&](Node* n) {
    if (n->op == Op::barrier || n->op == Op::local_index || n->op == Op::group_index || n->op == Op::atomic) ok = false;
    if ((n->op != Op::break_ && n->op != Op::continue_) || !d.any(n)) return;
    const Node* loop = n->parent;
    while (loop != k && loop->op != Op::loop) loop = loop->parent;
    if (loop == k || !d.any(loop)) ok = false;
  });
  return ok;
}

// The tile for kernel k: fj == 1 when none pays. A loop at the kernel's top level, shared by the
// lanes, must read what depends on j contiguously (vector loads; what the lanes share is loaded
// once per tile); rows are tiled too when that loop also reads something the rows share.
Tile choose(Node* k) {
  Tile none;
  if (!k->group.empty() || k->rank() < 1) return none;
  Tile t;
  t.j = k->rank() - 1;
  t.fj = kCols;
  const int64_t cj = const_dim(k->shape[static_cast<size_t>(t.j)]);
  if (cj >= 0 && cj < kCols) return none;
  if (k->rank() >= 2) {
    const int64_t ci = const_dim(k->shape[static_cast<size_t>(k->rank() - 2)]);
    if (ci < 0 || ci >= kRows) {
      t.i = k->rank() - 2;
      t.fi = kRows;
    }
  }
  Deps d = dependences(k, t);
  bool pays = false, rows_share = false;
  for (Node* l = k->first_child; l; l = l->next) {
    if (l->op != Op::loop || d.any(l)) continue;
    bool contiguous = false, scattered = false, row_shared = false;
    walk_subtree(l, [&](Node* n) {
      if (n->op != Op::load) return;
      if (d.on_j(n)) (contiguous_in_j(n, d, t, k) ? contiguous : scattered) = true;
      if (t.i >= 0 && !d.on_i(n)) row_shared = true;
    });
    // Lanes that share nothing pay too: their sums are independent chains, and their loads,
    // consecutive along j, vector loads (a column sum would otherwise add one value at a time).
    if (contiguous && !scattered) {
      pays = true;
      rows_share |= row_shared;
    }
  }
  if (!pays) return none;
  if (!rows_share) {
    t.i = -1;
    t.fi = 1;
  }
  auto copies = [&](const Tile& x) {
    const Deps dx = dependences(k, x);
    size_t n = 0;
    walk_subtree(k, [&](Node* c) { n += static_cast<size_t>((dx.on_i(c) ? x.fi : 1) * (dx.on_j(c) ? x.fj : 1)); });
    return n;
  };
  if (t.i >= 0 && copies(t) > kMaxCopies) {
    t.i = -1;
    t.fi = 1;
  }
  if (copies(t) > kMaxCopies) return none;
  return t;
}

// Rewrites kernel k over tiles:
//   kernel [.., ceil(M / fi), ceil(N / fj)] (flattened, see run()) {
//     if (the tile lies inside [M, N]) { every lane's copy of the body, interleaved node by node;
//                                        nodes that do not depend on a lane are emitted once }
//     else { for each of the tile's elements inside [M, N]: the original body }
//   }
class Tiler {
 public:
  Tiler(Program& p, Node* k, const Tile& t) : p_(p), k_(k), t_(t), d_(dependences(k, t)) {}

  bool legal_here() const { return legal(k_, d_); }

  void run() {
    // Index nodes first: a use may come before its index node (load fusion can leave it so),
    // and the old kernel is erased in reverse order below.
    std::vector<Node*> idx;
    walk_subtree(k_, [&](Node* n) {
      if (n->op == Op::index) idx.push_back(n);
    });
    for (auto it = idx.rbegin(); it != idx.rend(); ++it) {
      p_.unlink(*it);
      p_.prepend(k_, *it);
    }
    Builder b(p_);
    b.loc = k_->loc;
    b.set_insert_before(k_);
    Node* rows = t_.i >= 0 ? dim(t_.i) : nullptr;
    Node* cols = dim(t_.j);
    // Tiles per axis: (d - 1) / f + 1 (floor division: 0 when d is 0).
    auto tiles = [&](Node* d, int f) {
      return b.binary(Op::add, b.binary(Op::div, b.binary(Op::sub, d, b.i32(1)), b.i32(f)), b.i32(1));
    };
    Node* col_tiles = tiles(cols, t_.fj);
    Node* row_tiles = rows ? tiles(rows, t_.fi) : nullptr;
    // With rows tiled, the threads are one flat axis over (the other axes, column tile, row
    // tile), row tiles fastest: the tiles one CPU thread runs one after the other share their
    // columns of B, which stay in its cache, while A streams (and every tile can run in
    // parallel). Otherwise the kernel's axes, the last one counted in tiles.
    shape_ = k_->shape;
    shape_[static_cast<size_t>(t_.j)] = col_tiles;
    if (rows) {
      Node* n = b.binary(Op::mul, col_tiles, row_tiles);
      for (int a = k_->rank() - 1; a >= 0; --a)
        if (a != t_.i && a != t_.j) n = b.binary(Op::mul, dim(a), n);
      shape_ = {n};
    }
    Node* nk = kernel_like(b, k_, shape_);
    b.set_insert_end(nk);
    std::vector<Node*> at(static_cast<size_t>(k_->rank()), nullptr);  // tile (i, j) or coordinate
    if (rows) {
      Node* t = b.index(0, shape_);
      std::vector<std::pair<int, Node*>> order = {{t_.i, row_tiles}, {t_.j, col_tiles}};
      for (int a = k_->rank() - 1; a >= 0; --a)
        if (a != t_.i && a != t_.j) order.push_back({a, dim(a)});
      for (size_t o = 0; o < order.size(); ++o) {
        const bool outermost = o + 1 == order.size();
        at[static_cast<size_t>(order[o].first)] = outermost ? t : b.binary(Op::mod, t, order[o].second);
        if (!outermost) t = b.binary(Op::div, t, order[o].second);
      }
    } else {
      for (int a = 0; a < k_->rank(); ++a) at[static_cast<size_t>(a)] = b.index(a, shape_);
    }
    Node* ib = rows ? b.binary(Op::mul, at[static_cast<size_t>(t_.i)], b.i32(t_.fi)) : nullptr;
    Node* jb = b.binary(Op::mul, at[static_cast<size_t>(t_.j)], b.i32(t_.fj));
    for (int a = 0; a < k_->rank(); ++a) other_.push_back(a == t_.i || a == t_.j ? nullptr : at[static_cast<size_t>(a)]);
    Node* full = b.binary(Op::le, b.binary(Op::add, jb, b.i32(t_.fj)), cols);
    if (rows) full = b.binary(Op::land, b.binary(Op::le, b.binary(Op::add, ib, b.i32(t_.fi)), rows), full);

    Node* whole = b.if_(full, shape_);
    b.set_insert_end(whole);
    for (int l = 0; l < t_.fi && rows; ++l) lane_i_.push_back(b.binary(Op::add, ib, b.i32(l)));
    for (int l = 0; l < t_.fj; ++l) lane_j_.push_back(b.binary(Op::add, jb, b.i32(l)));
    maps_.assign(static_cast<size_t>(t_.fi * t_.fj), {});
    emit_children(k_, whole, -1);

    b.set_insert_end(nk);
    Node* edge = b.else_(shape_);
    b.set_insert_end(edge);
    std::unordered_map<Node*, Node*> map;
    Node* ci = nullptr;
    if (rows) {
      Node* li = b.loop(b.i32(0), b.binary(Op::min, b.i32(t_.fi), b.binary(Op::sub, rows, ib)), b.i32(1), shape_);
      b.set_insert_end(li);
      ci = b.binary(Op::add, ib, li);
    }
    Node* lj = b.loop(b.i32(0), b.binary(Op::min, b.i32(t_.fj), b.binary(Op::sub, cols, jb)), b.i32(1), shape_);
    b.set_insert_end(lj);
    Node* cj = b.binary(Op::add, jb, lj);
    std::unordered_set<Node*> keep;
    walk_subtree(k_, [&](Node* n) {
      if (n == k_) return;
      if (n->op != Op::index) keep.insert(n);
      else map[n] = n->axis == t_.j ? cj : n->axis == t_.i ? ci : other_[static_cast<size_t>(n->axis)];
    });
    clone_nodes(b, k_, keep, map, shape_);
    for (Node* n : keep) {  // the elements run inside the shape here too
      const bool access = n->op == Op::load || n->op == Op::store || n->op == Op::atomic;
      if (access && !n->flat && n->mode == IndexMode::clamp && all_in_range(n, k_)) map[n]->mode = IndexMode::unsafe;
    }
    p_.replace_all_uses(k_, nk);
    p_.erase(k_);
  }

 private:
  Node* dim(int a) const { return k_->shape[static_cast<size_t>(a)]; }
  int lanes() const { return t_.fi * t_.fj; }
  int lane_at(int li, int lj) const { return li * t_.fj + lj; }

  // Index nodes are leaves whose users need not follow them in program order: each use gets
  // its lane's coordinate wherever the node stands.
  Node* coordinate(const Node* n, int lane) const {
    if (n->axis == t_.j) return lane_j_[static_cast<size_t>(lane % t_.fj)];
    if (n->axis == t_.i) return lane_i_[static_cast<size_t>(lane / t_.fj)];
    return other_[static_cast<size_t>(n->axis)];
  }

  Node* mapped(Node* o, int lane) {
    if (o->op == Op::index && o->inside(k_)) return coordinate(o, lane);
    auto& m = maps_[static_cast<size_t>(lane)];
    auto it = m.find(o);
    return it == m.end() ? o : it->second;
  }

  // Lane `lane`'s copy of n at the end of `scope`. In a whole tile every lane's coordinates are
  // in range, so an access whose other coordinates are too needs no clamping.
  Node* copy(Node* n, Node* scope, int lane) {
    Builder b(p_);
    b.set_insert_end(scope);
    b.loc = n->loc;
    std::vector<Node*> ops;
    for (Node* o : n->operands) ops.push_back(mapped(o, lane));
    Node* c = b.raw(n->op, n->dtype, n->shape.empty() ? Shape{} : shape_, ops);
    copy_attrs(*c, *n);
    const bool access = n->op == Op::load || n->op == Op::store || n->op == Op::atomic;
    if (access && !n->flat && n->mode == IndexMode::clamp && all_in_range(n, k_)) c->mode = IndexMode::unsafe;
    return c;
  }

  // lane < 0: each node once if no lane depends on it, else once per lane it depends on (the
  // lanes' copies of one node side by side, which the C++ compiler turns into vector ops).
  // lane >= 0: inside a scope of that lane; everything is that lane's copy.
  void emit_children(Node* from, Node* to, int lane) {
    for (Node* c = from->first_child; c; c = c->next) {
      if (c->op == Op::index) continue;  // see coordinate()
      if (lane >= 0) {
        emit_one(c, to, lane);
        continue;
      }
      const bool di = d_.on_i(c), dj = d_.on_j(c);
      if (!di && !dj) {
        Node* n = emit_one(c, to, 0);
        for (int l = 1; l < lanes(); ++l) maps_[static_cast<size_t>(l)][c] = n;
      } else if (c->is_scope()) {
        if (c->op == Op::else_) continue;  // emitted with its if, lane by lane
        for (int l = 0; l < lanes(); ++l) {
          emit_one(c, to, l);
          if (c->op == Op::if_ && c->next && c->next->op == Op::else_) emit_one(c->next, to, l);
        }
      } else {
        for (int li = 0; li < (di ? t_.fi : 1); ++li)
          for (int lj = 0; lj < (dj ? t_.fj : 1); ++lj) {
            Node* n = emit_one(c, to, lane_at(li, lj));
            for (int a = 0; a < t_.fi; ++a)
              for (int e = 0; e < t_.fj; ++e)
                if ((!di || a == li) && (!dj || e == lj)) maps_[static_cast<size_t>(lane_at(a, e))][c] = n;
          }
      }
    }
  }

  Node* emit_one(Node* c, Node* to, int lane) {
    Node* n = copy(c, to, lane);
    maps_[static_cast<size_t>(lane)][c] = n;
    if (c->is_scope()) {
      if (!d_.any(c)) {
        for (int l = 0; l < lanes(); ++l) maps_[static_cast<size_t>(l)][c] = n;
        emit_children(c, n, -1);
      } else {
        emit_children(c, n, lane);
      }
    }
    return n;
  }

  Program& p_;
  Node* k_;
  Tile t_;
  Deps d_;
  Shape shape_;
  std::vector<Node*> lane_i_, lane_j_;  // coordinates of the lanes of a whole tile
  std::vector<Node*> other_;           // the untiled axes' coordinates
  std::vector<std::unordered_map<Node*, Node*>> maps_;
};

}  // namespace

bool tile_threads(Program& p) {
  std::vector<Node*> kernels = kernels_of(p);
  bool changed = false;
  for (Node* k : kernels) {
    if (find_contraction(k, nullptr)) continue;  // packed by the cpp dialect (codegen/cpu_gemm.h)
    Tile t = choose(k);
    if (t.fj == 1) continue;
    Tiler tiler(p, k, t);
    if (!tiler.legal_here()) continue;
    tiler.run();
    changed = true;
  }
  return changed;
}

}  // namespace ember

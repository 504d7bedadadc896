#include "core/passes/lower_algorithms.h"

#include "core/ir/builder.h"
#include "core/ir/eval.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// reduce(x) of shape S  =>  acc = var(identity); loop over each reduced axis { acc = acc op x[...] }
// argmax/argmin  =>  best = var(identity), at = var(0); in the loop: better = x > best (or x is
// the first NaN); best = select(better, x, best); at = select(better, flat index, at). The
// comparison is strict, so the first occurrence of the extreme wins.
// The accumulator's start (eval.h, reduce_start): -0.0 for an f32 sum unless a reduced extent
// is the constant 0 (an empty sum over a symbolic extent is then -0.0 too: a choice on the host
// would be float math there, which em.export's manifests cannot express).
Node* reduce_start_value(Builder& b, const Node* r, const Node* x, ReduceKind kind, DType vt) {
  bool nonempty = true;
  for (int a = 0; a < x->rank(); ++a)
    if ((r->axes & (1u << a)) && const_dim(x->shape[static_cast<size_t>(a)]) == 0) nonempty = false;
  return b.constant(vt, reduce_start(kind, vt, nonempty));
}

void lower_reduce(Program& p, Builder& b, Node* r) {
  b.loc = r->loc;
  Node* x = r->operand(0);
  auto kind = static_cast<ReduceKind>(r->kind);
  const bool arg = kind == ReduceKind::argmax || kind == ReduceKind::argmin;
  const std::vector<Node*>& out = r->shape;
  b.set_insert_before(r);
  // A full reduction at host level runs as a one-thread kernel rather than on the host.
  bool host_level = !r->enclosing_kernel() && out.empty();
  for (Node* s = r->parent; s; s = s->parent)
    if (is_device_scope(s)) host_level = false;
  Node* result_buffer = nullptr;
  if (host_level) {
    result_buffer = b.buffer(r->dtype, {}, false);
    Node* k = b.kernel({});
    b.set_insert_end(k);
  }
  const DType vt = arg ? x->dtype : r->dtype;  // the accumulated value's dtype
  Node* acc = b.var(reduce_start_value(b, r, x, kind, vt), out);
  Node* at = arg ? b.var(b.i32(0), out) : nullptr;
  std::vector<Node*> idx(static_cast<size_t>(x->rank()), nullptr);
  int out_axis = 0;
  for (int a = 0; a < x->rank(); ++a) {
    bool reduced = r->axes & (1u << a);
    if (!reduced) {
      idx[static_cast<size_t>(a)] = b.index(out_axis++, out);
      continue;
    }
    if (r->keepdims) ++out_axis;
  }
  for (int a = 0; a < x->rank(); ++a) {
    if (!(r->axes & (1u << a))) continue;
    Node* l = b.loop(b.i32(0), x->shape[static_cast<size_t>(a)], b.i32(1), out);
    idx[static_cast<size_t>(a)] = l;
    b.set_insert_end(l);
  }
  Node* v = b.load(x, idx, out);
  if (v->dtype != vt) v = b.cast(v, vt);
  Node* next = nullptr;
  switch (kind) {
    case ReduceKind::sum: next = b.binary(Op::add, acc, v); break;
    case ReduceKind::prod: next = b.binary(Op::mul, acc, v); break;
    case ReduceKind::max: next = b.binary(Op::max, acc, v); break;
    case ReduceKind::min: next = b.binary(Op::min, acc, v); break;
    case ReduceKind::any: next = b.binary(Op::lor, acc, v); break;
    case ReduceKind::all: next = b.binary(Op::land, acc, v); break;
    case ReduceKind::argmax: case ReduceKind::argmin: {
      Node* better = b.binary(kind == ReduceKind::argmax ? Op::gt : Op::lt, v, acc);
      if (vt == DType::f32)  // NumPy: the first NaN is the extreme
        better = b.binary(Op::lor, better, b.binary(Op::land, b.unary(Op::isnan, v), b.unary(Op::lnot, b.unary(Op::isnan, acc))));
      // Row-major index over the reduced axes.
      Node* flat = nullptr;
      for (int a = 0; a < x->rank(); ++a) {
        if (!(r->axes & (1u << a))) continue;
        Node* i = idx[static_cast<size_t>(a)];
        flat = flat ? b.binary(Op::add, b.binary(Op::mul, flat, x->shape[static_cast<size_t>(a)]), i) : i;
      }
      b.set(at, b.select(better, flat, at));
      next = b.select(better, v, acc);
      break;
    }
  }
  b.set(acc, next);
  Node* result = arg ? at : acc;
  if (result_buffer) {
    // The one-thread kernel leaves its result in memory; the host reads it back.
    Node* k = acc->parent;
    b.set_insert_end(k);
    b.store(result_buffer, result, {}, {});
    b.set_insert_before(r);
    result = b.load(result_buffer, {}, {});
  }
  p.replace_all_uses(r, result);
  p.erase(r);
}

// Elements per block of the blocked scan: one thread scans a block serially. A power of two, so
// an element's block is a shift.
constexpr int32_t kScanBlockLog2 = 8;
constexpr int32_t kScanBlock = 1 << kScanBlockLog2;

std::vector<Node*> thread_index(Builder& b, const Shape& shape) {
  std::vector<Node*> idx;
  for (int a = 0; a < static_cast<int>(shape.size()); ++a) idx.push_back(b.index(a, shape));
  return idx;
}

// scan(x) along axis a of length L  =>  nb = ceil(L / B) blocks and three kernels:
//   1. over the other axes x blocks: a serial inclusive scan of the block into `out` (whose last
//      element is then the block's total);
//   2. over the other axes: the exclusive scan of the block totals, read from `out`, into `off`
//      (a loop that reads one buffer and writes another: nothing is carried through memory
//      between its iterations, and the totals are not a separately stored value that load
//      fusion would recompute inside this serial loop);
//   3. over every element: out += off[its block].
// With a constant L <= B only kernel 1 runs. Uses of the scan read `out`.
void lower_scan(Program& p, Builder& b, Node* r) {
  b.loc = r->loc;
  b.set_insert_before(r);
  Node* x = r->operand(0);
  const auto kind = static_cast<ReduceKind>(r->kind);
  const DType t = r->dtype;
  const Shape& shape = r->shape;
  const size_t a = static_cast<size_t>(r->axis);
  EMBER_INTERNAL_ASSERT(kind == ReduceKind::sum && a < shape.size(), "scan %" << r->id << ": kind or axis");
  auto op = [&](Node* u, Node* v) { return b.binary(Op::add, u, v); };
  Node* len = shape[a];
  const int64_t clen = const_dim(len);
  const bool one_block = clen >= 0 && clen <= kScanBlock;
  // nb = (L - 1) / B + 1 (floor division: 0 blocks when L == 0, no overflow near INT32_MAX).
  Node* nb = b.binary(Op::add, b.binary(Op::div, b.binary(Op::sub, len, b.i32(1)), b.i32(kScanBlock)), b.i32(1));
  Shape blocks = shape;
  blocks[a] = nb;
  Node* out = b.buffer(t, shape, false);
  Node* off = one_block ? nullptr : b.buffer(t, blocks, false);
  Node* zero = b.constant(t, reduce_identity(kind, t));

  // 1. Per-block scans.
  Node* k1 = b.kernel(blocks);
  b.set_insert_end(k1);
  std::vector<Node*> ci = thread_index(b, blocks);
  Node* begin = b.binary(Op::mul, ci[a], b.i32(kScanBlock));
  Node* end = b.binary(Op::min, b.binary(Op::add, begin, b.i32(kScanBlock)), len);
  Node* acc = b.var(zero, blocks);
  Node* l = b.loop(begin, end, b.i32(1), blocks);
  b.set_insert_end(l);
  std::vector<Node*> at = ci;
  at[a] = l;
  Node* next = op(acc, b.load(x, at, blocks, IndexMode::unsafe));
  b.set(acc, next);
  b.store(out, next, at, blocks, IndexMode::unsafe);
  if (off) {
    // 2. Exclusive scan of the block totals, one thread per row of blocks.
    b.set_insert_before(r);
    Shape rows = shape;
    rows.erase(rows.begin() + static_cast<std::ptrdiff_t>(a));
    Node* k2 = b.kernel(rows);
    b.set_insert_end(k2);
    std::vector<Node*> co = thread_index(b, rows);
    Node* run = b.var(zero, rows);
    Node* j = b.loop(b.i32(0), nb, b.i32(1), rows);
    b.set_insert_end(j);
    std::vector<Node*> tj = co;
    tj.insert(tj.begin() + static_cast<std::ptrdiff_t>(a), j);
    std::vector<Node*> last = tj;  // the block's last element: min(j * B + B, L) - 1
    last[a] = b.binary(Op::min, b.binary(Op::add, b.binary(Op::mul, j, b.i32(kScanBlock)), b.i32(kScanBlock - 1)),
                       b.binary(Op::sub, len, b.i32(1)));
    Node* total = b.load(out, last, rows, IndexMode::unsafe);
    b.store(off, run, tj, rows, IndexMode::unsafe);
    b.set(run, op(run, total));

    // 3. Block offsets.
    b.set_insert_before(r);
    Node* k3 = b.kernel(shape);
    b.set_insert_end(k3);
    std::vector<Node*> ce = thread_index(b, shape);
    std::vector<Node*> tb = ce;
    tb[a] = b.binary(Op::shr, ce[a], b.i32(kScanBlockLog2));  // ce[a] >= 0
    Node* sum = op(b.load(out, ce, shape, IndexMode::unsafe), b.load(off, tb, shape, IndexMode::unsafe));
    b.store(out, sum, ce, shape, IndexMode::unsafe);
  }

  // Uses read the result: outputs return the buffer, gathers read it, others an identity load.
  b.set_insert_before(r);
  Node* whole = nullptr;
  std::vector<Node*> users = r->users;
  for (Node* u : users) {
    if (u->dead) continue;
    bool only_mem = u->op == Op::output || (u->op == Op::load && u->operand(0) == r);
    for (int i = 1; only_mem && i < u->num_operands(); ++i) only_mem = u->operand(i) != r;
    if (only_mem) {
      p.set_operand(u, 0, out);
      continue;
    }
    if (!whole) whole = b.load(out, thread_index(b, shape), shape);
    for (int i = 0; i < u->num_operands(); ++i)
      if (u->operand(i) == r) p.set_operand(u, i, whole);
  }
  p.erase(r);
}

}  // namespace

bool lower_algorithms(Program& p) {
  std::vector<Node*> todo;
  p.for_each([&](Node* n) {
    if (n->op == Op::reduce || n->op == Op::scan) todo.push_back(n);
  });
  // One builder for all, so that dimension math (a scan's block count) is value-numbered: two
  // equal computed dims are one node (cse would merge them but cannot update the shapes that
  // refer to the one it erases).
  Builder b(p);
  for (Node* r : todo) {
    if (r->op == Op::scan) lower_scan(p, b, r); else lower_reduce(p, b, r);
  }
  return !todo.empty();
}

}  // namespace ember

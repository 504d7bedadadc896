#include "programs.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/ir/shape.h"

namespace ember::testing {

namespace {

DimSpec sym(const std::string& n) { DimSpec d; d.kind = DimSpec::symbolic; d.name = n; return d; }
DimSpec fixed(int64_t v) { DimSpec d; d.kind = DimSpec::fixed; d.size = v; return d; }
IndexItem all() { IndexItem i; i.kind = IndexItem::slice; return i; }
IndexItem newaxis() { IndexItem i; i.kind = IndexItem::newaxis; return i; }
IndexItem at(Node* v) { IndexItem i; i.kind = IndexItem::tensor; i.value = v; return i; }

// The DESIGN §5 N-body step.
std::unique_ptr<Program> nbody() {
  Tracer t("nbody");
  Node* X = t.input(DType::f32, {sym("N"), fixed(3)}, "X");
  Node* V = t.input(DType::f32, {sym("N"), fixed(3)}, "V");
  Node* dt = t.scalar(DType::f32, "dt");
  Node* d = t.binary(Op::sub, t.gather(X, {all(), newaxis(), all()}), t.gather(X, {newaxis(), all(), all()}));
  Node* r2 = t.binary(Op::add, t.reduce(ReduceKind::sum, t.binary(Op::mul, d, d), {-1}, true), t.constant(1e-4, DType::f32));
  Node* f = t.reduce(ReduceKind::sum, t.binary(Op::div, t.unary(Op::neg, d), t.binary(Op::mul, r2, t.unary(Op::sqrt, r2))),
                     {1}, false);
  Node* V2 = t.binary(Op::add, V, t.binary(Op::mul, f, dt));
  t.output(t.binary(Op::add, X, t.binary(Op::mul, V2, dt)));
  t.output(V2);
  return t.release();
}

// Elementwise chain with broadcasting of a row and a column, and a mean.
std::unique_ptr<Program> broadcast_chain() {
  Tracer t("broadcast_chain");
  Node* A = t.input(DType::f32, {sym("N"), sym("M")}, "A");
  Node* r = t.input(DType::f32, {sym("M")}, "r");
  Node* c = t.input(DType::f32, {sym("N"), fixed(1)}, "c");
  Node* y = t.binary(Op::mul, t.unary(Op::exp, t.binary(Op::sub, A, r)), c);
  t.output(t.mean(y, {1}, false));
  t.output(t.reduce(ReduceKind::max, y, {0}, true));
  return t.release();
}

// A host loop of kernels that updates a buffer in place, a gather and a scatter.
std::unique_ptr<Program> host_loop() {
  Tracer t("host_loop");
  Node* A = t.input(DType::f32, {sym("N")}, "A");
  Node* B = t.zeros({A->shape[0]}, DType::f32);
  Node* i = t.indices({A->shape[0]}, 0);
  t.scatter(B, {at(i)}, t.binary(Op::mul, A, t.constant(2, DType::f32)));
  Node* k = t.begin_loop(t.constant(0, DType::i32), t.constant(3, DType::i32), t.constant(1, DType::i32));
  Node* shifted = t.gather(B, {at(t.binary(Op::add, i, t.constant(1, DType::i32)))});
  Node* upd = t.binary(Op::add, shifted, t.cast(k, DType::f32));
  t.scatter(B, {at(i)}, upd);
  t.end_scope();
  t.output(t.binary(Op::add, t.value(B), A));
  t.output(t.reduce(ReduceKind::sum, B, {}, false));
  return t.release();
}

// An explicit kernel with per-thread control flow, a var, break and an atomic histogram.
std::unique_ptr<Program> explicit_kernel() {
  Tracer t("explicit_kernel");
  Node* A = t.input(DType::f32, {sym("N")}, "A");
  Node* H = t.zeros({t.dim_const(4)}, DType::i32);
  Node* out = t.zeros({A->shape[0]}, DType::f32);
  std::vector<Node*> idx = t.begin_kernel({A->shape[0]});
  Node* a = t.gather(A, {at(idx[0])});
  Node* acc = t.var(t.constant(0, DType::f32));
  t.begin_loop(t.constant(0, DType::i32), t.constant(10, DType::i32), t.constant(1, DType::i32));
  t.set(acc, t.binary(Op::add, acc, a));
  t.begin_if(t.binary(Op::gt, acc, t.constant(2.5, DType::f32)));
  t.break_();
  t.end_scope();
  t.end_scope();
  t.begin_if(t.binary(Op::gt, a, t.constant(0.5, DType::f32)));
  t.scatter(out, {at(idx[0])}, acc);
  t.end_scope();
  t.begin_else();
  t.scatter(out, {at(idx[0])}, t.unary(Op::neg, a));
  t.end_scope();
  Node* bin = t.cast(t.binary(Op::mul, a, t.constant(3.99, DType::f32)), DType::i32);
  t.atomic(AtomicKind::add, t.gather(H, {at(bin)}), t.constant(1, DType::i32));
  t.end_scope();
  t.output(out);
  t.output(H);
  return t.release();
}

// Integer math, comparisons, select and a per-element if on a tensor condition.
std::unique_ptr<Program> int_math() {
  Tracer t("int_math");
  Node* A = t.input(DType::i32, {sym("N")}, "A");
  Node* s = t.scalar(DType::i32, "s");
  Node* q = t.binary(Op::div, A, s);
  Node* m = t.binary(Op::mod, A, s);
  Node* w = t.select(t.binary(Op::lt, A, t.constant(0, DType::i32)), q, m);
  Node* v = t.var(w);
  t.begin_if(t.binary(Op::gt, A, t.constant(3, DType::i32)));
  t.set(v, t.binary(Op::bxor, v, A));
  t.end_scope();
  t.output(v);
  t.output(t.reduce(ReduceKind::sum, t.binary(Op::mul, A, A), {}, false));
  return t.release();
}

// A kernel over [N, 4] (rgba lanes) with per-lane if/else, a per-lane loop with break, and a
// sum over the lanes: exercises register unrolling of small trailing dims.
std::unique_ptr<Program> rgba(bool with_break) {
  Tracer t(with_break ? "rgba_break" : "rgba_lanes");
  Node* A = t.input(DType::f32, {sym("N"), fixed(4)}, "A");
  Node* out = t.zeros({A->shape[0], t.dim_const(4)}, DType::f32);
  std::vector<Node*> idx = t.begin_kernel({A->shape[0], t.dim_const(4)});
  Node* a = t.gather(A, {at(idx[0]), at(idx[1])});
  Node* row = t.gather(A, {at(idx[0]), at(t.constant(0, DType::i32))});  // shared by the lanes
  Node* v = t.var(t.binary(Op::mul, row, row));
  t.begin_if(t.binary(Op::gt, a, t.constant(0, DType::f32)));
  t.set(v, t.binary(Op::add, v, a));
  t.end_scope();
  t.begin_else();
  t.set(v, t.binary(Op::sub, v, a));
  t.end_scope();
  Node* n = t.var(t.constant(0, DType::i32));
  t.begin_loop(t.constant(0, DType::i32), t.constant(8, DType::i32), t.constant(1, DType::i32));
  t.set(n, t.binary(Op::add, n, t.constant(1, DType::i32)));
  if (with_break) {
    t.begin_if(t.binary(Op::gt, t.binary(Op::mul, t.cast(n, DType::f32), a), t.constant(1.5, DType::f32)));
    t.break_();
    t.end_scope();
  }
  t.end_scope();
  t.scatter(out, {at(idx[0]), at(idx[1])}, t.binary(Op::add, v, t.cast(n, DType::f32)));
  t.end_scope();
  t.output(out);
  t.output(t.reduce(ReduceKind::sum, out, {1}, false));
  return t.release();
}

// Softmax over rows: the row max and row sum kernels merge, the exp is recomputed, not stored,
// and the normalization runs as a loop over the row in the same thread (one kernel).
std::unique_ptr<Program> softmax() {
  Tracer t("softmax");
  Node* x = t.input(DType::f32, {sym("N"), sym("M")}, "x");
  Node* e = t.unary(Op::exp, t.binary(Op::sub, x, t.reduce(ReduceKind::max, x, {1}, true)));
  t.output(t.binary(Op::div, e, t.reduce(ReduceKind::sum, e, {1}, true)));
  return t.release();
}

// sin(A) @ B: recomputing sin inside the k loop would repeat it N times per element, so the
// cost model stores it (2 kernels) while the product itself is fused into the reduction.
std::unique_ptr<Program> sin_matmul() {
  Tracer t("sin_matmul");
  Node* A = t.input(DType::f32, {sym("M"), sym("K")}, "A");
  Node* B = t.input(DType::f32, {sym("K"), sym("N")}, "B");
  Node* s = t.unary(Op::sin, A);
  Node* prod = t.binary(Op::mul, t.gather(s, {all(), all(), newaxis()}), t.gather(B, {newaxis(), all(), all()}));
  t.output(t.reduce(ReduceKind::sum, prod, {1}, false));
  return t.release();
}

// Matmuls with an epilogue, sized so that tile_threads' whole 4 x 16 tiles and its edge tiles
// (6 rows, 37 columns) both run: relu((2 A) @ B + bias) (the scaling is recomputed in the k loop,
// so the kernel is no plain contraction and is tiled), and a batch of X @ B (a contraction: the
// cpp dialect packs it, tile_threads leaves it).
std::unique_ptr<Program> matmul_tiles() {
  Tracer t("matmul_tiles");
  Node* A = t.input(DType::f32, {fixed(6), sym("K")}, "A");
  Node* B = t.input(DType::f32, {sym("K"), fixed(37)}, "B");
  Node* bias = t.input(DType::f32, {fixed(37)}, "bias");
  Node* X = t.input(DType::f32, {fixed(2), fixed(9), sym("K")}, "X");
  Node* y = t.binary(Op::add, t.matmul(t.binary(Op::mul, A, t.constant(2, DType::f32)), B), bias);
  t.output(t.binary(Op::max, y, t.constant(0, DType::f32)));
  t.output(t.matmul(X, B));
  return t.release();
}

// Row kernels next to kernels over their rows' elements (merge_kernels' row merge): the stored
// exp(x) before the row sum (the wide kernel first), the normalization after it, and the
// longformer pattern (window scores over a D-loop, softmax over the window, a window-weighted
// sum). `flipped` reads another row's sum, so its kernel must stay apart.
std::unique_ptr<Program> row_merge() {
  Tracer t("row_merge");
  Node* x = t.input(DType::f32, {sym("N"), sym("M")}, "x");
  Node* q = t.input(DType::f32, {sym("N"), sym("D")}, "q");
  auto c = [&](int v) { return t.constant(v, DType::i32); };
  Node* w = t.binary(Op::mod, t.scalar(DType::i32, "w"), c(4));  // a half-width in [0, 4)
  Node* e = t.unary(Op::exp, t.binary(Op::mul, x, t.constant(0.5, DType::f32)));
  Node* s = t.reduce(ReduceKind::sum, e, {1}, false);  // [N]: a row kernel without the unit axis
  t.output(t.binary(Op::div, e, t.gather(s, {all(), newaxis()})));
  t.output(e);
  Node* n = t.dim(x, 0);
  Node* i = t.indices({x->shape[0]}, 0);
  Node* flipped = t.gather(s, {at(t.binary(Op::sub, t.binary(Op::sub, n, c(1)), i))});
  t.output(t.binary(Op::div, e, t.gather(flipped, {all(), newaxis()})));
  // Longformer: score[j, k] = q[j] . q[j + k - w] over a window of 2w + 1.
  Node* win = t.binary(Op::add, t.binary(Op::mul, w, c(2)), c(1));
  std::vector<Node*> sh3 = {q->shape[0], win, q->shape[1]};
  Node* j3 = t.indices(sh3, 0);
  Node* k3 = t.indices(sh3, 1);
  Node* p3 = t.indices(sh3, 2);
  Node* pos = t.binary(Op::sub, t.binary(Op::add, j3, k3), w);
  Node* dot = t.reduce(ReduceKind::sum, t.binary(Op::mul, t.gather(q, {at(j3), at(p3)}), t.gather(q, {at(pos), at(p3)})), {2}, false);
  Node* m = t.reduce(ReduceKind::max, dot, {1}, true);
  Node* ew = t.unary(Op::exp, t.binary(Op::sub, dot, m));
  Node* attn = t.binary(Op::div, ew, t.reduce(ReduceKind::sum, ew, {1}, true));
  t.output(t.reduce(ReduceKind::sum, t.binary(Op::mul, t.gather(attn, {all(), all(), newaxis()}), t.gather(q, {at(pos), at(p3)})), {1}, false));
  return t.release();
}

// Bitonic sort written as one kernel with two stage loops: the loops carry a dependence across
// threads, so fuse_kernels hoists them into host loops around one compare-exchange dispatch.
}  // namespace

std::unique_ptr<Program> group_zoo() {
  Tracer t("group_zoo");
  t.set_loc("zoo.py", 3);
  Node* A = t.input(DType::f32, {sym("N"), sym("M")}, "A");
  Node* c = t.scalar(DType::i32, "c");
  t.output(t.prefix_sum(A, 1));
  t.set_loc("zoo.py", 4);
  t.output(t.reduce(ReduceKind::argmax, A, {1}, true));
  t.output(t.gather(A, {at(t.binary(Op::add, t.indices({A->shape[0]}, 0), c)), at(c)}, IndexMode::wrap));
  Node* H = t.zeros({t.dim_const(4)}, DType::f32);
  Node* out = t.zeros({A->shape[0]}, DType::f32);
  std::vector<Node*> idx = t.begin_kernel({A->shape[0]}, {4});
  Node* buf = t.group_buffer({4}, DType::f32);
  Node* l = t.local_index()[0];
  t.scatter(buf, {at(l)}, t.gather(A, {at(idx[0]), at(c)}));
  t.barrier();
  Node* s = t.gather(buf, {at(t.binary(Op::sub, t.constant(3, DType::i32), l))});
  t.scatter(out, {at(idx[0])}, t.binary(Op::add, s, t.cast(t.group_index()[0], DType::f32)));
  t.atomic(AtomicKind::max, t.gather(H, {at(t.binary(Op::band, idx[0], t.constant(3, DType::i32)))}), s);
  t.end_scope();
  t.output(out);
  t.output(H);
  return t.release();
}

std::unique_ptr<Program> bitonic_sort() {
  Tracer t("bitonic_sort");
  Node* keys = t.input(DType::i32, {fixed(16)}, "keys");
  auto c = [&](int v) { return t.constant(v, DType::i32); };
  Node* tid = t.begin_kernel({t.dim_const(8)})[0];
  Node* s = t.begin_loop(c(0), c(4), c(1));
  Node* d = t.begin_loop(s, c(-1), c(-1));
  Node* dist = t.binary(Op::shl, c(1), d);
  Node* i = t.binary(Op::add, t.binary(Op::mul, t.binary(Op::div, tid, dist), t.binary(Op::mul, c(2), dist)),
                     t.binary(Op::mod, tid, dist));
  Node* j = t.binary(Op::add, i, dist);
  Node* up = t.binary(Op::eq, t.binary(Op::band, t.binary(Op::shr, i, t.binary(Op::add, s, c(1))), c(1)), c(0));
  Node* a = t.gather(keys, {at(i)});
  Node* b = t.gather(keys, {at(j)});
  Node* swap = t.binary(Op::eq, t.binary(Op::gt, a, b), up);
  t.scatter(keys, {at(i)}, t.select(swap, b, a));
  t.scatter(keys, {at(j)}, t.select(swap, a, b));
  t.end_scope();
  t.end_scope();
  t.end_scope();
  t.output(keys);
  return t.release();
}

// The sign and power-of-two scaling chains reverse mode emits (simplify folds them): a product
// scaled by -0.5, negated and halved; a shared scaled value times -4; x + x; adds of negations.
// A var read in a product and then set again: a fold must not re-read it after the set.
std::unique_ptr<Program> sign_scaling() {
  Tracer t("sign_scaling");
  Node* A = t.input(DType::f32, {sym("N")}, "A");
  Node* B = t.input(DType::f32, {sym("N")}, "B");
  auto c = [&](double v) { return t.constant(v, DType::f32); };
  Node* h = t.binary(Op::mul, A, c(-0.5));
  Node* y = t.binary(Op::mul, t.unary(Op::neg, t.binary(Op::mul, A, h)), c(0.5));
  Node* s = t.binary(Op::mul, y, c(0.25));
  t.output(t.binary(Op::add, t.binary(Op::mul, t.binary(Op::mul, B, s), c(-4)), B));
  t.output(t.binary(Op::mul, s, t.binary(Op::add, B, B)));
  t.output(t.binary(Op::sub, t.unary(Op::neg, t.binary(Op::add, A, A)), t.unary(Op::neg, B)));
  t.output(t.binary(Op::add, t.unary(Op::neg, t.binary(Op::mul, t.unary(Op::neg, A), B)), t.binary(Op::mul, A, c(3))));
  Node* v = t.var(B);
  Node* scaled = t.binary(Op::mul, v, c(0.5));
  t.set(v, t.binary(Op::add, v, A));
  t.output(t.binary(Op::mul, scaled, c(4)));
  t.output(t.binary(Op::mul, t.unary(Op::neg, v), c(2)));
  return t.release();
}

std::vector<TestProgram> test_programs() {
  return {
      {"nbody", nbody, 1},
      {"broadcast_chain", broadcast_chain, -1},
      {"host_loop", host_loop, -1},
      {"explicit_kernel", explicit_kernel, 1},
      {"int_math", int_math, -1},
      {"rgba_lanes", [] { return rgba(false); }, -1},
      {"rgba_break", [] { return rgba(true); }, -1},
      {"softmax", softmax, 1},
      {"sin_matmul", sin_matmul, 2},
      {"row_merge", row_merge, 5},
      {"matmul_tiles", matmul_tiles, 2},
      {"sign_scaling", sign_scaling, -1},
  };
}

std::vector<ArgValue> random_args(const Program& p, std::mt19937& rng, int64_t sym_size) {
  std::vector<ArgValue> out;
  std::uniform_real_distribution<float> uf(-1.f, 1.f);
  std::uniform_int_distribution<int32_t> ui(-20, 20);
  for (Node* a : p.args) {
    if (a->op == Op::scalar_arg) {
      uint32_t w = a->dtype == DType::f32 ? f2w(0.01f + std::fabs(uf(rng))) : i2w(ui(rng) % 5 + (ui(rng) > 0 ? 7 : -7));
      out.push_back(ArgValue::of_word(w));
      continue;
    }
    std::vector<int64_t> shape;
    for (Node* d : a->shape) shape.push_back(d->op == Op::constant ? d->i() : sym_size);
    HostTensor t = HostTensor::alloc(a->dtype, shape, false);
    for (int64_t i = 0; i < t.size(); ++i) {
      float f = uf(rng);
      if (f == 0.f) f = 0.5f;
      t.data[i] = a->dtype == DType::f32 ? f2w(f) : i2w(ui(rng));
    }
    out.push_back(ArgValue::of_tensor(t));
  }
  return out;
}

std::vector<ArgValue> copy_args(const std::vector<ArgValue>& a) {
  std::vector<ArgValue> out;
  for (const ArgValue& v : a) {
    if (!v.is_tensor) { out.push_back(v); continue; }
    HostTensor t = HostTensor::alloc(v.tensor.dtype, v.tensor.shape, false);
    std::memcpy(t.data, v.tensor.data, static_cast<size_t>(t.size()) * 4);
    out.push_back(ArgValue::of_tensor(t));
  }
  return out;
}

std::string compare(const std::vector<HostTensor>& want, const std::vector<HostTensor>& got, double rtol) {
  std::ostringstream os;
  if (want.size() != got.size()) return "output count differs";
  for (size_t k = 0; k < want.size(); ++k) {
    const HostTensor& a = want[k];
    const HostTensor& b = got[k];
    if (a.shape != b.shape || a.dtype != b.dtype) return "output " + std::to_string(k) + ": shape or dtype differs";
    double scale = 1e-6;
    for (int64_t i = 0; i < a.size(); ++i)
      if (a.dtype == DType::f32) scale = std::max(scale, std::fabs(static_cast<double>(w2f(a.data[i]))));
    for (int64_t i = 0; i < a.size(); ++i) {
      bool ok = a.dtype == DType::f32
                    ? std::fabs(static_cast<double>(w2f(a.data[i]) - w2f(b.data[i]))) <=
                          rtol * scale + rtol * std::fabs(static_cast<double>(w2f(a.data[i])))
                    : a.data[i] == b.data[i];
      if (!ok) {
        os << "output " << k << " element " << i << ": want "
           << (a.dtype == DType::f32 ? std::to_string(w2f(a.data[i])) : std::to_string(w2i(a.data[i]))) << " got "
           << (a.dtype == DType::f32 ? std::to_string(w2f(b.data[i])) : std::to_string(w2i(b.data[i])));
        return os.str();
      }
    }
  }
  return "";
}

}  // namespace ember::testing

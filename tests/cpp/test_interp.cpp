// Reference interpreter: hand-built IR at several levels (tensor-level host ops, device scopes,
// kernels, a kernel runner) checked against hand-computed results on random inputs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/interp/interp.h"
#include "core/ir/builder.h"
#include "core/ir/verifier.h"

namespace ember {
namespace {

HostTensor rand_f32(std::vector<int64_t> shape, std::mt19937& rng, float lo = 0.25f, float hi = 2.0f) {
  HostTensor t = HostTensor::alloc(DType::f32, std::move(shape));
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution neg(0.5);
  for (int64_t i = 0; i < t.size(); ++i) t.data[i] = f2w(neg(rng) ? -mag(rng) : mag(rng));  // never zero
  return t;
}

HostTensor rand_i32(std::vector<int64_t> shape, std::mt19937& rng, int lo, int hi) {
  HostTensor t = HostTensor::alloc(DType::i32, std::move(shape));
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t i = 0; i < t.size(); ++i) t.data[i] = i2w(d(rng));
  return t;
}

float fat(const HostTensor& t, int64_t i) { return w2f(t.data[i]); }
int32_t iat(const HostTensor& t, int64_t i) { return w2i(t.data[i]); }

std::vector<ArgValue> args_of(std::initializer_list<ArgValue> a) { return std::vector<ArgValue>(a); }

// Runs `f` and returns the message of the expected exception type (fails otherwise).
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception";
  return "";
}

TEST(Interp, ElementwiseWithBroadcastLoads) {
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* c3 = b.i32(3);
  Node* X = b.input(DType::f32, {N, c3}, 0, "X");
  Node* w = b.input(DType::f32, {c3}, 1, "w");
  Node* s = b.scalar_arg(DType::f32, 2, "s");
  Shape S{N, c3};
  Node* i0 = b.index(0, S);
  Node* i1 = b.index(1, S);
  Node* x = b.load(X, {i0, i1}, S);
  Node* wb = b.load(w, {i1}, S);  // w broadcast over rows
  Node* y = b.binary(Op::add, b.binary(Op::mul, x, wb), s);
  b.output(y, 0);
  // Pairwise differences d[i, j, k] = X[i, k] - X[j, k] (X[:, None, :] - X[None, :, :]).
  Shape S3{N, N, c3};
  Node* j0 = b.index(0, S3);
  Node* j1 = b.index(1, S3);
  Node* j2 = b.index(2, S3);
  Node* d = b.binary(Op::sub, b.load(X, {j0, j2}, S3), b.load(X, {j1, j2}, S3));
  b.output(d, 1);
  b.output(b.binary(Op::mul, s, s), 2);  // scalar output
  verify(p);

  std::mt19937 rng(1);
  const int n = 7;
  HostTensor Xt = rand_f32({n, 3}, rng), wt = rand_f32({3}, rng);
  float sv = 0.75f;
  auto out = interpret(p, args_of({ArgValue::of_tensor(Xt), ArgValue::of_tensor(wt), ArgValue::of_word(f2w(sv))}));
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(out[0].shape, (std::vector<int64_t>{n, 3}));
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(fat(out[0], i * 3 + k), fat(Xt, i * 3 + k) * fat(wt, k) + sv);
  ASSERT_EQ(out[1].shape, (std::vector<int64_t>{n, n, 3}));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(fat(out[1], (i * n + j) * 3 + k), fat(Xt, i * 3 + k) - fat(Xt, j * 3 + k));
  EXPECT_TRUE(out[2].shape.empty());
  EXPECT_EQ(fat(out[2], 0), sv * sv);
}

TEST(Interp, ReduceSumAxis1) {
  for (bool keep : {false, true}) {
    Program p;
    Builder b(p);
    Node* M = b.shape_arg("M");
    Node* K = b.shape_arg("K");
    Node* A = b.input(DType::f32, {M, K}, 0, "A");
    Shape S{M, K};
    Node* a = b.load(A, {b.index(0, S), b.index(1, S)}, S);
    Shape out = keep ? Shape{M, b.i32(1)} : Shape{M};
    Node* r = b.reduce(ReduceKind::sum, a, 1u << 1, keep, out, DType::f32);
    b.output(r, 0);
    b.output(b.reduce(ReduceKind::max, a, 1u << 0, false, {K}, DType::f32), 1);
    b.output(b.reduce(ReduceKind::sum, a, 3u, false, {}, DType::f32), 2);
    verify(p);

    std::mt19937 rng(2);
    const int m = 5, k = 6;
    HostTensor At = rand_f32({m, k}, rng);
    auto res = interpret(p, args_of({ArgValue::of_tensor(At)}));
    EXPECT_EQ(res[0].shape, keep ? (std::vector<int64_t>{m, 1}) : (std::vector<int64_t>{m}));
    float total = 0;
    for (int i = 0; i < m; ++i) {
      float s = 0;
      for (int j = 0; j < k; ++j) s += fat(At, i * k + j);
      EXPECT_FLOAT_EQ(fat(res[0], i), s);
    }
    for (int i = 0; i < m * k; ++i) total += fat(At, i);
    for (int j = 0; j < k; ++j) {
      float mx = -INFINITY;
      for (int i = 0; i < m; ++i) mx = std::max(mx, fat(At, i * k + j));
      EXPECT_EQ(fat(res[1], j), mx);
    }
    EXPECT_TRUE(res[2].shape.empty());
    EXPECT_NEAR(fat(res[2], 0), total, 1e-4);
  }
}

// A loop of shape [N] at host level is a device scope: each thread i runs k = 0..i and
// accumulates row i of A into a host var of shape [N] (per-thread element).
TEST(Interp, PerThreadLoopAccumulatesIntoVar) {
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* A = b.input(DType::f32, {N, N}, 0, "A");
  Shape S{N};
  Node* i = b.index(0, S);
  Node* acc = b.var(b.f32(0.f), S);
  Node* end = b.binary(Op::add, i, b.i32(1));
  Node* L = b.loop(b.i32(0), end, b.i32(1), S);
  b.set_insert_end(L);
  Node* x = b.load(A, {i, L}, S);
  b.set(acc, b.binary(Op::add, acc, x));
  // A var local to each thread's loop body: squares summed separately.
  b.set_insert_end(p.root());
  Node* acc2 = b.var(b.f32(0.f), S);
  Node* L2 = b.loop(b.i32(0), b.i32(3), b.i32(1), S);
  b.set_insert_end(L2);
  Node* t = b.var(b.load(A, {i, L2}, S), S);
  b.set(t, b.binary(Op::mul, t, t));
  b.set(acc2, b.binary(Op::add, acc2, t));
  b.set_insert_end(p.root());
  b.output(acc, 0);
  b.output(acc2, 1);
  verify(p);

  std::mt19937 rng(3);
  const int n = 6;
  HostTensor At = rand_f32({n, n}, rng);
  auto res = interpret(p, args_of({ArgValue::of_tensor(At)}));
  for (int r = 0; r < n; ++r) {
    float s = 0, q = 0;
    for (int k = 0; k <= r; ++k) s += fat(At, r * n + k);
    for (int k = 0; k < 3; ++k) q += fat(At, r * n + k) * fat(At, r * n + k);
    EXPECT_EQ(fat(res[0], r), s) << r;
    EXPECT_EQ(fat(res[1], r), q) << r;
  }
}

// kernel [M, K]: B[j, i] = A[i, j] * 2 + 1 (a transpose through index + load + store).
TEST(Interp, KernelIndexLoadStore) {
  Program p;
  Builder b(p);
  Node* M = b.shape_arg("M");
  Node* K = b.shape_arg("K");
  Node* A = b.input(DType::f32, {M, K}, 0, "A");
  Node* B = b.buffer(DType::f32, {K, M}, true);
  Shape S{M, K};
  Node* k = b.kernel(S);
  b.set_insert_end(k);
  Node* i = b.index(0, S);
  Node* j = b.index(1, S);
  Node* v = b.binary(Op::add, b.binary(Op::mul, b.load(A, {i, j}, S), b.f32(2.f)), b.f32(1.f));
  b.store(B, v, {j, i}, S);
  b.set_insert_end(p.root());
  b.output(B, 0);
  verify(p);

  std::mt19937 rng(4);
  const int m = 3, kk = 5;
  HostTensor At = rand_f32({m, kk}, rng);
  auto res = interpret(p, args_of({ArgValue::of_tensor(At)}));
  ASSERT_EQ(res[0].shape, (std::vector<int64_t>{kk, m}));
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < kk; ++c) EXPECT_EQ(fat(res[0], c * m + r), fat(At, r * kk + c) * 2.f + 1.f);
}

// Per-thread break/continue inside a kernel, and a host-level loop with break.
TEST(Interp, BreakAndContinue) {
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  b.input(DType::f32, {N}, 0, "X");
  Node* out = b.buffer(DType::i32, {N}, true);
  Shape S{N};
  Node* k = b.kernel(S);
  b.set_insert_end(k);
  Node* i = b.index(0, S);
  Node* s = b.var(b.i32(0), S);
  Node* L = b.loop(b.i32(0), b.i32(100), b.i32(1), {});
  b.set_insert_end(L);
  Node* br = b.if_(b.binary(Op::gt, L, i), S);
  b.set_insert_end(br);
  b.break_({});
  b.set_insert_end(L);
  Node* odd = b.if_(b.binary(Op::eq, b.binary(Op::mod, L, b.i32(2)), b.i32(1)), {});
  b.set_insert_end(odd);
  b.continue_({});
  b.set_insert_end(L);
  b.set(s, b.binary(Op::add, s, L));
  b.set_insert_end(k);
  b.store(out, s, {i}, S);
  // Host level: count = sum of k for k in [0, 100) until k == 7 (break).
  b.set_insert_end(p.root());
  Node* cnt = b.var(b.i32(0), {});
  Node* H = b.loop(b.i32(0), b.i32(100), b.i32(1), {});
  b.set_insert_end(H);
  Node* stop = b.if_(b.binary(Op::ge, H, b.i32(7)), {});
  b.set_insert_end(stop);
  b.break_({});
  b.set_insert_end(H);
  b.set(cnt, b.binary(Op::add, cnt, H));
  b.set_insert_end(p.root());
  b.output(out, 0);
  b.output(cnt, 1);
  verify(p);

  std::mt19937 rng(5);
  const int n = 9;
  HostTensor Xt = rand_f32({n}, rng);  // only binds N
  auto res = interpret(p, args_of({ArgValue::of_tensor(Xt)}));
  for (int t = 0; t < n; ++t) {
    int e = 0;
    for (int v = 0; v <= t; v += 2) e += v;
    EXPECT_EQ(iat(res[0], t), e) << t;
  }
  EXPECT_EQ(iat(res[1], 0), 0 + 1 + 2 + 3 + 4 + 5 + 6);
}

// if/else: as a device scope of shape [N] at host level, and as a scalar if/else at host level.
TEST(Interp, IfElse) {
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* X = b.input(DType::f32, {N}, 0, "X");
  Node* thr = b.scalar_arg(DType::f32, 1, "thr");
  Node* out = b.buffer(DType::f32, {N}, false);
  Shape S{N};
  Node* i = b.index(0, S);
  Node* x = b.load(X, {i}, S);
  Node* c = b.binary(Op::gt, x, thr);
  Node* f = b.if_(c, S);
  b.set_insert_end(f);
  b.store(out, b.binary(Op::mul, x, b.f32(2.f)), {i}, S);
  b.set_insert_end(p.root());
  Node* e = b.else_(S);
  b.set_insert_end(e);
  b.store(out, b.unary(Op::neg, x), {i}, S);
  b.set_insert_end(p.root());
  // Host-level scalar if/else choosing a value.
  Node* r = b.var(b.f32(0.f), {});
  Node* hf = b.if_(b.binary(Op::lt, thr, b.f32(0.f)), {});
  b.set_insert_end(hf);
  b.set(r, b.f32(-1.f));
  b.set_insert_end(p.root());
  Node* he = b.else_({});
  b.set_insert_end(he);
  b.set(r, b.f32(1.f));
  b.set_insert_end(p.root());
  b.output(out, 0);
  b.output(r, 1);
  verify(p);

  std::mt19937 rng(6);
  const int n = 11;
  HostTensor Xt = rand_f32({n}, rng);
  for (float tv : {0.5f, -0.5f}) {
    auto res = interpret(p, args_of({ArgValue::of_tensor(Xt), ArgValue::of_word(f2w(tv))}));
    for (int t = 0; t < n; ++t) {
      float xv = fat(Xt, t);
      EXPECT_EQ(fat(res[0], t), xv > tv ? xv * 2.f : -xv);
    }
    EXPECT_EQ(fat(res[1], 0), tv < 0 ? -1.f : 1.f);
  }
}

TEST(Interp, IndexModes) {
  auto build = [](Program& p, IndexMode m) {
    Builder b(p);
    Node* N = b.shape_arg("N");
    Node* X = b.input(DType::i32, {N}, 0, "X");
    Node* j = b.binary(Op::add, b.index(0, {N}), b.scalar_arg(DType::i32, 1, "off"));
    b.output(b.load(X, {j}, {N}, m), 0);
    verify(p);
  };
  Program clamp, wrap, unsafe;
  build(clamp, IndexMode::clamp);
  build(wrap, IndexMode::wrap);
  build(unsafe, IndexMode::unsafe);
  std::mt19937 rng(7);
  const int n = 8;
  HostTensor Xt = rand_i32({n}, rng, 1, 1000);
  for (int o : {-3, 0, 2, 11}) {
    auto args = args_of({ArgValue::of_tensor(Xt), ArgValue::of_word(i2w(o))});
    auto rc = interpret(clamp, args), rw = interpret(wrap, args);
    for (int t = 0; t < n; ++t) {
      EXPECT_EQ(iat(rc[0], t), iat(Xt, std::min(std::max(t + o, 0), n - 1)));
      EXPECT_EQ(iat(rw[0], t), iat(Xt, ((t + o) % n + n) % n));
    }
    if (o == 0) {
      auto ru = interpret(unsafe, args);
      for (int t = 0; t < n; ++t) EXPECT_EQ(iat(ru[0], t), iat(Xt, t));
    } else {
      EXPECT_THROW(interpret(unsafe, args), InternalError);  // out of range: caught, never a crash
    }
  }
}

// Loops counting down, atomics in a kernel, and stores into an input write through.
TEST(Interp, DownLoopAtomicsAndWriteThrough) {
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* idx = b.input(DType::i32, {N}, 0, "idx");
  Node* io = b.input(DType::i32, {b.i32(4)}, 1, "io");
  Node* hist = b.buffer(DType::i32, {b.i32(4)}, true);
  Shape S{N};
  Node* k = b.kernel(S);
  b.set_insert_end(k);
  Node* i = b.index(0, S);
  Node* bin = b.load(idx, {i}, S);
  b.atomic(AtomicKind::add, hist, b.i32(1), {bin}, S);
  b.atomic(AtomicKind::max, io, i, {bin}, S);
  b.set_insert_end(p.root());
  // Host loop k = 10, 7, 4, 1 (step -3): seq = seq * 16 + k records the order.
  Node* seq = b.var(b.i32(0), {});
  Node* L = b.loop(b.i32(10), b.i32(0), b.i32(-3), {});
  b.set_insert_end(L);
  b.set(seq, b.binary(Op::add, b.binary(Op::mul, seq, b.i32(16)), L));
  b.set_insert_end(p.root());
  b.output(hist, 0);
  b.output(seq, 1);
  verify(p);

  std::mt19937 rng(8);
  const int n = 40;
  HostTensor it = rand_i32({n}, rng, 0, 3);
  HostTensor iot = HostTensor::alloc(DType::i32, {4});
  for (int t = 0; t < 4; ++t) iot.data[t] = i2w(-1);
  auto res = interpret(p, args_of({ArgValue::of_tensor(it), ArgValue::of_tensor(iot)}));
  std::vector<int> h(4, 0), mx(4, -1);
  for (int t = 0; t < n; ++t) {
    h[static_cast<size_t>(iat(it, t))]++;
    mx[static_cast<size_t>(iat(it, t))] = t;
  }
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(iat(res[0], t), h[static_cast<size_t>(t)]);
    EXPECT_EQ(iat(iot, t), mx[static_cast<size_t>(t)]);  // the caller's memory was written
  }
  EXPECT_EQ(iat(res[1], 0), ((10 * 16 + 7) * 16 + 4) * 16 + 1);
}

// Outputs of values are snapshots: later sets of the var (host level or per thread) don't leak.
TEST(Interp, OutputsAreSnapshots) {
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* X = b.input(DType::f32, {N}, 0, "X");
  Shape S{N};
  Node* v = b.var(b.load(X, {b.index(0, S)}, S), S);
  b.output(v, 0);
  b.set(v, b.binary(Op::mul, v, b.f32(2.f)));
  b.output(v, 1);
  Node* L = b.loop(b.i32(0), b.i32(1), b.i32(1), S);
  b.set_insert_end(L);
  b.set(v, b.binary(Op::add, v, b.f32(1.f)));
  b.set_insert_end(p.root());
  b.output(v, 2);
  verify(p);
  std::mt19937 rng(13);
  HostTensor Xt = rand_f32({6}, rng);
  auto res = interpret(p, args_of({ArgValue::of_tensor(Xt)}));
  for (int t = 0; t < 6; ++t) {
    EXPECT_EQ(fat(res[0], t), fat(Xt, t));
    EXPECT_EQ(fat(res[1], t), fat(Xt, t) * 2.f);
    EXPECT_EQ(fat(res[2], t), fat(Xt, t) * 2.f + 1.f);
  }
}

struct RecordingRunner : KernelRunner {
  int calls = 0;
  std::vector<int64_t> dims;
  std::vector<uint32_t> params;
  void run_kernel(const Node* kernel, const std::vector<HostTensor*>& memories, const std::vector<uint32_t>& ps,
                  const std::vector<int64_t>& ds) override {
    ++calls;
    dims = ds;
    params = ps;
    ASSERT_EQ(memories.size(), 2u);
    // Does the kernel's work natively: out[i] = in[i] * scale.
    for (int64_t i = 0; i < memories[1]->size(); ++i)
      memories[1]->data[i] = f2w(w2f(memories[0]->data[i]) * w2f(ps[0]));
  }
};

TEST(Interp, KernelRunnerGetsMemoriesParamsDims) {
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* X = b.input(DType::f32, {N}, 0, "X");
  Node* sc = b.scalar_arg(DType::f32, 1, "scale");
  Node* out = b.buffer(DType::f32, {N}, true);
  Shape S{N};
  Node* k = b.kernel(S);
  b.set_insert_end(k);
  Node* i = b.index(0, S);
  b.store(out, b.binary(Op::mul, b.load(X, {i}, S), sc), {i}, S);
  b.set_insert_end(p.root());
  b.output(out, 0);
  k->memories_mut() = {X, out};
  k->params_mut() = {sc};
  verify(p);

  std::mt19937 rng(9);
  HostTensor Xt = rand_f32({5}, rng);
  auto args = args_of({ArgValue::of_tensor(Xt), ArgValue::of_word(f2w(3.f))});
  RecordingRunner r;
  auto res = interpret(p, args, &r);
  EXPECT_EQ(r.calls, 1);
  EXPECT_EQ(r.dims, (std::vector<int64_t>{5}));
  EXPECT_EQ(r.params, (std::vector<uint32_t>{f2w(3.f)}));
  auto ref = interpret(p, args);  // interpreted per thread: same result
  for (int t = 0; t < 5; ++t) {
    EXPECT_EQ(fat(res[0], t), fat(Xt, t) * 3.f);
    EXPECT_EQ(fat(ref[0], t), fat(Xt, t) * 3.f);
  }
}

Program* nbody_program(Program& p) {
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* c3 = b.i32(3);
  Node* X = b.input(DType::f32, {N, c3}, 0, "X");
  Node* V = b.input(DType::f32, {N, c3}, 1, "V");
  Node* dt = b.scalar_arg(DType::f32, 2, "dt");
  Shape S3{N, N, c3};
  Node* i0 = b.index(0, S3);
  Node* i1 = b.index(1, S3);
  Node* i2 = b.index(2, S3);
  Node* d = b.binary(Op::sub, b.load(X, {i0, i2}, S3), b.load(X, {i1, i2}, S3));
  Node* r2s = b.reduce(ReduceKind::sum, b.binary(Op::mul, d, d), 1u << 2, true, {N, N, b.i32(1)}, DType::f32);
  Node* r2 = b.binary(Op::add, r2s, b.f32(1e-4f));
  Node* r2b = b.load(r2, {i0, i1, b.i32(0)}, S3);
  Node* q = b.binary(Op::div, b.unary(Op::neg, d), b.binary(Op::mul, r2b, b.unary(Op::sqrt, r2b)));
  Node* F = b.reduce(ReduceKind::sum, q, 1u << 1, false, {N, c3}, DType::f32);
  Shape S2{N, c3};
  Node* j0 = b.index(0, S2);
  Node* j1 = b.index(1, S2);
  Node* V2 = b.binary(Op::add, b.load(V, {j0, j1}, S2), b.binary(Op::mul, F, dt));
  Node* X2 = b.binary(Op::add, b.load(X, {j0, j1}, S2), b.binary(Op::mul, V2, dt));
  b.output(X2, 0);
  b.output(V2, 1);
  return &p;
}

// The N-body step at tensor level (before fusion), against a float reference.
TEST(Interp, NBodyTensorLevel) {
  Program p;
  nbody_program(p);
  verify(p);
  for (int n : {64, 256}) {
    std::mt19937 rng(10);
    HostTensor Xt = rand_f32({n, 3}, rng, 0.01f, 1.f), Vt = rand_f32({n, 3}, rng, 0.01f, 0.1f);
    float dt = 0.01f;
    auto t0 = std::chrono::steady_clock::now();
    auto res = interpret(p, args_of({ArgValue::of_tensor(Xt), ArgValue::of_tensor(Vt), ArgValue::of_word(f2w(dt))}));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  nbody N=%d interpreted in %.1f ms\n", n, ms);
    for (int i = 0; i < n; ++i) {
      float F[3] = {0, 0, 0};
      for (int j = 0; j < n; ++j) {
        float dd[3], r2 = 0;
        for (int k = 0; k < 3; ++k) dd[k] = fat(Xt, i * 3 + k) - fat(Xt, j * 3 + k);
        for (int k = 0; k < 3; ++k) r2 += dd[k] * dd[k];
        r2 += 1e-4f;
        for (int k = 0; k < 3; ++k) F[k] += -dd[k] / (r2 * std::sqrt(r2));
      }
      for (int k = 0; k < 3; ++k) {
        float v2 = fat(Vt, i * 3 + k) + F[k] * dt;
        float x2 = fat(Xt, i * 3 + k) + v2 * dt;
        EXPECT_NEAR(fat(res[1], i * 3 + k), v2, 1e-3f * (1.f + std::fabs(v2)));
        EXPECT_NEAR(fat(res[0], i * 3 + k), x2, 1e-5f * (1.f + std::fabs(x2)));
      }
    }
  }
}

// The N-body step as one fused kernel [N] with a scalar inner loop over j (post-fusion form).
TEST(Interp, NBodyFusedKernel) {
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* c3 = b.i32(3);
  Node* X = b.input(DType::f32, {N, c3}, 0, "X");
  Node* V = b.input(DType::f32, {N, c3}, 1, "V");
  Node* dt = b.scalar_arg(DType::f32, 2, "dt");
  Node* X2 = b.buffer(DType::f32, {N, c3}, false);
  Node* V2 = b.buffer(DType::f32, {N, c3}, false);
  Shape S{N};
  Node* k = b.kernel(S);
  b.set_insert_end(k);
  Node* i = b.index(0, S);
  Node *xi[3], *f[3];
  for (int c = 0; c < 3; ++c) xi[c] = b.load(X, {i, b.i32(c)}, S);
  for (int c = 0; c < 3; ++c) f[c] = b.var(b.f32(0.f), S);
  Node* L = b.loop(b.i32(0), N, b.i32(1), {});
  b.set_insert_end(L);
  Node* d[3];
  for (int c = 0; c < 3; ++c) d[c] = b.binary(Op::sub, xi[c], b.load(X, {L, b.i32(c)}, {}));
  Node* r2 = b.binary(Op::mul, d[0], d[0]);
  r2 = b.binary(Op::add, r2, b.binary(Op::mul, d[1], d[1]));
  r2 = b.binary(Op::add, r2, b.binary(Op::mul, d[2], d[2]));
  r2 = b.binary(Op::add, r2, b.f32(1e-4f));
  Node* den = b.binary(Op::mul, r2, b.unary(Op::sqrt, r2));
  for (int c = 0; c < 3; ++c) b.set(f[c], b.binary(Op::add, f[c], b.binary(Op::div, b.unary(Op::neg, d[c]), den)));
  b.set_insert_end(k);
  for (int c = 0; c < 3; ++c) {
    Node* v2 = b.binary(Op::add, b.load(V, {i, b.i32(c)}, S), b.binary(Op::mul, f[c], dt));
    b.store(V2, v2, {i, b.i32(c)}, S);
    b.store(X2, b.binary(Op::add, xi[c], b.binary(Op::mul, v2, dt)), {i, b.i32(c)}, S);
  }
  b.set_insert_end(p.root());
  b.output(X2, 0);
  b.output(V2, 1);
  verify(p);

  Program t;
  nbody_program(t);
  for (int n : {64, 256}) {
    std::mt19937 rng(12);
    HostTensor Xt = rand_f32({n, 3}, rng, 0.01f, 1.f), Vt = rand_f32({n, 3}, rng, 0.01f, 0.1f);
    auto args = args_of({ArgValue::of_tensor(Xt), ArgValue::of_tensor(Vt), ArgValue::of_word(f2w(0.01f))});
    auto t0 = std::chrono::steady_clock::now();
    auto res = interpret(p, args);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  fused nbody N=%d interpreted in %.1f ms\n", n, ms);
    auto ref = interpret(t, args);  // same float operations in the same order: bitwise equal
    for (int o = 0; o < 2; ++o)
      for (int e = 0; e < n * 3; ++e) EXPECT_EQ(res[o].data[e], ref[o].data[e]) << o << " " << e;
  }
}

Program& bind_program(Program& p) {
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* X = b.input(DType::f32, {N, b.i32(3)}, 0, "X");
  Node* V = b.input(DType::f32, {N, b.i32(3)}, 1, "V");
  b.scalar_arg(DType::f32, 2, "dt");
  b.output(X, 0);
  b.output(V, 1);
  return p;
}

TEST(Interp, BindArguments) {
  Program p;
  bind_program(p);
  auto f32 = [](std::vector<int64_t> s) { return ArgValue::of_tensor(HostTensor::alloc(DType::f32, std::move(s))); };
  auto dt = ArgValue::of_word(f2w(0.1f));
  EXPECT_EQ(bind_arguments(p, {f32({5, 3}), f32({5, 3}), dt}), (std::vector<int64_t>{5}));
  EXPECT_EQ(bind_arguments(p, {f32({0, 3}), f32({0, 3}), dt}), (std::vector<int64_t>{0}));  // size 0 is fine

  std::string m = error_of<TypeError>([&] {
    bind_arguments(p, {ArgValue::of_tensor(HostTensor::alloc(DType::i32, {5, 3})), f32({5, 3}), dt});
  });
  EXPECT_EQ(m, "argument 'X': expected dtype f32, got i32");

  m = error_of<ShapeError>([&] { bind_arguments(p, {f32({5, 4}), f32({5, 3}), dt}); });
  EXPECT_NE(m.find("argument 'X'"), std::string::npos) << m;
  EXPECT_NE(m.find("[N, 3]"), std::string::npos) << m;
  EXPECT_NE(m.find("(5, 4)"), std::string::npos) << m;

  m = error_of<ShapeError>([&] { bind_arguments(p, {f32({5, 3}), f32({4, 3}), dt}); });
  EXPECT_EQ(m, "argument 'V': expected shape [N, 3] with N = 5 (from 'X'), got (4, 3)");

  m = error_of<ShapeError>([&] { bind_arguments(p, {f32({5, 3}), f32({5}), dt}); });
  EXPECT_NE(m.find("argument 'V'"), std::string::npos) << m;
  EXPECT_NE(m.find("(5,)"), std::string::npos) << m;

  m = error_of<TypeError>([&] { bind_arguments(p, {f32({5, 3}), f32({5, 3}), f32({})}); });
  EXPECT_EQ(m, "argument 'dt': expected a scalar, got a tensor");

  m = error_of<TypeError>([&] { bind_arguments(p, {f32({5, 3}), dt, dt}); });
  EXPECT_NE(m.find("argument 'V'"), std::string::npos) << m;

  m = error_of<TypeError>([&] { bind_arguments(p, {f32({5, 3}), f32({5, 3})}); });
  EXPECT_NE(m.find("expected 3 arguments"), std::string::npos) << m;

  // interpret() checks the same way before running; outputs of inputs share their storage.
  EXPECT_THROW(interpret(p, {f32({5, 3}), f32({4, 3}), dt}), ShapeError);
  auto X = f32({2, 3});
  auto res = interpret(p, {X, f32({2, 3}), dt});
  EXPECT_EQ(res[0].data, X.tensor.data);
}

TEST(Interp, MalformedIRThrowsInternalError) {
  // A reduce inside a device scope is not interpreted.
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* X = b.input(DType::f32, {N}, 0, "X");
  Shape S{N};
  Node* k = b.kernel(S);
  b.set_insert_end(k);
  Node* x = b.load(X, {b.index(0, S)}, S);
  b.reduce(ReduceKind::sum, x, 0, false, S, DType::f32);
  std::mt19937 rng(11);
  EXPECT_THROW(interpret(p, {ArgValue::of_tensor(rand_f32({4}, rng))}), InternalError);
}

}  // namespace
}  // namespace ember

// Workgroups: em.kernel(shape, group=...), group buffers, barriers, local/group coordinates.
// Each program is checked against a plain C++ reference in the interpreter as traced (the
// phase-by-phase oracle), after every pass (with the verifier), after the whole pipeline with
// the CPU lowering, and compiled on the CPU backend; plus the user errors and the verifier's rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <cmath>
#include <functional>
#include <random>

#include "codegen/c_printer.h"
#include "core/ir/builder.h"
#include "core/ir/printer.h"
#include "core/ir/verifier.h"
#include "core/passes/lower_group_barriers.h"
#include "core/passes/pipeline.h"
#include "ember/ember.h"
#include "programs.h"

using namespace ember;
using namespace ember::testing;

namespace {

DimSpec sym(const std::string& n) { DimSpec d; d.kind = DimSpec::symbolic; d.name = n; return d; }
IndexItem at(Node* v) { IndexItem i; i.kind = IndexItem::tensor; i.value = v; return i; }
IndexItem all() { IndexItem i; i.kind = IndexItem::slice; return i; }

using Build = std::function<std::unique_ptr<Program>()>;

struct Ref {
  std::vector<HostTensor> outputs;
};

HostTensor f32s(const std::vector<float>& v, std::vector<int64_t> shape) {
  HostTensor t = HostTensor::alloc(DType::f32, std::move(shape), false);
  for (size_t i = 0; i < v.size(); ++i) t.data[i] = f2w(v[i]);
  return t;
}
HostTensor i32s(const std::vector<int32_t>& v, std::vector<int64_t> shape) {
  HostTensor t = HostTensor::alloc(DType::i32, std::move(shape), false);
  for (size_t i = 0; i < v.size(); ++i) t.data[i] = i2w(v[i]);
  return t;
}
std::vector<float> random_f32(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}
std::vector<int32_t> random_i32(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> u(-50, 50);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = u(rng);
  return v;
}

int count_op(const Program& p, Op op) {
  int n = 0;
  p.for_each([&](Node* x) { n += x->op == op; });
  return n;
}

// The interpreter as traced, after each pass, after the pipeline with the CPU lowering, and the
// compiled CPU program must all give `want`.
void check_all(const Build& build, const std::vector<ArgValue>& args, const std::vector<HostTensor>& want,
               double rtol = 1e-4) {
  std::unique_ptr<Program> traced = build();
  verify(*traced);
  ASSERT_EQ(compare(want, interpret(*traced, copy_args(args)), rtol), "") << "interpreter, as traced\n"
                                                                         << print_program(*traced);
  std::unique_ptr<Program> q = clone_program(*traced);
  bool formed = false;
  for (const PassInfo& pass : pipeline_passes()) {
    SCOPED_TRACE(std::string("after pass ") + pass.name + "\n" + print_program(*q));
    pass.fn(*q, PipelineOptions{});
    formed |= std::string(pass.name) == "fuse_kernels";
    verify(*q, VerifyOptions{formed});
    ASSERT_EQ(compare(want, interpret(*q, copy_args(args)), rtol), "") << "after " << pass.name;
  }
  std::unique_ptr<Program> lowered = clone_program(*traced);
  PipelineOptions opt;
  opt.verify = true;
  opt.lower_groups = true;
  run_pipeline(*lowered, opt);
  EXPECT_EQ(count_op(*lowered, Op::barrier), 0) << print_program(*lowered);
  lowered->for_each([&](Node* n) { EXPECT_TRUE(n->group.empty()) << print_program(*lowered); });
  ASSERT_EQ(compare(want, interpret(*lowered, copy_args(args)), rtol), "") << "lowered\n" << print_program(*lowered);

  CompiledProgram cp(build(), "cpu");
  ASSERT_EQ(compare(want, cp.run(copy_args(args)), rtol), "") << "cpu\n" << cp.source("cpp");
}

// ---- programs ------------------------------------------------------------------------------

// Each group of G threads loads its part of X into a group buffer and halves it with a tree of
// barriers; thread 0 writes the group's sum. Threads past N take part in the barriers only.
constexpr int kSumGroup = 256;
std::unique_ptr<Program> block_sum() {
  Tracer t("block_sum");
  t.set_loc("block_sum.py", 1);
  Node* X = t.input(DType::f32, {sym("N")}, "X");
  Node* N = X->shape[0];
  Node* G = t.constant(kSumGroup, DType::i32);
  Node* groups = t.binary(Op::div, t.binary(Op::add, N, t.constant(kSumGroup - 1, DType::i32)), G);
  Node* out = t.zeros({groups}, DType::f32);
  Node* i = t.begin_kernel({N}, {kSumGroup})[0];
  Node* buf = t.group_buffer({kSumGroup}, DType::f32);
  Node* l = t.local_index()[0];
  t.scatter(buf, {at(l)}, t.gather(X, {at(i)}));
  t.barrier();
  Node* k = t.begin_loop(t.constant(0, DType::i32), t.constant(8, DType::i32), t.constant(1, DType::i32));
  Node* s = t.binary(Op::shr, t.constant(kSumGroup / 2, DType::i32), k);
  t.begin_if(t.binary(Op::land, t.binary(Op::lt, l, s), t.binary(Op::lt, t.binary(Op::add, i, s), N)));
  t.scatter(buf, {at(l)}, t.binary(Op::add, t.gather(buf, {at(l)}), t.gather(buf, {at(t.binary(Op::add, l, s))})));
  t.end_scope();
  t.barrier();
  t.end_scope();
  t.begin_if(t.binary(Op::eq, l, t.constant(0, DType::i32)));
  t.scatter(out, {at(t.group_index()[0])}, t.gather(buf, {at(t.constant(0, DType::i32))}));
  t.end_scope();
  t.end_scope();
  t.output(out);
  return t.release();
}

// Inclusive and exclusive scan of i32 within each group of 64 (Hillis-Steele): a var carried
// across the barriers of a uniform loop, and a value loaded before the first barrier used last.
constexpr int kScanGroup = 64;
std::unique_ptr<Program> group_scan() {
  Tracer t("group_scan");
  t.set_loc("group_scan.py", 1);
  Node* X = t.input(DType::i32, {sym("N")}, "X");
  Node* N = X->shape[0];
  Node* Y = t.zeros({N}, DType::i32);
  Node* Z = t.zeros({N}, DType::i32);
  Node* i = t.begin_kernel({N}, {kScanGroup})[0];
  Node* buf = t.group_buffer({kScanGroup}, DType::i32);
  Node* l = t.local_index()[0];
  Node* x = t.gather(X, {at(i)});
  t.scatter(buf, {at(l)}, x);
  t.barrier();
  Node* acc = t.var(x);
  Node* d = t.begin_loop(t.constant(0, DType::i32), t.constant(6, DType::i32), t.constant(1, DType::i32));
  Node* off = t.binary(Op::shl, t.constant(1, DType::i32), d);
  t.begin_if(t.binary(Op::ge, l, off));
  t.set(acc, t.binary(Op::add, acc, t.gather(buf, {at(t.binary(Op::sub, l, off))})));
  t.end_scope();
  t.barrier();
  t.scatter(buf, {at(l)}, acc);
  t.barrier();
  t.end_scope();
  t.scatter(Y, {at(i)}, acc);
  t.scatter(Z, {at(i)}, t.binary(Op::sub, acc, x));
  t.end_scope();
  t.output(Y);
  t.output(Z);
  return t.release();
}

// A 3-point stencil through a group buffer with a one-element halo on each side (edges clamp).
constexpr int kStencilGroup = 64;
std::unique_ptr<Program> stencil() {
  Tracer t("stencil");
  t.set_loc("stencil.py", 1);
  Node* X = t.input(DType::f32, {sym("N")}, "X");
  Node* N = X->shape[0];
  Node* Y = t.zeros({N}, DType::f32);
  Node* one = t.constant(1, DType::i32);
  Node* i = t.begin_kernel({N}, {kStencilGroup})[0];
  Node* buf = t.group_buffer({kStencilGroup + 2}, DType::f32);
  Node* l = t.local_index()[0];
  Node* c = t.gather(X, {at(i)});
  t.scatter(buf, {at(t.binary(Op::add, l, one))}, c);
  t.begin_if(t.binary(Op::eq, l, t.constant(0, DType::i32)));
  t.scatter(buf, {at(t.constant(0, DType::i32))}, t.gather(X, {at(t.binary(Op::sub, i, one))}));
  t.end_scope();
  t.begin_if(t.binary(Op::lor, t.binary(Op::eq, l, t.constant(kStencilGroup - 1, DType::i32)),
                      t.binary(Op::eq, i, t.binary(Op::sub, N, one))));
  t.scatter(buf, {at(t.binary(Op::add, l, t.constant(2, DType::i32)))}, t.gather(X, {at(t.binary(Op::add, i, one))}));
  t.end_scope();
  t.barrier();
  Node* q = t.constant(0.25, DType::f32);
  Node* y = t.binary(Op::add, t.binary(Op::add, t.binary(Op::mul, t.gather(buf, {at(l)}), q),
                                       t.binary(Op::mul, c, t.constant(0.5, DType::f32))),
                     t.binary(Op::mul, t.gather(buf, {at(t.binary(Op::add, l, t.constant(2, DType::i32)))}), q));
  t.scatter(Y, {at(i)}, y);
  t.end_scope();
  t.output(Y);
  return t.release();
}

// C = A @ B with T x T tiles in two group buffers; the kernel runs over the shape rounded up to
// whole tiles and stores only inside C (the portable GPU idiom).
constexpr int kTile = 8;
std::unique_ptr<Program> tiled_matmul() {
  Tracer t("tiled_matmul");
  t.set_loc("tiled_matmul.py", 1);
  Node* A = t.input(DType::f32, {sym("M"), sym("K")}, "A");
  Node* B = t.input(DType::f32, {sym("K"), sym("N")}, "B");
  Node* M = A->shape[0];
  Node* K = A->shape[1];
  Node* N = B->shape[1];
  Node* T = t.constant(kTile, DType::i32);
  auto round_up = [&](Node* d) { return t.binary(Op::div, t.binary(Op::add, d, t.constant(kTile - 1, DType::i32)), T); };
  Node* tiles = round_up(K);
  Node* C = t.zeros({M, N}, DType::f32);
  std::vector<Node*> ij = t.begin_kernel({t.binary(Op::mul, round_up(M), T), t.binary(Op::mul, round_up(N), T)},
                                         {kTile, kTile});
  Node* As = t.group_buffer({kTile, kTile}, DType::f32);
  Node* Bs = t.group_buffer({kTile, kTile}, DType::f32);
  std::vector<Node*> lc = t.local_index();
  Node* zero = t.constant(0.0, DType::f32);
  Node* acc = t.var(zero);
  Node* tile = t.begin_loop(t.constant(0, DType::i32), tiles, t.constant(1, DType::i32));
  Node* ka = t.binary(Op::add, t.binary(Op::mul, tile, T), lc[1]);
  t.scatter(As, {at(lc[0]), at(lc[1])}, t.select(t.binary(Op::lt, ka, K), t.gather(A, {at(ij[0]), at(ka)}), zero));
  Node* kb = t.binary(Op::add, t.binary(Op::mul, tile, T), lc[0]);
  t.scatter(Bs, {at(lc[0]), at(lc[1])}, t.select(t.binary(Op::lt, kb, K), t.gather(B, {at(kb), at(ij[1])}), zero));
  t.barrier();
  Node* k = t.begin_loop(t.constant(0, DType::i32), T, t.constant(1, DType::i32));
  t.set(acc, t.binary(Op::add, acc, t.binary(Op::mul, t.gather(As, {at(lc[0]), at(k)}), t.gather(Bs, {at(k), at(lc[1])}))));
  t.end_scope();
  t.barrier();
  t.end_scope();
  t.begin_if(t.binary(Op::land, t.binary(Op::lt, ij[0], M), t.binary(Op::lt, ij[1], N)));
  t.scatter(C, {at(ij[0]), at(ij[1])}, acc);
  t.end_scope();
  t.end_scope();
  t.output(C);
  return t.release();
}

// Sums of each row of every 4 x 8 tile of A, over a 2-D shape the group does not divide.
std::unique_ptr<Program> tile_row_sums() {
  Tracer t("tile_row_sums");
  t.set_loc("tile_row_sums.py", 1);
  Node* A = t.input(DType::f32, {sym("M"), sym("N")}, "A");
  Node* M = A->shape[0];
  Node* N = A->shape[1];
  Node* R = t.zeros({M, t.binary(Op::div, t.binary(Op::add, N, t.constant(7, DType::i32)), t.constant(8, DType::i32))},
                    DType::f32);
  std::vector<Node*> ij = t.begin_kernel({M, N}, {4, 8});
  Node* tile = t.group_buffer({4, 8}, DType::f32);
  std::vector<Node*> lc = t.local_index();
  std::vector<Node*> gc = t.group_index();
  t.scatter(tile, {at(lc[0]), at(lc[1])}, t.gather(A, {at(ij[0]), at(ij[1])}));
  t.barrier();
  t.begin_if(t.binary(Op::eq, lc[1], t.constant(0, DType::i32)));
  Node* s = t.var(t.constant(0.0, DType::f32));
  Node* c = t.begin_loop(t.constant(0, DType::i32), t.constant(8, DType::i32), t.constant(1, DType::i32));
  t.begin_if(t.binary(Op::lt, t.binary(Op::add, t.binary(Op::mul, gc[1], t.constant(8, DType::i32)), c), N));
  t.set(s, t.binary(Op::add, s, t.gather(tile, {at(lc[0]), at(c)})));
  t.end_scope();
  t.end_scope();
  t.scatter(R, {at(ij[0]), at(gc[1])}, s);
  t.end_scope();
  t.end_scope();
  t.output(R);
  return t.release();
}

}  // namespace

// ---- correctness ---------------------------------------------------------------------------

TEST(Group, BlockSumMatchesReference) {
  for (int64_t n : {1000, 1024, 5, 513}) {
    SCOPED_TRACE("N = " + std::to_string(n));
    std::vector<float> x = random_f32(static_cast<size_t>(n), 7 + static_cast<uint32_t>(n));
    int64_t groups = (n + kSumGroup - 1) / kSumGroup;
    std::vector<float> sums(static_cast<size_t>(groups), 0.f);
    for (int64_t k = 0; k < n; ++k) sums[static_cast<size_t>(k / kSumGroup)] += x[static_cast<size_t>(k)];
    check_all(block_sum, {ArgValue::of_tensor(f32s(x, {n}))}, {f32s(sums, {groups})});
  }
}

TEST(Group, ScanCarriesVarsAndValuesAcrossBarriers) {
  for (int64_t n : {200, 128, 3}) {
    SCOPED_TRACE("N = " + std::to_string(n));
    std::vector<int32_t> x = random_i32(static_cast<size_t>(n), 11);
    std::vector<int32_t> inc(x.size()), exc(x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      inc[k] = x[k] + (k % kScanGroup ? inc[k - 1] : 0);
      exc[k] = inc[k] - x[k];
    }
    check_all(group_scan, {ArgValue::of_tensor(i32s(x, {n}))}, {i32s(inc, {n}), i32s(exc, {n})});
  }
}

TEST(Group, StencilWithHalo) {
  for (int64_t n : {300, 64, 1}) {
    SCOPED_TRACE("N = " + std::to_string(n));
    std::vector<float> x = random_f32(static_cast<size_t>(n), 3);
    std::vector<float> y(x.size());
    for (int64_t k = 0; k < n; ++k) {
      float left = x[static_cast<size_t>(std::max<int64_t>(k - 1, 0))];
      float right = x[static_cast<size_t>(std::min<int64_t>(k + 1, n - 1))];
      y[static_cast<size_t>(k)] = left * 0.25f + x[static_cast<size_t>(k)] * 0.5f + right * 0.25f;
    }
    check_all(stencil, {ArgValue::of_tensor(f32s(x, {n}))}, {f32s(y, {n})});
  }
}

TEST(Group, TiledMatmul) {
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{20, 13, 17}, {16, 16, 8}}) {
    SCOPED_TRACE("M K N = " + std::to_string(m) + " " + std::to_string(k) + " " + std::to_string(n));
    std::vector<float> a = random_f32(static_cast<size_t>(m * k), 1), b = random_f32(static_cast<size_t>(k * n), 2);
    std::vector<float> c(static_cast<size_t>(m * n), 0.f);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t q = 0; q < k; ++q) c[static_cast<size_t>(i * n + j)] += a[static_cast<size_t>(i * k + q)] * b[static_cast<size_t>(q * n + j)];
    check_all(tiled_matmul, {ArgValue::of_tensor(f32s(a, {m, k})), ArgValue::of_tensor(f32s(b, {k, n}))}, {f32s(c, {m, n})});
  }
}

TEST(Group, TwoDimensionalGroupsOverAShapeTheyDoNotDivide) {
  const int64_t m = 10, n = 21, blocks = 3;
  std::vector<float> a = random_f32(static_cast<size_t>(m * n), 5);
  std::vector<float> r(static_cast<size_t>(m * blocks), 0.f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) r[static_cast<size_t>(i * blocks + j / 8)] += a[static_cast<size_t>(i * n + j)];
  check_all(tile_row_sums, {ArgValue::of_tensor(f32s(a, {m, n}))}, {f32s(r, {m, blocks})});
}

// ---- IR, lowering and codegen --------------------------------------------------------------

TEST(Group, PrintedIRShowsTheGroup) {
  std::unique_ptr<Program> p = block_sum();
  std::string ir = print_program(*p);
  EXPECT_NE(ir.find("group(256)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("group_buffer f32[256] zero"), std::string::npos) << ir;
  EXPECT_NE(ir.find("barrier"), std::string::npos) << ir;
  EXPECT_NE(ir.find("local_index i32[N] axis=0"), std::string::npos) << ir;
}

TEST(Group, CpuLoweringMakesOneThreadPerGroup) {
  std::unique_ptr<Program> p = block_sum();
  PipelineOptions opt;
  opt.verify = true;
  opt.lower_groups = true;
  std::map<std::string, std::string> stages;
  opt.stages = &stages;
  run_pipeline(*p, opt);
  ASSERT_TRUE(stages.count("lower_group_barriers"));
  int kernels = 0;
  p->for_each([&](Node* n) {
    if (n->op != Op::kernel) return;
    ++kernels;
    EXPECT_TRUE(n->group.empty());
    // Phases before and after the uniform loop (a third is inside it), each a loop over the group.
    int phases = 0;
    for (Node* c = n->first_child; c; c = c->next)
      if (c->op == Op::loop && c->operand(1)->op == Op::constant && c->operand(1)->i() == kSumGroup) ++phases;
    EXPECT_EQ(phases, 2) << print_program(*p);
  });
  EXPECT_EQ(kernels, 1);
  std::string src = generate_kernels(*p, cpp_dialect());
  EXPECT_NE(src.find("alignas(64) float g0[256] = {};"), std::string::npos) << src;
}

TEST(Group, UnloweredBarrierHasNoCppSpelling) {
  std::unique_ptr<Program> p = block_sum();
  run_pipeline(*p);  // without the CPU lowering
  EXPECT_THROW(generate_kernels(*p, cpp_dialect()), InternalError);
}

// The GPU dialects print a group kernel as one workgroup per group: shared memory, the
// language's barrier outside the thread guard, the group's size as the local size.
TEST(Group, GpuDialectsPrintNativeWorkgroups) {
  std::unique_ptr<Program> p = block_sum();
  run_pipeline(*p);  // without the CPU lowering, as the GPU backends run it
  const std::string glsl = generate_kernels(*p, glsl_dialect());
  for (const char* want : {"shared uint g0[256];", "layout(local_size_x = 256) in;",
                           "memoryBarrierShared();\n  barrier();", "gl_WorkGroupID", "gl_LocalInvocationID",
                           "bool ember_in = ember_t < ember_pc.threads;",
                           "if (ember_in) {"})
    EXPECT_NE(glsl.find(want), std::string::npos) << want << "\n" << glsl;
  EXPECT_EQ(glsl.find("return;"), std::string::npos) << glsl;  // no thread leaves before a barrier
  EXPECT_EQ(glsl.find("memoryBarrierBuffer"), std::string::npos) << glsl;  // no buffer write precedes one
  // Every barrier sits outside the guards: at the kernel's top level or in the uniform loop.
  size_t guard = glsl.find("if (ember_in) {");
  size_t barrier = glsl.find("barrier();", glsl.find("void main()"));
  EXPECT_LT(barrier, guard) << glsl;  // the zeroing's barrier comes before the first guard
  const std::string hlsl = generate_kernels(*p, hlsl_dialect());
  for (const char* want : {"groupshared uint g0[256];", "[numthreads(256, 1, 1)]", "GroupMemoryBarrierWithGroupSync();",
                           "SV_GroupID", "SV_GroupThreadID"})
    EXPECT_NE(hlsl.find(want), std::string::npos) << want << "\n" << hlsl;
}

TEST(Group, VerifierRejectsABarrierUnderDivergentControlFlow) {
  std::unique_ptr<Program> p = block_sum();
  verify(*p);
  // Move the first barrier into a new if on the thread's index.
  Node* barrier = nullptr;
  Node* l = nullptr;
  p->for_each([&](Node* n) {
    if (n->op == Op::barrier && !barrier) barrier = n;
    if (n->op == Op::local_index) l = n;
  });
  ASSERT_TRUE(barrier && l);
  Builder b(*p);
  b.set_insert_before(barrier);
  Node* cond = b.binary(Op::lt, l, b.i32(3));
  Node* iff = b.if_(cond, barrier->parent->shape);
  p->unlink(barrier);
  p->append(iff, barrier);
  EXPECT_THROW(verify(*p), InternalError);
}

TEST(Group, VerifierRejectsWorkgroupOpsOutsideAGroupKernel) {
  Program p;
  Builder b(p);
  Node* k = b.kernel({b.i32(4)});
  b.set_insert_end(k);
  b.raw(Op::barrier, DType::none, {}, {});
  EXPECT_THROW(verify(p), InternalError);
  k->group = {4};
  verify(p);
  k->group = {2, 2};
  EXPECT_THROW(verify(p), InternalError);
}

// ---- user errors ---------------------------------------------------------------------------

namespace {
template <class E>
std::string error_of(const std::function<void(Tracer&)>& f) {
  Tracer t("errors");
  t.set_loc("user.py", 42);
  try {
    f(t);
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(GroupErrors, BarrierOutsideAKernel) {
  std::string m = error_of<CompileError>([](Tracer& t) { t.barrier(); });
  EXPECT_NE(m.find("em.barrier() outside an em.kernel"), std::string::npos) << m;
  EXPECT_NE(m.find("user.py:42"), std::string::npos) << m;
}

TEST(GroupErrors, GroupBufferOutsideAKernel) {
  std::string m = error_of<CompileError>([](Tracer& t) { t.group_buffer({16}, DType::f32); });
  EXPECT_NE(m.find("em.group_buffer() outside an em.kernel"), std::string::npos) << m;
  EXPECT_NE(m.find("user.py:42"), std::string::npos) << m;
}

TEST(GroupErrors, WorkgroupOpsNeedAGroup) {
  std::string m = error_of<CompileError>([](Tracer& t) {
    t.begin_kernel({t.dim_const(64)});
    t.barrier();
  });
  EXPECT_NE(m.find("without a group"), std::string::npos) << m;
  m = error_of<CompileError>([](Tracer& t) {
    t.begin_kernel({t.dim_const(64)});
    t.local_index();
  });
  EXPECT_NE(m.find("em.local_index() in an em.kernel without a group"), std::string::npos) << m;
}

TEST(GroupErrors, BarrierInsideADivergentIf) {
  std::string m = error_of<CompileError>([](Tracer& t) {
    Node* i = t.begin_kernel({t.dim_const(64)}, {32})[0];
    t.set_loc("user.py", 40);
    t.begin_if(t.binary(Op::lt, i, t.constant(10, DType::i32)));
    t.set_loc("user.py", 42);
    t.barrier();
  });
  EXPECT_NE(m.find("em.barrier() inside an em.if_ whose condition may differ"), std::string::npos) << m;
  EXPECT_NE(m.find("opened at user.py:40"), std::string::npos) << m;
  EXPECT_NE(m.find("user.py:42"), std::string::npos) << m;
}

TEST(GroupErrors, BarrierInsideAPerThreadLoop) {
  std::string m = error_of<CompileError>([](Tracer& t) {
    t.begin_kernel({t.dim_const(64)}, {32});
    Node* l = t.local_index()[0];
    t.begin_loop(t.constant(0, DType::i32), l, t.constant(1, DType::i32));
    t.barrier();
  });
  EXPECT_NE(m.find("inside an em.loop whose bounds may differ"), std::string::npos) << m;
}

TEST(GroupErrors, LoopWithABarrierCannotBeLeftEarly) {
  std::string m = error_of<CompileError>([](Tracer& t) {
    t.begin_kernel({t.dim_const(64)}, {32});
    t.begin_loop(t.constant(0, DType::i32), t.constant(4, DType::i32), t.constant(1, DType::i32));
    t.barrier();
    t.break_();
  });
  EXPECT_NE(m.find("em.break_() in an em.loop that contains em.barrier()"), std::string::npos) << m;
  m = error_of<CompileError>([](Tracer& t) {
    t.begin_kernel({t.dim_const(64)}, {32});
    t.begin_loop(t.constant(0, DType::i32), t.constant(4, DType::i32), t.constant(1, DType::i32));
    t.continue_();
    t.barrier();
  });
  EXPECT_NE(m.find("may leave early"), std::string::npos) << m;
}

TEST(GroupErrors, UniformControlFlowIsAllowed) {
  Tracer t("uniform");
  Node* n = t.scalar(DType::i32, "n");
  t.begin_kernel({t.dim_const(64)}, {32});
  Node* g = t.group_index()[0];
  t.begin_if(t.binary(Op::eq, g, t.constant(0, DType::i32)));
  t.begin_loop(t.constant(0, DType::i32), t.binary(Op::add, n, t.constant(1, DType::i32)), t.constant(1, DType::i32));
  EXPECT_NO_THROW(t.barrier());
}

TEST(GroupErrors, GroupShapeAndAccesses) {
  EXPECT_NE(error_of<ShapeError>([](Tracer& t) { t.begin_kernel({t.dim_const(8), t.dim_const(8)}, {8}); }).find("the group has 1 dims"),
            std::string::npos);
  EXPECT_NE(error_of<CompileError>([](Tracer& t) { t.begin_kernel({t.dim_const(4096)}, {2048}); }).find("at most 1024"),
            std::string::npos);
  EXPECT_NE(error_of<ShapeError>([](Tracer& t) {
              t.begin_kernel({t.dim_const(64)}, {64});
              Node* buf = t.group_buffer({64}, DType::f32);
              t.gather(buf, {all()});
            }).find("one integer per axis"),
            std::string::npos);
  EXPECT_NE(error_of<TypeError>([](Tracer& t) {
              t.begin_kernel({t.dim_const(64)}, {64});
              Node* buf = t.group_buffer({64}, DType::f32);
              t.binary(Op::add, buf, t.constant(1, DType::f32));
            }).find("cannot be used as a whole value"),
            std::string::npos);
  EXPECT_NE(error_of<CompileError>([](Tracer& t) {
              t.begin_kernel({t.dim_const(64)}, {64});
              t.group_buffer({100000}, DType::f32);
            }).find("64 KiB"),
            std::string::npos);
  EXPECT_NE(error_of<CompileError>([](Tracer& t) {
              t.begin_kernel({t.dim_const(64)}, {64});
              Node* buf = t.group_buffer({64}, DType::f32);
              t.end_scope();
              t.begin_kernel({t.dim_const(64)}, {64});
              t.gather(buf, {at(t.constant(0, DType::i32))});
            }).find("only be used inside the kernel that made it"),
            std::string::npos);
}

// Every pass is tested by running the reference interpreter before and after it on random
// inputs; the verifier runs after every pass.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/analysis/contraction.h"
#include "core/analysis/reductions.h"
#include "core/ir/builder.h"
#include "core/ir/printer.h"
#include "core/ir/shape.h"
#include "core/ir/verifier.h"
#include "core/passes/cse.h"
#include "core/passes/dce.h"
#include "core/passes/pipeline.h"
#include "core/passes/simplify.h"
#include "programs.h"

using namespace ember;
using namespace ember::testing;

class PassTest : public ::testing::TestWithParam<TestProgram> {};

namespace {
// The interpreter's results of a program on random inputs, taken before a pass: check() then
// verifies the program and compares its results with them.
struct Reference {
  std::vector<ArgValue> args;
  std::vector<HostTensor> want;
  Reference(const Program& p, unsigned seed) {
    verify(p);
    std::mt19937 rng(seed);
    args = random_args(p, rng);
    want = interpret(p, copy_args(args));
  }
  void check(const Program& p) const {
    verify(p);
    EXPECT_EQ(compare(want, interpret(p, copy_args(args))), "");
  }
};

// A host-level program being built, with one f32 argument x.
struct ScalarProgram {
  Program p;
  Builder b{p};
  Node* x = nullptr;
  ScalarProgram() {
    b.set_insert_end(p.root());
    x = b.scalar_arg(DType::f32, 0, "x");
  }
  void output(Node* v) {
    b.output(v, 0);
    p.num_outputs = 1;
  }
};
}  // namespace

TEST_P(PassTest, InterpreterAgreesBeforeAndAfterEachPass) {
  const TestProgram& tp = GetParam();
  std::unique_ptr<Program> p = tp.build();
  verify(*p);
  for (int trial = 0; trial < 2; ++trial) {
    std::mt19937 rng(1234 + trial);
    std::vector<ArgValue> args = random_args(*p, rng, trial == 0 ? 5 : 9);
    std::unique_ptr<Program> q = clone_program(*p);
    std::vector<HostTensor> want = interpret(*q, copy_args(args));
    bool formed = false;
    for (const PassInfo& pass : pipeline_passes()) {
      SCOPED_TRACE(std::string("after pass ") + pass.name + "\n" + print_program(*q));
      pass.fn(*q, PipelineOptions{});
      formed |= std::string(pass.name) == "fuse_kernels";
      verify(*q, VerifyOptions{formed});
      std::vector<HostTensor> got = interpret(*q, copy_args(args));
      std::string diff = compare(want, got);
      ASSERT_EQ(diff, "") << tp.name << " differs after " << pass.name;
    }
  }
}

// The whole pipeline as the GPU backends run it and as the CPU runs it (with tile_threads and
// contract_fma).
TEST_P(PassTest, FullPipelineWithVerifier) {
  const TestProgram& tp = GetParam();
  for (bool tiled : {false, true}) {
    SCOPED_TRACE(tiled ? "with tile_threads and contract_fma" : "without tile_threads");
    std::unique_ptr<Program> p = tp.build();
    std::mt19937 rng(99);
    std::vector<ArgValue> args = random_args(*p, rng, 6);
    std::vector<HostTensor> want = interpret(*p, copy_args(args));
    PipelineOptions opt;
    opt.verify = true;
    opt.tile_threads = opt.contract_fma = tiled;
    run_pipeline(*p, opt);
    EXPECT_EQ(compare(want, interpret(*p, copy_args(args))), "");
    int kernels = 0;
    p->for_each([&](Node* n) { kernels += n->op == Op::kernel; });
    if (tp.kernels >= 0) {
      EXPECT_EQ(kernels, tp.kernels) << print_program(*p);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, PassTest, ::testing::ValuesIn(test_programs()),
                         [](const ::testing::TestParamInfo<TestProgram>& i) { return i.param.name; });

TEST(Pipeline, ListsEveryPassOnce) {
  std::vector<std::string> names;
  for (const PassInfo& p : pipeline_passes()) names.push_back(p.name);
  std::vector<std::string> want = {"check_shapes", "check_races", "lower_algorithms", "simplify", "cse", "dce",
                                   "fuse_kernels", "fuse_loads", "reduce_atomics", "parallelize_host_loops", "apply_schedule",
                                   "merge_kernels",
                                   "unroll_small_dims", "unroll_loops", "tile_threads",
                                   "share_reciprocals", "forward_copies",
                                   "form_kernels", "split_reductions", "lower_indexing", "lower_group_barriers",
                                   "fold_reciprocal_powers", "contract_fma", "hoist_invariants",
                                   "split_host"};
  EXPECT_EQ(names, want);
}

// After the pipeline the N-body step is one kernel over bodies (xyz unrolled into registers)
// whose loop over the other bodies is a reduction into three accumulators.
TEST(Pipeline, NBodyIsOneKernelWithAThreeWayReduction) {
  std::unique_ptr<Program> p;
  for (const TestProgram& tp : test_programs())
    if (tp.name == "nbody") p = tp.build();
  run_pipeline(*p);
  std::vector<Node*> kernels, loops;
  p->for_each([&](Node* n) {
    if (n->op == Op::kernel) kernels.push_back(n);
    if (n->op == Op::loop && n->parent->op == Op::kernel) loops.push_back(n);
  });
  ASSERT_EQ(kernels.size(), 1u) << print_program(*p);
  EXPECT_EQ(kernels[0]->rank(), 1) << "the xyz axis should run inside each thread\n" << print_program(*p);
  ASSERT_EQ(loops.size(), 1u) << print_program(*p);
  EXPECT_EQ(reduction_vars(loops[0]).size(), 3u) << print_program(*p);
}

// A break in a per-lane branch stops the loop for that lane only, so such a kernel keeps its lanes as threads.
TEST(Pipeline, LaneDependentBreakKeepsTheAxis) {
  std::unique_ptr<Program> p;
  for (const TestProgram& tp : test_programs())
    if (tp.name == "rgba_break") p = tp.build();
  run_pipeline(*p);
  int rank2 = 0;
  p->for_each([&](Node* n) { rank2 += n->op == Op::kernel && n->rank() == 2; });
  EXPECT_EQ(rank2, 1) << print_program(*p);
}

TEST(Pipeline, PerLaneBranchesAreUnrolled) {
  std::unique_ptr<Program> p;
  for (const TestProgram& tp : test_programs())
    if (tp.name == "rgba_lanes") p = tp.build();
  run_pipeline(*p);
  int rank2 = 0, ifs = 0;
  p->for_each([&](Node* n) {
    rank2 += n->op == Op::kernel && n->rank() == 2;
    ifs += n->op == Op::if_;
  });
  EXPECT_EQ(rank2, 0) << print_program(*p);
  EXPECT_EQ(ifs, 4) << "one if per lane\n" << print_program(*p);
}

// Each thread of a matmul whose k loop also scales A computes a 4 x 16 tile (tile_threads): in a
// whole tile the k loop accumulates 64 registers; an edge tile (6 rows, 37 columns) runs its
// elements one by one. The relu epilogue stays in the kernel. The plain batched X @ B is a
// contraction (core/analysis/contraction.h): left untiled, for the cpp dialect's packed panels.
TEST(Pipeline, MatmulRunsInRegisterTiles) {
  std::unique_ptr<Program> p;
  for (const TestProgram& tp : test_programs())
    if (tp.name == "matmul_tiles") p = tp.build();
  PipelineOptions opt;
  opt.tile_threads = true;
  run_pipeline(*p, opt);
  std::vector<Node*> kernels;
  p->for_each([&](Node* n) {
    if (n->op == Op::kernel) kernels.push_back(n);
  });
  ASSERT_EQ(kernels.size(), 2u) << print_program(*p);
  Node* k = kernels[0];
  std::vector<size_t> accumulators;
  for (Node* whole = k->first_child; whole; whole = whole->next)
    for (Node* l = whole->op == Op::if_ ? whole->first_child : nullptr; l; l = l->next)
      if (l->op == Op::loop) accumulators.push_back(reduction_vars(l).size());
  EXPECT_EQ(accumulators, (std::vector<size_t>{64})) << print_program(*p);
  EXPECT_EQ(k->last_child->op, Op::else_) << "edge tiles\n" << print_program(*p);
  EXPECT_FALSE(find_contraction(k, nullptr));
  // One flat axis of tiles: 6 rows in 2 tiles of 4, 37 columns in 3 of 16.
  ASSERT_EQ(k->rank(), 1) << print_program(*p);
  EXPECT_EQ(const_dim(k->shape[0]), 6) << print_program(*p);
  // The batch of 2 x 9 x 37 sums: one thread per element, its loop the contraction.
  Contraction c;
  ASSERT_EQ(kernels[1]->rank(), 3) << print_program(*p);
  ASSERT_TRUE(find_contraction(kernels[1], &c)) << print_program(*p);
  EXPECT_EQ(c.loop->parent, kernels[1]);
  EXPECT_EQ(c.a->operand(0)->name, "X");
  EXPECT_EQ(c.b->operand(0)->name, "B");
}

// The sort's stage loops run on the host: after the pipeline no loop remains inside a kernel,
// and the result is sorted.
// simplify folds sign_scaling's signs and power-of-two factors (exactly) into one multiply by a
// constant per chain, and reads the var as the value it holds at each read (B before its set,
// B + A after it).
TEST(Simplify, FoldsSignsAndPowerOfTwoFactors) {
  std::unique_ptr<Program> p;
  for (const TestProgram& tp : test_programs())
    if (tp.name == "sign_scaling") p = tp.build();
  ASSERT_TRUE(p);
  for (int round = 0; round < 8; ++round) {
    bool any = simplify(*p);
    any |= cse(*p);
    any |= dce(*p);
    if (!any) break;
  }
  verify(*p);
  std::vector<float> factors;
  int negs = 0, muls = 0;
  p->for_each([&](Node* n) {
    negs += n->op == Op::neg;
    if (n->op != Op::mul) return;
    ++muls;
    for (Node* o : n->operands)
      if (o->op == Op::constant) factors.push_back(o->f());
  });
  std::sort(factors.begin(), factors.end());
  // -(A*(A*-0.5))*0.5*0.25 = (A*A)*0.0625 = s; (B*s)*-4 + B = (B*(A*A))*-0.25 + B;
  // s*(B+B) = (B*(A*A))*0.125 (the product shared by cse); -(A+A) - -B = B + A*-2;
  // -(-A*B) + A*3 = A*B + A*3. The var: v*0.5 is read before the set, where v is B, so
  // (v*0.5)*4 = B*2; -v after it, where v is B + A: -(B + A)*2 = (B + A)*-2. No negation left.
  EXPECT_EQ(negs, 0) << print_program(*p);
  EXPECT_EQ(factors, (std::vector<float>{-2.0f, -2.0f, -0.25f, 0.125f, 2.0f, 3.0f})) << print_program(*p);
  EXPECT_EQ(muls, 9) << print_program(*p);
  int var_reads = 0;
  p->for_each([&](Node* n) {
    for (Node* o : n->operands) var_reads += o->op == Op::var && n->op != Op::set;
  });
  EXPECT_EQ(var_reads, 0) << print_program(*p);
}

// cse's one table for all open scopes: thousands of values (the table grows and drops the
// tombstones of closed scopes), a host value seen inside a scope, and sibling scopes that do not
// see each other's values.
TEST(Cse, OneTableServesNestedAndSiblingScopes) {
  Program p;
  Builder b(p);
  b.set_insert_end(p.root());
  auto make = [&](Op op, Node* l, Node* r) { return b.raw(op, DType::f32, Shape{}, {l, r}); };  // (not numbered)
  Node* x = b.scalar_arg(DType::f32, 0, "x");
  constexpr int kValues = 3000;
  std::vector<Node*> cs, again;
  for (int i = 0; i < kValues; ++i) cs.push_back(b.f32(static_cast<float>(i) + 0.5f));
  for (int i = 0; i < kValues; ++i) make(Op::add, x, cs[static_cast<size_t>(i)]);
  Node* sq = make(Op::mul, x, x);
  Node* acc = b.var(b.f32(0.0f), Shape{});
  for (int s = 0; s < 3; ++s) {  // each: acc = x*x (the host's) + x-x (its own)
    Node* scope = b.if_(b.binary(Op::lt, x, cs[static_cast<size_t>(s)]), Shape{});
    b.set_insert_end(scope);
    b.set(acc, make(Op::add, make(Op::mul, x, x), make(Op::sub, x, x)));
    b.set_insert_end(p.root());
  }
  for (int i = 0; i < kValues; ++i) again.push_back(make(Op::add, x, cs[static_cast<size_t>(i)]));
  Node* sum = make(Op::add, sq, acc);
  for (Node* v : again) sum = make(Op::add, sum, v);
  b.output(sum, 0);
  p.num_outputs = 1;
  const Reference ref(p, 7);
  ASSERT_TRUE(cse(p));
  ref.check(p);
  int muls = 0, subs = 0, adds_of_x = 0;
  p.for_each([&](Node* n) {
    muls += n->op == Op::mul;
    subs += n->op == Op::sub;
    adds_of_x += n->op == Op::add && n->operand(0) == x && n->operand(1)->op == Op::constant;
  });
  EXPECT_EQ(adds_of_x, kValues) << "each repeated x + c is the first one";
  EXPECT_EQ(muls, 1) << "x*x inside each scope is the host's";
  EXPECT_EQ(subs, 3) << "a sibling scope's x-x is not visible in the next one";
  EXPECT_FALSE(cse(p)) << "one run reaches cse's fixed point";
}

// dce reaches its own fixed point in one run: removing the last load of a buffer makes the
// buffer's stores dead, and the same run removes them (the cleanup then skips a second dce).
TEST(Dce, OneRunReachesItsFixedPoint) {
  ScalarProgram s;
  auto& [p, b, x] = s;
  Node* buf = b.buffer(DType::f32, Shape{}, false);
  b.store(buf, b.unary(Op::sin, x), {}, Shape{});
  b.binary(Op::add, b.load(buf, {}, Shape{}), x);  // the only load, its value unused
  s.output(b.binary(Op::mul, x, x));
  const Reference ref(p, 11);
  ASSERT_TRUE(dce(p));
  ref.check(p);
  int left = 0;
  p.for_each([&](Node* n) { left += n->op == Op::store || n->op == Op::buffer || n->op == Op::sin; });
  EXPECT_EQ(left, 0) << "the unread buffer and its store stay\n" << print_program(p);
  EXPECT_FALSE(dce(p)) << "a second run still found dead code";
}

// After cse merges twins, simplify_nodes looks again at what it noted: the select whose two
// arms became one value folds, as a full simplify would fold it.
TEST(Cleanup, ResimplifyAfterCseFoldsWhatTheMergeEnabled) {
  ScalarProgram s;
  auto& [p, b, x] = s;
  Node* c = b.binary(Op::lt, x, b.f32(0.25f));
  Node* a1 = b.raw(Op::sin, DType::f32, Shape{}, {x});
  Node* a2 = b.raw(Op::sin, DType::f32, Shape{}, {x});  // a1's twin (raw: not numbered)
  s.output(b.raw(Op::select, DType::f32, Shape{}, {c, a1, a2}));
  const Reference ref(p, 12);
  ASSERT_FALSE(simplify(p)) << "the arms are two nodes: nothing to fold yet";
  Resimplify r;
  ASSERT_TRUE(cse(p, &r));
  EXPECT_FALSE(r.all);
  EXPECT_TRUE(simplify_nodes(p, r)) << "the select of one value twice was not folded";
  ref.check(p);
  int selects = 0;
  p.for_each([&](Node* n) { selects += n->op == Op::select; });
  EXPECT_EQ(selects, 0) << print_program(p);
  EXPECT_FALSE(simplify(p));
  EXPECT_FALSE(cse(p));
}

// After dce removes a value's other user, simplify_nodes looks again at the one left: the
// single-use fold -(x * 2) -> x * -2 that the second user blocked now applies.
TEST(Cleanup, ResimplifyAfterDceFoldsWhatASingleUseEnables) {
  ScalarProgram s;
  auto& [p, b, x] = s;
  Node* m = b.raw(Op::mul, DType::f32, Shape{}, {x, b.f32(2.0f)});
  Node* n = b.raw(Op::neg, DType::f32, Shape{}, {m});
  b.raw(Op::add, DType::f32, Shape{}, {m, x});  // unused: dead
  s.output(n);
  const Reference ref(p, 13);
  ASSERT_FALSE(simplify(p)) << "m has two users: the fold must wait";
  Resimplify r;
  ASSERT_TRUE(dce(p, &r));
  EXPECT_TRUE(simplify_nodes(p, r)) << "-(x * 2) with one use of x * 2 was not folded";
  ref.check(p);
  int negs = 0;
  p.for_each([&](Node* q) { negs += q->op == Op::neg; });
  EXPECT_EQ(negs, 0) << print_program(p);
  dce(p);
  EXPECT_FALSE(simplify(p));
}

TEST(Pipeline, BitonicStagesBecomeHostLoops) {
  std::unique_ptr<Program> p = bitonic_sort();
  std::mt19937 rng(3);
  std::vector<ArgValue> args = random_args(*p, rng);
  std::vector<int32_t> want;
  for (int64_t i = 0; i < 16; ++i) want.push_back(w2i(args[0].tensor.data[i]));
  std::sort(want.begin(), want.end());
  bool formed = false;
  for (const PassInfo& pass : pipeline_passes()) {
    pass.fn(*p, PipelineOptions{});
    formed |= std::string(pass.name) == "fuse_kernels";
    verify(*p, VerifyOptions{formed});
    if (!formed) continue;
    std::vector<HostTensor> out = interpret(*p, copy_args(args));
    for (int64_t i = 0; i < 16; ++i) ASSERT_EQ(w2i(out[0].data[i]), want[static_cast<size_t>(i)]) << "after " << pass.name;
  }
  p = bitonic_sort();
  run_pipeline(*p);
  for (int64_t i = 0; i < 16; ++i)
    ASSERT_EQ(w2i(interpret(*p, copy_args(args))[0].data[i]), want[static_cast<size_t>(i)]) << "after the pipeline";
  int host_loops = 0, kernel_loops = 0, kernels = 0;
  p->for_each([&](Node* n) {
    if (n->op == Op::loop) (n->enclosing_kernel() ? kernel_loops : host_loops)++;
    kernels += n->op == Op::kernel;
  });
  EXPECT_EQ(host_loops, 2) << print_program(*p);
  EXPECT_EQ(kernel_loops, 0) << print_program(*p);
  EXPECT_EQ(kernels, 2) << "the compare-exchange, and the copy returned" << print_program(*p);
}

// v = v - x is a reduction (accumulated with +); a second read of the accumulator is not.
TEST(Reductions, SubtractionAccumulatesAndOtherReadsDisqualify) {
  Program p;
  Builder b(p);
  Node* x = b.scalar_arg(DType::f32, 0, "x");
  Node* v = b.var(b.f32(0.f), {});
  Node* loop = b.loop(b.i32(0), b.i32(8), b.i32(1), {});
  b.set_insert_end(loop);
  b.set(v, b.binary(Op::sub, v, x));
  std::vector<ReductionVar> r = reduction_vars(loop);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].op, Op::add);
  b.binary(Op::mul, v, x);  // reads the running value: iterations can no longer be split
  EXPECT_TRUE(reduction_vars(loop).empty());
}

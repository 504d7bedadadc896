// Algorithms: every reduce kind (sum prod max min any all argmax argmin, norm, mean) over one or
// several axes with and without keepdims, the blocked prefix sum, and matmul/dot. The reference
// interpreter runs the `reduce`/`scan` nodes directly (the oracle); the program must agree after
// lower_algorithms and after the whole pipeline, on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "core/ir/printer.h"
#include "core/ir/verifier.h"
#include "core/passes/lower_algorithms.h"
#include "core/passes/pipeline.h"
#include "programs.h"

using namespace ember;
using namespace ember::testing;

namespace {

DimSpec sym(const std::string& n) { DimSpec d; d.kind = DimSpec::symbolic; d.name = n; return d; }
DimSpec fixed(int64_t v) { DimSpec d; d.kind = DimSpec::fixed; d.size = v; return d; }

int count_kernels(const Program& p) {
  int k = 0;
  p.for_each([&](Node* n) { k += n->op == Op::kernel; });
  return k;
}

// Runs p (a) as traced, (b) after each pass in turn (lower_algorithms first), (c) after the whole
// pipeline, on the same arguments, and expects equal results. Returns the oracle's outputs.
std::vector<HostTensor> check(const std::function<std::unique_ptr<Program>()>& build, const std::vector<ArgValue>& args,
                              double rtol = 1e-5) {
  std::unique_ptr<Program> p = build();
  verify(*p);
  std::vector<HostTensor> want = interpret(*p, copy_args(args));
  std::unique_ptr<Program> lowered = clone_program(*p);
  EXPECT_TRUE(lower_algorithms(*lowered));
  verify(*lowered);
  lowered->for_each([&](Node* n) { EXPECT_TRUE(n->op != Op::reduce && n->op != Op::scan) << print_program(*lowered); });
  EXPECT_EQ(compare(want, interpret(*lowered, copy_args(args)), rtol), "") << "after lower_algorithms\n"
                                                                            << print_program(*lowered);
  std::unique_ptr<Program> q = clone_program(*p);
  bool formed = false;
  for (const PassInfo& pass : pipeline_passes()) {
    pass.fn(*q, PipelineOptions{});
    formed |= std::string(pass.name) == "fuse_kernels";
    verify(*q, VerifyOptions{formed});
    std::string diff = compare(want, interpret(*q, copy_args(args)), rtol);
    EXPECT_EQ(diff, "") << "after " << pass.name << "\n" << print_program(*q);
    if (!diff.empty()) break;
  }
  PipelineOptions opt;
  opt.verify = true;
  run_pipeline(*p, opt);
  EXPECT_EQ(compare(want, interpret(*p, copy_args(args)), rtol), "") << "after the pipeline\n" << print_program(*p);
  return want;
}

std::vector<ArgValue> random_for(const std::function<std::unique_ptr<Program>()>& build, uint32_t seed, int64_t sym_size) {
  std::unique_ptr<Program> p = build();
  std::mt19937 rng(seed);
  return random_args(*p, rng, sym_size);
}

HostTensor tensor(DType t, std::vector<int64_t> shape, const std::vector<float>& values) {
  HostTensor h = HostTensor::alloc(t, std::move(shape), false);
  for (int64_t i = 0; i < h.size(); ++i)
    h.data[i] = t == DType::f32 ? f2w(values[static_cast<size_t>(i)]) : i2w(static_cast<int32_t>(values[static_cast<size_t>(i)]));
  return h;
}

struct ReduceCase {
  const char* name;
  ReduceKind kind;
};
const ReduceCase kKinds[] = {
    {"sum", ReduceKind::sum}, {"prod", ReduceKind::prod}, {"max", ReduceKind::max}, {"min", ReduceKind::min},
    {"any", ReduceKind::any}, {"all", ReduceKind::all}, {"argmax", ReduceKind::argmax}, {"argmin", ReduceKind::argmin},
};

}  // namespace

// Every kind x dtype x axes x keepdims on a [N, 5, M] input, before/after lowering and the pipeline.
TEST(Algorithms, EveryReduceKindAxesAndKeepdims) {
  const std::vector<std::vector<int>> axes_sets = {{}, {0}, {1}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (const ReduceCase& rc : kKinds)
    for (DType t : {DType::f32, DType::i32})
      for (const std::vector<int>& axes : axes_sets)
        for (bool keepdims : {false, true}) {
          SCOPED_TRACE(std::string(rc.name) + " " + dtype_name(t) + " axes " + std::to_string(axes.size()) +
                       (axes.empty() ? "" : " first " + std::to_string(axes[0])) + (keepdims ? " keepdims" : ""));
          auto build = [&] {
            Tracer tr("reduce");
            Node* x = tr.input(t, {sym("N"), fixed(5), sym("M")}, "x");
            // A computed operand (fused into the loop) next to the argument itself.
            tr.output(tr.reduce(rc.kind, tr.binary(Op::mul, x, tr.constant(3, t)), axes, keepdims));
            tr.output(tr.reduce(rc.kind, x, axes, keepdims));
            return tr.release();
          };
          for (int64_t n : {1, 4}) check(build, random_for(build, 7 + static_cast<uint32_t>(n), n));
        }
}

TEST(Algorithms, NormAndMean) {
  for (bool keepdims : {false, true}) {
    auto build = [&] {
      Tracer tr("norm");
      Node* x = tr.input(DType::f32, {sym("N"), fixed(6)}, "x");
      Node* i = tr.input(DType::i32, {sym("N"), fixed(6)}, "i");
      tr.output(tr.norm(x, {}, keepdims));
      tr.output(tr.norm(x, {1}, keepdims));
      tr.output(tr.norm(i, {0}, keepdims));
      tr.output(tr.mean(x, {0, 1}, keepdims));
      return tr.release();
    };
    std::vector<ArgValue> args = random_for(build, 3, 9);
    std::vector<HostTensor> got = check(build, args);
    // The oracle itself: norm over everything is sqrt(sum(x^2)).
    double s = 0;
    for (int64_t k = 0; k < args[0].tensor.size(); ++k) s += std::pow(static_cast<double>(w2f(args[0].tensor.data[k])), 2);
    EXPECT_NEAR(w2f(got[0].data[0]), std::sqrt(s), 1e-5 * std::sqrt(s));
  }
}

// The oracle's argmax/argmin: first occurrence on ties, the first NaN wins, flat index over
// several reduced axes, infinities.
TEST(Algorithms, ArgmaxArgminFirstOccurrenceAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto build = [] {
    Tracer tr("arg");
    Node* x = tr.input(DType::f32, {fixed(4), fixed(5)}, "x");
    tr.output(tr.reduce(ReduceKind::argmax, x, {1}, false));
    tr.output(tr.reduce(ReduceKind::argmin, x, {1}, true));
    tr.output(tr.reduce(ReduceKind::argmax, x, {}, false));
    tr.output(tr.reduce(ReduceKind::argmin, x, {0}, false));
    return tr.release();
  };
  std::vector<ArgValue> args = {ArgValue::of_tensor(tensor(DType::f32, {4, 5}, {
                                    1, 3, 3, -2, -2,       // ties: argmax 1, argmin 3
                                    0, nan, 7, nan, -9,    // first NaN wins both ways: 1
                                    -inf, -inf, -inf, -inf, -inf,  // all equal: 0
                                    2, 8, inf, 8, -inf}))};        // inf: 2; -inf: 4
  std::vector<HostTensor> got = check(build, args);
  auto ints = [](const HostTensor& h) {
    std::vector<int32_t> v;
    for (int64_t i = 0; i < h.size(); ++i) v.push_back(w2i(h.data[i]));
    return v;
  };
  EXPECT_EQ(ints(got[0]), (std::vector<int32_t>{1, 1, 0, 2}));
  EXPECT_EQ(ints(got[1]), (std::vector<int32_t>{3, 1, 0, 4}));
  EXPECT_EQ(got[1].shape, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(ints(got[2]), (std::vector<int32_t>{6}));  // the NaN at [1, 1]
  EXPECT_EQ(ints(got[3]), (std::vector<int32_t>{2, 1, 2, 1, 2}));  // NaNs in columns 1 and 3
}

// Integer argmax with many ties over two reduced axes (row-major flat index over them).
TEST(Algorithms, ArgmaxOverSeveralAxesIsTheFlatIndex) {
  auto build = [] {
    Tracer tr("arg2");
    Node* x = tr.input(DType::i32, {fixed(3), fixed(4), fixed(2)}, "x");
    tr.output(tr.reduce(ReduceKind::argmax, x, {0, 2}, false));
    return tr.release();
  };
  std::vector<ArgValue> args = random_for(build, 11, 1);
  std::vector<HostTensor> got = check(build, args);
  const uint32_t* x = args[0].tensor.data;
  for (int j = 0; j < 4; ++j) {
    int best = 0;
    for (int r = 0; r < 6; ++r) {  // r = i * 2 + k over the reduced axes (0, 2)
      int i = r / 2, k = r % 2, bi = best / 2, bk = best % 2;
      if (w2i(x[(i * 4 + j) * 2 + k]) > w2i(x[(bi * 4 + j) * 2 + bk])) best = r;
    }
    EXPECT_EQ(w2i(got[0].data[j]), best) << "column " << j;
  }
}

// The blocked scan: lengths around the block size, fixed and symbolic, on every axis, f32/i32.
TEST(Algorithms, PrefixSumMatchesASerialScan) {
  for (DType t : {DType::f32, DType::i32})
    for (int64_t len : {1, 5, 255, 256, 257, 1000, 5000})
      for (bool symbolic : {false, true})
        for (int axis : {0, 1}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " len " + std::to_string(len) + (symbolic ? " symbolic" : "") +
                       " axis " + std::to_string(axis));
          auto build = [&] {
            Tracer tr("scan");
            DimSpec l = symbolic ? sym("L") : fixed(len);
            Node* x = tr.input(t, axis == 0 ? std::vector<DimSpec>{l, fixed(3)} : std::vector<DimSpec>{fixed(3), l}, "x");
            tr.output(tr.prefix_sum(x, axis));
            tr.output(tr.binary(Op::add, tr.prefix_sum(tr.binary(Op::mul, x, x), axis), x));
            return tr.release();
          };
          std::vector<ArgValue> args = random_for(build, static_cast<uint32_t>(len), len);
          std::vector<HostTensor> got = check(build, args, 1e-4);
          // The oracle against a direct serial scan (double precision for f32).
          const HostTensor& x = args[0].tensor;
          int64_t inner = axis == 0 ? 3 : 1, outer = axis == 0 ? 1 : 3;
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
              double acc = 0;
              for (int64_t k = 0; k < len; ++k) {
                int64_t at = (o * len + k) * inner + i;
                acc += t == DType::f32 ? static_cast<double>(w2f(x.data[at])) : static_cast<double>(w2i(x.data[at]));
                if (t == DType::f32) ASSERT_NEAR(w2f(got[0].data[at]), acc, 1e-4 * (1 + std::fabs(acc)));
                else ASSERT_EQ(w2i(got[0].data[at]), static_cast<int32_t>(acc));
              }
            }
        }
}

// The scan is three kernels (block scans, totals, offsets), or one when the length fits a block.
TEST(Algorithms, PrefixSumIsABlockedScan) {
  for (bool symbolic : {false, true}) {
    Tracer tr("scan");
    Node* x = tr.input(DType::f32, {symbolic ? sym("L") : fixed(100)}, "x");
    tr.output(tr.prefix_sum(x, 0));
    std::unique_ptr<Program> p = tr.release();
    run_pipeline(*p);
    int kernels = count_kernels(*p), loops_in_kernels = 0;
    p->for_each([&](Node* n) { loops_in_kernels += n->op == Op::loop && n->enclosing_kernel() != nullptr; });
    EXPECT_EQ(kernels, symbolic ? 3 : 1) << print_program(*p);
    EXPECT_EQ(loops_in_kernels, symbolic ? 2 : 1) << print_program(*p);
  }
}

TEST(Algorithms, MatmulAndDotShapes) {
  struct Case {
    std::vector<DimSpec> a, b;
    bool dot;
  };
  const std::vector<Case> cases = {
      {{fixed(7)}, {fixed(7)}, false},                                  // inner product
      {{sym("N"), fixed(7)}, {fixed(7), fixed(3)}, false},              // 2-D @ 2-D
      {{fixed(7)}, {fixed(7), fixed(3)}, false},                        // 1-D @ 2-D
      {{sym("N"), fixed(7)}, {fixed(7)}, false},                        // 2-D @ 1-D
      {{fixed(2), sym("N"), fixed(7)}, {fixed(7), fixed(3)}, false},    // batched @ 2-D
      {{fixed(2), fixed(1), fixed(4), fixed(7)}, {fixed(5), fixed(7), fixed(3)}, false},  // batch broadcast
      {{fixed(2), fixed(4), fixed(7)}, {fixed(5), fixed(7), fixed(3)}, true},  // np.dot N-D
      {{sym("N"), fixed(7)}, {fixed(7), fixed(3)}, true},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    for (DType t : {DType::f32, DType::i32}) {
      auto build = [&] {
        Tracer tr("mm");
        Node* a = tr.input(t, cases[c].a, "a");
        Node* b = tr.input(t, cases[c].b, "b");
        tr.output(cases[c].dot ? tr.dot(a, b) : tr.matmul(a, b));
        return tr.release();
      };
      check(build, random_for(build, 5 + static_cast<uint32_t>(c), 4));
    }
  }
}

// 2-D @ 2-D against a direct triple loop, and the product is fused: one kernel, whose loop is a
// reduction (SIMD-annotatable), and no [N, K, M] temporary buffer.
TEST(Algorithms, MatmulIsOneFusedReductionKernel) {
  auto build = [] {
    Tracer tr("mm");
    Node* a = tr.input(DType::f32, {sym("N"), sym("K")}, "a");
    Node* b = tr.input(DType::f32, {sym("K"), sym("M")}, "b");
    tr.output(tr.matmul(a, b));
    return tr.release();
  };
  std::vector<ArgValue> args = random_for(build, 1, 6);
  std::vector<HostTensor> got = check(build, args);
  const uint32_t* a = args[0].tensor.data;
  const uint32_t* b = args[1].tensor.data;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      double s = 0;
      for (int k = 0; k < 6; ++k) s += static_cast<double>(w2f(a[i * 6 + k])) * w2f(b[k * 6 + j]);
      EXPECT_NEAR(w2f(got[0].data[i * 6 + j]), s, 1e-5);
    }
  std::unique_ptr<Program> p = build();
  run_pipeline(*p);
  EXPECT_EQ(count_kernels(*p), 1) << print_program(*p);
  int buffers = 0;
  p->for_each([&](Node* n) { buffers += n->op == Op::buffer && n->rank() == 3; });
  EXPECT_EQ(buffers, 0) << print_program(*p);
}

TEST(Algorithms, MatmulShapeErrors) {
  Tracer tr("mm");
  Node* a = tr.input(DType::f32, {fixed(3), fixed(4)}, "a");
  Node* b = tr.input(DType::f32, {fixed(5), fixed(2)}, "b");
  Node* s = tr.scalar(DType::f32, "s");
  EXPECT_THROW(tr.matmul(a, b), ShapeError);
  EXPECT_THROW(tr.matmul(a, s), ShapeError);
  EXPECT_THROW(tr.prefix_sum(s, 0), ShapeError);
  EXPECT_THROW(tr.prefix_sum(a, 2), ShapeError);
}

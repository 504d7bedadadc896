// merge_kernels merges a whole run of same-shaped independent kernels (the SubdivNet example's
// three neighbour sums), not just a pair, and runs a kernel over a row's elements inside the
// row kernel next to it as a loop (softmax, Longformer). hoist_grid_loops keeps a loop inside its kernel when
// every access of the memories it writes stays in the calling thread's own row (leading
// coordinates = the thread's index), e.g. the per-token accumulation Y[i, j, p] of the Longformer
// example; a loop that reads another thread's row, or a row index in unsafe mode, is still
// hoisted to the host.
#include <gtest/gtest.h>

#include "core/ir/printer.h"
#include "core/ir/shape.h"
#include "core/passes/pipeline.h"
#include "programs.h"

using namespace ember;
using namespace ember::testing;

namespace {

IndexItem at(Node* v) { IndexItem i; i.kind = IndexItem::tensor; i.value = v; return i; }

// Y = zeros[N, 5]; kernel over rows i: for k in 0..3: for p in 0..5: Y[i, p] += X[src, p] * k,
// where src is i (own row) or i + 1 (the next row); the store uses `mode` and writes column
// p + shift.
std::unique_ptr<Program> row_program(bool neighbour, IndexMode mode, int shift = 0) {
  Tracer t("rows");
  DimSpec n; n.kind = DimSpec::symbolic; n.name = "N";
  DimSpec five; five.size = 5;
  Node* X = t.input(DType::f32, {n, five}, "X");
  auto c = [&](int v) { return t.constant(v, DType::i32); };
  Node* Y = t.zeros({t.dim(X, 0), t.dim_const(5)}, DType::f32);
  Node* i = t.begin_kernel({t.dim(X, 0)})[0];
  Node* k = t.begin_loop(c(0), c(3), c(1));
  Node* p = t.begin_loop(c(0), c(5), c(1));
  Node* src = neighbour ? t.binary(Op::add, i, c(1)) : i;
  Node* y = t.gather(Y, {at(src), at(p)});
  Node* v = t.binary(Op::add, y, t.binary(Op::mul, t.gather(X, {at(i), at(p)}), t.cast(k, DType::f32)));
  t.scatter(Y, {at(i), at(shift ? t.binary(Op::add, p, c(shift)) : p)}, v, mode);
  t.end_scope();
  t.end_scope();
  t.end_scope();
  t.output(Y);
  return t.release();
}

struct Counts { int host_loops = 0, kernel_loops = 0; };

Counts count_loops(Program& p) {
  Counts c;
  p.for_each([&](Node* x) {
    if (x->op == Op::loop) (x->enclosing_kernel() ? c.kernel_loops : c.host_loops)++;
  });
  return c;
}

// sum(sin(A), 1), sum(cos(A), 1), sum(exp(A), 1) for A of shape [N, 3, F]: after load fusion,
// three independent [N, F] kernels in a row.
std::unique_ptr<Program> three_sums() {
  Tracer t("three_sums");
  DimSpec n; n.kind = DimSpec::symbolic; n.name = "N";
  DimSpec f; f.kind = DimSpec::symbolic; f.name = "F";
  DimSpec three; three.size = 3;
  Node* A = t.input(DType::f32, {n, three, f}, "A");
  std::vector<Node*> sums;
  for (Op op : {Op::sin, Op::cos, Op::exp}) sums.push_back(t.reduce(ReduceKind::sum, t.unary(op, A), {1}, false));
  for (Node* s : sums) t.output(s);
  return t.release();
}

}  // namespace

TEST(MergeKernels, MergesARunOfSameShapedKernels) {
  std::unique_ptr<Program> p = three_sums();
  std::mt19937 rng(7);
  std::vector<ArgValue> args = random_args(*p, rng, 6);
  std::vector<HostTensor> want = interpret(*p, copy_args(args));
  run_pipeline(*p);
  EXPECT_EQ(compare(want, interpret(*p, copy_args(args))), "");
  int kernels = 0;
  p->for_each([&](Node* x) { kernels += x->op == Op::kernel; });
  EXPECT_EQ(kernels, 1) << print_program(*p);
}

TEST(OwnRows, RowAccumulationStaysInTheKernel) {
  std::unique_ptr<Program> p = row_program(false, IndexMode::clamp);
  std::mt19937 rng(5);
  std::vector<ArgValue> args = random_args(*p, rng, 6);
  std::vector<HostTensor> want = interpret(*p, copy_args(args));
  run_pipeline(*p);
  EXPECT_EQ(compare(want, interpret(*p, copy_args(args))), "");
  Counts c = count_loops(*p);
  EXPECT_EQ(c.host_loops, 0) << print_program(*p);
  EXPECT_GE(c.kernel_loops, 1) << print_program(*p);
}

TEST(OwnRows, WrapModeStaysInTheRowToo) {
  std::unique_ptr<Program> p = row_program(false, IndexMode::wrap);
  run_pipeline(*p);
  EXPECT_EQ(count_loops(*p).host_loops, 0) << print_program(*p);
}

TEST(OwnRows, ReadingAnotherThreadsRowIsHoisted) {
  std::unique_ptr<Program> p = row_program(true, IndexMode::clamp);
  run_pipeline(*p);
  EXPECT_GE(count_loops(*p).host_loops, 1) << "the k loop runs grid-synchronously\n" << print_program(*p);
}

TEST(OwnRows, UnsafeRowIndexIsHoisted) {
  // Y[i, p + 1] for p < 5 reaches Y[i + 1, 0]: another thread's row.
  std::unique_ptr<Program> p = row_program(false, IndexMode::unsafe, 1);
  run_pipeline(*p);
  EXPECT_GE(count_loops(*p).host_loops, 1) << "an unsafe index may leave the row\n" << print_program(*p);
  // Y[i, p] for p < 5: the dependence analysis proves the unsafe index stays in the row.
  std::unique_ptr<Program> q = row_program(false, IndexMode::unsafe);
  std::mt19937 rng(6);
  std::vector<ArgValue> args = random_args(*q, rng, 6);
  std::vector<HostTensor> want = interpret(*q, copy_args(args));
  run_pipeline(*q);
  EXPECT_EQ(compare(want, interpret(*q, copy_args(args))), "");
  EXPECT_EQ(count_loops(*q).host_loops, 0) << print_program(*q);
}

// Row merges (programs.cpp's row_merge): the stored exp, its row sum and the normalization run in
// one kernel over rows with three loops along the row; the division by another row's sum stays a
// kernel over elements; of the longformer pattern, the window softmax and the normalized weights
// share a kernel over (token, 1), while the score kernel (a D-loop per element) stays apart.
TEST(MergeKernels, RowKernelsRunTheirRowsElementsAsLoops) {
  std::unique_ptr<Program> p;
  for (const TestProgram& tp : test_programs())
    if (tp.name == "row_merge") p = tp.build();
  ASSERT_TRUE(p);
  run_pipeline(*p);
  std::vector<std::string> shapes;
  std::vector<int> loops;
  p->for_each([&](Node* n) {
    if (n->op != Op::kernel) return;
    shapes.push_back(shape_str(n->shape));
    int l = 0;
    for (Node* c = n->first_child; c; c = c->next) l += c->op == Op::loop;
    loops.push_back(l);
  });
  ASSERT_EQ(shapes.size(), 5u) << print_program(*p);
  EXPECT_EQ(shapes[0], "[N]") << print_program(*p);
  EXPECT_EQ(loops[0], 3) << print_program(*p);
  EXPECT_EQ(shapes[1], "[N, M]") << print_program(*p);
  EXPECT_EQ(loops[2], 1) << "the scores\n" << print_program(*p);
  EXPECT_EQ(loops[3], 3) << "max, sum and the weights\n" << print_program(*p);
  EXPECT_EQ(shapes[4].substr(0, 4), "[N, ") << print_program(*p);
}

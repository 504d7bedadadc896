// The dependence queries behind parallelize_host_loops and reduce_atomics (core/analysis/
// dependence.h): whether a host loop carries a dependence among its kernels (the counter an
// iteration dimension), which kernel axes an access ignores, and where its index map is injective.
#include <gtest/gtest.h>

#include <functional>

#include "core/analysis/dependence.h"
#include "programs.h"

using namespace ember;
using namespace ember::testing;

namespace {

IndexItem at(Node* v) {
  IndexItem i;
  i.kind = IndexItem::tensor;
  i.value = v;
  return i;
}

Node* first_of(Program& p, Op op) {
  Node* found = nullptr;
  p.for_each([&](Node* x) {
    if (!found && x->op == op) found = x;
  });
  return found;
}

// for t < 6 (host): kernel over [N] running body(t, i, Y) with Y a [7, N] zeros memory.
using Body = std::function<void(Tracer&, Node* t, Node* i, Node* Y, Node* X)>;
bool carries(const Body& body) {
  Tracer tr("loop");
  DimSpec n;
  n.kind = DimSpec::symbolic;
  n.name = "N";
  Node* X = tr.input(DType::f32, {n}, "X");
  Node* N = tr.dim(X, 0);
  auto c = [&](int v) { return tr.constant(v, DType::i32); };
  Node* Y = tr.zeros({tr.dim_const(7), N}, DType::f32);
  Node* t = tr.begin_loop(c(0), c(6), c(1));
  Node* i = tr.begin_kernel({N})[0];
  body(tr, t, i, Y, X);
  tr.end_scope();
  tr.end_scope();
  tr.output(Y);
  std::unique_ptr<Program> p = tr.release();
  Node* loop = first_of(*p, Op::loop);
  Node* k = first_of(*p, Op::kernel);
  AccessGroup g(k->shape, 0);
  g.add(k);
  DependenceAnalysis dep;
  return dep.loop_carries(loop, {&g});
}

}  // namespace

TEST(DependenceUses, HostLoopCarries) {
  auto c = [](Tracer& tr, int v) { return tr.constant(v, DType::i32); };
  // Y[t, i] = X[i]: each iteration its own row.
  EXPECT_FALSE(carries([](Tracer& tr, Node* t, Node* i, Node* Y, Node* X) {
    tr.scatter(Y, {at(t), at(i)}, tr.gather(X, {at(i)}));
  }));
  // Y[t + 1, i] = Y[t, i] * 2: a scan over t.
  EXPECT_TRUE(carries([&](Tracer& tr, Node* t, Node* i, Node* Y, Node*) {
    Node* prev = tr.gather(Y, {at(t), at(i)});
    tr.scatter(Y, {at(tr.binary(Op::add, t, c(tr, 1))), at(i)}, tr.binary(Op::mul, prev, tr.constant(2.0, DType::f32)));
  }));
  // Y[0, i] = X[i] in every iteration: an output dependence.
  EXPECT_TRUE(carries([&](Tracer& tr, Node*, Node* i, Node* Y, Node* X) {
    tr.scatter(Y, {at(c(tr, 0)), at(i)}, tr.gather(X, {at(i)}));
  }));
  // Y[t // 2, i]: iterations 2s and 2s + 1 share a row.
  EXPECT_TRUE(carries([&](Tracer& tr, Node* t, Node* i, Node* Y, Node* X) {
    tr.scatter(Y, {at(tr.binary(Op::div, t, c(tr, 2))), at(i)}, tr.gather(X, {at(i)}));
  }));
  // Atomic adds into Y[0, i] from every iteration commute.
  EXPECT_FALSE(carries([&](Tracer& tr, Node*, Node* i, Node* Y, Node* X) {
    tr.atomic(AtomicKind::add, tr.gather(Y, {at(c(tr, 0)), at(i)}), tr.gather(X, {at(i)}));
  }));
}

TEST(DependenceUses, IgnoredAxesAndInjectivity) {
  Tracer tr("axes");
  DimSpec n;
  n.kind = DimSpec::symbolic;
  n.name = "N";
  DimSpec five;
  five.size = 5;
  Node* X = tr.input(DType::f32, {n, five}, "X");
  Node* B = tr.input(DType::i32, {n, five}, "B");
  Node* N = tr.dim(X, 0);
  auto c = [&](int v) { return tr.constant(v, DType::i32); };
  Node* S = tr.zeros({N}, DType::f32);
  Node* T = tr.zeros({tr.dim_const(5), N}, DType::f32);
  Node* H = tr.zeros({tr.dim_const(16)}, DType::f32);
  std::vector<Node*> ij = tr.begin_kernel({N, tr.dim_const(5)});
  Node* i = ij[0];
  Node* j = ij[1];
  Node* x = tr.gather(X, {at(i), at(j)});
  Node* row = tr.atomic(AtomicKind::add, tr.gather(S, {at(i)}), x);
  Node* half = tr.atomic(AtomicKind::add, tr.gather(S, {at(tr.binary(Op::div, i, c(2)))}), x);
  Node* transposed = tr.atomic(AtomicKind::add, tr.gather(T, {at(j), at(i)}), x);
  Node* bin = tr.atomic(AtomicKind::add, tr.gather(H, {at(tr.gather(B, {at(i), at(j)}))}), x);
  tr.end_scope();
  tr.output(S);
  std::unique_ptr<Program> p = tr.release();
  Node* k = first_of(*p, Op::kernel);
  DependenceAnalysis dep;
  EXPECT_EQ(dep.ignored_axes(row, k->shape), 2u);
  EXPECT_EQ(dep.ignored_axes(half, k->shape), 2u);
  EXPECT_EQ(dep.ignored_axes(transposed, k->shape), 0u);
  EXPECT_EQ(dep.ignored_axes(bin, k->shape), 0u) << "an indirect address is no known function";
  EXPECT_TRUE(dep.injective_on(row, k->shape, 1u));
  EXPECT_FALSE(dep.injective_on(row, k->shape, 3u));
  EXPECT_FALSE(dep.injective_on(half, k->shape, 1u));
  EXPECT_TRUE(dep.injective_on(transposed, k->shape, 3u));
  EXPECT_FALSE(dep.injective_on(bin, k->shape, 1u));
}

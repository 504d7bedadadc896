// The dependence analysis (core/analysis/dependence.h) on traced kernels: two kernels over [N]
// where the first writes A[i, j] in a loop over j and the second reads A at an index given by
// the test. Same-thread dependences (own row, any column, identities isl proves) are within one
// thread; reads of other rows, run-time indices and unsafe indices that may leave the row are
// not. Also atomics that commute, elements never shared, and own_element's isl proofs.
#include <gtest/gtest.h>

#include <functional>

#include "core/analysis/dependence.h"
#include "programs.h"

using namespace ember;
using namespace ember::testing;

namespace {

IndexItem at(Node* v) { IndexItem i; i.kind = IndexItem::tensor; i.value = v; return i; }

struct Pair {
  std::unique_ptr<Program> program;
  Node* first = nullptr;
  Node* second = nullptr;
};

// Kernel 1 over [N]: for j < 5: A[i, j] = X[i, j]. Kernel 2 over [N]: for k < 5: B[i] += A[row, col]
// with (row, col) = index(t, i, k, N) and `mode`.
using IndexFn = std::function<std::pair<Node*, Node*>(Tracer&, Node* i, Node* k, Node* n)>;
Pair row_pair(const IndexFn& index, IndexMode mode = IndexMode::clamp) {
  Tracer t("rows");
  DimSpec n; n.kind = DimSpec::symbolic; n.name = "N";
  DimSpec five; five.size = 5;
  Node* X = t.input(DType::f32, {n, five}, "X");
  auto c = [&](int v) { return t.constant(v, DType::i32); };
  Node* N = t.dim(X, 0);
  Node* A = t.zeros({N, t.dim_const(5)}, DType::f32);
  Node* B = t.zeros({N}, DType::f32);
  Node* i = t.begin_kernel({N})[0];
  Node* j = t.begin_loop(c(0), c(5), c(1));
  t.scatter(A, {at(i), at(j)}, t.gather(X, {at(i), at(j)}));
  t.end_scope();
  t.end_scope();
  i = t.begin_kernel({N})[0];
  Node* k = t.begin_loop(c(0), c(5), c(1));
  auto [row, col] = index(t, i, k, N);
  Node* v = t.binary(Op::add, t.gather(B, {at(i)}), t.gather(A, {at(row), at(col)}, mode));
  t.scatter(B, {at(i)}, v);
  t.end_scope();
  t.end_scope();
  t.output(B);
  Pair p;
  p.program = t.release();
  p.program->for_each([&](Node* x) {
    if (x->op != Op::kernel) return;
    (p.first ? p.second : p.first) = x;
  });
  return p;
}

bool within(const Pair& p, DependenceAnalysis& dep) {
  AccessGroup a(p.first->shape, p.first->rank()), b(p.second->shape, p.second->rank());
  a.add(p.first);
  b.add(p.second);
  return dep.within_thread(a, b);
}

}  // namespace

TEST(Dependence, OwnRowAnyColumnIsWithinThread) {
  DependenceAnalysis dep;
  Pair p = row_pair([](Tracer& t, Node* i, Node* k, Node*) {
    return std::make_pair(i, t.binary(Op::sub, t.constant(4, DType::i32), k));
  });
  EXPECT_TRUE(within(p, dep));
  EXPECT_EQ(dep.stats().isl, 0) << "the syntactic own-row rule decides it";
}

TEST(Dependence, IdentitiesIslProvesAreWithinThread) {
  // min(i, N - 1) is i for 0 <= i < N; (2 * i) // 2 is i.
  for (int variant = 0; variant < 2; ++variant) {
    DependenceAnalysis dep;
    Pair p = row_pair([&](Tracer& t, Node* i, Node* k, Node* n) {
      Node* row = variant == 0 ? t.binary(Op::min, i, t.binary(Op::sub, n, t.constant(1, DType::i32)))
                               : t.binary(Op::div, t.binary(Op::mul, i, t.constant(2, DType::i32)), t.constant(2, DType::i32));
      return std::make_pair(row, k);
    });
    EXPECT_TRUE(within(p, dep)) << "variant " << variant;
    EXPECT_GT(dep.stats().isl, 0) << "variant " << variant;
  }
}

TEST(Dependence, OtherRowsCrossThreads) {
  std::vector<IndexFn> reads = {
      // the next row (clamped: the last thread reads its own)
      [](Tracer& t, Node* i, Node* k, Node*) { return std::make_pair(t.binary(Op::add, i, t.constant(1, DType::i32)), k); },
      // the mirrored row
      [](Tracer& t, Node* i, Node* k, Node* n) {
        return std::make_pair(t.binary(Op::sub, t.binary(Op::sub, n, t.constant(1, DType::i32)), i), k);
      },
      // a row only known at run time (i as a float, halved, back to an integer)
      [](Tracer& t, Node* i, Node* k, Node*) {
        Node* h = t.binary(Op::mul, t.cast(i, DType::f32), t.constant(0.5, DType::f32));
        return std::make_pair(t.cast(h, DType::i32), k);
      },
      // i // 2: rows shared by two threads
      [](Tracer& t, Node* i, Node* k, Node*) { return std::make_pair(t.binary(Op::div, i, t.constant(2, DType::i32)), k); },
  };
  for (size_t r = 0; r < reads.size(); ++r) {
    DependenceAnalysis dep;
    Pair p = row_pair(reads[r]);
    EXPECT_FALSE(within(p, dep)) << "read " << r;
  }
}

TEST(Dependence, UnsafeColumnThatMayLeaveTheRowIsAnywhere) {
  // A[i, k + 1] for k < 5 in unsafe mode reaches A[i + 1, 0] at k = 4: the whole memory.
  DependenceAnalysis dep;
  Pair p = row_pair([](Tracer& t, Node* i, Node* k, Node*) {
    return std::make_pair(i, t.binary(Op::add, k, t.constant(1, DType::i32)));
  }, IndexMode::unsafe);
  EXPECT_FALSE(within(p, dep));
  // k itself stays in range: unsafe is then exact.
  DependenceAnalysis dep2;
  Pair q = row_pair([](Tracer&, Node* i, Node* k, Node*) { return std::make_pair(i, k); }, IndexMode::unsafe);
  EXPECT_TRUE(within(q, dep2));
}

TEST(Dependence, DisjointElementsAndCommutingAtomics) {
  // Kernel 1 writes A[2i] and atomically adds into S[i % 3]; kernel 2 reads A[2i + 1] and adds into
  // S[0] (same kind: commutes) or takes the max into S[0] (another kind: ordered).
  for (AtomicKind second : {AtomicKind::add, AtomicKind::max}) {
    Tracer t("disjoint");
    DimSpec n; n.kind = DimSpec::symbolic; n.name = "N";
    Node* X = t.input(DType::f32, {n}, "X");
    auto c = [&](int v) { return t.constant(v, DType::i32); };
    Node* N = t.dim(X, 0);
    Node* A = t.zeros({t.binary(Op::mul, N, c(2))}, DType::f32);
    Node* S = t.zeros({t.dim_const(3)}, DType::f32);
    Node* i = t.begin_kernel({N})[0];
    t.scatter(A, {at(t.binary(Op::mul, i, c(2)))}, t.gather(X, {at(i)}));
    t.atomic(AtomicKind::add, t.gather(S, {at(t.binary(Op::mod, i, c(3)))}), t.gather(X, {at(i)}));
    t.end_scope();
    i = t.begin_kernel({N})[0];
    Node* v = t.gather(A, {at(t.binary(Op::add, t.binary(Op::mul, i, c(2)), c(1)))});
    t.atomic(second, t.gather(S, {at(c(0))}), v);
    t.end_scope();
    t.output(A);
    t.output(S);
    Pair p;
    p.program = t.release();
    p.program->for_each([&](Node* x) {
      if (x->op == Op::kernel) (p.first ? p.second : p.first) = x;
    });
    DependenceAnalysis dep;
    EXPECT_EQ(within(p, dep), second == AtomicKind::add) << atomic_kind_name(second);
  }
}

TEST(Dependence, OwnElementProvedByIsl) {
  Tracer t("own");
  DimSpec n; n.kind = DimSpec::symbolic; n.name = "N";
  Node* X = t.input(DType::f32, {n}, "X");
  Node* N = t.dim(X, 0);
  Node* i = t.begin_kernel({N})[0];
  Node* wrapped = t.gather(X, {at(t.binary(Op::add, i, t.constant(0, DType::i32)))}, IndexMode::wrap);
  Node* min_i = t.gather(X, {at(t.binary(Op::min, i, t.binary(Op::sub, N, t.constant(1, DType::i32))))});
  Node* shifted = t.gather(X, {at(t.binary(Op::add, i, t.constant(1, DType::i32)))});
  t.scatter(X, {at(i)}, t.binary(Op::add, t.binary(Op::add, wrapped, min_i), shifted));
  t.end_scope();
  std::unique_ptr<Program> p = t.release();
  Node* k = nullptr;
  p->for_each([&](Node* x) { if (x->op == Op::kernel) k = x; });
  ASSERT_NE(k, nullptr);
  DependenceAnalysis dep;
  auto load_of = [](Node* v) {
    while (v->op != Op::load) v = v->operand(0);
    return v;
  };
  EXPECT_TRUE(dep.own_element(load_of(wrapped), k->shape));
  EXPECT_TRUE(dep.own_element(load_of(min_i), k->shape));
  EXPECT_FALSE(dep.own_element(load_of(shifted), k->shape));
}

// A run-time index (X[Y[i]]) is any element in the model: not the thread's own, answered by syntax
// (no isl question), as isl would answer; over an axis of constant size 1 it stays open for isl.
TEST(Dependence, OwnElementRunTimeIndexBySyntax) {
  Tracer t("gathered");
  DimSpec n; n.kind = DimSpec::symbolic; n.name = "N";
  Node* X = t.input(DType::f32, {n}, "X");
  Node* Y = t.input(DType::i32, {n}, "Y");
  Node* N = t.dim(X, 0);
  Node* i = t.begin_kernel({N})[0];
  Node* g = t.gather(X, {at(t.gather(Y, {at(i)}))});
  t.scatter(X, {at(i)}, t.binary(Op::add, g, t.constant(1.0, DType::f32)));
  t.end_scope();
  std::unique_ptr<Program> p = t.release();
  Node* k = nullptr;
  p->for_each([&](Node* x) { if (x->op == Op::kernel) k = x; });
  ASSERT_NE(k, nullptr);
  Node* load = nullptr;
  p->for_each([&](Node* x) { if (x->op == Op::load && x->operand(0) == X) load = x; });
  ASSERT_NE(load, nullptr);
  DependenceAnalysis dep;
  EXPECT_FALSE(dep.own_element(load, k->shape));
  EXPECT_EQ(dep.stats().isl, 0);
  EXPECT_EQ(dep.stats().fast, 1);
}

// Kernel 2 reads A[k, 0] in its loop over k: its thread 1 reads A[0, 0], which kernel 1's thread
// 0 writes (j = 0). The witness puts the counters at the values the other side's indices take,
// so the crossing is found without isl (EMBER_VERIFY checks isl agrees).
TEST(Dependence, CounterIndexCrossesByWitness) {
  DependenceAnalysis dep;
  Pair p = row_pair([](Tracer& t, Node*, Node* k, Node*) { return std::make_pair(k, t.constant(0, DType::i32)); });
  EXPECT_FALSE(within(p, dep));
  EXPECT_EQ(dep.stats().isl, 0);
}

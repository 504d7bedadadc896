// contract_fma (a * b + c into fma on targets with it) and fold_reciprocal_powers (q^3 of
// q = 1 / sqrt(a) into 1 / (a * sqrt(a))): what each rewrites, what each must leave alone, and
// that the interpreter agrees before and after within rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen_test_helpers.h"
#include "core/analysis/reductions.h"
#include "core/ir/printer.h"
#include "core/passes/contract_fma.h"
#include "core/passes/fold_reciprocal_powers.h"

using namespace ember;
using namespace ember::testing;
using ember::codegen_test::ld;
using ember::codegen_test::random_tensor;
using ember::codegen_test::st;

namespace {

// A one-kernel program over N threads reading f32 inputs a, b, c at the thread's index; body()
// returns the values stored into one output each.
struct KernelProgram {
  Program p;
  Builder b{p};
  Shape s;
  Node *a = nullptr, *bb = nullptr, *c = nullptr, *i = nullptr;
  std::vector<Node*> outs;
  template <class F>
  explicit KernelProgram(int n_outputs, F&& body) {
    s = {b.shape_arg("N")};
    Node* A = b.input(DType::f32, s, 0, "a");
    Node* B = b.input(DType::f32, s, 1, "b");
    Node* C = b.input(DType::f32, s, 2, "c");
    for (int k = 0; k < n_outputs; ++k) outs.push_back(b.buffer(DType::f32, s, false));
    b.set_insert_end(b.kernel(s));
    i = b.index(0, s);
    a = ld(b, A, i, s);
    bb = ld(b, B, i, s);
    c = ld(b, C, i, s);
    std::vector<Node*> vals = body(*this);
    for (size_t k = 0; k < vals.size(); ++k) st(b, outs[k], i, vals[k], s);
    b.set_insert_end(p.root());
    for (size_t k = 0; k < outs.size(); ++k) b.output(outs[k], static_cast<int>(k));
    codegen_test::finish(p);
  }
  Node* mul(Node* x, Node* y) { return b.binary(Op::mul, x, y); }
  Node* add(Node* x, Node* y) { return b.binary(Op::add, x, y); }
  Node* sub(Node* x, Node* y) { return b.binary(Op::sub, x, y); }
  std::vector<ArgValue> args() const {
    return {ArgValue::of_tensor(random_tensor(DType::f32, {257}, 1)),
            ArgValue::of_tensor(random_tensor(DType::f32, {257}, 2)),
            ArgValue::of_tensor(random_tensor(DType::f32, {257}, 3))};
  }
  // The op of the value stored into output k.
  Op stored(size_t k) const {
    for (Node* u : outs[k]->users)
      if (u->op == Op::store) return u->operand(1)->op;
    return Op::program;
  }
};

int count(Program& p, Op op) {
  int n = 0;
  p.for_each([&](Node* x) { n += x->op == op; });
  return n;
}

}  // namespace

TEST(ContractFma, FusesProductsIntoSumsAndLeavesTheHazards) {
  KernelProgram k(8, [](KernelProgram& k) -> std::vector<Node*> {
    Node* d = k.add(k.a, k.bb);
    Node* e = k.add(k.a, k.c);
    Node* v = k.b.var(k.b.f32(0.0f), k.s);
    k.b.set(v, k.add(k.mul(e, e), k.bb));
    Node* decided = k.b.select(k.b.binary(Op::gt, v, k.b.f32(4.0f)), k.a, k.c);
    return {k.add(k.mul(k.a, k.bb), k.c),                       // 0: fma(a, b, c)
            k.sub(k.mul(k.a, k.c), k.bb),                       // 1: fma(a, c, -b)
            k.sub(k.bb, k.mul(k.c, k.c)),                       // 2: fma(-c, c, b)
            k.add(k.mul(k.a, k.a), k.mul(k.bb, k.bb)),          // 3: squares: fma
            k.sub(k.mul(d, k.c), k.mul(e, k.bb)),               // 4: product - product: left alone
            k.b.binary(Op::max, k.add(k.mul(d, d), k.c), k.a),  // 5: reaches a max: left alone
            k.mul(k.bb, k.c),                                   // 6: no sum
            decided};                                           // 7: e*e + b, set to a var compared: left alone
  });
  std::vector<ArgValue> args = k.args();
  std::vector<HostTensor> want = interpret(k.p, copy_args(args));
  ASSERT_TRUE(contract_fma(k.p));
  verify(k.p, VerifyOptions{true});
  EXPECT_EQ(k.stored(0), Op::fma) << print_program(k.p);
  EXPECT_EQ(k.stored(1), Op::fma) << print_program(k.p);
  EXPECT_EQ(k.stored(2), Op::fma) << print_program(k.p);
  EXPECT_EQ(k.stored(3), Op::fma) << print_program(k.p);
  EXPECT_EQ(k.stored(4), Op::sub) << print_program(k.p);
  EXPECT_EQ(k.stored(5), Op::max) << print_program(k.p);
  int kept_adds = 0;
  k.p.for_each([&](Node* n) {
    kept_adds += n->op == Op::add && (n->operand(0)->op == Op::mul || n->operand(1)->op == Op::mul);
  });
  EXPECT_EQ(kept_adds, 2) << "the sums of outputs 5 and 7 stay\n" << print_program(k.p);
  EXPECT_EQ(count(k.p, Op::fma), 4) << print_program(k.p);
  std::vector<HostTensor> got = interpret(k.p, copy_args(args));
  EXPECT_EQ(compare(want, got, 1e-5), "");
  // One rounding: output 0 is exactly std::fma of the inputs.
  for (int64_t e = 0; e < 257; ++e) {
    const float x = w2f(args[0].tensor.data[e]), y = w2f(args[1].tensor.data[e]), z = w2f(args[2].tensor.data[e]);
    ASSERT_EQ(got[0].data[e], f2w(std::fma(x, y, z))) << e;
  }
  EXPECT_FALSE(contract_fma(k.p)) << "a second run finds nothing";
}

// A product with a user that is not a sum keeps its multiply and is fused nowhere, so that no
// copy of it rounds differently from another.
TEST(ContractFma, AProductAlsoUsedElsewhereStaysWhole) {
  KernelProgram k(2, [](KernelProgram& k) -> std::vector<Node*> {
    Node* ab = k.mul(k.a, k.bb);
    return {k.add(ab, k.c), k.b.unary(Op::sqrt, ab)};
  });
  EXPECT_FALSE(contract_fma(k.p)) << print_program(k.p);
  EXPECT_EQ(k.stored(0), Op::add);
}

// A pairwise difference used squared and in `acc - d * w` is oriented invariant-first: d = x_j - x_i
// (x_j varies with the loop) becomes x_i - x_j and its negation goes; x_i - x_j stays as it is
// (its fma keeps the negation, which the C++ compiler folds into vfnmadd).
TEST(ContractFma, OrientsPairwiseDifferencesInvariantFirst) {
  for (bool varying_first : {true, false}) {
    Program p;
    Builder b(p);
    b.set_insert_end(p.root());
    Shape s{b.shape_arg("N")};
    Node* X = b.input(DType::f32, s, 0, "x");
    Node* out = b.buffer(DType::f32, s, false);
    Node* k = b.kernel(s);
    b.set_insert_end(k);
    Node* i = b.index(0, s);
    Node* acc = b.var(b.f32(0.0f), s);
    Node* loop = b.loop(b.i32(0), s[0], b.i32(1), s);
    b.set_insert_end(loop);
    Node* xi = ld(b, X, i, s);
    Node* xj = ld(b, X, loop, s);
    Node* d = varying_first ? b.binary(Op::sub, xj, xi) : b.binary(Op::sub, xi, xj);
    Node* w = b.binary(Op::div, b.f32(1.0f), b.binary(Op::add, b.binary(Op::mul, d, d), b.f32(1.0f)));
    b.set(acc, b.binary(Op::sub, acc, b.binary(Op::mul, d, w)));
    b.set_insert_end(k);
    st(b, out, i, acc, s);
    b.set_insert_end(p.root());
    b.output(out, 0);
    codegen_test::finish(p);
    std::vector<ArgValue> args = {ArgValue::of_tensor(random_tensor(DType::f32, {19}, 7))};
    std::vector<HostTensor> want = interpret(p, copy_args(args));
    ASSERT_TRUE(contract_fma(p));
    verify(p, VerifyOptions{true});
    EXPECT_EQ(compare(want, interpret(p, copy_args(args)), 1e-5), "");
    Node* diff = nullptr;
    p.for_each([&](Node* n) {
      if (n->op == Op::sub && n->dtype == DType::f32) diff = n;
    });
    ASSERT_TRUE(diff) << print_program(p);
    EXPECT_EQ(diff->operand(0), xi) << print_program(p);
    EXPECT_EQ(count(p, Op::neg), varying_first ? 0 : 1) << print_program(p);
  }
}

// v = fma(a, b, v) in a loop is an accumulation with + (the cpp dialect annotates the loop
// `omp simd reduction(+: v)`).
TEST(Reductions, FusedAccumulationAdds) {
  Program p;
  Builder b(p);
  Node* x = b.scalar_arg(DType::f32, 0, "x");
  Node* y = b.scalar_arg(DType::f32, 1, "y");
  Node* v = b.var(b.f32(0.f), {});
  Node* loop = b.loop(b.i32(0), b.i32(8), b.i32(1), {});
  b.set_insert_end(loop);
  b.set(v, b.fma(x, y, v));
  std::vector<ReductionVar> r = reduction_vars(loop);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].op, Op::add);
  b.set(v, b.fma(v, y, x));  // v as a factor: not an accumulation
  EXPECT_TRUE(reduction_vars(loop).empty());
}

TEST(FoldReciprocalPowers, CubeOfReciprocalSqrtOfANonNegativeValue) {
  KernelProgram k(3, [](KernelProgram& k) -> std::vector<Node*> {
    auto cube = [&](Node* q) { return k.mul(q, k.mul(q, q)); };
    auto recip_sqrt = [&](Node* r) { return k.b.binary(Op::div, k.b.f32(1.0f), k.b.unary(Op::sqrt, r)); };
    Node* r2 = k.add(k.add(k.mul(k.a, k.a), k.mul(k.bb, k.bb)), k.b.f32(1e-4f));
    Node* q_kept = recip_sqrt(k.add(k.mul(k.c, k.c), k.b.f32(2.0f)));
    Node* pos_c = k.b.select(k.b.binary(Op::gt, k.c, k.b.f32(0.0f)), k.c, k.b.f32(1.0f));  // > 0, by a select
    return {k.mul(k.a, cube(recip_sqrt(r2))),                                              // 0: a / (r2 * sqrt(r2))
            cube(recip_sqrt(pos_c)),       // 1: not provably >= +0: left alone
            k.add(cube(q_kept), q_kept)};  // 2: q used besides its cube: left alone
  });
  std::vector<ArgValue> args = k.args();
  std::vector<HostTensor> want = interpret(k.p, copy_args(args));
  const int divs = count(k.p, Op::div);
  ASSERT_TRUE(fold_reciprocal_powers(k.p));
  verify(k.p, VerifyOptions{true});
  EXPECT_EQ(count(k.p, Op::div), divs) << print_program(k.p);
  EXPECT_EQ(count(k.p, Op::mul), 1 + 1 + 1 + 1 + 2 + 1 + 2) << print_program(k.p);
  EXPECT_EQ(compare(want, interpret(k.p, copy_args(args)), 1e-5), "");
  EXPECT_FALSE(fold_reciprocal_powers(k.p));
}

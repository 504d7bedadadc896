// Autodiff at the IR level: every differentiable op has a derivative rule, and the transforms
// leave a program the verifier accepts and the interpreter runs with the right derivative.
#include <gtest/gtest.h>

#include <cmath>

#include "core/autodiff/autodiff.h"
#include "core/interp/interp.h"
#include "core/ir/verifier.h"
#include "core/trace/tracer.h"

using namespace ember;

TEST(Autodiff, EveryOpWithoutNondiffHasARule) {
  for (int o = 0; o < kOpCount; ++o) {
    Op op = static_cast<Op>(o);
    if (has_flag(op, F_NONDIFF)) continue;
    EXPECT_TRUE(has_derivative_rule(op)) << op_name(op) << " has no F_NONDIFF flag and no derivative rule";
  }
}

TEST(Builder, NeverFoldsToAVar) {
  // x + 0 of a var must keep the value the var has at that point.
  Program p;
  Builder b(p);
  Node* v = b.var(b.f32(1.f), {});
  EXPECT_NE(b.binary(Op::add, v, b.f32(0.f)), v);
  EXPECT_NE(b.select(b.boolean(true), v, v), v);
}

TEST(Autodiff, HostLoopWithRuntimeTripsAndVars) {
  // v = x; repeat n times: v = sin(v) * x.  d v / d x by reverse and forward mode.
  Tracer tr("loop");
  Node* x = tr.scalar(DType::f32, "x");
  Node* n = tr.scalar(DType::i32, "n");
  Node* v = tr.var(x);
  tr.begin_loop(tr.constant(0, DType::i32), n, tr.constant(1, DType::i32));
  tr.set(v, tr.binary(Op::mul, tr.unary(Op::sin, v), x));
  tr.end_scope();
  Node* y = tr.binary(Op::add, v, tr.constant(0, DType::f32));
  tr.output(tr.grad(y, {x}, nullptr)[0]);
  tr.output(tr.jvp(y, {x}, {tr.constant(1, DType::f32)}));
  verify(tr.program());
  auto ref = [](double xv, int k) {
    double val = xv;
    for (int i = 0; i < k; ++i) val = std::sin(val) * xv;
    return val;
  };
  for (int k : {0, 1, 3}) {
    std::vector<HostTensor> out =
        interpret(tr.program(), {ArgValue::of_word(f2w(0.7f)), ArgValue::of_word(i2w(k))});
    double h = 1e-6;
    double want = (ref(0.7 + h, k) - ref(0.7 - h, k)) / (2 * h);
    EXPECT_NEAR(w2f(out[0].data[0]), want, 1e-5 * std::max(1.0, std::fabs(want))) << "grad, trips " << k;
    EXPECT_NEAR(w2f(out[1].data[0]), want, 1e-5 * std::max(1.0, std::fabs(want))) << "jvp, trips " << k;
  }
}

// simplify's var forwarding: a read of a var is the value the var certainly holds there.
#include <gtest/gtest.h>

#include "codegen_test_helpers.h"
#include "core/ir/printer.h"
#include "core/passes/simplify.h"

using namespace ember;
using namespace ember::testing;
using ember::codegen_test::ld;
using ember::codegen_test::random_tensor;
using ember::codegen_test::st;

// simplify reads a var as the value it holds where it is read: its initial value or its last
// set before, through scopes that do not set it; not through a scope or a loop around the read
// that sets it.
TEST(Simplify, ForwardsTheValuesOfVars) {
  Program p;
  Builder b(p);
  b.set_insert_end(p.root());
  Shape s{b.shape_arg("N")};
  Node* A = b.input(DType::f32, s, 0, "a");
  Node* out = b.buffer(DType::f32, s, false);
  Node* out2 = b.buffer(DType::f32, s, false);
  Node* k = b.kernel(s);
  b.set_insert_end(k);
  Node* i = b.index(0, s);
  Node* x = ld(b, A, i, s);
  Node* acc = b.var(b.f32(0.0f), s);
  Node* first = b.binary(Op::add, acc, b.binary(Op::mul, x, x));  // acc is 0 here
  b.set(acc, first);
  Node* iff = b.if_(b.binary(Op::gt, x, b.f32(0.0f)), s);
  b.set_insert_end(iff);
  Node* inside = b.binary(Op::add, acc, b.f32(1.0f));  // acc is x*x here
  b.set(acc, inside);
  b.set_insert_end(k);
  Node* after = b.binary(Op::add, acc, x);  // after an if that sets acc: unknown
  Node* w = b.var(x, s);
  Node* loop = b.loop(b.i32(0), b.i32(4), b.i32(1), s);
  b.set_insert_end(loop);
  Node* in_loop = b.binary(Op::mul, w, b.f32(0.5f));  // in a loop that sets w: unknown
  b.set(w, in_loop);
  b.set_insert_end(k);
  st(b, out, i, after, s);
  st(b, out2, i, w, s);
  b.set_insert_end(p.root());
  b.output(out, 0);
  b.output(out2, 1);
  codegen_test::finish(p);
  std::vector<ArgValue> args = {ArgValue::of_tensor(random_tensor(DType::f32, {33}, 5))};
  std::vector<HostTensor> want = interpret(p, copy_args(args));
  simplify(p);
  verify(p, VerifyOptions{true});
  EXPECT_EQ(compare(want, interpret(p, copy_args(args)), 0), "") << print_program(p);
  auto reads_var = [&](const Node* n) {
    for (const Node* o : n->operands)
      if (o->op == Op::var) return true;
    return false;
  };
  EXPECT_TRUE(first->dead) << "0 + x*x folded to x*x\n" << print_program(p);
  EXPECT_FALSE(reads_var(inside)) << print_program(p);
  EXPECT_TRUE(reads_var(after)) << print_program(p);
  EXPECT_TRUE(reads_var(in_loop)) << print_program(p);
}

// Tracing and builder behaviour: constant folding, value numbering, broadcasting as explicit
// loads, user errors with the source line, and the printer's stable form.
#include <gtest/gtest.h>

#include "core/ir/printer.h"
#include "core/ir/verifier.h"
#include "core/trace/tracer.h"

using namespace ember;

namespace {
DimSpec sym(const std::string& n) { DimSpec d; d.kind = DimSpec::symbolic; d.name = n; return d; }
DimSpec fixed(int64_t v) { DimSpec d; d.kind = DimSpec::fixed; d.size = v; return d; }
}  // namespace

TEST(Builder, FoldsConstantsAndNumbersValues) {
  Program p;
  Builder b(p);
  Node* two = b.f32(2.f);
  EXPECT_EQ(b.binary(Op::add, two, b.f32(3.f)), b.f32(5.f));
  Node* x = b.scalar_arg(DType::f32, 0, "x");
  Node* s1 = b.unary(Op::sin, x);
  EXPECT_EQ(b.unary(Op::sin, x), s1);                      // value numbered
  EXPECT_EQ(b.binary(Op::mul, s1, b.f32(1.f)), s1);        // x * 1
  EXPECT_EQ(b.binary(Op::add, x, two), b.binary(Op::add, two, x));  // commutative canonical order
  verify(p);
}

// The value-numbering table: a twin defined after the insertion point is not reused (a new one
// is made before it), and where both are visible the newest is; thousands of values (the table
// regrows) are each found again.
TEST(Builder, ReusesTheNewestVisibleTwinAcrossAGrowingTable) {
  Program p;
  Builder b(p);
  Node* x = b.scalar_arg(DType::f32, 0, "x");
  Node* later = b.unary(Op::sin, x);
  b.set_insert_before(later);
  Node* earlier = b.unary(Op::sin, x);
  EXPECT_NE(earlier, later);  // `later` comes after the insertion point
  b.set_insert_end(p.root());
  EXPECT_EQ(b.unary(Op::sin, x), earlier);  // both visible: the newest
  std::vector<Node*> made;
  for (int k = 0; k < 3000; ++k) made.push_back(b.binary(Op::add, x, b.f32(static_cast<float>(k) + 0.5f)));
  for (int k = 0; k < 3000; ++k) EXPECT_EQ(b.binary(Op::add, x, b.f32(static_cast<float>(k) + 0.5f)), made[static_cast<size_t>(k)]);
  verify(p);
}

TEST(Builder, DoesNotNumberReadsOfVars) {
  Program p;
  Builder b(p);
  Node* v = b.var(b.f32(1.f), {});
  Node* a = b.binary(Op::add, v, b.f32(1.f));
  b.set(v, a);
  Node* c = b.binary(Op::add, v, b.f32(1.f));
  EXPECT_NE(a, c);  // v changed in between
  verify(p);
}

TEST(Tracer, BroadcastIsAnExplicitLoadWithBroadcastIndices) {
  Tracer t("bc");
  Node* A = t.input(DType::f32, {sym("N"), fixed(3)}, "A");
  Node* r = t.input(DType::f32, {fixed(3)}, "r");
  Node* y = t.binary(Op::add, A, r);
  ASSERT_EQ(y->rank(), 2);
  Node* rl = y->operand(0)->operand(0) == r ? y->operand(0) : y->operand(1);
  ASSERT_EQ(rl->op, Op::load);
  EXPECT_EQ(rl->operand(0), r);
  EXPECT_EQ(rl->operand(1)->op, Op::index);
  EXPECT_EQ(rl->operand(1)->axis, 1);
  verify(t.program());
}

TEST(Tracer, BroadcastMismatchNamesTheSourceLine) {
  Tracer t("bad");
  Node* A = t.input(DType::f32, {sym("N"), fixed(3)}, "A");
  Node* B = t.input(DType::f32, {sym("N"), fixed(4)}, "B");
  t.set_loc("user_script.py", 42);
  try {
    t.binary(Op::add, A, B);
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("user_script.py:42"), std::string::npos) << m;
    EXPECT_NE(m.find("[N, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[N, 4]"), std::string::npos) << m;
  }
}

TEST(Tracer, DifferentSymbolicDimsDoNotBroadcast) {
  Tracer t("sym");
  Node* A = t.input(DType::f32, {sym("N")}, "A");
  Node* B = t.input(DType::f32, {sym("M")}, "B");
  EXPECT_THROW(t.binary(Op::add, A, B), ShapeError);
}

TEST(Tracer, FloatIndexIsATypeError) {
  Tracer t("idx");
  Node* A = t.input(DType::f32, {sym("N")}, "A");
  IndexItem it;
  it.value = t.unary(Op::sin, A);
  EXPECT_THROW(t.gather(A, {it}), TypeError);
}

TEST(Tracer, BreakOutsideALoopIsAnError) {
  Tracer t("brk");
  t.input(DType::f32, {sym("N")}, "A");
  EXPECT_THROW(t.break_(), Error);
}

TEST(Tracer, SlicesComposeIntoOneLoad) {
  Tracer t("slice");
  Node* X = t.input(DType::f32, {fixed(8), fixed(3)}, "X");
  IndexItem s;
  s.kind = IndexItem::slice;
  s.start = 1;
  s.stop = 7;
  s.step = 2;
  Node* y = t.gather(X, {s});  // rows 1, 3, 5
  ASSERT_EQ(y->op, Op::load);
  EXPECT_EQ(y->operand(0), X);
  IndexItem na;
  na.kind = IndexItem::newaxis;
  Node* z = t.gather(y, {na});
  ASSERT_EQ(z->op, Op::load);
  EXPECT_EQ(z->operand(0), X);  // a view of a view is still one load of X
  EXPECT_EQ(z->rank(), 3);
}

TEST(Printer, IsStableAcrossIdenticalTraces) {
  auto trace = [] {
    Tracer t("same");
    Node* A = t.input(DType::f32, {sym("N")}, "A");
    t.output(t.unary(Op::exp, t.binary(Op::mul, A, A)));
    return print_program(*t.release());
  };
  std::string a = trace();
  EXPECT_EQ(a, trace());
  EXPECT_NE(a.find("exp f32[N]"), std::string::npos) << a;
}

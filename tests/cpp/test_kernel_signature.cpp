// Kernel signatures (codegen/kernel_signature.h): kernels equal up to their buffers and params
// form one class, anything the code depends on (a constant, an attribute, a dtype, the shape of
// the body) separates them, and every member of a class prints exactly the text of its
// representative in every dialect, at any position of any program.
#include <gtest/gtest.h>

#include <string>

#include "codegen/c_printer.h"
#include "codegen/kernel_signature.h"
#include "codegen_test_helpers.h"
#include "core/passes/pipeline.h"
#include "programs.h"

namespace ember {
namespace {

using namespace codegen_test;

// dst[i] = src[i] * c + sin(src[i]) over [N] (after `junk` constants that only shift Node::id).
struct Chain {
  std::unique_ptr<Program> p = std::make_unique<Program>();
  std::vector<Node*> kernels;
};

Node* step_kernel(Builder& b, Program& p, Node* src, Node* dst, const Shape& s, float c, Op op = Op::sin) {
  Node* k = b.kernel(s);
  b.set_insert_end(k);
  Node* i = b.index(0, s);
  Node* x = ld(b, src, i, s);
  st(b, dst, i, b.binary(Op::add, b.binary(Op::mul, x, b.f32(c)), b.unary(op, x)), s);
  b.set_insert_end(p.root());
  return k;
}

// Kernels: #0 X -> A (c = 2), #1 A -> B (c = 2: same code), #2 B -> C (c = 3), #3 C -> D (cos).
Chain chain(int junk = 0) {
  Chain c;
  Program& p = *c.p;
  Builder b(p);
  for (int k = 0; k < junk; ++k) p.create(Op::constant, DType::i32);
  Shape s{b.shape_arg("N")};
  Node* X = b.input(DType::f32, s, 0, "x");
  Node* A = b.buffer(DType::f32, s, false);
  Node* B = b.buffer(DType::f32, s, false);
  Node* C = b.buffer(DType::f32, s, false);
  Node* D = b.buffer(DType::f32, s, false);
  c.kernels.push_back(step_kernel(b, p, X, A, s, 2.0f));
  c.kernels.push_back(step_kernel(b, p, A, B, s, 2.0f));
  c.kernels.push_back(step_kernel(b, p, B, C, s, 3.0f));
  c.kernels.push_back(step_kernel(b, p, C, D, s, 2.0f, Op::cos));
  b.output(D, 0);
  finish(p);
  return c;
}

TEST(KernelSignature, EqualBodiesOnOtherBuffersShareAClass) {
  Chain c = chain();
  const std::vector<Node*>& k = c.kernels;
  EXPECT_TRUE(same_kernel_body(k[0], k[1]));
  EXPECT_EQ(kernel_signature_hash(k[0]), kernel_signature_hash(k[1]));
  EXPECT_FALSE(same_kernel_body(k[0], k[2]));  // another constant
  EXPECT_FALSE(same_kernel_body(k[0], k[3]));  // another op
  EXPECT_NE(kernel_signature_hash(k[0]), kernel_signature_hash(k[2]));
  KernelClasses classes = group_kernels(*c.p);
  ASSERT_EQ(classes.kernels.size(), 4u);
  ASSERT_EQ(classes.size(), 3u);
  EXPECT_EQ(classes.members[0], (std::vector<const Node*>{k[0], k[1]}));
  EXPECT_EQ(classes.class_of, (std::vector<int>{0, 0, 1, 2}));
  // Printed once, named by both kernels in the listing.
  const std::string listing = generate_kernels(*c.p, cpp_dialect());
  EXPECT_NE(listing.find("// kernel #" + std::to_string(k[0]->index) + ", #" + std::to_string(k[1]->index) +
                         " (2 kernels, one function)"),
            std::string::npos)
      << listing;
  EXPECT_EQ(generate_distinct_kernels(classes, cpp_dialect()).size(), 3u);
}

TEST(KernelSignature, AttributesDtypesAndBindingsSeparate) {
  auto p = std::make_unique<Program>();
  Builder b(*p);
  Shape s{b.constant(DType::i32, 8), b.constant(DType::i32, 4)};
  Node* X = b.input(DType::f32, s, 0, "x");
  Node* Y = b.input(DType::i32, s, 1, "y");
  Node* n = b.scalar_arg(DType::f32, 2, "n");
  std::vector<Node*> outs;
  auto kernel = [&](Node* src, int axis, bool param) {
    Node* out = b.buffer(src->dtype, s, false);
    Node* k = b.kernel(s);
    b.set_insert_end(k);
    Node* i = b.binary(Op::add, b.binary(Op::mul, b.index(0, s), b.i32(4)), b.index(1, s));
    Node* v = ld(b, src, i, s);
    Node* a = b.cast(b.index(axis, s), src->dtype);
    if (param) a = b.binary(Op::add, a, b.cast(n, src->dtype));
    st(b, out, i, b.binary(Op::add, v, a), s);
    b.set_insert_end(p->root());
    outs.push_back(out);
    return k;
  };
  Node* k0 = kernel(X, 0, false);
  Node* k1 = kernel(X, 1, false);  // index axis: an attribute
  Node* k2 = kernel(Y, 0, false);  // i32 memory
  Node* k3 = kernel(X, 0, true);   // one param more
  Node* k4 = kernel(X, 0, false);  // the same as k0
  for (size_t o = 0; o < outs.size(); ++o) b.output(outs[o], static_cast<int>(o));
  finish(*p);
  EXPECT_FALSE(same_kernel_body(k0, k1));
  EXPECT_FALSE(same_kernel_body(k0, k2));
  EXPECT_FALSE(same_kernel_body(k0, k3));
  EXPECT_TRUE(same_kernel_body(k0, k4));
  EXPECT_EQ(group_kernels(*p).size(), 4u);
}

// The printed text depends on nothing but the body: a class prints one text in every dialect,
// and the same kernel prints the same symbol at another position of another program.
void expect_members_print_alike(const Program& p, const std::string& what) {
  GlslOptions gl;
  gl.opengl = true;
  const KernelClasses classes = group_kernels(p);
  for (const Dialect* d : {&cpp_dialect(), &glsl_dialect(), &glsl_dialect(gl), &hlsl_dialect()})
    for (size_t c = 0; c < classes.size(); ++c) {
      const GeneratedKernel first = generate_kernel(classes.representative(c), *d);
      for (const Node* k : classes.members[c]) {
        const GeneratedKernel g = generate_kernel(k, *d);
        EXPECT_EQ(g.symbol, first.symbol) << what << " " << d->name << " kernel #" << k->index;
        EXPECT_EQ(g.source, first.source) << what << " " << d->name << " kernel #" << k->index;
      }
    }
}

TEST(KernelSignature, MembersPrintTheRepresentativesTextInEveryDialect) {
  expect_members_print_alike(*chain().p, "chain");
  int programs = 0;
  for (const testing::TestProgram& tp : testing::test_programs()) {
    std::unique_ptr<Program> p = tp.build();
    run_pipeline(*p);
    expect_members_print_alike(*p, tp.name);
    ++programs;
  }
  EXPECT_GT(programs, 10);
}

TEST(KernelSignature, SameKernelSameTextInAnotherProgram) {
  Chain a = chain(0), b = chain(41);
  // b's kernels have other node ids; kernel #2 of each prints the same, as does #0 with #1.
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    const GeneratedKernel ga = generate_kernel(a.kernels[i], cpp_dialect());
    const GeneratedKernel gb = generate_kernel(b.kernels[i], cpp_dialect());
    EXPECT_EQ(ga.source, gb.source);
    EXPECT_EQ(ga.symbol, gb.symbol);
  }
  EXPECT_EQ(generate_kernel(a.kernels[0], cpp_dialect()).source, generate_kernel(b.kernels[1], cpp_dialect()).source);
  EXPECT_NE(generate_kernel(a.kernels[0], cpp_dialect()).symbol, generate_kernel(a.kernels[2], cpp_dialect()).symbol);
}

}  // namespace
}  // namespace ember

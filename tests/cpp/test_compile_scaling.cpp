// Compile time scales with program size: the work of every pass, counted in node visits
// (node_visit_counter, PassRecord::visits) rather than timed, grows linearly when the issue-17
// stencil simulation, unrolled by a loop in the tracer, doubles from 100 to 200 steps.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ir/verifier.h"
#include "core/passes/pass_util.h"
#include "core/passes/pipeline.h"
#include "core/trace/tracer.h"
#include "programs.h"

namespace ember {
namespace {

DimSpec sym(const std::string& n) {
  DimSpec d;
  d.kind = DimSpec::symbolic;
  d.name = n;
  return d;
}
IndexItem at(Node* v) {
  IndexItem i;
  i.kind = IndexItem::tensor;
  i.value = v;
  return i;
}

// u, v over [H, W]: `steps` of lap = u[i+1,j] + u[i-1,j] + u[i,j+1] + u[i,j-1] - 4u;
// u, v = u + 0.1 lap tanh(v), v + 0.01 sin(u); every 20th step u /= sqrt(sum(u^2) + 1).
std::unique_ptr<Program> stencil(int steps) {
  Tracer t("stencil");
  Node* u = t.input(DType::f32, {sym("H"), sym("W")}, "u");
  Node* v = t.input(DType::f32, {sym("H"), sym("W")}, "v");
  std::vector<Node*> shape = u->shape;
  Node* i = t.indices(shape, 0);
  Node* j = t.indices(shape, 1);
  auto c = [&](double x) { return t.constant(x, DType::f32); };
  Node* one = t.constant(1, DType::i32);
  for (int k = 0; k < steps; ++k) {
    Node* ip = t.binary(Op::add, i, one);
    Node* im = t.binary(Op::sub, i, one);
    Node* jp = t.binary(Op::add, j, one);
    Node* jm = t.binary(Op::sub, j, one);
    Node* lap = t.binary(Op::add, t.gather(u, {at(ip), at(j)}), t.gather(u, {at(im), at(j)}));
    lap = t.binary(Op::add, lap, t.gather(u, {at(i), at(jp)}));
    lap = t.binary(Op::add, lap, t.gather(u, {at(i), at(jm)}));
    lap = t.binary(Op::sub, lap, t.binary(Op::mul, c(4.0), t.gather(u, {at(i), at(j)})));
    Node* u2 = t.binary(Op::add, u, t.binary(Op::mul, t.binary(Op::mul, c(0.1), lap), t.unary(Op::tanh, v)));
    Node* v2 = t.binary(Op::add, v, t.binary(Op::mul, t.unary(Op::sin, u), c(0.01)));
    u = u2;
    v = v2;
    if (k % 20 == 0) {
      Node* norm = t.reduce(ReduceKind::sum, t.binary(Op::mul, u, u), {}, false);
      u = t.binary(Op::div, u, t.unary(Op::sqrt, t.binary(Op::add, norm, c(1.0))));
    }
  }
  t.output(u);
  t.output(v);
  return t.release();
}

// Visits per pass (cleanup passes summed over their rounds) for the CPU pipeline.
std::map<std::string, uint64_t> visits(int steps, size_t* nodes) {
  std::unique_ptr<Program> p = stencil(steps);
  PipelineOptions opt;
  opt.lower_groups = true;
  opt.tile_threads = true;
  std::map<std::string, uint64_t> out;
  for (const PassRecord& r : run_pipeline(*p, opt)) out[r.name] += r.visits;
  verify(*p, VerifyOptions{true});
  *nodes = p->nodes().size();
  return out;
}

// Linear work has equal increments: the visits added by steps 100..200 and by steps 200..300
// must match within 10% (a quadratic pass would add a third more in the second hundred). A
// ratio v(200) / v(100) is not the test: the first dozens of steps fuse less (the fused chains
// are still short), so v(n) = a n - b and the ratio sits a little above 2 (fuse_loads: 2.22x at
// 100 -> 200, 2.03x at 400 -> 800).
TEST(CompileScaling, EveryPassVisitsGrowLinearly) {
  size_t n1 = 0, n2 = 0, n3 = 0;
  std::map<std::string, uint64_t> a = visits(100, &n1), b = visits(200, &n2), c = visits(300, &n3);
  ASSERT_GT(n1, 1000u);
  // The lowered program itself grows linearly.
  EXPECT_LE(static_cast<double>(n3 - n2), 1.1 * static_cast<double>(n2 - n1)) << n1 << " " << n2 << " " << n3;
  ASSERT_TRUE(a.count("fuse_loads"));
  EXPECT_GT(a["fuse_loads"], n1) << "fuse_loads looked at fewer nodes than the program has: not counting";
  for (const auto& [pass, v1] : a) {
    const double d1 = static_cast<double>(b[pass]) - static_cast<double>(v1);
    const double d2 = static_cast<double>(c[pass]) - static_cast<double>(b[pass]);
    // A fixed allowance covers passes that visit only a handful of nodes.
    EXPECT_LE(d2, 1.1 * d1 + 1000.0) << pass << ": " << v1 << ", " << b[pass] << ", " << c[pass]
                                     << " node visits at 100, 200, 300 steps";
    EXPECT_LE(static_cast<double>(b[pass]), 2.3 * static_cast<double>(v1) + 1000.0) << pass;
  }
}

// fuse_loads makes one sweep (each load tried once, a recomputation's loads right after it): with
// the verifier on, the pipeline runs it a second time and asserts that it fuses nothing more.
TEST(CompileScaling, FuseLoadsNeedsOneSweep) {
  std::unique_ptr<Program> p = stencil(60);
  PipelineOptions opt;
  opt.verify = true;
  opt.tile_threads = true;
  bool fused = false;
  for (const PassRecord& r : run_pipeline(*p, opt)) fused |= r.name == "fuse_loads" && r.changed;
  EXPECT_TRUE(fused);
}

// Erasing the users of a widely shared value costs O(1) each (use slots), not a scan of its use
// list: node visits (drop_use counts the operands it looks at) grow linearly with the users.
uint64_t erase_users_visits(int users) {
  Program p;
  Node* c = p.create(Op::constant, DType::f32);
  p.append(p.root(), c);
  std::vector<Node*> adds;
  for (int k = 0; k < users; ++k) {
    Node* a = p.create(Op::add, DType::f32, {}, std::vector<Node*>{c, c});
    p.append(p.root(), a);
    adds.push_back(a);
  }
  const uint64_t v0 = node_visit_counter();
  for (Node* a : adds) p.erase(a);  // from the front: the old scan found each at its far end
  EXPECT_TRUE(c->users.empty());
  return node_visit_counter() - v0;
}

TEST(CompileScaling, ErasingUsersOfASharedValueIsLinear) {
  const uint64_t small = erase_users_visits(2000), large = erase_users_visits(8000);
  EXPECT_LE(large, 4 * small + 16) << small << " vs " << large;
  EXPECT_LE(large, 4u * 8000u) << "more than two operand checks per dropped use";
}

// kernels_of finds what a walk of every node finds, in the same order, reading only the host level.
TEST(CompileScaling, KernelsOfReadsOnlyTheHostLevel) {
  std::unique_ptr<Program> p = stencil(30);
  PipelineOptions opt;
  run_pipeline(*p, opt);
  std::vector<Node*> walked;
  p->for_each([&](Node* n) {
    if (n->op == Op::kernel) walked.push_back(n);
  });
  const uint64_t v0 = node_visit_counter();
  const std::vector<Node*> found = kernels_of(*p);
  const uint64_t v = node_visit_counter() - v0;
  ASSERT_GT(walked.size(), 30u);
  EXPECT_EQ(found, walked);
  EXPECT_LT(v * 5, p->nodes().size()) << v << " visits for " << p->nodes().size() << " nodes";
  // Kernels inside host loops (a bitonic sort's stages) are found too.
  std::unique_ptr<Program> sort = testing::bitonic_sort();
  run_pipeline(*sort, opt);
  std::vector<Node*> in_loops;
  sort->for_each([&](Node* n) {
    if (n->op == Op::kernel) in_loops.push_back(n);
  });
  ASSERT_FALSE(in_loops.empty());
  bool nested = false;
  for (Node* k : in_loops) nested |= k->parent != sort->root();
  EXPECT_TRUE(nested) << "bitonic_sort has no kernel inside a host loop any more: pick another program";
  EXPECT_EQ(kernels_of(*sort), in_loops);
}

// What a walk and the cleanup passes read of a node (kind, id, links, operands, shape and the
// scalar attributes cse hashes) sits in its first two 64-byte cache lines: each further line per
// node is a cache miss per node once the IR outgrows the cache.
TEST(CompileScaling, HotNodeFieldsFillTheFirstTwoCacheLines) {
  Program p;
  Node* n = p.create(Op::constant, DType::f32);
  auto at = [&](const void* field) { return static_cast<const char*>(field) - reinterpret_cast<const char*>(n); };
  EXPECT_EQ(reinterpret_cast<uintptr_t>(n) % 64, 0u);
  for (const void* f :
       {static_cast<const void*>(&n->op), static_cast<const void*>(&n->id), static_cast<const void*>(&n->next),
        static_cast<const void*>(&n->first_child), static_cast<const void*>(&n->parent),
        static_cast<const void*>(&n->operands), static_cast<const void*>(&n->shape), static_cast<const void*>(&n->bits),
        static_cast<const void*>(&n->axis), static_cast<const void*>(&n->kind), static_cast<const void*>(&n->axes),
        static_cast<const void*>(&n->mode), static_cast<const void*>(&n->flat), static_cast<const void*>(&n->index)})
    EXPECT_LT(at(f), 128) << "a hot field past the second cache line";
  EXPECT_LT(at(&n->index) + static_cast<std::ptrdiff_t>(sizeof n->index), 129);
  EXPECT_LT(at(&n->shape) + static_cast<std::ptrdiff_t>(sizeof n->shape), 129);
  EXPECT_LE(sizeof(Node), 320u);
}

}  // namespace
}  // namespace ember

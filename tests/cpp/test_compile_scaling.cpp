// Compile time scales with program size: the work of every pass, counted in node visits
// (node_visit_counter, PassRecord::visits) rather than timed, grows linearly when the issue-17
// stencil simulation, unrolled by a loop in the tracer, doubles from 100 to 200 steps.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/ir/printer.h"
#include "core/ir/verifier.h"
#include "core/passes/cse.h"
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

// fuse_kernels makes no twins for cse to merge: a value read by several nodes of another kernel
// is loaded once, at thread indices the kernel makes once (it made ~1800 twins at 400 steps).
TEST(CompileScaling, FuseKernelsMakesNoTwins) {
  std::unique_ptr<Program> p = stencil(30);
  PipelineOptions opt;
  opt.verify = true;
  opt.tile_threads = true;
  bool checked = false;
  opt.after_pass = [&](const char* pass, Program& q, bool changed, bool) {
    if (std::string(pass) != "fuse_kernels") return;
    EXPECT_TRUE(changed);
    std::unique_ptr<Program> copy = clone_program(q);
    EXPECT_FALSE(cse(*copy)) << "cse merged nodes fuse_kernels made";
    // Each kernel holds at most one index node per axis.
    copy->for_each([&](Node* k) {
      if (k->op != Op::kernel) return;
      std::map<int, int> per_axis;
      walk_subtree(k, [&](Node* n) { per_axis[n->axis] += n->op == Op::index; });
      for (const auto& [axis, count] : per_axis) EXPECT_LE(count, 1) << "kernel #" << k->index << " axis " << axis;
    });
    checked = true;
  };
  run_pipeline(*p, opt);
  EXPECT_TRUE(checked);
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

// Program::set_walk_cache: for_each over the array it recorded visits what the walk by links
// visits, in the same order, while nodes are erased (skipped) and after f links one (the walk goes
// on by links from there, as the linked walk would).
std::vector<int> walk_ids(const Program& p, const std::function<void(Node*)>& f = nullptr) {
  std::vector<int> ids;
  p.for_each([&](Node* n) {
    ids.push_back(n->id);
    if (f) f(n);
  });
  return ids;
}

std::unique_ptr<Program> lowered_stencil(int steps) {
  std::unique_ptr<Program> p = stencil(steps);
  PipelineOptions opt;
  opt.tile_threads = true;
  run_pipeline(*p, opt);
  return p;
}

TEST(CompileScaling, ArrayWalkVisitsWhatTheLinkedWalkVisits) {
  std::unique_ptr<Program> p = lowered_stencil(12);
  const std::vector<int> linked = walk_ids(*p);
  ASSERT_GT(linked.size(), 300u);
  p->set_walk_cache(true, linked.size());
  EXPECT_FALSE(p->walks_by_array());  // (no walk has counted the program yet)
  EXPECT_EQ(walk_ids(*p), linked);    // by links, counting
  EXPECT_TRUE(p->walks_by_array());
  EXPECT_EQ(walk_ids(*p), linked);  // records
  const uint64_t v0 = node_visit_counter();
  EXPECT_EQ(walk_ids(*p), linked);  // from the array
  EXPECT_EQ(node_visit_counter() - v0, linked.size()) << "the array walk counts each node it visits once";
  // Erasing keeps the array: erased nodes are skipped (half the stores erased between walks, then
  // the other half by f during one, as cse erases the node it merges).
  auto stores = [](Program& q) {
    std::vector<Node*> out;
    for (Node* n : q.nodes())
      if (n->op == Op::store) out.push_back(n);
    return out;
  };
  std::unique_ptr<Program> q = lowered_stencil(12);  // the same edits, walked by links
  const std::vector<Node*> sp = stores(*p), sq = stores(*q);
  ASSERT_EQ(sp.size(), sq.size());
  ASSERT_GT(sp.size(), 10u);
  for (size_t k = 0; k < sp.size(); k += 2) {
    p->erase(sp[k]);
    q->erase(sq[k]);
  }
  EXPECT_EQ(walk_ids(*p), walk_ids(*q));  // from the array
  EXPECT_LT(walk_ids(*q).size(), linked.size());
  auto erase_store = [](Program& r) {
    return [&r](Node* n) {
      if (n->op == Op::store) r.erase(n);
    };
  };
  EXPECT_EQ(walk_ids(*p, erase_store(*p)), walk_ids(*q, erase_store(*q)));
  EXPECT_EQ(stores(*p).size(), 0u);
  EXPECT_EQ(walk_ids(*p), walk_ids(*q));
  p->set_walk_cache(false);
}

// f links nodes during an array walk: one right after the node it is given (not visited, as by
// links), one at the end of a later kernel (visited), a nested walk inside f (by links); the
// visits match the walk by links of an identical program with the same edits.
TEST(CompileScaling, LinkingDuringAnArrayWalkGoesOnByLinks) {
  auto edit_and_walk = [](bool array) {
    std::unique_ptr<Program> p = lowered_stencil(12);
    std::vector<Node*> kernels = kernels_of(*p);
    EXPECT_GT(kernels.size(), 6u);
    Node* last = kernels.back();
    Node* third = kernels[2];
    p->set_walk_cache(array, 0);
    if (array) walk_ids(*p);  // records
    size_t nested = 0;
    std::vector<int> ids = walk_ids(*p, [&](Node* n) {
      if (n->parent == third && n == third->first_child->next) {
        Node* c = p->create(Op::constant, DType::f32);
        p->insert_after(n, c);  // right after: not visited
        Node* d = p->create(Op::constant, DType::i32);
        p->append(last, d);  // in a later scope: visited
        p->for_each([&](Node*) { ++nested; });
      }
    });
    p->set_walk_cache(false);
    ids.push_back(-static_cast<int>(nested));
    return ids;
  };
  const std::vector<int> linked = edit_and_walk(false);
  const std::vector<int> array = edit_and_walk(true);
  ASSERT_GT(linked.size(), 300u);
  EXPECT_EQ(array, linked);
}

// The pipeline with every walk over arrays (EMBER_DEBUG=array_walks does the same from Python)
// lowers to the same program as with walks by links.
TEST(CompileScaling, ArrayWalksLowerToTheSameProgram) {
  std::unique_ptr<Program> a = stencil(40), b = stencil(40);
  PipelineOptions opt;
  opt.tile_threads = true;
  opt.verify = true;
  const std::vector<PassRecord> ra = run_pipeline(*a, opt);
  opt.array_walks_from = 0;
  uint64_t array_walks = 0;
  opt.after_pass = [&](const char*, Program& p, bool, bool) { array_walks += p.walks_by_array(); };
  const std::vector<PassRecord> rb = run_pipeline(*b, opt);
  EXPECT_GT(array_walks, 20u);
  EXPECT_EQ(print_program(*b), print_program(*a));
  // The node visits each pass records do not depend on how it walks.
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t k = 0; k < ra.size(); ++k) {
    EXPECT_EQ(ra[k].name, rb[k].name);
    EXPECT_EQ(ra[k].visits, rb[k].visits) << ra[k].name << " (pass " << k << ")";
  }
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

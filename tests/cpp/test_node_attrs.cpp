// Node attributes are declared once (EMBER_NODE_ATTRS in core/ir/node.h); copies, equality,
// hashing and value numbering derive from that list. These tests walk the list too, so an
// attribute added to it is covered here with no edit: clones keep every attribute, cse and the
// builder never merge nodes that differ in one semantic attribute, and the printer shows every
// semantic attribute that differs from its default. Also: shapes are tracked as dim uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/ir/builder.h"
#include "core/ir/printer.h"
#include "core/ir/verifier.h"
#include "core/passes/cse.h"
#include "core/passes/dce.h"
#include "core/passes/pass_util.h"
#include "core/passes/pipeline.h"
#include "programs.h"

using namespace ember;
using namespace ember::testing;

namespace {

// A value different from the attribute's default, per attribute type.
void set_other(uint32_t& v) { v = v == 7u ? 9u : 7u; }
void set_other(int& v) { v = v == 3 ? 5 : 3; }
void set_other(uint8_t& v) { v = v == 2 ? 3 : 2; }
void set_other(bool& v) { v = !v; }
void set_other(IndexMode& v) { v = v == IndexMode::wrap ? IndexMode::unsafe : IndexMode::wrap; }
void set_other(ThinString& v) { v = v + "_other"; }
void set_other(ThinVec<int>& v) { v.push_back(static_cast<int>(v.size()) + 2); }
void set_other(SourceLoc& v) { v = SourceLoc(v.file() + "other.py", v.line + 17); }

template <class T>
bool equal(const T& a, const T& b) { return a == b; }
bool equal(const SourceLoc& a, const SourceLoc& b) { return a.file() == b.file() && a.line == b.line; }

// Every attribute of the list, metadata included, set away from its default.
void set_every_attr(Node* n) {
#define SET(type, name, init, role) set_other(n->name);
  EMBER_NODE_ATTRS(SET)
#undef SET
}

// Names of the attributes (metadata included) on which a and b differ.
std::string differing_attrs(const Node* a, const Node* b) {
  std::string out;
#define CMP(type, name, init, role) if (!equal(a->name, b->name)) out += std::string(out.empty() ? "" : ", ") + #name;
  EMBER_NODE_ATTRS(CMP)
#undef CMP
  return out;
}

TEST(NodeAttrs, EverySetterLeavesTheDefault) {
  Node d;
  Node n;
  set_every_attr(&n);
  const NodeAttrs defaults;
#define CHECK_MOVED(type, name, init, role) EXPECT_FALSE(equal(n.name, defaults.name)) << #name;
  EMBER_NODE_ATTRS(CHECK_MOVED)
#undef CHECK_MOVED
  EXPECT_FALSE(same_attrs(n, d));
  EXPECT_TRUE(same_attrs(d, defaults));
  EXPECT_TRUE(non_default_attrs(d).empty());
  size_t semantic = 0;
#define COUNT(type, name, init, role) semantic += AttrRole::role == AttrRole::semantic;
  EMBER_NODE_ATTRS(COUNT)
#undef COUNT
  EXPECT_EQ(non_default_attrs(n).size(), semantic);  // metadata (loc) not listed
}

TEST(NodeAttrs, CloneProgramCopiesEveryAttribute) {
  Program p;
  Builder b(p);
  Node* dim = b.shape_arg("N");
  Node* x = b.input(DType::f32, {dim}, 0, "x");
  // Each op of the program gets every attribute set, whether or not the op uses it.
  Node* k = b.kernel({dim});
  b.set_insert_end(k);
  Node* l = b.load(x, {b.index(0, {dim})}, {dim});
  Node* buf = b.raw(Op::group_buffer, DType::f32, {b.i32(4)}, {});
  b.set_insert_end(p.root());
  Node* out = b.output(x, 0);
  for (Node* n : {dim, x, k, l, buf, out}) set_every_attr(n);
  std::vector<std::pair<const Node*, Node*>> map;
  std::unique_ptr<Program> q = clone_program(p, &map);
  ASSERT_FALSE(map.empty());
  int checked = 0;
  for (auto& [from, to] : map) {
    if (from == p.root()) continue;
    EXPECT_EQ(differing_attrs(from, to), "") << op_name(from->op);
    EXPECT_TRUE(same_attrs(*from, *to));
    EXPECT_EQ(hash_attrs(*from), hash_attrs(*to));
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

// A kernel over [N] loading input x at its index: the setting of the copy tests below.
struct LoadKernel {
  Node* dim;
  Node* k;
  Node* l;
};
LoadKernel load_kernel(Builder& b) {
  Node* dim = b.shape_arg("N");
  Node* x = b.input(DType::f32, {dim}, 0, "x");
  Node* k = b.kernel({dim});
  b.set_insert_end(k);
  return {dim, k, b.load(x, {b.index(0, {dim})}, {dim})};
}

TEST(NodeAttrs, PassCopiesKeepEveryAttribute) {
  Program p;
  Builder b(p);
  auto [dim, k, l] = load_kernel(b);
  Node* neg = b.unary(Op::neg, l);
  set_every_attr(k);
  set_every_attr(l);
  set_every_attr(neg);
  // clone_nodes (tile_threads' edge tiles, lower_group_barriers) and kernel_like.
  b.set_insert_end(p.root());
  Node* k2 = kernel_like(b, k, k->shape);
  b.set_insert_end(k2);
  std::unordered_map<Node*, Node*> map;
  clone_nodes(b, k, {l, neg}, map, k2->shape);
  ASSERT_EQ(map.size(), 2u);
  EXPECT_EQ(differing_attrs(l, map[l]), "");
  EXPECT_EQ(differing_attrs(neg, map[neg]), "");
  EXPECT_EQ(differing_attrs(k, k2), "index");  // a kernel of its own id
}

// clone_nodes copies a set in program order whatever order it is given in, operands substituted;
// a set with a scope in it (the fallback walk) keeps the nesting.
TEST(NodeAttrs, CloneNodesCopiesInProgramOrder) {
  Program p;
  Builder b(p);
  auto [dim, k, l] = load_kernel(b);
  Node* s = b.unary(Op::sin, l);
  Node* c = b.unary(Op::cos, s);
  Node* t = b.binary(Op::mul, c, l);
  b.set_insert_end(p.root());
  Node* k2 = kernel_like(b, k, k->shape);
  b.set_insert_end(k2);
  std::unordered_map<Node*, Node*> map;
  const std::vector<Node*> shuffled{t, s, l, c};
  const std::unordered_set<Node*> set(shuffled.begin(), shuffled.end());
  clone_nodes(b, k, shuffled, [&](const Node* n) { return set.count(const_cast<Node*>(n)) > 0; }, map, k2->shape);
  ASSERT_EQ(map.size(), 4u);
  std::vector<Node*> order;
  for (Node* n = k2->first_child; n; n = n->next) order.push_back(n);
  EXPECT_EQ(order, (std::vector<Node*>{map[l], map[s], map[c], map[t]}));
  EXPECT_EQ(map[t]->operand(0), map[t->operand(0)]);
  EXPECT_EQ(map[t]->operand(1), map[t->operand(1)]);
  EXPECT_EQ(map[s]->operand(0), map[l]);

  // A loop among the nodes: copied with its body inside it.
  b.set_insert_end(k);
  Node* loop = b.loop(b.i32(0), b.i32(4), b.i32(1), {dim});
  b.set_insert_end(loop);
  Node* inner = b.unary(Op::exp, l);
  b.set_insert_end(p.root());
  Node* k3 = kernel_like(b, k, k->shape);
  b.set_insert_end(k3);
  std::unordered_map<Node*, Node*> map3;
  const std::vector<Node*> with_loop{inner, loop, l};
  const std::unordered_set<Node*> set3(with_loop.begin(), with_loop.end());
  clone_nodes(b, k, with_loop, [&](const Node* n) { return set3.count(const_cast<Node*>(n)) > 0; }, map3, k3->shape);
  ASSERT_EQ(map3.size(), 3u);
  EXPECT_EQ(k3->first_child, map3[l]);
  EXPECT_EQ(map3[l]->next, map3[loop]);
  EXPECT_EQ(map3[inner]->parent, map3[loop]);
  EXPECT_EQ(map3[inner]->operand(0), map3[l]);
}

// cse merges two equal loads (or two equal negations) unless one semantic attribute differs.
// Returns whether the second survived.
bool cse_keeps_both(Op op, const std::function<void(Node*)>& change) {
  Program p;
  Builder b(p);
  Node* x = b.input(DType::f32, {b.i32(8)}, 0, "x");
  Node* i = b.scalar_arg(DType::i32, 1, "i");
  Node* first = nullptr;
  Node* second = nullptr;
  if (op == Op::load) {
    first = b.load(x, {i}, {});
    second = b.load(x, {i}, {});
  } else {
    Node* v = b.load(x, {i}, {});
    first = b.raw(op, DType::f32, {}, {v});
    second = b.raw(op, DType::f32, {}, {v});
  }
  change(second);
  b.output(first, 0);
  b.output(second, 1);
  cse(p);
  EXPECT_FALSE(first->dead);
  return !second->dead;
}

TEST(NodeAttrs, CseDoesNotMergeNodesDifferingInOneSemanticAttribute) {
  for (Op op : {Op::load, Op::neg}) {
    SCOPED_TRACE(op_name(op));
    EXPECT_FALSE(cse_keeps_both(op, [](Node*) {}));  // the control: equal nodes merge
    // Metadata does not keep them apart.
    EXPECT_FALSE(cse_keeps_both(op, [](Node* n) { set_other(n->loc); }));
    int semantic = 0;
#define CASE(type, name, init, role)                                                        \
  if (AttrRole::role == AttrRole::semantic) {                                               \
    ++semantic;                                                                             \
    EXPECT_TRUE(cse_keeps_both(op, [](Node* n) { set_other(n->name); })) << "attribute " #name; \
  }
    EMBER_NODE_ATTRS(CASE)
#undef CASE
    EXPECT_GE(semantic, 12);
  }
}

TEST(NodeAttrs, BuilderValueNumberingComparesEverySemanticAttribute) {
#define CASE(type, name, init, role)                                                          \
  {                                                                                           \
    Program p;                                                                                \
    Builder b(p);                                                                             \
    Node* x = b.scalar_arg(DType::f32, 0, "x");                                               \
    Node* a = b.unary(Op::neg, x);                                                            \
    EXPECT_EQ(b.unary(Op::neg, x), a);                                                        \
    set_other(a->name);                                                                       \
    if (AttrRole::role == AttrRole::semantic) EXPECT_NE(b.unary(Op::neg, x), a) << #name;   \
    else EXPECT_EQ(b.unary(Op::neg, x), a) << #name;                                          \
    Node* i0 = b.index(0, {b.i32(4)});                                                        \
    EXPECT_EQ(b.index(0, {b.i32(4)}), i0);                                                    \
    EXPECT_NE(b.index(1, {b.i32(4)}), i0);                                                    \
  }
  EMBER_NODE_ATTRS(CASE)
#undef CASE
}

// ---- Printing ----

// Runs `check` on every node of p after every pass of the pipeline (and as traced).
void at_every_stage(std::unique_ptr<Program> p, bool lower_groups, const std::function<void(Program&, Node*)>& check) {
  p->for_each([&](Node* n) { check(*p, n); });
  PipelineOptions opt;
  opt.verify = true;
  opt.lower_groups = lower_groups;
  opt.tile_threads = true;
  opt.after_pass = [&](const char*, Program& q, bool changed, bool) {
    if (changed) q.for_each([&](Node* n) { check(q, n); });
  };
  run_pipeline(*p, opt);
}

TEST(NodeAttrs, PrinterShowsEverySemanticAttributeThatDiffersFromItsDefault) {
  static const NodeAttrs defaults;
  std::unordered_set<std::string> seen;  // "op.attr" pairs checked
  auto check = [&](Program& p, Node* n) {
    const std::string text = print_node(p, n);
#define CASE(type, name, init, role)                                                                   \
  if (AttrRole::role == AttrRole::semantic && !equal(n->name, defaults.name) && !printer_omits(n->op, #name)) { \
    seen.insert(std::string(op_name(n->op)) + "." #name);                                              \
    type saved = n->name;                                                                              \
    n->name = defaults.name;                                                                           \
    const std::string without = print_node(p, n);                                                      \
    n->name = saved;                                                                                   \
    EXPECT_NE(without, text) << "the printer does not show " #name " of " << text;                   \
  }
    EMBER_NODE_ATTRS(CASE)
#undef CASE
  };
  std::vector<std::function<std::unique_ptr<Program>()>> builds{bitonic_sort, group_zoo};
  for (const TestProgram& tp : test_programs()) builds.push_back(tp.build);
  for (auto& build : builds)
    for (bool lower_groups : {false, true}) at_every_stage(build(), lower_groups, check);
  // The programs do exercise the printed attributes.
  for (const char* want : {"constant.bits", "index.axis", "reduce.kind", "reduce.axes", "reduce.keepdims",
                           "scan.axis", "atomic.kind", "load.mode", "load.flat", "store.flat", "buffer.zero_init",
                           "group_buffer.zero_init", "input.index", "input.name", "output.index", "kernel.index",
                           "kernel.group", "shape_arg.name"})
    EXPECT_TRUE(seen.count(want)) << want << " never differs from its default in the test programs";
}

// ---- Shapes as uses ----

TEST(DimUses, CreateAndSetShapeTrackDimUsers) {
  Program p;
  Builder b(p);
  Node* n = b.shape_arg("N");
  Node* m = b.shape_arg("M");
  Node* x = b.input(DType::f32, {n, n, m}, 0, "x");
  EXPECT_EQ(std::count(n->dim_users().begin(), n->dim_users().end(), x), 2);
  EXPECT_EQ(std::count(m->dim_users().begin(), m->dim_users().end(), x), 1);
  EXPECT_TRUE(n->users.empty());  // operand uses only
  p.set_shape(x, std::vector<Node*>{m});
  EXPECT_TRUE(n->dim_users().empty());
  EXPECT_EQ(m->dim_users(), std::vector<Node*>{x});
  verify(p);
}

// Regression (gradient fuzzer seed 130543): erasing a node of shape [N, N, N] while other nodes
// use N corrupted N's dim use list (a dropped entry's stale slot matched the moved last entry).
// Random shapes over two dims, erased in random orders, against the verifier's full check.
TEST(DimUses, ErasingRepeatedDimsInAnyOrderKeepsListsInSync) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    Program p;
    Builder b(p);
    Node* dims[2] = {b.shape_arg("N"), b.shape_arg("M")};
    std::vector<Node*> nodes;
    for (int k = 0; k < 12; ++k) {
      std::vector<Node*> shape(1 + rng() % 4);
      for (Node*& d : shape) d = dims[rng() % 2];
      nodes.push_back(b.buffer(DType::f32, shape, true));
    }
    std::shuffle(nodes.begin(), nodes.end(), rng);
    for (size_t k = 0; k < nodes.size(); ++k) {
      if (rng() % 3 == 0) {  // reshape some first, so slots are out of creation order
        std::vector<Node*> shape(1 + rng() % 4);
        for (Node*& d : shape) d = dims[rng() % 2];
        p.set_shape(nodes[k], shape);
      }
      p.erase(nodes[k]);
      verify(p);
    }
    EXPECT_TRUE(dims[0]->dim_users().empty() && dims[1]->dim_users().empty());
  }
}

TEST(DimUses, ReplaceAllUsesOfADimRewritesShapes) {
  Program p;
  Builder b(p);
  Node* n = b.shape_arg("N");
  Node* two = b.binary(Op::mul, n, b.i32(2));   // a computed dim
  Node* twin = b.raw(Op::mul, DType::i32, {}, {n, b.i32(2)});
  Node* buf = b.buffer(DType::f32, {twin, n}, true);
  Node* k = b.kernel({twin, n});
  b.set_insert_end(k);
  Node* v = b.load(buf, {b.index(0, {twin, n}), b.index(1, {twin, n})}, {twin, n});
  b.store(buf, b.unary(Op::neg, v), {b.index(0, {twin, n}), b.index(1, {twin, n})}, {twin, n});
  b.set_insert_end(p.root());
  b.output(buf, 0);
  b.output(two, 1);
  verify(p);
  ASSERT_FALSE(twin->dim_users().empty());
  // Still a dim: erasing it is an internal error, and dce keeps it although no operand uses it.
  EXPECT_THROW(p.erase(twin), InternalError);
  dce(p);
  EXPECT_FALSE(twin->dead);
  verify(p);
  p.replace_all_uses(twin, two);
  EXPECT_TRUE(twin->dim_users().empty());
  int users_of_two = 0;
  p.for_each([&](Node* x) {
    for (Node* d : x->shape) EXPECT_NE(d, twin) << print_node(p, x);
    users_of_two += static_cast<int>(std::count(x->shape.begin(), x->shape.end(), two));
  });
  EXPECT_EQ(static_cast<int>(two->dim_users().size()), users_of_two);
  EXPECT_GE(users_of_two, 6);  // buf, k, both index nodes, load, neg, store
  EXPECT_EQ(buf->shape[0], two);
  p.erase(twin);
  verify(p);
}

TEST(DimUses, CseMergesTwinDimsThroughTheirShapes) {
  Program p;
  Builder b(p);
  Node* n = b.shape_arg("N");
  Node* d1 = b.raw(Op::add, DType::i32, {}, {n, b.i32(1)});
  Node* d2 = b.raw(Op::add, DType::i32, {}, {n, b.i32(1)});
  Node* buf = b.buffer(DType::f32, {d2}, true);
  b.output(buf, 0);
  b.output(d1, 1);
  EXPECT_TRUE(cse(p));
  EXPECT_TRUE(d2->dead);
  EXPECT_EQ(buf->shape[0], d1);
  verify(p);
}

TEST(DimUses, VerifierChecksDimUseLists) {
  Program p;
  Builder b(p);
  Node* n = b.shape_arg("N");
  Node* x = b.input(DType::f32, {n}, 0, "x");
  b.output(x, 0);
  verify(p);
  n->dim_users_mut().push_back(x);  // a stale entry
  EXPECT_THROW(verify(p), InternalError);
  n->dim_users_mut().pop_back();
  n->dim_users_mut().clear();  // a missing entry
  EXPECT_THROW(verify(p), InternalError);
  n->dim_users_mut().push_back(x);
  verify(p);
}

// A node's name is one pointer wide (Node is 256 bytes: node.h asserts it) and still reads like a
// std::string: copies are deep, empty is null, comparisons and concatenation work both ways.
TEST(ThinString, ReadsLikeAStringAndCopiesDeeply) {
  static_assert(sizeof(ThinString) == sizeof(void*));
  ThinString a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.str(), "");
  a = std::string("kernel_7");
  ThinString b = a;
  b = b + "_x";
  EXPECT_EQ(a, "kernel_7");
  EXPECT_EQ(b, std::string("kernel_7_x"));
  EXPECT_TRUE(std::string("kernel_7") == a);
  EXPECT_FALSE(a == b);
  EXPECT_EQ(std::string(a.c_str()), "kernel_7");
  const std::string& view = a;  // no copy
  EXPECT_EQ(&view, &a.str());
  a = "";
  EXPECT_TRUE(a.empty());
  b.clear();
  EXPECT_EQ(b, a);
}

// The lists few nodes have (dim users, params, memories) live behind one pointer: reading them on
// any node is an empty list, writing makes them, and copies of a program carry them.
TEST(NodeLists, ReadEmptyWriteAndCloneCarry) {
  Program p;
  Builder b(p);
  Node* n = b.shape_arg("N");
  Node* x = b.input(DType::f32, {n}, 0, "x");
  EXPECT_TRUE(x->params().empty() && x->memories().empty() && x->dim_users().empty());
  EXPECT_EQ(n->dim_users(), std::vector<Node*>{x});
  Node* k = b.kernel({n});
  k->params_mut().push_back(n);
  k->memories_mut().push_back(x);
  std::vector<std::pair<const Node*, Node*>> map;
  auto copy = clone_program(p, &map);
  Node* kc = nullptr;
  for (auto& [from, to] : map)
    if (from == k) kc = to;
  ASSERT_NE(kc, nullptr);
  ASSERT_EQ(kc->params().size(), 1u);
  ASSERT_EQ(kc->memories().size(), 1u);
  EXPECT_EQ(kc->params()[0]->op, Op::shape_arg);
  EXPECT_EQ(kc->memories()[0]->op, Op::input);
  EXPECT_EQ(kc->memories()[0]->name, "x");
}

}  // namespace

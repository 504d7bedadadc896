#include "core/passes/unroll_loops.h"

#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/ir/builder.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

constexpr int64_t kMaxUnrollTrips = 4;
constexpr size_t kMaxUnrolledNodes = 256;  // body size x trips: keep kernels small

bool inside_kernel(const Node* n) {
  for (const Node* s = n->parent; s; s = s->parent)
    if (s->op == Op::kernel) return true;
  return false;
}

// Iteration values of `loop` when its bounds are constants and the trip count is small.
bool constant_trips(const Node* loop, std::vector<int32_t>& iters) {
  const Node* b = loop->operand(0);
  const Node* e = loop->operand(1);
  const Node* s = loop->operand(2);
  if (b->op != Op::constant || e->op != Op::constant || s->op != Op::constant) return false;
  if (loop->dtype != DType::i32) return false;
  const int64_t begin = b->i(), end = e->i(), step = s->i();
  if (step == 0) return false;
  for (int64_t v = begin; step > 0 ? v < end : v > end; v += step) {
    if (static_cast<int64_t>(iters.size()) == kMaxUnrollTrips) return false;
    iters.push_back(static_cast<int32_t>(v));
  }
  return true;
}

// Whether a break_/continue_ of this very loop sits in its body (nested loops keep theirs).
bool has_own_jump(Node* loop) {
  bool found = false;
  walk_subtree(loop, [&](Node* n) {
    if (n->op != Op::break_ && n->op != Op::continue_) return;
    const Node* l = n->parent;
    while (l->op != Op::loop) l = l->parent;
    found |= l == loop;
  });
  return found;
}

void unroll(Program& p, Node* loop, const std::vector<int32_t>& iters) {
  std::unordered_set<Node*> body;
  walk_subtree(loop, [&](Node* n) {
    if (n != loop) body.insert(n);
  });
  Builder b(p);
  b.set_insert_before(loop);
  b.loc = loop->loc;
  for (int32_t v : iters) {
    std::unordered_map<Node*, Node*> map;
    map[loop] = b.i32(v);  // a constant: broadcast to the loop's shape wherever it is used
    clone_nodes(b, loop, body, map, loop->shape);
  }
  p.erase(loop);
}

}  // namespace

bool unroll_loops(Program& p) {
  std::vector<Node*> post;  // inner loops first, so an outer loop clones unrolled bodies
  std::function<void(Node*)> visit = [&](Node* n) {
    for (Node* c = n->first_child; c; c = c->next) visit(c);
    if (n->op == Op::loop) post.push_back(n);
  };
  visit(p.root());
  bool changed = false;
  for (Node* loop : post) {
    std::vector<int32_t> iters;
    if (!inside_kernel(loop) || !constant_trips(loop, iters) || has_own_jump(loop)) continue;
    size_t size = 0;
    walk_subtree(loop, [&](Node*) { ++size; });
    if (size * iters.size() > kMaxUnrolledNodes) continue;
    unroll(p, loop, iters);
    changed = true;
  }
  return changed;
}

}  // namespace ember

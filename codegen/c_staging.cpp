#include "codegen/c_staging.h"

#include <functional>
#include <unordered_set>

namespace ember {

namespace {

constexpr int64_t kMaxStride = 4;

bool uniform(const Node* o, const Node* k) { return o->op == Op::constant || !o->inside(k); }

// idx == stride * loop + lane with constant stride in [2, kMaxStride] and lane in [0, stride).
bool strided(const Node* idx, const Node** loop, int64_t* stride, int64_t* lane) {
  *lane = 0;
  if (idx->op == Op::add) {
    const Node* a = idx->operand(0);
    const Node* b = idx->operand(1);
    if (a->op != Op::constant) std::swap(a, b);
    if (a->op != Op::constant) return false;
    *lane = a->i();
    idx = b;
  }
  if (idx->op != Op::mul) return false;
  const Node* a = idx->operand(0);
  const Node* b = idx->operand(1);
  if (a->op != Op::constant) std::swap(a, b);
  if (a->op != Op::constant || b->op != Op::loop) return false;
  *stride = a->i();
  *loop = b;
  return *stride >= 2 && *stride <= kMaxStride && *lane >= 0 && *lane < *stride;
}

}  // namespace

Staging find_staging(const Node* k) {
  Staging st;
  std::unordered_set<const Node*> written;
  std::vector<const Node*> loads;
  std::function<void(const Node*)> walk = [&](const Node* s) {
    for (const Node* c = s->first_child; c; c = c->next) {
      if (c->op == Op::store || c->op == Op::atomic) written.insert(c->operand(0));
      if (c->op == Op::load && c->flat) loads.push_back(c);
      walk(c);
    }
  };
  walk(k);
  for (const Node* n : loads) {
    const Node* mem = n->operand(0);
    const Node* loop = nullptr;
    int64_t stride = 0, lane = 0;
    if (written.count(mem) || !strided(n->operand(1), &loop, &stride, &lane)) continue;
    if (!loop->inside(k)) continue;  // a host loop's counter is a parameter of the kernel, not a loop in it
    const Node* step = loop->operand(2);
    if (step->op != Op::constant || step->i() != 1 || !uniform(loop->operand(0), k) ||
        !uniform(loop->operand(1), k))
      continue;
    int g = 0;
    while (g < static_cast<int>(st.groups.size()) &&
           !(st.groups[g].memory == mem && st.groups[g].loop == loop && st.groups[g].stride == stride))
      ++g;
    if (g == static_cast<int>(st.groups.size())) st.groups.push_back({mem, loop, stride});
    st.loads[n] = {g, lane};
  }
  return st;
}

}  // namespace ember

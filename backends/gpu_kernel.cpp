// Kernel facts for GPU runtimes (gpu_kernel.h): memory accesses, host-known loop bounds,
// float atomic adds, written inputs.
#include "backends/gpu_kernel.h"

#include <algorithm>
#include <functional>

namespace ember {

namespace {

void walk(const Node* scope, const std::function<void(const Node*)>& f) {
  for (const Node* c = scope->first_child; c; c = c->next) {
    f(c);
    if (c->first_child) walk(c, f);
  }
}

}  // namespace

MemoryAccess memory_accesses(const Node* kernel) {
  MemoryAccess a;
  a.reads.assign(kernel->memories().size(), 0);
  a.writes.assign(kernel->memories().size(), 0);
  auto slot = [&](const Node* m) -> int {
    for (size_t i = 0; i < kernel->memories().size(); ++i)
      if (kernel->memories()[i] == m) return static_cast<int>(i);
    return -1;
  };
  bool unknown = false;
  walk(kernel, [&](const Node* n) {
    if (n->op != Op::load && n->op != Op::store && n->op != Op::atomic) return;
    if (n->operand(0)->op == Op::group_buffer) return;  // the workgroup's own memory
    int s = slot(n->operand(0));
    if (s < 0) { unknown = true; return; }
    if (n->op != Op::store) a.reads[static_cast<size_t>(s)] = 1;
    if (n->op != Op::load) a.writes[static_cast<size_t>(s)] = 1;
  });
  if (unknown) a.reads.clear(), a.writes.clear();  // conservative: every memory both ways
  return a;
}

std::vector<LoopBound> find_loops(const Node* kernel) {
  std::vector<LoopBound> loops;
  std::function<void(const Node*, int)> run = [&](const Node* scope, int parent) {
    for (const Node* c = scope->first_child; c; c = c->next) {
      int me = parent;
      if (c->op == Op::loop) {
        LoopBound l;
        l.parent = parent;
        for (int i = 0; i < 3; ++i) {
          const Node* o = c->operand(i);
          if (o->op == Op::constant) { l.value[i] = o->i(); continue; }
          l.param[i] = -2;  // thread-dependent
          for (size_t j = 0; j < kernel->params().size(); ++j)
            if (kernel->params()[j] == o) l.param[i] = static_cast<int>(j);
        }
        loops.push_back(l);
        me = static_cast<int>(loops.size()) - 1;
      }
      if (c->first_child) run(c, me);
    }
  };
  run(kernel, -1);
  return loops;
}

int64_t loop_iterations(const std::vector<LoopBound>& loops, const std::vector<uint32_t>& params) {
  std::vector<int64_t> inner(loops.size(), 0);
  int64_t total = 0;
  for (size_t i = loops.size(); i-- > 0;) {  // children come after their parent
    const LoopBound& l = loops[i];
    int64_t v[3];
    bool known = true, constant = true;
    for (int j = 0; j < 3; ++j) {
      if (l.param[j] == -1) { v[j] = l.value[j]; continue; }
      constant = false;
      if (l.param[j] < 0 || static_cast<size_t>(l.param[j]) >= params.size()) { known = false; break; }
      v[j] = w2i(params[static_cast<size_t>(l.param[j])]);
    }
    int64_t trip = 1;
    if (known) {
      const int64_t b = v[0], e = v[1], s = v[2];
      trip = s > 0 ? std::max<int64_t>(0, (e - b + s - 1) / s) : s < 0 ? std::max<int64_t>(0, (b - e - s - 1) / -s) : 0;
    }
    const bool unrolled = known && constant && trip <= 32;
    const int64_t iters = trip * ((unrolled ? 0 : 1) + inner[i]);
    if (l.parent >= 0) inner[static_cast<size_t>(l.parent)] += iters; else total += iters;
  }
  return total;
}

bool has_float_atomic_add(const Node* scope) {
  for (const Node* c = scope->first_child; c; c = c->next) {
    if (c->op == Op::atomic && c->dtype == DType::f32 && c->kind == static_cast<uint8_t>(AtomicKind::add)) return true;
    if (c->first_child && has_float_atomic_add(c)) return true;
  }
  return false;
}

std::vector<int> written_inputs(const Program& p) {
  std::vector<int> written;
  p.for_each([&](Node* n) {
    if ((n->op == Op::store || n->op == Op::atomic) && n->operand(0)->op == Op::input)
      written.push_back(n->operand(0)->index);
  });
  return written;
}

}  // namespace ember

#include "core/passes/split_host.h"

#include <algorithm>

#include "core/passes/pass_util.h"

namespace ember {

bool split_host(Program& p) {
  bool changed = false;
  std::vector<Node*> kernels = kernels_of(p);
  for (Node* k : kernels) {
    std::vector<Node*> mems, params;
    auto add = [](std::vector<Node*>& v, Node* x) {
      if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
    };
    for (Node* d : k->shape)
      if (d->op != Op::constant) add(params, d);
    walk_subtree(k, [&](Node* x) {
      if (x == k) return;
      for (Node* o : x->operands) {
        if (o->inside(k) || o->op == Op::constant) continue;
        if (o->is_memory()) {
          add(mems, o);
          continue;
        }
        EMBER_INTERNAL_ASSERT(o->shape.empty() && o->enclosing_kernel() == nullptr,
                              "kernel " << k->index << " reads a non-scalar value from outside: " << op_name(o->op));
        add(params, o);
      }
    });
    if (mems != k->memories() || params != k->params()) changed = true;
    k->memories_mut() = mems;
    k->params_mut() = params;
  }
  return changed;
}

}  // namespace ember

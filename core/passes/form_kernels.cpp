#include "core/passes/form_kernels.h"

#include "core/passes/pass_util.h"

namespace ember {

bool form_kernels(Program& p) {
  bool changed = false;
  std::vector<Node*> kernels = kernels_of(p);
  int next = 0;
  for (Node* k : kernels) {
    if (!k->first_child) {
      p.erase(k);
      changed = true;
      continue;
    }
    if (k->index != next) changed = true;
    k->index = next++;
    std::string name = p.name + "_k" + std::to_string(k->index);
    if (k->name != name) {
      k->name = name;
      changed = true;
    }
  }
  p.next_kernel_id = next;
  return changed;
}

}  // namespace ember

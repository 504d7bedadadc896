// Workgroup kernels in the reference interpreter (core/IR.md, "Workgroups"). Groups run one
// after another; inside a group, the code between two barriers (a phase) runs for every thread
// of the group, in row-major order, before the next phase starts. Each thread keeps its own
// scalar words across phases; group buffers are allocated (zeroed) per group. Threads outside
// the kernel's shape (the last groups of a shape that the group does not divide) run no user
// code but take part in every barrier. Scopes holding a barrier run once per group, driven by
// the values of the group's first thread (always inside the shape), which are uniform.
#include "core/analysis/uniformity.h"
#include "core/interp/machine.h"

namespace ember::interp_detail {

struct GroupState {
  std::unordered_set<const Node*> sync;       // barriers and the scopes holding one
  std::vector<int64_t> size;                  // the group shape
  int64_t threads = 1;                        // threads per group
  std::vector<std::vector<uint32_t>> words;   // each thread's words between phases
};

void Machine::alloc_group_buffer(const Node* n) {
  std::vector<int64_t> dims;
  eval_dims(n->shape, dims);
  HostVal& h = hv(n);
  h.t = HostTensor::alloc(n->dtype, dims, true);
  h.tensor = true;
}

void Machine::run_group_kernel(const Node* k) {
  const int rank = k->rank();
  GroupState g;
  g.sync = barrier_holders(k);
  std::vector<int64_t> groups(static_cast<size_t>(rank));
  int64_t total = 1;
  for (int a = 0; a < rank; ++a) {
    const size_t ua = static_cast<size_t>(a);
    g.size.push_back(k->group[ua]);
    g.threads *= k->group[ua];
    groups[ua] = dev_dims_[ua] == 0 ? 0 : (dev_dims_[ua] - 1) / k->group[ua] + 1;
    total *= groups[ua];
  }
  g.words.assign(static_cast<size_t>(g.threads), words_);
  coords_.assign(static_cast<size_t>(rank), 0);
  local_.assign(static_cast<size_t>(rank), 0);
  group_.assign(static_cast<size_t>(rank), 0);
  cur_dev_ = k;
  for (int64_t gi = 0; gi < total; ++gi) {
    for (const Node* c = k->first_child; c; c = c->next)
      if (c->op == Op::group_buffer) alloc_group_buffer(c);
    run_group_block(k->first_child, g);
    for (int a = rank - 1; a >= 0; --a) {
      const size_t ua = static_cast<size_t>(a);
      if (++group_[ua] < groups[ua]) break;
      group_[ua] = 0;
    }
  }
  cur_dev_ = nullptr;
  flat_ = 0;
  local_.clear();
  group_.clear();
}

void Machine::run_group_phase(const Node* first, const Node* end, GroupState& g) {
  const size_t rank = g.size.size();
  std::fill(local_.begin(), local_.end(), 0);
  for (int64_t t = 0; t < g.threads; ++t) {
    bool inside = true;
    flat_ = 0;
    for (size_t a = 0; a < rank; ++a) {
      coords_[a] = group_[a] * g.size[a] + local_[a];
      inside = inside && coords_[a] < dev_dims_[a];
      flat_ = flat_ * dev_dims_[a] + coords_[a];
    }
    if (inside) {
      std::swap(words_, g.words[static_cast<size_t>(t)]);
      for (const Node* n = first; n != end; n = n->next) {
        if (n->op == Op::group_buffer) continue;  // allocated per group
        Flow f = exec_dev(n);
        EMBER_INTERNAL_ASSERT(f == Flow::normal, "break/continue leaves a phase of workgroup kernel %" << cur_dev_->id);
      }
      std::swap(words_, g.words[static_cast<size_t>(t)]);
    }
    for (size_t a = rank; a-- > 0;) {
      if (++local_[a] < g.size[a]) break;
      local_[a] = 0;
    }
  }
}

void Machine::run_group_block(const Node* first, GroupState& g) {
  // The group's first thread decides uniform control flow; it is always inside the shape.
  auto uniform_word = [&](const Node* o) {
    std::swap(words_, g.words[0]);
    uint32_t w = rd(o);
    std::swap(words_, g.words[0]);
    return w;
  };
  for (const Node* n = first; n;) {
    if (!g.sync.count(n)) {
      const Node* end = n;
      while (end && !g.sync.count(end)) end = end->next;
      run_group_phase(n, end, g);
      n = end;
      continue;
    }
    switch (n->op) {
      case Op::barrier: case Op::else_: break;  // a barrier ends a phase; an else runs with its if
      case Op::loop: {
        const int64_t b = w2i(uniform_word(n->operand(0))), e = w2i(uniform_word(n->operand(1)));
        const int64_t s = w2i(uniform_word(n->operand(2)));
        EMBER_INTERNAL_ASSERT(s != 0, "loop %" << n->id << " has step 0");
        for (int64_t k = b; s > 0 ? k < e : k > e; k += s) {
          for (std::vector<uint32_t>& w : g.words) w[static_cast<size_t>(slot(n))] = i2w(static_cast<int32_t>(k));
          run_group_block(n->first_child, g);
        }
        break;
      }
      case Op::if_: {
        if (uniform_word(n->operand(0)) != 0) run_group_block(n->first_child, g);
        else if (n->next && n->next->op == Op::else_) run_group_block(n->next->first_child, g);
        break;
      }
      default:
        EMBER_INTERNAL_ASSERT(false, op_name(n->op) << " %" << n->id << " holds a barrier but is not a loop or an if");
    }
    n = n->next;
  }
}

}  // namespace ember::interp_detail

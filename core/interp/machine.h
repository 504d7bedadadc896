// Internal to the reference interpreter (interp.cpp: setup and host level; device.cpp: device
// scopes). Not part of the public API.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/interp/interp.h"
#include "core/ir/eval.h"
#include "core/ir/shape.h"

namespace ember::interp_detail {

// How a block of children finished: normally, or by break_/continue_ of the innermost loop.
enum class Flow : uint8_t { normal, brk, cont };

// The host-level value of a node: a scalar word, or a dense tensor (non-scalar values, vars of
// non-empty shape, memories of any shape). Non-memory tensors are copy-on-write: storage shared
// with an output (owner.use_count() > 1) is never written in place.
struct HostVal {
  HostTensor t;
  uint32_t w = 0;
  bool tensor = false;
};

// Row-major words that a load/store/atomic addresses.
struct MemView {
  uint32_t* data = nullptr;
  const int64_t* shape = nullptr;
  int rank = 0;
  int64_t size = 0;
};

// Operands of a device scope that are defined outside it (checked once per dispatch).
struct ScopeInfo {
  std::vector<const Node*> reads;    // values read at the thread index
  std::vector<const Node*> writes;   // host vars set / non-memory values stored into
};

inline int64_t index_value(uint32_t w, DType t) {
  return t == DType::u32 ? static_cast<int64_t>(w) : static_cast<int64_t>(w2i(w));
}

std::string tuple_str(const int64_t* s, int rank);

// Row-major offset of a load/store/atomic into `m`; `word(k)` yields the word of operand k.
template <class Word>
int64_t mem_offset(const Node* n, const MemView& m, Word&& word) {
  const int first = n->first_index_operand();
  const int nidx = n->num_operands() - first;
  int64_t off;
  if (n->flat) {
    EMBER_INTERNAL_ASSERT(nidx == 1, op_name(n->op) << " %" << n->id << ": a flat access takes one index");
    off = apply_index_mode(n->mode, index_value(word(first), n->operand(first)->dtype), m.size);
  } else {
    EMBER_INTERNAL_ASSERT(nidx == m.rank, op_name(n->op) << " %" << n->id << ": " << nidx
                                                           << " indices into a memory of rank " << m.rank);
    off = 0;
    for (int k = 0; k < nidx; ++k) {
      const Node* ix = n->operand(first + k);
      int64_t d = m.shape[k];
      off = off * d + apply_index_mode(n->mode, index_value(word(first + k), ix->dtype), d);
    }
  }
  EMBER_INTERNAL_ASSERT(off >= 0 && off < m.size, op_name(n->op) << " %" << n->id << " (mode "
                                                                 << index_mode_name(n->mode) << ") out of bounds: offset "
                                                                 << off << " in a memory of shape "
                                                                 << tuple_str(m.shape, m.rank));
  return off;
}

struct GroupState;  // group.cpp

class Machine {
 public:
  Machine(const Program& p, const std::vector<ArgValue>& args, KernelRunner* runner);
  std::vector<HostTensor> run();
  int64_t tape_bytes() const { return tape_bytes_; }

 private:
  int64_t tape_bytes_ = 0;
  int slot(const Node* n) const { return slot_[static_cast<size_t>(n->id)]; }
  HostVal& hv(const Node* n) { return host_[static_cast<size_t>(slot(n))]; }
  const Node* dev(const Node* n) const { return dev_[static_cast<size_t>(slot(n))]; }

  // Setup.
  void number(const Node* n);
  void classify(const Node* scope, const Node* cur);
  void require_known(const Node* user, const Node* n) const;

  // Host level (interp.cpp).
  Flow run_host_block(const Node* first);
  Flow exec_host(const Node* n);
  void eval_dims(const Shape& s, std::vector<int64_t>& out);
  void check_static_sizes(const std::vector<const Node*>& order) const;
  [[noreturn]] void too_large(const Node* n, const Shape& s, const std::vector<int64_t>& dims) const;
  uint32_t host_scalar(const Node* o);
  void stream(const Node* o, const std::vector<int64_t>& dims, const uint32_t*& ptr, int64_t& stride);
  void prepare(HostVal& h, DType t, const std::vector<int64_t>& dims);
  void make_unique(const Node* n);
  MemView view(const Node* mem);
  void host_elementwise(const Node* n);
  void host_index(const Node* n);
  void host_access(const Node* n);
  void host_reduce(const Node* n);
  void host_scan(const Node* n);
  void host_var(const Node* n, bool is_set);
  void host_output(const Node* n);

  // Device scopes (device.cpp).
  void run_device(const Node* d);
  const ScopeInfo& scope_info(const Node* d);
  Flow run_dev_block(const Node* first);
  Flow exec_dev(const Node* n);
  uint32_t rd(const Node* o) const {
    const size_t s = static_cast<size_t>(slot(o));
    if (dev_[s] == cur_dev_) return words_[s];
    const HostVal& h = host_[s];
    if (!h.tensor) return h.w;
    return h.t.data[h.t.shape.empty() ? 0 : flat_];
  }
  uint32_t& wr(const Node* n) { return words_[static_cast<size_t>(slot(n))]; }

  // Workgroup kernels (group.cpp): each group runs phase by phase (the code between barriers),
  // every thread of the group finishing a phase before any starts the next.
  void run_group_kernel(const Node* k);
  void run_group_block(const Node* first, GroupState& g);
  void run_group_phase(const Node* first, const Node* end, GroupState& g);
  void alloc_group_buffer(const Node* n);

  const Program& p_;
  KernelRunner* runner_;
  std::vector<int64_t> dim_values_;

  std::vector<int> slot_;               // node id -> dense slot (-1: not in the program)
  std::vector<const Node*> dev_;        // slot -> device scope root it runs in (null: host)
  std::vector<HostVal> host_;           // slot -> host value
  std::vector<uint32_t> words_;         // slot -> per-thread scalar inside the running device scope

  std::vector<HostTensor> outputs_;
  std::vector<bool> output_set_;

  // Device scope state.
  const Node* cur_dev_ = nullptr;
  int64_t flat_ = 0;                     // row-major thread index
  std::vector<int64_t> coords_;          // thread index per axis
  std::vector<int64_t> dev_dims_;
  std::unordered_map<const Node*, ScopeInfo> scopes_;
  std::vector<int64_t> local_, group_;   // local_index / group_index of the running thread

  std::vector<int64_t> dims_;            // scratch for host-level shapes
};

}  // namespace ember::interp_detail

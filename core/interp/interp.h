// The reference interpreter: runs a program at any pipeline stage on the host. It is the oracle
// every pass and backend is tested against, and (with a KernelRunner) the host-plan executor of
// the runtime: kernels are then handed to the runner instead of being interpreted.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/ir/node.h"

namespace ember {

// The most elements one tensor (an argument, an allocation, a kernel's index space) may have:
// flat indices and dimensions are 32-bit. A larger shape is an ember::ShapeError naming the
// size and this limit, raised before anything is allocated or run.
constexpr int64_t kMaxTensorElements = 2147483647;  // 2^31 - 1
// The elements of `shape`, saturated at kMaxTensorElements + 1 (never overflows).
int64_t elements_capped(const std::vector<int64_t>& shape);

// A dense row-major array of 32-bit words on the host. `data` may point into memory owned
// elsewhere (a NumPy array, a device mapping); `owner` keeps it alive.
struct HostTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint32_t* data = nullptr;
  std::shared_ptr<void> owner;

  int64_t size() const;
  static HostTensor alloc(DType t, std::vector<int64_t> shape, bool zero = true);
  static HostTensor scalar(DType t, uint32_t word);
};

// One call argument, by position: a tensor for `input` nodes, a word for `scalar_arg` nodes.
struct ArgValue {
  HostTensor tensor;
  uint32_t word = 0;
  bool is_tensor = false;
  static ArgValue of_tensor(HostTensor t) { ArgValue a; a.tensor = std::move(t); a.is_tensor = true; return a; }
  static ArgValue of_word(uint32_t w) { ArgValue a; a.word = w; return a; }
};

// Checks arguments against the program's annotations (count, shape, symbolic dims, dtype) and
// returns the value of every shape_arg (indexed by Node::index). Throws ShapeError/TypeError
// naming the argument, the expected and the actual.
std::vector<int64_t> bind_arguments(const Program& p, const std::vector<ArgValue>& args);

// Runs kernel nodes for the runtime; the interpreter calls it instead of interpreting a kernel.
class KernelRunner {
 public:
  virtual ~KernelRunner() = default;
  // `memories[i]` is the storage of kernel->memories[i]; `params[i]` the word of kernel->params[i].
  virtual void run_kernel(const Node* kernel, const std::vector<HostTensor*>& memories,
                          const std::vector<uint32_t>& params, const std::vector<int64_t>& dims) = 0;

  // Device memory (the defaults keep today's host memory; a GPU runner overrides them).
  // Storage for a `buffer` the host plan allocates, zero-filled.
  virtual HostTensor allocate(DType t, const std::vector<int64_t>& shape) { return HostTensor::alloc(t, shape, true); }
  // A tensor argument as kernels will use it: the tensor itself, or device memory holding it
  // (a copy, or the tensor when it already is such memory).
  virtual HostTensor bind_input(const Node* arg, const HostTensor& t) { return t; }
  // Called before the host reads or writes tensor memory: kernels may still be queued.
  virtual void synchronize() {}
  // Bracket one interpret() call; end_run(false) when the run throws. A device runner waits
  // for its kernels in end_run and writes inputs the program changed back to the caller's memory.
  virtual void begin_run() {}
  virtual void end_run(bool ok) {}
};

// What one run did, for CompiledProgram::stats.
struct RunStats {
  int64_t tape_bytes = 0;  // autodiff tapes (buffers named "tape") allocated by the run
};

// The ShapeErrors of a size evaluated at run time, shared by the interpreter and the runtime's
// plan executor so both report it alike: `n` of shape `s` = `dims` has too many elements; the
// dimension `d` evaluated to the negative `v`.
[[noreturn]] void throw_too_large(const Node* n, const std::vector<Node*>& s, const std::vector<int64_t>& dims);
[[noreturn]] void throw_negative_dim(const Node* d, int64_t v);

// Runs `p` with the arguments; returns one tensor per output slot (scalars as 0-d tensors).
std::vector<HostTensor> interpret(const Program& p, const std::vector<ArgValue>& args,
                                  KernelRunner* runner = nullptr, RunStats* stats = nullptr);

}  // namespace ember

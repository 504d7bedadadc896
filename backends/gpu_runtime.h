// What the Vulkan and OpenGL runtimes share around their own API calls: the process-wide context
// created once, the EMBER_DEBUG=time / EMBER_LOG=info switches of Backend::compile, excerpts of a
// driver's compiler log, the checks before a dispatch (its kernel, grid size, loop limit), which
// buffers need a barrier before the next dispatch, and the inputs a run writes back to the caller.
#pragma once
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/gpu_kernel.h"
#include "core/support/env.h"
#include "core/support/log.h"

namespace ember {

// The process-wide context of a backend: made by `create` on first use and never destroyed
// (tensors held by Python may outlive every static). A failure is kept, not retried: every call
// throws BackendError with its reason.
template <class Context>
Context& process_context(void (*create)(Context&)) {
  struct Holder {
    std::once_flag once;
    Context* ctx = nullptr;
    std::string error;
  };
  static Holder* h = new Holder;  // never destroyed
  std::call_once(h->once, [&] {
    auto* c = new Context;  // never destroyed once made
    try {
      create(*c);
      h->ctx = c;
    } catch (const std::exception& e) {
      h->error = e.what();
      delete c;  // a backend that could not start (no driver) keeps only its reason
    }
  });
  if (!h->ctx) throw BackendError(h->error);
  return *h->ctx;
}

// "" when `context` returns, else the reason it threw (never throws).
template <class F>
std::string unavailable_reason_of(F&& context) {
  try {
    context();
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// EMBER_DEBUG contains "time": per-shader times on stderr.
bool debug_time();
// Milliseconds since `t`.
double ms_since(std::chrono::steady_clock::time_point t);
// The info-level log line of a compiled program (core/support/log.h: EMBER_LOG=info or Python's
// `ember` logger at INFO).
void log_compile(const Program& p, size_t kernels, const CompileInfo& info, const std::string& device);
// The first `n` lines of a compiler's log ("..." after them when there are more).
std::string first_lines(const std::string& text, int n);

// The compiled form of `kernel` in a runner's `kernels` (by kernel index); an internal error when
// it was not compiled for this program or the interpreter passes other memory or param counts.
template <class Compiled>
const Compiled& compiled_kernel(const std::unordered_map<int, Compiled>& kernels, const Node* kernel, size_t memories,
                                size_t params) {
  auto it = kernels.find(kernel->index);
  EMBER_INTERNAL_ASSERT(it != kernels.end(), "kernel #" << kernel->index << " was not compiled for this program");
  EMBER_INTERNAL_ASSERT(memories == kernel->memories().size() && params == kernel->params().size(),
                        "kernel #" << kernel->index << ": got " << memories << " memories and " << params << " params");
  return it->second;
}

// How a dispatch of `threads` runs as groups of `group`: gx x gy groups, `row` threads per grid
// row (dispatches above the device's group-count limit in x become 2-D grids).
struct GpuGrid {
  uint32_t gx = 0, gy = 0, row = 0;
};
// The threads of a dispatch over `dims` (0 when any is empty).
int64_t dispatch_threads(const std::vector<int64_t>& dims);
// Native workgroups: a kernel with a group runs each group as one workgroup of group_threads
// threads (the product of its group shape; 0 for a kernel without a group), so its dispatch is
// whole groups, ceil(dims / group) of them per axis; other kernels run `flat` threads per
// workgroup over the shape. local_size: the threads per workgroup; grouped_threads: the dispatch.
int64_t group_threads(const Node* kernel);
uint32_t local_size(const Node* kernel, int flat);
int64_t grouped_threads(const Node* kernel, const std::vector<int64_t>& dims);
// The words of `kernel`'s group buffers (shared memory per workgroup).
int64_t group_buffer_words(const Node* kernel);
// Throws BackendError naming the kernel, the size and the limit when `kernel`'s group has more
// threads than `max_invocations` (or than `max_x`, the most along local_size_x) or its group
// buffers more bytes than `max_shared_bytes` of `device`. $EMBER_GPU_MAX_GROUP_THREADS lowers the
// thread limit (tests use it: the tracer already caps groups at the 1024 most devices allow).
void check_workgroup_limits(const Node* kernel, int64_t max_invocations, int64_t max_x, int64_t max_shared_bytes,
                            const std::string& device);
// Throws BackendError when `threads` exceed 2^31 - 1 or the grid exceeds max_x x max_y groups.
// `api` names the backend in the message ("Vulkan"), `device` the device.
GpuGrid dispatch_grid(const Node* kernel, int64_t threads, uint32_t group, uint64_t max_x, uint64_t max_y,
                      const char* api, const std::string& device);
// Throws BackendError when a thread of `kernel` would run more loop iterations than the
// driver's `limit` (Context::loop_limit; 0: none) with these params.
void check_loop_limit(const Node* kernel, const std::vector<LoopBound>& loops, const std::vector<uint32_t>& params,
                      int64_t limit, const std::string& device);

// The buffers (`Key`: the API's handle) read and written by the dispatches since the last
// barrier: a dispatch that reads or writes a buffer an earlier one wrote, or writes one an earlier
// one read (RAW, WAW, WAR), needs a barrier first.
template <class Key>
class DispatchHazards {
 public:
  // Whether slots [0, n) of a dispatch, bound to `keys` and accessed as `a` says, conflict.
  bool conflicts(const MemoryAccess& a, const std::vector<Key>& keys, size_t n) const {
    for (size_t i = 0; i < n; ++i) {
      const bool w = a.writes_slot(i), r = a.reads_slot(i);
      if ((w && (reads_.count(keys[i]) || writes_.count(keys[i]))) || (r && writes_.count(keys[i]))) return true;
    }
    return false;
  }
  void add(const MemoryAccess& a, const std::vector<Key>& keys, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (a.writes_slot(i)) writes_.insert(keys[i]);
      if (a.reads_slot(i)) reads_.insert(keys[i]);
    }
  }
  void clear() {
    reads_.clear();
    writes_.clear();
  }

 private:
  std::unordered_set<Key> reads_, writes_;
};

// The inputs a program stores into (argument positions): their device copies are written back
// to the caller's memory after a successful run.
class WrittenInputs {
 public:
  explicit WrittenInputs(const std::vector<int>& positions) : written_(positions.begin(), positions.end()) {}
  // Fills `device` (a fresh device tensor) from the caller's `t` for input `arg` and returns it.
  HostTensor bind(const Node* arg, const HostTensor& t, HostTensor device);
  // Copies the written inputs back to the callers' tensors (when `ok`) and forgets them.
  void finish(bool ok);

 private:
  std::unordered_set<int> written_;
  std::vector<std::pair<HostTensor, HostTensor>> copy_back_;  // (caller's tensor, device copy)
};

}  // namespace ember

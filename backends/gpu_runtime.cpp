// Runtime pieces shared by the Vulkan and OpenGL backends (gpu_runtime.h): debug switches and
// the log line, compiler-log excerpts, dispatch checks, written-back inputs.
#include "backends/gpu_runtime.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/ir/shape.h"
#include "core/support/env.h"
#include "core/support/log.h"

namespace ember {

bool debug_time() { return env_has("EMBER_DEBUG", "time"); }

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

void log_compile(const Program& p, size_t kernels, const CompileInfo& info, const std::string& device) {
  if (!log_enabled(LogLevel::info)) return;
  char line[160];
  std::snprintf(line, sizeof line, ": %zu kernels (%d distinct, %d compiled), compile %.1f ms (cache %s) on ", kernels,
                info.distinct_kernels, info.compiled_kernels, info.codegen_ms + info.compile_ms,
                info.cache_hit ? "hit" : "miss");
  log_message(LogLevel::info, p.name + line + device);
}

std::string first_lines(const std::string& text, int n) {
  std::string out;
  size_t pos = 0;
  for (int i = 0; i < n && pos < text.size(); ++i) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    out += text.substr(pos, e - pos) + "\n";
    pos = e + 1;
  }
  if (pos < text.size()) out += "...\n";
  return out;
}

int64_t dispatch_threads(const std::vector<int64_t>& dims) {
  int64_t threads = 1;
  for (int64_t d : dims) threads *= d > 0 ? d : 0;
  return threads;
}

int64_t group_threads(const Node* kernel) {
  if (kernel->group.empty()) return 0;
  int64_t t = 1;
  for (int g : kernel->group) t *= g;
  return t;
}

uint32_t local_size(const Node* kernel, int flat) {
  const int64_t t = group_threads(kernel);
  return static_cast<uint32_t>(t > 0 ? t : flat);
}

int64_t grouped_threads(const Node* kernel, const std::vector<int64_t>& dims) {
  if (kernel->group.empty() || dims.size() != kernel->group.size()) return dispatch_threads(dims);
  int64_t groups = 1;
  for (size_t a = 0; a < dims.size(); ++a) {
    if (dims[a] <= 0) return 0;
    groups *= (dims[a] + kernel->group[a] - 1) / kernel->group[a];
  }
  return groups * group_threads(kernel);
}

int64_t group_buffer_words(const Node* kernel) {
  int64_t words = 0;
  for (const Node* c = kernel->first_child; c; c = c->next)
    if (c->op == Op::group_buffer) words += const_size(c->shape);
  return words;
}

void check_workgroup_limits(const Node* kernel, int64_t max_invocations, int64_t max_x, int64_t max_shared_bytes,
                            const std::string& device) {
  const int64_t threads = group_threads(kernel);
  if (threads == 0) return;
  std::string group;
  for (int g : kernel->group) group += (group.empty() ? "" : ", ") + std::to_string(g);
  const std::string name = "ember: kernel #" + std::to_string(kernel->index) +
                           (kernel->name.empty() ? "" : " (" + kernel->name + ")");
  int64_t limit = std::min(max_invocations, max_x);
  if (const char* e = std::getenv("EMBER_GPU_MAX_GROUP_THREADS"); e && std::atoll(e) >= 1)
    limit = std::min<int64_t>(limit, std::atoll(e));
  if (threads > limit)
    throw BackendError(name + " has workgroups of " + std::to_string(threads) + " threads (group=(" + group + ")); " +
                       device + " runs at most " + std::to_string(limit) + " threads per workgroup");
  const int64_t bytes = group_buffer_words(kernel) * 4;
  if (bytes > max_shared_bytes)
    throw BackendError(name + " has group buffers of " + std::to_string(bytes) + " bytes per workgroup; " + device +
                       " has at most " + std::to_string(max_shared_bytes) + " bytes of shared memory per workgroup");
}

GpuGrid dispatch_grid(const Node* kernel, int64_t threads, uint32_t group, uint64_t max_x, uint64_t max_y,
                      const char* api, const std::string& device) {
  if (threads > INT32_MAX)
    throw BackendError("ember: kernel #" + std::to_string(kernel->index) + " runs " + std::to_string(threads) +
                       " threads; the " + api + " backend dispatches at most 2^31 - 1 per kernel");
  const uint64_t groups = (static_cast<uint64_t>(threads) + group - 1) / group;
  GpuGrid g;
  g.gx = static_cast<uint32_t>(std::min<uint64_t>(groups, max_x));
  g.gy = static_cast<uint32_t>((groups + g.gx - 1) / g.gx);
  g.row = g.gx * group;
  if (g.gy > max_y)
    throw BackendError("ember: kernel #" + std::to_string(kernel->index) + " needs a grid of " + std::to_string(g.gx) +
                       " x " + std::to_string(g.gy) + " groups, more than " + device + " allows");
  return g;
}

void check_loop_limit(const Node* kernel, const std::vector<LoopBound>& loops, const std::vector<uint32_t>& params,
                      int64_t limit, const std::string& device) {
  if (limit <= 0 || loops.empty()) return;
  const int64_t iters = loop_iterations(loops, params);
  if (iters > limit)
    throw BackendError("ember: kernel #" + std::to_string(kernel->index) + " runs about " + std::to_string(iters) +
                       " loop iterations per thread; " + device + " stops every loop of a shader after " +
                       std::to_string(limit) + " in total and would return wrong results (use the cpu "
                       "backend, or a GPU)");
}

HostTensor WrittenInputs::bind(const Node* arg, const HostTensor& t, HostTensor device) {
  if (t.size() > 0) std::memcpy(device.data, t.data, static_cast<size_t>(t.size()) * 4);
  if (written_.count(arg->index)) copy_back_.emplace_back(t, device);
  return device;
}

void WrittenInputs::finish(bool ok) {
  if (ok)
    for (auto& [caller, bound] : copy_back_)
      std::memcpy(caller.data, bound.data, static_cast<size_t>(caller.size()) * 4);
  copy_back_.clear();
}

}  // namespace ember

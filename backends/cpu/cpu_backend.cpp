// The CPU backend: kernels in the cpp dialect, compiled through the compile cache and called
// through their C ABI by a KernelRunner (the interpreter runs the host plan). Kernels with equal
// bodies (kernel_signature.h) are printed and compiled once and share one function; the
// missing ones are compiled concurrently, one translation unit per job (cpu_compile.cpp).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "backends/cpu/cpu.h"
#include "codegen/c_printer.h"
#include "core/support/log.h"

namespace ember {

namespace {

class CpuRunner : public KernelRunner {
 public:
  explicit CpuRunner(std::unordered_map<int, CpuKernel> fns) : fns_(std::move(fns)) {}

  void run_kernel(const Node* kernel, const std::vector<HostTensor*>& memories, const std::vector<uint32_t>& params,
                  const std::vector<int64_t>& dims) override {
    auto it = fns_.find(kernel->index);
    EMBER_INTERNAL_ASSERT(it != fns_.end(), "kernel #" << kernel->index << " was not compiled for this program");
    EMBER_INTERNAL_ASSERT(memories.size() == kernel->memories.size() && params.size() == kernel->params.size(),
                          "kernel #" << kernel->index << ": got " << memories.size() << " memories and "
                                     << params.size() << " params, expected " << kernel->memories.size() << " and "
                                     << kernel->params.size());
    int64_t threads = 1;
    for (int64_t d : dims) threads *= d > 0 ? d : 0;
    if (threads == 0) return;
    uint32_t* small[16];
    std::vector<uint32_t*> large;
    uint32_t** mem = small;
    if (memories.size() > 16) {
      large.resize(memories.size());
      mem = large.data();
    }
    for (size_t i = 0; i < memories.size(); ++i) mem[i] = memories[i]->data;
    it->second.fn(mem, params.data(), 0, threads);
  }

 private:
  std::unordered_map<int, CpuKernel> fns_;  // by kernel id; each keeps its library loaded
};

class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  bool lowers_groups() const override { return true; }
  bool tiles_threads() const override { return true; }

  std::string source(const Program& p) override { return generate_kernels(p, cpp_dialect()); }

  std::unique_ptr<KernelRunner> compile(const Program& p, CompileInfo& info) override {
    CompileTimeline timeline;
    const KernelClasses classes = group_kernels(p);
    const std::vector<DistinctKernel> printed = generate_distinct_kernels(classes, cpp_dialect());
    // Distinct classes print distinct text in practice; equal text is one function all the same.
    std::unordered_map<std::string, size_t> by_text;
    std::vector<const GeneratedKernel*> distinct;
    std::vector<size_t> code_of(printed.size());
    for (size_t c = 0; c < printed.size(); ++c) {
      auto [it, fresh] = by_text.emplace(printed[c].code.source, distinct.size());
      if (fresh) distinct.push_back(&printed[c].code);
      code_of[c] = it->second;
    }
    info.codegen_ms = timeline.now_ms();

    std::vector<CpuKernel> fns = cpu_load_kernels(distinct, info, timeline);
    std::unordered_map<int, CpuKernel> by_kernel;
    for (size_t i = 0; i < classes.kernels.size(); ++i) {
      const Node* k = classes.kernels[i];
      EMBER_INTERNAL_ASSERT(!by_kernel.count(k->index), "two kernels share the id #" << k->index);
      by_kernel[k->index] = fns[code_of[static_cast<size_t>(classes.class_of[i])]];
    }
    if (log_enabled(LogLevel::info)) {
      char line[160];
      std::snprintf(line, sizeof line, ": %zu kernels (%d distinct, %d compiled in %d units), compile %.1f ms (cache %s)",
                    classes.kernels.size(), info.distinct_kernels, info.compiled_kernels, info.translation_units,
                    info.codegen_ms + info.compile_ms, info.cache_hit ? "hit" : "miss");
      log_message(LogLevel::info, p.name + line);
    }
    return std::make_unique<CpuRunner>(std::move(by_kernel));
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace ember

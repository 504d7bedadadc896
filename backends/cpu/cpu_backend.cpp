// The CPU backend: kernels in the cpp dialect, compiled through the compile cache and called
// through their C ABI by a KernelRunner (the interpreter runs the host plan).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "backends/cpu/cpu.h"
#include "codegen/c_printer.h"

namespace ember {

namespace {

class CpuRunner : public KernelRunner {
 public:
  CpuRunner(std::shared_ptr<CpuLibrary> lib, std::unordered_map<int, CpuKernelFn> fns)
      : lib_(std::move(lib)), fns_(std::move(fns)) {}

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
    it->second(mem, params.data(), 0, threads);
  }

 private:
  std::shared_ptr<CpuLibrary> lib_;  // keeps the functions loaded
  std::unordered_map<int, CpuKernelFn> fns_;
};

bool log_info() {
  const char* e = std::getenv("EMBER_LOG");
  return e && std::strcmp(e, "info") == 0;
}

class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  bool lowers_groups() const override { return true; }
  bool tiles_threads() const override { return true; }

  std::string source(const Program& p) override { return generate_kernels(p, cpp_dialect()); }

  std::unique_ptr<KernelRunner> compile(const Program& p, CompileInfo& info) override {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<GeneratedKernel> kernels = generate_kernel_list(p, cpp_dialect());
    std::string text = join_kernels(kernels, cpp_dialect());
    info.codegen_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    std::shared_ptr<CpuLibrary> lib;
    std::unordered_map<int, CpuKernelFn> fns;
    if (kernels.empty()) {
      info.compile_ms = 0;
      info.cache_hit = true;  // nothing to compile
      info.cache_key.clear();
    } else {
      std::vector<std::string> symbols;
      for (const GeneratedKernel& k : kernels) symbols.push_back(k.symbol);
      lib = cpu_load_library(text, symbols, info);
      for (const GeneratedKernel& k : kernels) {
        EMBER_INTERNAL_ASSERT(!fns.count(k.kernel->index), "two kernels share the id #" << k.kernel->index);
        fns[k.kernel->index] = lib->symbols.at(k.symbol);
      }
    }
    if (log_info())
      std::fprintf(stderr, "ember: %s: %zu kernels, compile %.1f ms (cache %s)\n", p.name.c_str(), kernels.size(),
                   info.codegen_ms + info.compile_ms, info.cache_hit ? "hit" : "miss");
    return std::make_unique<CpuRunner>(std::move(lib), std::move(fns));
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace ember

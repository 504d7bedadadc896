// The Vulkan backend: every kernel of the lowered program is printed as its own compute shader
// (glsl dialect for "vulkan", hlsl for "vulkan-hlsl"), compiled to SPIR-V by shaderc through
// the compile cache, and made a pipeline; the returned runner dispatches them while the
// interpreter runs the host plan. EMBER_DEBUG=time prints per-shader times.
#include <chrono>
#include <cstdio>

#include "backends/compile_cache.h"
#include "backends/gpu_runtime.h"
#include "backends/vulkan/vulkan.h"
#include "codegen/c_printer.h"

namespace ember::vk {

namespace {

class VulkanBackend : public Backend {
 public:
  explicit VulkanBackend(Language lang) : lang_(lang) { context(); }  // throws BackendError when no device

  const char* name() const override { return lang_ == Language::hlsl ? "vulkan-hlsl" : "vulkan"; }
  // Workgroups run natively: a group is a workgroup, group buffers its shared memory.
  bool lowers_groups() const override { return false; }

  std::string source(const Program& p) override {
    std::string out;
    for (const Node* k : program_kernels(p)) {
      const Dialect& d = kernel_dialect(lang_, kernel_layout(k, lang_));
      out += (out.empty() ? "" : "\n") + shader_source(generate_kernel(k, d), d);
    }
    return out;
  }

  std::unique_ptr<KernelRunner> compile(const Program& p, CompileInfo& info) override {
    const bool show_time = debug_time();
    std::unordered_map<int, KernelBinary> kernels;
    bool all_hit = true, any_created = false;
    std::string keys;
    info.codegen_ms = info.compile_ms = 0;
    for (const Node* k : program_kernels(p)) {
      auto t0 = std::chrono::steady_clock::now();
      const KernelLayout layout = kernel_layout(k, lang_);
      const Dialect& d = kernel_dialect(lang_, layout);
      const GeneratedKernel g = generate_kernel(k, d);
      const std::string src = shader_source(g, d);
      const std::string entry = lang_ == Language::hlsl ? g.symbol : "main";
      const double gen_ms = ms_since(t0);
      auto t1 = std::chrono::steady_clock::now();
      bool hit = false, created = false;
      auto spirv = compile_spirv(src, lang_, entry, &hit);
      const double spirv_ms = ms_since(t1);
      auto t2 = std::chrono::steady_clock::now();
      const int bindings = static_cast<int>(k->memories.size()) + (layout.params_in_buffer ? 1 : 0);
      const uint32_t push = layout.params_in_buffer ? 0u : static_cast<uint32_t>((k->params.size() + kGpuHeaderWords) * 4);
      KernelBinary kb;
      kb.pipeline = make_pipeline(*spirv, entry, bindings, push, &created);
      kb.params_in_buffer = layout.params_in_buffer;
      kb.access = memory_accesses(k);
      kb.loops = find_loops(k);
      const double pipe_ms = ms_since(t2);
      EMBER_INTERNAL_ASSERT(!kernels.count(k->index), "two kernels share the id #" << k->index);
      kernels.emplace(k->index, std::move(kb));
      info.codegen_ms += gen_ms;
      info.compile_ms += spirv_ms + pipe_ms;
      all_hit &= hit;
      any_created |= created;
      keys += g.symbol + ";";
      if (show_time)
        std::fprintf(stderr, "ember: shader %-22s %s->spirv %8.3f ms (%s), pipeline %8.3f ms%s\n", g.symbol.c_str(),
                     language_name(lang_), spirv_ms, hit ? "cache hit" : "compiled", pipe_ms,
                     created ? "" : " (in memory)");
    }
    if (any_created) {
      auto t = std::chrono::steady_clock::now();
      save_pipeline_cache();
      info.compile_ms += ms_since(t);
    }
    info.cache_hit = all_hit;
    info.cache_key = kernels.empty() ? "" : std::string(name()) + "-" + content_hash(keys);

    // Inputs the program stores into: their device copies are written back after each run.
    std::vector<int> written = written_inputs(p);
    if (log_info()) log_compile(p, kernels.size(), info, context().description);
    return make_runner(std::move(kernels), std::move(written));
  }

 private:
  Language lang_;
};

}  // namespace

std::unique_ptr<Backend> make_backend(Language lang) { return std::make_unique<VulkanBackend>(lang); }

}  // namespace ember::vk

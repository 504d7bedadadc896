// The Vulkan backend: every distinct kernel of the lowered program (kernels with equal bodies,
// kernel_signature.h, share one shader) is printed as its own compute shader (glsl dialect for
// "vulkan", hlsl for "vulkan-hlsl"), compiled to SPIR-V by shaderc through the compile cache, and
// made a pipeline; the returned runner dispatches them while the interpreter runs the host plan.
// Shaders are printed, then compiled and made pipelines, on compile_jobs() threads (shaderc's
// compiler and the device's object creation are thread-safe; the pipeline cache is internally
// synchronized). EMBER_DEBUG=time prints each shader's times and its start and end.
#include <chrono>
#include <cstdio>

#include "backends/compile_cache.h"
#include "backends/compile_jobs.h"
#include "backends/gpu_runtime.h"
#include "backends/gpu_shaders.h"
#include "backends/vulkan/vulkan.h"
#include "codegen/c_printer.h"

namespace ember::vk {

namespace {

// The device as the pipeline sees it (Vulkan does not tell how many threads it keeps in flight).
TargetInfo describe_device(Language lang) {
  const Context& c = context();
  TargetInfo t = gpu_target(lang == Language::hlsl ? "vulkan-hlsl" : "vulkan",
                            lang == Language::hlsl ? TargetLanguage::hlsl : TargetLanguage::glsl, TargetApi::vulkan);
  t.max_workgroup_threads = static_cast<int>(c.props.limits.maxComputeWorkGroupInvocations);
  t.shared_memory_bytes = c.props.limits.maxComputeSharedMemorySize;
  t.float_atomic_add = c.float_atomic_add;
  t.loop_limit = c.loop_limit;
  return t;
}

class VulkanBackend : public Backend {
 public:
  // Throws BackendError when there is no device.
  explicit VulkanBackend(Language lang) : lang_(lang), target_(describe_device(lang)) {}

  const char* name() const override { return lang_ == Language::hlsl ? "vulkan-hlsl" : "vulkan"; }
  // Workgroups run natively: a group is a workgroup, group buffers its shared memory.
  const TargetInfo& target() const override { return target_; }

  std::string source(const Program& p, const CodegenOptions& o) override {
    const KernelClasses classes = group_kernels(p);
    std::string out;
    for (size_t c = 0; c < classes.size(); ++c) {
      const Node* k = classes.representative(c);
      const Dialect& d = kernel_dialect(lang_, kernel_layout(k, lang_, o));
      out += (out.empty() ? "" : "\n") + annotate_shader(shader_source(generate_kernel(k, d), d), classes.members[c], d);
    }
    return out;
  }

  std::unique_ptr<KernelRunner> compile(const Program& p, CompileInfo& info) override {
    info.link.clear();  // no link records: shaders are generated on every compile
    CompileTimeline timeline;
    const KernelClasses classes = group_kernels(p);
    const ShaderSet<KernelLayout> shaders =
        print_shaders<KernelLayout>(classes, [&](const Node* k, PrintedShader<KernelLayout>& pr) {
          pr.layout = kernel_layout(k, lang_, info.codegen);
          const Dialect& d = kernel_dialect(lang_, pr.layout);
          pr.code = generate_kernel(k, d);
          pr.source = shader_source(pr.code, d);
        });
    info.codegen_ms = timeline.now_ms();

    // SPIR-V and pipelines (on the pool).
    struct Built {
      KernelBinary kb;
      bool hit = false, created = false;
    };
    std::vector<Built> built(shaders.size());
    parallel_for(shaders.size(), compile_jobs(), [&](size_t s) {
      const PrintedShader<KernelLayout>& pr = shaders.shader(s);
      const Node* k = classes.representative(shaders.first[s]);
      const std::string entry = lang_ == Language::hlsl ? pr.code.symbol : "main";
      const double t0 = timeline.now_ms();
      Built& b = built[s];
      auto spirv = compile_spirv(pr.source, lang_, entry, &b.hit);
      const double t1 = timeline.now_ms();
      const ParamBlock& block = pr.layout.abi.params;
      const int bindings = static_cast<int>(pr.layout.abi.bindings.size()) + (pr.layout.params_in_buffer() ? 1 : 0);
      const uint32_t push = block.kind == ParamBlockKind::push_constant ? static_cast<uint32_t>(block.size) : 0u;
      b.kb.pipeline = context().denorm_preserve
                          ? make_pipeline(with_denorm_preserve(*spirv), entry, bindings, push, &b.created)
                          : make_pipeline(*spirv, entry, bindings, push, &b.created);
      b.kb.params_in_buffer = pr.layout.params_in_buffer();
      b.kb.access = memory_accesses(k);
      b.kb.loops = find_loops(k);
      const double t2 = timeline.now_ms();
      if (timeline.enabled()) {
        char text[256];
        std::snprintf(text, sizeof text, "shader %-22s %s->spirv %8.3f ms (%s), pipeline %8.3f ms%s",
                      pr.code.symbol.c_str(), language_name(lang_), t1 - t0, b.hit ? "cache hit" : "compiled", t2 - t1,
                      b.created ? "" : " (in memory)");
        timeline.unit(text, t0, t2, shaders.users[s]);
      }
    });
    bool any_created = false;
    int compiled = 0;
    std::vector<KernelBinary> binaries;
    for (const Built& b : built) {
      compiled += b.hit ? 0 : 1;
      any_created |= b.created;
      binaries.push_back(b.kb);
    }
    if (any_created) save_pipeline_cache();
    std::unordered_map<int, KernelBinary> kernels = bind_shaders(classes, shaders, binaries, compiled, name(), info);
    info.compile_ms = timeline.now_ms() - info.codegen_ms;

    // Inputs the program stores into: their device copies are written back after each run.
    std::vector<int> written = written_inputs(p);
    log_compile(p, kernels.size(), info, context().description);
    return make_runner(std::move(kernels), std::move(written));
  }

 private:
  Language lang_;
  TargetInfo target_;
};

}  // namespace

std::unique_ptr<Backend> make_backend(Language lang) { return std::make_unique<VulkanBackend>(lang); }

}  // namespace ember::vk

// The OpenGL backend: every kernel of the lowered program is printed as its own compute shader
// in the glsl dialect's OpenGL 4.5 variant, compiled and linked by the driver (or loaded as a
// program binary from the compile cache), and the returned runner dispatches them while the
// interpreter runs the host plan. EMBER_DEBUG=time prints per-shader times.
#include <chrono>
#include <cstdio>

#include "backends/compile_cache.h"
#include "backends/gpu_runtime.h"
#include "backends/opengl/opengl.h"

namespace ember::gl {

namespace {

class OpenGLBackend : public Backend {
 public:
  OpenGLBackend() { context(); }  // throws BackendError when no context can be created

  const char* name() const override { return "opengl"; }
  // Workgroups run natively, as on Vulkan (the same glsl dialect).
  bool lowers_groups() const override { return false; }

  std::string source(const Program& p) override {
    std::string out;
    for (const Node* k : program_kernels(p)) {
      const KernelLayout layout = kernel_layout(k);
      const Dialect& d = kernel_dialect(layout);
      out += (out.empty() ? "" : "\n") + shader_source(generate_kernel(k, d), d, layout);
    }
    return out;
  }

  std::unique_ptr<KernelRunner> compile(const Program& p, CompileInfo& info) override {
    const bool show_time = debug_time();
    std::unordered_map<int, KernelProgram> kernels;
    bool all_hit = true;
    std::string keys;
    info.codegen_ms = info.compile_ms = 0;
    Scope scope;
    for (const Node* k : program_kernels(p)) {
      auto t0 = std::chrono::steady_clock::now();
      const KernelLayout layout = kernel_layout(k);
      const Dialect& d = kernel_dialect(layout);
      const GeneratedKernel g = generate_kernel(k, d);
      const std::string src = shader_source(g, d, layout);
      const double gen_ms = ms_since(t0);
      auto t1 = std::chrono::steady_clock::now();
      ProgramSource from = ProgramSource::compiled;
      KernelProgram kp;
      kp.program = compile_program(src, &from);
      kp.symbol = g.symbol;
      kp.spill_from = layout.spill_from;
      kp.access = memory_accesses(k);
      kp.loops = find_loops(k);
      const double compile_ms = ms_since(t1);
      EMBER_INTERNAL_ASSERT(!kernels.count(k->index), "two kernels share the id #" << k->index);
      kernels.emplace(k->index, std::move(kp));
      info.codegen_ms += gen_ms;
      info.compile_ms += compile_ms;
      all_hit &= from != ProgramSource::compiled;
      keys += g.symbol + ";";
      if (show_time)
        std::fprintf(stderr, "ember: shader %-22s glsl->program %8.3f ms (%s)\n", g.symbol.c_str(), compile_ms,
                     program_source_name(from));
    }
    info.cache_hit = all_hit;
    info.cache_key = kernels.empty() ? "" : std::string(name()) + "-" + content_hash(keys);
    if (log_info()) log_compile(p, kernels.size(), info, context().description);
    return make_runner(std::move(kernels), written_inputs(p));
  }
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::make_unique<OpenGLBackend>(); }

}  // namespace ember::gl

// The OpenGL backend: every distinct kernel of the lowered program (kernels with equal bodies,
// kernel_signature.h, share one shader) is printed as its own compute shader in the glsl
// dialect's OpenGL 4.5 variant on compile_jobs() threads, then compiled and linked by the driver
// as one batch on the context's thread (in parallel where the driver has
// GL_KHR_parallel_shader_compile; opengl_compile.cpp), or loaded as a program binary from the
// compile cache; the returned runner dispatches them while the interpreter runs the host plan.
// EMBER_DEBUG=time prints each shader's time, start and end.
#include <chrono>
#include <cstdio>

#include "backends/compile_cache.h"
#include "backends/compile_jobs.h"
#include "backends/gpu_runtime.h"
#include "backends/gpu_shaders.h"
#include "backends/opengl/opengl.h"

namespace ember::gl {

namespace {

// The context's device as the pipeline sees it (OpenGL does not tell how many threads it keeps in flight).
TargetInfo describe_device() {
  const Context& c = context();
  TargetInfo t = gpu_target("opengl", TargetLanguage::glsl, TargetApi::opengl);
  t.max_workgroup_threads = c.max_group_invocations;
  t.shared_memory_bytes = c.max_shared_bytes;
  t.float_atomic_add = c.float_atomic_add;
  t.loop_limit = c.loop_limit;
  return t;
}

class OpenGLBackend : public Backend {
 public:
  OpenGLBackend() : target_(describe_device()) {}  // throws BackendError when no context can be created

  const char* name() const override { return "opengl"; }
  // Workgroups run natively, as on Vulkan (the same glsl dialect).
  const TargetInfo& target() const override { return target_; }

  std::string source(const Program& p, const CodegenOptions& o) override {
    const KernelClasses classes = group_kernels(p);
    std::string out;
    for (size_t c = 0; c < classes.size(); ++c) {
      const Node* k = classes.representative(c);
      const KernelLayout layout = kernel_layout(k, o);
      const Dialect& d = kernel_dialect(layout);
      out += (out.empty() ? "" : "\n") +
             annotate_shader(shader_source(generate_kernel(k, d), d, layout), classes.members[c], d);
    }
    return out;
  }

  std::unique_ptr<KernelRunner> compile(const Program& p, CompileInfo& info) override {
    info.link.clear();  // no link records: shaders are generated on every compile
    CompileTimeline timeline;
    const KernelClasses classes = group_kernels(p);
    // Printed on the pool: no GL calls there.
    const ShaderSet<KernelLayout> shaders =
        print_shaders<KernelLayout>(classes, [&](const Node* k, PrintedShader<KernelLayout>& pr) {
          pr.layout = kernel_layout(k, info.codegen);
          pr.code = generate_kernel(k, kernel_dialect(pr.layout));
          pr.source = shader_source(pr.code, kernel_dialect(pr.layout), pr.layout);
        });
    std::vector<std::string> sources;
    for (size_t s = 0; s < shaders.size(); ++s) sources.push_back(shaders.shader(s).source);
    info.codegen_ms = timeline.now_ms();

    Scope scope;
    const std::vector<ProgramBuild> built = compile_programs(sources, timeline);
    std::vector<KernelProgram> programs(shaders.size());
    int compiled = 0;
    for (size_t s = 0; s < shaders.size(); ++s) {
      const PrintedShader<KernelLayout>& pr = shaders.shader(s);
      const Node* k = classes.representative(shaders.first[s]);
      KernelProgram& kp = programs[s];
      kp.program = built[s].program;
      kp.symbol = pr.code.symbol;
      kp.spill_from = pr.layout.spill_from;
      kp.access = memory_accesses(k);
      kp.loops = find_loops(k);
      compiled += built[s].from == ProgramSource::compiled;
      if (timeline.enabled()) {
        char text[256];
        std::snprintf(text, sizeof text, "shader %-22s glsl->program %8.3f ms (%s)", pr.code.symbol.c_str(),
                      built[s].end_ms - built[s].start_ms, program_source_name(built[s].from));
        timeline.unit(text, built[s].start_ms, built[s].end_ms, shaders.users[s]);
      }
    }
    std::unordered_map<int, KernelProgram> kernels = bind_shaders(classes, shaders, programs, compiled, name(), info);
    info.compile_ms = timeline.now_ms() - info.codegen_ms;
    log_compile(p, kernels.size(), info, context().description);
    return make_runner(std::move(kernels), written_inputs(p));
  }

 private:
  TargetInfo target_;
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::make_unique<OpenGLBackend>(); }

}  // namespace ember::gl

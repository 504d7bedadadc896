// The small interface every device backend implements (DESIGN §4): compile a lowered program's
// kernels into something that can dispatch them, and show the generated source. Allocation is
// not here: the KernelRunner a compile returns allocates its buffers (KernelRunner::allocate,
// core/interp/interp.h: host memory by default; the Vulkan and OpenGL runners return tensors over
// their pooled mapped device buffers, backends/gpu_buffer_pool.h), for the host plan or interpreter.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/interp/interp.h"
#include "core/ir/node.h"
#include "core/target/target.h"

namespace ember {

// How a program's kernels are printed (em.compile's options).
struct CodegenOptions {
  // The GPU dialects print the math ops (exp ... tanh, pow) as the language's builtins instead of
  // Ember's float-only functions (codegen/shader_math.h): faster, as exact as the driver makes them.
  bool fast_math = false;
};

// What compiling a program's kernels cost, for prog.stats and the log line.
struct CompileInfo {
  CodegenOptions codegen;  // in
  double codegen_ms = 0;
  double compile_ms = 0;   // compiler or cache lookup + load
  bool cache_hit = false;  // true when nothing was compiled (every kernel came from a cache)
  int distinct_kernels = 0;   // distinct kernel bodies (kernel_signature.h): the code to have
  int compiled_kernels = 0;   // of those, the ones compiled by this call (cache misses)
  int translation_units = 0;  // compiler runs of this call: cpu translation units, GPU shaders
  std::string cache_key;      // identifies the program's set of compiled kernels
  // In: a link record an earlier compile of this same lowered program returned (empty: none);
  // the backend checks it and, when every kernel it names is still cached, binds the kernels
  // without generating code. Out: this compile's record (empty: the backend keeps none). The
  // program cache saves it with the lowered program (compiled_program.cpp).
  std::string link;
  bool linked = false;  // out: the kernels were bound from the link record (no code generation)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // The generated kernel source of `p` (after split_host) in this backend's language.
  virtual std::string source(const Program& p, const CodegenOptions& o) = 0;
  // Compiles (or fetches from the cache) every kernel of `p` and returns their dispatcher.
  virtual std::unique_ptr<KernelRunner> compile(const Program& p, CompileInfo& info) = 0;
  // The device the kernels run on and the lowering the pipeline does for it (core/target/target.h).
  virtual const TargetInfo& target() const = 0;
};

// "cpu" (always available), "vulkan" (GLSL kernels), "vulkan-hlsl" (the same runtime fed HLSL
// kernels), "opengl" (GL 4.5 compute shaders), "auto". Unknown names and backends without a
// device throw ember::BackendError.
std::unique_ptr<Backend> make_backend(const std::string& name);

// The backend "auto" stands for on this machine (DESIGN §4: CUDA, then a GPU Vulkan device,
// then cpu; a CPU Vulkan device such as lavapipe does not count); other names unchanged.
std::string resolve_backend(const std::string& name);
// Backends built into this Ember, whether or not their device is present.
std::vector<std::string> built_backends();
// "" when backend `name` can run here, else why not (never throws).
std::string backend_unavailable(const std::string& name);
// The device backend `name` runs on, in words ("llvmpipe (LLVM 15.0.6, 256 bits) via Vulkan 1.3").
std::string device_info(const std::string& name);

}  // namespace ember

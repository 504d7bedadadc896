// What the compiler knows of the machine a program's kernels run on (issue 40, item 0): the
// language and API its kernels are printed for, the device's parallelism, and the lowering the
// pipeline does for it. A backend describes its device with one (Backend::target()), the export
// targets and prog.source("cuda") with fixed ones; run_pipeline reads it through
// pipeline_options(target) (core/passes/pipeline.h), so no pass asks for a backend by name.
#pragma once
#include <cstdint>
#include <string>

namespace ember {

enum class TargetLanguage { cpp, glsl, hlsl, cuda };
// The API that binds and dispatches the kernels (backends/kernel_abi.h maps API and language to
// a kernel interface).
enum class TargetApi { host, vulkan, opengl, cuda, d3d11 };

struct TargetInfo {
  std::string name;  // the backend ("cpu", "vulkan", ...) or export target ("spirv", ...)
  TargetLanguage language = TargetLanguage::cpp;
  TargetApi api = TargetApi::host;
  bool gpu = false;  // kernels run as workgroups of threads on a device with many cores

  // The device's parallelism; 0 where the API does not tell (or no device: export, NVRTC only).
  int64_t resident_threads = 0;     // threads in flight at once over the whole device
  int max_workgroup_threads = 0;    // threads per workgroup
  int subgroup_size = 0;            // threads that run in lockstep (a SIMD width on the CPU)
  int64_t shared_memory_bytes = 0;  // per workgroup
  bool float_atomic_add = false;    // a native f32 atomic add
  int64_t loop_limit = 0;           // loop iterations one thread may run before the driver ends its loops
  bool fma = false;                 // fused multiply-add instructions

  // The lowering run_pipeline does for it (PipelineOptions of the same names):
  bool lower_groups = false;     // one thread runs a whole workgroup: barriers lowered away
  bool tile_threads = false;     // a thread's independent lanes become SIMD code: register tiles
  bool contract_fma = false;     // a * b + c becomes fma
  int64_t split_reductions = 0;  // few-output reductions of at least this many trips go over workgroups; 0: off
};

// The language's name as prog.source() takes it: "cpp", "glsl", "hlsl", "cuda".
const char* language_name(TargetLanguage l);
// One line for logs and tests: "vulkan: glsl via vulkan, gpu, 1024 threads/workgroup, ...".
std::string describe(const TargetInfo& t);

// The CPU of this process (the cpu backend): groups lowered to loops, register tiles, fma where
// the CPU has it ($EMBER_CPU_FLAGS may take it away: cpu_has_fma decides, passed in).
TargetInfo cpu_target(bool has_fma);
// A GPU target with the parallelism unknown (filled by the backend from its device): native
// workgroups, split reductions.
TargetInfo gpu_target(std::string name, TargetLanguage language, TargetApi api);

}  // namespace ember

// NVRTC, the CUDA runtime compiler (CUDA Toolkit, linked when Ember is built with
// EMBER_WITH_CUDA): CUDA C++ (codegen/dialect_cuda.cpp) to PTX or CUBIN for one architecture.
// It needs no GPU, so the generated CUDA of every kernel is compile-tested everywhere the
// toolkit is; without the toolkit every function but nvrtc_built throws BackendError.
#pragma once
#include <string>
#include <vector>

namespace ember::cuda {

// Whether this Ember was built with NVRTC.
bool nvrtc_built();
// NVRTC's version, "13.0" (part of the CUDA compile cache's key).
std::string nvrtc_version();
// The compute capabilities NVRTC can target, as 80 for sm_80, ascending.
std::vector<int> nvrtc_archs();
// The options every compile passes (the cache key includes them): the architecture (`cubin`:
// real sm_XX machine code, else virtual compute_XX PTX), C++17, no fused multiply-add, no
// warnings about unused values.
std::vector<std::string> nvrtc_options(int arch, bool cubin);

struct NvrtcResult {
  std::string image;  // PTX text (with its terminating NUL) or CUBIN bytes
  std::string log;    // NVRTC's log (warnings), possibly empty
  double ms = 0;      // compile time
};
// Compiles `source` (named `name` in messages) for compute capability `arch` (80 = sm_80).
// Throws CompileError with NVRTC's log when the source does not compile, BackendError for an
// architecture NVRTC does not know or a build without NVRTC.
NvrtcResult nvrtc_compile(const std::string& source, const std::string& name, int arch, bool cubin);

}  // namespace ember::cuda

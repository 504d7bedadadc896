// NVRTC compiles (cuda_nvrtc.h). Built with NVRTC only under EMBER_WITH_CUDA (CMake links
// CUDA::nvrtc); otherwise each entry point says so with a BackendError.
#include "backends/cuda/cuda_nvrtc.h"

#include <chrono>
#include <cstdlib>
#include <memory>

#include "core/ir/error.h"

#ifdef EMBER_WITH_CUDA
#include <nvrtc.h>
#endif

namespace ember::cuda {

#ifdef EMBER_WITH_CUDA

namespace {

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw BackendError(std::string("ember: NVRTC ") + what + " failed: " + nvrtcGetErrorString(r));
}

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};

}  // namespace

bool nvrtc_built() { return true; }

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<int> nvrtc_archs() {
  int n = 0;
  check(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<size_t>(n));
  if (n > 0) check(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  return archs;
}

std::vector<std::string> nvrtc_options(int arch, bool cubin) {
  // Exact IEEE arithmetic without contraction, as the other backends; EMBER_CUDA_FAST_MATH=1 (an
  // experiment, measured by bench/gpu.py) trades it for fused multiply-adds and approximate
  // division and square roots.
  const char* fast = std::getenv("EMBER_CUDA_FAST_MATH");
  const bool fast_math = fast && std::string(fast) == "1";
  return {std::string("--gpu-architecture=") + (cubin ? "sm_" : "compute_") + std::to_string(arch), "-std=c++17",
          fast_math ? "--use_fast_math" : "--fmad=false",
          "--diag-suppress=177,550"};  // unused values: kernels print every param
}

NvrtcResult nvrtc_compile(const std::string& source, const std::string& name, int arch, bool cubin) {
  const std::vector<int> archs = nvrtc_archs();
  bool known = false;
  for (int a : archs) known |= a == arch;
  if (!known) {
    std::string list;
    for (int a : archs) list += (list.empty() ? "" : ", ") + std::to_string(a);
    throw BackendError("ember: NVRTC " + nvrtc_version() + " cannot compile for sm_" + std::to_string(arch) +
                       " (it knows " + list + ")");
  }
  const auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram raw = nullptr;
  check(nvrtcCreateProgram(&raw, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::unique_ptr<_nvrtcProgram, ProgramDeleter> prog(raw);
  const std::vector<std::string> options = nvrtc_options(arch, cubin);
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(raw, static_cast<int>(argv.size()), argv.data());
  NvrtcResult out;
  size_t log_size = 0;
  check(nvrtcGetProgramLogSize(raw, &log_size), "nvrtcGetProgramLogSize");
  out.log.resize(log_size);
  if (log_size) check(nvrtcGetProgramLog(raw, out.log.data()), "nvrtcGetProgramLog");
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (r == NVRTC_ERROR_COMPILATION)
    throw CompileError("ember: NVRTC could not compile " + name + " for sm_" + std::to_string(arch) + ":\n" + out.log);
  check(r, "nvrtcCompileProgram");
  size_t size = 0;
  if (cubin) {
    check(nvrtcGetCUBINSize(raw, &size), "nvrtcGetCUBINSize");
    out.image.resize(size);
    check(nvrtcGetCUBIN(raw, out.image.data()), "nvrtcGetCUBIN");
  } else {
    check(nvrtcGetPTXSize(raw, &size), "nvrtcGetPTXSize");
    out.image.resize(size);
    check(nvrtcGetPTX(raw, out.image.data()), "nvrtcGetPTX");
  }
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

#else  // !EMBER_WITH_CUDA

namespace {
[[noreturn]] void not_built() {
  throw BackendError("ember: this Ember was built without NVRTC (configure with -DEMBER_WITH_CUDA=ON and the CUDA "
                     "Toolkit installed)");
}
}  // namespace

bool nvrtc_built() { return false; }
std::string nvrtc_version() { not_built(); }
std::vector<int> nvrtc_archs() { not_built(); }
std::vector<std::string> nvrtc_options(int, bool) { not_built(); }
NvrtcResult nvrtc_compile(const std::string&, const std::string&, int, bool) { not_built(); }

#endif

}  // namespace ember::cuda

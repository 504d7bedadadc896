// The CPU backend's internals: kernels are C++/OpenMP (codegen cpp dialect) compiled by the
// system compiler into a shared library that is dlopen'ed; memory is host memory, so the host
// plan runs in the interpreter with this backend's KernelRunner.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"

namespace ember {

// The kernel ABI of the cpp dialect: runs threads [begin, end) of the flattened kernel shape.
using CpuKernelFn = void (*)(uint32_t* const* mem, const uint32_t* params, int64_t begin, int64_t end);

// A loaded kernel library; dlclose'd when the last runner and the memory cache drop it.
struct CpuLibrary {
  void* handle = nullptr;
  std::string path;
  std::unordered_map<std::string, CpuKernelFn> symbols;
  ~CpuLibrary();
};

// Compiler command and flags (both are part of the cache key). $EMBER_CXX overrides the
// compiler CMake found.
std::string cpu_compiler();
const std::vector<std::string>& cpu_flags();

// The library for `source` with every symbol in `symbols` resolved: from the memory cache, the
// disk cache or a fresh compile. Fills info.compile_ms, cache_hit and cache_key. Throws
// CompileError when the compiler fails.
std::shared_ptr<CpuLibrary> cpu_load_library(const std::string& source, const std::vector<std::string>& symbols,
                                             CompileInfo& info);

// make_backend("cpu").
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace ember

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
#include "backends/compile_jobs.h"
#include "codegen/c_printer.h"

namespace ember {

// The kernel ABI of the cpp dialect: runs threads [begin, end) of the flattened kernel shape.
using CpuKernelFn = void (*)(uint32_t* const* mem, const uint32_t* params, int64_t begin, int64_t end);

// A loaded kernel library (one translation unit); dlclose'd when the last kernel using it and the
// memory cache drop it.
struct CpuLibrary {
  void* handle = nullptr;
  std::string path;
  // The kernel `symbol` in this library, or null.
  CpuKernelFn find(const std::string& symbol) const;
  ~CpuLibrary();
};

// One compiled kernel: its function and the library holding it (kept loaded while used).
struct CpuKernel {
  std::shared_ptr<CpuLibrary> lib;
  CpuKernelFn fn = nullptr;
};

// Compiler command and flags (both are part of the cache key). $EMBER_CXX overrides the
// compiler CMake found; $EMBER_CPU_FLAGS (words) are appended to the flags, after -march=native,
// so they can take an instruction set away: EMBER_CPU_FLAGS=-mno-avx512f gives the AVX2 kernels
// of an AVX-512 host (bench/common.py's reference builds take the same variable).
std::string cpu_compiler();
std::vector<std::string> cpu_flags();
// Whether the kernels get fused multiply-add instructions (PipelineOptions::contract_fma): the
// host has them (x86: its FMA extension; aarch64: always) and $EMBER_CPU_FLAGS neither removes
// them (-mno-fma, -mno-avx) nor picks another -march.
bool cpu_has_fma();

// The functions of printed kernels (distinct texts, so distinct symbols), one per entry, each
// from the memory cache, the disk cache or a fresh compile; the missing ones are compiled in
// translation units built concurrently (cpu_compile.cpp says how). Fills info.compile_ms,
// cache_hit, compiled_kernels, translation_units and cache_key. Throws CompileError when the
// compiler fails, BackendError when nothing can be written anywhere.
// `keys_out`, if given, receives each kernel's cache key (for cpu_find_kernels).
std::vector<CpuKernel> cpu_load_kernels(const std::vector<const GeneratedKernel*>& kernels, CompileInfo& info,
                                        const CompileTimeline& timeline, std::vector<std::string>* keys_out = nullptr);

// The kernels of cache `keys` (from cpu_load_kernels) with their `symbols`, from the memory or
// disk cache only, without their source: false (and `out` untouched) when any is not there.
// Fills info's cache fields as cpu_load_kernels does (nothing compiled).
bool cpu_find_kernels(const std::vector<std::string>& keys, const std::vector<std::string>& symbols,
                      std::vector<CpuKernel>& out, CompileInfo& info);
// Hash of what every kernel key holds besides the source (compiler, flags, version, CPU): a link
// record written under other build facts is not used.
std::string cpu_build_facts_hash();

// Batch compiling (the differential fuzzer, tests/fuzz/run.py): while deferring is on, the cpu
// backend prints a program's kernels and keeps them instead of compiling them (the program it
// returns runs nothing: calling it is an InternalError); cpu_compile_deferred() then compiles every
// kept kernel not already cached, all programs' kernels together in compile_jobs() units, so that
// the next compile of each of those programs finds its kernels in the cache. Saves the compiler's
// per-unit cost (the prelude) for all but one program of a batch.
void cpu_set_deferred(bool on);
bool cpu_deferred();
// While deferring: keeps copies of `kernels` (those of a program being compiled).
void cpu_defer_kernels(const std::vector<const GeneratedKernel*>& kernels);
// Compiles and caches the kept kernels (compile = false: only forgets them, for a caller that
// wanted the lowered programs alone); returns how many distinct kernels were kept. Throws as
// cpu_load_kernels does (a kernel the compiler rejects fails the whole batch).
int cpu_compile_deferred(bool compile = true);

// make_backend("cpu").
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace ember

// The CPU backend: kernels in the cpp dialect, compiled through the compile cache and called
// through their C ABI by a KernelRunner (the interpreter runs the host plan). Kernels with equal
// bodies (kernel_signature.h) are printed and compiled once and share one function; the
// missing ones are compiled concurrently, one translation unit per job (cpu_compile.cpp).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_threads.h"
#include "codegen/c_printer.h"
#include "core/support/log.h"

namespace ember {

namespace {

class CpuRunner : public KernelRunner {
 public:
  explicit CpuRunner(std::unordered_map<int, CpuKernel> fns) : fns_(std::move(fns)) {}

  void run_kernel(const Node* kernel, const std::vector<HostTensor*>& memories, const std::vector<uint32_t>& params,
                  const std::vector<int64_t>& dims) override {
    auto it = fns_.find(kernel->index);
    EMBER_INTERNAL_ASSERT(it != fns_.end(), "kernel #" << kernel->index << " was not compiled for this program");
    EMBER_INTERNAL_ASSERT(memories.size() == kernel->memories().size() && params.size() == kernel->params().size(),
                          "kernel #" << kernel->index << ": got " << memories.size() << " memories and "
                                     << params.size() << " params, expected " << kernel->memories().size() << " and "
                                     << kernel->params().size());
    int64_t threads = 1;
    for (int64_t d : dims) threads *= d > 0 ? d : 0;
    if (threads == 0) return;
    uint32_t* small[16];
    std::vector<uint32_t*> large;
    uint32_t** mem = small;
    if (memories.size() > 16) {
      large.resize(memories.size());
      mem = large.data();
    }
    for (size_t i = 0; i < memories.size(); ++i) mem[i] = memories[i]->data;
    cpu_threads_for_next_kernel();
    it->second.fn(mem, params.data(), 0, threads);
  }

 private:
  std::unordered_map<int, CpuKernel> fns_;  // by kernel id; each keeps its library loaded
};

class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  const TargetInfo& target() const override { return target_; }

  std::string source(const Program& p, const CodegenOptions&) override { return generate_kernels(p, cpp_dialect()); }

  std::unique_ptr<KernelRunner> compile(const Program& p, CompileInfo& info) override {
    CompileTimeline timeline;
    std::unordered_map<int, CpuKernel> by_kernel;
    const std::string given = std::move(info.link);
    info.link.clear();
    info.linked = false;
    if (!given.empty() && link(p, given, by_kernel, info)) {
      info.link = given;
      info.linked = true;
      info.codegen_ms = 0;
      info.compile_ms = timeline.now_ms();
      log(p, by_kernel.size(), info);
      return std::make_unique<CpuRunner>(std::move(by_kernel));
    }
    const KernelClasses classes = group_kernels(p);
    const std::vector<DistinctKernel> printed = generate_distinct_kernels(classes, cpp_dialect());
    // Distinct classes print distinct text in practice; equal text is one function all the same.
    std::unordered_map<std::string, size_t> by_text;
    std::vector<const GeneratedKernel*> distinct;
    std::vector<size_t> code_of(printed.size());
    for (size_t c = 0; c < printed.size(); ++c) {
      auto [it, fresh] = by_text.emplace(printed[c].code.source, distinct.size());
      if (fresh) distinct.push_back(&printed[c].code);
      code_of[c] = it->second;
    }
    info.codegen_ms = timeline.now_ms();
    if (cpu_deferred()) {  // a batch (cpu.h): kept for cpu_compile_deferred(); this program runs nothing
      cpu_defer_kernels(distinct);
      return std::make_unique<CpuRunner>(std::move(by_kernel));
    }

    std::vector<std::string> keys;
    std::vector<CpuKernel> fns = cpu_load_kernels(distinct, info, timeline, &keys);
    std::vector<std::pair<int, size_t>> code_by_kernel;
    for (size_t i = 0; i < classes.kernels.size(); ++i) {
      const Node* k = classes.kernels[i];
      EMBER_INTERNAL_ASSERT(!by_kernel.count(k->index), "two kernels share the id #" << k->index);
      const size_t code = code_of[static_cast<size_t>(classes.class_of[i])];
      by_kernel[k->index] = fns[code];
      code_by_kernel.emplace_back(k->index, code);
    }
    info.link = link_record(distinct, keys, code_by_kernel);
    log(p, classes.kernels.size(), info);
    return std::make_unique<CpuRunner>(std::move(by_kernel));
  }

 private:
  static void log(const Program& p, size_t kernels, const CompileInfo& info) {
    if (!log_enabled(LogLevel::info)) return;
    char line[200];
    std::snprintf(line, sizeof line, ": %zu kernels (%d distinct, %d compiled in %d units), compile %.1f ms (cache %s)%s",
                  kernels, info.distinct_kernels, info.compiled_kernels, info.translation_units,
                  info.codegen_ms + info.compile_ms, info.cache_hit ? "hit" : "miss",
                  info.linked ? ", linked (no code generated)" : "");
    log_message(LogLevel::info, p.name + line);
  }

  // The link record: the build facts, each distinct kernel's cache key and symbol, and which of
  // them each kernel node (by id) runs. Text, one item per line:
  //   ember-cpu-link 1 / <facts hash> / <n> / n x "<key> <symbol>" / <m> / m x "<kernel id> <code>"
  static std::string link_record(const std::vector<const GeneratedKernel*>& distinct,
                                 const std::vector<std::string>& keys,
                                 const std::vector<std::pair<int, size_t>>& code_by_kernel) {
    std::string r = std::string(kLinkHeader) + "\n" + cpu_build_facts_hash() + "\n" + std::to_string(keys.size()) + "\n";
    for (size_t i = 0; i < keys.size(); ++i) r += keys[i] + " " + distinct[i]->symbol + "\n";
    r += std::to_string(code_by_kernel.size()) + "\n";
    for (const auto& [id, code] : code_by_kernel) r += std::to_string(id) + " " + std::to_string(code) + "\n";
    return r;
  }

  // Binds the kernels of `p` through a link record; false (nothing bound) when the record is
  // malformed, written under other build facts, does not cover exactly p's kernels, or names a
  // kernel no cache holds any more (then the caller generates code as usual).
  static bool link(const Program& p, const std::string& record, std::unordered_map<int, CpuKernel>& by_kernel,
                   CompileInfo& info) {
    std::istringstream is(record);
    std::string header, facts;
    if (!std::getline(is, header) || header != kLinkHeader || !std::getline(is, facts) ||
        facts != cpu_build_facts_hash())
      return false;
    size_t n = 0, m = 0;
    if (!(is >> n) || n > record.size()) return false;
    std::vector<std::string> keys(n), symbols(n);
    for (size_t i = 0; i < n; ++i)
      if (!(is >> keys[i] >> symbols[i])) return false;
    if (!(is >> m) || m > record.size()) return false;
    std::unordered_map<int, size_t> code_of;
    for (size_t i = 0; i < m; ++i) {
      int id = 0;
      size_t code = 0;
      if (!(is >> id >> code) || code >= n || !code_of.emplace(id, code).second) return false;
    }
    size_t kernels = 0;
    bool covered = true;
    p.for_each([&](Node* k) {
      if (k->op != Op::kernel) return;
      ++kernels;
      covered &= code_of.count(k->index) != 0;
    });
    if (!covered || kernels != m) return false;
    std::vector<CpuKernel> fns;
    if (!cpu_find_kernels(keys, symbols, fns, info)) return false;
    for (const auto& [id, code] : code_of) by_kernel[id] = fns[code];
    return true;
  }

  static constexpr const char* kLinkHeader = "ember-cpu-link 1";
  TargetInfo target_ = cpu_target(cpu_has_fma());  // $EMBER_CPU_FLAGS may take fma away
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace ember

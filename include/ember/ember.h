// Ember's C++ API: trace a function with ember::Tracer, compile it with ember::CompiledProgram,
// call it with tensors. The Python package is a thin binding over these classes.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/interp/interp.h"
#include "core/ir/node.h"
#include "core/passes/pipeline.h"
#include "core/trace/tracer.h"

namespace ember {

struct ProgramStats {
  double passes_ms = 0;
  double passes_cpu_ms = 0;   // the same span in this thread's CPU time (steady under other load)
  double codegen_ms = 0;
  double compile_ms = 0;
  bool cache_hit = false;     // nothing was compiled: every kernel came from a cache
  int kernels = 0;
  int distinct_kernels = 0;   // distinct kernel bodies (one compiled function or shader each)
  int compiled_kernels = 0;   // distinct kernels compiled by this compile (per-kernel cache misses)
  int translation_units = 0;  // compiler runs: cpu translation units, GPU shaders
  int buffers = 0;
  // Each of those buffers' shape as the IR prints it ("[N, 3]", "[]"): what a program's
  // temporaries cost in memory, in terms of its arguments' dims.
  std::vector<std::string> buffer_shapes;
  std::vector<PassRecord> passes;
  std::string cache_key;
  int64_t tape_bytes = 0;  // autodiff tape (and checkpoint) bytes the last call allocated
  // The program cache: the lowered program was loaded from `<program_cache_key>.prog` instead of
  // running the pipeline (then `passes` is empty and passes_ms is the load time). The key is
  // empty when the program cache is off (EMBER_PROGRAM_CACHE=0, EMBER_VERIFY, EMBER_DEBUG=ir|time).
  bool program_cache_hit = false;
  std::string program_cache_key;
  // The traced program's share of the program cache key (its text and unprinted attributes),
  // empty when the program cache is off; the Python trace cache keeps it per function.
  std::string traced_digest;
  // The backend bound the kernels through the link record saved with the cached program, without
  // generating code (cpu; backend.h, CompileInfo::link).
  bool linked = false;
  // How calls run the host level: "plan" (the HostPlan em.export writes, run by
  // backends/plan_executor.h) or "interpreter" (the host IR interpreted; `host_reason` says why:
  // EMBER_HOST_PLAN=0, an autodiff tape, or a host step the plan cannot express).
  std::string host = "interpreter";
  std::string host_reason;
  double host_plan_ms = 0;  // building and preparing the plan (or finding that it cannot run)
};

// Whether the program cache is on: off with EMBER_PROGRAM_CACHE=0 (or off/false), in the tests'
// verifier mode (EMBER_VERIFY: the pipeline must run to be verified) and with EMBER_DEBUG=ir|time
// (the passes' output is asked for).
bool program_cache_enabled();
// This Ember build: the version plus the identity (device, inode, size, time) of the binary
// holding the pipeline, so a rebuilt Ember never loads programs an older build lowered.
const std::string& build_id();

// A traced program taken through the pipeline and compiled for one backend. The lowered program
// is kept in the disk cache (the program cache, `<key>.prog`, keyed by the traced text, its
// unprinted attributes, the backend, its pipeline options and this Ember build): a later process
// compiling the same program loads it instead of running the pipeline.
class PlanExecutor;

class CompiledProgram {
 public:
  // `traced_text`: print_program(*traced) when the caller has it already (the Python front end
  // prints it when tracing); printed here when empty. `keep_trace`: keep a copy of the traced
  // program for ir(stage) and explain(); without it they need a new compile (the Python front end
  // traces again when first asked), and compiling skips a copy of the whole program (issue 17).
  // `codegen`: how kernels are printed (fast_math; EMBER_FAST_MATH=1 turns it on for every program).
  CompiledProgram(std::unique_ptr<Program> traced, const std::string& backend, const std::string& traced_text = {},
                  bool keep_trace = true, const CodegenOptions& codegen = {});
  // The program whose traced digest (stats().traced_digest of an earlier compile) is `digest`,
  // loaded from the program cache and compiled without tracing; null when the program cache is
  // off or has no good entry. Its ir() keeps only the "final" stage.
  static std::unique_ptr<CompiledProgram> from_program_cache(const std::string& digest, const std::string& backend,
                                                             const CodegenOptions& codegen = {});
  ~CompiledProgram();
  // Runs the program: arguments by position; one tensor per return value.
  std::vector<HostTensor> run(const std::vector<ArgValue>& args);
  int kernel_count() const { return stats_.kernels; }
  // IR text after a stage: "traced", a pass name (e.g. "fuse_kernels"; "simplify#2" for the second
  // run of a repeated cleanup pass, whose bare name shows its last run), or "final". Stages other
  // than "final" are printed on first request, by running the pipeline again on a copy of the
  // traced program (printing after every pass would make compiling quadratic in program size).
  std::string ir(const std::string& stage = "final") const;
  // Why the program has the kernels it has: one line per pair of adjacent kernels that stayed
  // apart (the dependence in the user's terms, or the shape or cost-model reason) and per host
  // loop with kernels that stays sequential (core/analysis/explain.h). Runs the pipeline again on
  // a copy of the traced program on first request, recording the passes' decisions.
  std::string explain() const;
  // Generated kernel source: "cpp", "glsl" or "hlsl" (the backend's own language as it compiles
  // it; the others as their default dialect prints the same lowered program).
  std::string source(const std::string& lang) const;
  const ProgramStats& stats() const { return stats_; }
  const Program& program() const { return *prog_; }
  const std::string& backend_name() const { return backend_name_; }
  // Whether ir(stage) and explain() can run: the traced program was kept (see the constructor).
  bool has_trace() const { return traced_ != nullptr; }

 private:
  CompiledProgram() = default;
  // backend_, backend_name_, the pipeline options and codegen_ (`codegen` with EMBER_FAST_MATH's).
  void init_backend(const std::string& backend, const CodegenOptions& codegen);
  // prog_'s kernels through the backend, into stats_; `link`: the backend's link record saved
  // with a cached program (CompileInfo::link), empty for none.
  void compile_kernels(const std::string& link = {});
  void prepare_host();                             // plan_ when the host plan can run prog_, else why not

  std::unique_ptr<Program> prog_;
  std::unique_ptr<Program> traced_;  // as traced (a copy when prog_ was lowered from it), for ir(stage)
  PipelineOptions options_;
  CodegenOptions codegen_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KernelRunner> runner_;
  std::unique_ptr<PlanExecutor> plan_;  // null: run() interprets the host level
  mutable std::map<std::string, std::string> stages_;  // filled by the first ir(stage)
  mutable std::string explanation_;                    // filled by the first explain()
  ProgramStats stats_;
  std::string backend_name_;
};

}  // namespace ember

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
  double codegen_ms = 0;
  double compile_ms = 0;
  bool cache_hit = false;     // nothing was compiled: every kernel came from a cache
  int kernels = 0;
  int distinct_kernels = 0;   // distinct kernel bodies (one compiled function or shader each)
  int compiled_kernels = 0;   // distinct kernels compiled by this compile (per-kernel cache misses)
  int translation_units = 0;  // compiler runs: cpu translation units, GPU shaders
  int buffers = 0;
  std::vector<PassRecord> passes;
  std::string cache_key;
  int64_t tape_bytes = 0;  // autodiff tape (and checkpoint) bytes the last call allocated
};

// A traced program taken through the pipeline and compiled for one backend.
class CompiledProgram {
 public:
  CompiledProgram(std::unique_ptr<Program> traced, const std::string& backend);
  // Runs the program: arguments by position; one tensor per return value.
  std::vector<HostTensor> run(const std::vector<ArgValue>& args);
  int kernel_count() const { return stats_.kernels; }
  // IR text after a stage: "traced", a pass name (e.g. "fuse_kernels"), or "final". Stages other
  // than "final" are printed on first request, by running the pipeline again on a copy of the
  // traced program (printing after every pass would make compiling quadratic in program size).
  std::string ir(const std::string& stage = "final") const;
  // Generated kernel source: "cpp", "glsl" or "hlsl" (the backend's own language as it compiles
  // it; the others as their default dialect prints the same lowered program).
  std::string source(const std::string& lang) const;
  const ProgramStats& stats() const { return stats_; }
  const Program& program() const { return *prog_; }
  const std::string& backend_name() const { return backend_name_; }

 private:
  std::unique_ptr<Program> prog_;
  std::unique_ptr<Program> traced_;  // a copy as traced, for ir(stage)
  PipelineOptions options_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KernelRunner> runner_;
  mutable std::map<std::string, std::string> stages_;  // filled by the first ir(stage)
  ProgramStats stats_;
  std::string backend_name_;
};

}  // namespace ember

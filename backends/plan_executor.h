// The runtime's host level as data: runs a lowered program's HostPlan (export/host_plan.h, the
// plan em.export writes as manifest.json) with a backend's KernelRunner, instead of interpreting
// the program's host IR. Dispatches call KernelRunner::run_kernel with the memories, params and
// dims the interpreter would pass, so both give the same outputs; one plan, so an export cannot
// drift from what Ember runs.
#pragma once
#include <memory>
#include <vector>

#include "core/interp/interp.h"
#include "export/host_plan.h"

namespace ember {

class PlanExecutor {
 public:
  // Prepares `plan`, built by build_host_plan from `p` (which must outlive the executor): parses
  // its expressions, resolves names. Throws CompileError saying what it cannot run (the caller
  // falls back to the interpreter).
  PlanExecutor(const Program& p, HostPlan plan);
  ~PlanExecutor();
  // Runs the plan: the same outputs (shapes, dtypes, storage shared with buffers and inputs,
  // scalars as 0-d tensors) and argument errors as interpret(p, args, &runner).
  std::vector<HostTensor> run(const std::vector<ArgValue>& args, KernelRunner& runner) const;
  const HostPlan& plan() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember

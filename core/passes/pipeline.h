// The compiler pipeline: the passes in order, one line each, in pipeline.cpp, except one that runs
// inside another (fuse_kernels first calls hoist_grid_loops). A pass is a free function
// `bool pass(Program&)` that returns whether it changed the IR, or, when it depends on the target
// (split_reductions), one that also takes the PipelineOptions; the options come from the target
// (pipeline_options, core/target/target.h).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/ir/node.h"
#include "core/target/target.h"

namespace ember {

struct ExplainLog;

struct PipelineOptions;
using PlainPassFn = bool (*)(Program&);
// Every pass as the pipeline calls it (a plain pass ignores the options).
using PassFn = bool (*)(Program&, const PipelineOptions&);
struct PassInfo {
  const char* name;
  PassFn fn;
};
struct PassRecord {
  std::string name;
  double ms = 0;
  double cpu_ms = 0;  // this thread's CPU time in the pass (unlike ms, not inflated by other processes);
                      // a pass under 0.05 ms wall counts its wall time (run_pipeline reads the clock less)
  bool changed = false;
  uint64_t visits = 0;  // node_visit_counter() steps the pass took (work, not time)
};

struct PipelineOptions {
  bool verify = false;                 // run the verifier after every pass (tests do)
  // If set, receives the printed IR: "traced", after each pass by its name, "final". A pass run
  // several times (the cleanup simplify/cse/dce) is also kept per run as "<name>#<k>", and its
  // name alone shows the last run; both texts start with a comment naming the run.
  std::map<std::string, std::string>* stages = nullptr;
  // If set, merge_kernels records why adjacent kernels stay apart, and after forward_copies the
  // host loops are checked for dependences between iterations (core/analysis/explain.h; explain_text() reads it).
  ExplainLog* explain = nullptr;
  bool lower_groups = false;           // run lower_group_barriers (a backend that runs a group per thread)
  bool tile_threads = false;           // run tile_threads (a backend that vectorizes a thread's lanes: CPU)
  bool contract_fma = false;           // run contract_fma (a backend whose kernels have fused multiply-add: CPU with FMA)
  // run split_reductions (a GPU: a reduction into few outputs runs over workgroups) on loops of at
  // least this many trips (a trip count known only at run time always qualifies); 0: off.
  // Backends: kSplitMinTrips; EMBER_SPLIT_REDUCTIONS=<trips> sets it (the fuzzer: 1; 0: off).
  int64_t split_reductions = 0;
  // Called after every pass (the differential fuzzer interprets the program after those that
  // changed it); `kernels_formed` tells whether fuse_kernels has run.
  std::function<void(const char* pass, Program& p, bool changed, bool kernels_formed)> after_pass;
  // Programs of this many nodes or more are walked over arrays (Program::set_walk_cache); 0: every
  // program (tests; EMBER_DEBUG=array_walks sets it too).
  uint64_t array_walks_from = Program::kArrayWalkNodes;
};

// The options for compiling for `target`: its lowering (lower_groups, tile_threads, contract_fma,
// split_reductions), nothing else set.
PipelineOptions pipeline_options(const TargetInfo& target);

// The passes in order (groups like simplify/cse/dce appear once; run_pipeline repeats them).
// Called alone with default options, the target-gated passes do what they do when enabled, except
// split_reductions, which is off (min trips 0).
const std::vector<PassInfo>& pipeline_passes();
// CPU time consumed by the calling thread, in ms (pass timings that other processes' load on a
// shared machine does not inflate).
double thread_cpu_ms();
// Runs the whole pipeline. EMBER_DEBUG=ir prints the IR after every pass that changed it;
// EMBER_DEBUG=time prints each pass's time.
std::vector<PassRecord> run_pipeline(Program& p, const PipelineOptions& opt = {});

}  // namespace ember

#include "core/passes/pipeline.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "core/analysis/dependence.h"
#include "core/analysis/explain.h"
#include "core/ir/printer.h"
#include "core/ir/verifier.h"
#include "core/passes/apply_schedule.h"
#include "core/passes/check_races.h"
#include "core/passes/check_shapes.h"
#include "core/passes/contract_fma.h"
#include "core/passes/cse.h"
#include "core/passes/dce.h"
#include "core/passes/form_kernels.h"
#include "core/passes/fold_reciprocal_powers.h"
#include "core/passes/forward_copies.h"
#include "core/passes/fuse_kernels.h"
#include "core/passes/fuse_loads.h"
#include "core/passes/hoist_invariants.h"
#include "core/passes/lower_algorithms.h"
#include "core/passes/lower_group_barriers.h"
#include "core/passes/lower_indexing.h"
#include "core/passes/merge_kernels.h"
#include "core/passes/parallelize_host_loops.h"
#include "core/passes/reduce_atomics.h"
#include "core/passes/share_reciprocals.h"
#include "core/passes/split_reductions.h"
#include "core/passes/simplify.h"
#include "core/passes/split_host.h"
#include "core/passes/tile_threads.h"
#include "core/passes/unroll_loops.h"
#include "core/passes/unroll_small_dims.h"

namespace ember {

// The whole compiler, in order. A step marked `cleanup` is the simplify/cse/dce group, which
// runs until nothing changes; a step with `when` runs only when the options (the target's
// lowering, pipeline_options) ask for it.
namespace {
// A pass that reads nothing but the program, as the pipeline calls passes.
template <PlainPassFn F>
bool plain(Program& p, const PipelineOptions&) {
  return F(p);
}
// Off at 0 trips (PipelineOptions::split_reductions), also when called alone (pipeline_passes()).
bool split_reductions_step(Program& p, const PipelineOptions& o) {
  return o.split_reductions > 0 && split_reductions(p, o.split_reductions);
}

struct Step {
  PassInfo pass;
  bool cleanup = false;
  bool (*when)(const PipelineOptions&) = nullptr;  // nullptr: always
};
bool lowering_groups(const PipelineOptions& o) { return o.lower_groups; }
bool tiling(const PipelineOptions& o) { return o.tile_threads; }
bool fusing(const PipelineOptions& o) { return o.contract_fma; }
bool splitting(const PipelineOptions& o) { return o.split_reductions > 0; }

const std::vector<Step>& steps() {
  static const std::vector<Step> s = {
      {{"check_shapes", plain<check_shapes>}},
      {{"check_races", plain<check_races>}},
      {{"lower_algorithms", plain<lower_algorithms>}},
      {{"cleanup", nullptr}, true},
      {{"fuse_kernels", plain<fuse_kernels>}},
      {{"cleanup", nullptr}, true},  // merges repeated loads so each is fused once
      {{"fuse_loads", plain<fuse_loads>}},
      {{"cleanup", nullptr}, true},
      {{"reduce_atomics", plain<reduce_atomics>}},  // after fuse_loads: indices recomputed, not loaded
      {{"parallelize_host_loops", plain<parallelize_host_loops>}},  // merge_kernels then joins the kernels both make
      {{"apply_schedule", plain<apply_schedule>}},  // the user's schedule, on the kernels as written, before merging
      {{"merge_kernels", plain<merge_kernels>}},
      {{"unroll_small_dims", plain<unroll_small_dims>}},
      {{"unroll_loops", plain<unroll_loops>}},
      {{"tile_threads", plain<tile_threads>}, false, tiling},
      {{"cleanup", nullptr}, true},  // shares the unrolled loads with the rest of the thread
      {{"share_reciprocals", plain<share_reciprocals>}},
      {{"forward_copies", plain<forward_copies>}},
      {{"form_kernels", plain<form_kernels>}},
      {{"split_reductions", split_reductions_step}, false, splitting},  // GPU: few-output reductions over workgroups
      {{"lower_indexing", plain<lower_indexing>}},
      {{"lower_group_barriers", plain<lower_group_barriers>}, false, lowering_groups},
      {{"cleanup", nullptr}, true},
      {{"fold_reciprocal_powers", plain<fold_reciprocal_powers>}},  // after the cleanup that folds share_reciprocals' products
      {{"contract_fma", plain<contract_fma>}, false, fusing},  // last of the math: nothing after it rewrites a sum
      {{"hoist_invariants", plain<hoist_invariants>}},
      {{"split_host", plain<split_host>}},
  };
  return s;
}
const PassInfo kCleanup[] = {{"simplify", plain<simplify>}, {"cse", plain<cse>}, {"dce", plain<dce>}};
constexpr int kCleanupCount = static_cast<int>(std::size(kCleanup));

bool debug_has(const char* what) {
  const char* d = std::getenv("EMBER_DEBUG");
  return d && std::strstr(d, what);
}
}  // namespace

const std::vector<PassInfo>& pipeline_passes() {
  static const std::vector<PassInfo> list = [] {
    std::vector<PassInfo> out;
    for (const Step& s : steps()) {
      if (!s.cleanup) { out.push_back(s.pass); continue; }
      for (const PassInfo& c : kCleanup) {
        bool seen = false;
        for (const PassInfo& o : out) seen |= std::strcmp(o.name, c.name) == 0;
        if (!seen) out.push_back(c);
      }
    }
    return out;
  }();
  return list;
}

PipelineOptions pipeline_options(const TargetInfo& target) {
  PipelineOptions o;
  o.lower_groups = target.lower_groups;
  o.tile_threads = target.tile_threads;
  o.contract_fma = target.contract_fma;
  o.split_reductions = target.split_reductions;
  return o;
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

std::vector<PassRecord> run_pipeline(Program& p, const PipelineOptions& opt) {
  std::vector<PassRecord> records;
  // The explain log is set for this pipeline only (passes record into explain_log()).
  struct LogScope {
    ExplainLog* saved;
    explicit LogScope(ExplainLog* l) : saved(explain_log()) { explain_log() = l; }
    ~LogScope() { explain_log() = saved; }
  } log_scope(opt.explain);
  // The passes' walks go over the cached order while nothing is linked (Program::set_walk_cache);
  // EMBER_DEBUG=array_walks: at every size (the fuzzer's programs are small).
  struct WalkCacheScope {
    const Program& p;
    WalkCacheScope(const Program& q, const PipelineOptions& opt) : p(q) {
      p.set_walk_cache(true, debug_has("array_walks") ? 0 : opt.array_walks_from);
    }
    ~WalkCacheScope() { p.set_walk_cache(false); }
  } walk_cache(p, opt);
  const bool show_ir = debug_has("ir");
  const bool show_time = debug_has("time");
  bool kernels_formed = false;
  dependence_totals() = {};
  const auto pipeline_t0 = std::chrono::steady_clock::now();
  if (opt.stages) (*opt.stages)["traced"] = print_program(p);
  // Stages: a pass's IR under its name, and, for the cleanup passes that run many times, under
  // "<name>#<run>" (each run, with the pass it cleans up after), "<name>" being the last run.
  std::map<std::string, int> runs;
  std::map<std::string, std::string> context;  // "<name>#<run>" -> "after <the step before>"
  const char* step_before = "the start";
  // A pass's CPU time is read from the thread CPU clock, a system call (~1 us here, as much as
  // a small pass): only after a pass of kShortMs wall time or more. A shorter pass counts its wall
  // time; the next clock read gives the passes since the last one what remains (one span in all,
  // so the records still sum to the CPU time). Restarted after work done between passes (verify,
  // IR printing, stages, explain, after_pass).
  constexpr double kShortMs = 0.05;
  const bool between = opt.verify || show_ir || show_time || opt.stages || opt.explain || opt.after_pass;
  double cpu_mark = thread_cpu_ms();
  double short_wall = 0;  // wall ms of the short passes since cpu_mark
  // Runs `fn` (a pass, or a cleanup pass with arguments) as the pass `name`.
  auto run = [&](const char* name, auto&& fn) {
    auto t0 = std::chrono::steady_clock::now();
    const uint64_t v0 = node_visit_counter();
    const bool changed = fn(p, opt);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    double cpu = ms;
    if (ms >= kShortMs || between) {
      const double cpu_end = thread_cpu_ms();
      cpu = std::max(0.0, cpu_end - cpu_mark - short_wall);
      cpu_mark = cpu_end;
      short_wall = 0;
    } else {
      short_wall += ms;
    }
    records.push_back({name, ms, cpu, changed, node_visit_counter() - v0});
    if (std::strcmp(name, "fuse_kernels") == 0) kernels_formed = true;
    if (opt.verify) verify(p, VerifyOptions{kernels_formed});
    if (show_time) {
      size_t live = 0;
      p.for_each([&](Node*) { ++live; });
      std::fprintf(stderr, "ember: %-20s %8.3f ms%s  nodes %zu live of %d made\n", name, ms,
                   changed ? "" : " (no change)", live, p.id_bound());
    }
    if (changed && show_ir) std::fprintf(stderr, "ember: IR after %s:\n%s", name, print_program(p).c_str());
    if (opt.stages) {
      const std::string key = std::string(name) + "#" + std::to_string(++runs[name]);
      (*opt.stages)[key] = print_program(p);
      context[key] = step_before;
    }
    if (opt.explain && std::strcmp(name, "forward_copies") == 0) explain_host_loops(p, *opt.explain);
    if (opt.after_pass) opt.after_pass(name, p, changed, kernels_formed);
    if (between) cpu_mark = thread_cpu_ms();  // (short_wall is 0 here)
    return changed;
  };
  // EMBER_VERIFY: the program must be a fixed point of every cleanup pass here.
  auto check_fixed_point = [&](const char* why) {
    if (opt.verify)
      for (const PassInfo& c : kCleanup) EMBER_INTERNAL_ASSERT(!c.fn(p, opt), c.name << " changed the program " << why);
  };
  bool dirty = true;  // a pass changed the program since the last cleanup group
  for (const Step& s : steps()) {
    if (s.when && !s.when(opt)) continue;
    if (!s.cleanup) {
      // EMBER_VERIFY: fuse_loads also checks that its one sweep left nothing a second would fuse.
      const bool check = opt.verify && s.pass.fn == plain<fuse_loads>;
      dirty |= run(s.pass.name, check ? plain<fuse_loads_checking_one_sweep> : s.pass.fn);
      step_before = s.pass.name;
      continue;
    }
    // Nothing changed since the last cleanup reached its fixed point: it is one still.
    if (!dirty) {
      check_fixed_point("after passes that reported no change");
      continue;
    }
    dirty = false;
    // simplify, cse, dce in turn, each skipped while the program is a fixed point of it, until it
    // is one of all three (or the cap). What a change keeps of the others' fixed points:
    //  - simplify: nothing (a rewrite can enable anything), so all three run again.
    //  - cse reaches its own fixed point in one run, and merging a value into its twin leaves
    //    nothing dead (the twin has the same operands): dce's fixed point stays.
    //  - dce reaches its own fixed point in one run, and what it removes gives cse nothing to
    //    merge (the stores it removes write buffers nobody loads): cse's fixed point stays.
    //  - after cse or dce, simplify can only answer differently for the nodes they note
    //    (Resimplify: operands replaced, operands left with one user), so while the program is
    //    a fixed point of simplify, only those are simplified again, not every node.
    // EMBER_VERIFY checks the result: each of the three changes nothing.
    bool fixed[kCleanupCount] = {false, false, false};  // simplify, cse, dce
    Resimplify recheck;  // while fixed[0]: the nodes simplify must look at again
    auto done = [&] { return fixed[0] && fixed[1] && fixed[2] && recheck.empty(); };
    for (int k = 0; k < 16 * kCleanupCount && !done(); ++k) {
      const int i = k % kCleanupCount;
      const char* name = kCleanup[i].name;
      if (i == 0) {
        if (fixed[0] && recheck.empty()) continue;
        const bool changed = fixed[0] && !recheck.all
                                 ? run(name, [&](Program& q, const PipelineOptions&) { return simplify_nodes(q, recheck); })
                                 : run(name, plain<simplify>);
        recheck.clear();
        fixed[0] = !changed;
        if (changed) fixed[1] = fixed[2] = false;
      } else if (!fixed[i]) {  // cse or dce: noting for simplify while it is at its fixed point
        Resimplify* note = fixed[0] ? &recheck : nullptr;
        run(name, [&](Program& q, const PipelineOptions&) { return i == 1 ? cse(q, note) : dce(q, note); });
        fixed[i] = true;
      }
    }
    if (!done()) dirty = true;  // stopped at the cap, short of a fixed point
    else check_fixed_point("after the cleanup reached its fixed point");
  }
  if (show_time) {
    const DependenceTotals& d = dependence_totals();
    std::fprintf(stderr,
                 "ember: pipeline %.3f ms, of which dependence analysis %.3f ms: %ld queries, %ld access pairs "
                 "(%ld syntactic, %ld isl, %ld over the limit)\n",
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - pipeline_t0).count(), d.ms,
                 d.queries, d.pairs.pairs, d.pairs.fast, d.pairs.isl, d.pairs.too_many);
  }
  if (opt.stages) {
    std::map<std::string, std::string>& st = *opt.stages;
    for (const auto& [name, n] : runs) {
      const std::string last = name + "#" + std::to_string(n);
      if (n == 1) {  // a pass that runs once: its stage is its name alone
        st[name] = std::move(st[last]);
        st.erase(last);
        continue;
      }
      for (int k = 1; k <= n; ++k) {
        const std::string key = name + "#" + std::to_string(k);
        st[key] = "// " + name + ", run " + std::to_string(k) + " of " + std::to_string(n) + " (cleanup after " +
                  context[key] + ")\n" + st[key];
      }
      st[name] = "// " + name + ": the last of its " + std::to_string(n) + " runs (cleanup after " + context[last] +
                 "); ir(\"" + name + "#<k>\") shows run k\n" + st[last].substr(st[last].find('\n') + 1);
    }
    st["final"] = print_program(p);
  }
  return records;
}

}  // namespace ember

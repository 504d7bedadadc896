// The runtime's plan executor (backends/plan_executor.h) against the interpreter: every shared test
// program the host plan expresses, lowered as the CPU backend lowers it, run both ways with the
// same CPU kernels on random non-zero inputs; the expression evaluator (export/plan_eval.h); and
// CompiledProgram's choice between the two (stats().host).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/plan_executor.h"
#include "ember/ember.h"
#include "export/plan_eval.h"
#include "programs.h"

namespace ember {
namespace {

// random_args with every integer word non-zero too (zeros would hide a missing copy or fill).
std::vector<ArgValue> nonzero_args(const Program& p, std::mt19937& rng, int64_t sym) {
  std::vector<ArgValue> args = testing::random_args(p, rng, sym);
  for (ArgValue& a : args) {
    if (!a.is_tensor) continue;
    if (a.tensor.dtype == DType::boolean) continue;
    for (int64_t i = 0; i < a.tensor.size(); ++i)
      if (a.tensor.data[i] == 0) a.tensor.data[i] = a.tensor.dtype == DType::f32 ? f2w(0.5f) : 3u;
  }
  return args;
}

std::string compare_args(const std::vector<ArgValue>& want, const std::vector<ArgValue>& got) {
  std::vector<HostTensor> w, g;
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i].is_tensor) {
      w.push_back(want[i].tensor);
      g.push_back(got[i].tensor);
    }
  return testing::compare(w, g, 1e-5);
}

struct Case {
  std::string name;
  std::unique_ptr<Program> program;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const testing::TestProgram& tp : testing::test_programs()) out.push_back({tp.name, tp.build()});
  out.push_back({"bitonic_sort", testing::bitonic_sort()});
  out.push_back({"group_zoo", testing::group_zoo()});
  return out;
}

TEST(PlanExecutor, MatchesInterpreterOnExpressiblePrograms) {
  auto backend = make_backend("cpu");
  PipelineOptions opt;
  opt.tile_threads = backend->target().tile_threads;
  opt.lower_groups = backend->target().lower_groups;
  std::vector<std::string> ran, refused;
  for (Case& c : cases()) {
    Program& p = *c.program;
    run_pipeline(p, opt);
    std::unique_ptr<PlanExecutor> exec;
    try {
      exec = std::make_unique<PlanExecutor>(p, build_runtime_plan(p, KernelApi::cpp));
    } catch (const CompileError& e) {
      refused.push_back(c.name + ": " + e.what());
      continue;
    }
    CompileInfo info;
    auto runner = backend->compile(p, info);
    std::mt19937 rng(11);
    for (int64_t sym : {6, 37}) {
      std::vector<ArgValue> args = nonzero_args(p, rng, sym);
      std::vector<ArgValue> a1 = testing::copy_args(args), a2 = testing::copy_args(args);
      std::vector<HostTensor> want = interpret(p, a1, runner.get());
      std::vector<HostTensor> got = exec->run(a2, *runner);
      EXPECT_EQ(testing::compare(want, got, 1e-5), "") << c.name << " with N = " << sym;
      EXPECT_EQ(compare_args(a1, a2), "") << c.name << ": inputs the program writes, N = " << sym;
      // A second run on the same executor: nothing of the first run may leak into it.
      std::vector<ArgValue> a3 = testing::copy_args(args);
      EXPECT_EQ(testing::compare(want, exec->run(a3, *runner), 1e-5), "") << c.name << " run again, N = " << sym;
    }
    ran.push_back(c.name);
  }
  std::string list;
  for (const std::string& r : refused) list += "\n  " + r.substr(0, r.find('\n'));
  std::printf("plan executor: %zu programs ran, %zu refused:%s\n", ran.size(), refused.size(), list.c_str());
  // Only the programs with host steps the plan has no form for fall back.
  for (const char* name : {"nbody", "broadcast_chain", "host_loop", "explicit_kernel", "softmax", "sin_matmul",
                           "row_merge", "matmul_tiles", "bitonic_sort", "group_zoo"})
    EXPECT_NE(std::find(ran.begin(), ran.end(), name), ran.end()) << name << " did not run through the plan" << list;
}

TEST(PlanExecutor, ArgumentErrorsAsTheInterpreter) {
  auto backend = make_backend("cpu");
  std::unique_ptr<Program> p = testing::test_programs()[0].build();
  run_pipeline(*p, PipelineOptions{});
  PlanExecutor exec(*p, build_runtime_plan(*p, KernelApi::cpp));
  CompileInfo info;
  auto runner = backend->compile(*p, info);
  std::mt19937 rng(3);
  std::vector<ArgValue> args = nonzero_args(*p, rng, 5);
  args.pop_back();
  std::string want, got;
  try { interpret(*p, args, runner.get()); } catch (const Error& e) { want = e.what(); }
  try { exec.run(args, *runner); } catch (const Error& e) { got = e.what(); }
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(want, got);
}

TEST(PlanEval, ManifestExpressionSemantics) {
  PlanSymbols s;
  const int n = s.add("N", DType::i32), k = s.add("k0", DType::i32), x = s.add("x", DType::f32);
  std::vector<int64_t> slots(3);
  slots[static_cast<size_t>(n)] = 10;
  slots[static_cast<size_t>(k)] = -7;
  slots[static_cast<size_t>(x)] = f2w(2.5f);
  auto ev = [&](const char* e) { return PlanValue(e, DType::i32, s).eval(slots.data()); };
  EXPECT_EQ(ev("N*3+1"), 31);
  EXPECT_EQ(ev("(N+63)/64"), 1);
  EXPECT_EQ(ev("k0/2"), -3);             // C division truncates
  EXPECT_EQ(ev("floordiv(k0,2)"), -4);   // Ember's // rounds down
  EXPECT_EQ(ev("floormod(k0,3)"), 2);
  EXPECT_EQ(ev("k0%3"), -1);
  EXPECT_EQ(ev("N/0"), 0);
  EXPECT_EQ(ev("floormod(N,0)"), 0);
  EXPECT_EQ(ev("-k0-N"), -3);
  EXPECT_EQ(ev("N-2-3"), 5);
  EXPECT_EQ(ev("N-(2-3)"), 11);
  EXPECT_EQ(ev("select(k0<0&&N>=10,min(N,4),max(N,4))"), 4);
  EXPECT_EQ(ev("!(N==10)||k0!=-7"), 0);
  EXPECT_EQ(PlanValue("x", DType::f32, s).word(slots.data()), f2w(2.5f));
  EXPECT_EQ(PlanValue("-2e-05", DType::f32, s).word(slots.data()), f2w(-2e-05f));
  EXPECT_EQ(PlanValue("-inf", DType::f32, s).word(slots.data()), f2w(-INFINITY));
  EXPECT_EQ(PlanValue("k0", DType::u32, s).word(slots.data()), static_cast<uint32_t>(-7));
  EXPECT_THROW(PlanValue("M+1", DType::i32, s), CompileError);    // unknown name
  EXPECT_THROW(PlanValue("x+1", DType::i32, s), CompileError);    // f32 in integer math
  EXPECT_THROW(PlanValue("(N+1", DType::i32, s), CompileError);
  EXPECT_THROW(PlanValue("pow(N,2)", DType::i32, s), CompileError);
}

TEST(CompiledProgramHost, RunsThePlanOrSaysWhyNot) {
  unsetenv("EMBER_HOST_PLAN");
  CompiledProgram nbody(testing::test_programs()[0].build(), "cpu");
  EXPECT_EQ(nbody.stats().host, "plan") << nbody.stats().host_reason;
  setenv("EMBER_HOST_PLAN", "0", 1);
  CompiledProgram off(testing::test_programs()[0].build(), "cpu");
  unsetenv("EMBER_HOST_PLAN");
  EXPECT_EQ(off.stats().host, "interpreter");
  EXPECT_EQ(off.stats().host_reason, "EMBER_HOST_PLAN=0");
  std::mt19937 rng(9);
  std::vector<ArgValue> args = nonzero_args(nbody.program(), rng, 9);
  EXPECT_EQ(testing::compare(off.run(testing::copy_args(args)), nbody.run(testing::copy_args(args)), 1e-5), "");
}

}  // namespace
}  // namespace ember

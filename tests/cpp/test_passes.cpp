// Every pass is tested by running the reference interpreter before and after it on random
// inputs; the verifier runs after every pass.
#include <gtest/gtest.h>

#include "core/ir/printer.h"
#include "core/ir/verifier.h"
#include "core/passes/pipeline.h"
#include "programs.h"

using namespace ember;
using namespace ember::testing;

class PassTest : public ::testing::TestWithParam<TestProgram> {};

TEST_P(PassTest, InterpreterAgreesBeforeAndAfterEachPass) {
  const TestProgram& tp = GetParam();
  std::unique_ptr<Program> p = tp.build();
  verify(*p);
  for (int trial = 0; trial < 2; ++trial) {
    std::mt19937 rng(1234 + trial);
    std::vector<ArgValue> args = random_args(*p, rng, trial == 0 ? 5 : 9);
    std::unique_ptr<Program> q = clone_program(*p);
    std::vector<HostTensor> want = interpret(*q, copy_args(args));
    bool formed = false;
    for (const PassInfo& pass : pipeline_passes()) {
      SCOPED_TRACE(std::string("after pass ") + pass.name + "\n" + print_program(*q));
      pass.fn(*q);
      formed |= std::string(pass.name) == "fuse_kernels";
      verify(*q, VerifyOptions{formed});
      std::vector<HostTensor> got = interpret(*q, copy_args(args));
      std::string diff = compare(want, got);
      ASSERT_EQ(diff, "") << tp.name << " differs after " << pass.name;
    }
  }
}

TEST_P(PassTest, FullPipelineWithVerifier) {
  const TestProgram& tp = GetParam();
  std::unique_ptr<Program> p = tp.build();
  std::mt19937 rng(99);
  std::vector<ArgValue> args = random_args(*p, rng, 6);
  std::vector<HostTensor> want = interpret(*p, copy_args(args));
  PipelineOptions opt;
  opt.verify = true;
  run_pipeline(*p, opt);
  EXPECT_EQ(compare(want, interpret(*p, copy_args(args))), "");
  int kernels = 0;
  p->for_each([&](Node* n) { kernels += n->op == Op::kernel; });
  if (tp.kernels >= 0) EXPECT_EQ(kernels, tp.kernels) << print_program(*p);
}

INSTANTIATE_TEST_SUITE_P(Programs, PassTest, ::testing::ValuesIn(test_programs()),
                         [](const ::testing::TestParamInfo<TestProgram>& i) { return i.param.name; });

TEST(Pipeline, ListsEveryPassOnce) {
  std::vector<std::string> names;
  for (const PassInfo& p : pipeline_passes()) names.push_back(p.name);
  std::vector<std::string> want = {"check_shapes", "lower_algorithms", "simplify", "cse", "dce", "fuse_kernels",
                                   "fuse_loads", "form_kernels", "lower_indexing", "split_host"};
  EXPECT_EQ(names, want);
}

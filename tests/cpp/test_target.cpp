// TargetInfo (core/target/target.h): each backend describes its device and the lowering the
// pipeline does for it, pipeline_options() reads it, and nothing asks for a backend by name.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/cpu/cpu.h"
#include "backends/kernel_abi.h"
#include "core/passes/pipeline.h"
#include "core/passes/split_reductions.h"

namespace ember {
namespace {

TEST(Target, CpuLowersGroupsTilesThreadsAndFusesWhereItHasFma) {
  auto cpu = make_backend("cpu");
  const TargetInfo& t = cpu->target();
  EXPECT_EQ(t.name, "cpu");
  EXPECT_EQ(t.language, TargetLanguage::cpp);
  EXPECT_FALSE(t.gpu);
  EXPECT_GE(t.resident_threads, 1);
  EXPECT_TRUE(t.lower_groups && t.tile_threads);
  EXPECT_EQ(t.contract_fma, cpu_has_fma());
  EXPECT_EQ(t.split_reductions, 0);
  const PipelineOptions o = pipeline_options(t);
  EXPECT_TRUE(o.lower_groups && o.tile_threads);
  EXPECT_EQ(o.contract_fma, cpu_has_fma());
  EXPECT_EQ(o.split_reductions, 0);
  EXPECT_FALSE(o.verify);
  EXPECT_EQ(kernel_api(t), KernelApi::cpp);
}

// Each GPU backend present: native workgroups, split reductions, its device's limits.
TEST(Target, GpuBackendsDescribeTheirDevice) {
  struct Want {
    const char* backend;
    TargetLanguage language;
    KernelApi api;
  };
  int seen = 0;
  for (const Want& w :
       {Want{"vulkan", TargetLanguage::glsl, KernelApi::vulkan_glsl},
        Want{"vulkan-hlsl", TargetLanguage::hlsl, KernelApi::vulkan_hlsl},
        Want{"opengl", TargetLanguage::glsl, KernelApi::opengl}, Want{"cuda", TargetLanguage::cuda, KernelApi::cpp}}) {
    if (!backend_unavailable(w.backend).empty()) continue;
    ++seen;
    auto b = make_backend(w.backend);
    const TargetInfo& t = b->target();
    SCOPED_TRACE(describe(t));
    EXPECT_EQ(t.name, w.backend);
    EXPECT_EQ(t.language, w.language);
    EXPECT_EQ(kernel_api(t), w.api);
    EXPECT_TRUE(t.gpu);
    EXPECT_FALSE(t.lower_groups || t.tile_threads || t.contract_fma);
    EXPECT_EQ(t.split_reductions, kSplitMinTrips);
    EXPECT_GE(t.max_workgroup_threads, kSplitGroup);  // the split's stage kernels fit a workgroup
    EXPECT_GE(t.shared_memory_bytes, 16384);
    EXPECT_EQ(std::string(language_name(t.language)), w.backend == std::string("vulkan-hlsl") ? "hlsl"
                                                      : w.backend == std::string("cuda")      ? "cuda"
                                                                                              : "glsl");
  }
  if (seen == 0) GTEST_SKIP() << "no GPU backend on this machine";
}

TEST(Target, DescribeNamesTheLowering) {
  TargetInfo t = gpu_target("vulkan", TargetLanguage::glsl, TargetApi::vulkan);
  t.max_workgroup_threads = 1024;
  t.loop_limit = 65535;
  EXPECT_EQ(describe(t),
            "vulkan: glsl via vulkan, gpu, 1024 threads/workgroup, 65535 loop limit, fma; lowering: "
            "split_reductions>=" +
                std::to_string(kSplitMinTrips));
  EXPECT_EQ(describe(cpu_target(false)).find("lowering: lower_groups tile_threads") != std::string::npos, true);
}

}  // namespace
}  // namespace ember

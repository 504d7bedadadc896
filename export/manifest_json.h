// manifest.json (docs/export.md, format version 1) from a HostPlan: deterministic text (keys in
// a fixed order, two-space indentation, short objects and arrays of scalars on one line), so
// the same program exports byte-identical manifests.
#pragma once
#include <string>

#include "core/target/target.h"
#include "export/host_plan.h"

namespace ember {

constexpr int kManifestVersion = 1;

// The export target's name ("spirv", "glsl", "hlsl", "cpp") and its file extension per kernel.
struct ExportTarget {
  std::string name;
  KernelApi api = KernelApi::vulkan_glsl;
  std::string ext;         // of the file an engine loads: .spv, .comp, .hlsl, .cpp
  std::string source_ext;  // of the readable source (.comp for spirv; == ext otherwise)
  TargetInfo target;       // what the kernels are lowered for (no device: its parallelism unknown)
};

// The manifest of `plan`; kernel files are named <kernel name><ext> after the kernel whose file
// each runs (PlanKernel::file_of).
std::string manifest_json(const HostPlan& plan, const ExportTarget& target);

}  // namespace ember

// em.export's driver: takes a traced program through the pipeline as the target's backend would
// (GPU targets keep workgroups; cpp lowers them and tiles threads, as the CPU backend), builds the
// host plan (export/host_plan.h), prints one readable kernel file per distinct kernel with the
// user's source lines as comments, compiles SPIR-V for the spirv target, and writes the manifest.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/ir/node.h"

namespace ember {

struct ExportFile {
  std::string name;   // a file name in the export directory
  std::string bytes;  // text, or SPIR-V words
};

struct ExportResult {
  std::string manifest;  // manifest.json's text
  std::vector<ExportFile> files;
};

// Exports `traced` (a program as traced; it is cloned) for `target` ("spirv", "glsl", "hlsl",
// "cpp"). `dims`: values the caller can give for symbolic dims (example arguments, --dim); they
// are fixed only when the plan needs them (host math the manifest cannot express on a symbolic
// dim). Throws BackendError for an unknown target or one the manifest cannot bind (cuda), CompileError
// for a program the manifest cannot express (naming the step and the user's line).
ExportResult export_program(const Program& traced, const std::string& target,
                            const std::vector<std::pair<std::string, int64_t>>& dims = {});

}  // namespace ember

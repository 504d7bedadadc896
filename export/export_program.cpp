#include "export/export_program.h"

#include <cstring>

#include "codegen/c_printer.h"
#include "core/ir/builder.h"
#include "core/passes/pipeline.h"
#include "export/host_plan.h"
#include "export/manifest_json.h"
#ifdef EMBER_WITH_VULKAN
#include "backends/vulkan/vulkan.h"
#endif

namespace ember {

namespace {

// An exported GPU program keeps a reduction in one thread per output (no split_reductions: an
// engine runs the kernels the manifest lists, and the split's partial buffers and stage kernels
// have not been through the runner and glue tests yet). Exported C++ has no contract_fma: it may
// be built for a CPU without FMA (fmaf would be a libm call).
TargetInfo export_target(const std::string& name, TargetLanguage language, TargetApi api) {
  TargetInfo t = api == TargetApi::host ? cpu_target(false) : gpu_target(name, language, api);
  t.name = name;
  t.resident_threads = 0;  // not this machine's
  t.split_reductions = 0;
  return t;
}

ExportTarget target_of(const std::string& name) {
  if (name == "spirv")
    return {name, KernelApi::vulkan_glsl, ".spv", ".comp", export_target(name, TargetLanguage::glsl, TargetApi::vulkan)};
  if (name == "glsl")
    return {name, KernelApi::opengl, ".comp", ".comp", export_target(name, TargetLanguage::glsl, TargetApi::opengl)};
  if (name == "hlsl")
    return {name, KernelApi::d3d11_hlsl, ".hlsl", ".hlsl", export_target(name, TargetLanguage::hlsl, TargetApi::d3d11)};
  if (name == "cpp") return {name, KernelApi::cpp, ".cpp", ".cpp", export_target(name, TargetLanguage::cpp, TargetApi::host)};
  if (name == "cuda")
    throw BackendError("ember.export: target 'cuda' is not available yet: the manifest has no CUDA kernel "
                       "interface (prog.source('cuda') prints the kernels; use spirv, glsl, hlsl or cpp)");
  throw BackendError("ember.export: unknown target '" + name + "' (expected spirv, glsl, hlsl or cpp)");
}

// `p` lowered for the target, with `fixed` dims replaced by constants first.
std::unique_ptr<Program> lower(const Program& traced, const TargetInfo& target,
                               const std::vector<std::pair<std::string, int64_t>>& fixed) {
  std::unique_ptr<Program> p = clone_program(traced);
  for (const auto& [name, value] : fixed)
    for (Node* d : p->dims)
      if (d->name == name) {
        Builder b(*p);
        b.set_insert_before(p->root()->first_child);
        p->replace_all_uses(d, b.i32(static_cast<int32_t>(value)));
      }
  run_pipeline(*p, pipeline_options(target));
  return p;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

std::string kernel_file(const HostPlan& plan, const PlanKernel& k, const ExportTarget& t) {
  const Dialect& d = abi_dialect(k.abi);
  PrintOptions opt;
  opt.source_comments = true;
  const GeneratedKernel g = generate_kernel(k.kernel, d, opt);
  std::string text = d.comment + k.name + ": kernel " + std::to_string(&k - plan.kernels.data()) + " of " +
                     plan.program + ", exported by Ember " + EMBER_VERSION + " (target " + t.name +
                     "; bindings and parameters: manifest.json)\n";
  if (t.api == KernelApi::cpp) text += "#include \"" + plan.program + "_kernels.h\"\n";
  text += unit_prelude(d, {&g.source}) + "\n" + replace_all(g.source, g.symbol, k.name);
  return text;
}

std::string cpp_header(const HostPlan& plan) {
  std::string h = "// " + plan.program + "_kernels.h: the kernels of " + plan.program + ", exported by Ember " +
                  EMBER_VERSION + " (target cpp; buffers and the host plan: manifest.json).\n"
                  "// Each kernel runs threads [begin, end) of its dispatch; mem[i] is the buffer at binding i,\n"
                  "// params[i] the word of parameter field p<i>.\n#pragma once\n#include <cstdint>\n\n";
  for (const PlanKernel& k : plan.kernels)
    if (k.file_of == static_cast<size_t>(&k - plan.kernels.data()))
      h += "extern \"C\" void " + k.name + "(uint32_t* const* mem, const uint32_t* params, int64_t begin, int64_t end);\n";
  return h;
}

std::string spirv_bytes(const std::string& source) {
#ifdef EMBER_WITH_VULKAN
  bool hit = false;
  auto words = vk::compile_spirv(source, vk::Language::glsl, "main", &hit);
  std::string bytes(words->size() * 4, '\0');
  std::memcpy(bytes.data(), words->data(), bytes.size());
  return bytes;
#else
  throw BackendError("ember.export: target 'spirv' needs Ember built with the Vulkan backend (shaderc)");
#endif
}

}  // namespace

ExportResult export_program(const Program& traced, const std::string& target,
                            const std::vector<std::pair<std::string, int64_t>>& dims) {
  const ExportTarget t = target_of(target);
  std::unique_ptr<Program> p = lower(traced, t.target, {});
  HostPlan plan;
  try {
    plan = build_host_plan(*p, t.api);
  } catch (const CompileError&) {
    if (dims.empty()) throw;
    // Host math on a symbolic dim the manifest cannot express: fix the dims the caller gave.
    p = lower(traced, t.target, dims);
    plan = build_host_plan(*p, t.api, dims, &traced);
  }
  ExportResult r;
  r.manifest = manifest_json(plan, t);
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const PlanKernel& k = plan.kernels[i];
    if (k.file_of != i) continue;
    const std::string text = kernel_file(plan, k, t);
    r.files.push_back({k.name + t.source_ext, text});
    if (t.name == "spirv") r.files.push_back({k.name + t.ext, spirv_bytes(text)});
  }
  if (t.api == KernelApi::cpp) r.files.push_back({plan.program + "_kernels.h", cpp_header(plan)});
  return r;
}

}  // namespace ember

// Kernels to pipelines: the dialect variant a kernel needs on this device, GLSL/HLSL -> SPIR-V
// with shaderc in process (memory cache, then `<key>.spv` on disk, keyed by the source, the
// backend, the language, the entry point, the shaderc options and Ember's version; the shader
// source is kept next to it as `<key>.glsl` / `<key>.hlsl`), and compute pipelines created
// through the driver's VkPipelineCache (saved to the cache directory by the backend).
#include <shaderc/shaderc.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "backends/compile_cache.h"
#include "backends/gpu_runtime.h"
#include "backends/vulkan/vulkan.h"

#ifndef EMBER_VERSION
#define EMBER_VERSION "unknown"
#endif

namespace ember::vk {

namespace {

// SPIR-V 1.3 for Vulkan 1.1; no spirv-opt pass (the driver optimizes; it would double the
// compile time of a cold start).
constexpr const char* kShadercFlags = "vulkan1.1 spirv1.3 O0";

std::vector<uint32_t> run_shaderc(const std::string& source, Language lang, const std::string& entry,
                                  const std::string& source_path) {
  static shaderc_compiler_t compiler = shaderc_compiler_initialize();  // thread-safe, never released
  shaderc_compile_options_t o = shaderc_compile_options_initialize();
  shaderc_compile_options_set_source_language(
      o, lang == Language::hlsl ? shaderc_source_language_hlsl : shaderc_source_language_glsl);
  shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
  shaderc_compile_options_set_target_spirv(o, shaderc_spirv_version_1_3);
  shaderc_compile_options_set_optimization_level(o, shaderc_optimization_level_zero);
  shaderc_compilation_result_t r = shaderc_compile_into_spv(compiler, source.data(), source.size(), shaderc_compute_shader,
                                                            source_path.c_str(), entry.c_str(), o);
  shaderc_compile_options_release(o);
  std::vector<uint32_t> words;
  const bool ok = shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
  if (ok) {
    size_t n = shaderc_result_get_length(r);
    words.resize(n / 4);
    std::memcpy(words.data(), shaderc_result_get_bytes(r), words.size() * 4);
  }
  std::string msg = shaderc_result_get_error_message(r) ? shaderc_result_get_error_message(r) : "";
  shaderc_result_release(r);
  if (!ok)
    throw CompileError("ember: shaderc failed to compile a generated " + std::string(language_name(lang)) +
                       " kernel\n  source: " + source_path + "\n" + first_lines(msg, 30));
  return words;
}

}  // namespace

const char* language_name(Language l) { return l == Language::hlsl ? "hlsl" : "glsl"; }

KernelLayout kernel_layout(const Node* kernel, Language lang, const CodegenOptions& o) {
  const Context& c = context();
  // EMBER_VULKAN_NO_FLOAT_ATOMICS=1 forces the compare-and-swap lowering (tests use it).
  const char* no_native = std::getenv("EMBER_VULKAN_NO_FLOAT_ATOMICS");
  AbiLimits limits;
  limits.max_push_bytes = static_cast<int>(c.max_push_words() * 4);
  limits.float_atomic_add = c.float_atomic_add && !(no_native && *no_native && *no_native != '0');
  limits.fast_math = o.fast_math;
  KernelLayout l;
  l.abi = kernel_abi(kernel, lang == Language::hlsl ? KernelApi::vulkan_hlsl : KernelApi::vulkan_glsl, limits);
  const auto& lim = c.props.limits;
  check_workgroup_limits(kernel, lim.maxComputeWorkGroupInvocations, lim.maxComputeWorkGroupSize[0],
                         lim.maxComputeSharedMemorySize, c.description);
  const size_t bindings = l.abi.bindings.size() + (l.params_in_buffer() ? 1 : 0);
  if (bindings > c.props.limits.maxPerStageDescriptorStorageBuffers)
    throw BackendError("ember: kernel #" + std::to_string(kernel->index) + " uses " + std::to_string(bindings) +
                       " buffers; " + c.description + " binds at most " +
                       std::to_string(c.props.limits.maxPerStageDescriptorStorageBuffers) + " per shader");
  return l;
}

const Dialect& kernel_dialect(Language lang, const KernelLayout& layout) { return abi_dialect(layout.abi); }

std::string shader_source(const GeneratedKernel& k, const Dialect& d) {
  return generated_header(d, ": " + k.symbol) + unit_prelude(d, {&k.source}) + "\n" + k.source;
}

std::shared_ptr<const std::vector<uint32_t>> compile_spirv(const std::string& source, Language lang,
                                                           const std::string& entry, bool* hit) {
  std::string keyed = source;
  keyed += '\0';
  keyed += "vulkan";
  keyed += '\0';
  keyed += language_name(lang);
  keyed += '\0' + entry + '\0' + kShadercFlags + '\0' + EMBER_VERSION;
  const std::string key = "vk-" + content_hash(keyed);
  if (auto a = memory_cache_get(key)) {
    *hit = true;
    return std::static_pointer_cast<const std::vector<uint32_t>>(a);
  }
  std::lock_guard<std::mutex> lock(cache_key_mutex(key));
  if (auto a = memory_cache_get(key)) {
    *hit = true;
    return std::static_pointer_cast<const std::vector<uint32_t>>(a);
  }
  auto spirv = std::make_shared<std::vector<uint32_t>>();
  std::string bytes;
  *hit = false;
  if (disk_entry_check(key, "spv") && read_file(disk_entry_path(key, "spv"), bytes)) {
    if (!bytes.empty() && bytes.size() % 4 == 0) {
      spirv->resize(bytes.size() / 4);
      std::memcpy(spirv->data(), bytes.data(), bytes.size());
      *hit = (*spirv)[0] == 0x07230203u;  // the SPIR-V magic number; anything else is rebuilt
    }
    if (!*hit) disk_entry_corrupt(key, "spv", "not SPIR-V");
  }
  if (!*hit) {
    // A cache directory that cannot be written only costs compile time (one warning).
    std::string src_path = disk_entry_path(key, language_name(lang));
    try {
      write_file_atomic(src_path, source);
    } catch (const BackendError& e) {
      cache_unwritable(e.what());
      src_path = "(not saved: the compile cache cannot be written)";
    }
    *spirv = run_shaderc(source, lang, entry, src_path);
    try {
      std::string tmp = cache_temp_path(key, ".spv");
      write_file_atomic(tmp, std::string(reinterpret_cast<const char*>(spirv->data()), spirv->size() * 4));
      disk_entry_commit(key, "spv", tmp);
    } catch (const BackendError& e) {
      cache_unwritable(e.what());
    }
  }
  memory_cache_put(key, spirv);
  return spirv;
}

std::vector<uint32_t> with_denorm_preserve(const std::vector<uint32_t>& spirv) {
  constexpr uint32_t kOpExtension = 10, kOpEntryPoint = 15, kOpExecutionMode = 16, kOpCapability = 17;
  constexpr uint32_t kCapDenormPreserve = 4464, kModeDenormPreserve = 4459;
  if (spirv.size() < 5 || spirv[0] != 0x07230203u) return spirv;
  // Where each section ends, and the entry points.
  size_t caps_end = 5, exts_end = 0, modes_end = 0;
  std::vector<uint32_t> entries;
  for (size_t at = 5; at < spirv.size();) {
    const uint32_t n = spirv[at] >> 16, op = spirv[at] & 0xffffu;
    if (n == 0 || at + n > spirv.size()) return spirv;  // malformed: leave it to the driver
    if (op == kOpCapability) {
      if (spirv[at + 1] == kCapDenormPreserve) return spirv;
      caps_end = at + n;
    }
    if (op == kOpExtension) exts_end = at + n;
    if (op == kOpEntryPoint && n >= 3) entries.push_back(spirv[at + 2]);
    if (op == kOpEntryPoint || op == kOpExecutionMode) modes_end = at + n;
    at += n;
  }
  if (entries.empty()) return spirv;
  if (exts_end == 0) exts_end = caps_end;
  // OpExtension "SPV_KHR_float_controls": the string, nul-terminated, in little-endian words.
  const char name[] = "SPV_KHR_float_controls";
  std::vector<uint32_t> ext((sizeof name + 3) / 4, 0u);
  std::memcpy(ext.data(), name, sizeof name);
  std::vector<uint32_t> out(spirv.begin(), spirv.begin() + static_cast<long>(caps_end));
  out.push_back((2u << 16) | kOpCapability);
  out.push_back(kCapDenormPreserve);
  out.insert(out.end(), spirv.begin() + static_cast<long>(caps_end), spirv.begin() + static_cast<long>(exts_end));
  out.push_back(static_cast<uint32_t>(1 + ext.size()) << 16 | kOpExtension);
  out.insert(out.end(), ext.begin(), ext.end());
  out.insert(out.end(), spirv.begin() + static_cast<long>(exts_end), spirv.begin() + static_cast<long>(modes_end));
  for (uint32_t id : entries) {
    out.push_back((4u << 16) | kOpExecutionMode);
    out.push_back(id);
    out.push_back(kModeDenormPreserve);
    out.push_back(32u);
  }
  out.insert(out.end(), spirv.begin() + static_cast<long>(modes_end), spirv.end());
  return out;
}

Pipeline::~Pipeline() {
  Context& c = context();
  if (pipeline) vkDestroyPipeline(c.device, pipeline, nullptr);
  if (layout) vkDestroyPipelineLayout(c.device, layout, nullptr);
  if (set_layout) vkDestroyDescriptorSetLayout(c.device, set_layout, nullptr);
  if (module) vkDestroyShaderModule(c.device, module, nullptr);
  count_object(-1);
}

std::shared_ptr<Pipeline> make_pipeline(const std::vector<uint32_t>& spirv, const std::string& entry, int bindings,
                                        uint32_t push_bytes, bool* created) {
  std::string keyed(reinterpret_cast<const char*>(spirv.data()), spirv.size() * 4);
  keyed += '\0' + entry + '\0' + std::to_string(bindings) + '\0' + std::to_string(push_bytes);
  const std::string key = "vkpipe-" + content_hash(keyed);
  *created = false;
  if (auto a = memory_cache_get(key)) return std::static_pointer_cast<Pipeline>(a);
  std::lock_guard<std::mutex> lock(cache_key_mutex(key));
  if (auto a = memory_cache_get(key)) return std::static_pointer_cast<Pipeline>(a);

  Context& c = context();
  auto p = std::make_shared<Pipeline>();
  p->bindings = bindings;
  p->push_bytes = push_bytes;
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = spirv.size() * 4;
  mi.pCode = spirv.data();
  check(vkCreateShaderModule(c.device, &mi, nullptr, &p->module), "vkCreateShaderModule");

  std::vector<VkDescriptorSetLayoutBinding> b(static_cast<size_t>(bindings));
  for (int i = 0; i < bindings; ++i) {
    b[static_cast<size_t>(i)].binding = static_cast<uint32_t>(i);
    b[static_cast<size_t>(i)].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[static_cast<size_t>(i)].descriptorCount = 1;
    b[static_cast<size_t>(i)].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = static_cast<uint32_t>(b.size());
  li.pBindings = b.data();
  check(vkCreateDescriptorSetLayout(c.device, &li, nullptr, &p->set_layout), "vkCreateDescriptorSetLayout");

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p->set_layout;
  pli.pushConstantRangeCount = push_bytes ? 1 : 0;
  pli.pPushConstantRanges = push_bytes ? &range : nullptr;
  check(vkCreatePipelineLayout(c.device, &pli, nullptr, &p->layout), "vkCreatePipelineLayout");

  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = p->module;
  ci.stage.pName = entry.c_str();
  ci.layout = p->layout;
  check(vkCreateComputePipelines(c.device, c.pipeline_cache, 1, &ci, nullptr, &p->pipeline), "vkCreateComputePipelines");
  *created = true;
  memory_cache_put(key, p);
  return p;
}

}  // namespace ember::vk

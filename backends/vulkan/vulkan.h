// The Vulkan backend's internals (DESIGN §4), one concern per file:
//   vulkan_device.cpp    instance, device selection, the process-wide context, pipeline cache
//   vulkan_memory.cpp    buffers: host-visible, persistently mapped, pooled; tensors over them
//   vulkan_compile.cpp   GLSL/HLSL -> SPIR-V with shaderc in process, through the compile
//                        cache; compute pipelines
//   vulkan_dispatch.cpp  the KernelRunner: records a host plan's dispatches into command
//                        buffers with barriers between dependent dispatches, submits lazily
//   vulkan_backend.cpp   the Backend: kernels printed in the glsl or hlsl dialect
// The host plan runs in the interpreter (no C++ compiler is involved); kernels go through
// shaderc and the driver only.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/gpu_kernel.h"
#include "backends/kernel_abi.h"
#include "codegen/c_printer.h"
#include "codegen/dialect.h"

namespace ember::vk {

// Throws ember::BackendError naming the call and the VkResult unless `r` is VK_SUCCESS.
void check(VkResult r, const char* what);
const char* result_name(VkResult r);

// The process-wide Vulkan device. Created on first use and never destroyed (tensors held by
// Python may outlive every static).
struct Context {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties memory{};
  uint32_t buffer_memory_type = 0;   // host-visible, host-coherent (see vulkan_memory.cpp)
  bool float_atomic_add = false;     // shaderBufferFloat32AtomicAdd enabled
  // VK_KHR_shader_float_controls enabled with shaderDenormPreserveFloat32: pipelines get the
  // DenormPreserve execution mode (with_denorm_preserve), so subnormal f32 values survive
  // arithmetic (lavapipe does not report it, and preserves them anyway).
  bool denorm_preserve = false;
  bool validation = false;           // VK_LAYER_KHRONOS_validation enabled
  bool gpu = false;                  // a discrete, integrated or virtual GPU (not lavapipe)
  // Most loop iterations (summed over all loops) one invocation may run; 0: no limit. Mesa's
  // llvmpipe/lavapipe silently ends every loop of a shader after 65535 back-edges in total.
  int64_t loop_limit = 0;
  std::string description;           // "llvmpipe (LLVM 15.0.6, 256 bits) via Vulkan 1.3"
  std::string device_key;            // identifies device + driver in cache keys
  VkPipelineCache pipeline_cache = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  std::mutex queue_mutex;            // vkQueueSubmit needs the queue externally synchronized
  std::mutex pipeline_cache_mutex;

  uint32_t max_push_words() const { return props.limits.maxPushConstantsSize / 4; }
};

// The context; throws ember::BackendError with the reason when there is no usable device.
Context& context();
// "" when a Vulkan device can be used, else why not (never throws).
std::string unavailable_reason();
// Validation-layer errors reported so far (tests expect none).
int validation_errors();
// Writes the driver's pipeline cache to the compile cache directory (after new pipelines).
void save_pipeline_cache();
// Destroys the process-wide context, which is otherwise never destroyed: drops the memory cache
// (its pipelines) and the pooled buffers, then destroys the pipeline cache, device and instance.
// Only when nothing made on the device is still alive (a tensor, pipeline or compiled program):
// otherwise returns false and keeps the context. After it returns true the Vulkan backends are
// unavailable in this process (context() throws). For leak checkers and C++ hosts at exit: the
// C++ tests call it last (lavapipe and the validation layer hold live objects where
// LeakSanitizer cannot see them, so a device kept to the end reads as leaked).
bool shutdown();
// Counts the objects made on the device (buffers, pipelines, runners): +1 made, -1 destroyed.
void count_object(int delta);

// A storage buffer in host-visible memory, mapped for its whole life. Freed buffers go back
// to a pool by size class; a buffer is only pooled once no queued work uses it (runners hold
// tensors' owners until their command buffers complete).
struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  VkDeviceSize bytes = 0;
};
std::shared_ptr<Buffer> buffer_acquire(VkDeviceSize bytes);
// A tensor whose words live in a fresh device buffer (zero-filled when `zero`).
HostTensor device_tensor(DType t, const std::vector<int64_t>& shape, bool zero);
// The live device buffer whose mapping starts at `data`, or null (host memory).
Buffer* find_buffer(const void* data);
// Drops the pooled free buffers (tests; memory pressure).
void buffer_pool_trim();

// A compute pipeline for one kernel's SPIR-V: descriptor set layout with one storage buffer
// per memory (+ one for the params when params_in_buffer), push constants for the header and
// params otherwise.
struct Pipeline {
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  int bindings = 0;
  uint32_t push_bytes = 0;
  Pipeline() { count_object(1); }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
  ~Pipeline();
};

// The kernel language of a Vulkan backend and how one kernel is printed for this device.
enum class Language { glsl, hlsl };
const char* language_name(Language l);
// The layout itself comes from backends/kernel_abi.h (shared with em.export).
struct KernelLayout {
  KernelAbi abi;
  // More params than push constants hold: abi.params lives in a storage buffer.
  bool params_in_buffer() const { return abi.params.kind == ParamBlockKind::storage_buffer; }
};
KernelLayout kernel_layout(const Node* kernel, Language lang, const CodegenOptions& o);
const Dialect& kernel_dialect(Language lang, const KernelLayout& layout);
// The whole shader of one printed kernel (a comment, the prelude, the kernel).
std::string shader_source(const GeneratedKernel& k, const Dialect& d);
// `spirv` with the DenormPreserve execution mode for 32-bit floats on every entry point (SPIR-V
// float controls: its capability and the SPV_KHR_float_controls extension too); unchanged when it
// has it already. For devices with Context::denorm_preserve.
std::vector<uint32_t> with_denorm_preserve(const std::vector<uint32_t>& spirv);

// SPIR-V for a shader, from the memory cache, the disk cache or shaderc. Adds to
// info.compile_ms; `hit` tells whether it came from a cache. Throws CompileError.
std::shared_ptr<const std::vector<uint32_t>> compile_spirv(const std::string& source, Language lang,
                                                           const std::string& entry, bool* hit);
// A pipeline (memory-cached by SPIR-V and layout; created through the driver's pipeline cache).
std::shared_ptr<Pipeline> make_pipeline(const std::vector<uint32_t>& spirv, const std::string& entry, int bindings,
                                        uint32_t push_bytes, bool* created);

// One compiled kernel as the runner dispatches it; access says which memory slots the kernel
// loads from and stores or atomically updates (for barriers); loops feed Context::loop_limit
// (backends/gpu_kernel.h).
struct KernelBinary {
  std::shared_ptr<Pipeline> pipeline;
  bool params_in_buffer = false;
  MemoryAccess access;
  std::vector<LoopBound> loops;
};
// The KernelRunner of a compiled program (vulkan_dispatch.cpp). `written_inputs`: argument
// positions the program stores into, copied back to the caller's memory after each run.
std::unique_ptr<KernelRunner> make_runner(std::unordered_map<int, KernelBinary> kernels, std::vector<int> written_inputs);

// make_backend("vulkan") / make_backend("vulkan-hlsl").
std::unique_ptr<Backend> make_backend(Language lang);

}  // namespace ember::vk

// The Vulkan instance and device: one per process, created on first use. Device selection:
// $EMBER_VULKAN_DEVICE (an index or a name substring) if set, else a discrete GPU, then an
// integrated GPU, then a virtual GPU, then a CPU device such as Mesa's lavapipe; the device
// must have a compute queue. Native float atomic add is enabled where the device has it.
// Validation layers are on in debug builds (and with EMBER_VULKAN_VALIDATION=1) when
// VK_LAYER_KHRONOS_validation is installed; their messages go to stderr.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "backends/compile_cache.h"
#include "backends/gpu_runtime.h"
#include "backends/vulkan/vulkan.h"

#ifndef EMBER_VERSION
#define EMBER_VERSION "unknown"
#endif

namespace ember::vk {

namespace {

std::atomic<int> g_validation_errors{0};
std::atomic<Context*> g_created{nullptr};  // the context, once create() succeeded
std::atomic<bool> g_shut_down{false};       // shutdown() destroyed it
std::atomic<int> g_objects{0};              // count_object

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* data,
                                          void*) {
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ++g_validation_errors;
  if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT))
    std::fprintf(stderr, "ember: vulkan validation: %s\n", data && data->pMessage ? data->pMessage : "?");
  return VK_FALSE;
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(n);
  if (vkEnumerateInstanceLayerProperties(&n, layers.data()) != VK_SUCCESS) return false;
  for (const VkLayerProperties& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

bool has_device_extension(VkPhysicalDevice d, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> ext(n);
  vkEnumerateDeviceExtensionProperties(d, nullptr, &n, ext.data());
  for (const VkExtensionProperties& e : ext)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// Lower is better: discrete, integrated, virtual, CPU, other.
int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

int compute_queue_family(VkPhysicalDevice d) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(d, &n, nullptr);
  std::vector<VkQueueFamilyProperties> q(n);
  vkGetPhysicalDeviceQueueFamilyProperties(d, &n, q.data());
  int best = -1;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    // A compute-only family first (an async compute queue), else any with compute.
    if (!(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) return static_cast<int>(i);
    if (best < 0) best = static_cast<int>(i);
  }
  return best;
}

std::string pipeline_cache_path(const Context& c) {
  return cache_dir() + "/vk-pipeline-cache-" + content_hash(c.device_key) + ".bin";
}

void create(Context& c) {
  const bool want_validation =
#ifndef NDEBUG
      !std::getenv("EMBER_VULKAN_VALIDATION") ||
#endif
      env_on("EMBER_VULKAN_VALIDATION");
  const char* kValidation = "VK_LAYER_KHRONOS_validation";
  c.validation = want_validation && has_layer(kValidation);

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "ember";
  app.pEngineName = "ember";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  std::vector<const char*> layers, inst_ext;
  if (c.validation) {
    layers.push_back(kValidation);
    inst_ext.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  ici.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ici.ppEnabledLayerNames = layers.data();
  ici.enabledExtensionCount = static_cast<uint32_t>(inst_ext.size());
  ici.ppEnabledExtensionNames = inst_ext.data();
  VkResult r = vkCreateInstance(&ici, nullptr, &c.instance);
  if (r != VK_SUCCESS)
    throw BackendError(std::string("ember: no Vulkan driver (vkCreateInstance: ") + result_name(r) +
                       "); install a Vulkan driver, e.g. Debian's mesa-vulkan-drivers for the CPU device lavapipe");
  if (c.validation) {
    auto make = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(c.instance, "vkCreateDebugUtilsMessengerEXT"));
    if (make) {
      VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
      mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
      mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
      mi.pfnUserCallback = on_message;
      make(c.instance, &mi, nullptr, &c.messenger);
    }
  }

  uint32_t count = 0;
  vkEnumeratePhysicalDevices(c.instance, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  vkEnumeratePhysicalDevices(c.instance, &count, devices.data());
  std::string seen;
  int best = -1, best_rank = 1 << 30;
  const char* pick = std::getenv("EMBER_VULKAN_DEVICE");
  for (uint32_t i = 0; i < count; ++i) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(devices[i], &p);
    seen += std::string(seen.empty() ? "" : ", ") + "#" + std::to_string(i) + " " + p.deviceName;
    if (p.apiVersion < VK_API_VERSION_1_1 || compute_queue_family(devices[i]) < 0) continue;
    int rank = type_rank(p.deviceType) * 64 + static_cast<int>(i);
    if (pick && *pick) {
      bool match = std::to_string(i) == pick || std::strstr(p.deviceName, pick) != nullptr;
      if (!match) continue;
    }
    if (rank < best_rank) { best_rank = rank; best = static_cast<int>(i); }
  }
  if (best < 0)
    throw BackendError(count == 0 ? std::string("ember: no Vulkan device found (the driver lists none)")
                                  : "ember: no usable Vulkan device (need Vulkan 1.1 with a compute queue" +
                                        std::string(pick && *pick ? std::string(", matching EMBER_VULKAN_DEVICE=") + pick : "") +
                                        "); devices: " + seen);
  c.physical = devices[static_cast<size_t>(best)];
  vkGetPhysicalDeviceProperties(c.physical, &c.props);
  vkGetPhysicalDeviceMemoryProperties(c.physical, &c.memory);
  c.queue_family = static_cast<uint32_t>(compute_queue_family(c.physical));
  c.gpu = type_rank(c.props.deviceType) <= 2;
  if (std::strncmp(c.props.deviceName, "llvmpipe", 8) == 0) c.loop_limit = 65535;  // LP_MAX_TGSI_LOOP_ITERATIONS

  // Optional features.
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  std::vector<const char*> dev_ext;
  const bool has_atomic_float = has_device_extension(c.physical, VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
  if (has_atomic_float) features.pNext = &atomic_float;
  vkGetPhysicalDeviceFeatures2(c.physical, &features);
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT enable_float{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 enable{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  if (has_atomic_float && atomic_float.shaderBufferFloat32AtomicAdd) {
    enable_float.shaderBufferFloat32Atomics = atomic_float.shaderBufferFloat32Atomics;
    enable_float.shaderBufferFloat32AtomicAdd = VK_TRUE;
    enable.pNext = &enable_float;
    dev_ext.push_back(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
    c.float_atomic_add = true;
  }
  // Subnormal floats kept by arithmetic where the device can promise it (SPIR-V float controls):
  // Ember's math functions keep subnormal inputs and results (codegen/shader_math.h).
  if (has_device_extension(c.physical, VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME)) {
    VkPhysicalDeviceFloatControlsPropertiesKHR fc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES_KHR};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &fc;
    vkGetPhysicalDeviceProperties2(c.physical, &p2);
    if (fc.shaderDenormPreserveFloat32) {
      dev_ext.push_back(VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME);
      c.denorm_preserve = true;
    }
  }

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = c.queue_family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &enable;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = static_cast<uint32_t>(dev_ext.size());
  dci.ppEnabledExtensionNames = dev_ext.data();
  check(vkCreateDevice(c.physical, &dci, nullptr, &c.device), "vkCreateDevice");
  vkGetDeviceQueue(c.device, c.queue_family, 0, &c.queue);

  // Buffers: host-visible and coherent (mapped for life; see vulkan_memory.cpp), preferring
  // host-cached memory for fast readback.
  int best_type = -1, best_score = -1;
  for (uint32_t i = 0; i < c.memory.memoryTypeCount; ++i) {
    VkMemoryPropertyFlags f = c.memory.memoryTypes[i].propertyFlags;
    if (!(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) || !(f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)) continue;
    int score = (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) ? 1 : 0;
    if (score > best_score) { best_score = score; best_type = static_cast<int>(i); }
  }
  if (best_type < 0) throw BackendError(std::string("ember: Vulkan device ") + c.props.deviceName + " has no host-visible coherent memory");
  c.buffer_memory_type = static_cast<uint32_t>(best_type);

  const uint32_t v = c.props.apiVersion;
  c.description = std::string(c.props.deviceName) + " via Vulkan " + std::to_string(VK_API_VERSION_MAJOR(v)) + "." +
                  std::to_string(VK_API_VERSION_MINOR(v));
  char uuid[2 * VK_UUID_SIZE + 1];
  for (unsigned i = 0; i < VK_UUID_SIZE; ++i) std::snprintf(uuid + 2 * i, 3, "%02x", c.props.pipelineCacheUUID[i]);
  c.device_key = std::string(c.props.deviceName) + "|" + std::to_string(c.props.vendorID) + "|" +
                 std::to_string(c.props.deviceID) + "|" + std::to_string(c.props.driverVersion) + "|" + uuid + "|" +
                 EMBER_VERSION;

  // The driver's pipeline cache, loaded from the compile cache directory; a file the driver
  // rejects is ignored (and replaced on the next save).
  std::string data;
  VkPipelineCacheCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  try {
    if (read_file(pipeline_cache_path(c), data)) {
      pci.initialDataSize = data.size();
      pci.pInitialData = data.data();
    }
  } catch (const BackendError&) {
  }
  if (vkCreatePipelineCache(c.device, &pci, nullptr, &c.pipeline_cache) != VK_SUCCESS) {
    pci.initialDataSize = 0;
    pci.pInitialData = nullptr;
    check(vkCreatePipelineCache(c.device, &pci, nullptr, &c.pipeline_cache), "vkCreatePipelineCache");
  }
  g_created = &c;
}

}  // namespace

const char* result_name(VkResult r) {
  switch (r) {
#define EMBER_VK_RESULT(x) case x: return #x;
    EMBER_VK_RESULT(VK_SUCCESS) EMBER_VK_RESULT(VK_NOT_READY) EMBER_VK_RESULT(VK_TIMEOUT)
    EMBER_VK_RESULT(VK_INCOMPLETE) EMBER_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    EMBER_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY) EMBER_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    EMBER_VK_RESULT(VK_ERROR_DEVICE_LOST) EMBER_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    EMBER_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT) EMBER_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    EMBER_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT) EMBER_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    EMBER_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS) EMBER_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    EMBER_VK_RESULT(VK_ERROR_FRAGMENTED_POOL) EMBER_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
#undef EMBER_VK_RESULT
    default: return "VkResult(?)";
  }
}

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw BackendError(std::string("ember: Vulkan call ") + what + " failed: " + result_name(r));
}

Context& context() {
  if (g_shut_down.load(std::memory_order_acquire))
    throw BackendError("ember: the Vulkan backend was shut down in this process (vk::shutdown)");
  return process_context(create);
}

void count_object(int delta) { g_objects += delta; }

bool shutdown() {
  Context* c = g_created.load();
  if (!c || g_shut_down.load()) return true;
  memory_cache_clear();  // releases the pipelines no compiled program holds
  buffer_pool_trim();
  if (g_objects.load() != 0) return false;
  g_shut_down = true;
  vkDeviceWaitIdle(c->device);
  vkDestroyPipelineCache(c->device, c->pipeline_cache, nullptr);
  vkDestroyDevice(c->device, nullptr);
  if (c->messenger) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(c->instance, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(c->instance, c->messenger, nullptr);
  }
  vkDestroyInstance(c->instance, nullptr);
  c->pipeline_cache = VK_NULL_HANDLE;
  c->messenger = VK_NULL_HANDLE;
  c->device = VK_NULL_HANDLE;
  c->instance = VK_NULL_HANDLE;
  return true;
}

std::string unavailable_reason() { return unavailable_reason_of(context); }

int validation_errors() { return g_validation_errors.load(); }

void save_pipeline_cache() {
  Context& c = context();
  std::lock_guard<std::mutex> lock(c.pipeline_cache_mutex);
  size_t size = 0;
  if (vkGetPipelineCacheData(c.device, c.pipeline_cache, &size, nullptr) != VK_SUCCESS || size == 0) return;
  std::string data(size, '\0');
  if (vkGetPipelineCacheData(c.device, c.pipeline_cache, &size, data.data()) != VK_SUCCESS) return;
  data.resize(size);
  try {
    write_file_atomic(pipeline_cache_path(c), data);
  } catch (const BackendError& e) {  // a read-only cache directory only costs pipeline build time
    cache_unwritable(e.what());
  }
}

}  // namespace ember::vk

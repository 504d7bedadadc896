// Backend selection by name (DESIGN §4): "cpu" always; "vulkan" / "vulkan-hlsl" when built with
// EMBER_WITH_VULKAN and a device exists; "opengl" when built with EMBER_WITH_OPENGL and a GL 4.5
// context can be created; "auto" picks the best available device.
#include "backends/backend.h"

#include <fstream>
#include <thread>

#include "backends/cpu/cpu.h"
#ifdef EMBER_WITH_VULKAN
#include "backends/vulkan/vulkan.h"
#endif
#ifdef EMBER_WITH_OPENGL
#include "backends/opengl/opengl.h"
#endif

namespace ember {

namespace {

bool is_vulkan(const std::string& name) { return name == "vulkan" || name == "vulkan-hlsl"; }

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown CPU";
}

}  // namespace

std::vector<std::string> built_backends() {
  std::vector<std::string> b = {"cpu"};
#ifdef EMBER_WITH_VULKAN
  b.insert(b.end(), {"vulkan", "vulkan-hlsl"});
#endif
#ifdef EMBER_WITH_OPENGL
  b.push_back("opengl");
#endif
  return b;
}

std::string backend_unavailable(const std::string& name) {
  if (name == "cpu" || name == "auto") return "";
  if (is_vulkan(name)) {
#ifdef EMBER_WITH_VULKAN
    return vk::unavailable_reason();
#else
    return "ember: backend '" + name + "' is not built into this Ember (configure with -DEMBER_WITH_VULKAN=ON)";
#endif
  }
  if (name == "opengl") {
#ifdef EMBER_WITH_OPENGL
    return gl::unavailable_reason();
#else
    return "ember: backend 'opengl' is not built into this Ember (configure with -DEMBER_WITH_OPENGL=ON)";
#endif
  }
  if (name == "cuda") return "ember: backend '" + name + "' is not available in this build";
  return "ember: unknown backend '" + name + "' (expected cpu, vulkan, vulkan-hlsl, opengl, cuda or auto)";
}

std::string resolve_backend(const std::string& name) {
  if (name != "auto") return name;
#ifdef EMBER_WITH_VULKAN
  // Probed once: creating the Vulkan instance is the cost of asking.
  static const bool gpu = vk::unavailable_reason().empty() && vk::context().gpu;
  if (gpu) return "vulkan";
#endif
  return "cpu";
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  const std::string resolved = resolve_backend(name);
  if (resolved == "cpu") return make_cpu_backend();
#ifdef EMBER_WITH_VULKAN
  if (is_vulkan(resolved)) return vk::make_backend(resolved == "vulkan-hlsl" ? vk::Language::hlsl : vk::Language::glsl);
#endif
#ifdef EMBER_WITH_OPENGL
  if (resolved == "opengl") return gl::make_backend();
#endif
  throw BackendError(backend_unavailable(resolved));
}

std::string device_info(const std::string& name) {
  const std::string resolved = resolve_backend(name);
  if (resolved == "cpu")
    return cpu_model() + " (" + std::to_string(std::thread::hardware_concurrency()) + " threads, C++/OpenMP)";
#ifdef EMBER_WITH_VULKAN
  if (is_vulkan(resolved)) return vk::context().description;
#endif
#ifdef EMBER_WITH_OPENGL
  if (resolved == "opengl") return gl::context().description;
#endif
  throw BackendError(backend_unavailable(resolved));
}

}  // namespace ember

// Backend selection by name (DESIGN §4), from one table of backends: "cpu" always; "vulkan" /
// "vulkan-hlsl" when built with EMBER_WITH_VULKAN and a device exists; "opengl" when built with
// EMBER_WITH_OPENGL and a GL 4.5 context can be created; "cuda" when built with EMBER_WITH_CUDA
// and the driver finds a device; "auto" picks the best available device.
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
#include "backends/cuda/cuda.h"

namespace ember {

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown CPU";
}

// One backend: its name, whether this Ember has it, why it cannot run here ("" when it can), how
// it is made and how its device is described. The #ifdefs are here only: the rest of this file
// reads the table.
struct BackendEntry {
  const char* name;
  bool built;
  const char* not_built;  // why, when !built
  std::string (*unavailable)();
  std::unique_ptr<Backend> (*make)();
  std::string (*describe)();
};

std::string none() { return ""; }

const std::vector<BackendEntry>& backend_table() {
  static const std::vector<BackendEntry> table = {
      {"cpu", true, "", none, make_cpu_backend,
       [] {
         return cpu_model() + " (" + std::to_string(std::thread::hardware_concurrency()) + " threads, C++/OpenMP)";
       }},
#ifdef EMBER_WITH_VULKAN
      {"vulkan", true, "", vk::unavailable_reason, [] { return vk::make_backend(vk::Language::glsl); },
       [] { return vk::context().description; }},
      {"vulkan-hlsl", true, "", vk::unavailable_reason, [] { return vk::make_backend(vk::Language::hlsl); },
       [] { return vk::context().description; }},
#else
      {"vulkan", false, "configure with -DEMBER_WITH_VULKAN=ON", nullptr, nullptr, nullptr},
      {"vulkan-hlsl", false, "configure with -DEMBER_WITH_VULKAN=ON", nullptr, nullptr, nullptr},
#endif
#ifdef EMBER_WITH_OPENGL
      {"opengl", true, "", gl::unavailable_reason, gl::make_backend, [] { return gl::context().description; }},
#else
      {"opengl", false, "configure with -DEMBER_WITH_OPENGL=ON", nullptr, nullptr, nullptr},
#endif
#ifdef EMBER_WITH_CUDA
      {"cuda", true, "", cuda::unavailable_reason, cuda::make_backend, cuda::device_description},
#else
      {"cuda", false, "configure with -DEMBER_WITH_CUDA=ON and the CUDA Toolkit installed", nullptr, nullptr, nullptr},
#endif
  };
  return table;
}

const BackendEntry* find_entry(const std::string& name) {
  for (const BackendEntry& e : backend_table())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace

std::vector<std::string> built_backends() {
  std::vector<std::string> b;
  for (const BackendEntry& e : backend_table())
    if (e.built) b.push_back(e.name);
  return b;
}

std::string backend_unavailable(const std::string& name) {
  if (name == "auto") return "";
  const BackendEntry* e = find_entry(name);
  if (!e) return "ember: unknown backend '" + name + "' (expected cpu, vulkan, vulkan-hlsl, opengl, cuda or auto)";
  if (!e->built) return "ember: backend '" + name + "' is not built into this Ember (" + e->not_built + ")";
  return e->unavailable();
}

std::string resolve_backend(const std::string& name) {
  if (name != "auto") return name;
  // Probed once each: creating a context is the cost of asking.
  static const std::string pick = [] {
    const BackendEntry* cuda = find_entry("cuda");
    if (cuda && cuda->built && cuda->unavailable().empty()) return std::string("cuda");
#ifdef EMBER_WITH_VULKAN
    if (vk::unavailable_reason().empty() && vk::context().gpu) return std::string("vulkan");  // not lavapipe
#endif
    return std::string("cpu");
  }();
  return pick;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  const std::string resolved = resolve_backend(name);
  const std::string why = backend_unavailable(resolved);
  if (!why.empty()) throw BackendError(why);
  return find_entry(resolved)->make();
}

std::string device_info(const std::string& name) {
  const std::string resolved = resolve_backend(name);
  const std::string why = backend_unavailable(resolved);
  if (!why.empty()) throw BackendError(why);
  return find_entry(resolved)->describe();
}

}  // namespace ember

// Backend selection by name (DESIGN §4): "cpu" always; "auto" picks the best available device.
#include "backends/backend.h"

#include "backends/cpu/cpu.h"

namespace ember {

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "cpu" || name == "auto") return make_cpu_backend();  // auto: no GPU backend is built yet
  if (name == "vulkan" || name == "opengl" || name == "cuda")
    throw BackendError("ember: backend '" + name + "' is not available in this build (only 'cpu' is)");
  throw BackendError("ember: unknown backend '" + name + "' (expected cpu, vulkan, opengl, cuda or auto)");
}

}  // namespace ember

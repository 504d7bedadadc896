// Backends and devices: which backends this Ember has, whether one can run here (and why not),
// what "auto" resolves to, and the device a backend runs on (em.device_info()).
#include "backends/backend.h"
#include "bindings.h"

namespace ember::python {

void bind_backends(py::module_& m) {
  m.def("built_backends", &built_backends, "Backends built into this Ember, whether or not their device is present.");
  m.def("backend_unavailable", &backend_unavailable, py::arg("name"),
        "'' when the backend can run on this machine, else the reason.");
  m.def("resolve_backend", &resolve_backend, py::arg("name"),
        "The backend 'auto' stands for here (cuda, then a GPU Vulkan device, then cpu); other names unchanged.");
  m.def("device_info", [](const std::string& name) {
    py::gil_scoped_release nogil;
    return device_info(name);
  }, py::arg("name"), "The device the backend runs on, in words.");
}

}  // namespace ember::python

// Backends and devices: which backends this Ember has, whether one can run here (and why not),
// what "auto" resolves to, and the device a backend runs on (em.device_info()).
#include "backends/backend.h"
#include "bindings.h"
#ifdef EMBER_WITH_OPENGL
#include "backends/opengl/opengl.h"
#endif

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
#ifdef EMBER_WITH_OPENGL
  m.def("opengl_info", [] {
    const gl::Context* ctx = nullptr;
    bool binaries = false;
    {
      py::gil_scoped_release nogil;  // the first call creates the context
      ctx = &gl::context();
      binaries = gl::program_binaries();
    }
    const gl::Context& c = *ctx;
    py::dict d;
    d["renderer"] = c.renderer;
    d["version"] = c.version;
    d["context"] = c.kind == gl::Context::Kind::glfw ? "glfw" : "egl";
    d["binary_formats"] = c.binary_formats;
    d["program_binaries"] = binaries;
    d["float_atomic_add"] = c.float_atomic_add;
    d["max_storage_buffers"] = c.max_storage_blocks;
    d["loop_limit"] = c.loop_limit;
    return d;
  }, "The OpenGL context's renderer, version, kind (glfw or egl) and limits (tests, debugging).");
#endif
}

}  // namespace ember::python

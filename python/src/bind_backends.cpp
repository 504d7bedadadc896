// Backends and devices: which backends this Ember has, whether one can run here (and why not),
// what "auto" resolves to, and the device a backend runs on (em.device_info()).
#include "backends/backend.h"
#include "backends/cpu/cpu.h"
#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_memory.h"
#include "backends/cuda/cuda_nvrtc.h"
#include "codegen/c_printer.h"
#include "codegen/kernel_signature.h"
#include "bindings.h"
#include "core/ir/printer.h"
#include "core/trace/tracer.h"
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
  // Batch compiling of cpu kernels (backends/cpu/cpu.h; the differential fuzzer uses it).
  m.def("_cpu_set_deferred", &cpu_set_deferred, py::arg("on"),
        "While on, compiling for cpu keeps the program's kernels for _cpu_compile_deferred() (the program runs "
        "nothing).");
  m.def("_cpu_compile_deferred", [](bool compile) {
    py::gil_scoped_release nogil;
    return cpu_compile_deferred(compile);
  }, py::arg("compile") = true,
     "Compiles every kept cpu kernel together into the compile cache (compile=False: forgets them); returns how "
     "many were kept.");
  // CUDA code generation and NVRTC, usable without a GPU (tests/python/test_cuda_codegen.py).
  m.def("_nvrtc_built", &cuda::nvrtc_built, "Whether this Ember was built with NVRTC (EMBER_WITH_CUDA).");
  m.def("_nvrtc_version", &cuda::nvrtc_version, "NVRTC's version, e.g. '13.0'.");
  m.def("_nvrtc_archs", &cuda::nvrtc_archs, "The compute capabilities NVRTC targets (80 for sm_80).");
  m.def("_nvrtc_compile", [](const std::string& source, const std::string& name, int arch, bool cubin) {
    cuda::NvrtcResult r;
    {
      py::gil_scoped_release nogil;
      r = cuda::nvrtc_compile(source, name, arch, cubin);
    }
    return py::make_tuple(py::bytes(r.image), r.log, r.ms);
  }, py::arg("source"), py::arg("name"), py::arg("arch"), py::arg("cubin") = false,
     "(PTX or CUBIN bytes, log, ms) of CUDA source compiled by NVRTC for compute capability `arch`.");
  m.def("_cuda_kernels", [](Tracer& tracer, bool fast_math) {
    py::gil_scoped_release nogil;
    return cuda::distinct_kernels(*cuda::lower(tracer.program()), cuda_dialect(fast_math));
  }, py::arg("tracer"), py::arg("fast_math") = false,
     "[(symbol, text)]: the tracer's program lowered as the cuda backend does, its distinct kernels in the cuda "
     "dialect (with the builtin math functions when `fast_math`).");
  m.def("_cuda_ir", [](Tracer& tracer) {
    py::gil_scoped_release nogil;
    std::unique_ptr<Program> p = cuda::lower(tracer.program());
    KernelClasses classes = group_kernels(*p);
    std::vector<DistinctKernel> distinct = generate_distinct_kernels(classes, cuda_dialect(false));
    std::vector<std::string> symbols;
    for (size_t i = 0; i < classes.kernels.size(); ++i) symbols.push_back(distinct[classes.class_of[i]].code.symbol);
    return std::make_pair(print_program(*p), symbols);
  }, py::arg("tracer"),
     "(IR text, [symbol]): the tracer's program lowered as the cuda backend does, printed, and the symbol of "
     "each kernel's _cuda_kernels text in program order (bench/gpu_model.py counts the IR's loads, stores and "
     "float operations).");
  m.def("_cuda_buffer_device", [](uintptr_t data) { return cuda::buffer_device(reinterpret_cast<const void*>(data)); },
        py::arg("data"), "The CUDA device of a tensor's memory (its _data_ptr) when the cuda backend owns it, else -1.");
  m.def("_cuda_synchronize", [] {
    py::gil_scoped_release nogil;
    cuda::synchronize_stream();
  }, "Waits for the cuda backend's queued launches (before another library reads its memory).");
  m.def("_cuda_translation_unit", [](const std::vector<std::string>& texts, bool fast_math) {
    return cuda::translation_unit(texts, cuda_dialect(fast_math));
  }, py::arg("kernel_texts"), py::arg("fast_math") = false,
     "One CUDA translation unit (header, prelude and the math functions the kernels call, the kernel texts).");
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

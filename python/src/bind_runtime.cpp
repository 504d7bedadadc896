// Runtime: ember::HostTensor as the Python class `ember.Tensor` (dense row-major 32-bit words;
// bool is one word per element, converted at the NumPy boundary) and ember::CompiledProgram
// (run, kernel_count, ir, source, stats). NumPy input memory is borrowed, not copied: the
// HostTensor's owner holds a reference to the array while the tensor lives.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bindings.h"
#include "core/interp/interp.h"
#include "ember/ember.h"

namespace ember::python {

namespace {
int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A tensor owning fresh zero-filled host memory (like HostTensor::alloc, without needing the
// interpreter library).
HostTensor make_tensor(DType t, std::vector<int64_t> shape) {
  auto mem = std::make_shared<std::vector<uint32_t>>(static_cast<size_t>(std::max<int64_t>(numel(shape), 1)));
  HostTensor h;
  h.dtype = t;
  h.shape = std::move(shape);
  h.data = mem->data();
  h.owner = mem;
  return h;
}

const char* numpy_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::i32: return "int32";
    case DType::u32: return "uint32";
    case DType::boolean: return "uint32";  // converted to bool after the copy
    default: throw ember::TypeError("tensor has no element type");
  }
}

// Wraps (copy=false) or copies (copy=true) a C-contiguous NumPy array of 4-byte elements.
HostTensor from_numpy(const py::array& arr, DType t, bool copy) {
  if (arr.itemsize() != 4) throw ember::TypeError("em.Tensor needs 4-byte elements, got " + std::to_string(arr.itemsize()));
  if (!(arr.flags() & py::array::c_style)) throw ember::TypeError("em.Tensor needs a C-contiguous array");
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  if (copy) {
    HostTensor h = make_tensor(t, shape);
    std::memcpy(h.data, arr.data(), static_cast<size_t>(numel(shape)) * 4);
    return h;
  }
  HostTensor h;
  h.dtype = t;
  h.shape = std::move(shape);
  h.data = static_cast<uint32_t*>(const_cast<void*>(arr.data()));
  // The array stays alive as long as the tensor; the reference is dropped under the GIL.
  h.owner = std::shared_ptr<void>(new py::object(arr), [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
  return h;
}

py::array to_numpy(const HostTensor& h) {
  py::array out(py::dtype(numpy_name(h.dtype)), h.shape);
  if (numel(h.shape) > 0) std::memcpy(out.mutable_data(), h.data, static_cast<size_t>(numel(h.shape)) * 4);
  if (h.dtype == DType::boolean) return out.attr("astype")("bool");
  return out;
}

py::tuple shape_tuple(const HostTensor& h) {
  py::tuple t(h.shape.size());
  for (size_t i = 0; i < h.shape.size(); ++i) t[i] = py::int_(h.shape[i]);
  return t;
}

void bind_tensor(py::module_& m) {
  py::class_<HostTensor>(m, "Tensor", "A runtime tensor: dense row-major 32-bit words in host memory (CPU backend).")
      .def_static("_from_numpy", &from_numpy, py::arg("array"), py::arg("dtype"), py::arg("copy"),
                  "Wraps (copy=False) or copies a C-contiguous array of 4-byte elements.")
      .def_static("_zeros", [](const std::vector<int64_t>& shape, DType t) { return make_tensor(t, shape); })
      .def_property_readonly("shape", &shape_tuple, "The shape as a tuple of ints.")
      .def_property_readonly("_dtype_name", [](const HostTensor& h) { return std::string(dtype_name(h.dtype)); })
      .def_property_readonly("ndim", [](const HostTensor& h) { return h.shape.size(); })
      .def_property_readonly("size", [](const HostTensor& h) { return numel(h.shape); })
      .def_property_readonly("_data_ptr", [](const HostTensor& h) { return reinterpret_cast<uintptr_t>(h.data); })
      .def("numpy", &to_numpy, "A NumPy copy of the tensor (bool words become np.bool_).");
}

// Whether `out` points into the memory of one of the inputs (then it must be copied, so the
// result never aliases the caller's array).
bool aliases_input(const HostTensor& out, const std::vector<ArgValue>& args) {
  for (const ArgValue& a : args) {
    if (!a.is_tensor || !a.tensor.data) continue;
    const uint32_t* b = a.tensor.data;
    const uint32_t* e = b + numel(a.tensor.shape);
    if (out.data >= b && out.data < e) return true;
  }
  return false;
}

py::dict stats_dict(const ProgramStats& s) {
  py::list passes;
  for (const PassRecord& r : s.passes) {
    py::dict d;
    d["name"] = r.name;
    d["ms"] = r.ms;
    d["changed"] = r.changed;
    passes.append(d);
  }
  py::dict d;
  d["passes"] = passes;
  d["passes_ms"] = s.passes_ms;
  d["codegen_ms"] = s.codegen_ms;
  d["compile_ms"] = s.compile_ms;
  d["cache_hit"] = s.cache_hit;
  d["kernels"] = s.kernels;
  d["buffers"] = s.buffers;
  d["cache_key"] = s.cache_key;
  return d;
}

void bind_program(py::module_& m) {
  py::class_<CompiledProgram>(m, "CompiledProgram", "A traced program compiled for one backend.")
      .def(py::init([](Tracer& tracer, const std::string& backend) {
        std::unique_ptr<Program> p = tracer.release();
        py::gil_scoped_release nogil;
        return std::make_unique<CompiledProgram>(std::move(p), backend);
      }), py::arg("tracer"), py::arg("backend"), "Takes the tracer's program through the pipeline and compiles it.")
      .def("run", [](CompiledProgram& cp, const py::list& args) {
        std::vector<ArgValue> in;
        in.reserve(args.size());
        for (py::handle a : args) {
          if (py::isinstance<HostTensor>(a)) in.push_back(ArgValue::of_tensor(a.cast<HostTensor>()));
          else in.push_back(ArgValue::of_word(static_cast<uint32_t>(a.cast<uint64_t>() & 0xffffffffu)));
        }
        std::vector<HostTensor> out;
        {
          py::gil_scoped_release nogil;
          out = cp.run(in);
          for (HostTensor& h : out)
            if (aliases_input(h, in)) {
              HostTensor c = make_tensor(h.dtype, h.shape);
              std::memcpy(c.data, h.data, static_cast<size_t>(numel(h.shape)) * 4);
              h = std::move(c);
            }
        }
        py::list res;
        for (HostTensor& h : out) res.append(py::cast(std::move(h)));
        in.clear();
        return res;
      }, py::arg("args"), "Runs with tensors (em.Tensor) and scalar words (int) by position.")
      .def_property_readonly("kernel_count", &CompiledProgram::kernel_count)
      .def("ir", &CompiledProgram::ir, py::arg("stage") = "final")
      .def("source", &CompiledProgram::source, py::arg("lang"))
      .def_property_readonly("stats", [](const CompiledProgram& cp) { return stats_dict(cp.stats()); })
      .def_property_readonly("backend_name", &CompiledProgram::backend_name);
}
}  // namespace

void bind_runtime(py::module_& m) {
  bind_tensor(m);
  bind_program(m);
}

}  // namespace ember::python

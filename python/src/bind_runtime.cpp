// Runtime: ember::HostTensor as the Python class `ember.Tensor` (dense row-major 32-bit words;
// bool is one word per element, converted at the NumPy boundary) and ember::CompiledProgram
// (run, kernel_count, ir, source, stats). NumPy input memory is borrowed, not copied: the
// HostTensor's owner holds a reference to the array while the tensor lives.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/compile_cache.h"
#include "backends/gpu_kernel.h"
#include "bindings.h"
#include "core/analysis/explain.h"
#include "core/interp/interp.h"
#include "core/ir/verifier.h"
#include "core/passes/pipeline.h"
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
  py::class_<HostTensor>(m, "Tensor", R"doc(A runtime tensor: what compiled programs return and take.

Its elements are dense row-major 32-bit words (f32, i32, u32, or bool as one word each) in host
memory on the cpu backend, in device memory on the GPU backends (then passing it back in uses it
in place). Make one with em.tensor(array) or em.zeros(shape, dtype); read it with .numpy(),
np.asarray(t), .item() or .tolist().

>>> t = em.tensor(np.random.default_rng(0).normal(size=(2, 3)))
>>> isinstance(t, em.Tensor), t.shape, t.dtype, t.size
(True, (2, 3), em.f32, 6)
>>> np.asarray(t).shape
(2, 3)
)doc")
      .def_static("_from_numpy", &from_numpy, py::arg("array"), py::arg("dtype"), py::arg("copy"),
                  "Wraps (copy=False) or copies a C-contiguous array of 4-byte elements.")
      .def_static("_zeros", [](const std::vector<int64_t>& shape, DType t) { return make_tensor(t, shape); })
      .def_property_readonly("shape", &shape_tuple, R"doc(The shape as a tuple of ints.

>>> em.zeros((4, 2, 3)).shape
(4, 2, 3)
)doc")
      .def_property_readonly("_dtype_name", [](const HostTensor& h) { return std::string(dtype_name(h.dtype)); })
      .def_property_readonly("ndim", [](const HostTensor& h) { return h.shape.size(); }, R"doc(The number of axes (0 for a scalar).

>>> em.zeros((4, 2, 3)).ndim, em.tensor(np.float32(1.5)).ndim
(3, 0)
)doc")
      .def_property_readonly("size", [](const HostTensor& h) { return numel(h.shape); }, R"doc(The number of elements (the product of the shape).

>>> em.zeros((4, 2, 3)).size
24
)doc")
      .def_property_readonly("_data_ptr", [](const HostTensor& h) { return reinterpret_cast<uintptr_t>(h.data); })
      .def("numpy", &to_numpy, R"doc(A NumPy copy of the tensor (from device memory on the GPU backends; bool words become ``np.bool_``).

>>> a = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
>>> b = em.tensor(a).numpy()
>>> b.dtype, bool(np.array_equal(a, b)), b is a
(dtype('float32'), True, False)
)doc");
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
    d["cpu_ms"] = r.cpu_ms;
    d["changed"] = r.changed;
    d["visits"] = r.visits;
    passes.append(d);
  }
  py::dict d;
  d["passes"] = passes;
  d["passes_ms"] = s.passes_ms;
  d["passes_cpu_ms"] = s.passes_cpu_ms;
  d["codegen_ms"] = s.codegen_ms;
  d["compile_ms"] = s.compile_ms;
  d["cache_hit"] = s.cache_hit;
  d["kernels"] = s.kernels;
  d["distinct_kernels"] = s.distinct_kernels;
  d["compiled_kernels"] = s.compiled_kernels;
  d["translation_units"] = s.translation_units;
  d["buffers"] = s.buffers;
  d["buffer_shapes"] = s.buffer_shapes;
  d["cache_key"] = s.cache_key;
  d["tape_bytes"] = s.tape_bytes;
  d["program_cache_hit"] = s.program_cache_hit;
  d["program_cache_key"] = s.program_cache_key;
  d["traced_digest"] = s.traced_digest;
  d["linked"] = s.linked;
  d["host"] = s.host;
  d["host_reason"] = s.host_reason;
  d["host_plan_ms"] = s.host_plan_ms;
  return d;
}

void bind_program(py::module_& m) {
  py::class_<CompiledProgram>(m, "CompiledProgram", "A traced program compiled for one backend.")
      .def(py::init([](Tracer& tracer, const std::string& backend, const std::string& traced_text,
                       const std::string& schedule, bool keep_trace, bool fast_math) {
        std::unique_ptr<Program> p = tracer.release();
        p->schedule = schedule;
        CodegenOptions codegen;
        codegen.fast_math = fast_math;
        py::gil_scoped_release nogil;
        return std::make_unique<CompiledProgram>(std::move(p), backend, traced_text, keep_trace, codegen);
      }), py::arg("tracer"), py::arg("backend"), py::arg("traced_text") = std::string(),
         py::arg("schedule") = std::string(), py::arg("keep_trace") = true, py::arg("fast_math") = false,
         "Takes the tracer's program through the pipeline (or loads it from the program cache) and compiles it; "
         "`traced_text`: tracer.print(), when the caller has it; `schedule`: em.Program.schedule's requests, one a "
         "line (core/passes/apply_schedule.h); `keep_trace`: keep a copy of the traced program for ir(stage) and "
         "explain() (has_trace); `fast_math`: the GPU dialects' math ops as builtins (CodegenOptions).")
      .def_static("from_program_cache", [](const std::string& digest, const std::string& backend, bool fast_math) {
        CodegenOptions codegen;
        codegen.fast_math = fast_math;
        py::gil_scoped_release nogil;
        return CompiledProgram::from_program_cache(digest, backend, codegen);
      }, py::arg("traced_digest"), py::arg("backend"), py::arg("fast_math") = false,
         "The program of an earlier compile's stats['traced_digest'], loaded from the program cache and compiled "
         "without tracing; None when the program cache is off or has no good entry for it.")
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
      .def("explain", &CompiledProgram::explain)
      .def("source", &CompiledProgram::source, py::arg("lang"))
      .def_property_readonly("stats", [](const CompiledProgram& cp) { return stats_dict(cp.stats()); })
      .def_property_readonly("backend_name", &CompiledProgram::backend_name)
      .def_property_readonly("has_trace", &CompiledProgram::has_trace,
                             "Whether ir(stage) and explain() can run (the traced program was kept).")
      .def_property_readonly("written_args", [](const CompiledProgram& cp) {
        std::vector<int> w = written_inputs(cp.program());
        std::sort(w.begin(), w.end());
        w.erase(std::unique(w.begin(), w.end()), w.end());
        return w;
      }, "Positions of the tensor arguments the program stores into.");
  m.def("_content_hash", [](const py::bytes& b) { return content_hash(std::string(b)); },
        "The compile cache's content hash of some bytes (tests write consistent checksum files with it).");
  m.def("_program_cache_enabled", [] { return program_cache_enabled(); },
        "Whether the program cache is on (EMBER_PROGRAM_CACHE, EMBER_VERIFY, EMBER_DEBUG); the trace cache follows it.");
  m.def("_build_id", [] { return build_id(); }, "This Ember build's identity (version and binary), part of cache keys.");
  m.def("_cache_entry_read", [](const std::string& key, const std::string& ext) -> py::object {
        std::string bytes;
        if (!disk_entry_read(key, ext, bytes)) return py::none();
        return py::bytes(bytes);
      }, py::arg("key"), py::arg("ext"),
        "The bytes of the disk cache entry `<key>.<ext>`, or None (missing, or bad: removed with a warning).");
  m.def("_cache_entry_write", [](const std::string& key, const std::string& ext, const py::bytes& data) {
        try {
          const std::string tmp = cache_temp_path(key, "." + ext);
          write_file_atomic(tmp, std::string(data));
          disk_entry_commit(key, ext, tmp);
        } catch (const BackendError& e) {
          cache_unwritable(e.what());
        }
      }, py::arg("key"), py::arg("ext"), py::arg("data"),
        "Writes the disk cache entry `<key>.<ext>` atomically with its checksum (warns once if the cache cannot "
        "be written).");
  m.def("_register_source", &register_source, py::arg("file"), py::arg("lines"),
        "Lines of a source that is not a readable file (doctest, notebook), for loop and memory names.");
  m.def("_cache_dir", [] { return cache_dir(); },
        "The disk cache's directory ($EMBER_CACHE_DIR, else ~/.cache/ember; created if missing).");
  m.def("_memory_cache_stats", [] { return py::make_tuple(memory_cache_size(), memory_cache_capacity()); },
        "(entries, capacity) of the process-wide compile memory cache.");
}
// The interpreter's results on a copy of the tracer's program as traced and after every pass of
// the pipeline that changed it (as the named backend runs the pipeline), with the verifier after
// each: [(stage, [outputs]), ...]. A pass that throws ends the list with ("error:<pass>", message).
// The differential fuzzer (tests/fuzz) compares the stages with each other and with NumPy.
py::list interpret_stages(Tracer& tracer, const py::list& args, bool lower_groups, bool tile_threads,
                          bool contract_fma, const std::string& schedule, int64_t split_reductions) {
  std::vector<ArgValue> in;
  for (py::handle a : args) {
    if (py::isinstance<HostTensor>(a)) in.push_back(ArgValue::of_tensor(a.cast<HostTensor>()));
    else in.push_back(ArgValue::of_word(static_cast<uint32_t>(a.cast<uint64_t>() & 0xffffffffu)));
  }
  // Each stage runs on private copies of the tensor arguments (a program may write its inputs).
  auto fresh_args = [&] {
    std::vector<ArgValue> c = in;
    for (ArgValue& a : c)
      if (a.is_tensor) {
        HostTensor t = make_tensor(a.tensor.dtype, a.tensor.shape);
        if (numel(t.shape) > 0) std::memcpy(t.data, a.tensor.data, static_cast<size_t>(numel(t.shape)) * 4);
        a.tensor = std::move(t);
      }
    return c;
  };
  std::vector<std::pair<std::string, std::vector<HostTensor>>> stages;
  std::string failed_pass, failure;
  {
    py::gil_scoped_release nogil;
    std::unique_ptr<Program> p = clone_program(tracer.program());
    p->schedule = schedule;  // as CompiledProgram gets it, so apply_schedule runs here too
    auto record = [&](const std::string& name, Program& q) {
      std::vector<ArgValue> a = fresh_args();
      std::vector<HostTensor> outs = interpret(q, a);
      for (const ArgValue& v : a)
        if (v.is_tensor) outs.push_back(v.tensor);  // inputs after the run: writes to them count
      stages.emplace_back(name, std::move(outs));
    };
    std::string current = "traced";
    try {
      record("traced", *p);
      PipelineOptions opt;
      opt.lower_groups = lower_groups;
      opt.tile_threads = tile_threads;
      opt.contract_fma = contract_fma;
      opt.split_reductions = split_reductions;
      opt.after_pass = [&](const char* pass, Program& q, bool changed, bool formed) {
        current = std::string("after ") + pass;
        if (!changed) return;
        verify(q, VerifyOptions{formed});
        record(pass, q);
      };
      run_pipeline(*p, opt);
    } catch (const std::exception& e) {
      failed_pass = current;
      failure = e.what();
    }
  }
  py::list res;
  for (auto& [name, outs] : stages) {
    py::list l;
    for (HostTensor& h : outs) l.append(to_numpy(h));
    res.append(py::make_tuple(name, l));
  }
  if (!failure.empty()) res.append(py::make_tuple("error:" + failed_pass, failure));
  return res;
}
}  // namespace

void bind_runtime(py::module_& m) {
  bind_tensor(m);
  bind_program(m);
  m.def("interpret_stages", &interpret_stages, py::arg("tracer"), py::arg("args"), py::arg("lower_groups"),
        py::arg("tile_threads"), py::arg("contract_fma") = false, py::arg("schedule") = std::string(),
        py::arg("split_reductions") = 0, "The interpreter's outputs (and inputs after the run) as traced and after "
        "every pass that changed the IR: [(stage, [arrays])]; a failing pass ends it with ('error:<pass>', message).");
}

}  // namespace ember::python

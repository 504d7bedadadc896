// Shared declarations of the `_ember` extension module: one bind_* function per concept, each
// in its own file (bind_errors.cpp, bind_trace.cpp, bind_runtime.cpp, bind_backends.cpp,
// bind_window.cpp, bind_export.cpp, bind_log.cpp, bind_dlpack.cpp), called from module.cpp.

#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace ember::python {

void bind_errors(py::module_& m);
void bind_trace(py::module_& m);
void bind_runtime(py::module_& m);
void bind_backends(py::module_& m);
void bind_window(py::module_& m);
void bind_export(py::module_& m);
void bind_log(py::module_& m);
void bind_dlpack(py::module_& m);

}  // namespace ember::python

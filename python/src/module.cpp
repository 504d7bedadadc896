// The `_ember` extension module: a thin binding over Ember's C++ API. The Python package
// `ember` (python/ember/*.py) builds the user-facing API on top of it.
#include "bindings.h"

PYBIND11_MODULE(_ember, m) {
  m.doc() = "Ember's C++ core: errors, tracing and the compiled-program runtime";
#ifdef EMBER_VERSION
  m.attr("__version__") = EMBER_VERSION;
#endif
  ember::python::bind_errors(m);
  ember::python::bind_trace(m);
  ember::python::bind_runtime(m);
  ember::python::bind_backends(m);
  ember::python::bind_window(m);
  ember::python::bind_export(m);
  ember::python::bind_log(m);
  ember::python::bind_dlpack(m);
}

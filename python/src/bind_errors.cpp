// Errors (DESIGN §6): C++ ember::*Error exceptions become the Python classes ember.Error,
// ember.ShapeError (also a ValueError), ember.TypeError (also a built-in TypeError),
// ember.CompileError, ember.BackendError and ember.InternalError.
#include <string>

#include "bindings.h"
#include "core/ir/error.h"

namespace ember::python {

namespace {
// Owned for the life of the process: translators may run during interpreter shutdown.
PyObject* g_error = nullptr;
PyObject* g_shape = nullptr;
PyObject* g_type = nullptr;
PyObject* g_compile = nullptr;
PyObject* g_backend = nullptr;
PyObject* g_internal = nullptr;

PyObject* new_class(py::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
  py::tuple b(bases.size());
  size_t i = 0;
  for (PyObject* base : bases) b[i++] = py::reinterpret_borrow<py::object>(base);
  std::string qual = std::string("ember.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qual.c_str(), doc, b.ptr(), nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(cls));
  return cls;  // the new reference is kept forever
}

template <class E>
[[noreturn]] void throw_kind(const std::string& msg) { throw E(msg); }
}  // namespace

void bind_errors(py::module_& m) {
  g_error = new_class(m, "Error", {PyExc_Exception}, "Base class of every error Ember raises.");
  g_shape = new_class(m, "ShapeError", {g_error, PyExc_ValueError},
                      "Shapes do not match (broadcasting, indexing, call-time arguments).");
  g_type = new_class(m, "TypeError", {g_error, PyExc_TypeError},
                     "A dtype or kind of value is wrong (annotations, arguments, operands).");
  g_compile = new_class(m, "CompileError", {g_error}, "A program could not be compiled.");
  g_backend = new_class(m, "BackendError", {g_error}, "A backend is unknown, not built or failed.");
  g_internal = new_class(m, "InternalError", {g_error},
                         "A bug in Ember: carries Ember's file:line and the failed condition.");

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ember::ShapeError& e) {
      PyErr_SetString(g_shape, e.what());
    } catch (const ember::TypeError& e) {
      PyErr_SetString(g_type, e.what());
    } catch (const ember::CompileError& e) {
      PyErr_SetString(g_compile, e.what());
    } catch (const ember::BackendError& e) {
      PyErr_SetString(g_backend, e.what());
    } catch (const ember::InternalError& e) {
      PyErr_SetString(g_internal, e.what());
    } catch (const ember::Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });

  // Test hook: throws the C++ error of the given kind so the translation can be checked.
  m.def("_throw", [](const std::string& kind, const std::string& msg) {
    if (kind == "ShapeError") throw_kind<ember::ShapeError>(msg);
    if (kind == "TypeError") throw_kind<ember::TypeError>(msg);
    if (kind == "CompileError") throw_kind<ember::CompileError>(msg);
    if (kind == "BackendError") throw_kind<ember::BackendError>(msg);
    if (kind == "InternalError") throw_kind<ember::InternalError>(msg);
    throw_kind<ember::Error>(msg);
  });
}

}  // namespace ember::python

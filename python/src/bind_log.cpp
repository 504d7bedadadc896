// The C++ log (core/support/log.h) into Python's `logging`: the package (python/ember/_log.py)
// hands its `ember` logger to _set_log_sink, and every C++ message written on a Python thread
// becomes a record of it (the GIL is taken for the call).
#include <atomic>
#include <cstdio>

#include "bindings.h"
#include "core/support/log.h"

namespace ember::python {

namespace {

py::object* g_logger = nullptr;  // the `ember` logging.Logger; never destroyed (C++ may log at exit)
std::atomic<int> g_level{30};    // its effective level when a Python thread last asked

// Whether this thread is one Python knows (it has a thread state). Threads C++ starts (the
// compile workers of parallel_for) do not call into Python: the thread that started them may
// hold the GIL while it waits for them. They use the level last seen and write to stderr.
bool python_thread() { return Py_IsInitialized() && PyGILState_GetThisThreadState() != nullptr; }

bool sink_enabled(LogLevel level) {
  if (!python_thread()) return static_cast<int>(level) >= g_level.load();
  py::gil_scoped_acquire gil;
  try {
    if (!g_logger) return false;
    g_level = g_logger->attr("getEffectiveLevel")().cast<int>();
    return g_logger->attr("isEnabledFor")(static_cast<int>(level)).cast<bool>();
  } catch (const py::error_already_set&) {
    return false;
  }
}

void sink_write(LogLevel level, const std::string& text) {
  const char* tag = level >= LogLevel::error ? "error: " : level >= LogLevel::warning ? "warning: " : "";
  if (!python_thread()) {
    std::fprintf(stderr, "ember: %s%s\n", tag, text.c_str());
    return;
  }
  py::gil_scoped_acquire gil;
  try {
    if (g_logger) g_logger->attr("log")(static_cast<int>(level), text);
  } catch (const py::error_already_set& e) {  // a broken handler must not break a compile
    std::fprintf(stderr, "ember: %s%s (the logging handler failed: %s)\n", tag, text.c_str(), e.what());
  }
}

}  // namespace

void bind_log(py::module_& m) {
  m.def(
      "_set_log_sink",
      [](py::object logger) {
        if (logger.is_none()) {
          set_log_sink({});
          return;
        }
        if (!g_logger) g_logger = new py::object();
        *g_logger = std::move(logger);
        g_level = g_logger->attr("getEffectiveLevel")().cast<int>();
        set_log_sink({&sink_enabled, &sink_write});
      },
      py::arg("logger"), "Sends the C++ log to this logging.Logger (None: back to stderr under EMBER_LOG).");
}

}  // namespace ember::python

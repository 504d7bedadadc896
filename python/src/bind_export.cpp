// em.export's C++ half (export/export_program.h): the manifest and the kernel files of a traced
// program; the Python package (ember/export) writes them and adds engine glue.
#include "bindings.h"
#include "core/trace/tracer.h"
#include "export/export_program.h"

namespace ember::python {

void bind_export(py::module_& m) {
  m.def("export_program", [](Tracer& tracer, const std::string& target, const std::vector<std::pair<std::string, int64_t>>& dims) {
    ExportResult r;
    {
      py::gil_scoped_release nogil;
      r = export_program(tracer.program(), target, dims);
    }
    py::list files;
    for (const ExportFile& f : r.files) files.append(py::make_tuple(f.name, py::bytes(f.bytes)));
    return py::make_tuple(r.manifest, files);
  }, py::arg("tracer"), py::arg("target"), py::arg("dims") = std::vector<std::pair<std::string, int64_t>>{},
     "(manifest.json text, [(file name, bytes)]) of the tracer's program exported for `target`; `dims`: "
     "[(name, value)] the export may fix where the plan needs a dim's value.");
}

}  // namespace ember::python

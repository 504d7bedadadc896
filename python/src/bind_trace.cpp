// Tracing: opaque Node handles, the enums of the IR (DType, Op, ReduceKind, AtomicKind,
// IndexMode) and ember::Tracer, whose methods the pure-Python front end calls while a traced
// function runs. Nodes are owned by the tracer's Program; Python never deletes them.
#include <string>
#include <vector>

#include "bindings.h"
#include "core/ir/printer.h"
#include "core/ir/shape.h"
#include "core/trace/tracer.h"

namespace ember::python {

namespace {
constexpr auto ref = py::return_value_policy::reference;

// One dimension for Python: an int when constant, else the dimension's name ("%id" if none).
py::object dim_object(const Node* d) {
  int64_t c = const_dim(d);
  if (c >= 0) return py::int_(c);
  if (!d->name.empty()) return py::str(d->name);
  return py::str("%" + std::to_string(d->id));
}

// The value of a constant node as a Python number (None for any other node).
py::object const_value(const Node& n) {
  if (n.op != Op::constant) return py::none();
  switch (n.dtype) {
    case DType::f32: return py::float_(n.f());
    case DType::i32: return py::int_(n.i());
    case DType::u32: return py::int_(n.bits);
    case DType::boolean: return py::bool_(n.bits != 0);
    default: return py::none();
  }
}

// Annotation dimensions: int (fixed), str (symbolic) or None (free).
std::vector<DimSpec> dim_specs(const py::sequence& dims) {
  std::vector<DimSpec> out;
  for (py::handle d : dims) {
    DimSpec s;
    if (d.is_none()) {
      s.kind = DimSpec::free;
    } else if (py::isinstance<py::str>(d)) {
      s.kind = DimSpec::symbolic;
      s.name = d.cast<std::string>();
    } else if (py::isinstance<py::int_>(d) && !py::isinstance<py::bool_>(d)) {
      s.kind = DimSpec::fixed;
      s.size = d.cast<int64_t>();
    } else {
      throw ember::TypeError("a dimension must be an int, a str or None, got " +
                             std::string(py::str(py::type::handle_of(d).attr("__name__"))));
    }
    out.push_back(s);
  }
  return out;
}

std::optional<int64_t> slice_bound(py::handle v, const char* what) {
  if (v.is_none()) return std::nullopt;
  if (!py::isinstance<py::int_>(v)) throw ember::TypeError(std::string("slice ") + what + " must be a Python int or None");
  return v.cast<int64_t>();
}

// Index items: a Node (tensor index), a slice of ints, None (new axis) or Ellipsis.
std::vector<IndexItem> index_items(const py::sequence& items) {
  std::vector<IndexItem> out;
  for (py::handle h : items) {
    IndexItem it;
    if (py::isinstance<Node>(h)) {
      it.kind = IndexItem::tensor;
      it.value = h.cast<Node*>();
    } else if (py::isinstance<py::slice>(h)) {
      it.kind = IndexItem::slice;
      it.start = slice_bound(h.attr("start"), "start");
      it.stop = slice_bound(h.attr("stop"), "stop");
      std::optional<int64_t> step = slice_bound(h.attr("step"), "step");
      it.step = step ? *step : 1;
    } else if (h.is_none()) {
      it.kind = IndexItem::newaxis;
    } else if (h.is(py::ellipsis())) {
      it.kind = IndexItem::ellipsis;
    } else {
      throw ember::TypeError("unsupported index item of type " +
                             std::string(py::str(py::type::handle_of(h).attr("__name__"))));
    }
    out.push_back(it);
  }
  return out;
}

void bind_enums(py::module_& m) {
  py::enum_<DType>(m, "DType")
      .value("f32", DType::f32).value("i32", DType::i32).value("u32", DType::u32)
      .value("bool", DType::boolean).value("none", DType::none);
  py::enum_<Op> op(m, "Op");
#define OP(name, arity, rule, cost, flags) op.value(#name, Op::name);
#include "core/ir/ops.def"
  py::enum_<ReduceKind>(m, "ReduceKind")
      .value("sum", ReduceKind::sum).value("prod", ReduceKind::prod).value("max", ReduceKind::max)
      .value("min", ReduceKind::min).value("any", ReduceKind::any).value("all", ReduceKind::all)
      .value("argmax", ReduceKind::argmax).value("argmin", ReduceKind::argmin);
  py::enum_<AtomicKind>(m, "AtomicKind")
      .value("add", AtomicKind::add).value("min", AtomicKind::min).value("max", AtomicKind::max)
      .value("band", AtomicKind::band).value("bor", AtomicKind::bor).value("bxor", AtomicKind::bxor)
      .value("exchange", AtomicKind::exchange);
  py::enum_<IndexMode>(m, "IndexMode")
      .value("clamp", IndexMode::clamp).value("unsafe", IndexMode::unsafe).value("wrap", IndexMode::wrap);
}

void bind_node(py::module_& m) {
  py::class_<Node, std::unique_ptr<Node, py::nodelete>>(m, "Node", "An opaque handle to an IR node of a trace.")
      .def_property_readonly("shape", [](const Node& n) {
        py::tuple t(n.shape.size());
        for (size_t i = 0; i < n.shape.size(); ++i) t[i] = dim_object(n.shape[i]);
        return t;
      }, "Dimensions: ints when constant, names (str) when symbolic.")
      .def_property_readonly("dims", [](const Node& n) { return n.shape.vec(); }, ref, "The dimension nodes.")
      .def_property_readonly("dtype", [](const Node& n) { return std::string(dtype_name(n.dtype)); })
      .def_property_readonly("op", [](const Node& n) { return std::string(op_name(n.op)); })
      .def_property_readonly("id", [](const Node& n) { return n.id; })
      .def_property_readonly("rank", [](const Node& n) { return n.rank(); })
      .def_property_readonly("name", [](const Node& n) { return n.name.str(); })
      .def_property_readonly("is_memory", [](const Node& n) { return n.is_memory(); })
      .def_property_readonly("const_value", &const_value, "The value of a constant node, else None.")
      .def("__repr__", [](const Node& n) {
        return "<ember.Node %" + std::to_string(n.id) + " " + op_name(n.op) + " " + dtype_name(n.dtype) +
               shape_str(n.shape) + ">";
      });
}

void bind_tracer(py::module_& m) {
  using T = Tracer;
  py::class_<T>(m, "Tracer", "Builds the IR of one traced function (see core/trace/tracer.h).")
      .def(py::init<const std::string&>(), py::arg("name"))
      .def("set_loc", &T::set_loc, py::arg("file"), py::arg("line"))
      .def("print", [](T& t) { return print_program(t.program()); }, "The program's IR text.")
      .def("input", [](T& t, DType d, const py::sequence& dims, const std::string& name) {
        return t.input(d, dim_specs(dims), name);
      }, ref)
      .def("scalar", &T::scalar, ref)
      .def("output", &T::output)
      .def("constant", &T::constant, ref, py::arg("value"), py::arg("dtype"))
      .def("unary", &T::unary, ref)
      .def("binary", &T::binary, ref)
      .def("select", &T::select, ref)
      .def("cast", &T::cast, ref)
      .def("bitcast", &T::bitcast, ref)
      .def("broadcast_to", &T::broadcast_to, ref)
      .def("spread", &T::spread, ref)
      .def("indices", &T::indices, ref)
      .def("dim", &T::dim, ref)
      .def("dim_const", &T::dim_const, ref)
      .def("gather", [](T& t, Node* x, const py::sequence& items, IndexMode mode) {
        return t.gather(x, index_items(items), mode);
      }, ref, py::arg("x"), py::arg("items"), py::arg("mode") = IndexMode::clamp)
      .def("scatter", [](T& t, Node* mem, const py::sequence& items, Node* value, IndexMode mode) {
        t.scatter(mem, index_items(items), value, mode);
      }, py::arg("mem"), py::arg("items"), py::arg("value"), py::arg("mode") = IndexMode::clamp)
      .def("atomic", &T::atomic, ref)
      .def("reduce", &T::reduce, ref)
      .def("mean", &T::mean, ref)
      .def("norm", &T::norm, ref)
      .def("prefix_sum", &T::prefix_sum, ref, py::arg("x"), py::arg("axis"))
      .def("matmul", &T::matmul, ref)
      .def("dot", &T::dot, ref)
      .def("reshape", [](T& t, Node* x, const py::sequence& shape) {
        std::vector<Node*> dims;  // None: the inferred (-1) dimension
        for (py::handle d : shape) dims.push_back(d.is_none() ? nullptr : d.cast<Node*>());
        return t.reshape(x, dims);
      }, ref, py::arg("x"), py::arg("shape"))
      .def("transpose", &T::transpose, ref, py::arg("x"), py::arg("axes") = std::vector<int>{})
      .def("squeeze", &T::squeeze, ref, py::arg("x"), py::arg("axes") = std::vector<int>{})
      .def("unsqueeze", &T::unsqueeze, ref, py::arg("x"), py::arg("axis"))
      .def("concat", &T::concat, ref, py::arg("xs"), py::arg("axis") = 0)
      .def("stack", &T::stack, ref, py::arg("xs"), py::arg("axis") = 0)
      .def("repeat", &T::repeat, ref, py::arg("x"), py::arg("repeats"), py::arg("axis") = py::none())
      .def("flip", &T::flip, ref, py::arg("x"), py::arg("axes") = std::vector<int>{})
      .def("zeros", &T::zeros, ref)
      .def("buffer", &T::buffer, ref)
      .def("begin_loop", &T::begin_loop, ref)
      .def("begin_if", &T::begin_if, ref)
      .def("begin_else", &T::begin_else, ref)
      .def("begin_kernel", &T::begin_kernel, ref, py::arg("shape"), py::arg("group") = std::vector<int64_t>{})
      .def("group_buffer", &T::group_buffer, ref, py::arg("shape"), py::arg("dtype"))
      .def("barrier", &T::barrier)
      .def("local_index", &T::local_index, ref)
      .def("group_index", &T::group_index, ref)
      .def("end_scope", &T::end_scope)
      .def("break_", &T::break_)
      .def("continue_", &T::continue_)
      .def("var", &T::var, ref)
      .def("set", &T::set)
      .def("scope_shape", [](const T& t) { return to_shape(t.scope_shape()); }, ref)
      .def("grad", &T::grad, ref, py::arg("y"), py::arg("xs"), py::arg("dy") = nullptr)
      .def("jvp", &T::jvp, ref, py::arg("y"), py::arg("xs"), py::arg("dxs"))
      .def("detach", &T::detach, ref);
}
}  // namespace

void bind_trace(py::module_& m) {
  bind_enums(m);
  bind_node(m);
  bind_tracer(m);
}

}  // namespace ember::python

// The window runtime (window/window.h, window/ui.h) as `_ember._Window` and the submodule
// `_ember.ui`; python/ember/_window.py and python/ember/ui.py build em.Window and em.ui on top.
// ember::window::WindowError becomes ember.WindowError (an ember.Error and a RuntimeError).
// Without the window runtime built, `_ember.window_built` is False and nothing else is bound.
#include "bindings.h"

#ifdef EMBER_WITH_WINDOW
#include <cfloat>
#include <cmath>
#include <cstring>

#include "window/ui.h"
#include "window/window.h"
#endif

namespace ember::python {

#ifdef EMBER_WITH_WINDOW
namespace {

using namespace ember::window;

PyObject* g_window_error = nullptr;

Filter parse_filter(const std::string& f) {
  if (f == "nearest") return Filter::nearest;
  if (f == "linear") return Filter::linear;
  throw WindowError("ember: win.show filter must be \"nearest\" or \"linear\", got \"" + f + "\"");
}

ShowOptions show_options(const std::string& colormap, const std::string& filter, float lo, float hi) {
  ShowOptions o;
  o.colormap = colormap;
  o.filter = parse_filter(filter);
  o.range_lo = lo;
  o.range_hi = hi;
  return o;
}

// A C-contiguous float32, uint8 (or uint32/int32 holding 0..255) array in the machine's byte order as an Image;
// anything else is a TypeError naming the dtype.
Image array_image(const py::array& arr) {
  const py::dtype dt = arr.dtype();
  PixelFormat f;
  if (dt.kind() == 'f' && dt.itemsize() == 4) f = PixelFormat::f32;
  else if (dt.kind() == 'u' && dt.itemsize() == 1) f = PixelFormat::u8;
  else if (dt.kind() == 'u' && dt.itemsize() == 4) f = PixelFormat::u32;  // 0..255, as u32 tensors
  else if (dt.kind() == 'i' && dt.itemsize() == 4) f = PixelFormat::i32;
  else
    throw ember::TypeError("win.show: expected float32 (values 0..1, or range=) or uint8 elements (or uint32/int32 "
                           "holding 0..255), got " +
                           dt.attr("name").cast<std::string>() + " (convert with .astype(np.float32) or .astype(np.uint8))");
  if (!dt.attr("isnative").cast<bool>())
    throw ember::TypeError("win.show: expected elements in the machine's byte order, got " +
                           dt.attr("str").cast<std::string>() + " (convert with .astype(\"" +
                           dt.attr("newbyteorder")("=").attr("str").cast<std::string>() + "\"))");
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  py::array c = arr;
  if (!(arr.flags() & py::array::c_style)) c = py::module_::import("numpy").attr("ascontiguousarray")(arr);
  Image img = make_image(c.data(), shape, f, "win.show");
  img.owner = std::shared_ptr<void>(new py::object(c), [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
  return img;
}

py::tuple mouse_tuple(const Window& w) {
  const MouseState& m = w.mouse();
  return py::make_tuple(m.x, m.y, py::make_tuple(m.buttons[0], m.buttons[1], m.buttons[2]), m.scroll, m.scroll_x);
}

void bind_window_class(py::module_& m) {
  py::class_<Window>(m, "_Window", "A window or off-screen framebuffer (python/ember/_window.py wraps it).")
      .def(py::init([](int width, int height, const std::string& title, std::optional<bool> headless, bool vsync,
                       bool resizable, bool overlay, std::optional<int64_t> frames) {
             WindowOptions o;
             o.width = width;
             o.height = height;
             o.title = title;
             o.headless = headless;
             o.vsync = vsync;
             o.resizable = resizable;
             o.overlay = overlay;
             o.frames = frames.value_or(-1);
             if (frames && *frames < 0)
               throw WindowError("ember: Window frames= must be a non-negative count, got " + std::to_string(*frames));
             return std::make_unique<Window>(o);
           }),
           py::arg("width"), py::arg("height"), py::arg("title"), py::arg("headless"), py::arg("vsync"),
           py::arg("resizable"), py::arg("overlay"), py::arg("frames"))
      .def("frame", &Window::frame)
      .def("show_tensor", [](Window& w, const HostTensor& t, const std::string& cmap, const std::string& filter,
                             float lo, float hi) { w.show(image_of(t), show_options(cmap, filter, lo, hi)); })
      .def("show_array", [](Window& w, const py::array& a, const std::string& cmap, const std::string& filter,
                            float lo, float hi) { w.show(array_image(a), show_options(cmap, filter, lo, hi)); })
      .def_property_readonly("last_upload", &Window::last_upload)
      .def_property_readonly("headless", &Window::headless)
      .def_property_readonly("closed", &Window::closed)
      .def_property_readonly("should_close", &Window::should_close)
      .def("close", &Window::close)
      .def_property_readonly("size", &Window::size)
      .def("resize", &Window::resize)
      .def_property("vsync", &Window::vsync, &Window::set_vsync)
      .def_property("overlay", &Window::overlay, &Window::set_overlay)
      .def_property_readonly("frame_time", &Window::frame_time)
      .def_property_readonly("fps", &Window::fps)
      .def_property_readonly("frame_count", &Window::frame_count)
      .def_property_readonly("mouse", &mouse_tuple)
      .def_property_readonly("mouse_image", [](const Window& w) -> py::object {
        auto p = w.mouse_image();
        if (!p) return py::none();
        return py::make_tuple(p->first, p->second);
      })
      .def("key_down", &Window::key_down)
      .def("key_pressed", &Window::key_pressed)
      .def("inject_mouse", [](Window& w, double x, double y, std::array<bool, 3> buttons, double scroll) {
        w.inject_mouse(x, y, buttons, scroll);
      })
      .def("inject_key", &Window::inject_key)
      .def("inject_text", &Window::inject_text)
      .def("pixels", [](Window& w) {
        int width = 0, height = 0;
        std::vector<uint8_t> px = w.pixels(&width, &height);
        py::array_t<uint8_t> out({static_cast<py::ssize_t>(height), static_cast<py::ssize_t>(width), py::ssize_t(4)});
        std::memcpy(out.mutable_data(), px.data(), px.size());
        return out;
      })
      .def("screenshot", &Window::screenshot)
      .def("record", &Window::record)
      .def("stop_recording", &Window::stop_recording)
      .def_property_readonly("recording", &Window::recording);

  m.def("colormap_names", &colormap_names, "The colormaps win.show knows.");
  m.def("colormap_color", [](const std::string& name, float t) {
    auto c = colormap_color(name, t);
    return py::make_tuple(c[0], c[1], c[2]);
  }, py::arg("name"), py::arg("t"), "The colour (r, g, b in 0..1) a colormap gives to t in [0, 1].");
  m.def("key_names", &key_names, "The key names key_down / inject_key accept.");
  m.def("display_available", &display_available, "Whether $DISPLAY or $WAYLAND_DISPLAY is set.");
}

void bind_ui(py::module_& m) {
  py::module_ u = m.def_submodule("ui", "Immediate-mode widgets of the window whose frame is open.");
  u.def("text", &ui::text);
  u.def("slider_float", &ui::slider_float);
  u.def("slider_int", &ui::slider_int);
  u.def("drag_float", &ui::drag_float);
  u.def("drag_int", &ui::drag_int);
  u.def("checkbox", &ui::checkbox);
  u.def("button", &ui::button);
  u.def("combo", &ui::combo);
  u.def("radio", &ui::radio);
  u.def("color", [](const std::string& l, std::vector<float> v) {
    std::vector<float> r = ui::color(l, std::move(v));
    py::tuple t(r.size());
    for (size_t i = 0; i < r.size(); ++i) t[i] = py::float_(r[i]);
    return t;
  });
  u.def("input_float", &ui::input_float);
  u.def("input_int", &ui::input_int);
  u.def("input_text", &ui::input_text);
  u.def("plot_lines", &ui::plot_lines);
  u.def("plot_histogram", &ui::plot_histogram);
  u.def("push_history", [](const std::string& l, float v, size_t n) { return ui::push_history(l, v, n); });
  u.def("collapsing_header", &ui::collapsing_header);
  u.def("separator", &ui::separator);
  u.def("same_line", &ui::same_line);
  u.def("begin", &ui::begin);
  u.def("end", &ui::end);
  u.def("item_rect", &ui::item_rect);
  u.def("in_frame", &ui::in_frame);
  u.def("wants_mouse", &ui::wants_mouse);
  u.def("wants_keyboard", &ui::wants_keyboard);
}

}  // namespace
#endif

void bind_window(py::module_& m) {
#ifdef EMBER_WITH_WINDOW
  m.attr("window_built") = true;
  py::object error = m.attr("Error");
  g_window_error = PyErr_NewExceptionWithDoc(
      "ember.WindowError", "A window was misused: em.ui outside a frame, a closed window, a bad option or file.",
      py::make_tuple(error, py::reinterpret_borrow<py::object>(PyExc_RuntimeError)).ptr(), nullptr);
  if (!g_window_error) throw py::error_already_set();
  m.add_object("WindowError", py::reinterpret_borrow<py::object>(g_window_error));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ember::window::WindowError& e) {
      PyErr_SetString(g_window_error, e.what());
    }
  });
  bind_window_class(m);
  bind_ui(m);
#else
  m.attr("window_built") = false;
#endif
}

}  // namespace ember::python

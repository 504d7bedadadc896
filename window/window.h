// The window runtime (DESIGN §1, §5): a GLFW + Dear ImGui host loop that shows tensors live,
// reads mouse and keyboard, and captures frames. One file per concern:
//   window_context.cpp   which GL context a window draws in: its own GLFW window sharing the
//                        OpenGL backend's context, or (headless) the backend's context itself
//   window_frame.cpp     the Window object: construction, frame(), timing, overlay, close
//   window_display.cpp   show(): image checks; device path (the OpenGL backend's buffer -> texture
//                        on the GPU, or read in place) and host upload path; the letterboxed draw
//   window_colormap.cpp  colormap tables for single-channel images
//   window_input.cpp     the event queue fed by GLFW callbacks and by inject_*; key names; ImGui IO
//   window_capture.cpp   framebuffer readback, PNG screenshots, recording (PNG sequence or MP4)
//   window_ui.cpp        immediate-mode widgets (ui.h) over the current window's ImGui context
// Every frame is drawn into the window's own framebuffer object, then blitted to the screen
// (windowed) or kept (headless), so screenshots and pixels() read exactly what was shown.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/interp/interp.h"
#include "core/ir/error.h"

namespace ember::window {

// Misuse of a window or of ui outside a frame (ember.WindowError in Python, an ember.Error).
class WindowError : public Error {
 public:
  using Error::Error;
};

// How an image's elements are stored.
enum class PixelFormat { f32, u8, u32, i32 };
const char* pixel_format_name(PixelFormat f);

// An image to show: rows of pixels, top row first, `channels` interleaved elements per pixel.
struct Image {
  const void* data = nullptr;
  int64_t height = 0, width = 0, channels = 1;
  PixelFormat format = PixelFormat::f32;
  std::shared_ptr<void> owner;  // keeps `data` alive while the window may still read it
};
// Checks a shape ([H,W], [H,W,1], [H,W,3], [H,W,4]) and element type; throws ShapeError or
// TypeError naming the expected and the actual. `what` prefixes the message.
Image make_image(const void* data, const std::vector<int64_t>& shape, PixelFormat format, const std::string& what);
// The image view of a runtime tensor: f32 as values, u32/i32 as 0..255 per channel; bool is a TypeError.
Image image_of(const HostTensor& t);

enum class Filter { nearest, linear };
// How show() maps values to colours.
struct ShowOptions {
  std::string colormap = "gray";  // for one channel: gray, viridis, magma, inferno, plasma, coolwarm, turbo
  Filter filter = Filter::nearest;
  float range_lo = 0.f, range_hi = 1.f;  // f32 values map lo -> 0, hi -> 1 (then clamped)
};
// Names of the colormaps show() knows.
std::vector<std::string> colormap_names();
// The colour (r, g, b in 0..1) a colormap gives to t in [0, 1] (clamped); throws WindowError for an unknown name.
std::array<float, 3> colormap_color(const std::string& name, float t);

struct WindowOptions {
  int width = 1280, height = 720;
  std::string title = "ember";
  std::optional<bool> headless;  // unset: headless exactly when there is no display
  bool vsync = true;
  bool resizable = true;
  bool overlay = true;          // frame time / FPS text in the top-right corner
  int64_t frames = -1;          // >= 0: frame() returns false after this many frames
};

// Mouse state for the current frame, in window pixels (top-left origin).
struct MouseState {
  double x = 0, y = 0;
  bool buttons[3] = {false, false, false};  // left, right, middle
  double scroll = 0, scroll_x = 0;          // wheel offsets received this frame
};

class WindowImpl;

// A window (or an off-screen framebuffer when headless) that shows images and ImGui widgets.
class Window {
 public:
  explicit Window(const WindowOptions& opts);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  // Ends the open frame (draw, capture, swap), polls input and begins the next one; false
  // (and no new frame) once the window should close or its frame budget is spent.
  bool frame();
  // The image drawn (letterboxed) under the widgets at the end of this frame.
  void show(Image img, const ShowOptions& opts);
  // "device" (from the OpenGL backend's buffer, never through the host), "host" (uploaded) or "" (nothing shown).
  const std::string& last_upload() const;

  bool headless() const;
  bool closed() const;        // close() was called
  bool should_close() const;  // the user closed it, close() was called, or the frame budget is spent
  void close();               // destroys the window; the last frame stays readable
  std::pair<int, int> size() const;  // framebuffer (width, height)
  void resize(int width, int height);
  bool vsync() const;
  void set_vsync(bool on);
  bool overlay() const;
  void set_overlay(bool on);
  double frame_time() const;  // seconds between the last two frame() calls
  double fps() const;         // frames per second, averaged over the last frames
  int64_t frame_count() const;  // frames ended so far

  const MouseState& mouse() const;
  // (row, col) in the shown image's pixels (continuous; pixel (r, c) spans [r, r+1)), or none outside it.
  std::optional<std::pair<double, double>> mouse_image() const;
  bool key_down(const std::string& name) const;     // held now; throws WindowError for an unknown name
  bool key_pressed(const std::string& name) const;  // went down during the last poll
  // Scripted input, queued like real events and applied at the next frame().
  void inject_mouse(double x, double y, std::array<bool, 3> buttons, double scroll);
  void inject_key(const std::string& name, bool down);
  void inject_text(const std::string& utf8);

  // The last completed frame as RGBA8, top row first, (width, height); throws WindowError before one.
  std::vector<uint8_t> pixels(int* width, int* height);
  void screenshot(const std::string& path);  // PNG
  // Writes every following frame: a directory (frame_%05d.png inside), a printf pattern with
  // one integer (%d, %05d, ...), or an .mp4 through ffmpeg (WindowError when ffmpeg is missing).
  void record(const std::string& path, int fps);
  int64_t stop_recording();  // frames written
  bool recording() const;

  WindowImpl& impl() { return *impl_; }

 private:
  std::unique_ptr<WindowImpl> impl_;
};

// Names inject_key/key_down accept ("W", "SPACE", "ESCAPE", "LEFT", "F1", "LEFT_SHIFT", ...).
std::vector<std::string> key_names();
// Whether a display is reachable ($DISPLAY or $WAYLAND_DISPLAY set).
bool display_available();

}  // namespace ember::window

// Internals shared by the window_*.cpp files: the WindowImpl behind ember::window::Window, the
// GL-context guard, and the per-concern entry points each file provides.
#pragma once
#include <glad/gl.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "backends/opengl/opengl.h"
#include "window/window.h"

struct GLFWwindow;
struct ImGuiContext;

namespace ember::window {

// One input event, from GLFW callbacks or inject_*; applied in order at frame().
struct InputEvent {
  enum class Kind { mouse_pos, mouse_button, scroll, key, text };
  Kind kind = Kind::mouse_pos;
  double x = 0, y = 0;  // position or scroll offsets
  int code = 0;         // button (0 left, 1 right, 2 middle) or GLFW key code
  bool down = false;
  unsigned int codepoint = 0;
};

constexpr int kKeyCount = 512;  // GLFW key codes are below 349; ImGui 1.86 keeps KeysDown[512]

struct WindowImpl {
  WindowOptions opts;
  bool headless = false;
  GLFWwindow* glfw = nullptr;  // windowed only
  bool shares_backend = false;  // the OpenGL backend's buffer names are valid in this context
  bool closed = false;
  bool user_closed = false;     // the window manager asked to close
  ImGuiContext* imgui = nullptr;

  // Drawing (window_display.cpp): a framebuffer object per window, the blit program.
  GLuint fbo = 0, color_rb = 0, program = 0, vao = 0, host_ssbo = 0;
  int64_t host_ssbo_bytes = 0;
  int fb_w = 0, fb_h = 0;    // framebuffer pixels
  int win_w = 0, win_h = 0;  // window coordinates (mouse)
  bool vsync = true;

  // The image of this frame.
  bool have_image = false;
  Image image;
  ShowOptions show_opts;
  GLuint device_buffer = 0;  // the backend's buffer the image came from (0: host memory)
  bool use_texture = false;  // sampled from `texture` (f32/u8) rather than read from a storage buffer
  GLuint texture = 0;
  int64_t texture_w = 0, texture_h = 0;
  GLenum texture_internal = 0;
  std::string last_upload;
  std::shared_ptr<void> drawn_owner;  // keeps the image drawn last alive until its draw has finished

  // Frame state (window_frame.cpp).
  bool frame_open = false;
  int64_t frames_ended = 0;
  std::chrono::steady_clock::time_point last_frame_start{};
  bool have_last_start = false;
  double frame_time = 0;
  std::deque<double> recent_frame_times;
  int ui_depth = 0;  // open ui::begin calls
  std::map<std::string, std::vector<float>> histories;

  // Input (window_input.cpp).
  std::deque<InputEvent> events;
  MouseState mouse;
  bool keys[kKeyCount] = {};
  std::set<int> pressed;  // keys that went down in the last poll

  // Capture (window_capture.cpp).
  std::vector<uint8_t> cached_pixels;  // the last frame, kept when the window is closed
  int cached_w = 0, cached_h = 0;
  bool recording = false;
  std::string record_pattern;  // printf pattern of PNG files
  FILE* ffmpeg = nullptr;
  int record_w = 0, record_h = 0;
  int64_t record_index = 0;

  // window_context.cpp
  void create_context();   // the GLFW window or nothing (headless), GL objects, ImGui
  void destroy_context();
  // window_display.cpp
  void create_gl_objects();   // inside a Current
  void destroy_gl_objects();  // inside a Current
  void ensure_framebuffer();  // (re)sizes the FBO to fb_w x fb_h
  void upload(const Image& img);  // sets device_buffer or fills host_ssbo; sets last_upload
  void draw_image();          // into the bound FBO
  // window_input.cpp
  void install_callbacks();
  void apply_events();        // queue -> state and ImGui IO (one change per button/key per frame)
  // window_capture.cpp
  std::vector<uint8_t> read_fbo(int* width, int* height);  // inside a Current; RGBA8 top row first
  void capture_frame();       // after a frame is drawn: record
  void finish_recording();
};

// Makes a window's GL context current for a scope: its own GLFW context (restoring the previous
// one after), or the backend's context through gl::Scope (headless).
class Current {
 public:
  explicit Current(WindowImpl& w);
  ~Current();
  Current(const Current&) = delete;
  Current& operator=(const Current&) = delete;

 private:
  std::optional<gl::Scope> scope_;
  GLFWwindow* prev_ = nullptr;
  bool restore_ = false;
};

// Where the image lands in the framebuffer (pixels, top-left origin); invalid with no image.
struct ImageRect {
  int x = 0, top = 0, w = 0, h = 0;
  bool valid = false;
};
ImageRect image_rect(const WindowImpl& w);

// The window whose frame is open for ui calls (null when none); set by frame(), cleared at its end.
WindowImpl*& ui_target();
// The colormap's control points (window_colormap.cpp), evenly spaced over [0, 1].
const std::vector<std::array<float, 3>>& colormap_points(const std::string& name);
// GLFW key code of a name, or -1.
int key_code(const std::string& name);
// Writes RGBA8 rows (top first) to a PNG file; throws WindowError.
void write_png(const std::string& path, const uint8_t* rgba, int w, int h, int compression);

}  // namespace ember::window

// The Window object: construction, the frame loop and its timing, the FPS overlay, show(),
// sizes and closing. frame() ends the open frame (the image, then the ImGui draw data, into
// the window's framebuffer object; blit and swap when windowed; recording), then polls input
// and begins the next ImGui frame, which em.ui calls draw into until the next frame().
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>

#include "window/window_internal.h"

namespace ember::window {

namespace {

void check_open(const WindowImpl& w, const char* what) {
  if (w.closed) throw WindowError(std::string("ember: ") + what + " on a closed window \"" + w.opts.title + "\"");
}

void draw_overlay(WindowImpl& w) {
  ImGuiIO& io = ImGui::GetIO();
  ImGui::SetNextWindowPos(ImVec2(io.DisplaySize.x - 8.f, 8.f), ImGuiCond_Always, ImVec2(1.f, 0.f));
  ImGui::SetNextWindowBgAlpha(0.45f);
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize |
                                 ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoFocusOnAppearing |
                                 ImGuiWindowFlags_NoNav | ImGuiWindowFlags_NoInputs | ImGuiWindowFlags_NoMove;
  if (ImGui::Begin("##ember_overlay", nullptr, flags)) {
    double avg = 0;
    for (double t : w.recent_frame_times) avg += t;
    if (!w.recent_frame_times.empty()) avg /= double(w.recent_frame_times.size());
    ImGui::Text("%.2f ms  %.1f FPS", avg * 1e3, avg > 0 ? 1.0 / avg : 0.0);
  }
  ImGui::End();
}

// Draws the open frame and presents it.
void end_frame(WindowImpl& w) {
  ImGui::SetCurrentContext(w.imgui);
  while (w.ui_depth > 0) {  // windows the script left open (an exception inside `with ui.window`)
    ImGui::End();
    --w.ui_depth;
  }
  if (w.opts.overlay) draw_overlay(w);
  ImGui::Render();
  w.frame_open = false;
  if (ui_target() == &w) ui_target() = nullptr;
  Current cur(w);
  w.ensure_framebuffer();
  glBindFramebuffer(GL_FRAMEBUFFER, w.fbo);
  glViewport(0, 0, w.fb_w, w.fb_h);
  glDisable(GL_SCISSOR_TEST);
  glClearColor(0.1f, 0.1f, 0.1f, 1.f);
  glClear(GL_COLOR_BUFFER_BIT);
  if (w.have_image) w.draw_image();
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  glBindFramebuffer(GL_FRAMEBUFFER, 0);
  gl::check_error("drawing a window frame");
  if (w.glfw) {
    glBlitNamedFramebuffer(w.fbo, 0, 0, 0, w.fb_w, w.fb_h, 0, 0, w.fb_w, w.fb_h, GL_COLOR_BUFFER_BIT, GL_NEAREST);
    glfwSwapBuffers(w.glfw);
  }
  // The backend may reuse the buffer of an image drawn from device memory once the draw that
  // reads it has finished; the image of this frame is held until then.
  if (w.device_buffer) glFinish();
  w.drawn_owner = w.image.owner;
  ++w.frames_ended;
  w.capture_frame();
}

}  // namespace

WindowImpl*& ui_target() {
  static WindowImpl* t = nullptr;
  return t;
}

Window::Window(const WindowOptions& opts) : impl_(std::make_unique<WindowImpl>()) {
  if (opts.width <= 0 || opts.height <= 0 || opts.width > 16384 || opts.height > 16384)
    throw ShapeError("ember: a window is 1..16384 pixels on each side, got " + std::to_string(opts.width) + "x" +
                     std::to_string(opts.height));
  impl_->opts = opts;
  impl_->create_context();
}

Window::~Window() {
  try {
    close();
  } catch (...) {
  }
}

bool Window::frame() {
  WindowImpl& w = *impl_;
  if (w.closed) return false;
  if (w.frame_open) end_frame(w);
  if (w.glfw) {
    glfwPollEvents();
    if (glfwWindowShouldClose(w.glfw)) w.user_closed = true;
  }
  if (should_close()) return false;

  const auto now = std::chrono::steady_clock::now();
  if (w.have_last_start) {
    w.frame_time = std::chrono::duration<double>(now - w.last_frame_start).count();
    w.recent_frame_times.push_back(w.frame_time);
    if (w.recent_frame_times.size() > 60) w.recent_frame_times.pop_front();
  }
  w.last_frame_start = now;
  w.have_last_start = true;

  if (w.glfw) {
    glfwGetFramebufferSize(w.glfw, &w.fb_w, &w.fb_h);
    glfwGetWindowSize(w.glfw, &w.win_w, &w.win_h);
  }
  w.apply_events();
  ImGuiIO& io = ImGui::GetIO();
  io.DisplaySize = ImVec2(float(std::max(w.win_w, 1)), float(std::max(w.win_h, 1)));
  io.DisplayFramebufferScale = ImVec2(w.win_w > 0 ? float(w.fb_w) / float(w.win_w) : 1.f,
                                      w.win_h > 0 ? float(w.fb_h) / float(w.win_h) : 1.f);
  io.DeltaTime = static_cast<float>(std::clamp(w.frame_time, 1e-4, 1.0));
  {
    Current cur(w);
    ImGui_ImplOpenGL3_NewFrame();  // creates the font texture on the first frame
  }
  ImGui::NewFrame();
  w.frame_open = true;
  ui_target() = &w;
  return true;
}

void Window::show(Image img, const ShowOptions& opts) {
  WindowImpl& w = *impl_;
  check_open(w, "show()");
  colormap_points(opts.colormap);  // an unknown name fails here, not at the draw
  if (!(opts.range_hi != opts.range_lo) || !std::isfinite(opts.range_lo) || !std::isfinite(opts.range_hi))
    throw WindowError("ember: win.show range=(" + std::to_string(opts.range_lo) + ", " +
                      std::to_string(opts.range_hi) + ") must be two different finite numbers");
  {
    Current cur(w);
    w.upload(img);
  }
  if (w.device_buffer == 0) img.owner.reset();  // copied: the caller's memory is no longer read
  w.image = std::move(img);
  w.show_opts = opts;
  w.have_image = true;
}

const std::string& Window::last_upload() const { return impl_->last_upload; }
bool Window::headless() const { return impl_->headless; }
bool Window::closed() const { return impl_->closed; }

bool Window::should_close() const {
  const WindowImpl& w = *impl_;
  return w.closed || w.user_closed || (w.opts.frames >= 0 && w.frames_ended >= w.opts.frames);
}

void Window::close() {
  WindowImpl& w = *impl_;
  if (w.closed) return;
  if (w.frames_ended > 0) {
    try {
      Current cur(w);
      w.cached_pixels = w.read_fbo(&w.cached_w, &w.cached_h);
    } catch (...) {
    }
  }
  std::exception_ptr recording_failed;  // reported after the window is destroyed, not instead of it
  try {
    w.finish_recording();
  } catch (...) {
    recording_failed = std::current_exception();
  }
  if (ui_target() == &w) ui_target() = nullptr;
  w.destroy_context();
  w.frame_open = false;
  w.closed = true;
  w.image = Image();
  w.have_image = false;
  w.drawn_owner.reset();
  if (recording_failed) std::rethrow_exception(recording_failed);
}

std::pair<int, int> Window::size() const { return {impl_->fb_w, impl_->fb_h}; }

void Window::resize(int width, int height) {
  WindowImpl& w = *impl_;
  check_open(w, "resize()");
  if (width <= 0 || height <= 0 || width > 16384 || height > 16384)
    throw ShapeError("ember: a window is 1..16384 pixels on each side, got " + std::to_string(width) + "x" +
                     std::to_string(height));
  if (w.glfw) {
    glfwSetWindowSize(w.glfw, width, height);
    // The window manager applies the size asynchronously; wait briefly for it.
    for (int i = 0; i < 50; ++i) {
      glfwPollEvents();
      glfwGetFramebufferSize(w.glfw, &w.fb_w, &w.fb_h);
      glfwGetWindowSize(w.glfw, &w.win_w, &w.win_h);
      if (w.win_w == width && w.win_h == height) break;
      glfwWaitEventsTimeout(0.01);
    }
  } else {
    w.fb_w = w.win_w = width;
    w.fb_h = w.win_h = height;
  }
}

bool Window::vsync() const { return impl_->vsync; }

void Window::set_vsync(bool on) {
  WindowImpl& w = *impl_;
  check_open(w, "setting vsync");
  w.vsync = on;
  if (w.glfw) {
    Current cur(w);
    glfwSwapInterval(on ? 1 : 0);
  }
}

bool Window::overlay() const { return impl_->opts.overlay; }
void Window::set_overlay(bool on) { impl_->opts.overlay = on; }
double Window::frame_time() const { return impl_->frame_time; }

double Window::fps() const {
  const auto& t = impl_->recent_frame_times;
  if (t.empty()) return 0;
  const double avg = std::accumulate(t.begin(), t.end(), 0.0) / double(t.size());
  return avg > 0 ? 1.0 / avg : 0;
}

int64_t Window::frame_count() const { return impl_->frames_ended; }
const MouseState& Window::mouse() const { return impl_->mouse; }

std::optional<std::pair<double, double>> Window::mouse_image() const {
  const WindowImpl& w = *impl_;
  const ImageRect r = image_rect(w);
  if (!r.valid || w.win_w <= 0 || w.win_h <= 0) return std::nullopt;
  const double fx = w.mouse.x * double(w.fb_w) / double(w.win_w);
  const double fy = w.mouse.y * double(w.fb_h) / double(w.win_h);
  const double col = (fx - r.x) / r.w * double(w.image.width);
  const double row = (fy - r.top) / r.h * double(w.image.height);
  if (col < 0 || row < 0 || col >= double(w.image.width) || row >= double(w.image.height)) return std::nullopt;
  return std::make_pair(row, col);
}

}  // namespace ember::window

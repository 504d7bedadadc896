// Which GL context a window draws in (opengl.h explains the sharing). Windowed: a GLFW window of
// its own, created with the OpenGL backend's hidden GLFW window as its share argument when the
// backend's context is a GLFW one, so the backend's buffer names are valid in the window's
// context (the display reads them without a host copy). Headless: no window at all; the window
// draws into its framebuffer object inside the backend's context itself (EGL surfaceless without
// a display, the hidden GLFW window with one), under gl::Scope. GLFW is never terminated here:
// the backend keeps using it.
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <cstdlib>

#include "window/window_internal.h"

namespace ember::window {

namespace {

std::string& glfw_error_text() {
  static std::string* s = new std::string;
  return *s;
}
void on_glfw_error(int code, const char* what) {
  glfw_error_text() = what ? what : "GLFW error " + std::to_string(code);
}

const char* clipboard_get(void* user) { return glfwGetClipboardString(static_cast<GLFWwindow*>(user)); }
void clipboard_set(void* user, const char* text) { glfwSetClipboardString(static_cast<GLFWwindow*>(user), text); }

// ImGui 1.86 reads keys from io.KeysDown[] through io.KeyMap; we index KeysDown by GLFW code.
void map_imgui_keys(ImGuiIO& io) {
  io.KeyMap[ImGuiKey_Tab] = GLFW_KEY_TAB;
  io.KeyMap[ImGuiKey_LeftArrow] = GLFW_KEY_LEFT;
  io.KeyMap[ImGuiKey_RightArrow] = GLFW_KEY_RIGHT;
  io.KeyMap[ImGuiKey_UpArrow] = GLFW_KEY_UP;
  io.KeyMap[ImGuiKey_DownArrow] = GLFW_KEY_DOWN;
  io.KeyMap[ImGuiKey_PageUp] = GLFW_KEY_PAGE_UP;
  io.KeyMap[ImGuiKey_PageDown] = GLFW_KEY_PAGE_DOWN;
  io.KeyMap[ImGuiKey_Home] = GLFW_KEY_HOME;
  io.KeyMap[ImGuiKey_End] = GLFW_KEY_END;
  io.KeyMap[ImGuiKey_Insert] = GLFW_KEY_INSERT;
  io.KeyMap[ImGuiKey_Delete] = GLFW_KEY_DELETE;
  io.KeyMap[ImGuiKey_Backspace] = GLFW_KEY_BACKSPACE;
  io.KeyMap[ImGuiKey_Space] = GLFW_KEY_SPACE;
  io.KeyMap[ImGuiKey_Enter] = GLFW_KEY_ENTER;
  io.KeyMap[ImGuiKey_Escape] = GLFW_KEY_ESCAPE;
  io.KeyMap[ImGuiKey_KeyPadEnter] = GLFW_KEY_KP_ENTER;
  io.KeyMap[ImGuiKey_A] = GLFW_KEY_A;
  io.KeyMap[ImGuiKey_C] = GLFW_KEY_C;
  io.KeyMap[ImGuiKey_V] = GLFW_KEY_V;
  io.KeyMap[ImGuiKey_X] = GLFW_KEY_X;
  io.KeyMap[ImGuiKey_Y] = GLFW_KEY_Y;
  io.KeyMap[ImGuiKey_Z] = GLFW_KEY_Z;
}

}  // namespace

bool display_available() {
  const char* d = std::getenv("DISPLAY");
  const char* wl = std::getenv("WAYLAND_DISPLAY");
  return (d && *d) || (wl && *wl);
}

Current::Current(WindowImpl& w) {
  if (w.headless || !w.glfw) {
    scope_.emplace();
    return;
  }
  prev_ = glfwGetCurrentContext();
  if (prev_ != w.glfw) {
    glfwMakeContextCurrent(w.glfw);
    restore_ = true;
  }
}

Current::~Current() {
  if (restore_) glfwMakeContextCurrent(prev_);
}

void WindowImpl::create_context() {
  gl::Context& ctx = gl::context();  // loads the GL entry points (glad); throws BackendError without a driver
  headless = opts.headless.value_or(!display_available());
  if (!headless && !display_available()) headless = true;  // no display: the same API, off-screen
  if (!headless) {
    GLFWerrorfun prev = glfwSetErrorCallback(on_glfw_error);
    glfw_error_text().clear();
    bool ok = glfwInit();
    if (ok) {
      // The share context must not be used by another thread while ours is created; its lock
      // only (a Scope would make an EGL context current, and GLX then refuses ours).
      std::lock_guard<std::recursive_mutex> lock(ctx.mu);
      glfwDefaultWindowHints();
      glfwWindowHint(GLFW_VISIBLE, GLFW_TRUE);
      glfwWindowHint(GLFW_RESIZABLE, opts.resizable ? GLFW_TRUE : GLFW_FALSE);
      glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 4);
      glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 5);
      glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
      GLFWwindow* share = ctx.kind == gl::Context::Kind::glfw ? static_cast<GLFWwindow*>(ctx.glfw_window) : nullptr;
      glfw = glfwCreateWindow(opts.width, opts.height, opts.title.c_str(), nullptr, share);
      shares_backend = glfw && share;
    }
    std::string why = glfw_error_text();
    glfwSetErrorCallback(prev);
    if (!glfw)
      throw WindowError("ember: cannot open a window \"" + opts.title + "\" of " + std::to_string(opts.width) + "x" +
                        std::to_string(opts.height) + " on display " +
                        (std::getenv("DISPLAY") ? std::getenv("DISPLAY") : "?") + " (" +
                        (why.empty() ? std::string("GLFW failed") : why) + "); pass headless=True to render off-screen");
    glfwSetWindowUserPointer(glfw, this);
    glfwGetFramebufferSize(glfw, &fb_w, &fb_h);
    glfwGetWindowSize(glfw, &win_w, &win_h);
  } else {
    fb_w = win_w = opts.width;
    fb_h = win_h = opts.height;
  }
  vsync = opts.vsync;

  ImGuiContext* prev_imgui = ImGui::GetCurrentContext();
  imgui = ImGui::CreateContext();
  ImGui::SetCurrentContext(imgui);
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // no imgui.ini in the user's directory; layouts are reproducible
  io.LogFilename = nullptr;
  io.BackendPlatformName = "ember_window";
  io.DisplaySize = ImVec2(static_cast<float>(win_w), static_cast<float>(win_h));
  map_imgui_keys(io);
  if (glfw) {
    io.ClipboardUserData = glfw;
    io.GetClipboardTextFn = clipboard_get;
    io.SetClipboardTextFn = clipboard_set;
  }
  ImGui::StyleColorsDark();
  {
    Current cur(*this);
    if (glfw) glfwSwapInterval(vsync ? 1 : 0);
    if (!ImGui_ImplOpenGL3_Init("#version 450 core")) {
      ImGui::DestroyContext(imgui);
      imgui = nullptr;
      ImGui::SetCurrentContext(prev_imgui);
      if (glfw) glfwDestroyWindow(glfw);
      glfw = nullptr;
      throw WindowError("ember: Dear ImGui's OpenGL 3 renderer failed to initialize on " + ctx.description);
    }
    create_gl_objects();
  }
  ImGui::SetCurrentContext(prev_imgui ? prev_imgui : imgui);
  if (glfw) install_callbacks();
}

void WindowImpl::destroy_context() {
  if (!imgui && !glfw) return;
  {
    Current cur(*this);
    if (imgui) {
      ImGui::SetCurrentContext(imgui);
      if (frame_open) {
        for (; ui_depth > 0; --ui_depth) ImGui::End();  // closed inside `with em.ui.window`: ImGui asserts otherwise
        ImGui::EndFrame();
      }
      ImGui_ImplOpenGL3_Shutdown();
    }
    destroy_gl_objects();
  }
  if (imgui) {
    ImGui::DestroyContext(imgui);  // leaves no current ImGui context when it was current
    imgui = nullptr;
  }
  if (glfw) {
    if (glfwGetCurrentContext() == glfw) glfwMakeContextCurrent(nullptr);
    glfwSetWindowUserPointer(glfw, nullptr);
    glfwDestroyWindow(glfw);
    glfw = nullptr;
  }
}

}  // namespace ember::window

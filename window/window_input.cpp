// Input: GLFW callbacks and inject_* both append to the window's event queue; frame() applies
// the queue to the mouse and key state and to ImGui's IO, so scripted input takes exactly the
// path real input does. ImGui 1.86 reads input as state once per frame, so a press and release
// of the same button or key in one frame would be lost: applying stops at the second change of
// a button or key and leaves the rest of the queue for the next frame (one change per frame).
// Likewise a move after a button change waits for the next frame, so a press is seen where it
// happened (ImGui takes the click position from the frame the button went down).
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "window/window_internal.h"

namespace ember::window {

namespace {

const std::map<std::string, int>& key_table() {
  static const std::map<std::string, int>* t = [] {
    auto* m = new std::map<std::string, int>{
        {"SPACE", GLFW_KEY_SPACE}, {"APOSTROPHE", GLFW_KEY_APOSTROPHE}, {"COMMA", GLFW_KEY_COMMA},
        {"MINUS", GLFW_KEY_MINUS}, {"PERIOD", GLFW_KEY_PERIOD}, {"SLASH", GLFW_KEY_SLASH},
        {"SEMICOLON", GLFW_KEY_SEMICOLON}, {"EQUAL", GLFW_KEY_EQUAL}, {"LEFT_BRACKET", GLFW_KEY_LEFT_BRACKET},
        {"BACKSLASH", GLFW_KEY_BACKSLASH}, {"RIGHT_BRACKET", GLFW_KEY_RIGHT_BRACKET},
        {"GRAVE_ACCENT", GLFW_KEY_GRAVE_ACCENT}, {"ESCAPE", GLFW_KEY_ESCAPE}, {"ENTER", GLFW_KEY_ENTER},
        {"TAB", GLFW_KEY_TAB}, {"BACKSPACE", GLFW_KEY_BACKSPACE}, {"INSERT", GLFW_KEY_INSERT},
        {"DELETE", GLFW_KEY_DELETE}, {"RIGHT", GLFW_KEY_RIGHT}, {"LEFT", GLFW_KEY_LEFT}, {"DOWN", GLFW_KEY_DOWN},
        {"UP", GLFW_KEY_UP}, {"PAGE_UP", GLFW_KEY_PAGE_UP}, {"PAGE_DOWN", GLFW_KEY_PAGE_DOWN},
        {"HOME", GLFW_KEY_HOME}, {"END", GLFW_KEY_END}, {"KP_ENTER", GLFW_KEY_KP_ENTER},
        {"LEFT_SHIFT", GLFW_KEY_LEFT_SHIFT}, {"LEFT_CONTROL", GLFW_KEY_LEFT_CONTROL},
        {"LEFT_ALT", GLFW_KEY_LEFT_ALT}, {"LEFT_SUPER", GLFW_KEY_LEFT_SUPER},
        {"RIGHT_SHIFT", GLFW_KEY_RIGHT_SHIFT}, {"RIGHT_CONTROL", GLFW_KEY_RIGHT_CONTROL},
        {"RIGHT_ALT", GLFW_KEY_RIGHT_ALT}, {"RIGHT_SUPER", GLFW_KEY_RIGHT_SUPER},
    };
    for (char c = 'A'; c <= 'Z'; ++c) (*m)[std::string(1, c)] = GLFW_KEY_A + (c - 'A');
    for (char c = '0'; c <= '9'; ++c) (*m)[std::string(1, c)] = GLFW_KEY_0 + (c - '0');
    for (int i = 1; i <= 12; ++i) (*m)["F" + std::to_string(i)] = GLFW_KEY_F1 + i - 1;
    for (int i = 0; i <= 9; ++i) (*m)["KP_" + std::to_string(i)] = GLFW_KEY_KP_0 + i;
    return m;
  }();
  return *t;
}

// Names that stand for a left/right pair (key_down is true for either side).
const std::map<std::string, std::pair<int, int>>& pair_table() {
  static const std::map<std::string, std::pair<int, int>>* t = new std::map<std::string, std::pair<int, int>>{
      {"SHIFT", {GLFW_KEY_LEFT_SHIFT, GLFW_KEY_RIGHT_SHIFT}},
      {"CONTROL", {GLFW_KEY_LEFT_CONTROL, GLFW_KEY_RIGHT_CONTROL}},
      {"CTRL", {GLFW_KEY_LEFT_CONTROL, GLFW_KEY_RIGHT_CONTROL}},
      {"ALT", {GLFW_KEY_LEFT_ALT, GLFW_KEY_RIGHT_ALT}},
      {"SUPER", {GLFW_KEY_LEFT_SUPER, GLFW_KEY_RIGHT_SUPER}},
  };
  return *t;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s == "ESC") s = "ESCAPE";
  if (s == "RETURN") s = "ENTER";
  if (s == " ") s = "SPACE";
  return s;
}

WindowImpl* impl_of(GLFWwindow* w) { return static_cast<WindowImpl*>(glfwGetWindowUserPointer(w)); }

void push(GLFWwindow* w, const InputEvent& e) {
  if (WindowImpl* impl = impl_of(w)) impl->events.push_back(e);
}

void on_cursor(GLFWwindow* w, double x, double y) {
  InputEvent e;
  e.kind = InputEvent::Kind::mouse_pos;
  e.x = x;
  e.y = y;
  push(w, e);
}

void on_button(GLFWwindow* w, int button, int action, int) {
  if (button < 0 || button > 2 || action == GLFW_REPEAT) return;
  InputEvent e;
  e.kind = InputEvent::Kind::mouse_button;
  e.code = button == GLFW_MOUSE_BUTTON_LEFT ? 0 : button == GLFW_MOUSE_BUTTON_RIGHT ? 1 : 2;
  e.down = action == GLFW_PRESS;
  push(w, e);
}

void on_scroll(GLFWwindow* w, double dx, double dy) {
  InputEvent e;
  e.kind = InputEvent::Kind::scroll;
  e.x = dx;
  e.y = dy;
  push(w, e);
}

void on_key(GLFWwindow* w, int key, int, int action, int) {
  if (key < 0 || key >= kKeyCount || action == GLFW_REPEAT) return;
  InputEvent e;
  e.kind = InputEvent::Kind::key;
  e.code = key;
  e.down = action == GLFW_PRESS;
  push(w, e);
}

void on_char(GLFWwindow* w, unsigned int c) {
  InputEvent e;
  e.kind = InputEvent::Kind::text;
  e.codepoint = c;
  push(w, e);
}

// Decodes UTF-8 into code points (invalid bytes become U+FFFD).
std::vector<unsigned int> utf8_decode(const std::string& s) {
  std::vector<unsigned int> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    bool ok = n >= 0 && i + n < s.size();
    unsigned int cp = n > 0 ? c & (0x3fu >> n) : c;
    for (int k = 1; ok && k <= n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      ok = (d & 0xc0) == 0x80;
      cp = (cp << 6) | (d & 0x3fu);
    }
    out.push_back(ok ? cp : 0xfffdu);
    i += ok ? n + 1 : 1;
  }
  return out;
}

}  // namespace

int key_code(const std::string& name) {
  const std::string u = upper(name);
  auto it = key_table().find(u);
  if (it != key_table().end()) return it->second;
  auto p = pair_table().find(u);
  return p != pair_table().end() ? p->second.first : -1;
}

std::vector<std::string> key_names() {
  std::vector<std::string> names;
  for (const auto& kv : key_table()) names.push_back(kv.first);
  for (const auto& kv : pair_table()) names.push_back(kv.first);
  return names;
}

namespace {
[[noreturn]] void unknown_key(const std::string& name) {
  throw WindowError("ember: unknown key name \"" + name +
                    "\"; expected a letter or digit (\"W\", \"7\"), SPACE, ENTER, ESCAPE, TAB, BACKSPACE, LEFT, "
                    "RIGHT, UP, DOWN, F1..F12, SHIFT, CTRL, ALT, LEFT_SHIFT, ... (ember.window key names)");
}
}  // namespace

bool Window::key_down(const std::string& name) const {
  const std::string u = upper(name);
  auto p = pair_table().find(u);
  if (p != pair_table().end()) return impl_->keys[p->second.first] || impl_->keys[p->second.second];
  const int k = key_code(name);
  if (k < 0) unknown_key(name);
  return impl_->keys[k];
}

bool Window::key_pressed(const std::string& name) const {
  const std::string u = upper(name);
  auto p = pair_table().find(u);
  if (p != pair_table().end())
    return impl_->pressed.count(p->second.first) || impl_->pressed.count(p->second.second);
  const int k = key_code(name);
  if (k < 0) unknown_key(name);
  return impl_->pressed.count(k) > 0;
}

void Window::inject_mouse(double x, double y, std::array<bool, 3> buttons, double scroll) {
  WindowImpl& w = *impl_;
  if (w.closed) throw WindowError("ember: inject_mouse on a closed window");
  // The button state after everything already queued, so only changes are queued.
  bool state[3] = {w.mouse.buttons[0], w.mouse.buttons[1], w.mouse.buttons[2]};
  for (const InputEvent& e : w.events)
    if (e.kind == InputEvent::Kind::mouse_button) state[e.code] = e.down;
  InputEvent m;
  m.kind = InputEvent::Kind::mouse_pos;
  m.x = x;
  m.y = y;
  w.events.push_back(m);
  for (int b = 0; b < 3; ++b)
    if (state[b] != buttons[b]) {
      InputEvent e;
      e.kind = InputEvent::Kind::mouse_button;
      e.code = b;
      e.down = buttons[b];
      w.events.push_back(e);
    }
  if (scroll != 0) {
    InputEvent e;
    e.kind = InputEvent::Kind::scroll;
    e.y = scroll;
    w.events.push_back(e);
  }
}

void Window::inject_key(const std::string& name, bool down) {
  WindowImpl& w = *impl_;
  if (w.closed) throw WindowError("ember: inject_key on a closed window");
  const int k = key_code(name);
  if (k < 0) unknown_key(name);
  InputEvent e;
  e.kind = InputEvent::Kind::key;
  e.code = k;
  e.down = down;
  w.events.push_back(e);
}

void Window::inject_text(const std::string& utf8) {
  WindowImpl& w = *impl_;
  if (w.closed) throw WindowError("ember: inject_text on a closed window");
  for (unsigned int cp : utf8_decode(utf8)) {
    InputEvent e;
    e.kind = InputEvent::Kind::text;
    e.codepoint = cp;
    w.events.push_back(e);
  }
}

void WindowImpl::install_callbacks() {
  glfwSetCursorPosCallback(glfw, on_cursor);
  glfwSetMouseButtonCallback(glfw, on_button);
  glfwSetScrollCallback(glfw, on_scroll);
  glfwSetKeyCallback(glfw, on_key);
  glfwSetCharCallback(glfw, on_char);
}

void WindowImpl::apply_events() {
  mouse.scroll = mouse.scroll_x = 0;
  pressed.clear();
  ImGui::SetCurrentContext(imgui);
  ImGuiIO& io = ImGui::GetIO();
  bool button_changed[3] = {false, false, false};
  std::set<int> key_changed;
  while (!events.empty()) {
    const InputEvent& e = events.front();
    if (e.kind == InputEvent::Kind::mouse_button) {
      if (mouse.buttons[e.code] != e.down) {
        if (button_changed[e.code]) break;  // its second change this frame: next frame
        button_changed[e.code] = true;
        mouse.buttons[e.code] = e.down;
      }
    } else if (e.kind == InputEvent::Kind::key) {
      if (keys[e.code] != e.down) {
        if (key_changed.count(e.code)) break;
        key_changed.insert(e.code);
        keys[e.code] = e.down;
        if (e.down) pressed.insert(e.code);
      }
    } else if (e.kind == InputEvent::Kind::mouse_pos) {
      if ((button_changed[0] || button_changed[1] || button_changed[2]) && (e.x != mouse.x || e.y != mouse.y)) break;
      mouse.x = e.x;
      mouse.y = e.y;
    } else if (e.kind == InputEvent::Kind::scroll) {
      mouse.scroll += e.y;
      mouse.scroll_x += e.x;
    } else if (e.kind == InputEvent::Kind::text) {
      if (e.codepoint > 0 && e.codepoint <= 0x10ffff) io.AddInputCharacter(e.codepoint);
    }
    events.pop_front();
  }
  io.MousePos = ImVec2(static_cast<float>(mouse.x), static_cast<float>(mouse.y));
  for (int b = 0; b < 3; ++b) io.MouseDown[b] = mouse.buttons[b];
  io.MouseWheel += static_cast<float>(mouse.scroll);
  io.MouseWheelH += static_cast<float>(mouse.scroll_x);
  for (int k = 0; k < kKeyCount; ++k) io.KeysDown[k] = keys[k];
  io.KeyShift = keys[GLFW_KEY_LEFT_SHIFT] || keys[GLFW_KEY_RIGHT_SHIFT];
  io.KeyCtrl = keys[GLFW_KEY_LEFT_CONTROL] || keys[GLFW_KEY_RIGHT_CONTROL];
  io.KeyAlt = keys[GLFW_KEY_LEFT_ALT] || keys[GLFW_KEY_RIGHT_ALT];
  io.KeySuper = keys[GLFW_KEY_LEFT_SUPER] || keys[GLFW_KEY_RIGHT_SUPER];
}

}  // namespace ember::window

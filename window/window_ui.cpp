// Immediate-mode widgets (ui.h) over the ImGui context of the window whose frame is open.
// Everything ImGui would assert on (a call with no frame, an empty window title, end() without
// begin(), begin() left open at the frame's end) is caught here first: ImGui's asserts abort
// the process, a script's mistake must raise instead.
#include "window/ui.h"

#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>

#include "window/window_internal.h"

namespace ember::window::ui {

namespace {

WindowImpl& target(const char* fn) {
  WindowImpl* w = ui_target();
  if (!w || !w->frame_open || !w->imgui)
    throw WindowError(std::string("ember: em.ui.") + fn +
                      " called outside a frame; call it after win.frame() returned True (the frame lasts until the "
                      "next win.frame())");
  ImGui::SetCurrentContext(w->imgui);
  return *w;
}

void check_label(const std::string& label, const char* fn) {
  if (label.empty()) throw WindowError(std::string("ember: em.ui.") + fn + " needs a non-empty label");
}

// ImGui asserts (aborts) on slider bounds beyond half the type's range.
void check_slider_bounds(double lo, double hi, double limit) {
  if (!(std::abs(lo) <= limit) || !(std::abs(hi) <= limit))
    throw WindowError("ember: em.ui.slider bounds must be finite and within +-" + std::to_string(limit) +
                      ", got (" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "); use em.ui.drag or em.ui.input for unbounded values");
}

}  // namespace

void text(const std::string& s) {
  target("text");
  ImGui::TextUnformatted(s.c_str(), s.c_str() + s.size());
}

float slider_float(const std::string& label, float v, float lo, float hi) {
  target("slider");
  check_label(label, "slider");
  check_slider_bounds(lo, hi, FLT_MAX / 2);
  ImGui::SliderFloat(label.c_str(), &v, lo, hi);
  return v;
}

int slider_int(const std::string& label, int v, int lo, int hi) {
  target("slider");
  check_label(label, "slider");
  check_slider_bounds(lo, hi, INT_MAX / 2);
  ImGui::SliderInt(label.c_str(), &v, lo, hi);
  return v;
}

float drag_float(const std::string& label, float v, float speed, float lo, float hi) {
  target("drag");
  check_label(label, "drag");
  ImGui::DragFloat(label.c_str(), &v, speed, lo, hi);
  return v;
}

int drag_int(const std::string& label, int v, float speed, int lo, int hi) {
  target("drag");
  check_label(label, "drag");
  ImGui::DragInt(label.c_str(), &v, speed, lo, hi);
  return v;
}

bool checkbox(const std::string& label, bool v) {
  target("checkbox");
  check_label(label, "checkbox");
  ImGui::Checkbox(label.c_str(), &v);
  return v;
}

bool button(const std::string& label) {
  target("button");
  check_label(label, "button");
  return ImGui::Button(label.c_str());
}

int combo(const std::string& label, int index, const std::vector<std::string>& items) {
  target("combo");
  check_label(label, "combo");
  auto getter = [](void* data, int i, const char** out) {
    *out = (*static_cast<const std::vector<std::string>*>(data))[static_cast<size_t>(i)].c_str();
    return true;
  };
  ImGui::Combo(label.c_str(), &index, getter, const_cast<std::vector<std::string>*>(&items),
               static_cast<int>(items.size()));
  return index;
}

int radio(const std::string& label, int index, const std::vector<std::string>& items) {
  target("radio");
  check_label(label, "radio");
  ImGui::PushID(label.c_str());
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) ImGui::SameLine();
    if (ImGui::RadioButton(items[i].c_str(), index == static_cast<int>(i))) index = static_cast<int>(i);
  }
  ImGui::PopID();
  const size_t shown = std::min(label.find("##"), label.size());  // "##..." hides the rest, as in ImGui
  if (shown > 0) {
    ImGui::SameLine();
    ImGui::TextUnformatted(label.c_str(), label.c_str() + shown);
  }
  return index;
}

std::vector<float> color(const std::string& label, std::vector<float> rgba) {
  target("color");
  check_label(label, "color");
  if (rgba.size() != 3 && rgba.size() != 4)
    throw ShapeError("ember: em.ui.color takes 3 (RGB) or 4 (RGBA) floats, got " + std::to_string(rgba.size()));
  if (rgba.size() == 3) ImGui::ColorEdit3(label.c_str(), rgba.data());
  else ImGui::ColorEdit4(label.c_str(), rgba.data());
  return rgba;
}

float input_float(const std::string& label, float v, float step) {
  target("input");
  check_label(label, "input");
  ImGui::InputFloat(label.c_str(), &v, step, step * 10.f, "%.4g");
  return v;
}

int input_int(const std::string& label, int v, int step) {
  target("input");
  check_label(label, "input");
  ImGui::InputInt(label.c_str(), &v, step, step * 10);
  return v;
}

std::string input_text(const std::string& label, const std::string& v, size_t max_bytes) {
  target("input_text");
  check_label(label, "input_text");
  std::vector<char> buf(std::max(max_bytes, v.size()) + 1, '\0');
  std::memcpy(buf.data(), v.data(), v.size());
  ImGui::InputText(label.c_str(), buf.data(), buf.size());
  return std::string(buf.data());
}

void plot_lines(const std::string& label, const std::vector<float>& values, const std::string& overlay, float height) {
  target("plot");
  check_label(label, "plot");
  ImGui::PlotLines(label.c_str(), values.data(), static_cast<int>(values.size()), 0,
                   overlay.empty() ? nullptr : overlay.c_str(), FLT_MAX, FLT_MAX, ImVec2(0.f, height > 0 ? height : 60.f));
}

void plot_histogram(const std::string& label, const std::vector<float>& values, const std::string& overlay,
                    float height) {
  target("histogram");
  check_label(label, "histogram");
  ImGui::PlotHistogram(label.c_str(), values.data(), static_cast<int>(values.size()), 0,
                       overlay.empty() ? nullptr : overlay.c_str(), FLT_MAX, FLT_MAX,
                       ImVec2(0.f, height > 0 ? height : 60.f));
}

const std::vector<float>& push_history(const std::string& label, float v, size_t history) {
  WindowImpl& w = target("plot");
  if (history == 0) throw WindowError("ember: em.ui.plot history must be at least 1, got 0");
  std::vector<float>& h = w.histories[label];
  h.push_back(v);
  if (h.size() > history) h.erase(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(h.size() - history));
  return h;
}

bool collapsing_header(const std::string& label, bool default_open) {
  target("collapsing_header");
  check_label(label, "collapsing_header");
  return ImGui::CollapsingHeader(label.c_str(), default_open ? ImGuiTreeNodeFlags_DefaultOpen : 0);
}

void separator() {
  target("separator");
  ImGui::Separator();
}

void same_line() {
  target("same_line");
  ImGui::SameLine();
}

bool begin(const std::string& title, float x, float y, float w, float h) {
  WindowImpl& win = target("begin");
  if (title.empty() || title.rfind("##", 0) == 0)
    throw WindowError("ember: em.ui.window / em.ui.begin needs a title (got \"" + title + "\")");
  if (x >= 0 && y >= 0) ImGui::SetNextWindowPos(ImVec2(x, y), ImGuiCond_FirstUseEver);
  if (w > 0 && h > 0) ImGui::SetNextWindowSize(ImVec2(w, h), ImGuiCond_FirstUseEver);
  const bool visible = ImGui::Begin(title.c_str());
  ++win.ui_depth;
  return visible;
}

void end() {
  WindowImpl& win = target("end");
  if (win.ui_depth <= 0) throw WindowError("ember: em.ui.end without a matching em.ui.begin in this frame");
  ImGui::End();
  --win.ui_depth;
}

std::array<float, 4> item_rect() {
  target("item_rect");
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  return {a.x, a.y, b.x - a.x, b.y - a.y};
}

bool in_frame() {
  const WindowImpl* w = ui_target();
  return w && w->frame_open && w->imgui;
}

bool wants_mouse() {
  target("wants_mouse");
  return ImGui::GetIO().WantCaptureMouse;
}

bool wants_keyboard() {
  target("wants_keyboard");
  return ImGui::GetIO().WantCaptureKeyboard;
}

}  // namespace ember::window::ui

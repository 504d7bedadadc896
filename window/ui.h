// Immediate-mode widgets (em.ui): each call draws a Dear ImGui widget into the window whose
// frame is open (the last one whose frame() began and has not ended) and returns its value.
// Calling any of them with no open frame throws WindowError. Labels are ImGui IDs: a "##suffix"
// keeps two widgets with the same visible label apart.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "window/window.h"

namespace ember::window::ui {

void text(const std::string& s);                                                   // a line of text
float slider_float(const std::string& label, float v, float lo, float hi);         // float slider
int slider_int(const std::string& label, int v, int lo, int hi);                   // int slider
float drag_float(const std::string& label, float v, float speed, float lo, float hi);  // drag box (lo == hi: no limit)
int drag_int(const std::string& label, int v, float speed, int lo, int hi);        // int drag box
bool checkbox(const std::string& label, bool v);                                   // toggled value
bool button(const std::string& label);                                             // true on the frame it is clicked
int combo(const std::string& label, int index, const std::vector<std::string>& items);  // chosen index
int radio(const std::string& label, int index, const std::vector<std::string>& items);  // one radio button per item, in a row
std::vector<float> color(const std::string& label, std::vector<float> rgba);       // 3 or 4 floats in 0..1
float input_float(const std::string& label, float v, float step);                  // number field
int input_int(const std::string& label, int v, int step);                          // int field
std::string input_text(const std::string& label, const std::string& v, size_t max_bytes);  // text field
// Line plot / bar histogram of `values`; `overlay` is printed over it; height in pixels (0: default).
void plot_lines(const std::string& label, const std::vector<float>& values, const std::string& overlay, float height);
void plot_histogram(const std::string& label, const std::vector<float>& values, const std::string& overlay, float height);
// Appends `v` to the rolling history of `label` in the current window (keeping the last
// `history` values) and returns that history.
const std::vector<float>& push_history(const std::string& label, float v, size_t history);
bool collapsing_header(const std::string& label, bool default_open);               // open?
void separator();                                                                  // horizontal line
void same_line();                                                                  // next widget on this line
// Begins an ImGui window (pos/size applied the first time it appears when w, h > 0); returns
// whether its contents are visible. Every begin needs an end, even when it returns false.
bool begin(const std::string& title, float x, float y, float w, float h);
void end();
// The last widget's rectangle (x, y, width, height) in window pixels (for scripted input).
std::array<float, 4> item_rect();
// Whether a frame is open for ui calls (false once the window was closed, even mid-`begin`).
bool in_frame();
// Whether an ImGui widget wants the mouse / keyboard this frame (so the app should ignore them).
bool wants_mouse();
bool wants_keyboard();

}  // namespace ember::window::ui

// Colormaps for single-channel images: each is a few evenly spaced control colours joined by
// straight lines in RGB, evaluated identically by the display shader (u_cmap) and by
// colormap_color (tests compare the two). The perceptual maps are given by nine stops of the
// published viridis, magma, inferno and plasma maps; coolwarm by five stops of Moreland's
// diverging map. Piecewise-linear between nine stops stays within a couple of 8-bit levels.
#include <algorithm>
#include <cmath>
#include <map>

#include "window/window_internal.h"

namespace ember::window {

namespace {

using Points = std::vector<std::array<float, 3>>;

Points from_hex(std::initializer_list<unsigned> hex) {
  Points p;
  for (unsigned h : hex)
    p.push_back({float((h >> 16) & 255) / 255.f, float((h >> 8) & 255) / 255.f, float(h & 255) / 255.f});
  return p;
}

const std::map<std::string, Points>& table() {
  static const std::map<std::string, Points>* t = new std::map<std::string, Points>{
      {"gray", from_hex({0x000000, 0xffffff})},
      {"viridis", from_hex({0x440154, 0x472d7b, 0x3b528b, 0x2c728e, 0x21908c, 0x27ad81, 0x5dc863, 0xaadc32, 0xfde725})},
      {"magma", from_hex({0x000004, 0x1d1147, 0x51127c, 0x822681, 0xb63679, 0xe65164, 0xfb8861, 0xfec287, 0xfcfdbf})},
      {"inferno", from_hex({0x000004, 0x1f0c48, 0x550f6d, 0x88226a, 0xba3655, 0xe35932, 0xf98c0a, 0xf9c932, 0xfcffa4})},
      {"plasma", from_hex({0x0d0887, 0x4c02a1, 0x7e03a8, 0xa92395, 0xcc4778, 0xe56b5d, 0xf89441, 0xfdc328, 0xf0f921})},
      {"coolwarm", from_hex({0x3b4cc0, 0x8db0fe, 0xdddddd, 0xf49a7b, 0xb40426})},
  };
  return *t;
}

}  // namespace

std::vector<std::string> colormap_names() {
  std::vector<std::string> names;
  for (const auto& kv : table()) names.push_back(kv.first);
  return names;
}

const Points& colormap_points(const std::string& name) {
  auto it = table().find(name == "grey" ? "gray" : name);
  if (it == table().end()) {
    std::string known;
    for (const std::string& n : colormap_names()) known += (known.empty() ? "" : ", ") + n;
    throw WindowError("ember: unknown colormap \"" + name + "\"; expected one of " + known);
  }
  return it->second;
}

std::array<float, 3> colormap_color(const std::string& name, float t) {
  const Points& p = colormap_points(name);
  t = std::clamp(std::isnan(t) ? 0.f : t, 0.f, 1.f);
  const float x = t * float(p.size() - 1);
  const int i = std::min(static_cast<int>(std::floor(x)), static_cast<int>(p.size()) - 2);
  const float f = x - float(i);
  std::array<float, 3> c;
  for (int k = 0; k < 3; ++k) c[k] = p[i][k] + (p[i + 1][k] - p[i][k]) * f;
  return c;
}

}  // namespace ember::window

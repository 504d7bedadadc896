// Colormaps for single-channel images: u_cmap_n control colours evenly spaced over [0, 1] and
// joined by straight lines in RGB (window/window_colormap.cpp holds the tables and evaluates the
// same function on the CPU; tests compare the two). Appended to display.frag when compiled.
uniform int u_cmap_n;
uniform vec3 u_cmap[16];

vec3 colormap(float t) {
  float x = t * float(u_cmap_n - 1);
  int i = min(int(floor(x)), u_cmap_n - 2);
  return mix(u_cmap[i], u_cmap[i + 1], x - float(i));
}

#version 450 core
// The window's display pass (window/window_display.cpp): draws the shown image letterboxed into
// u_rect. f32 and u8 images are sampled from a texture (u_texture = 1, filtered by the sampler);
// u32/i32 images and images too large for a texture are read from the storage buffer and filtered
// here exactly as GL_LINEAR does. Values are normalized (u_range for f32, /255 otherwise), single
// channels go through the colormap (colormap.glsl), and the result is opaque RGB.
layout(std430, binding = 0) readonly buffer Pixels { uint words[]; };
uniform ivec3 u_size;    // width, height, channels
uniform int u_format;    // 0 f32, 1 u8, 2 u32, 3 i32
uniform vec4 u_rect;     // x0, y0 (GL, bottom-left), width, height in framebuffer pixels
uniform int u_linear;
uniform int u_texture;   // 1: sample u_tex (f32 or unorm u8 texture) instead of the storage buffer
uniform sampler2D u_tex;
uniform vec2 u_range;    // f32 values: lo, hi
out vec4 color;

vec3 colormap(float t);  // colormap.glsl

float element(int i) {
  if (u_format == 0) return uintBitsToFloat(words[i]);
  if (u_format == 1) return float((words[i >> 2] >> (8u * uint(i & 3))) & 255u) / 255.0;
  if (u_format == 2) return float(words[i]) / 255.0;
  return float(int(words[i])) / 255.0;
}

vec3 texel(ivec2 p) {
  p = clamp(p, ivec2(0), u_size.xy - 1);
  int base = (p.y * u_size.x + p.x) * u_size.z;
  if (u_size.z == 1) return vec3(element(base));
  return vec3(element(base), element(base + 1), element(base + 2));
}

void main() {
  vec2 f = vec2((gl_FragCoord.x - u_rect.x) / u_rect.z, (u_rect.y + u_rect.w - gl_FragCoord.y) / u_rect.w) *
           vec2(u_size.xy);
  vec3 v;
  if (u_texture == 1) {
    vec4 s = texture(u_tex, f / vec2(u_size.xy));  // filtering by the sampler: GL_NEAREST or GL_LINEAR
    v = u_size.z == 1 ? vec3(s.r) : s.rgb;
  } else if (u_linear == 0) {
    v = texel(ivec2(floor(f)));
  } else {
    vec2 g = f - 0.5;
    ivec2 p = ivec2(floor(g));
    vec2 t = g - vec2(p);
    v = mix(mix(texel(p), texel(p + ivec2(1, 0)), t.x), mix(texel(p + ivec2(0, 1)), texel(p + ivec2(1, 1)), t.x), t.y);
  }
  if (u_format == 0) v = (v - u_range.x) / (u_range.y - u_range.x);
  v = clamp(v, 0.0, 1.0);
  if (u_size.z == 1) v = colormap(v.r);
  color = vec4(v, 1.0);
}

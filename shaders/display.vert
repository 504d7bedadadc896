#version 450 core
// The window's display pass (window/window_display.cpp): one triangle that covers the viewport,
// from gl_VertexID alone (no vertex buffer); the fragment shader letterboxes the image.
void main() {
  vec2 p = vec2(float((gl_VertexID & 1) << 2) - 1.0, float((gl_VertexID & 2) << 1) - 1.0);
  gl_Position = vec4(p, 0.0, 1.0);
}

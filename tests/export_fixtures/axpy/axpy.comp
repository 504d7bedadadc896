#version 450
// y[t] += a * x[t] * float(step + 1), for t < threads. Parameters: push constants (Vulkan), a
// std140 uniform block (OpenGL), or with PARAMS_IN_BUFFER defined a storage buffer at binding 2.
#ifdef VULKAN
#define BIND(b) layout(std430, set = 0, binding = b)
#else
#define BIND(b) layout(std430, binding = b)
#endif
#if defined(PARAMS_IN_BUFFER)
BIND(2) readonly buffer Params { uint threads; float a; int step; } pc;
#elif defined(VULKAN)
layout(push_constant) uniform Params { uint threads; float a; int step; } pc;
#else
layout(std140, binding = 0) uniform Params { uint threads; float a; int step; } pc;
#endif
BIND(0) readonly buffer X { float x[]; };
BIND(1) buffer Y { float y[]; };
layout(local_size_x = 64) in;
void main() {
  uint t = gl_GlobalInvocationID.x;
  if (t < pc.threads) y[t] += pc.a * x[t] * float(pc.step + 1);
}

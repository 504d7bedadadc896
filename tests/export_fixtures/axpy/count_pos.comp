#version 450
// mask[t] = y[t] > 0 (bool: one uint word), cnt[0] counts them.
#ifdef VULKAN
layout(push_constant) uniform Params { uint threads; } pc;
#define BIND(b) layout(std430, set = 0, binding = b)
#else
layout(std140, binding = 0) uniform Params { uint threads; } pc;
#define BIND(b) layout(std430, binding = b)
#endif
BIND(0) readonly buffer Y { float y[]; };
BIND(1) buffer Mask { uint mask[]; };
BIND(2) buffer Cnt { int cnt[]; };
layout(local_size_x = 64) in;
void main() {
  uint t = gl_GlobalInvocationID.x;
  if (t >= pc.threads) return;
  bool pos = y[t] > 0.0;
  mask[t] = pos ? 1u : 0u;
  if (pos) atomicAdd(cnt[0], 1);
}

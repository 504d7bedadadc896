// step_k0: kernel 0 of step, exported by Ember 0.1.0 (target spirv; bindings and parameters: manifest.json)
#version 450
#define EMBER_U(x) uint(x)
#define EMBER_I(x) int(x)
#define EMBER_AS_U(x) floatBitsToUint(x)
#define EMBER_AS_F(x) uintBitsToFloat(x)
#define EMBER_F(x) float(x)
#define EMBER_OUT(T) out T
bool ember_isnan(float x) { return (EMBER_AS_U(x) & 0x7fffffffu) > 0x7f800000u; }
bool ember_isinf(float x) { return (EMBER_AS_U(x) & 0x7fffffffu) == 0x7f800000u; }
#define ember_nan EMBER_AS_F(0x7fc00000u)
#define ember_inf EMBER_AS_F(0x7f800000u)
int ember_div(int a, int b) {
  if (b == 0) return 0;
  uint ua = a < 0 ? EMBER_U(-a) : EMBER_U(a);
  uint ub = b < 0 ? EMBER_U(-b) : EMBER_U(b);
  uint q = ua / ub;
  if ((a < 0) == (b < 0)) return EMBER_I(q);
  return -EMBER_I(q) - (ua - q * ub != 0u ? 1 : 0);
}
uint ember_div(uint a, uint b) { return b == 0u ? 0u : a / b; }
int ember_mod(int a, int b) {
  if (b == 0) return 0;
  uint ua = a < 0 ? EMBER_U(-a) : EMBER_U(a);
  uint ub = b < 0 ? EMBER_U(-b) : EMBER_U(b);
  int r = EMBER_I(ua % ub);
  if (a < 0) r = -r;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
uint ember_mod(uint a, uint b) { return b == 0u ? 0u : a % b; }
float ember_mod(float a, float b) {
  precise float r = a - b * floor(a / b);  // unfused, as the CPU backend computes it
  return r;
}
int ember_shl(int a, int b) { return EMBER_U(b) < 32u ? a << b : 0; }
uint ember_shl(uint a, uint b) { return b < 32u ? a << b : 0u; }
int ember_shr(int a, int b) { return EMBER_U(b) < 32u ? a >> b : (a < 0 ? -1 : 0); }
uint ember_shr(uint a, uint b) { return b < 32u ? a >> b : 0u; }
int ember_f2i(float f) {
  if (ember_isnan(f)) return 0;
  if (f >= 2147483647.0f) return 2147483647;
  if (f <= -2147483648.0f) return -2147483647 - 1;
  return EMBER_I(f);
}
uint ember_f2u(float f) {
  if (ember_isnan(f) || f <= 0.0f) return 0u;
  if (f >= 4294967295.0f) return 4294967295u;
  return EMBER_U(f);
}
// min/max as core/ir/eval.cpp computes them (the non-NaN operand; y when equal, so -0/+0 keep
// their sign); selected on the words so no optimizer turns them into a min/max builtin.
float ember_fmin(float x, float y) { return EMBER_AS_F(ember_isnan(y) || x < y ? EMBER_AS_U(x) : EMBER_AS_U(y)); }
float ember_fmax(float x, float y) { return EMBER_AS_F(ember_isnan(y) || x > y ? EMBER_AS_U(x) : EMBER_AS_U(y)); }
float ember_sqrt(float x) { return x < 0.0f ? ember_nan : sqrt(x); }
// +-1 from the sign bit, +0 for zeros, NaN for NaN (as eval.cpp and np.sign); built from the word
// so that no optimizer turns it into a sign builtin (llvmpipe's returns -0 for 0 and NaN).
float ember_sign(float x) {
  uint w = EMBER_AS_U(x);
  return EMBER_AS_F(ember_isnan(x) ? w : ((w & 0x7fffffffu) == 0u ? 0u : ((w & 0x80000000u) | 0x3f800000u)));
}
int ember_step(int k, int s, int e) {  // k + s, or e where that would wrap (ends the loop)
  int n = k + s;
  return (s > 0 ? n < k : n > k) ? e : n;
}

// kernel [p0], 4 memories, 2 params
layout(std430, set = 0, binding = 0) buffer EmberM0 { uint m0[]; };
layout(std430, set = 0, binding = 1) buffer EmberM1 { uint m1[]; };
layout(std430, set = 0, binding = 2) buffer EmberM2 { uint m2[]; };
layout(std430, set = 0, binding = 3) buffer EmberM3 { uint m3[]; };
layout(push_constant) uniform EmberPush {
  uint threads;
  uint row;
  uint p0;
  uint p1;
} ember_pc;
layout(local_size_x = 64) in;
void main() {
  const int p0 = int(ember_pc.p0);
  const precise float p1 = uintBitsToFloat(ember_pc.p1);
  uint ember_t = gl_GlobalInvocationID.y * ember_pc.row + gl_GlobalInvocationID.x;
  if (ember_t < ember_pc.threads) {
    const int tid = int(ember_t);
    const int c0 = tid;
    // nbody.py:19: F = em.sum(-d / (r2 * em.sqrt(r2)), axis=1)
    precise float v0 = (-0.0f);
    precise float v1 = (-0.0f);
    precise float v2 = (-0.0f);
    // nbody.py:17: d = X[:, None, :] - X[None, :, :]
    const int v3 = (c0 * 3);
    const int v4 = (v3 + 1);
    const int v5 = (v3 + 2);
    // nbody.py:19: F = em.sum(-d / (r2 * em.sqrt(r2)), axis=1)
    for (int v6k = 0; v6k < p0; v6k = ember_step(v6k, 1, p0)) {
      const int v6 = v6k;
      // nbody.py:17: d = X[:, None, :] - X[None, :, :]
      const precise float v7 = uintBitsToFloat(m0[v3]);
      const int v8 = (v6 * 3);
      const precise float v9 = uintBitsToFloat(m0[v8]);
      const precise float v10 = (v7 - v9);
      // nbody.py:18: r2 = em.sum(d * d, axis=-1, keepdims=True) + 1e-4
      const precise float v11 = (v10 * v10);
      // nbody.py:17: d = X[:, None, :] - X[None, :, :]
      const precise float v12 = uintBitsToFloat(m0[v4]);
      const int v13 = (v8 + 1);
      const precise float v14 = uintBitsToFloat(m0[v13]);
      const precise float v15 = (v12 - v14);
      // nbody.py:18: r2 = em.sum(d * d, axis=-1, keepdims=True) + 1e-4
      const precise float v16 = (v15 * v15);
      const precise float v17 = (v11 + v16);
      // nbody.py:17: d = X[:, None, :] - X[None, :, :]
      const precise float v18 = uintBitsToFloat(m0[v5]);
      const int v19 = (v8 + 2);
      const precise float v20 = uintBitsToFloat(m0[v19]);
      const precise float v21 = (v18 - v20);
      // nbody.py:18: r2 = em.sum(d * d, axis=-1, keepdims=True) + 1e-4
      const precise float v22 = (v21 * v21);
      const precise float v23 = (v17 + v22);
      const precise float v24 = (v23 + 9.99999975e-05f);
      // nbody.py:19: F = em.sum(-d / (r2 * em.sqrt(r2)), axis=1)
      const precise float v25 = ember_sqrt(v24);
      const precise float v26 = (v24 * v25);
      const precise float v27 = (1.0f / v26);
      const precise float v28 = (v10 * v27);
      const precise float v29 = (v15 * v27);
      const precise float v30 = (v21 * v27);
      const precise float v31 = (v0 - v28);
      const precise float v32 = (v1 - v29);
      const precise float v33 = (v2 - v30);
      v0 = v31;
      v1 = v32;
      v2 = v33;
    }
    // nbody.py:20: V2 = V + F * dt
    const precise float v34 = (v0 * p1);
    const precise float v35 = (v1 * p1);
    const precise float v36 = (v2 * p1);
    const int v37 = (c0 * 3);
    const precise float v38 = uintBitsToFloat(m1[v37]);
    const int v39 = (v37 + 1);
    const precise float v40 = uintBitsToFloat(m1[v39]);
    const int v41 = (v37 + 2);
    const precise float v42 = uintBitsToFloat(m1[v41]);
    const precise float v43 = (v34 + v38);
    const precise float v44 = (v35 + v40);
    const precise float v45 = (v36 + v42);
    // nbody.py:21: return X + V2 * dt, V2
    const precise float v46 = (v43 * p1);
    const precise float v47 = (v44 * p1);
    const precise float v48 = (v45 * p1);
    const precise float v49 = uintBitsToFloat(m0[v37]);
    const precise float v50 = uintBitsToFloat(m0[v39]);
    const precise float v51 = uintBitsToFloat(m0[v41]);
    const precise float v52 = (v46 + v49);
    const precise float v53 = (v47 + v50);
    const precise float v54 = (v48 + v51);
    // nbody.py:20: V2 = V + F * dt
    m2[v37] = floatBitsToUint(v43);
    m2[v39] = floatBitsToUint(v44);
    m2[v41] = floatBitsToUint(v45);
    // nbody.py:21: return X + V2 * dt, V2
    m3[v37] = floatBitsToUint(v52);
    m3[v39] = floatBitsToUint(v53);
    m3[v41] = floatBitsToUint(v54);
  }
}

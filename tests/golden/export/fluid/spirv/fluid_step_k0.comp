// fluid_step_k0: kernel 0 of fluid_step, exported by Ember 0.1.0 (target spirv; bindings and parameters: manifest.json)
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

// kernel [p0, p1], 6 memories, 3 params
layout(std430, set = 0, binding = 0) buffer EmberM0 { uint m0[]; };
layout(std430, set = 0, binding = 1) buffer EmberM1 { uint m1[]; };
layout(std430, set = 0, binding = 2) buffer EmberM2 { uint m2[]; };
layout(std430, set = 0, binding = 3) buffer EmberM3 { uint m3[]; };
layout(std430, set = 0, binding = 4) buffer EmberM4 { uint m4[]; };
layout(std430, set = 0, binding = 5) buffer EmberM5 { uint m5[]; };
layout(push_constant) uniform EmberPush {
  uint threads;
  uint row;
  uint p0;
  uint p1;
  uint p2;
} ember_pc;
layout(local_size_x = 64) in;
void main() {
  const int p0 = int(ember_pc.p0);
  const int p1 = int(ember_pc.p1);
  const precise float p2 = uintBitsToFloat(ember_pc.p2);
  const int s0 = p1;
  uint ember_t = gl_GlobalInvocationID.y * ember_pc.row + gl_GlobalInvocationID.x;
  if (ember_t < ember_pc.threads) {
    const int tid = int(ember_t);
    const int c0 = (tid / s0);
    const int c1 = (tid % p1);
    // fluid.py:29: x = em.f32(j) - dt * u
    const precise float v0 = float(c1);
    const int v1 = (c0 * p1);
    const int v2 = (c1 + v1);
    const precise float v3 = uintBitsToFloat(m0[v2]);
    const precise float v4 = (v3 * p2);
    const precise float v5 = (v0 - v4);
    // fluid.py:30: y = em.f32(i) - dt * v
    const precise float v6 = float(c0);
    const precise float v7 = uintBitsToFloat(m1[v2]);
    const precise float v8 = (v7 * p2);
    const precise float v9 = (v6 - v8);
    // fluid.py:31: x0, y0 = em.floor(x), em.floor(y)
    const precise float v10 = floor(v5);
    const precise float v11 = floor(v9);
    // fluid.py:32: tx, ty = x - x0, y - y0
    const precise float v12 = (v5 - v10);
    const precise float v13 = (v9 - v11);
    // fluid.py:33: j0, i0 = em.i32(x0) % W, em.i32(y0) % H  # % has floor semantics: wraps negatives too
    const int v14 = ember_f2i(v10);
    const int v15 = ember_mod(v14, p1);
    const int v16 = ember_f2i(v11);
    const int v17 = ember_mod(v16, p0);
    // fluid.py:34: j1, i1 = (j0 + 1) % W, (i0 + 1) % H
    const int v18 = (v15 + 1);
    const int v19 = (v17 + 1);
    // fluid.py:35: a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
    const int v20 = (v17 * p1);
    const int v21 = (v15 + v20);
    const precise float v22 = uintBitsToFloat(m0[v21]);
    const int v23 = (v18 - p1);
    const bool v24 = (v18 >= p1);
    const int v25 = (v24 ? v23 : v18);
    const int v26 = (v20 + v25);
    const precise float v27 = uintBitsToFloat(m0[v26]);
    const precise float v28 = (v27 - v22);
    const precise float v29 = (v12 * v28);
    const precise float v30 = (v22 + v29);
    // fluid.py:36: b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
    const int v31 = (v19 - p0);
    const bool v32 = (v19 >= p0);
    const int v33 = (v32 ? v31 : v19);
    const int v34 = (v33 * p1);
    const int v35 = (v15 + v34);
    const precise float v36 = uintBitsToFloat(m0[v35]);
    const int v37 = (v25 + v34);
    const precise float v38 = uintBitsToFloat(m0[v37]);
    const precise float v39 = (v38 - v36);
    const precise float v40 = (v12 * v39);
    const precise float v41 = (v36 + v40);
    // fluid.py:37: return a + (b - a) * ty
    const precise float v42 = (v41 - v30);
    const precise float v43 = (v13 * v42);
    const precise float v44 = (v30 + v43);
    // fluid.py:35: a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
    const precise float v45 = uintBitsToFloat(m1[v21]);
    const precise float v46 = uintBitsToFloat(m1[v26]);
    const precise float v47 = (v46 - v45);
    const precise float v48 = (v12 * v47);
    const precise float v49 = (v45 + v48);
    // fluid.py:36: b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
    const precise float v50 = uintBitsToFloat(m1[v35]);
    const precise float v51 = uintBitsToFloat(m1[v37]);
    const precise float v52 = (v51 - v50);
    const precise float v53 = (v12 * v52);
    const precise float v54 = (v50 + v53);
    // fluid.py:37: return a + (b - a) * ty
    const precise float v55 = (v54 - v49);
    const precise float v56 = (v13 * v55);
    const precise float v57 = (v49 + v56);
    // fluid.py:35: a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
    const precise float v58 = uintBitsToFloat(m2[v21]);
    const precise float v59 = uintBitsToFloat(m2[v26]);
    const precise float v60 = (v59 - v58);
    const precise float v61 = (v12 * v60);
    const precise float v62 = (v58 + v61);
    // fluid.py:36: b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
    const precise float v63 = uintBitsToFloat(m2[v35]);
    const precise float v64 = uintBitsToFloat(m2[v37]);
    const precise float v65 = (v64 - v63);
    const precise float v66 = (v12 * v65);
    const precise float v67 = (v63 + v66);
    // fluid.py:37: return a + (b - a) * ty
    const precise float v68 = (v67 - v62);
    const precise float v69 = (v13 * v68);
    const precise float v70 = (v62 + v69);
    m3[v2] = floatBitsToUint(v44);
    m4[v2] = floatBitsToUint(v57);
    m5[v2] = floatBitsToUint(v70);
  }
}

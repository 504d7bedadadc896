// fluid_step_k1: kernel 1 of fluid_step, exported by Ember 0.1.0 (target hlsl; bindings and parameters: manifest.json)
#define EMBER_U(x) ((uint)(x))
#define EMBER_I(x) ((int)(x))
#define EMBER_AS_U(x) asuint(x)
#define EMBER_AS_F(x) asfloat(x)
#define EMBER_F(x) ((float)(x))
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

// kernel [p0, p1], 5 memories, 2 params
RWStructuredBuffer<uint> m0 : register(u0);
RWStructuredBuffer<uint> m1 : register(u1);
RWStructuredBuffer<uint> m2 : register(u2);
RWStructuredBuffer<uint> m3 : register(u3);
RWStructuredBuffer<uint> m4 : register(u4);
cbuffer EmberParams : register(b0) {
  uint threads;
  uint row;
  uint p0;
  uint p1;
};
[numthreads(64, 1, 1)]
void fluid_step_k1(uint3 ember_gid : SV_DispatchThreadID, uint3 ember_wg : SV_GroupID, uint3 ember_lt : SV_GroupThreadID) {
  const int p0 = ((int)(p0));
  const int p1 = ((int)(p1));
  const int s0 = p1;
  uint ember_t = ember_gid.y * row + ember_gid.x;
  if (ember_t < threads) {
    const int tid = (int)ember_t;
    const int c0 = (tid / s0);
    const int c1 = (tid % p1);
    // fluid.py:50: im, ip, jm, jp = (i - 1) % H, (i + 1) % H, (j - 1) % W, (j + 1) % W
    const int v0 = (c1 + 1);
    // fluid.py:41: return 0.5 * ((u[i, jp] - u[i, jm]) + (v[ip, j] - v[im, j]))
    const int v1 = (v0 - p1);
    const bool v2 = (v0 >= p1);
    const int v3 = (v2 ? v1 : v0);
    const int v4 = (c0 * p1);
    const int v5 = (v3 + v4);
    const precise float v6 = asfloat(m0[v5]);
    // fluid.py:50: im, ip, jm, jp = (i - 1) % H, (i + 1) % H, (j - 1) % W, (j + 1) % W
    const int v7 = (c1 - 1);
    // fluid.py:41: return 0.5 * ((u[i, jp] - u[i, jm]) + (v[ip, j] - v[im, j]))
    const int v8 = (v7 + p1);
    const bool v9 = (v7 < 0);
    const int v10 = (v9 ? v8 : v7);
    const int v11 = (v4 + v10);
    const precise float v12 = asfloat(m0[v11]);
    const precise float v13 = (v6 - v12);
    // fluid.py:50: im, ip, jm, jp = (i - 1) % H, (i + 1) % H, (j - 1) % W, (j + 1) % W
    const int v14 = (c0 + 1);
    // fluid.py:41: return 0.5 * ((u[i, jp] - u[i, jm]) + (v[ip, j] - v[im, j]))
    const int v15 = (v14 - p0);
    const bool v16 = (v14 >= p0);
    const int v17 = (v16 ? v15 : v14);
    const int v18 = (v17 * p1);
    const int v19 = (c1 + v18);
    const precise float v20 = asfloat(m1[v19]);
    // fluid.py:50: im, ip, jm, jp = (i - 1) % H, (i + 1) % H, (j - 1) % W, (j + 1) % W
    const int v21 = (c0 - 1);
    // fluid.py:41: return 0.5 * ((u[i, jp] - u[i, jm]) + (v[ip, j] - v[im, j]))
    const int v22 = (v21 + p0);
    const bool v23 = (v21 < 0);
    const int v24 = (v23 ? v22 : v21);
    const int v25 = (v24 * p1);
    const int v26 = (c1 + v25);
    const precise float v27 = asfloat(m1[v26]);
    const precise float v28 = (v20 - v27);
    const precise float v29 = (v13 + v28);
    const precise float v30 = (v29 * 0.5f);
    const int v31 = (c1 + v4);
    m2[v31] = asuint(v30);
    // fluid.py:53: p = em.var(em.zeros(U.shape, em.f32))
    const precise float v32 = asfloat(m3[v31]);
    m4[v31] = asuint(v32);
  }
}

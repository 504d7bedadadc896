// ember-math-text: the GPU dialects' transcendental functions (codegen/shader_math.h), one text
// printed as GLSL, HLSL and CUDA. Not a C++ header of Ember's: CMake embeds it as a string, and
// tests/cpp/test_shader_math.cpp compiles it as C++ to sweep it. Float32 and 32-bit integer
// operations only (no double, no fma), so it runs where fp64 is slow or missing; every float
// local is `precise` (NoContraction in SPIR-V: no fused or reassociated operations, which the
// error-free sums and the reductions below rely on; the cuda backend compiles with --fmad=false).
// Spelling macros (each dialect defines them): EMBER_U, EMBER_I, EMBER_F (value conversions),
// EMBER_AS_U, EMBER_AS_F (bit casts), EMBER_OUT(T) (an out parameter); ember_isnan and ember_nan
// come from the shared helpers (codegen/shader_helpers.cpp).
//
// Errors against the exact value (a double-precision reference; every 7th float32 word, 613M per
// function, subnormals included): exp 0.77 ulp, exp2 0.77, log 0.89, log2 1.17, sin 0.80, cos 0.79
// (any |x|: an integer Payne-Hanek reduction with 2/pi to 224 bits for |x| >= 401, an exact float
// Cody-Waite one below, the reduced argument as a float pair), tan 1.05, sinh 0.83, cosh 0.88,
// tanh 1.01, asin 0.85, acos 1.20, atan 0.86; tests/cpp/test_shader_math.cpp holds them below 1
// or 1.5 ulp on its sweeps, tests/python/test_math_accuracy.py runs NumPy's validation vectors on
// every backend. Subnormal inputs are normalized through the integers (log/log2 are exact in the
// exponent down to 2^-149) and subnormal results of exp/exp2 are rounded once by a two-step
// scaling: they hold wherever the device does not flush float arithmetic.
// Special values as C's: NaN in, NaN out; exp(-inf) = 0, exp(+inf) = +inf; log(+-0) = -inf,
// log(x < 0) = NaN; sin/cos/tan(+-inf) = NaN; odd functions keep the sign of zero. The sign of a
// NaN result and its payload are not kept (any NaN).
//
// The text is split into pieces, each starting at a line that is the piece mark (below): a
// kernel's shader gets a piece only when it, or a piece it gets, calls a function the piece
// defines (codegen/shader_math.h).
// Constants: codegen/gen_shader_math.py.

// ember-math-piece
// x with its sign flipped when `neg`.
float ember_flip(float x, bool neg) { return EMBER_AS_F(EMBER_AS_U(x) ^ (neg ? 0x80000000u : 0u)); }

// ember-math-piece
// 2^k as a float, for -126 <= k <= 127.
float ember_pow2i(int k) { return EMBER_AS_F(EMBER_U(k + 127) << 23); }
// (exp(r) - 1 - r) / r^2 for |r| <= ln(2)/2: 1/2! + r (1/3! + ... + r 1/8!), Taylor (truncation
// below 2^-31 relative to exp).
float ember_exp_poly(float r) {
  precise float q = ((((((2.4801587642286904e-05f * r + 0.00019841270113829523f) * r + 0.0013888889225199819f) * r +
                         0.008333333767950535f) * r + 0.0416666679084301f) * r + 0.1666666716337204f) * r + 0.5f);
  return q;
}
// p 2^k for -152 <= k <= 130, scaled in two steps so that the product rounds once (subnormal
// results) and overflows only when the result does.
float ember_scale2(float p, int k) {
  int k1 = k >> 1;
  precise float a = p * ember_pow2i(k1);
  precise float b = a * ember_pow2i(k - k1);
  return b;
}
// x = k ln 2 + rh + rl for |x| <= 105: k = round(x / ln 2) returned in `k`, ln 2 in a 16-bit head
// (exact times |k| < 256) and a tail, the remainder as a float pair (|rh| <= ln(2)/2 about).
float ember_exp_reduce(float x, EMBER_OUT(float) rl, EMBER_OUT(int) k) {
  precise float kf = floor(x * 1.4426950216293335f + 0.5f);
  precise float r1 = x - kf * 0.693145751953125f;
  precise float r2 = kf * -1.428606765330187e-06f;
  precise float rh = r1 + r2;
  precise float bb = rh - r1;
  rl = (r1 - (rh - bb)) + (r2 - bb);
  k = EMBER_I(kf);
  return rh;
}
// exp(rh + rl) = hi + lo (hi returned) for |rh| <= ln(2)/2 (about), |rl| <= ulp(rh): 1 + rh in a
// two-sum, so that the only rounding of size is hi's.
float ember_exp_core(float rh, float rl, EMBER_OUT(float) lo) {
  precise float t = rh * rh * ember_exp_poly(rh);
  precise float h = 1.0f + rh;
  precise float e = (1.0f - h) + rh;
  precise float l = e + (t + (rl + rl * rh));
  precise float hi = h + l;
  lo = l - (hi - h);
  return hi;
}
// exp(x) 2^adj for x not NaN, adj in {0, -1}.
float ember_exp_scaled(float x, int adj) {
  precise float a = x < -104.0f ? -104.0f : (x > 90.0f ? 90.0f : x);
  precise float rl, lo;
  int k;
  precise float rh = ember_exp_reduce(a, rl, k);
  precise float hi = ember_exp_core(rh, rl, lo);
  return ember_scale2(hi, k + adj);
}
// exp(x) = hi + lo (hi returned) for |x| <= 20.
float ember_exp_pair(float x, EMBER_OUT(float) lo) {
  precise float rl, l;
  int k;
  precise float rh = ember_exp_reduce(x, rl, k);
  precise float hi = ember_exp_core(rh, rl, l);
  precise float s = ember_pow2i(k);
  lo = l * s;
  precise float r = hi * s;
  return r;
}
float ember_exp(float x) {
  if (ember_isnan(x)) return x;
  return ember_exp_scaled(x, 0);
}
// exp2(x) = 2^k exp(r ln 2), k = round(x), r = x - k exact, r ln 2 as a float pair (Dekker's
// product with ln 2's float split into 12-bit halves, plus r times ln 2's rest).
float ember_exp2(float x) {
  if (ember_isnan(x)) return x;
  precise float a = x < -152.0f ? -152.0f : (x > 129.0f ? 129.0f : x);
  precise float kf = floor(a + 0.5f);
  precise float r = a - kf;
  precise float sp = r * 4097.0f;
  precise float hh = sp - (sp - r);
  precise float hl = r - hh;
  precise float p = r * 0.6931471824645996f;
  precise float pe = ((hh * 0.693115234375f - p) + hh * 3.1948089599609375e-05f + hl * 0.693115234375f) +
                     hl * 3.1948089599609375e-05f + r * -1.9046542121259336e-09f;
  precise float rh = p + pe;
  precise float rl = pe - (rh - p);
  precise float lo;
  precise float hi = ember_exp_core(rh, rl, lo);
  return ember_scale2(hi, EMBER_I(kf));
}

// ember-math-piece
// x > 0 finite (subnormals included) = 2^e m with m in [sqrt(1/2), sqrt(2)): m returned, e in
// ember_log_split's out parameter. A subnormal x is its integer mantissa times 2^-149, converted
// exactly: no subnormal float operation.
float ember_log_split(float x, EMBER_OUT(int) e) {
  uint w = EMBER_AS_U(x);
  bool sub = w < 0x00800000u;
  precise float y = sub ? EMBER_F(EMBER_I(w)) : x;
  uint v = EMBER_AS_U(y);
  int ex = EMBER_I(v >> 23) - (sub ? 276 : 127);
  uint mw = (v & 0x007fffffu) | 0x3f800000u;
  if (mw > 0x3fb504f3u) {
    mw -= 0x00800000u;
    ex += 1;
  }
  e = ex;
  return EMBER_AS_F(mw);
}
// log(1 + f) for f = m - 1 (exact), m in [sqrt(1/2), sqrt(2)): with s = f / (2 + f), log(1 + f) =
// 2 atanh(s) = f - (hfsq - s (hfsq + R(s^2))), hfsq = f^2 / 2, R the rest of atanh's series: the
// result is f plus a small correction, so there is no cancellation near 1. Returns the correction
// c = hfsq - s (hfsq + R) (log(1 + f) = f - c).
float ember_log_corr(float f) {
  precise float s = f / (2.0f + f);
  precise float z = s * s;
  precise float R = z * (0.6666666865348816f + z * (0.4000000059604645f + z * (0.2857142984867096f + z * 0.2222222238779068f)));
  precise float hfsq = 0.5f * f * f;
  precise float c = hfsq - s * (hfsq + R);
  return c;
}
// log(x) = e ln 2 + log(m): e ln(2)'s head exact (e has at most 8 bits), its tail with the
// correction.
float ember_log(float x) {
  uint w = EMBER_AS_U(x);
  if ((w & 0x7fffffffu) == 0u) return -EMBER_AS_F(0x7f800000u);
  if (w > 0x7f800000u) return ember_nan;  // NaN or x < 0
  if (w == 0x7f800000u) return x;
  int e;
  precise float m = ember_log_split(x, e);
  precise float f = m - 1.0f;
  precise float ef = EMBER_F(e);
  precise float c = ember_log_corr(f);
  precise float lo = c - ef * 1.428606765330187e-06f;
  precise float r = ef * 0.693145751953125f + (f - lo);
  return r;
}
// log2(x) = e + log(m) log2(e): log(m) = f - c as a float pair (f's 12-bit head fh, the rest fl - c),
// times log2(e) = L1 + L2 (L1 of 12 bits, so fh L1 is exact; L2 = log2(e) - L1 rounded), summed
// smallest first.
float ember_log2(float x) {
  uint w = EMBER_AS_U(x);
  if ((w & 0x7fffffffu) == 0u) return -EMBER_AS_F(0x7f800000u);
  if (w > 0x7f800000u) return ember_nan;
  if (w == 0x7f800000u) return x;
  int e;
  precise float m = ember_log_split(x, e);
  precise float f = m - 1.0f;
  precise float c = ember_log_corr(f);
  precise float fh = EMBER_AS_F(EMBER_AS_U(f) & 0xfffff000u);
  precise float fl = (f - fh) - c;
  precise float hi = fh * 1.4423828125f;
  precise float lo = fl * 1.4426950216293335f + fh * 0.00031222839606925845f;
  precise float ef = EMBER_F(e);
  precise float s = ef + hi;
  precise float r = s + ((ef - s) + hi + lo);
  return r;
}

// ember-math-piece
// s + e = a + b exactly (Knuth's two-sum; no condition on the magnitudes).
float ember_two_sum(float a, float b, EMBER_OUT(float) e) {
  precise float s = a + b;
  precise float bb = s - a;
  precise float err = (a - (s - bb)) + (b - bb);
  e = err;
  return s;
}
// c[wi] for wi in 0..4 by a tree of selects on wi's bits (cheaper to compile than a chain of
// comparisons or an array, on lavapipe).
uint ember_pick5(int wi, uint c0, uint c1, uint c2, uint c3, uint c4) {
  bool odd = (wi & 1) != 0;
  uint lo = odd ? c1 : c0;
  uint hi = odd ? c3 : c2;
  uint m = (wi & 2) != 0 ? hi : lo;
  return wi >= 4 ? c4 : m;
}
// The high word of a b, a < 2^24, from 16-bit halves (every language has 32-bit products).
uint ember_mulhi24(uint a, uint b) {
  uint al = a & 0xffffu, ah = a >> 16, bl = b & 0xffffu, bh = b >> 16;
  uint lh = al * bh, hl = ah * bl;
  uint mid = ((al * bl) >> 16) + (lh & 0xffffu) + (hl & 0xffffu);
  return ah * bh + (lh >> 16) + (hl >> 16) + (mid >> 16);
}
// a = |x| (finite) = q pi/2 + rh + rl modulo 2 pi, |rh + rl| <= pi/4 (about): returns q mod 4.
// a < 401 (q < 256): Cody-Waite with pi/2 = C1 + C2 + C3 + C4, C1..C3 of 16 bits so that q Ci is
// exact, a - q C1 exact (Sterbenz), the rest in two-sums. Else Payne-Hanek on the integers: with
// a = M 2^s (M < 2^24), the 96 bits of 2/pi from bit s - 1 times M give a 2/pi modulo 4 to 2^-64
// (the bits before contribute multiples of 4); the fraction, rounded to nearest, goes to a float
// pair in exact 24-bit pieces and is multiplied by pi/2 with Dekker's product.
int ember_rem_pio2(float a, EMBER_OUT(float) rh, EMBER_OUT(float) rl) {
  if (a < 401.0f) {
    precise float kf = floor(a * 0.6366197466850281f + 0.5f);
    precise float r1 = a - kf * 1.570770263671875f;
    precise float e1;
    precise float s1 = ember_two_sum(r1, -(kf * 2.6063062250614166e-05f), e1);
    precise float e2;
    precise float s2 = ember_two_sum(s1, -(kf * 6.077094383272197e-11f), e2);
    precise float t = (e1 + e2) - kf * 6.123234262925839e-17f;
    precise float h = s2 + t;
    rh = h;
    rl = t - (h - s2);
    return EMBER_I(kf) & 3;
  }
  uint w = EMBER_AS_U(a);
  uint M = (w & 0x007fffffu) | 0x00800000u;
  int j = EMBER_I(w >> 23) - 120;  // bit s - 1 of 2/pi, s = exponent - 150, after the zero word
  int wi = j >> 5, o = j & 31;
  // Words wi .. wi + 3 (wi <= 4) of 2/pi's bits after one word of zeros: 0, 0xa2f9836e, 0x4e441529, ...
  uint t0 = ember_pick5(wi, 0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u);
  uint t1 = ember_pick5(wi, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u);
  uint t2 = ember_pick5(wi, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u);
  uint t3 = ember_pick5(wi, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu);
  uint W0 = (t0 << o) | ((t1 >> 1) >> (31 - o));
  uint W1 = (t1 << o) | ((t2 >> 1) >> (31 - o));
  uint W2 = (t2 << o) | ((t3 >> 1) >> (31 - o));
  // P = M (W0 W1 W2) mod 2^96 = [p2 p1 p0]; a 2/pi = P 2^-94 modulo 4.
  uint p0 = M * W2;
  uint h1 = ember_mulhi24(M, W1);
  uint l1 = M * W1;
  uint p1 = l1 + ember_mulhi24(M, W2);
  uint p2 = M * W0 + h1 + (p1 < l1 ? 1u : 0u);
  uint q = p2 >> 30;
  uint F1 = (p2 << 2) | (p1 >> 30), F0 = (p1 << 2) | (p0 >> 30);
  if (F1 >= 0x80000000u) q += 1u;  // round to nearest: the fraction is now F - 1 (two's complement)
  // F = c1 2^-24 + c2 2^-48 + c3 2^-64, each piece an exactly converted integer.
  precise float c1 = EMBER_F(EMBER_I(F1) >> 8) * 5.9604644775390625e-08f;
  precise float c2 = EMBER_F(((F1 & 0xffu) << 16) | (F0 >> 16)) * 3.552713678800501e-15f;
  precise float c3 = EMBER_F(F0 & 0xffffu) * 5.421010862427522e-20f;
  precise float fe;
  precise float fs = ember_two_sum(c1, c2, fe);
  precise float fl0 = fe + c3;
  precise float fh = fs + fl0;
  precise float fl = fl0 - (fh - fs);
  // (fh + fl) (PH + PL), fh PH exactly by Dekker's product (PH = 1.5703125 + 0.000483870506...).
  precise float sp = fh * 4097.0f;
  precise float hh = sp - (sp - fh);
  precise float hl = fh - hh;
  precise float p = fh * 1.5707963705062866f;
  precise float pe = ((hh * 1.5703125f - p) + hh * 0.0004838705062866211f + hl * 1.5703125f) +
                     hl * 0.0004838705062866211f;
  precise float lo = pe + (fh * -4.371138828673793e-08f + fl * 1.5707963705062866f);
  precise float h = p + lo;
  rh = h;
  rl = lo - (h - p);
  return EMBER_I(q & 3u);
}
// sin(rh + rl) and cos(rh + rl) = hi + lo (hi returned) for |rh| <= pi/4 (about), |rl| <= ulp(rh):
// Taylor polynomials in z = rh^2 (truncation below 2^-29 relative), rl's first-order terms added
// to the small part; lo is hi's rounding error (tan divides the pairs).
float ember_sin_pair(float rh, float rl, EMBER_OUT(float) lo) {
  precise float z = rh * rh;
  precise float p = -0.1666666716337204f + z * (0.008333333767950535f + z * (-0.00019841270113829523f + z * 2.7557318844628753e-06f));
  precise float t = rh * z * p + rl * (1.0f - 0.5f * z);
  precise float r = rh + t;
  lo = t - (r - rh);
  return r;
}
float ember_cos_pair(float rh, float rl, EMBER_OUT(float) lo) {
  precise float z = rh * rh;
  precise float hz = 0.5f * z;
  precise float w = 1.0f - hz;
  precise float p = z * z * (0.0416666679084301f + z * (-0.0013888889225199819f + z * (2.4801587642286904e-05f + z * -2.755731998149713e-07f)));
  precise float t = (((1.0f - w) - hz) + p) - rh * rl;
  precise float r = w + t;
  lo = t - (r - w);
  return r;
}
float ember_sin_poly(float rh, float rl) {
  precise float lo;
  return ember_sin_pair(rh, rl, lo);
}
float ember_cos_poly(float rh, float rl) {
  precise float lo;
  return ember_cos_pair(rh, rl, lo);
}
float ember_sin(float x) {
  uint w = EMBER_AS_U(x) & 0x7fffffffu;
  if (w < 0x39800000u) return x;  // |x| < 2^-12: sin(x) rounds to x (zeros and subnormals too)
  if (w >= 0x7f800000u) return ember_nan;  // NaN for NaN and infinities
  precise float rh, rl;
  int q = ember_rem_pio2(EMBER_AS_F(w), rh, rl);
  precise float r = (q & 1) != 0 ? ember_cos_poly(rh, rl) : ember_sin_poly(rh, rl);
  return ember_flip(r, (q >= 2) != (EMBER_AS_U(x) >= 0x80000000u));
}
float ember_cos(float x) {
  uint w = EMBER_AS_U(x) & 0x7fffffffu;
  if (w < 0x39800000u) return 1.0f;
  if (w >= 0x7f800000u) return ember_nan;
  precise float rh, rl;
  int q = ember_rem_pio2(EMBER_AS_F(w), rh, rl);
  precise float r = (q & 1) != 0 ? ember_sin_poly(rh, rl) : ember_cos_poly(rh, rl);
  return ember_flip(r, q == 1 || q == 2);
}
// tan = sin / cos of the reduced argument (-cos / sin in odd quadrants), both as float pairs: the
// quotient q corrected by the remainder n - q d, q d exact by Dekker's product.
float ember_tan(float x) {
  uint w = EMBER_AS_U(x) & 0x7fffffffu;
  if (w < 0x39800000u) return x;
  if (w >= 0x7f800000u) return ember_nan;
  precise float rh, rl;
  int q = ember_rem_pio2(EMBER_AS_F(w), rh, rl);
  precise float sl, cl;
  precise float sh = ember_sin_pair(rh, rl, sl);
  precise float ch = ember_cos_pair(rh, rl, cl);
  bool odd = (q & 1) != 0;
  precise float nh = odd ? ch : sh;
  precise float nl = odd ? cl : sl;
  precise float dh = odd ? sh : ch;
  precise float dl = odd ? sl : cl;
  precise float t = nh / dh;
  precise float at = t * 4097.0f;
  precise float th = at - (at - t);
  precise float tl = t - th;
  precise float ad = dh * 4097.0f;
  precise float dhh = ad - (ad - dh);
  precise float dhl = dh - dhh;
  precise float p = t * dh;
  precise float pe = ((th * dhh - p) + th * dhl + tl * dhh) + tl * dhl;
  precise float r = t + (((nh - p) - pe) + (nl - t * dl)) / dh;
  return ember_flip(r, odd != (EMBER_AS_U(x) >= 0x80000000u));
}

// ember-math-piece
// sinh: a + a^3 P(a^2) below 1 (Taylor to a^11, truncation below 2^-32), (e - 1/e) / 2 up to 10
// with e = exp(a) as a float pair, then e / 2 (scaled inside exp, so it overflows only where sinh does).
float ember_sinh(float x) {
  uint w = EMBER_AS_U(x) & 0x7fffffffu;
  if (w < 0x39800000u) return x;  // |x| < 2^-12: sinh(x) rounds to x
  if (w > 0x7f800000u) return x;
  precise float a = EMBER_AS_F(w);
  precise float r;
  if (a < 1.0f) {
    precise float z = a * a;
    precise float p = 0.1666666716337204f + z * (0.008333333767950535f + z * (0.00019841270113829523f + z * (2.7557318844628753e-06f + z * 2.5052107943679403e-08f)));
    r = a + a * z * p;
  } else if (a < 10.0f) {
    precise float el;
    precise float eh = ember_exp_pair(a, el);
    precise float inv = 1.0f / eh;  // 1 / (eh + el) = inv - inv el inv
    r = 0.5f * (eh + (el - (inv - inv * (el * inv))));
  } else {
    r = ember_exp_scaled(a, -1);
  }
  return ember_flip(r, EMBER_AS_U(x) >= 0x80000000u);
}
float ember_cosh(float x) {
  uint w = EMBER_AS_U(x) & 0x7fffffffu;
  if (w < 0x39800000u) return 1.0f;
  if (w > 0x7f800000u) return x;
  precise float a = EMBER_AS_F(w);
  if (a >= 10.0f) return ember_exp_scaled(a, -1);
  precise float el;
  precise float eh = ember_exp_pair(a, el);
  precise float inv = 1.0f / eh;
  precise float r = 0.5f * (eh + (el + (inv - inv * (el * inv))));
  return r;
}
// tanh: a + a^3 P(a^2) below 0.625 (least squares, codegen/gen_shader_math.py), 1 - 2 / (e^2a + 1)
// up to 9.1, then 1.
float ember_tanh(float x) {
  uint w = EMBER_AS_U(x) & 0x7fffffffu;
  if (w < 0x39800000u) return x;
  if (w > 0x7f800000u) return x;
  precise float a = EMBER_AS_F(w);
  precise float r;
  if (a < 0.625f) {
    precise float z = a * a;
    precise float p = -0.3333333134651184f + z * (0.1333320140838623f + z * (-0.053946252912282944f + z * (0.021698210388422012f + z * (-0.008171788416802883f + z * 0.002138226293027401f))));
    r = a + a * z * p;
  } else if (a < 9.1f) {
    precise float el;
    precise float eh = ember_exp_pair(a + a, el);
    precise float dh = eh + 1.0f;
    precise float dl = (1.0f - (dh - eh)) + el;
    precise float qh = 2.0f / dh;
    r = 1.0f - (qh - qh * (dl / dh));
  } else {
    r = 1.0f;
  }
  return ember_flip(r, EMBER_AS_U(x) >= 0x80000000u);
}

// ember-math-piece
// asin/acos with Cephes asinf's structure: asin(a) = a + a^3 P(a^2) below 1/2 (Cephes' polynomial)
// and pi/2 - 2 asin(s) above, s = sqrt((1 - a) / 2) = w + c with w of 12 bits (2w exact) and c =
// (z - w^2) / (s + w), so that pi/4 - 2w is exact and the rest is small: about 1 ulp.
float ember_asin_poly(float z) {
  precise float p = ((((4.2163199048e-2f * z + 2.4181311049e-2f) * z + 4.5470025998e-2f) * z + 7.4953002686e-2f) * z +
                     1.6666752422e-1f) * z;
  return p;
}
float ember_asin(float x) {
  precise float a = abs(x);
  precise float r;
  if (!(a <= 1.0f)) return ember_nan;
  if (a > 0.5f) {
    precise float z = 0.5f * (1.0f - a);
    precise float s = sqrt(z);
    precise float w = EMBER_AS_F(EMBER_AS_U(s) & 0xfffff000u);
    precise float c = s > 0.0f ? (z - w * w) / (s + w) : 0.0f;  // asin(+-1): s = w = 0
    precise float p = 2.0f * (s * ember_asin_poly(z)) + 2.0f * c - -4.371138828673793e-08f;
    precise float q = 0.7853981852531433f - 2.0f * w;
    r = 0.7853981852531433f - (p - q);
  } else {
    r = a < 1e-4f ? a : a + a * ember_asin_poly(a * a);
  }
  return ember_flip(r, EMBER_AS_U(x) >= 0x80000000u);
}
float ember_acos(float x) {
  if (!(abs(x) <= 1.0f)) return ember_nan;
  precise float r;
  if (x < -0.5f) {
    precise float s = sqrt(0.5f * (1.0f + x));
    precise float t = 2.0f * ember_asin(s);
    r = 3.1415927410125732f - (t - -8.742277657347586e-08f);  // pi as a float pair
  } else if (x > 0.5f) {
    precise float s = sqrt(0.5f * (1.0f - x));
    r = 2.0f * ember_asin(s);
  } else {
    precise float t = ember_asin(x);
    r = 1.5707963705062866f - (t - -4.371138828673793e-08f);
  }
  return r;
}

// ember-math-piece
// atan(a) = atan(c) + atan(z), z = (a - c) / (1 + a c), with c = 0, 1/2, 1, 3/2 or infinity by the
// range of a (breakpoints 7/16, 11/16, 19/16, 39/16, as fdlibm's atanf): a - c is exact and
// |z| <= 7/16; atan(c) as a float pair; atan(z) = z + z^3 P(z^2), least squares on [0, 7/16]
// (codegen/gen_shader_math.py). About 1 ulp; atan2 from it with C's special cases.
float ember_atan(float x) {
  if (ember_isnan(x)) return x;
  precise float a = abs(x);
  precise float hi = 0.0f;
  precise float lo = 0.0f;
  precise float z = a;
  if (a >= 2.4375f) {
    hi = 1.5707963705062866f;
    lo = -4.371138828673793e-08f;
    z = -1.0f / a;
  } else if (a >= 1.1875f) {
    hi = 0.9827937483787537f;
    lo = -2.5131424052915463e-08f;
    z = (a - 1.5f) / (1.0f + 1.5f * a);
  } else if (a >= 0.6875f) {
    hi = 0.7853981852531433f;
    lo = -2.1855694143368964e-08f;
    z = (a - 1.0f) / (a + 1.0f);
  } else if (a >= 0.4375f) {
    hi = 0.46364760398864746f;
    lo = 5.01215868808913e-09f;
    z = (2.0f * a - 1.0f) / (2.0f + a);
  }
  precise float zz = z * z;
  precise float p = zz * (-0.3333333134651184f + zz * (0.19999836385250092f + zz * (-0.14280132949352264f +
                    zz * (0.11021947860717773f + zz * (-0.08351728320121765f + zz * 0.04491681605577469f)))));
  precise float t = hi + (z + (z * p + lo));
  return ember_flip(t, EMBER_AS_U(x) >= 0x80000000u);
}
float ember_atan2(float y, float x) {
  if (ember_isnan(x) || ember_isnan(y)) return ember_nan;
  const float pi = 3.141592654f;
  bool neg_y = EMBER_AS_U(y) >= 0x80000000u, neg_x = EMBER_AS_U(x) >= 0x80000000u;
  precise float r;
  if (y == 0.0f) r = neg_x ? pi : 0.0f;
  else if (x == 0.0f) r = 0.5f * pi;
  else if (ember_isinf(x) && ember_isinf(y)) r = neg_x ? 0.75f * pi : 0.25f * pi;
  else {
    precise float q = abs(y / x);
    r = ember_atan(q);
    if (neg_x) r = pi - r;
  }
  return neg_y ? -r : r;
}

// ember-math-piece
// pow as C's, exp2(y log2|x|) from the accurate exp2 and log2 (the product's rounding still grows
// the error with |y log2|x||, as a float pow without extended precision does).
float ember_pow(float x, float y) {
  if (y == 0.0f || x == 1.0f) return 1.0f;
  if (ember_isnan(x) || ember_isnan(y)) return ember_nan;
  precise float ax = abs(x);
  precise float r;
  if (ember_isinf(y)) {
    if (ax == 1.0f) return 1.0f;
    return (ax > 1.0f) == (y > 0.0f) ? EMBER_AS_F(0x7f800000u) : 0.0f;
  }
  if (ax == 0.0f) r = y < 0.0f ? EMBER_AS_F(0x7f800000u) : 0.0f;
  else if (ember_isinf(ax)) r = y < 0.0f ? 0.0f : EMBER_AS_F(0x7f800000u);
  else {
    precise float l = y * ember_log2(ax);
    r = ember_exp2(l);
  }
  if (EMBER_AS_U(x) >= 0x80000000u) {
    if (floor(y) != y) return (ax == 0.0f || ember_isinf(ax)) ? r : ember_nan;
    if (abs(y) < 16777216.0f && ember_mod(y, 2.0f) == 1.0f) r = -r;
  }
  return r;
}

// ember-math-piece
// Fast math (EMBER_FAST_MATH, README "Backends"): the language's builtins, with Ember's results
// outside their domain.
float ember_fast_log(float x) { return x < 0.0f ? ember_nan : (x == 0.0f ? -EMBER_AS_F(0x7f800000u) : log(x)); }
float ember_fast_log2(float x) { return x < 0.0f ? ember_nan : (x == 0.0f ? -EMBER_AS_F(0x7f800000u) : log2(x)); }
float ember_fast_pow(float x, float y) {
  if (y == 0.0f || x == 1.0f) return 1.0f;
  if (ember_isnan(x) || ember_isnan(y)) return ember_nan;
  float ax = abs(x);
  float r;
  if (ember_isinf(y)) {
    if (ax == 1.0f) return 1.0f;
    return (ax > 1.0f) == (y > 0.0f) ? EMBER_AS_F(0x7f800000u) : 0.0f;
  }
  if (ax == 0.0f) r = y < 0.0f ? EMBER_AS_F(0x7f800000u) : 0.0f;
  else if (ember_isinf(ax)) r = y < 0.0f ? 0.0f : EMBER_AS_F(0x7f800000u);
  else r = exp2(y * log2(ax));
  if (EMBER_AS_U(x) >= 0x80000000u) {
    if (floor(y) != y) return (ax == 0.0f || ember_isinf(ax)) ? r : ember_nan;
    if (abs(y) < 16777216.0f && ember_mod(y, 2.0f) == 1.0f) r = -r;
  }
  return r;
}

// Ember's f32 exp, exp2, log, log2, sin, cos, tanh, atan2, fmin and fmax: one branch-free
// implementation shared by the reference interpreter (core/ir/eval.cpp) and the CPU kernels,
// whose prelude embeds this text (codegen/dialect_cpp.cpp, through a string CMake generates).
// Same source, same operations, no FP contraction on either side (both compile with
// -ffp-contract=off and no fma is used), so both return the same bits; a kernel loop calling
// them vectorizes (selects and a gather, no calls, no branches).
//
// Method: the f32 argument is widened to double and reduced exactly or with ~2^-53 relative
// error; the reduced function is a polynomial in double (truncated Taylor series; a least-squares
// fit for atan) with truncation error below 2^-35 relative; the result is rounded once to f32.
// GUARANTEE: every result is within 1 ulp of the exact value (the correctly rounded f32 or its
// neighbour), over the whole f32 range, subnormal results included, for exp, exp2, log, log2,
// sin, cos and tanh (measured on EVERY f32: max 0.50030 ulp, tanh; exp 0.50011, the others less)
// and for atan2 (2e8 random pairs: max 0.50001 ulp). tests/cpp/test_math.cpp asserts < 1 ulp
// on dense sweeps.
// Special values (as C): NaN in -> the same NaN, quieted (atan2: y's, else x's); exp(+inf) = +inf,
// exp(-inf) = +0, overflow to +inf and underflow to +0 (subnormals rounded once); log(+-0) = -inf,
// log(x < 0) = NaN, log(+inf) = +inf; sin/cos(+-inf) = NaN, sin(+-0) = +-0; tanh(+-inf) = +-1;
// atan2 of zeros and infinities as C's (+-0, +-pi, +-pi/4, +-3pi/4, ...).
// sin/cos reduce |x| < 2^23 by x - k pi/2 with pi/2 in three pieces (k pi/2's first two pieces
// exact for k < 2^26); for |x| >= 2^23, x = M 2^E with an integer M < 2^24, and modulo 2pi,
// x = M (2^E mod 2pi), from a table (E = 0..104) split so that its products with M are exact: the
// reduction is exact or 2^-53-relative over the whole range (no Payne-Hanek slow path needed).
// Constants: core/math/gen_constants.py. f32 only; this header must stay valid C++17.
#ifndef EMBER_CORE_MATH_EMBER_MATH_H
#define EMBER_CORE_MATH_EMBER_MATH_H

#include <cstdint>
#include <cstring>

namespace ember_math {

inline double f64_of(uint64_t w) { double d; std::memcpy(&d, &w, 8); return d; }
inline uint64_t word_of(double d) { uint64_t w; std::memcpy(&w, &d, 8); return w; }
inline float f32_of(uint32_t w) { float f; std::memcpy(&f, &w, 4); return f; }
inline uint32_t word_of(float f) { uint32_t w; std::memcpy(&w, &f, 4); return w; }

// y + kRound rounds y to an integer (|y| < 2^51) held in the low bits of the word.
constexpr double kRound = 0x1.8p52;
constexpr double kLn2 = 0x1.62e42fefa39efp-1;
constexpr double kLog2e = 0x1.71547652b82fep0;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;

// pi/2 = P1 + P2 + P3 (P1 on a 2^-26 grid, P2 on a 2^-52 grid)
constexpr double kHalfPi1 = 0x1.921fb54000000p+0, kHalfPi2 = 0x1.10b4600000000p-30, kHalfPi3 = 0x1.1a62633145c07p-54;
// 2^E mod 2pi for E = 0..104, split as pi/2 is: row E at [3E, 3E + 3) (a flat table and a 64-bit
// index: GCC 12 vectorizes that gather, not one from a 2-D table)
constexpr double kPow2Mod2Pi[105 * 3] = {
  0x1.0000000000000p+0, 0x0.0p+0, 0x0.0p+0,
  0x1.0000000000000p+1, 0x0.0p+0, 0x0.0p+0,
  0x1.0000000000000p+2, 0x0.0p+0, 0x0.0p+0,
  0x1.b7812ac000000p+0, 0x1.77a5cf0000000p-27, 0x1.cb3b399d747f2p-53,
  0x1.b7812ae000000p+1, 0x1.de973d0000000p-28, 0x1.9676733ae8fe4p-53,
  0x1.2b0bad0000000p-1, 0x1.563d0d0000000p-27, 0x1.f05040268cf76p-54,
  0x1.2b0bad4000000p+0, 0x1.58f4340000000p-28, 0x1.f05040268cf76p-53,
  0x1.2b0bad4000000p+1, 0x1.58f4348000000p-27, 0x1.e0a0804d19eedp-53,
  0x1.2b0bad5000000p+2, 0x1.63d0d30000000p-28, 0x1.c141009a33ddap-53,
  0x1.87ef4ac000000p+1, 0x1.b6ed460000000p-28, 0x1.4dbd3ad1dc3a6p-53,
  0x1.87ef4ac000000p+2, 0x1.b6ed468000000p-27, 0x1.36f4eb4770e97p-54,
  0x1.7dbee05000000p+2, 0x1.cb00b90000000p-28, 0x1.023024e4e5689p-53,
  0x1.695e0b6000000p+2, 0x1.42a6888000000p-27, 0x1.cf9b83673f504p-53,
  0x1.409c618000000p+2, 0x1.fcf2e10000000p-27, 0x1.6a72406bf31fbp-53,
  0x1.de321ba000000p+1, 0x1.718b920000000p-27, 0x1.403f74eab57cfp-54,
  0x1.304999c000000p+0, 0x1.6af3ce0000000p-29, 0x1.0b7aae8829fc1p-53,
  0x1.304999c000000p+1, 0x1.6af3cf0000000p-28, 0x1.6f55d1053f822p-57,
  0x1.304999c000000p+2, 0x1.6af3cf0000000p-27, 0x1.6f55d1053f822p-56,
  0x1.9ce6fca000000p+1, 0x1.3635b60000000p-29, 0x1.38856ef622fd6p-56,
  0x1.58e8ec0000000p-3, 0x1.2c0aa80000000p-31, 0x1.95c955afd3e7bp-57,
  0x1.58e8ec0000000p-2, 0x1.2c0aa80000000p-30, 0x1.95c955afd3e7bp-56,
  0x1.58e8ec0000000p-1, 0x1.2c0aa80000000p-29, 0x1.95c955afd3e7bp-55,
  0x1.58e8ec0000000p+0, 0x1.2c0aa80000000p-28, 0x1.95c955afd3e7bp-54,
  0x1.58e8ec0000000p+1, 0x1.2c0aa80000000p-27, 0x1.95c955afd3e7bp-53,
  0x1.58e8ec1000000p+2, 0x1.6055420000000p-29, 0x1.2b92ab5fa7cf6p-53,
  0x1.1fb222e000000p+2, 0x1.3e83880000000p-30, 0x1.130482e620ef5p-56,
  0x1.5a8920e000000p+1, 0x1.c746b18000000p-27, 0x1.ff8b4adf975f4p-58,
  0x1.5a8920f000000p+2, 0x1.8e8d630000000p-27, 0x1.ff8b4adf975f4p-57,
  0x1.22f28cb000000p+2, 0x1.29812b0000000p-28, 0x1.65945f2ced617p-58,
  0x1.678ac84000000p+1, 0x1.424df40000000p-28, 0x1.e1947f9043554p-53,
  0x1.678ac84000000p+2, 0x1.424df48000000p-27, 0x1.c328ff2086aa7p-53,
  0x1.3cf5db4000000p+2, 0x1.fc41b90000000p-27, 0x1.518d37de81d41p-53,
  0x1.cf9802a000000p+1, 0x1.7029420000000p-27, 0x1.b956a569e09d0p-55,
  0x1.ebc26b8000000p-1, 0x1.5fe14e0000000p-29, 0x1.4fcd18a4c99b5p-54,
  0x1.ebc26b8000000p+0, 0x1.5fe14e0000000p-28, 0x1.4fcd18a4c99b5p-53,
  0x1.ebc26b8000000p+1, 0x1.5fe14e8000000p-27, 0x1.3f346293266d2p-54,
  0x1.668ad94000000p+0, 0x1.bb43640000000p-30, 0x1.0a6f9c309aec4p-53,
  0x1.668ad94000000p+1, 0x1.bb43660000000p-29, 0x1.4df386135d88ap-57,
  0x1.668ad94000000p+2, 0x1.bb43660000000p-28, 0x1.4df386135d88ap-56,
  0x1.3af5fd4000000p+2, 0x1.32e9358000000p-27, 0x1.eb81b224be14bp-57,
  0x1.c7988a8000000p+1, 0x1.dd783a8000000p-27, 0x1.156dfc4188372p-58,
  0x1.abc6aa8000000p-1, 0x1.3296440000000p-27, 0x1.dc9219618d029p-53,
  0x1.abc6aac000000p+0, 0x1.94b2220000000p-29, 0x1.b92432c31a053p-53,
  0x1.abc6aac000000p+1, 0x1.94b2230000000p-28, 0x1.72486586340a6p-53,
  0x1.9a6f580000000p-2, 0x1.0c57f30000000p-27, 0x1.5f980953b927bp-54,
  0x1.9a6f588000000p-1, 0x1.8afe600000000p-31, 0x1.5f980953b927bp-53,
  0x1.9a6f588000000p+0, 0x1.8afe640000000p-30, 0x1.7e60254ee49ebp-54,
  0x1.9a6f588000000p+1, 0x1.8afe640000000p-29, 0x1.7e60254ee49ebp-53,
  0x1.09f4680000000p-3, 0x1.e928100000000p-30, 0x1.8ff708767b792p-54,
  0x1.09f4680000000p-2, 0x1.e928100000000p-29, 0x1.8ff708767b792p-53,
  0x1.09f4680000000p-1, 0x1.e928110000000p-28, 0x1.1fee10ecf6f24p-53,
  0x1.09f4680000000p+0, 0x1.e928118000000p-27, 0x1.fee10ecf6f246p-56,
  0x1.09f4682000000p+1, 0x1.d250230000000p-27, 0x1.fee10ecf6f246p-55,
  0x1.09f4683000000p+2, 0x1.a4a0460000000p-27, 0x1.fee10ecf6f246p-54,
  0x1.0392366000000p+1, 0x1.81ccb70000000p-28, 0x1.ca1c486ce3a38p-53,
  0x1.0392366000000p+2, 0x1.81ccb78000000p-27, 0x1.943890d9c7470p-53,
  0x1.d412de4000000p+0, 0x1.ecfcfc0000000p-29, 0x1.e758b6a2061a3p-54,
  0x1.d412de4000000p+1, 0x1.ecfcfc0000000p-28, 0x1.e758b6a2061a3p-53,
  0x1.07cca40000000p+0, 0x1.64a2cc0000000p-27, 0x1.99eca6e180b37p-53,
  0x1.07cca42000000p+1, 0x1.928b310000000p-28, 0x1.33d94dc30166fp-53,
  0x1.07cca42000000p+2, 0x1.928b318000000p-27, 0x1.9eca6e180b375p-55,
  0x1.f5e64c4000000p+0, 0x1.3978650000000p-28, 0x1.3540e152f4359p-54,
  0x1.f5e64c4000000p+1, 0x1.3978650000000p-27, 0x1.3540e152f4359p-53,
  0x1.8f1a5c0000000p+0, 0x1.ea969a0000000p-27, 0x1.ade7e21ae7526p-56,
  0x1.8f1a5c2000000p+1, 0x1.d52d340000000p-27, 0x1.ade7e21ae7526p-55,
  0x1.8f1a5c3000000p+2, 0x1.aa5a680000000p-27, 0x1.ade7e21ae7526p-54,
  0x1.8c15033000000p+2, 0x1.98b53f0000000p-28, 0x1.79231bb85bd18p-53,
  0x1.860a512000000p+2, 0x1.105b0f0000000p-27, 0x1.7b02e21c58446p-54,
  0x1.79f4ed0000000p+2, 0x1.985bed8000000p-27, 0x1.463e1bb9ccc38p-53,
  0x1.61ca24d000000p+2, 0x1.50bb560000000p-28, 0x1.5eddc44438188p-55,
  0x1.3174946000000p+2, 0x1.90c24b0000000p-28, 0x1.eaa86efe422d8p-55,
  0x1.a192e70000000p+1, 0x1.08681a8000000p-27, 0x1.811ee2392b2bdp-54,
  0x1.ee66380000000p-3, 0x1.8876048000000p-27, 0x1.4c5a1bd69faafp-53,
  0x1.ee66390000000p-2, 0x1.10ec098000000p-27, 0x1.31686f5a7eabcp-54,
  0x1.ee66398000000p-1, 0x1.0ec0980000000p-30, 0x1.31686f5a7eabcp-53,
  0x1.ee66398000000p+0, 0x1.0ec09a0000000p-29, 0x1.8b437ad3f55e0p-55,
  0x1.ee66398000000p+1, 0x1.0ec09a0000000p-28, 0x1.8b437ad3f55e0p-54,
  0x1.711a110000000p+0, 0x1.0cccd30000000p-28, 0x1.567eb47169dd3p-53,
  0x1.711a110000000p+1, 0x1.0cccd38000000p-27, 0x1.59fad1c5a774ap-54,
  0x1.711a111000000p+2, 0x1.999a700000000p-31, 0x1.59fad1c5a774ap-53,
  0x1.50146cd000000p+2, 0x1.aad91e0000000p-27, 0x1.fcc374a30da1ap-55,
  0x1.0e09247000000p+2, 0x1.9ab0170000000p-28, 0x1.9339e7ddf69fep-54,
  0x1.13e5274000000p+1, 0x1.1255e68000000p-27, 0x1.5e75217b6b1f0p-53,
  0x1.13e5275000000p+2, 0x1.255e6c0000000p-30, 0x1.79d485edac7c1p-54,
  0x1.2b5532a000000p+1, 0x1.c0fd6a8000000p-27, 0x1.450fbf8b20fb3p-53,
  0x1.2b5532b000000p+2, 0x1.81fad58000000p-27, 0x1.143efe2c83ecdp-54,
  0x1.8915606000000p+1, 0x1.ee6dea0000000p-29, 0x1.bef46f93f0d7ep-54,
  0x1.8915606000000p+2, 0x1.ee6dea0000000p-28, 0x1.bef46f93f0d7ep-53,
  0x1.800b0b8000000p+2, 0x1.6613ba0000000p-27, 0x1.492418c5562eep-53,
  0x1.6df661d000000p+2, 0x1.0f35100000000p-29, 0x1.760daca08373ap-55,
  0x1.49cd0e5000000p+2, 0x1.ff40578000000p-27, 0x1.0c841fdb6c71fp-54,
  0x1.017a677000000p+2, 0x1.76267e8000000p-27, 0x1.af7eb2f1c1e22p-54,
  0x1.c35466c000000p+0, 0x1.8fcb320000000p-29, 0x1.7ab9ec8f36615p-53,
  0x1.c35466c000000p+1, 0x1.8fcb330000000p-28, 0x1.eae7b23cd9852p-54,
  0x1.89a58c0000000p-1, 0x1.0771028000000p-27, 0x1.b622ebda4e045p-53,
  0x1.89a58c4000000p+0, 0x1.dc40b00000000p-32, 0x1.6c45d7b49c089p-53,
  0x1.89a58c4000000p+1, 0x1.dc40b80000000p-31, 0x1.b1175ed270225p-54,
  0x1.89a58c4000000p+2, 0x1.dc40b80000000p-30, 0x1.b1175ed270225p-53,
  0x1.812b633000000p+2, 0x1.eeb5fe0000000p-27, 0x1.2d69f74254c3bp-53,
  0x1.7037113000000p+2, 0x1.5511cc0000000p-27, 0x1.30794110f0348p-56,
  0x1.4e4e6d3000000p+2, 0x1.0e4b3c0000000p-30, 0x1.75989e1b08c42p-57,
  0x1.0a7d251000000p+2, 0x1.bb389e0000000p-27, 0x1.f9ee4d60d597bp-53,
  0x1.05b529e000000p+1, 0x1.dc2e180000000p-28, 0x1.bf17d45f1fae7p-53,
  0x1.05b529e000000p+2, 0x1.dc2e188000000p-27, 0x1.7e2fa8be3f5cfp-53,
  0x1.e52a7a4000000p+0, 0x1.3002010000000p-27, 0x1.8f351633e671fp-54,
};

// e^r for |r| <= 0.35: Taylor to r^9 (truncation < 2^-37 relative).
inline double exp_reduced(double r) {
  double p = 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1.0;
  return p * r + 1.0;
}

// p * 2^k, k = round(y) held in t = y + kRound, y in [-152, 130]: 2^k is a normal double, and the
// final rounding to f32 makes the overflows to inf and the subnormal results.
inline double scale_by_2k(double p, double t) {
  int64_t k = static_cast<int64_t>(word_of(t) - word_of(kRound));
  return p * f64_of(static_cast<uint64_t>(k + 1023) << 52);
}

inline float exp(float xf) {
  double x = xf;
  x = x < -105.0 ? -105.0 : x;  // beyond: +0 / +inf either way; NaN passes both
  x = x > 90.0 ? 90.0 : x;
  double t = x * kLog2e + kRound;
  double k = t - kRound;
  double r = x - k * kLn2;  // |k * kLn2 error| < 2^-46: relative error of the result
  float res = static_cast<float>(scale_by_2k(exp_reduced(r), t));
  return xf != xf ? xf + xf : res;
}

inline float exp2(float xf) {
  double x = xf;
  x = x < -152.0 ? -152.0 : x;
  x = x > 130.0 ? 130.0 : x;
  double t = x + kRound;
  double k = t - kRound;
  double r = (x - k) * kLn2;  // x - k exact
  float res = static_cast<float>(scale_by_2k(exp_reduced(r), t));
  return xf != xf ? xf + xf : res;
}

// log(x) = e * ln2 + log1p(f) with x = 2^e (1 + f), 1 + f in [sqrt(1/2), sqrt(2)); log1p(f) =
// 2 atanh(s), s = f / (2 + f), |s| < 0.1716: 2s (1 + z/3 + ... + z^6/13), z = s^2, truncation
// < 2^-39 relative. Returns log1p(f), sets e.
inline double log_reduced(float xf, double& e) {
  const uint64_t kSqrtHalf = 0x3FE6A09E667F3BCDull;  // the word of sqrt(1/2)
  uint64_t u = word_of(static_cast<double>(xf)) - kSqrtHalf;  // f32 subnormals are normal doubles
  e = static_cast<double>(static_cast<int32_t>(static_cast<int64_t>(u) >> 52));
  double f = f64_of((u & 0x000FFFFFFFFFFFFFull) + kSqrtHalf) - 1.0;  // exact
  double s = f / (2.0 + f);
  double z = s * s;
  double p = 1.0 / 13;
  p = p * z + 1.0 / 11;
  p = p * z + 1.0 / 9;
  p = p * z + 1.0 / 7;
  p = p * z + 1.0 / 5;
  p = p * z + 1.0 / 3;
  p = p * z + 1.0;
  return 2.0 * s * p;
}

inline float log_specials(float x, float res) {
  const float inf = f32_of(0x7F800000u);
  res = x == 0.0f ? -inf : res;
  res = x < 0.0f ? f32_of(0x7FC00000u) : res;
  res = x == inf ? inf : res;
  return x != x ? x + x : res;
}

inline float log(float xf) {
  double e;
  double l = log_reduced(xf, e);
  return log_specials(xf, static_cast<float>(e * kLn2 + l));
}

inline float log2(float xf) {
  double e;
  double l = log_reduced(xf, e);
  return log_specials(xf, static_cast<float>(e + l * kLog2e));
}

// sin(r) and cos(r) for |r| <= pi/4 (+ a little): Taylor to r^13 / r^14.
inline double sin_reduced(double r) {
  double z = r * r;
  double p = -1.0 / 6227020800;
  p = p * z + 1.0 / 39916800;
  p = p * z - 1.0 / 362880;
  p = p * z + 1.0 / 5040;
  p = p * z - 1.0 / 120;
  p = p * z + 1.0 / 6;
  return r - r * z * p;
}
inline double cos_reduced(double r) {
  double z = r * r;
  double p = 1.0 / 87178291200;
  p = p * z - 1.0 / 479001600;
  p = p * z + 1.0 / 3628800;
  p = p * z - 1.0 / 40320;
  p = p * z + 1.0 / 720;
  p = p * z - 1.0 / 24;
  p = p * z + 0.5;
  return 1.0 - z * p;
}

// r = x - q * pi/2 (|r| <= ~pi/4); returns r and sets q (only q mod 4 is meaningful).
inline double reduce_half_pi(float xf, int64_t& q) {
  uint32_t w = word_of(xf);
  int64_t big = static_cast<int64_t>((w >> 23) & 0xFFu) - 150;  // x = M * 2^big
  // The table is read unconditionally, at a row clamped without a branch: a conditional read,
  // or one GCC can prove is row 0 on a path, becomes a masked gather, which GCC 12 cannot
  // emulate where gathers are not used (-march=znver3), and the loop stays scalar.
  int64_t pos = big & ~(big >> 63);  // max(big, 0)
  int64_t row = 3 * (pos > 104 ? 104 : pos);
  double m = static_cast<double>(static_cast<int32_t>((w & 0x7FFFFFu) | 0x800000u));
  m = (w & 0x80000000u) ? -m : m;
  bool large = big >= 0;
  // Below 2^23 row 0 is {1, 0, 0}: y0 = x, y1 = y2 = +-0 (x nonzero: a below is not 0, so the
  // zero's sign changes nothing; sin(+-0) is fixed up in sin_cos).
  double mm = large ? m : static_cast<double>(xf);
  double y0 = mm * kPow2Mod2Pi[row];      // exact
  double y1 = mm * kPow2Mod2Pi[row + 1];  // exact
  double y2 = mm * kPow2Mod2Pi[row + 2];
  double t = (y0 + y1) * kTwoOverPi + kRound;
  double k = t - kRound;
  q = static_cast<int64_t>(word_of(t) - word_of(kRound));
  // k < 2^26, so k * kHalfPi1 and k * kHalfPi2 are exact.
  double a = y0 - k * kHalfPi1;  // exact: both on the 2^-26 grid, or Sterbenz for |x| < 2^23
  a = a + y1;                    // exact for |x| >= 2^23 (2^-52 grid), y1 = 0 below
  a = a - k * kHalfPi2;          // exact for |x| >= 2^23, rounded relative to the result below
  return (a - k * kHalfPi3) + y2;
}

inline bool w_inf_or_nan(float x) { return (word_of(x) & 0x7F800000u) == 0x7F800000u; }

inline float sin_cos(float xf, int64_t shift) {
  int64_t q;
  double r = reduce_half_pi(xf, q);
  q += shift;
  double s = sin_reduced(r), c = cos_reduced(r);
  double v = (q & 1) ? c : s;
  v = (q & 2) ? -v : v;
  float res = static_cast<float>(v);
  res = xf == 0.0f && shift == 0 ? xf : res;  // sin(-0) = -0
  res = (w_inf_or_nan(xf)) ? f32_of(0x7FC00000u) : res;
  return xf != xf ? xf + xf : res;  // NaN in: the same NaN, quieted
}

inline float sin(float x) { return sin_cos(x, 0); }
inline float cos(float x) { return sin_cos(x, 1); }

// atan(t) for |t| <= tan(pi/8): t + t z P(z), z = t^2, P of degree 6 fitted by weighted least
// squares on Chebyshev nodes (core/math/gen_constants.py); error < 2^-40 relative.
inline double atan_reduced(double t) {
  double z = t * t;
  double p = -0x1.365800691a46ap-5;
  p = p * z + 0x1.1e4200c1ef496p-4;
  p = p * z - 0x1.707c52612e724p-4;
  p = p * z + 0x1.c6d124f422394p-4;
  p = p * z - 0x1.2490bccc276acp-3;
  p = p * z + 0x1.999991cc917c0p-3;
  p = p * z - 0x1.5555554e9ea97p-2;
  return t + t * z * p;
}

// atan2(y, x): a = min(|x|, |y|) / max(|x|, |y|) in [0, 1]; above tan(pi/8), atan(a) = pi/4 +
// atan((min - max) / (min + max)) (the difference and sum of two close f32 are exact in double);
// then pi/2 - . when |y| > |x|, pi - . when x has its sign bit, and y's sign. Special values as
// C's atan2: +-0 and +-pi for y = +-0, +-pi/4 and +-3pi/4 for two infinities; NaN in: NaN
// (y's, else x's, quieted).
inline float atan2(float yf, float xf) {
  constexpr double kPi = 0x1.921fb54442d18p1, kTanPiOver8 = 0x1.a827999fcef32p-2;
  double ax = xf < 0.0f ? -static_cast<double>(xf) : static_cast<double>(xf);
  double ay = yf < 0.0f ? -static_cast<double>(yf) : static_cast<double>(yf);
  bool swap = ay > ax;
  double mn = swap ? ax : ay, mx = swap ? ay : ax;
  bool far = mn > kTanPiOver8 * mx;
  double num = far ? mn - mx : mn;
  double den = far ? mn + mx : mx;
  den = den == 0.0 ? 1.0 : den;  // atan2(+-0, +-0)
  bool infs = mn == mx && mx == f64_of(0x7FF0000000000000ull);
  double t = infs ? 0.0 : num / den;
  double r = (far || infs ? kPi / 4 : 0.0) + atan_reduced(t);
  r = swap ? kPi / 2 - r : r;
  r = (word_of(xf) & 0x80000000u) ? kPi - r : r;
  r = (word_of(yf) & 0x80000000u) ? -r : r;
  float res = static_cast<float>(r);
  res = xf != xf ? xf + xf : res;
  return yf != yf ? yf + yf : res;
}

// tanh(x) = sign(x) e / (e + 2), e = e^(2|x|) - 1 (relative error < 2^-41 for |x| >= 2^-12);
// below 2^-12, x - x^3/3 (error < 2^-48 relative); |x| >= 10 gives +-1 (the exact value is then
// within 2^-28 of 1).
inline float tanh(float xf) {
  double x = xf;
  double ax = x < 0.0 ? -x : x;
  ax = ax > 10.0 ? 10.0 : ax;  // NaN passes
  double y = 2.0 * ax;
  double tk = y * kLog2e + kRound;
  double k = tk - kRound;
  double e = scale_by_2k(exp_reduced(y - k * kLn2), tk) - 1.0;
  double th = e / (e + 2.0);
  th = ax < 0x1p-12 ? ax - ax * ax * ax * (1.0 / 3) : th;
  float res = static_cast<float>(x < 0.0 ? -th : th);
  res = xf == 0.0f ? xf : res;  // tanh(-0) = -0
  return xf != xf ? xf + xf : res;
}

// fmin/fmax as C's, as one select chain (std::fmin is a call the vectorizer does not inline): a
// NaN operand gives the other operand, two NaNs the first (quieted); of two equal operands (+-0)
// the second, as glibc's on x86-64 and the GPU dialects' helpers.
inline float fmax(float x, float y) {
  float m = x > y ? x : y;
  m = y != y ? x : m;
  return x != x ? (y != y ? x + x : y) : m;
}
inline float fmin(float x, float y) {
  float m = x < y ? x : y;
  m = y != y ? x : m;
  return x != x ? (y != y ? x + x : y) : m;
}

}  // namespace ember_math

#endif  // EMBER_CORE_MATH_EMBER_MATH_H

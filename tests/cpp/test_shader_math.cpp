// codegen/shader_math_text.h, the GPU dialects' float-only math, compiled here as C++ (the spelling
// macros of a C++ "dialect": memcpy bit casts, references for out parameters, no `precise`; this
// file compiles with -ffp-contract=off, as the shaders' NoContraction and NVRTC's --fmad=false):
// accuracy against the double-precision std:: functions over sampled and dense sweeps of the whole
// f32 range, subnormals included, and special values. The same operations run on the GPUs, which
// tests/python/test_math_accuracy.py checks there. Also the text's split into gated pieces.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "codegen/c_printer.h"
#include "codegen/shader_math.h"

namespace ember {
namespace shader_math {

using uint = unsigned int;
using std::abs;
using std::exp2;
using std::floor;
using std::log;
using std::log2;
using std::sqrt;
inline uint as_u(float f) {
  uint w;
  std::memcpy(&w, &f, 4);
  return w;
}
inline float as_f(uint w) {
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
#define EMBER_U(x) ((uint)(x))
#define EMBER_I(x) ((int)(x))
#define EMBER_F(x) ((float)(x))
#define EMBER_AS_U(x) as_u(x)
#define EMBER_AS_F(x) as_f(x)
#define EMBER_OUT(T) T&
#define precise
// The shared helpers the text uses (codegen/shader_helpers.cpp's, in C++).
inline bool ember_isnan(float x) { return (as_u(x) & 0x7fffffffu) > 0x7f800000u; }
inline bool ember_isinf(float x) { return (as_u(x) & 0x7fffffffu) == 0x7f800000u; }
#define ember_nan as_f(0x7fc00000u)
inline float ember_mod(float a, float b) { return a - b * std::floor(a / b); }
#include "codegen/shader_math_text.h"
#undef precise
#undef ember_nan

}  // namespace shader_math

namespace {

float f32_of(uint32_t w) {
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
uint32_t word_of(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return w;
}

// |got - want| in units of the f32 ulp at want (2^-149 below 2^-126); 0 when both are NaN or the
// same infinity (or got overflowed where want is beyond FLT_MAX by half an ulp); huge when a zero
// has the wrong sign or only one side is NaN or infinite.
double ulp_error(float got, double want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got) ? 0 : 1e30;
  if (std::isinf(got) || std::isinf(want)) {
    if (std::isinf(got) && std::fabs(want) >= 0x1.ffffffp127 && (got > 0) == (want > 0)) return 0;
    if (std::isinf(want) && std::isinf(got) && (got > 0) == (want > 0)) return 0;
    if (std::isinf(got)) return 1e30;
  }
  if (want == 0 && got == 0) return std::signbit(want) == std::signbit(got) ? 0 : 1e30;
  int e = 0;
  std::frexp(want, &e);
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

struct Fn {
  const char* name;
  float (*ours)(float);
  double (*ref)(double);
  double bound;  // max ulp error (codegen/shader_math_text.h's header)
};
const Fn kFns[] = {
    {"exp", shader_math::ember_exp, [](double x) { return std::exp(x); }, 1.0},
    {"exp2", shader_math::ember_exp2, [](double x) { return std::exp2(x); }, 1.0},
    {"log", shader_math::ember_log, [](double x) { return std::log(x); }, 1.0},
    {"log2", shader_math::ember_log2, [](double x) { return std::log2(x); }, 1.5},
    {"sin", shader_math::ember_sin, [](double x) { return std::sin(x); }, 1.0},
    {"cos", shader_math::ember_cos, [](double x) { return std::cos(x); }, 1.0},
    {"tan", shader_math::ember_tan, [](double x) { return std::tan(x); }, 1.5},
    {"sinh", shader_math::ember_sinh, [](double x) { return std::sinh(x); }, 1.0},
    {"cosh", shader_math::ember_cosh, [](double x) { return std::cosh(x); }, 1.0},
    {"tanh", shader_math::ember_tanh, [](double x) { return std::tanh(x); }, 1.5},
    {"asin", shader_math::ember_asin, [](double x) { return std::asin(x); }, 1.0},
    {"acos", shader_math::ember_acos, [](double x) { return std::acos(x); }, 1.5},
    {"atan", shader_math::ember_atan, [](double x) { return std::atan(x); }, 1.0},
};
const Fn& fn(const std::string& name) {
  for (const Fn& f : kFns)
    if (name == f.name) return f;
  throw std::runtime_error("no function " + name);
}

// Max ulp error over the words lo, lo + step, ... < hi, both signs.
void sweep(const Fn& f, uint64_t lo, uint64_t hi, uint64_t step, const char* what) {
  double worst = 0;
  float at = 0;
  for (uint64_t w = lo; w < hi; w += step)
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float x = f32_of(static_cast<uint32_t>(w) | sign);
      const double e = ulp_error(f.ours(x), f.ref(static_cast<double>(x)));
      if (e > worst) {
        worst = e;
        at = x;
      }
    }
  EXPECT_LT(worst, f.bound) << f.name << " over " << what << ": worst at " << std::hexfloat << at;
}

TEST(ShaderMath, WholeRangeSampled) {  // ~4M arguments per function: every exponent, both signs, NaN, inf
  for (const Fn& f : kFns) sweep(f, 0, 0x7F800001u, 1021, "every 1021st word");
}

TEST(ShaderMath, DenseRanges) {  // every f32 (or a dense share) where reductions and polynomials are hardest
  for (const Fn& f : kFns) {
    sweep(f, word_of(0.25f), word_of(4.0f), 31, "[0.25, 4) every 31st");
    sweep(f, word_of(0.99f), word_of(1.01f), 3, "(0.99, 1.01) every 3rd");
  }
  for (const char* e : {"exp", "exp2"}) {
    sweep(fn(e), word_of(80.0f), word_of(160.0f), 7, "overflow and subnormal results");
  }
  for (const char* t : {"sin", "cos", "tan"}) {
    sweep(fn(t), word_of(390.0f), word_of(410.0f), 1, "[390, 410): the switch to the integer reduction, all");
    sweep(fn(t), word_of(8388608.0f), word_of(3e7f), 97, "[2^23, 3e7) every 97th");
    sweep(fn(t), word_of(1e30f), word_of(1.0001e30f), 1, "[1e30, 1.0001e30) all");
    sweep(fn(t), word_of(3e38f), 0x7F800000u, 7, "[3e38, FLT_MAX] every 7th");
  }
  for (const char* l : {"log", "log2"}) sweep(fn(l), 1, 0x00800000u, 97, "subnormal arguments");
  for (const char* h : {"sinh", "cosh", "tanh"}) sweep(fn(h), word_of(1e-5f), word_of(100.0f), 13, "[1e-5, 100)");
  for (const char* a : {"asin", "acos"}) sweep(fn(a), word_of(0.4f), word_of(1.0f) + 1, 3, "[0.4, 1]");
  sweep(fn("atan"), word_of(0.4f), word_of(2.5f), 7, "the reduction's breakpoints");
}

// sin, cos and tan at the floats nearest to multiples of pi/2 (where the reduction cancels most):
// every multiple k pi/2 for k < 2^20, both neighbours.
TEST(ShaderMath, NearMultiplesOfHalfPi) {
  const double half_pi = 1.5707963267948966;
  double worst[3] = {0, 0, 0};
  float at[3] = {0, 0, 0};
  const Fn* fs[3] = {&fn("sin"), &fn("cos"), &fn("tan")};
  for (int k = 1; k < (1 << 20); ++k) {
    const float c = static_cast<float>(k * half_pi);
    for (float x : {c, std::nextafter(c, 0.0f), std::nextafter(c, 1e30f)})
      for (int i = 0; i < 3; ++i) {
        const double e = ulp_error(fs[i]->ours(x), fs[i]->ref(x));
        if (e > worst[i]) {
          worst[i] = e;
          at[i] = x;
        }
      }
  }
  for (int i = 0; i < 3; ++i)
    EXPECT_LT(worst[i], fs[i]->bound) << fs[i]->name << " worst at " << std::hexfloat << at[i];
}

TEST(ShaderMath, SpecialValues) {
  using namespace shader_math;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const Fn& f : kFns) {
    EXPECT_TRUE(std::isnan(f.ours(nan))) << f.name;
    EXPECT_TRUE(std::isnan(f.ours(-nan))) << f.name;
  }
  for (const char* odd : {"sin", "tan", "sinh", "tanh", "asin", "atan"}) {  // the sign of zero kept
    EXPECT_EQ(word_of(fn(odd).ours(0.0f)), 0u) << odd;
    EXPECT_EQ(word_of(fn(odd).ours(-0.0f)), 0x80000000u) << odd;
    EXPECT_EQ(fn(odd).ours(f32_of(1u)), f32_of(1u)) << odd;  // subnormals: x
    EXPECT_EQ(fn(odd).ours(-f32_of(0x007fffffu)), -f32_of(0x007fffffu)) << odd;
  }
  for (const char* t : {"sin", "cos", "tan"}) {
    EXPECT_TRUE(std::isnan(fn(t).ours(inf))) << t;
    EXPECT_TRUE(std::isnan(fn(t).ours(-inf))) << t;
  }
  EXPECT_EQ(ember_cos(-0.0f), 1.0f);
  EXPECT_EQ(ember_cosh(-0.0f), 1.0f);
  EXPECT_EQ(ember_cosh(-inf), inf);
  EXPECT_EQ(ember_sinh(-inf), -inf);
  EXPECT_EQ(ember_sinh(89.5f), inf);  // e^89.5 / 2 > FLT_MAX
  EXPECT_EQ(ember_sinh(89.0f), static_cast<float>(std::sinh(89.0)));
  EXPECT_EQ(ember_tanh(inf), 1.0f);
  EXPECT_EQ(ember_tanh(-inf), -1.0f);
  EXPECT_EQ(ember_exp(inf), inf);
  EXPECT_EQ(word_of(ember_exp(-inf)), 0u);
  EXPECT_EQ(ember_exp(88.8f), inf);
  EXPECT_EQ(word_of(ember_exp(-104.0f)), 0u);
  EXPECT_EQ(ember_exp(-103.0f), static_cast<float>(std::exp(-103.0)));  // a subnormal, rounded once
  EXPECT_EQ(ember_exp(-0.0f), 1.0f);
  EXPECT_EQ(ember_exp2(inf), inf);
  EXPECT_EQ(word_of(ember_exp2(-inf)), 0u);
  EXPECT_EQ(ember_exp2(128.0f), inf);
  EXPECT_EQ(word_of(ember_exp2(-150.0f)), 0u);  // 2^-150: a tie, rounded to even
  for (int k = -149; k < 128; ++k) EXPECT_EQ(ember_exp2(static_cast<float>(k)), std::ldexp(1.0f, k)) << k;
  for (float (*lg)(float) : {ember_log, ember_log2}) {
    EXPECT_EQ(lg(0.0f), -inf);
    EXPECT_EQ(lg(-0.0f), -inf);
    EXPECT_EQ(lg(inf), inf);
    EXPECT_TRUE(std::isnan(lg(-1.0f)));
    EXPECT_TRUE(std::isnan(lg(-inf)));
    EXPECT_TRUE(std::isnan(lg(-f32_of(1u))));
    EXPECT_EQ(word_of(lg(1.0f)), 0u);
  }
  for (int k = -149; k < 128; ++k) EXPECT_EQ(ember_log2(std::ldexp(1.0f, k)), static_cast<float>(k)) << k;
  // No cancellation near 1: log(1 - 2^-24) = -2^-24 - 2^-49 - ...
  EXPECT_EQ(ember_log(0.99999994f), static_cast<float>(std::log(static_cast<double>(0.99999994f))));
  EXPECT_LT(ulp_error(ember_asin(1.0f), std::asin(1.0)), 1.0);
  EXPECT_LT(ulp_error(ember_asin(-1.0f), -std::asin(1.0)), 1.0);
  EXPECT_TRUE(std::isnan(ember_asin(1.0000001f)));
  EXPECT_EQ(ember_acos(1.0f), 0.0f);
  EXPECT_EQ(ember_acos(-1.0f), 3.1415927410125732f);
  EXPECT_EQ(ember_atan(inf), 1.5707963705062866f);
  EXPECT_EQ(ember_atan(-inf), -1.5707963705062866f);
  EXPECT_EQ(ember_pow(2.0f, 10.0f), 1024.0f);
  EXPECT_EQ(ember_pow(-2.0f, 3.0f), -8.0f);
  EXPECT_TRUE(std::isnan(ember_pow(-2.0f, 0.5f)));
}

// The text splits into pieces; every function is defined in exactly one, and a unit gets the
// pieces its kernels call and those they call in turn, in the text's order.
TEST(ShaderMath, GatedPieces) {
  const std::vector<GatedPrelude> pieces = shader_math_pieces();
  ASSERT_GE(pieces.size(), 6u);
  std::set<std::string> names;
  for (const GatedPrelude& p : pieces) {
    EXPECT_FALSE(p.callers.empty());
    for (const std::string& c : p.callers) EXPECT_TRUE(names.insert(c).second) << c << " defined twice";
  }
  for (const char* f : {"ember_exp(", "ember_sin(", "ember_tanh(", "ember_pow(", "ember_atan2(", "ember_fast_log("})
    EXPECT_EQ(names.count(f), 1u) << f;
  for (const GatedPrelude& p : shader_math_pieces(true))
    EXPECT_NE(p.text.find("__device__ inline float ember_"), std::string::npos);

  Dialect d;
  d.prelude = "PRELUDE\n";
  d.gated_prelude = pieces;
  const std::string k = "v = ember_tanh(x);";
  const std::string unit = unit_prelude(d, {&k});
  EXPECT_NE(unit.find("float ember_tanh("), std::string::npos);
  EXPECT_NE(unit.find("float ember_exp_pair("), std::string::npos);  // tanh calls it
  EXPECT_NE(unit.find("float ember_flip("), std::string::npos);
  EXPECT_LT(unit.find("float ember_flip("), unit.find("float ember_tanh("));
  EXPECT_EQ(unit.find("ember_rem_pio2"), std::string::npos);
  EXPECT_EQ(unit.find("float ember_log("), std::string::npos);
  const std::string none = "v = x + y;";
  EXPECT_EQ(unit_prelude(d, {&none}), "PRELUDE\n");
}

}  // namespace
}  // namespace ember

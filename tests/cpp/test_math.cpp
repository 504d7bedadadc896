// core/math/ember_math.h: accuracy of the f32 exp, exp2, log, log2, sin, cos, tanh and atan2
// against the double-precision std:: functions (max ulp error over dense sweeps of the whole f32
// range), their special values and fmin/fmax's, and CPU kernels (vectorized loops) against the
// interpreter, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>

#include "backends/backend.h"
#include "codegen_test_helpers.h"
#include "core/interp/interp.h"
#include "core/math/ember_math.h"

namespace ember {
namespace {

// The documented bound (core/math/ember_math.h): every result within 1 ulp of the exact value.
constexpr double kMaxUlp = 1.0;

float f32_of(uint32_t w) { float f; std::memcpy(&f, &w, 4); return f; }
uint32_t word_of(float f) { uint32_t w; std::memcpy(&w, &f, 4); return w; }

// |got - want| in units of the f32 ulp at want (subnormal ulp 2^-149 below 2^-126); 0 when both
// are NaN or the same infinity; huge otherwise when only one is. An exact value beyond FLT_MAX
// (by at least half an ulp of 2^128) must give inf.
double ulp_error(float got, double want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got) ? 0 : 1e30;
  if (std::isinf(got) || std::isinf(want)) {
    if (std::isinf(got) && std::fabs(want) >= 0x1.ffffffp127 && (got > 0) == (want > 0)) return 0;
    if (std::isinf(want) && std::isinf(got) && (got > 0) == (want > 0)) return 0;
    if (std::isinf(got)) return 1e30;
  }
  int e = 0;
  std::frexp(want, &e);
  double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

struct Fn {
  const char* name;
  float (*ours)(float);
  double (*ref)(double);
};
const Fn kFns[] = {
    {"exp", ember_math::exp, [](double x) { return std::exp(x); }},
    {"exp2", ember_math::exp2, [](double x) { return std::exp2(x); }},
    {"log", ember_math::log, [](double x) { return std::log(x); }},
    {"log2", ember_math::log2, [](double x) { return std::log2(x); }},
    {"sin", ember_math::sin, [](double x) { return std::sin(x); }},
    {"cos", ember_math::cos, [](double x) { return std::cos(x); }},
    {"tanh", ember_math::tanh, [](double x) { return std::tanh(x); }},
};

// Max ulp error over the words lo, lo + step, ... < hi (both signs when `both_signs`).
void sweep(const Fn& f, uint64_t lo, uint64_t hi, uint64_t step, const char* what) {
  double worst = 0;
  float at = 0;
  for (uint64_t w = lo; w < hi; w += step)
    for (uint32_t sign : {0u, 0x80000000u}) {
      float x = f32_of(static_cast<uint32_t>(w) | sign);
      double e = ulp_error(f.ours(x), f.ref(static_cast<double>(x)));
      if (e > worst) { worst = e; at = x; }
    }
  EXPECT_LT(worst, kMaxUlp) << f.name << " over " << what << ": worst at " << std::hexfloat << at;
}

TEST(Math, WholeRangeSampled) {  // ~4M arguments per function, every exponent, both signs
  for (const Fn& f : kFns) sweep(f, 0, 0x7F800000u, 1021, "every 1021st word");
}

TEST(Math, DenseRanges) {  // every f32 in the ranges where reductions and polynomials are hardest
  for (const Fn& f : kFns) {
    sweep(f, word_of(0.25f), word_of(4.0f), 29, "[0.25, 4) every 29th");
    sweep(f, word_of(0.99f), word_of(1.01f), 1, "(0.99, 1.01) all");
  }
  const Fn& exp = kFns[0];
  sweep(exp, word_of(80.0f), word_of(90.0f), 1, "overflow edge, all");
  sweep(exp, word_of(86.0f), word_of(106.0f), 3, "subnormal results (negated)");
  const Fn &sin = kFns[4], &cos = kFns[5];
  for (const Fn* f : {&sin, &cos}) {
    sweep(*f, word_of(1e4f), word_of(1.1e4f), 1, "[1e4, 1.1e4) all");
    sweep(*f, word_of(8388608.0f), word_of(3e7f), 17, "[2^23, 3e7) every 17th (table reduction)");
    sweep(*f, word_of(1e30f), word_of(1.001e30f), 1, "[1e30, 1.001e30) all");
  }
  for (const Fn* f : {&kFns[2], &kFns[3]}) sweep(*f, 1, 0x00800000u, 97, "subnormal arguments");
  sweep(kFns[6], word_of(1e-5f), word_of(12.0f), 11, "tanh [1e-5, 12) every 11th");
}

TEST(Math, Atan2Sampled) {  // ~4.6M pairs over the whole range, all sign combinations, both orders
  double worst = 0;
  float at_y = 0, at_x = 0;
  auto check = [&](float y, float x) {
    double e = ulp_error(ember_math::atan2(y, x), std::atan2(static_cast<double>(y), static_cast<double>(x)));
    if (e > worst) { worst = e; at_y = y; at_x = x; }
  };
  for (uint64_t a = 0; a < 0x7F800000u; a += 2000003)
    for (uint64_t b = 0; b < 0x7F800000u; b += 2000033)
      for (uint32_t s : {0u, 0x80000000u})
        for (uint32_t t : {0u, 0x80000000u}) check(f32_of(static_cast<uint32_t>(a) | s), f32_of(static_cast<uint32_t>(b) | t));
  for (uint64_t a = word_of(0.5f); a < word_of(2.0f); a += 3) {  // near |y| = |x| and the tan(pi/8) switch
    float y = f32_of(static_cast<uint32_t>(a));
    for (float x : {1.0f, -1.0f, 1.0000001f, 2.4142137f, -2.4142137f, 0.41421357f}) { check(y, x); check(x, y); }
  }
  EXPECT_LT(worst, kMaxUlp) << "atan2: worst at " << std::hexfloat << at_y << ", " << at_x;
}

TEST(Math, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float payload = f32_of(0x7FA12345u);  // a signalling NaN: comes back quieted, payload kept
  for (const Fn& f : kFns) {
    EXPECT_TRUE(std::isnan(f.ours(nan))) << f.name;
    EXPECT_EQ(word_of(f.ours(payload)), 0x7FE12345u) << f.name;
    EXPECT_EQ(word_of(f.ours(-payload)), 0xFFE12345u) << f.name;
  }
  EXPECT_EQ(ember_math::exp(inf), inf);
  EXPECT_EQ(word_of(ember_math::exp(-inf)), 0u);
  EXPECT_EQ(ember_math::exp(88.8f), inf);
  EXPECT_EQ(word_of(ember_math::exp(-104.0f)), 0u);
  EXPECT_EQ(ember_math::exp(-103.0f), static_cast<float>(std::exp(-103.0)));  // a subnormal, rounded once
  EXPECT_EQ(ember_math::exp(0.0f), 1.0f);
  EXPECT_EQ(ember_math::exp(-0.0f), 1.0f);
  EXPECT_EQ(ember_math::exp2(inf), inf);
  EXPECT_EQ(word_of(ember_math::exp2(-inf)), 0u);
  EXPECT_EQ(ember_math::exp2(128.0f), inf);
  EXPECT_EQ(ember_math::exp2(-149.0f), f32_of(1u));
  EXPECT_EQ(word_of(ember_math::exp2(-151.0f)), 0u);
  for (int k = -149; k < 128; ++k) EXPECT_EQ(ember_math::exp2(static_cast<float>(k)), std::ldexp(1.0f, k)) << k;
  for (float (*lg)(float) : {ember_math::log, ember_math::log2}) {
    EXPECT_EQ(lg(0.0f), -inf);
    EXPECT_EQ(lg(-0.0f), -inf);
    EXPECT_EQ(lg(inf), inf);
    EXPECT_TRUE(std::isnan(lg(-1.0f)));
    EXPECT_TRUE(std::isnan(lg(-inf)));
    EXPECT_TRUE(std::isnan(lg(-f32_of(1u))));
    EXPECT_EQ(word_of(lg(1.0f)), 0u);
  }
  for (int k = -149; k < 128; ++k) EXPECT_EQ(ember_math::log2(std::ldexp(1.0f, k)), static_cast<float>(k)) << k;
  for (float (*sc)(float) : {ember_math::sin, ember_math::cos}) {
    EXPECT_TRUE(std::isnan(sc(inf)));
    EXPECT_TRUE(std::isnan(sc(-inf)));
  }
  EXPECT_EQ(word_of(ember_math::sin(0.0f)), 0u);
  EXPECT_EQ(word_of(ember_math::sin(-0.0f)), 0x80000000u);
  EXPECT_EQ(ember_math::cos(0.0f), 1.0f);
  EXPECT_EQ(ember_math::cos(-0.0f), 1.0f);
  EXPECT_EQ(ember_math::sin(f32_of(1u)), f32_of(1u));
  EXPECT_EQ(ember_math::sin(-1e-20f), -1e-20f);
  EXPECT_EQ(ember_math::tanh(inf), 1.0f);
  EXPECT_EQ(ember_math::tanh(-inf), -1.0f);
  EXPECT_EQ(word_of(ember_math::tanh(-0.0f)), 0x80000000u);
  EXPECT_EQ(ember_math::tanh(f32_of(1u)), f32_of(1u));

  const float pi = static_cast<float>(M_PI), q = static_cast<float>(M_PI / 4), q3 = static_cast<float>(3 * M_PI / 4);
  auto at2 = [](float y, float x) { return word_of(ember_math::atan2(y, x)); };
  EXPECT_EQ(at2(0.0f, 0.0f), 0u);
  EXPECT_EQ(at2(-0.0f, 0.0f), 0x80000000u);
  EXPECT_EQ(at2(0.0f, -0.0f), word_of(pi));
  EXPECT_EQ(at2(-0.0f, -0.0f), word_of(-pi));
  EXPECT_EQ(at2(0.0f, -3.0f), word_of(pi));
  EXPECT_EQ(at2(-0.0f, -3.0f), word_of(-pi));
  EXPECT_EQ(at2(5.0f, inf), 0u);
  EXPECT_EQ(at2(5.0f, -inf), word_of(pi));
  EXPECT_EQ(at2(-inf, 5.0f), word_of(static_cast<float>(-M_PI / 2)));
  EXPECT_EQ(at2(inf, inf), word_of(q));
  EXPECT_EQ(at2(-inf, -inf), word_of(-q3));
  EXPECT_EQ(at2(payload, 1.0f), 0x7FE12345u);
  EXPECT_EQ(at2(1.0f, payload), 0x7FE12345u);
  EXPECT_EQ(at2(f32_of(1u), 1.0f), 1u);  // a subnormal result

  // fmin/fmax: C's, with a definite answer where C leaves a choice.
  EXPECT_EQ(ember_math::fmax(1.0f, nan), 1.0f);
  EXPECT_EQ(ember_math::fmax(nan, 1.0f), 1.0f);
  EXPECT_EQ(ember_math::fmin(-inf, nan), -inf);
  EXPECT_EQ(ember_math::fmin(nan, 2.0f), 2.0f);
  EXPECT_TRUE(std::isnan(ember_math::fmin(nan, nan)));
  EXPECT_EQ(word_of(ember_math::fmax(-0.0f, 0.0f)), 0u);  // equal operands: the second
  EXPECT_EQ(word_of(ember_math::fmax(0.0f, -0.0f)), 0x80000000u);
  EXPECT_EQ(word_of(ember_math::fmin(0.0f, -0.0f)), 0x80000000u);
  EXPECT_EQ(word_of(ember_math::fmin(-0.0f, 0.0f)), 0u);
  // glibc's at run time (not GCC's constant folding), except for two NaNs (unspecified).
  float (*volatile libc_fmax)(float, float) = ::fmaxf;
  float (*volatile libc_fmin)(float, float) = ::fminf;
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, inf, -inf})
    for (float y : {0.0f, -0.0f, 3.0f, -2.5f, nan, inf, -inf}) {
      EXPECT_EQ(word_of(ember_math::fmax(x, y)), word_of(libc_fmax(x, y))) << x << ", " << y;
      EXPECT_EQ(word_of(ember_math::fmin(x, y)), word_of(libc_fmin(x, y))) << x << ", " << y;
      EXPECT_EQ(word_of(ember_math::fmax(y, x)), word_of(libc_fmax(y, x))) << y << ", " << x;
      EXPECT_EQ(word_of(ember_math::fmin(y, x)), word_of(libc_fmin(y, x))) << y << ", " << x;
    }
  EXPECT_EQ(ember_math::fmax(-3.0f, 2.0f), 2.0f);
  EXPECT_EQ(ember_math::fmin(-3.0f, 2.0f), -3.0f);
}

// The functions in a CPU kernel (a vectorized loop) and in the interpreter: the same bits for
// arguments over the whole f32 range, NaN payloads, infinities and subnormals included.
TEST(Math, CpuKernelMatchesInterpreterBitForBit) {
  char tmpl[] = "/tmp/ember-test-cache-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  setenv("EMBER_CACHE_DIR", tmpl, 1);
  const std::vector<Op> ops = {Op::exp, Op::exp2, Op::log, Op::log2, Op::sin, Op::cos, Op::tanh, Op::atan2, Op::min, Op::max};
  Program p;
  codegen_test::ops_program(p, DType::f32, ops);
  const int64_t n = 1 << 16;
  HostTensor a = HostTensor::alloc(DType::f32, {n}, false);
  for (int64_t k = 0; k < n; ++k) a.data[k] = static_cast<uint32_t>(k) * 65537u + 0x9E3779B9u * static_cast<uint32_t>(k & 7);
  const uint32_t edges[] = {0x7FC00000u, 0xFFC00000u, 0x7FA12345u, 0x7F800000u, 0xFF800000u, 0u, 0x80000000u,
                            1u, 0x807FFFFFu, 0x42B17218u, 0xC2CFF1B5u, 0x4B000000u, 0x7F7FFFFFu, 0xFF7FFFFFu};
  for (size_t k = 0; k < std::size(edges); ++k) a.data[k] = edges[k];
  HostTensor b = HostTensor::alloc(DType::f32, {n}, false);  // a's words reversed: every pairing
  for (int64_t k = 0; k < n; ++k) b.data[k] = a.data[n - 1 - k];
  for (int64_t k = 0; k < 64; ++k) b.data[k] = a.data[(k * 7) % 14];  // edge against edge
  std::vector<ArgValue> args = {ArgValue::of_tensor(a), ArgValue::of_tensor(b)};
  auto backend = make_backend("cpu");
  CompileInfo info;
  auto runner = backend->compile(p, info);
  std::vector<HostTensor> got = interpret(p, codegen_test::deep_copy(args), runner.get());
  std::vector<HostTensor> want = interpret(p, codegen_test::deep_copy(args));
  ASSERT_EQ(got.size(), ops.size());
  for (size_t o = 0; o < ops.size(); ++o) {
    int bad = 0;
    for (int64_t k = 0; k < n && bad < 3; ++k)
      if (got[o].data[k] != want[o].data[k])
        ADD_FAILURE() << op_name(ops[o]) << "(" << std::hexfloat << f32_of(a.data[k]) << "): cpu 0x" << std::hex
                      << got[o].data[k] << ", interpreter 0x" << want[o].data[k] << (++bad, "");
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
}

}  // namespace
}  // namespace ember

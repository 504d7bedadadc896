#include "core/ir/eval.h"

#include <cmath>

#include "core/math/ember_math.h"

namespace ember {

namespace {

int32_t floordiv_i(int32_t a, int32_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int32_t>(0u - static_cast<uint32_t>(a));  // avoids INT_MIN / -1
  int32_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int32_t floormod_i(int32_t a, int32_t b) {
  if (b == 0 || b == -1) return 0;
  int32_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
float floormod_f(float a, float b) { return a - b * std::floor(a / b); }

template <class T> T sign_of(T x) { return static_cast<T>((x > T(0)) - (x < T(0))); }

uint32_t eval_f(Op op, const uint32_t* a) {
  float x = w2f(a[0]);
  float y = 0;
  if (has_flag(op, F_ELEMENTWISE) && op_info(op).arity >= 2) y = w2f(a[1]);
  switch (op) {
    case Op::neg: return f2w(-x);
    case Op::abs: return f2w(std::fabs(x));
    case Op::sign: return std::isnan(x) ? a[0] : f2w(x > 0 ? 1.f : (x < 0 ? -1.f : 0.f));  // as np.sign
    case Op::floor: return f2w(std::floor(x));
    case Op::ceil: return f2w(std::ceil(x));
    case Op::round: return f2w(std::nearbyint(x));
    case Op::trunc: return f2w(std::trunc(x));
    case Op::frac: return f2w(x - std::floor(x));
    case Op::exp: return f2w(ember_math::exp(x));
    case Op::exp2: return f2w(ember_math::exp2(x));
    case Op::log: return f2w(ember_math::log(x));
    case Op::log2: return f2w(ember_math::log2(x));
    case Op::sqrt: return f2w(std::sqrt(x));
    case Op::rsqrt: return f2w(1.f / std::sqrt(x));
    case Op::sin: return f2w(ember_math::sin(x));
    case Op::cos: return f2w(ember_math::cos(x));
    case Op::tan: return f2w(std::tan(x));
    case Op::asin: return f2w(std::asin(x));
    case Op::acos: return f2w(std::acos(x));
    case Op::atan: return f2w(std::atan(x));
    case Op::sinh: return f2w(std::sinh(x));
    case Op::cosh: return f2w(std::cosh(x));
    case Op::tanh: return f2w(ember_math::tanh(x));
    case Op::isnan: return std::isnan(x) ? 1u : 0u;
    case Op::isinf: return std::isinf(x) ? 1u : 0u;
    case Op::add: return f2w(x + y);
    case Op::sub: return f2w(x - y);
    case Op::mul: return f2w(x * y);
    case Op::div: return f2w(x / y);
    case Op::mod: return f2w(floormod_f(x, y));
    case Op::pow: return f2w(std::pow(x, y));
    case Op::atan2: return f2w(ember_math::atan2(x, y));
    case Op::fma: return f2w(std::fma(x, y, w2f(a[2])));  // one rounding (glibc's fmaf is exact)
    case Op::min: return f2w(ember_math::fmin(x, y));
    case Op::max: return f2w(ember_math::fmax(x, y));
    case Op::eq: return x == y;
    case Op::ne: return x != y;
    case Op::lt: return x < y;
    case Op::le: return x <= y;
    case Op::gt: return x > y;
    case Op::ge: return x >= y;
    default: break;
  }
  EMBER_INTERNAL_ASSERT(false, "op " << op_name(op) << " is not defined on f32");
}

template <class T>
uint32_t eval_int(Op op, const uint32_t* a) {
  T x = static_cast<T>(a[0]);
  T y = op_info(op).arity >= 2 ? static_cast<T>(a[1]) : T(0);
  auto w = [](T v) { return static_cast<uint32_t>(v); };
  constexpr bool is_signed = std::is_signed_v<T>;
  switch (op) {
    case Op::neg: return w(static_cast<T>(0u - static_cast<uint32_t>(x)));
    case Op::bnot: return ~a[0];
    case Op::abs: return is_signed && x < 0 ? w(static_cast<T>(0u - static_cast<uint32_t>(x))) : w(x);
    case Op::sign: return w(sign_of(x));
    case Op::floor: case Op::ceil: case Op::round: case Op::trunc: return w(x);
    case Op::frac: return 0;
    case Op::add: return a[0] + a[1];
    case Op::sub: return a[0] - a[1];
    case Op::mul: return a[0] * a[1];
    case Op::div:
      if constexpr (is_signed) return w(floordiv_i(x, y)); else return y == 0 ? 0 : w(x / y);
    case Op::mod:
      if constexpr (is_signed) return w(floormod_i(x, y)); else return y == 0 ? 0 : w(x % y);
    case Op::min: return w(x < y ? x : y);
    case Op::max: return w(x > y ? x : y);
    case Op::eq: return x == y;
    case Op::ne: return x != y;
    case Op::lt: return x < y;
    case Op::le: return x <= y;
    case Op::gt: return x > y;
    case Op::ge: return x >= y;
    case Op::band: return a[0] & a[1];
    case Op::bor: return a[0] | a[1];
    case Op::bxor: return a[0] ^ a[1];
    case Op::shl: return (a[1] & 31u) == a[1] ? a[0] << a[1] : 0u;
    case Op::shr:
      if (static_cast<uint32_t>(y) >= 32u) return is_signed && x < 0 ? ~0u : 0u;
      return w(static_cast<T>(x >> y));
    case Op::isnan: case Op::isinf: return 0;
    default: break;
  }
  EMBER_INTERNAL_ASSERT(false, "op " << op_name(op) << " is not defined on integers");
}

}  // namespace

uint32_t convert_word(uint32_t w, DType from, DType to) {
  if (from == to) return w;
  switch (to) {
    case DType::f32:
      if (from == DType::i32) return f2w(static_cast<float>(w2i(w)));
      return f2w(static_cast<float>(w));  // u32 and bool
    case DType::i32:
    case DType::u32:
      if (from == DType::f32) {
        float f = w2f(w);
        if (std::isnan(f)) return 0;
        if (to == DType::i32) {
          if (f >= 2147483647.f) return 0x7fffffffu;
          if (f <= -2147483648.f) return 0x80000000u;
          return i2w(static_cast<int32_t>(f));
        }
        if (f <= 0.f) return 0;
        if (f >= 4294967295.f) return 0xffffffffu;
        return static_cast<uint32_t>(f);
      }
      return w;  // i32 <-> u32 keep the bits; bool is 0/1
    case DType::boolean:
      if (from == DType::f32) return w2f(w) != 0.f;
      return w != 0;
    default: break;
  }
  EMBER_INTERNAL_ASSERT(false, "bad conversion " << dtype_name(from) << " -> " << dtype_name(to));
}

uint32_t eval_elementwise(Op op, DType out, DType in, const uint32_t* a, int nargs) {
  (void)nargs;
  switch (op) {
    case Op::cast: return convert_word(a[0], in, out);
    case Op::bitcast: return a[0];
    case Op::select: return a[0] ? a[1] : a[2];
    case Op::lnot: return a[0] ? 0u : 1u;
    case Op::land: return (a[0] && a[1]) ? 1u : 0u;
    case Op::lor: return (a[0] || a[1]) ? 1u : 0u;
    default: break;
  }
  switch (in) {
    case DType::f32: return eval_f(op, a);
    case DType::i32: return eval_int<int32_t>(op, a);
    case DType::u32:
    case DType::boolean: {
      uint32_t r = eval_int<uint32_t>(op, a);
      return (in == DType::boolean && out == DType::boolean) ? (r != 0) : r;
    }
    default: break;
  }
  EMBER_INTERNAL_ASSERT(false, "elementwise " << op_name(op) << " on " << dtype_name(in));
}

uint32_t reduce_identity(ReduceKind k, DType t) {
  switch (k) {
    case ReduceKind::sum: case ReduceKind::any: return t == DType::f32 ? f2w(0.f) : 0u;
    case ReduceKind::prod: return t == DType::f32 ? f2w(1.f) : 1u;
    case ReduceKind::all: return 1u;
    // f32 max/min start from NaN: fmax(NaN, x) = x, so any number replaces it, and a row of
    // only NaNs (or none) gives NaN, as numpy.fmax.reduce / nanmax do (not -inf/+inf).
    // argmax/argmin compare with > / <, so they start from -inf/+inf.
    case ReduceKind::max: if (t == DType::f32) return f2w(NAN); [[fallthrough]];
    case ReduceKind::argmax:
      return t == DType::f32 ? f2w(-INFINITY) : t == DType::i32 ? 0x80000000u : 0u;
    case ReduceKind::min: if (t == DType::f32) return f2w(NAN); [[fallthrough]];
    case ReduceKind::argmin:
      return t == DType::f32 ? f2w(INFINITY) : t == DType::i32 ? 0x7fffffffu : (t == DType::boolean ? 1u : 0xffffffffu);
  }
  return 0;
}

uint32_t reduce_start(ReduceKind k, DType t, bool nonempty) {
  if (k == ReduceKind::sum && t == DType::f32 && nonempty) return 0x80000000u;
  return reduce_identity(k, t);
}

uint32_t reduce_step(ReduceKind k, DType t, uint32_t acc, uint32_t v) {
  uint32_t a[2] = {acc, v};
  switch (k) {
    case ReduceKind::sum: return eval_elementwise(Op::add, t, t, a, 2);
    case ReduceKind::prod: return eval_elementwise(Op::mul, t, t, a, 2);
    case ReduceKind::max: return eval_elementwise(Op::max, t, t, a, 2);
    case ReduceKind::min: return eval_elementwise(Op::min, t, t, a, 2);
    case ReduceKind::any: return (acc || v) ? 1u : 0u;
    case ReduceKind::all: return (acc && v) ? 1u : 0u;
    case ReduceKind::argmax: case ReduceKind::argmin: return arg_replaces(k, t, acc, v) ? v : acc;
  }
  return acc;
}

bool arg_replaces(ReduceKind k, DType t, uint32_t best, uint32_t v) {
  if (t == DType::f32 && std::isnan(w2f(v))) return !std::isnan(w2f(best));
  uint32_t a[2] = {v, best};
  Op cmp = k == ReduceKind::argmin ? Op::lt : Op::gt;
  return eval_elementwise(cmp, DType::boolean, t, a, 2) != 0;
}

uint32_t atomic_step(AtomicKind k, DType t, uint32_t old, uint32_t v) {
  uint32_t a[2] = {old, v};
  switch (k) {
    case AtomicKind::add: return eval_elementwise(Op::add, t, t, a, 2);
    case AtomicKind::min: return eval_elementwise(Op::min, t, t, a, 2);
    case AtomicKind::max: return eval_elementwise(Op::max, t, t, a, 2);
    case AtomicKind::band: return old & v;
    case AtomicKind::bor: return old | v;
    case AtomicKind::bxor: return old ^ v;
    case AtomicKind::exchange: return v;
  }
  return old;
}

int64_t apply_index_mode(IndexMode m, int64_t i, int64_t n) {
  if (n <= 0) return 0;
  switch (m) {
    case IndexMode::clamp: return i < 0 ? 0 : (i >= n ? n - 1 : i);
    case IndexMode::wrap: { int64_t r = i % n; return r < 0 ? r + n : r; }
    case IndexMode::unsafe: return i;
  }
  return i;
}

}  // namespace ember

// The `cpp` dialect: C++17 with OpenMP, compiled by the system compiler into a shared library
// (backends/cpu). Helpers in the prelude reproduce core/ir/eval.cpp exactly: floor div/mod with
// x/0 == 0, shifts by >= 32, clamped float->int conversion. The backend compiles with -fwrapv
// (i32 arithmetic wraps) and -ffp-contract=off (no fused multiply-add but the IR's own fma
// nodes, which contract_fma makes and the interpreter rounds once too), so results match the
// interpreter bit for bit. f32 exp/exp2/log/log2/sin/cos/tanh/atan2/min/max call
// core/math/ember_math.h, whose text opens the prelude, as the interpreter does: branch-free, so
// loops that use them vectorize.
#include "codegen/dialect.h"

namespace ember {

namespace {

const char* kMathText =
#include "codegen/ember_math_text.inc"
    ;

const char* kGemmText =
#include "codegen/cpu_gemm_text.inc"
    ;

// No <cmath> or <vector>: parsing them was most of the C++ compile of a small program (N-body's
// one kernel: about 60% of g++'s time). Float functions are GCC/Clang builtins (the same libm
// calls std::floor(float) etc. make) and staged rows live in an ember_rows buffer.
const char* kCppPrelude = R"(#include <cstdint>
#include <cstring>

// An f32 sum's SIMD lanes start from -0.0, as Ember's sums do (core/ir/eval.h, reduce_start):
// OpenMP's + starts them from +0.0, which turns a sum of -0.0 terms into +0.0.
#pragma omp declare reduction(ember_fadd : float : omp_out += omp_in) initializer(omp_priv = -0.0f)

namespace {
// A zero-filled scratch array freed at scope exit (the staged rows of d.stage_fill).
template <class T> struct ember_rows {
  T* p;
  explicit ember_rows(int64_t n) : p(new T[n > 0 ? n : 1]()) {}
  ~ember_rows() { delete[] p; }
  ember_rows(const ember_rows&) = delete;
  ember_rows& operator=(const ember_rows&) = delete;
  T* data() const { return p; }
};
inline float ember_as_f32(uint32_t w) { float f; std::memcpy(&f, &w, 4); return f; }
inline uint32_t ember_as_u32(float f) { uint32_t w; std::memcpy(&w, &f, 4); return w; }
inline int32_t ember_div(int32_t a, int32_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int32_t)(0u - (uint32_t)a);
  int32_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
inline uint32_t ember_div(uint32_t a, uint32_t b) { return b == 0u ? 0u : a / b; }
inline int32_t ember_mod(int32_t a, int32_t b) {
  if (b == 0 || b == -1) return 0;
  int32_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
inline uint32_t ember_mod(uint32_t a, uint32_t b) { return b == 0u ? 0u : a % b; }
inline float ember_mod(float a, float b) { return a - b * __builtin_floorf(a / b); }
inline int32_t ember_shl(int32_t a, int32_t b) { return (uint32_t)b < 32u ? (int32_t)((uint32_t)a << b) : 0; }
inline uint32_t ember_shl(uint32_t a, uint32_t b) { return b < 32u ? a << b : 0u; }
inline int32_t ember_shr(int32_t a, int32_t b) { return (uint32_t)b < 32u ? a >> b : (a < 0 ? -1 : 0); }
inline uint32_t ember_shr(uint32_t a, uint32_t b) { return b < 32u ? a >> b : 0u; }
inline int32_t ember_f2i(float f) {
  if (__builtin_isnan(f)) return 0;
  if (f >= 2147483647.0f) return 2147483647;
  if (f <= -2147483648.0f) return -2147483647 - 1;
  return (int32_t)f;
}
inline uint32_t ember_f2u(float f) {
  if (__builtin_isnan(f) || f <= 0.0f) return 0u;
  if (f >= 4294967295.0f) return 4294967295u;
  return (uint32_t)f;
}

// Atomics on 32-bit words; read-modify-write ops without a builtin use a CAS loop.
template <class F> inline uint32_t ember_rmw(uint32_t* p, F f) {
  uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, f(old), true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return old;
}
#define EMBER_RMW(KIND, SUFFIX, T, V, FROM, TO, EXPR) \
  inline T ember_atomic_##KIND##_##SUFFIX(V* p, T v) { \
    return FROM(ember_rmw((uint32_t*)p, [v](uint32_t w) { T o = FROM(w); (void)o; return TO(EXPR); })); }
#define EMBER_ID(x) (x)
#define EMBER_BOOL(x) ((x) != 0u)
#define EMBER_WORD(x) ((uint32_t)(x))
#define EMBER_BUILTIN(KIND, SUFFIX, T, BUILTIN) \
  inline T ember_atomic_##KIND##_##SUFFIX(T* p, T v) { return BUILTIN(p, v, __ATOMIC_RELAXED); }
EMBER_RMW(add, f32, float, float, ember_as_f32, ember_as_u32, o + v)
EMBER_RMW(min, f32, float, float, ember_as_f32, ember_as_u32, ember_math::fmin(o, v))
EMBER_RMW(max, f32, float, float, ember_as_f32, ember_as_u32, ember_math::fmax(o, v))
EMBER_RMW(and, f32, float, float, ember_as_f32, EMBER_ID, w & ember_as_u32(v))
EMBER_RMW(or, f32, float, float, ember_as_f32, EMBER_ID, w | ember_as_u32(v))
EMBER_RMW(xor, f32, float, float, ember_as_f32, EMBER_ID, w ^ ember_as_u32(v))
EMBER_RMW(exchange, f32, float, float, ember_as_f32, ember_as_u32, v)
#define EMBER_INT_ATOMICS(SUFFIX, T) \
  EMBER_BUILTIN(add, SUFFIX, T, __atomic_fetch_add) \
  EMBER_BUILTIN(and, SUFFIX, T, __atomic_fetch_and) \
  EMBER_BUILTIN(or, SUFFIX, T, __atomic_fetch_or) \
  EMBER_BUILTIN(xor, SUFFIX, T, __atomic_fetch_xor) \
  EMBER_BUILTIN(exchange, SUFFIX, T, __atomic_exchange_n) \
  EMBER_RMW(min, SUFFIX, T, T, (T), EMBER_WORD, o < v ? o : v) \
  EMBER_RMW(max, SUFFIX, T, T, (T), EMBER_WORD, o > v ? o : v)
EMBER_INT_ATOMICS(i32, int32_t)
EMBER_INT_ATOMICS(u32, uint32_t)
EMBER_RMW(add, bool, bool, uint32_t, EMBER_BOOL, EMBER_WORD, (w + (uint32_t)v) != 0u)
EMBER_RMW(min, bool, bool, uint32_t, EMBER_BOOL, EMBER_WORD, (w < (uint32_t)v ? w : (uint32_t)v) != 0u)
EMBER_RMW(max, bool, bool, uint32_t, EMBER_BOOL, EMBER_WORD, (w > (uint32_t)v ? w : (uint32_t)v) != 0u)
EMBER_RMW(and, bool, bool, uint32_t, EMBER_BOOL, EMBER_ID, w & (uint32_t)v)
EMBER_RMW(or, bool, bool, uint32_t, EMBER_BOOL, EMBER_ID, w | (uint32_t)v)
EMBER_RMW(xor, bool, bool, uint32_t, EMBER_BOOL, EMBER_ID, w ^ (uint32_t)v)
EMBER_RMW(exchange, bool, bool, uint32_t, EMBER_BOOL, EMBER_WORD, v)
}  // namespace
)";

Dialect make_cpp() {
  Dialect d;
  d.name = "cpp";
  d.prelude = std::string(kMathText) + kCppPrelude;
  d.contraction_prelude = kGemmText;
  d.packed_contractions = true;
  d.type = {"void", "float", "int32_t", "uint32_t", "bool"};
  d.mem_type = {"uint32_t", "float", "int32_t", "uint32_t", "uint32_t"};
  d.index_type = "int64_t";
  d.index_from_i32 = "(int64_t){0}";
  d.i32_from_index = "(int32_t){0}";
  d.wide_addresses = true;
  d.stage_fill =
      "ember_rows<{T}> {name}_rows((int64_t)({lanes} * {stride}));\n"
      "{T}* const {name} = {name}_rows.data();\n"
      "for (int64_t t = 0; t < {n}; ++t)\n"
      "  for (int64_t l = 0; l < {lanes}; ++l) {name}[l * {stride} + t] = {mem}[{lanes} * ({begin} + t) + l];";

  // expr[op] = {f32, i32, u32, bool}; "" where core/ir/eval.cpp does not define the op.
  auto set = [&](Op op, const char* f, const char* i, const char* u, const char* b) {
    d.expr[static_cast<int>(op)] = {f, i, u, b};
  };
  auto all = [&](Op op, const char* e) { set(op, e, e, e, e); };
  auto math = [&](Op op, const char* e) { set(op, e, "", "", ""); };
  set(Op::neg, "-{0}", "-{0}", "(0u - {0})", "{0}");
  set(Op::lnot, "(ember_as_u32({0}) == 0u)", "!{0}", "!{0}", "!{0}");  // on the word, as eval does
  set(Op::bnot, "", "~{0}", "~{0}", "true");
  set(Op::abs, "__builtin_fabsf({0})", "({0} < 0 ? -{0} : {0})", "{0}", "{0}");
  set(Op::sign, "({0} > 0.0f ? 1.0f : ({0} < 0.0f ? -1.0f : ({0} == 0.0f ? 0.0f : {0})))", "(({0} > 0) - ({0} < 0))", "(uint32_t)({0} > 0u)", "{0}");
  set(Op::floor, "__builtin_floorf({0})", "{0}", "{0}", "{0}");
  set(Op::ceil, "__builtin_ceilf({0})", "{0}", "{0}", "{0}");
  set(Op::round, "__builtin_nearbyintf({0})", "{0}", "{0}", "{0}");
  set(Op::trunc, "__builtin_truncf({0})", "{0}", "{0}", "{0}");
  set(Op::frac, "({0} - __builtin_floorf({0}))", "0", "0u", "false");
  math(Op::exp, "ember_math::exp({0})");
  math(Op::exp2, "ember_math::exp2({0})");
  math(Op::log, "ember_math::log({0})");
  math(Op::log2, "ember_math::log2({0})");
  math(Op::sqrt, "__builtin_sqrtf({0})");
  math(Op::rsqrt, "(1.0f / __builtin_sqrtf({0}))");
  math(Op::sin, "ember_math::sin({0})");
  math(Op::cos, "ember_math::cos({0})");
  math(Op::tan, "__builtin_tanf({0})");
  math(Op::asin, "__builtin_asinf({0})");
  math(Op::acos, "__builtin_acosf({0})");
  math(Op::atan, "__builtin_atanf({0})");
  math(Op::sinh, "__builtin_sinhf({0})");
  math(Op::cosh, "__builtin_coshf({0})");
  math(Op::tanh, "ember_math::tanh({0})");
  set(Op::isnan, "(__builtin_isnan({0}) != 0)", "false", "false", "false");
  set(Op::isinf, "(__builtin_isinf({0}) != 0)", "false", "false", "false");
  all(Op::add, "({0} + {1})");
  all(Op::sub, "({0} - {1})");
  all(Op::mul, "({0} * {1})");
  set(Op::div, "({0} / {1})", "ember_div({0}, {1})", "ember_div({0}, {1})", "ember_div((uint32_t){0}, (uint32_t){1})");
  set(Op::mod, "ember_mod({0}, {1})", "ember_mod({0}, {1})", "ember_mod({0}, {1})",
      "ember_mod((uint32_t){0}, (uint32_t){1})");
  math(Op::pow, "__builtin_powf({0}, {1})");
  math(Op::atan2, "ember_math::atan2({0}, {1})");
  set(Op::min, "ember_math::fmin({0}, {1})", "({0} < {1} ? {0} : {1})", "({0} < {1} ? {0} : {1})", "({0} < {1} ? {0} : {1})");
  set(Op::max, "ember_math::fmax({0}, {1})", "({0} > {1} ? {0} : {1})", "({0} > {1} ? {0} : {1})", "({0} > {1} ? {0} : {1})");
  all(Op::eq, "({0} == {1})");
  all(Op::ne, "({0} != {1})");
  all(Op::lt, "({0} < {1})");
  all(Op::le, "({0} <= {1})");
  all(Op::gt, "({0} > {1})");
  all(Op::ge, "({0} >= {1})");
  set(Op::land, "(ember_as_u32({0}) != 0u && ember_as_u32({1}) != 0u)", "({0} && {1})", "({0} && {1})", "({0} && {1})");
  set(Op::lor, "(ember_as_u32({0}) != 0u || ember_as_u32({1}) != 0u)", "({0} || {1})", "({0} || {1})", "({0} || {1})");
  set(Op::band, "", "({0} & {1})", "({0} & {1})", "({0} & {1})");
  set(Op::bor, "", "({0} | {1})", "({0} | {1})", "({0} | {1})");
  set(Op::bxor, "", "({0} ^ {1})", "({0} ^ {1})", "({0} ^ {1})");
  set(Op::shl, "", "ember_shl({0}, {1})", "ember_shl({0}, {1})", "ember_shl((uint32_t){0}, (uint32_t){1})");
  set(Op::shr, "", "ember_shr({0}, {1})", "ember_shr({0}, {1})", "ember_shr((uint32_t){0}, (uint32_t){1})");
  all(Op::select, "({0} ? {1} : {2})");
  // One rounding, as eval.cpp's std::fma: a vfmadd where -march=native has FMA (contract_fma runs
  // only there), a libm call elsewhere.
  math(Op::fma, "__builtin_fmaf({0}, {1}, {2})");

  // cast[from][to] (value conversion, eval.cpp convert_word) and bitcast[from][to].
  const int F = dtype_slot(DType::f32), I = dtype_slot(DType::i32), U = dtype_slot(DType::u32),
            B = dtype_slot(DType::boolean);
  d.cast[F][I] = "ember_f2i({0})";
  d.cast[F][U] = "ember_f2u({0})";
  d.cast[F][B] = "({0} != 0.0f)";
  d.cast[I][F] = "(float){0}";
  d.cast[U][F] = "(float){0}";
  d.cast[B][F] = "({0} ? 1.0f : 0.0f)";
  d.cast[I][U] = d.bitcast[I][U] = d.bitcast[B][U] = d.cast[B][U] = "(uint32_t){0}";
  d.cast[U][I] = d.bitcast[U][I] = d.bitcast[B][I] = d.cast[B][I] = "(int32_t){0}";
  d.cast[I][B] = d.bitcast[I][B] = "({0} != 0)";
  d.cast[U][B] = d.bitcast[U][B] = "({0} != 0u)";
  d.bitcast[F][I] = "(int32_t)ember_as_u32({0})";
  d.bitcast[F][U] = "ember_as_u32({0})";
  d.bitcast[F][B] = "(ember_as_u32({0}) != 0u)";
  d.bitcast[I][F] = d.bitcast[B][F] = "ember_as_f32((uint32_t){0})";
  d.bitcast[U][F] = "ember_as_f32({0})";

  d.load_value = {"{0}", "{0}", "{0}", "({0} != 0u)"};
  d.store_value = {"{0}", "{0}", "{0}", "({0} ? 1u : 0u)"};
  const char* kinds[] = {"add", "min", "max", "and", "or", "xor", "exchange"};
  const char* classes[] = {"f32", "i32", "u32", "bool"};
  for (int k = 0; k < kAtomicKinds; ++k)
    for (int c = 0; c < kValueClasses; ++c)
      d.atomic[k][c] = std::string("ember_atomic_") + kinds[k] + "_" + classes[c] + "({mem} + {idx}, {val})";
  d.barrier = "";  // one CPU thread runs a whole workgroup; group barriers are lowered away
  d.group_mem_decl = "alignas(64) {T} {name}[{n}]{init};";  // on the stack of the thread running the group
  d.group_mem_zero = " = {}";

  d.reduction_loop = "#pragma omp simd{clauses}";
  d.reduction_clause = " reduction({op}:{name})";
  d.f32_add_reduction = "ember_fadd";
  d.reduction_in_order = " simdlen(1)";
  d.chunk_loop_open =
      "#pragma omp parallel for schedule(static) if ({parallel})\n"
      "for (int64_t {c} = 0; {c} < {n}; ++{c}) {";
  d.thread_exit = "continue;";  // the per-thread scope is an OpenMP loop body
  d.kernel_open =
      "extern \"C\" void {name}(uint32_t* const* mem, const uint32_t* params, int64_t begin, int64_t end) {";
  d.local_mem_decl = "{T}* const m{i} = reinterpret_cast<{T}*>(mem[{i}]);";
  d.param_word = "params[{i}]";
  d.threads_open =
      "#pragma omp parallel for schedule(static) if ({parallel})\n"
      "for (int64_t {tid} = begin; {tid} < end; ++{tid}) {";
  d.threads_close = "}";
  d.rows_open =
      "#pragma omp parallel for schedule(static) if ({parallel})\n"
      "for (int64_t row = begin / {len}; row < (end + {len} - 1) / {len}; ++row) {";
  // Threads are independent (the rows loop above runs them in parallel): ivdep lets the columns
  // loop vectorize where GCC cannot rule out aliasing, e.g. sin/cos's table gather (core/math).
  d.cols_open =
      "#pragma GCC ivdep\n"
      "for (int64_t col = {lo}; col < {hi}; ++col) {\n"
      "  const int64_t {tid} = row * {len} + col;";
  return d;
}

}  // namespace

const Dialect& cpp_dialect() {
  static const Dialect d = make_cpp();
  return d;
}

}  // namespace ember

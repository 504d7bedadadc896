// The GLSL and HLSL dialects' shared helper text and table entries (shader_helpers.h).
#include "codegen/shader_helpers.h"

namespace ember {

const char* const kShaderHelpers = R"(bool ember_isnan(float x) { return (EMBER_AS_U(x) & 0x7fffffffu) > 0x7f800000u; }
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
)";

const char* const kAtomicFunctions[kAtomicKinds] = {"Add", "Min", "Max", "And", "Or", "Xor", "Exchange"};
const char* const kBoolAtomicFunctions[kAtomicKinds] = {"Or", "And", "Or", "And", "Or", "Xor", "Exchange"};

namespace {

// Template `t` with its operand {0} replaced by `x`.
std::string with_operand(const std::string& t, const std::string& x) {
  const size_t at = t.find("{0}");
  return at == std::string::npos ? t : t.substr(0, at) + x + t.substr(at + 3);
}

}  // namespace

void set_shader_common(Dialect& d, const ShaderSpelling& s) {
  // `precise` keeps a * b + c unfused (NoContraction), as the CPU backend's -ffp-contract=off
  // does, so float results match the interpreter's operation for operation.
  d.type = {"void", "precise float", "int", "uint", "bool"};
  d.mem_type = {"uint", "uint", "int", "uint", "uint"};
  d.index_type = "int";  // the runtimes keep dispatches below 2^31 threads
  d.index_from_i32 = "{0}";
  d.i32_from_index = "{0}";

  const std::string fu0 = with_operand(s.float_as_uint, "{0}"), fu1 = with_operand(s.float_as_uint, "{1}");
  const std::string one = "1.0" + s.float_suffix, zero = "0.0" + s.float_suffix;
  auto set = [&](Op op, const std::string& f, const char* i, const char* u, const char* b) {
    d.expr[static_cast<int>(op)] = {f, i, u, b};
  };
  auto math = [&](Op op, const std::string& e) { set(op, e, "", "", ""); };
  set(Op::neg, "(-{0})", "(-{0})", "(0u - {0})", "{0}");
  set(Op::lnot, "(" + fu0 + " == 0u)", "({0} == 0)", "({0} == 0u)", "(!{0})");
  set(Op::bnot, "", "(~{0})", "(~{0})", "true");
  set(Op::abs, "abs({0})", "abs({0})", "{0}", "{0}");
  set(Op::floor, "floor({0})", "{0}", "{0}", "{0}");
  set(Op::ceil, "ceil({0})", "{0}", "{0}", "{0}");
  set(Op::trunc, "trunc({0})", "{0}", "{0}", "{0}");
  set(Op::frac, "({0} - floor({0}))", "0", "0u", "false");
  math(Op::sqrt, "ember_sqrt({0})");
  math(Op::rsqrt, "(" + one + " / ember_sqrt({0}))");
  set(Op::isnan, "ember_isnan({0})", "false", "false", "false");
  set(Op::isinf, "ember_isinf({0})", "false", "false", "false");
  set(Op::add, "({0} + {1})", "({0} + {1})", "({0} + {1})", "({0} || {1})");
  set(Op::sub, "({0} - {1})", "({0} - {1})", "({0} - {1})", "({0} != {1})");
  set(Op::mul, "({0} * {1})", "({0} * {1})", "({0} * {1})", "({0} && {1})");
  set(Op::div, "({0} / {1})", "ember_div({0}, {1})", "ember_div({0}, {1})", "({0} && {1})");
  set(Op::mod, "ember_mod({0}, {1})", "ember_mod({0}, {1})", "ember_mod({0}, {1})", "false");
  set(Op::min, "ember_fmin({0}, {1})", "min({0}, {1})", "min({0}, {1})", "({0} && {1})");
  set(Op::max, "ember_fmax({0}, {1})", "max({0}, {1})", "max({0}, {1})", "({0} || {1})");
  set(Op::eq, "({0} == {1})", "({0} == {1})", "({0} == {1})", "({0} == {1})");
  set(Op::ne, "({0} != {1})", "({0} != {1})", "({0} != {1})", "({0} != {1})");
  set(Op::lt, "({0} < {1})", "({0} < {1})", "({0} < {1})", "(!{0} && {1})");
  set(Op::le, "({0} <= {1})", "({0} <= {1})", "({0} <= {1})", "(!{0} || {1})");
  set(Op::gt, "({0} > {1})", "({0} > {1})", "({0} > {1})", "({0} && !{1})");
  set(Op::ge, "({0} >= {1})", "({0} >= {1})", "({0} >= {1})", "({0} || !{1})");
  set(Op::land, "(" + fu0 + " != 0u && " + fu1 + " != 0u)", "({0} != 0 && {1} != 0)", "({0} != 0u && {1} != 0u)",
      "({0} && {1})");
  set(Op::lor, "(" + fu0 + " != 0u || " + fu1 + " != 0u)", "({0} != 0 || {1} != 0)", "({0} != 0u || {1} != 0u)",
      "({0} || {1})");
  set(Op::band, "", "({0} & {1})", "({0} & {1})", "({0} && {1})");
  set(Op::bor, "", "({0} | {1})", "({0} | {1})", "({0} || {1})");
  set(Op::bxor, "", "({0} ^ {1})", "({0} ^ {1})", "({0} != {1})");
  set(Op::shl, "", "ember_shl({0}, {1})", "ember_shl({0}, {1})", "{0}");
  set(Op::shr, "", "ember_shr({0}, {1})", "ember_shr({0}, {1})", "({0} && !{1})");
  set(Op::select, "({0} ? {1} : {2})", "({0} ? {1} : {2})", "({0} ? {1} : {2})", "({0} ? {1} : {2})");
  math(Op::fma, "fma({0}, {1}, {2})");  // GLSL, WGSL; HLSL's float fma is mad (dialect_hlsl.cpp)

  const int F = dtype_slot(DType::f32), I = dtype_slot(DType::i32), U = dtype_slot(DType::u32),
            B = dtype_slot(DType::boolean);
  d.cast[F][I] = "ember_f2i({0})";
  d.cast[F][U] = "ember_f2u({0})";
  d.cast[F][B] = "({0} != " + zero + ")";
  d.cast[I][F] = d.cast[U][F] = s.to_float;
  d.cast[B][F] = "({0} ? " + one + " : " + zero + ")";
  d.cast[I][U] = d.bitcast[I][U] = d.bitcast[B][U] = d.cast[B][U] = s.to_uint;
  d.cast[U][I] = d.bitcast[U][I] = d.bitcast[B][I] = d.cast[B][I] = s.to_int;
  d.cast[I][B] = d.bitcast[I][B] = "({0} != 0)";
  d.cast[U][B] = d.bitcast[U][B] = "({0} != 0u)";
  d.bitcast[F][I] = s.float_as_int;
  d.bitcast[F][U] = s.float_as_uint;
  d.bitcast[F][B] = "(" + fu0 + " != 0u)";
  d.bitcast[I][F] = s.int_as_float;
  d.bitcast[B][F] = with_operand(s.uint_as_float, s.to_uint);
  d.bitcast[U][F] = s.uint_as_float;

  // Memory: f32 words are uint, i32 int, u32/bool uint.
  d.load_value = {s.uint_as_float, "{0}", "{0}", "({0} != 0u)"};
  d.store_value = {s.float_as_uint, "{0}", "{0}", "({0} ? 1u : 0u)"};

  // Native workgroups (Dialect::group_threads_open, set by each dialect with its
  // group_shared_decl and barriers): group buffers are the workgroup's shared memory, zeroed by
  // the group's threads together (a barrier follows), coordinates from the printer's ember_g /
  // ember_l. A kernel whose groups were lowered (the CPU's pipeline, printed as GLSL/HLSL by
  // source()) keeps its group buffers as arrays of the thread running the group.
  d.group_mem_private = true;
  d.group_mem_decl = "{T} {name}[{n}];\nfor (int {name}_z = 0; {name}_z < {n}; ++{name}_z) {name}[{name}_z] = {T}(0);";
  d.group_shared_zero = "for (int {name}_z = ember_l; {name}_z < {n}; {name}_z += {group}) {name}[{name}_z] = {T}(0);";
  d.local_index = "ember_l{axis}";
  d.group_index = "ember_g{axis}";
  d.decl_late = "{T} {name};";
  d.loop_open = "for (int {k} = {begin}; {cond}; {k} = ember_step({k}, {step}, {end})) {";
  d.loop_counter = "const {T} {name} = {k};";
  d.thread_exit = "return;";
  d.group_size = 64;
  d.local_mem_decl = "";
  d.threads_close = "}";
}

}  // namespace ember

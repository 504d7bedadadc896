// The `glsl` dialect: GLSL 4.50 compute shaders for Vulkan (through shaderc) and, as a variant,
// OpenGL 4.5 core. Each kernel is its own shader. Helpers in the prelude (shared with HLSL:
// codegen/shader_helpers.cpp) reproduce
// core/ir/eval.cpp where GLSL leaves results undefined or differs: floor div/mod with x/0 == 0
// (computed on magnitudes in uint, so no signed `/` or `%` of negative operands is ever
// executed), shifts by >= 32, saturating float->int conversion, fmin/fmax returning the non-NaN
// operand, NaN/inf tests on the bits (drivers may assume no NaN in builtins), and pow/log/sqrt
// outside their GLSL domain. Language gaps are lowered here, before printing:
//   - memories are arrays of 32-bit words: `uint` (f32 memories too, read through
//     uintBitsToFloat; bool is one word), `int` for i32 so signed atomic min/max are native;
//   - float atomics are compare-and-swap loops on the uint words (atomicCompSwap), unless the
//     device has native float atomic add (GlslOptions::float_atomic_add: f32 memories become
//     `float` arrays with a `uint` alias view `m<i>_w` of the same binding for the CAS ops);
//   - bool arithmetic is spelled with logical operators (GLSL has no arithmetic on bool).
#include <map>
#include <mutex>

#include "codegen/dialect.h"
#include "codegen/shader_helpers.h"

namespace ember {

namespace {

// Spelling of the conversions codegen/shader_helpers.cpp uses.
const char* kGlslHelpers =
    "#define EMBER_U(x) uint(x)\n"
    "#define EMBER_I(x) int(x)\n"
    "#define EMBER_AS_U(x) floatBitsToUint(x)\n"
    "#define EMBER_AS_F(x) uintBitsToFloat(x)\n";

// `float {name}` = old value of a CAS loop that stores OP(old, val) into word `{mem}[{idx}]`.
std::string cas_float(const std::string& words, const std::string& op) {
  return "float {name};\n"
         "{\n"
         "  uint ember_seen, ember_old = " + words + ";\n"
         "  do {\n"
         "    ember_seen = ember_old;\n"
         "    ember_old = atomicCompSwap(" + words + ", ember_seen, floatBitsToUint(" + op + "));\n"
         "  } while (ember_old != ember_seen);\n"
         "  {name} = uintBitsToFloat(ember_old);\n"
         "}";
}

Dialect make_glsl(const GlslOptions& o) {
  Dialect d;
  d.name = "glsl";
  d.prelude = std::string("#version 450\n") +
              (!o.float_atomic_add ? ""
               : o.opengl ? "#extension GL_NV_shader_atomic_float : require\n"
                          : "#extension GL_EXT_shader_atomic_float : require\n") + kGlslHelpers + kShaderHelpers;
  // `precise` keeps a * b + c unfused (NoContraction), as the CPU backend's -ffp-contract=off
  // does, so float results match the interpreter's operation for operation.
  d.type = {"void", "precise float", "int", "uint", "bool"};
  d.mem_type = {"uint", o.float_atomic_add ? "float" : "uint", "int", "uint", "uint"};
  d.index_type = "int";  // the runtime keeps dispatches below 2^31 threads
  d.index_from_i32 = "{0}";
  d.i32_from_index = "{0}";

  auto set = [&](Op op, const char* f, const char* i, const char* u, const char* b) {
    d.expr[static_cast<int>(op)] = {f, i, u, b};
  };
  auto math = [&](Op op, const char* e) { set(op, e, "", "", ""); };
  set(Op::neg, "(-{0})", "(-{0})", "(0u - {0})", "{0}");
  set(Op::lnot, "(floatBitsToUint({0}) == 0u)", "({0} == 0)", "({0} == 0u)", "(!{0})");
  set(Op::bnot, "", "(~{0})", "(~{0})", "true");
  set(Op::abs, "abs({0})", "abs({0})", "{0}", "{0}");
  set(Op::sign, "ember_sign({0})", "sign({0})", "uint({0} > 0u)", "{0}");
  set(Op::floor, "floor({0})", "{0}", "{0}", "{0}");
  set(Op::ceil, "ceil({0})", "{0}", "{0}", "{0}");
  set(Op::round, "roundEven({0})", "{0}", "{0}", "{0}");
  set(Op::trunc, "trunc({0})", "{0}", "{0}", "{0}");
  set(Op::frac, "({0} - floor({0}))", "0", "0u", "false");
  math(Op::exp, "exp({0})");
  math(Op::exp2, "exp2({0})");
  math(Op::log, "ember_log({0})");
  math(Op::log2, "ember_log2({0})");
  math(Op::sqrt, "ember_sqrt({0})");
  math(Op::rsqrt, "(1.0 / ember_sqrt({0}))");
  math(Op::sin, "sin({0})");
  math(Op::cos, "cos({0})");
  math(Op::tan, "tan({0})");
  math(Op::asin, "ember_asin({0})");
  math(Op::acos, "ember_acos({0})");
  math(Op::atan, "ember_atan({0})");
  math(Op::sinh, "sinh({0})");
  math(Op::cosh, "cosh({0})");
  // Mesa's GLSL tanh clamps its argument (tanh(NaN) = -1); SPIR-V's keeps NaN.
  math(Op::tanh, o.opengl ? "(ember_isnan({0}) ? {0} : tanh({0}))" : "tanh({0})");
  set(Op::isnan, "ember_isnan({0})", "false", "false", "false");
  set(Op::isinf, "ember_isinf({0})", "false", "false", "false");
  set(Op::add, "({0} + {1})", "({0} + {1})", "({0} + {1})", "({0} || {1})");
  set(Op::sub, "({0} - {1})", "({0} - {1})", "({0} - {1})", "({0} != {1})");
  set(Op::mul, "({0} * {1})", "({0} * {1})", "({0} * {1})", "({0} && {1})");
  set(Op::div, "({0} / {1})", "ember_div({0}, {1})", "ember_div({0}, {1})", "({0} && {1})");
  set(Op::mod, "ember_mod({0}, {1})", "ember_mod({0}, {1})", "ember_mod({0}, {1})", "false");
  math(Op::pow, "ember_pow({0}, {1})");
  math(Op::atan2, "ember_atan2({0}, {1})");
  set(Op::min, "ember_fmin({0}, {1})", "min({0}, {1})", "min({0}, {1})", "({0} && {1})");
  set(Op::max, "ember_fmax({0}, {1})", "max({0}, {1})", "max({0}, {1})", "({0} || {1})");
  set(Op::eq, "({0} == {1})", "({0} == {1})", "({0} == {1})", "({0} == {1})");
  set(Op::ne, "({0} != {1})", "({0} != {1})", "({0} != {1})", "({0} != {1})");
  set(Op::lt, "({0} < {1})", "({0} < {1})", "({0} < {1})", "(!{0} && {1})");
  set(Op::le, "({0} <= {1})", "({0} <= {1})", "({0} <= {1})", "(!{0} || {1})");
  set(Op::gt, "({0} > {1})", "({0} > {1})", "({0} > {1})", "({0} && !{1})");
  set(Op::ge, "({0} >= {1})", "({0} >= {1})", "({0} >= {1})", "({0} || !{1})");
  set(Op::land, "(floatBitsToUint({0}) != 0u && floatBitsToUint({1}) != 0u)", "({0} != 0 && {1} != 0)",
      "({0} != 0u && {1} != 0u)", "({0} && {1})");
  set(Op::lor, "(floatBitsToUint({0}) != 0u || floatBitsToUint({1}) != 0u)", "({0} != 0 || {1} != 0)",
      "({0} != 0u || {1} != 0u)", "({0} || {1})");
  set(Op::band, "", "({0} & {1})", "({0} & {1})", "({0} && {1})");
  set(Op::bor, "", "({0} | {1})", "({0} | {1})", "({0} || {1})");
  set(Op::bxor, "", "({0} ^ {1})", "({0} ^ {1})", "({0} != {1})");
  set(Op::shl, "", "ember_shl({0}, {1})", "ember_shl({0}, {1})", "{0}");
  set(Op::shr, "", "ember_shr({0}, {1})", "ember_shr({0}, {1})", "({0} && !{1})");
  set(Op::select, "({0} ? {1} : {2})", "({0} ? {1} : {2})", "({0} ? {1} : {2})", "({0} ? {1} : {2})");

  const int F = dtype_slot(DType::f32), I = dtype_slot(DType::i32), U = dtype_slot(DType::u32),
            B = dtype_slot(DType::boolean);
  d.cast[F][I] = "ember_f2i({0})";
  d.cast[F][U] = "ember_f2u({0})";
  d.cast[F][B] = "({0} != 0.0)";
  d.cast[I][F] = d.cast[U][F] = "float({0})";
  d.cast[B][F] = "({0} ? 1.0 : 0.0)";
  d.cast[I][U] = d.bitcast[I][U] = d.bitcast[B][U] = d.cast[B][U] = "uint({0})";
  d.cast[U][I] = d.bitcast[U][I] = d.bitcast[B][I] = d.cast[B][I] = "int({0})";
  d.cast[I][B] = d.bitcast[I][B] = "({0} != 0)";
  d.cast[U][B] = d.bitcast[U][B] = "({0} != 0u)";
  d.bitcast[F][I] = "floatBitsToInt({0})";
  d.bitcast[F][U] = "floatBitsToUint({0})";
  d.bitcast[F][B] = "(floatBitsToUint({0}) != 0u)";
  d.bitcast[I][F] = "intBitsToFloat({0})";
  d.bitcast[B][F] = "uintBitsToFloat(uint({0}))";
  d.bitcast[U][F] = "uintBitsToFloat({0})";

  // Memory: f32 words are uint (or float with native float atomics), i32 int, u32/bool uint.
  const bool fnative = o.float_atomic_add;
  d.load_value = {fnative ? "{0}" : "uintBitsToFloat({0})", "{0}", "{0}", "({0} != 0u)"};
  d.store_value = {fnative ? "{0}" : "floatBitsToUint({0})", "{0}", "{0}", "({0} ? 1u : 0u)"};
  const char* fn[] = {"atomicAdd", "atomicMin", "atomicMax", "atomicAnd", "atomicOr", "atomicXor", "atomicExchange"};
  // Old value; bool words combine as 0/1 (add and max are or, min is and), as eval.cpp does.
  const char* bool_fn[] = {"atomicOr", "atomicAnd", "atomicOr", "atomicAnd", "atomicOr", "atomicXor", "atomicExchange"};
  const std::string words = fnative ? "{mem}_w[{idx}]" : "{mem}[{idx}]";
  const int cf = value_class(DType::f32), ci = value_class(DType::i32), cu = value_class(DType::u32),
            cb = value_class(DType::boolean);
  for (int k = 0; k < kAtomicKinds; ++k) {
    d.atomic[k][ci] = d.atomic[k][cu] = std::string(fn[k]) + "({mem}[{idx}], {val})";
    d.atomic[k][cb] = std::string("(") + bool_fn[k] + "({mem}[{idx}], uint({val})) != 0u)";
    d.atomic[k][cf] = "uintBitsToFloat(" + std::string(fn[k]) + "(" + words + ", floatBitsToUint({val})))";
  }
  const int add = static_cast<int>(AtomicKind::add), mn = static_cast<int>(AtomicKind::min),
            mx = static_cast<int>(AtomicKind::max);
  for (int k : {add, mn, mx}) d.atomic[k][cf].clear();
  if (fnative) d.atomic[add][cf] = "atomicAdd({mem}[{idx}], {val})";
  else d.atomic_stmt[add][cf] = cas_float(words, "uintBitsToFloat(ember_seen) + {val}");
  d.atomic_stmt[mn][cf] = cas_float(words, "ember_fmin(uintBitsToFloat(ember_seen), {val})");
  d.atomic_stmt[mx][cf] = cas_float(words, "ember_fmax(uintBitsToFloat(ember_seen), {val})");
  d.barrier = "memoryBarrierShared();\nbarrier();";

  // Workgroups are lowered before printing (Backend::lowers_groups): one GPU thread runs a whole
  // group, and a group buffer is an array of that thread, zeroed whether or not it must be.
  d.group_mem_private = true;
  d.group_mem_decl = "{T} {name}[{n}];\nfor (int {name}_z = 0; {name}_z < {n}; ++{name}_z) {name}[{name}_z] = {T}(0);";
  d.loop_open = "for (int {k} = {begin}; {cond}; {k} = ember_step({k}, {step}, {end})) {";
  d.loop_counter = "const {T} {name} = {k};";
  d.thread_exit = "return;";

  const std::string binding = o.opengl ? "layout(std430, binding = " : "layout(std430, set = 0, binding = ";
  d.global_mem_decl = binding + "{i}) buffer EmberM{i} { {T} m{i}[]; };";
  if (fnative) d.global_mem_decl += "\n" + binding + "{i}) buffer EmberW{i} { uint m{i}_w[]; };";
  if (o.opengl) {
    // A uniform block at uniform-buffer binding 0 (a namespace apart from the storage buffers'):
    // std140 packs uint members 4 bytes apart, so the words lie as in the push constants.
    d.params_open = "layout(std140, binding = 0) uniform EmberParams {\n  uint threads;\n  uint row;";
    d.param_decl = "  uint p{i};";
    d.params_close = "} ember_pc;";
    d.param_word = "ember_pc.p{i}";
  } else if (o.params_in_buffer) {
    d.params_open = binding + "{nmem}) readonly buffer EmberParams { uint threads; uint row; uint p[]; } ember_pc;";
    d.param_word = "ember_pc.p[{i}]";
  } else {
    d.params_open = "layout(push_constant) uniform EmberPush {\n  uint threads;\n  uint row;";
    d.param_decl = "  uint p{i};";
    d.params_close = "} ember_pc;";
    d.param_word = "ember_pc.p{i}";
  }
  d.group_size = 64;
  d.kernel_open = "layout(local_size_x = {group}) in;\nvoid main() {";
  d.local_mem_decl = "";
  d.threads_open =
      "uint ember_t = gl_GlobalInvocationID.y * ember_pc.row + gl_GlobalInvocationID.x;\n"
      "if (ember_t < ember_pc.threads) {\n"
      "  const int {tid} = int(ember_t);";
  d.threads_close = "}";
  return d;
}

}  // namespace

const Dialect& glsl_dialect(const GlslOptions& options) {
  static std::mutex mu;
  static std::map<int, Dialect>* cache = new std::map<int, Dialect>;  // never destroyed
  const int key = (options.opengl ? 1 : 0) | (options.float_atomic_add ? 2 : 0) | (options.params_in_buffer ? 4 : 0);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(key);
  if (it == cache->end()) it = cache->emplace(key, make_glsl(options)).first;
  return it->second;
}

}  // namespace ember

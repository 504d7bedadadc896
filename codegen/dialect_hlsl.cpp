// The `hlsl` dialect: HLSL compute shaders for Vulkan, compiled by shaderc's HLSL front end
// (glslang). Memories are [[vk::binding(i, 0)]] RWStructuredBuffers of 32-bit words (int for
// i32, uint otherwise; f32 read through asfloat), params a [[vk::push_constant]] block with the
// same layout as the GLSL dialect's (codegen/dialect.h). The prelude mirrors the GLSL helpers
// (core/ir/eval.cpp semantics). Atomics are Interlocked* statements; float add/min/max are
// compare-and-swap loops on the words (InterlockedCompareExchange), as HLSL has no float atomics.
#include "codegen/dialect.h"
#include "codegen/shader_helpers.h"

namespace ember {

namespace {

// Spelling of the conversions codegen/shader_helpers.cpp uses.
const char* kHlslPrelude =
    "#define EMBER_U(x) ((uint)(x))\n"
    "#define EMBER_I(x) ((int)(x))\n"
    "#define EMBER_AS_U(x) asuint(x)\n"
    "#define EMBER_AS_F(x) asfloat(x)\n";

// `float {name}` = old value of a CAS loop that stores OP(old, val) into `{mem}[{idx}]`.
std::string cas_float(const std::string& op) {
  return "float {name};\n"
         "{\n"
         "  uint ember_seen;\n"
         "  uint ember_old = {mem}[{idx}];\n"
         "  do {\n"
         "    ember_seen = ember_old;\n"
         "    InterlockedCompareExchange({mem}[{idx}], ember_seen, asuint(" + op + "), ember_old);\n"
         "  } while (ember_old != ember_seen);\n"
         "  {name} = asfloat(ember_old);\n"
         "}";
}

Dialect make_hlsl(bool params_in_buffer) {
  Dialect d;
  d.name = "hlsl";
  d.prelude = std::string(kHlslPrelude) + kShaderHelpers;
  // `precise` keeps a * b + c unfused (NoContraction), as the CPU backend's -ffp-contract=off
  // does, so float results match the interpreter's operation for operation.
  d.type = {"void", "precise float", "int", "uint", "bool"};
  d.mem_type = {"uint", "uint", "int", "uint", "uint"};
  d.index_type = "int";
  d.index_from_i32 = "{0}";
  d.i32_from_index = "{0}";

  auto set = [&](Op op, const char* f, const char* i, const char* u, const char* b) {
    d.expr[static_cast<int>(op)] = {f, i, u, b};
  };
  auto math = [&](Op op, const char* e) { set(op, e, "", "", ""); };
  set(Op::neg, "(-{0})", "(-{0})", "(0u - {0})", "{0}");
  set(Op::lnot, "(asuint({0}) == 0u)", "({0} == 0)", "({0} == 0u)", "(!{0})");
  set(Op::bnot, "", "(~{0})", "(~{0})", "true");
  set(Op::abs, "abs({0})", "abs({0})", "{0}", "{0}");
  set(Op::sign, "ember_sign({0})", "({0} > 0 ? 1 : ({0} < 0 ? -1 : 0))",
      "(uint)({0} > 0u)", "{0}");
  set(Op::floor, "floor({0})", "{0}", "{0}", "{0}");
  set(Op::ceil, "ceil({0})", "{0}", "{0}", "{0}");
  set(Op::round, "round({0})", "{0}", "{0}", "{0}");  // HLSL round: halfway cases to even
  set(Op::trunc, "trunc({0})", "{0}", "{0}", "{0}");
  set(Op::frac, "({0} - floor({0}))", "0", "0u", "false");
  math(Op::exp, "exp({0})");
  math(Op::exp2, "exp2({0})");
  math(Op::log, "ember_log({0})");
  math(Op::log2, "ember_log2({0})");
  math(Op::sqrt, "ember_sqrt({0})");
  math(Op::rsqrt, "(1.0f / ember_sqrt({0}))");
  math(Op::sin, "sin({0})");
  math(Op::cos, "cos({0})");
  math(Op::tan, "tan({0})");
  math(Op::asin, "ember_asin({0})");
  math(Op::acos, "ember_acos({0})");
  math(Op::atan, "ember_atan({0})");
  math(Op::sinh, "sinh({0})");
  math(Op::cosh, "cosh({0})");
  math(Op::tanh, "tanh({0})");
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
  set(Op::land, "(asuint({0}) != 0u && asuint({1}) != 0u)", "({0} != 0 && {1} != 0)", "({0} != 0u && {1} != 0u)",
      "({0} && {1})");
  set(Op::lor, "(asuint({0}) != 0u || asuint({1}) != 0u)", "({0} != 0 || {1} != 0)", "({0} != 0u || {1} != 0u)",
      "({0} || {1})");
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
  d.cast[F][B] = "({0} != 0.0f)";
  d.cast[I][F] = d.cast[U][F] = "((float)({0}))";
  d.cast[B][F] = "({0} ? 1.0f : 0.0f)";
  d.cast[I][U] = d.bitcast[I][U] = d.bitcast[B][U] = d.cast[B][U] = "((uint)({0}))";
  d.cast[U][I] = d.bitcast[U][I] = d.bitcast[B][I] = d.cast[B][I] = "((int)({0}))";
  d.cast[I][B] = d.bitcast[I][B] = "({0} != 0)";
  d.cast[U][B] = d.bitcast[U][B] = "({0} != 0u)";
  d.bitcast[F][I] = "asint({0})";
  d.bitcast[F][U] = "asuint({0})";
  d.bitcast[F][B] = "(asuint({0}) != 0u)";
  d.bitcast[I][F] = "asfloat({0})";
  d.bitcast[B][F] = "asfloat((uint)({0}))";
  d.bitcast[U][F] = "asfloat({0})";

  d.load_value = {"asfloat({0})", "{0}", "{0}", "({0} != 0u)"};
  d.store_value = {"asuint({0})", "{0}", "{0}", "({0} ? 1u : 0u)"};
  const char* fn[] = {"InterlockedAdd", "InterlockedMin", "InterlockedMax", "InterlockedAnd",
                      "InterlockedOr", "InterlockedXor", "InterlockedExchange"};
  // bool words combine as 0/1 (add and max are or, min is and), as eval.cpp does.
  const char* bool_fn[] = {"InterlockedOr", "InterlockedAnd", "InterlockedOr", "InterlockedAnd",
                           "InterlockedOr", "InterlockedXor", "InterlockedExchange"};
  const int cf = value_class(DType::f32), ci = value_class(DType::i32), cu = value_class(DType::u32),
            cb = value_class(DType::boolean);
  for (int k = 0; k < kAtomicKinds; ++k) {
    d.atomic_stmt[k][ci] = d.atomic_stmt[k][cu] = "{T} {name};\n" + std::string(fn[k]) + "({mem}[{idx}], {val}, {name});";
    d.atomic_stmt[k][cb] = "uint {name}_w;\n" + std::string(bool_fn[k]) +
                           "({mem}[{idx}], (uint)({val}), {name}_w);\nconst bool {name} = {name}_w != 0u;";
    d.atomic_stmt[k][cf] = "uint {name}_w;\n" + std::string(fn[k]) +
                           "({mem}[{idx}], asuint({val}), {name}_w);\nconst float {name} = asfloat({name}_w);";
  }
  d.atomic_stmt[static_cast<int>(AtomicKind::add)][cf] = cas_float("asfloat(ember_seen) + {val}");
  d.atomic_stmt[static_cast<int>(AtomicKind::min)][cf] = cas_float("ember_fmin(asfloat(ember_seen), {val})");
  d.atomic_stmt[static_cast<int>(AtomicKind::max)][cf] = cas_float("ember_fmax(asfloat(ember_seen), {val})");
  d.barrier = "GroupMemoryBarrierWithGroupSync();";

  // Workgroups are lowered before printing (Backend::lowers_groups): one GPU thread runs a whole
  // group, and a group buffer is an array of that thread, zeroed whether or not it must be.
  d.group_mem_private = true;
  d.group_mem_decl = "{T} {name}[{n}];\nfor (int {name}_z = 0; {name}_z < {n}; ++{name}_z) {name}[{name}_z] = {T}(0);";
  d.loop_open = "for (int {k} = {begin}; {cond}; {k} = ember_step({k}, {step}, {end})) {";
  d.loop_counter = "const {T} {name} = {k};";
  d.thread_exit = "return;";

  d.global_mem_decl = "[[vk::binding({i}, 0)]] RWStructuredBuffer<{T}> m{i};";
  std::string threads = "ember_pc.threads", row = "ember_pc.row";
  if (params_in_buffer) {
    d.params_open = "[[vk::binding({nmem}, 0)]] StructuredBuffer<uint> ember_params;";
    d.param_word = "ember_params[{i} + 2]";
    threads = "ember_params[0]";
    row = "ember_params[1]";
  } else {
    d.params_open = "struct EmberPush {\n  uint threads;\n  uint row;";
    d.param_decl = "  uint p{i};";
    // glslang's HLSL front end honours vk::push_constant on a ConstantBuffer<T>; on a plain
    // struct variable it silently puts the variable in the $Global uniform block instead.
    d.params_close = "};\n[[vk::push_constant]] ConstantBuffer<EmberPush> ember_pc;";
    d.param_word = "ember_pc.p{i}";
  }
  d.group_size = 64;
  d.kernel_open = "[numthreads({group}, 1, 1)]\nvoid {name}(uint3 ember_gid : SV_DispatchThreadID) {";
  d.local_mem_decl = "";
  d.threads_open = "uint ember_t = ember_gid.y * " + row + " + ember_gid.x;\nif (ember_t < " + threads +
                   ") {\n  const int {tid} = (int)ember_t;";
  d.threads_close = "}";
  return d;
}

}  // namespace

const Dialect& hlsl_dialect(bool params_in_buffer) {
  static const Dialect push = make_hlsl(false), buffer = make_hlsl(true);
  return params_in_buffer ? buffer : push;
}

}  // namespace ember

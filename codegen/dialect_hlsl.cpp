// The `hlsl` dialect: HLSL compute shaders for Vulkan, compiled by shaderc's HLSL front end
// (glslang). Memories are [[vk::binding(i, 0)]] RWStructuredBuffers of 32-bit words (int for
// i32, uint otherwise; f32 read through asfloat), params a [[vk::push_constant]] block with the
// same layout as the GLSL dialect's (codegen/dialect.h). The prelude mirrors the GLSL helpers
// (core/ir/eval.cpp semantics). Atomics are Interlocked* statements; float add/min/max are
// compare-and-swap loops on the words (InterlockedCompareExchange), as HLSL has no float atomics.
// The D3D11 variant (Shader Model 5.0, em.export's `hlsl` target for Unity and D3D11) has no vk::
// attributes: memories at register(u<i>), params as the members of `cbuffer EmberParams :
// register(b0)` (the same words, 4 bytes apart).
#include "codegen/dialect.h"
#include "codegen/shader_helpers.h"
#include "codegen/shader_math.h"

namespace ember {

namespace {

// Spelling of the conversions codegen/shader_helpers.cpp uses.
const char* kHlslPrelude =
    "#define EMBER_U(x) ((uint)(x))\n"
    "#define EMBER_I(x) ((int)(x))\n"
    "#define EMBER_AS_U(x) asuint(x)\n"
    "#define EMBER_AS_F(x) asfloat(x)\n"
    "#define EMBER_F(x) ((float)(x))\n"
    "#define EMBER_OUT(T) out T\n";

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

Dialect make_hlsl(bool params_in_buffer, bool d3d11, bool fast_math) {
  Dialect d;
  d.name = "hlsl";
  d.prelude = std::string(kHlslPrelude) + kShaderHelpers;
  // What GLSL spells alike (codegen/shader_helpers.h); the math functions (codegen/shader_math.h);
  // then HLSL's own sign, round and atomics.
  set_shader_common(d, {"((int)({0}))", "((uint)({0}))", "((float)({0}))", "asint({0})", "asuint({0})", "asfloat({0})",
                        "asfloat({0})", "f"});
  set_shader_math(d, fast_math,
                  {"exp({0})", "exp2({0})", "sin({0})", "cos({0})", "tan({0})", "sinh({0})", "cosh({0})", "tanh({0})"});
  d.expr[static_cast<int>(Op::sign)] = {"ember_sign({0})", "({0} > 0 ? 1 : ({0} < 0 ? -1 : 0))", "(uint)({0} > 0u)",
                                        "{0}"};
  d.expr[static_cast<int>(Op::round)] = {"round({0})", "{0}", "{0}", "{0}"};  // HLSL round: halfway cases to even
  d.expr[static_cast<int>(Op::fma)][value_class(DType::f32)] = "mad({0}, {1}, {2})";  // HLSL's fma() takes doubles
  d.bitcast[dtype_slot(DType::boolean)][dtype_slot(DType::f32)] = "asfloat((uint)({0}))";

  const int cf = value_class(DType::f32), ci = value_class(DType::i32), cu = value_class(DType::u32),
            cb = value_class(DType::boolean);
  for (int k = 0; k < kAtomicKinds; ++k) {
    const std::string fn = std::string("Interlocked") + kAtomicFunctions[k];
    d.atomic_stmt[k][ci] = d.atomic_stmt[k][cu] = "{T} {name};\n" + fn + "({mem}[{idx}], {val}, {name});";
    d.atomic_stmt[k][cb] = "uint {name}_w;\nInterlocked" + std::string(kBoolAtomicFunctions[k]) +
                           "({mem}[{idx}], (uint)({val}), {name}_w);\nconst bool {name} = {name}_w != 0u;";
    d.atomic_stmt[k][cf] = "uint {name}_w;\n" + fn +
                           "({mem}[{idx}], asuint({val}), {name}_w);\nconst float {name} = asfloat({name}_w);";
  }
  d.atomic_stmt[static_cast<int>(AtomicKind::add)][cf] = cas_float("asfloat(ember_seen) + {val}");
  d.atomic_stmt[static_cast<int>(AtomicKind::min)][cf] = cas_float("ember_fmin(asfloat(ember_seen), {val})");
  d.atomic_stmt[static_cast<int>(AtomicKind::max)][cf] = cas_float("ember_fmax(asfloat(ember_seen), {val})");
  d.barrier = "GroupMemoryBarrierWithGroupSync();";
  d.barrier_buffers = "AllMemoryBarrierWithGroupSync();";  // device memory too (globallycoherent buffers)
  d.coherent = "globallycoherent ";
  d.group_shared_decl = "groupshared {T} {name}[{n}];";

  d.global_mem_decl = d3d11 ? "{coherent}RWStructuredBuffer<{T}> m{i} : register(u{i});"
                            : "[[vk::binding({i}, 0)]] {coherent}RWStructuredBuffer<{T}> m{i};";
  std::string threads = "ember_pc.threads", row = "ember_pc.row";
  if (d3d11) {
    d.params_open = "cbuffer EmberParams : register(b0) {\n  uint threads;\n  uint row;";
    d.param_decl = "  uint p{i};";
    d.params_close = "};";
    d.param_word = "p{i}";
    threads = "threads";
    row = "row";
  } else if (params_in_buffer) {
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
  d.kernel_open =
      "[numthreads({group}, 1, 1)]\nvoid {name}(uint3 ember_gid : SV_DispatchThreadID, uint3 ember_wg : SV_GroupID, "
      "uint3 ember_lt : SV_GroupThreadID) {";
  d.threads_open = "uint ember_t = ember_gid.y * " + row + " + ember_gid.x;\nif (ember_t < " + threads +
                   ") {\n  const int {tid} = (int)ember_t;";
  // A grouped kernel: one workgroup per group, laid out as in the GLSL dialect.
  d.group_threads_open = "const uint ember_t = ember_gid.y * " + row + " + ember_gid.x;\n"
                         "const int ember_g = (int)(ember_wg.y * (" + row + " / {group}u) + ember_wg.x);\n"
                         "const int ember_l = (int)ember_lt.x;\n"
                         "bool ember_in = ember_t < " + threads + ";";
  return d;
}

}  // namespace

const Dialect& hlsl_dialect(bool params_in_buffer, bool d3d11, bool fast_math) {
  static const Dialect push = make_hlsl(false, false, false), buffer = make_hlsl(true, false, false),
                       sm5 = make_hlsl(false, true, false), fast_push = make_hlsl(false, false, true),
                       fast_buffer = make_hlsl(true, false, true), fast_sm5 = make_hlsl(false, true, true);
  if (fast_math) return d3d11 ? fast_sm5 : params_in_buffer ? fast_buffer : fast_push;
  return d3d11 ? sm5 : params_in_buffer ? buffer : push;
}

}  // namespace ember

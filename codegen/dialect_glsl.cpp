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
#include "codegen/shader_math.h"

namespace ember {

namespace {

// Spelling of the conversions codegen/shader_helpers.cpp uses.
const char* kGlslHelpers =
    "#define EMBER_U(x) uint(x)\n"
    "#define EMBER_I(x) int(x)\n"
    "#define EMBER_AS_U(x) floatBitsToUint(x)\n"
    "#define EMBER_AS_F(x) uintBitsToFloat(x)\n"
    "#define EMBER_F(x) float(x)\n"
    "#define EMBER_OUT(T) out T\n";

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
  // What HLSL spells alike (codegen/shader_helpers.h); the math functions (codegen/shader_math.h);
  // then GLSL's own sign, round, float atomics and (fast math) OpenGL's tanh.
  set_shader_common(d, {"int({0})", "uint({0})", "float({0})", "floatBitsToInt({0})", "floatBitsToUint({0})",
                        "intBitsToFloat({0})", "uintBitsToFloat({0})", ""});
  set_shader_math(d, o.fast_math,
                  {"exp({0})", "exp2({0})", "sin({0})", "cos({0})", "tan({0})", "sinh({0})", "cosh({0})", "tanh({0})"});
  const bool fnative = o.float_atomic_add;
  if (fnative) d.mem_type[dtype_slot(DType::f32)] = "float";
  d.expr[static_cast<int>(Op::sign)] = {"ember_sign({0})", "sign({0})", "uint({0} > 0u)", "{0}"};
  d.expr[static_cast<int>(Op::round)] = {"roundEven({0})", "{0}", "{0}", "{0}"};
  // Mesa's GLSL tanh clamps its argument (tanh(NaN) = -1); SPIR-V's keeps NaN.
  if (o.opengl && o.fast_math) d.expr[static_cast<int>(Op::tanh)][0] = "(ember_isnan({0}) ? {0} : tanh({0}))";

  // Memory: f32 words are uint (or float with native float atomics), i32 int, u32/bool uint.
  if (fnative) d.load_value[0] = d.store_value[0] = "{0}";
  const std::string words = fnative ? "{mem}_w[{idx}]" : "{mem}[{idx}]";
  const int cf = value_class(DType::f32), ci = value_class(DType::i32), cu = value_class(DType::u32),
            cb = value_class(DType::boolean);
  for (int k = 0; k < kAtomicKinds; ++k) {
    const std::string fn = std::string("atomic") + kAtomicFunctions[k];
    d.atomic[k][ci] = d.atomic[k][cu] = fn + "({mem}[{idx}], {val})";
    d.atomic[k][cb] = std::string("(atomic") + kBoolAtomicFunctions[k] + "({mem}[{idx}], uint({val})) != 0u)";
    d.atomic[k][cf] = "uintBitsToFloat(" + fn + "(" + words + ", floatBitsToUint({val})))";
  }
  const int add = static_cast<int>(AtomicKind::add), mn = static_cast<int>(AtomicKind::min),
            mx = static_cast<int>(AtomicKind::max);
  for (int k : {add, mn, mx}) d.atomic[k][cf].clear();
  if (fnative) d.atomic[add][cf] = "atomicAdd({mem}[{idx}], {val})";
  else d.atomic_stmt[add][cf] = cas_float(words, "uintBitsToFloat(ember_seen) + {val}");
  d.atomic_stmt[mn][cf] = cas_float(words, "ember_fmin(uintBitsToFloat(ember_seen), {val})");
  d.atomic_stmt[mx][cf] = cas_float(words, "ember_fmax(uintBitsToFloat(ember_seen), {val})");
  // em.barrier(): the group's shared-memory writes are visible after it; where a storage-buffer
  // write may precede it, those too (the kernel's buffers are then `coherent`).
  d.barrier = "memoryBarrierShared();\nbarrier();";
  d.barrier_buffers = "memoryBarrierShared();\nmemoryBarrierBuffer();\nbarrier();";
  d.coherent = "coherent ";
  d.group_shared_decl = "shared {T} {name}[{n}];";

  const std::string binding = o.opengl ? "layout(std430, binding = " : "layout(std430, set = 0, binding = ";
  d.global_mem_decl = binding + "{i}) {coherent}buffer EmberM{i} { {T} m{i}[]; };";
  if (fnative) d.global_mem_decl += "\n" + binding + "{i}) {coherent}buffer EmberW{i} { uint m{i}_w[]; };";
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
  d.kernel_open = "layout(local_size_x = {group}) in;\nvoid main() {";
  d.threads_open =
      "uint ember_t = gl_GlobalInvocationID.y * ember_pc.row + gl_GlobalInvocationID.x;\n"
      "if (ember_t < ember_pc.threads) {\n"
      "  const int {tid} = int(ember_t);";
  // A grouped kernel's dispatch is whole workgroups of {group} threads (local_size_x), laid out
  // as any dispatch (`row` threads per grid row, `threads` in all): the group number is the
  // workgroup's flat id.
  d.group_threads_open =
      "const uint ember_t = gl_GlobalInvocationID.y * ember_pc.row + gl_GlobalInvocationID.x;\n"
      "const int ember_g = int(gl_WorkGroupID.y * (ember_pc.row / {group}u) + gl_WorkGroupID.x);\n"
      "const int ember_l = int(gl_LocalInvocationID.x);\n"
      "bool ember_in = ember_t < ember_pc.threads;";
  return d;
}

}  // namespace

const Dialect& glsl_dialect(const GlslOptions& options) {
  static std::mutex mu;
  static std::map<int, Dialect>* cache = new std::map<int, Dialect>;  // never destroyed
  const int key = (options.opengl ? 1 : 0) | (options.float_atomic_add ? 2 : 0) | (options.params_in_buffer ? 4 : 0) |
                  (options.fast_math ? 8 : 0);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(key);
  if (it == cache->end()) it = cache->emplace(key, make_glsl(options)).first;
  return it->second;
}

}  // namespace ember

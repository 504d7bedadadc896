// The `cuda` dialect: CUDA C++ kernels for NVRTC (backends/cuda). All kernels of a program are one
// translation unit (the prelude once); each is `extern "C" __global__` with one by-value argument
// struct, EmberArgs<memories, params> (the prelude's), holding the memories' device pointers, the
// thread count and the param words. The grid is exact: one-dimensional blocks of `group_size`
// threads (or of a grouped kernel's group), the flat thread id is 64-bit and guarded by
// `threads`, and address arithmetic is widened to 64 bits (Dialect::wide_addresses), so a buffer
// may hold more than 2^31 elements. Workgroups are native: group buffers are `__shared__` arrays
// declared in the kernel, em.barrier() is __syncthreads() (which also orders global memory for
// the block). f32 memories are `float` arrays: atomic add and exchange are native (atomicAdd,
// atomicExch), min/max are compare-and-swap loops reproducing eval.cpp's NaN and signed-zero
// rules, and/or/xor act on the words. The scalar helpers are the GLSL/HLSL ones
// (codegen/shader_helpers.cpp) made __device__ functions, so results match the other GPU
// dialects'; the backend compiles with --fmad=false (no contraction, as the CPU's
// -ffp-contract=off and the shaders' `precise`).
#include <regex>

#include "codegen/dialect.h"
#include "codegen/shader_helpers.h"
#include "codegen/shader_math.h"

namespace ember {

namespace {

// Types NVRTC does not predefine (no headers are included), the spellings the shared helpers use,
// and the kernels' argument struct. Typedefs that repeat a predefined one are legal C++.
const char* kCudaTypes =
    "typedef unsigned int uint;\n"
    "typedef int int32_t;\n"
    "typedef unsigned int uint32_t;\n"
    "typedef long long int64_t;\n"
    "#define precise\n"
    "#define EMBER_U(x) ((uint)(x))\n"
    "#define EMBER_I(x) ((int)(x))\n"
    "#define EMBER_AS_U(x) __float_as_uint(x)\n"
    "#define EMBER_AS_F(x) __uint_as_float(x)\n"
    "#define EMBER_F(x) ((float)(x))\n"
    "#define EMBER_OUT(T) T&\n";

const char* kCudaArgs =
    "// A kernel's one argument: M memories, the thread count, P param words (at least one of each,\n"
    "// so the layout is: 8-byte pointers, then int64 threads, then 4-byte words).\n"
    "template <int M, int P> struct EmberArgs {\n"
    "  void* m[M > 0 ? M : 1];\n"
    "  long long threads;\n"
    "  uint p[P > 0 ? P : 1];\n"
    "};\n"
    "// Float min/max atomics: a compare-and-swap loop storing op(old, v); returns the old value.\n"
    "template <class Op> __device__ inline float ember_atomic_cas_f32(float* p, float v, Op op) {\n"
    "  uint* w = reinterpret_cast<uint*>(p);\n"
    "  uint seen, old = *reinterpret_cast<volatile uint*>(w);\n"
    "  do {\n"
    "    seen = old;\n"
    "    old = atomicCAS(w, seen, __float_as_uint(op(__uint_as_float(seen), v)));\n"
    "  } while (old != seen);\n"
    "  return __uint_as_float(old);\n"
    "}\n"
    "struct EmberFmin { __device__ float operator()(float a, float b) const { return ember_fmin(a, b); } };\n"
    "struct EmberFmax { __device__ float operator()(float a, float b) const { return ember_fmax(a, b); } };\n";

// The shared helper text with each function made a device function (the text starts every
// definition at the beginning of a line with its return type).
std::string device_helpers() {
  static const std::regex fn(R"((^|\n)(bool|int|uint|float) (ember_\w+\())");
  return std::regex_replace(std::string(kShaderHelpers), fn, "$1__device__ inline $2 $3");
}

Dialect make_cuda(bool fast_math) {
  Dialect d;
  d.name = "cuda";
  d.prelude = std::string(kCudaTypes) + device_helpers() + kCudaArgs;
  set_shader_common(d, {"((int)({0}))", "((uint)({0}))", "((float)({0}))", "__float_as_int({0})",
                        "__float_as_uint({0})", "__int_as_float({0})", "__uint_as_float({0})", "f"});
  const int F = dtype_slot(DType::f32), B = dtype_slot(DType::boolean);
  d.type = {"void", "float", "int", "uint", "bool"};
  d.mem_type = {"uint", "float", "int", "uint", "uint"};
  d.bitcast[B][F] = "__uint_as_float((uint)({0}))";
  // 64-bit flat ids and addresses (set_shader_common's are 32-bit).
  d.index_type = "long long";
  d.index_from_i32 = "((long long)({0}))";
  d.i32_from_index = "((int)({0}))";
  d.wide_addresses = true;

  auto op = [&](Op o) -> std::array<std::string, kValueClasses>& { return d.expr[static_cast<int>(o)]; };
  op(Op::sign) = {"ember_sign({0})", "(({0} > 0) - ({0} < 0))", "(uint)({0} > 0u)", "{0}"};
  op(Op::round) = {"rintf({0})", "{0}", "{0}", "{0}"};  // halfway cases to even, as nearbyint
  op(Op::abs)[0] = "fabsf({0})";
  op(Op::floor)[0] = "floorf({0})";
  op(Op::ceil)[0] = "ceilf({0})";
  op(Op::trunc)[0] = "truncf({0})";
  op(Op::frac)[0] = "({0} - floorf({0}))";
  set_shader_math(d, fast_math,
                  {"expf({0})", "exp2f({0})", "sinf({0})", "cosf({0})", "tanf({0})", "sinhf({0})", "coshf({0})", "tanhf({0})"},
                  true);
  op(Op::fma)[0] = "fmaf({0}, {1}, {2})";

  // Memory: f32 elements are floats (no conversion on load or store); i32 int, u32/bool uint.
  const int cf = value_class(DType::f32), ci = value_class(DType::i32), cu = value_class(DType::u32),
            cb = value_class(DType::boolean);
  d.load_value[cf] = d.store_value[cf] = "{0}";
  const char* word = "reinterpret_cast<uint*>(&{mem}[{idx}])";
  for (int k = 0; k < kAtomicKinds; ++k) {
    const std::string fn = std::string("atomic") + kAtomicFunctions[k];
    const std::string cuda_fn = k == static_cast<int>(AtomicKind::exchange) ? "atomicExch" : fn;
    d.atomic[k][ci] = d.atomic[k][cu] = cuda_fn + "(&{mem}[{idx}], {val})";
    const std::string bool_fn = std::string(kBoolAtomicFunctions[k]) == "Exchange"
                                    ? "atomicExch" : std::string("atomic") + kBoolAtomicFunctions[k];
    d.atomic[k][cb] = "(" + bool_fn + "(&{mem}[{idx}], (uint)({val})) != 0u)";
    // and/or/xor of floats act on the words.
    d.atomic[k][cf] = "__uint_as_float(" + cuda_fn + "(" + word + ", __float_as_uint({val})))";
  }
  d.atomic[static_cast<int>(AtomicKind::add)][cf] = "atomicAdd(&{mem}[{idx}], {val})";
  d.atomic[static_cast<int>(AtomicKind::exchange)][cf] = "atomicExch(&{mem}[{idx}], {val})";
  d.atomic[static_cast<int>(AtomicKind::min)][cf] = "ember_atomic_cas_f32(&{mem}[{idx}], {val}, EmberFmin())";
  d.atomic[static_cast<int>(AtomicKind::max)][cf] = "ember_atomic_cas_f32(&{mem}[{idx}], {val}, EmberFmax())";

  d.barrier = "__syncthreads();";  // orders shared and global memory for the block
  d.group_shared_decl = "__shared__ {T} {name}[{n}];";
  d.group_shared_in_kernel = true;  // kernels share one translation unit: names are per kernel

  d.group_size = 256;
  d.kernel_open =
      "extern \"C\" __global__ void __launch_bounds__({group}) {name}(const EmberArgs<{nmem}, {nparams}> ember_a) {";
  d.local_mem_decl = "{T}* const m{i} = static_cast<{T}*>(ember_a.m[{i}]);";
  d.param_word = "ember_a.p[{i}]";
  d.threads_open =
      "const long long ember_t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
      "if (ember_t < ember_a.threads) {\n"
      "  const long long {tid} = ember_t;";
  // A grouped kernel runs one block per group, the groups' flat numbers along grid x.
  d.group_threads_open =
      "const long long ember_t = (long long)blockIdx.x * {group} + threadIdx.x;\n"
      "const int ember_g = (int)blockIdx.x;\n"
      "const int ember_l = (int)threadIdx.x;\n"
      "bool ember_in = ember_t < ember_a.threads;";
  return d;
}

}  // namespace

const Dialect& cuda_dialect(bool fast_math) {
  static const Dialect d = make_cuda(false), fast = make_cuda(true);
  return fast_math ? fast : d;
}

}  // namespace ember

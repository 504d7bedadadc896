// A target language for the C-like kernel printer (STYLE §7): type names, expression templates
// per op, memory access, atomics, statements and kernel framing. The printer (c_printer.h) knows
// no language; a new language is a new Dialect table plus, at most, a few template overrides.
//
// Templates are strings with named holes written `{key}`; braces around other text are kept,
// so C blocks can be written as is. Holes used: {0} {1} {2} operands; {T} a type name;
// {name} a variable or kernel name; {e} an expression; {i} a slot; {mem} {idx} {val} memory
// access; {begin} {end} {step} {cond} loops; {c} a condition; {tid} the flat thread id;
// {parallel} the condition for running a region on every thread (the printer's work estimate);
// {group} threads per workgroup and {nmem} the number of memories (GPU kernel framing).
#pragma once
#include <array>
#include <string>
#include <vector>

#include "core/ir/node.h"

namespace ember {

// Helper text a unit gets only when one of its kernels, or another gated text it gets, calls one
// of `callers` (each "name(").
struct GatedPrelude {
  std::vector<std::string> callers;
  std::string text;
};

// Operand classes that select an expression template: f32, i32, u32, bool.
enum class ValueClass : uint8_t { f, i, u, b };
constexpr int kValueClasses = 4;
constexpr int kDTypes = 5;          // DType::none .. DType::boolean
constexpr int kAtomicKinds = 7;     // AtomicKind::add .. AtomicKind::exchange
inline int value_class(DType t) {
  return t == DType::f32 ? 0 : t == DType::i32 ? 1 : t == DType::u32 ? 2 : 3;
}
inline int dtype_slot(DType t) { return static_cast<int>(t); }

struct Dialect {
  std::string name;      // "cpp", "cuda", "glsl", "hlsl"
  std::string prelude;   // includes and helper functions, once per translation unit
  // Added after the prelude only to units with a kernel that calls it (the cpp dialect's packed
  // contractions, codegen/cpu_gemm.h): parsing it for every program slowed small compiles.
  std::string contraction_prelude;
  // Added after those, in order, each only to units that call one of its callers (the GPU
  // dialects' math functions, codegen/shader_math.h: a shader gets the ones it uses).
  std::vector<GatedPrelude> gated_prelude;
  std::string comment = "// ";

  // Types.
  std::array<std::string, kDTypes> type;      // value type by DType ("" for none)
  std::array<std::string, kDTypes> mem_type;  // element type of a buffer holding the dtype
  std::string index_type;                     // flat thread ids and strides (64-bit on CPU)
  std::string index_from_i32;                 // {0}: an i32 dimension widened to index_type
  std::string i32_from_index;                 // {0}: a coordinate narrowed to i32
  // i32 add/sub/mul whose only users are memory addresses are computed in index_type: no
  // 32-bit wrap, so an address stays affine in a loop counter and the C compiler vectorizes
  // contiguous or strided loads instead of gathering. Differs from the interpreter only where
  // the i32 address arithmetic would overflow.
  bool wide_addresses = false;

  // Literals. Non-finite floats are printed as bitcast[u32][f32] of their word.
  std::string float_suffix = "f";
  std::string uint_suffix = "u";
  std::string true_literal = "true", false_literal = "false";

  // Expressions. expr[op][value_class(operand dtype)]; select uses its value operands' class.
  // An empty template means the op is not available for that class (an internal error).
  std::array<std::array<std::string, kValueClasses>, kOpCount> expr;
  std::array<std::array<std::string, kDTypes>, kDTypes> cast;     // [from][to], value conversion
  std::array<std::array<std::string, kDTypes>, kDTypes> bitcast;  // [from][to], same bits

  // Memory: elements are 32-bit words of mem_type; load_value / store_value convert an
  // element {0} to a value of the class and back (bool buffers hold 0/1 words).
  std::string load = "{mem}[{idx}]";
  std::string store = "{mem}[{idx}] = {val};";
  std::array<std::string, kValueClasses> load_value;
  std::array<std::string, kValueClasses> store_value;
  // atomic[kind][class]: an expression returning the old value; {mem} {idx} {val}.
  std::array<std::array<std::string, kValueClasses>, kAtomicKinds> atomic;
  // The same as a statement, for languages whose atomics are statements (HLSL's Interlocked*)
  // or need a loop (a compare-and-swap lowering of float atomics): it declares {name} of type
  // {T} holding the old value. Used instead of `atomic` where non-empty.
  std::array<std::array<std::string, kValueClasses>, kAtomicKinds> atomic_stmt;
  std::string barrier;   // workgroup barrier statement ("" where there is none)
  // Workgroups (kernels with a group; the CPU lowers them away first): a group buffer declared
  // where it appears, at the kernel body's top ({T}=mem_type, {name}, {n} words; {init} is
  // group_mem_zero when the buffer starts zeroed), and the thread's coordinate within its group
  // and its group's coordinate along IR axis {axis} ({xyz}: x for the last axis, then y, z).
  std::string group_mem_decl;
  // Group buffers are arrays of the thread running the whole group (workgroups lowered before
  // printing): atomics on them are plain read-modify-writes.
  bool group_mem_private = false;
  std::string group_mem_zero;
  std::string local_index;
  std::string group_index;
  // Native workgroups (a GPU runs each group as one workgroup; TargetInfo::lower_groups false):
  // group_threads_open, when non-empty, frames a grouped kernel instead of threads_open. It
  // defines ember_g (the flat group number, row-major over the grid of groups), ember_l (the
  // thread's flat number in its group, row-major over the group shape) and a mutable bool
  // ember_in (a real thread of the dispatch; the printer ands in "inside the kernel's shape")
  // for a group of {group} threads; it opens no scope. The printer guards the statements
  // between barriers with ember_in (threads outside the shape reach every barrier, as in the
  // interpreter) and declares the coordinates from ember_g / ember_l (local_index and
  // group_index name them). A group buffer is declared before kernel_open by group_shared_decl
  // ({T} {name} {n}); one that starts zeroed is zeroed in place by group_shared_zero ({name} {n}
  // {T} {group}), then a barrier. Kernels whose groups were lowered (no group left) still use
  // group_mem_decl and group_mem_private.
  std::string group_threads_open;
  std::string group_shared_decl;
  // group_shared_decl goes at the top of the kernel body instead of before kernel_open (a
  // language whose kernels share one translation unit: names are then per kernel).
  bool group_shared_in_kernel = false;
  std::string group_shared_zero;
  // A barrier after which storage-buffer writes made before it are visible to the group too
  // (used for barriers that such a write may precede; "" = `barrier`); {coherent} in
  // global_mem_decl is `coherent` in kernels with such barriers, "" otherwise.
  std::string barrier_buffers;
  std::string coherent;
  std::string decl_late = "{T} {name};";  // a value assigned later (inside a thread guard)
  // Layout staging (codegen/c_staging.h), before the threads: declares {name}, a {T} array of
  // {lanes} rows of {n} elements {stride} apart, row l column t = {mem}[{lanes} * ({begin} + t) + l].
  // Empty: loads are never staged.
  std::string stage_fill;

  // Statements.
  std::string decl_const = "const {T} {name} = {e};";  // an immutable value
  std::string decl_var = "{T} {name} = {e};";          // a mutable var
  std::string assign = "{name} = {e};";
  std::string expr_stmt = "{e};";                      // a value nobody reads (an atomic)
  std::string if_open = "if ({c}) {";
  std::string else_open = "} else {";
  std::string block_close = "}";
  // Loops count in {k} (wide, so a bound near INT32_MAX cannot wrap, as in the interpreter);
  // loop_counter declares the i32 counter {name} ({T}) at the top of the body. {cond} is one of
  // the three conditions; a dynamic step of 0 runs no iteration. loop_open may also use {end}.
  std::string loop_open = "for (int64_t {k} = {begin}; {cond}; {k} += {step}) {";
  std::string loop_counter = "const {T} {name} = (int32_t){k};";
  std::string loop_cond_up = "{k} < {end}";
  std::string loop_cond_down = "{k} > {end}";
  std::string loop_cond_dynamic = "({step} > 0 ? {k} < {end} : ({step} < 0 && {k} > {end}))";
  // Before a reduction loop (core/analysis/reductions.h): lets the compiler split it into SIMD
  // lanes. {clauses} is one reduction_clause per accumulator ({op}: + * min max, {name}).
  // Empty: no annotation.
  std::string reduction_loop;
  std::string reduction_clause;
  // {op} of an f32 sum when not "+": a reduction whose lanes start from -0.0 (Ember's sums start
  // there: core/ir/eval.h, reduce_start).
  std::string f32_add_reduction;
  // Put before the clauses of a reduction loop with more accumulators than vector registers (a
  // register tile, core/passes/tile_threads.h): iterations in order, so that the compiler
  // vectorizes across the accumulators instead of along the loop.
  std::string reduction_in_order;
  // A one-thread kernel's top-level reduction loop (a full reduction to a scalar) split into at
  // most kReductionChunks chunks that run in parallel, their partial results combined in chunk
  // order (the same result for any number of threads): opens the loop over chunks {c} < {n},
  // parallel when {parallel} holds (enough work in the whole loop). Empty: one thread.
  std::string chunk_loop_open;
  std::string break_stmt = "break;";
  std::string continue_stmt = "continue;";
  std::string thread_exit;   // ends the current thread early (break/continue outside any loop)

  // Kernel framing, in print order. Memories are named m<slot>, params p<slot>, the flat
  // thread id {tid}, coordinates c<axis>.
  std::string global_mem_decl;   // per memory, before the kernel: {i} {T}=mem_type
  // GPU languages declare the params outside the kernel (a push-constant block): params_open,
  // param_decl per param ({i}), params_close; {nmem} is the number of memories. "": none.
  std::string params_open, param_decl, params_close;
  int group_size = 0;            // threads per workgroup, {group} in kernel_open (0: CPU)
  std::string kernel_open;       // {name}; also {nmem} {nparams}: the kernel's memory and param counts
  std::string local_mem_decl;    // per memory, inside the kernel: {i} {T}=mem_type
  std::string param_word;        // the 32-bit word of param {i}; bitcast[u32][dtype] applied
  std::string threads_open;      // opens the per-thread scope defining {tid}; {parallel}
  std::string threads_close;
  // Optional rows x columns form for kernels of rank >= 2, replacing threads_open/close:
  // rows_open opens a (parallel) loop over `row` covering threads [begin, end) with rows of
  // {len} threads; cols_open opens a loop over `col` in [{lo}, {hi}) and defines {tid} (a row
  // may be split into edge and interior column ranges). Each is closed by block_close. Empty:
  // every kernel uses threads_open.
  std::string rows_open;
  std::string cols_open;
  std::string kernel_close = "}";
  // Contraction kernels (core/analysis/contraction.h) compute their sums with ember_gemm::run
  // (codegen/cpu_gemm.h, in the prelude) when a call runs all their threads, then the rest of
  // the body per element of each block of sums; the rows form stays for other calls.
  bool packed_contractions = false;
};

// C++17 with OpenMP for the CPU backend. Kernel ABI:
//   extern "C" void NAME(uint32_t* const* mem, const uint32_t* params, int64_t begin, int64_t end)
// runs threads [begin, end) of the row-major flattened kernel shape.
const Dialect& cpp_dialect();

// GLSL compute shaders (codegen/dialect_glsl.cpp), one shader per kernel with entry point main.
// Memories are storage buffers of 32-bit words at binding = memory slot; the flat thread id is
// gl_GlobalInvocationID.y * row + gl_GlobalInvocationID.x, guarded by `threads` (a dispatch
// larger than one grid row is split into a 2-D grid). `threads`, `row` and the param words come
// first in a push-constant block (Vulkan), in a storage buffer at binding = number of memories
// (params_in_buffer: more params than push constants hold), or in a std140 uniform block at
// uniform-buffer binding 0 (OpenGL).
struct GlslOptions {
  bool opengl = false;            // GL 4.5 core: `binding` without `set`, params in a uniform block
  bool float_atomic_add = false;  // native atomicAdd on floats (GL_EXT/GL_NV_shader_atomic_float)
  bool params_in_buffer = false;
  bool fast_math = false;  // the math ops as GLSL's builtins (codegen/shader_math.h)
};
const Dialect& glsl_dialect(const GlslOptions& options = {});
// The push-constant / params-buffer layout shared by the GLSL and HLSL dialects: words before
// the first param.
constexpr int kGpuHeaderWords = 2;   // threads, row

// HLSL compute shaders for Vulkan (codegen/dialect_hlsl.cpp): [[vk::binding(i, 0)]]
// RWStructuredBuffers, params in a [[vk::push_constant]] block, atomics as Interlocked*
// statements (floats by compare-and-swap). Entry point: the kernel's symbol. Same layout as GLSL.
// `d3d11`: Shader Model 5.0 for D3D11/Unity (em.export): register(u<i>) buffers and the params
// in `cbuffer EmberParams : register(b0)`, no vk:: attributes (backends/kernel_abi.h).
// `fast_math`: the math ops as HLSL's builtins (codegen/shader_math.h).
const Dialect& hlsl_dialect(bool params_in_buffer = false, bool d3d11 = false, bool fast_math = false);

// CUDA C++ for NVRTC (codegen/dialect_cuda.cpp): every kernel `extern "C" __global__` taking one
// EmberArgs<memories, params> by value (device pointers, int64 thread count, param words), run on
// an exact 1-D grid of group_size-thread blocks (a grouped kernel: one block per group).
// `fast_math`: the math ops as CUDA's builtins (expf, sinf, ...; codegen/shader_math.h).
const Dialect& cuda_dialect(bool fast_math = false);

}  // namespace ember

// A target language for the C-like kernel printer (STYLE §7): type names, expression templates
// per op, memory access, atomics, statements and kernel framing. The printer (c_printer.h) knows
// no language; a new language is a new Dialect table plus, at most, a few template overrides.
//
// Templates are strings with named holes written `{key}`; braces around other text are kept,
// so C blocks can be written as is. Holes used: {0} {1} {2} operands; {T} a type name;
// {name} a variable or kernel name; {e} an expression; {i} a slot; {mem} {idx} {val} memory
// access; {begin} {end} {step} {cond} loops; {c} a condition; {tid} the flat thread id;
// {threshold} a serial-below thread count.
#pragma once
#include <array>
#include <string>

#include "core/ir/node.h"

namespace ember {

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
  std::string comment = "// ";

  // Types.
  std::array<std::string, kDTypes> type;      // value type by DType ("" for none)
  std::array<std::string, kDTypes> mem_type;  // element type of a buffer holding the dtype
  std::string index_type;                     // flat thread ids and strides (64-bit on CPU)
  std::string index_from_i32;                 // {0}: an i32 dimension widened to index_type
  std::string i32_from_index;                 // {0}: a coordinate narrowed to i32

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
  std::string barrier;   // workgroup barrier statement ("" where there is none)

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
  // the three conditions; a dynamic step of 0 runs no iteration.
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
  std::string break_stmt = "break;";
  std::string continue_stmt = "continue;";
  std::string thread_exit;   // ends the current thread early (break/continue outside any loop)

  // Kernel framing, in print order. Memories are named m<slot>, params p<slot>, the flat
  // thread id {tid}, coordinates c<axis>.
  std::string global_mem_decl;   // per memory, before the kernel: {i} {T}=mem_type
  std::string kernel_open;       // {name}
  std::string local_mem_decl;    // per memory, inside the kernel: {i} {T}=mem_type
  std::string param_word;        // the 32-bit word of param {i}; bitcast[u32][dtype] applied
  std::string threads_open;      // opens the per-thread scope defining {tid}; {threshold}
  std::string threads_close;
  std::string kernel_close = "}";
};

// C++17 with OpenMP for the CPU backend. Kernel ABI:
//   extern "C" void NAME(uint32_t* const* mem, const uint32_t* params, int64_t begin, int64_t end)
// runs threads [begin, end) of the row-major flattened kernel shape.
const Dialect& cpp_dialect();

}  // namespace ember

// Element types. Every tensor element is one 32-bit word on every device; a dtype says how the
// bits are read. `none` is the type of nodes that produce no value (store, set, scopes).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace ember {

enum class DType : uint8_t { none, f32, i32, u32, boolean };

const char* dtype_name(DType t);          // "f32", "i32", "u32", "bool", "none"
inline bool is_float(DType t) { return t == DType::f32; }
inline bool is_int(DType t) { return t == DType::i32 || t == DType::u32; }

// Bit views of a 32-bit word.
inline uint32_t f2w(float f) { uint32_t w; std::memcpy(&w, &f, 4); return w; }
inline float w2f(uint32_t w) { float f; std::memcpy(&f, &w, 4); return f; }
inline uint32_t i2w(int32_t i) { return static_cast<uint32_t>(i); }
inline int32_t w2i(uint32_t w) { return static_cast<int32_t>(w); }

// NumPy-like promotion for binary arithmetic: f32 > i32 > u32 > bool.
DType promote(DType a, DType b);

}  // namespace ember

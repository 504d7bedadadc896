// NumPy .npy files (format versions 1.0-3.0) holding little-endian f4, i4, u4 or bool (b1)
// arrays in C order: read into / written from 32-bit words, the layout of Ember buffers
// (a bool is one word, 0 or 1).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace runner {

enum class DType { f32, i32, u32, boolean };

// "f32" | "i32" | "u32" | "bool" -> DType; throws std::runtime_error naming `what` otherwise.
DType dtype_from_name(const std::string& name, const std::string& what);
const char* dtype_name(DType t);

struct NpyArray {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint32_t> words;  // one per element
};

// Reads `path`; throws std::runtime_error with the path and the problem (not .npy, big-endian,
// unsupported dtype, Fortran order, truncated data).
NpyArray read_npy(const std::string& path);

// Writes `a` to `path` (version 1.0 header); throws std::runtime_error on I/O errors.
void write_npy(const std::string& path, const NpyArray& a);

}  // namespace runner

// Small definitions shared by the IR headers: dtype names, promotion, error helpers.
#include <string>

#include "core/ir/dtype.h"
#include "core/ir/error.h"

namespace ember {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::none: return "none";
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::u32: return "u32";
    case DType::boolean: return "bool";
  }
  return "?";
}

DType promote(DType a, DType b) {
  auto rank = [](DType t) { return t == DType::f32 ? 3 : t == DType::i32 ? 2 : t == DType::u32 ? 1 : 0; };
  return rank(a) >= rank(b) ? a : b;
}

std::string with_loc(const std::string& msg, const SourceLoc& loc) {
  return loc.known() ? msg + " (at " + loc.str() + ")" : msg;
}

void throw_internal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError("internal error at " + std::string(file) + ":" + std::to_string(line) +
                      ": check '" + cond + "' failed: " + msg);
}

}  // namespace ember

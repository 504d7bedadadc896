// Small definitions shared by the IR headers: dtype names, promotion, error helpers.
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

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

namespace {
// The intern table of SourceLoc file names: index -> name (a deque never moves its strings) and
// name -> index. Guarded by a mutex: codegen threads read names while the tracer adds them.
struct FileTable {
  std::mutex mu;
  std::deque<std::string> names{std::string()};
  std::unordered_map<std::string, uint32_t> index{{std::string(), 0u}};
};
FileTable& file_table() {
  static FileTable* t = new FileTable;  // never destroyed: locations may be read during exit
  return *t;
}
}  // namespace

SourceLoc::SourceLoc(const std::string& file, int line_) : line(line_) {
  if (file.empty()) return;
  FileTable& t = file_table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto [it, added] = t.index.emplace(file, static_cast<uint32_t>(t.names.size()));
  if (added) t.names.push_back(file);
  file_ = it->second;
}

const std::string& SourceLoc::file() const {
  FileTable& t = file_table();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.names[file_];
}

std::string with_loc(const std::string& msg, const SourceLoc& loc) {
  return loc.known() ? msg + " (at " + loc.str() + ")" : msg;
}

void throw_internal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError("internal error at " + std::string(file) + ":" + std::to_string(line) +
                      ": check '" + cond + "' failed: " + msg);
}

}  // namespace ember

// .npy reader and writer for npy.h: the header is a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded to a 64-byte boundary.
#include "npy.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace runner {

DType dtype_from_name(const std::string& name, const std::string& what) {
  if (name == "f32") return DType::f32;
  if (name == "i32") return DType::i32;
  if (name == "u32") return DType::u32;
  if (name == "bool") return DType::boolean;
  throw std::runtime_error(what + ": unknown dtype \"" + name + "\" (expected f32, i32, u32 or bool)");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::u32: return "u32";
    case DType::boolean: return "bool";
  }
  return "?";
}

namespace {

const char kMagic[] = "\x93NUMPY";

[[noreturn]] void bad(const std::string& path, const std::string& msg) {
  throw std::runtime_error(path + ": " + msg);
}

// The text after `'key':` in the header dict, up to the next top-level comma or the end.
std::string header_field(const std::string& h, const std::string& key, const std::string& path) {
  const size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) bad(path, "the .npy header has no '" + key + "'");
  size_t p = h.find(':', k);
  if (p == std::string::npos) bad(path, "malformed .npy header");
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  size_t e = p;
  if (h[p] == '(') e = h.find(')', p) + 1;
  else
    while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
  return h.substr(p, e - p);
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) bad(path, "cannot open");
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (data.size() < 10 || data.compare(0, 6, kMagic, 6) != 0) bad(path, "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(data[6]);
  size_t header_len, off;
  if (major == 1) {
    header_len = static_cast<unsigned char>(data[8]) | (static_cast<unsigned char>(data[9]) << 8);
    off = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) bad(path, "truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= size_t(static_cast<unsigned char>(data[8 + i])) << (8 * i);
    off = 12;
  } else {
    bad(path, "unsupported .npy format version " + std::to_string(major));
  }
  if (data.size() < off + header_len) bad(path, "truncated .npy header");
  const std::string h = data.substr(off, header_len);
  off += header_len;

  std::string descr = header_field(h, "descr", path);
  if (descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"')) descr = descr.substr(1, descr.size() - 2);
  NpyArray a;
  int item = 4;
  if (descr == "<f4") a.dtype = DType::f32;
  else if (descr == "<i4") a.dtype = DType::i32;
  else if (descr == "<u4") a.dtype = DType::u32;
  else if (descr == "|b1") a.dtype = DType::boolean, item = 1;
  else
    bad(path, "unsupported dtype '" + descr + "' (the runner reads little-endian float32, int32, uint32 and bool; "
              "convert with .astype(np.float32) etc.)");
  if (header_field(h, "fortran_order", path) != "False") bad(path, "Fortran-order arrays are not supported (save np.ascontiguousarray(a))");

  const std::string shape = header_field(h, "shape", path);
  int64_t count = 1;
  for (size_t p = 0; p < shape.size();) {
    if (shape[p] >= '0' && shape[p] <= '9') {
      size_t e = p;
      while (e < shape.size() && shape[e] >= '0' && shape[e] <= '9') ++e;
      a.shape.push_back(std::stoll(shape.substr(p, e - p)));
      count *= a.shape.back();
      p = e;
    } else {
      ++p;
    }
  }
  if (count > (int64_t(1) << 31) - 1) bad(path, "more than 2^31 - 1 elements");
  if (data.size() - off < size_t(count) * item)
    bad(path, "truncated data: " + std::to_string(count) + " elements need " + std::to_string(count * item) +
                  " bytes, the file has " + std::to_string(data.size() - off));
  a.words.resize(count);
  if (item == 4) std::memcpy(a.words.data(), data.data() + off, count * 4);  // little-endian host assumed
  else
    for (int64_t i = 0; i < count; ++i) a.words[i] = data[off + i] != 0;
  return a;
}

void write_npy(const std::string& path, const NpyArray& a) {
  const char* descr = a.dtype == DType::f32 ? "<f4" : a.dtype == DType::i32 ? "<i4" : a.dtype == DType::u32 ? "<u4" : "|b1";
  std::ostringstream shape;
  shape << "(";
  for (size_t i = 0; i < a.shape.size(); ++i) shape << a.shape[i] << (a.shape.size() == 1 ? "," : i + 1 < a.shape.size() ? ", " : "");
  shape << ")";
  std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape.str() + ", }";
  const size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) bad(path, "cannot create");
  f.write(kMagic, 6);
  const char ver[2] = {1, 0};
  f.write(ver, 2);
  const char len[2] = {char(h.size() & 255), char(h.size() >> 8)};
  f.write(len, 2);
  f << h;
  if (a.dtype == DType::boolean) {
    std::string bytes(a.words.size(), '\0');
    for (size_t i = 0; i < a.words.size(); ++i) bytes[i] = a.words[i] != 0;
    f << bytes;
  } else {
    f.write(reinterpret_cast<const char*>(a.words.data()), a.words.size() * 4);
  }
  if (!f) bad(path, "write failed");
}

}  // namespace runner

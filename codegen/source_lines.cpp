#include "codegen/source_lines.h"

#include <fstream>
#include <map>
#include <mutex>
#include <vector>

namespace ember {

namespace {

// The lines of `path` (empty when it cannot be read), read once per process.
const std::vector<std::string>& file_lines(const std::string& path) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::vector<std::string>>;  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(path);
  if (it != cache->end()) return it->second;
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return cache->emplace(path, std::move(lines)).first->second;
}

std::string clean(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\\");
  std::string out;
  for (size_t i = b; i <= e && e != std::string::npos; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    out += c == '\t' ? ' ' : (c < 0x20 || c >= 0x7f) ? '?' : static_cast<char>(c);
  }
  return out;
}

}  // namespace

std::string source_comment(const SourceLoc& loc) {
  if (!loc.known()) return "";
  const std::string& file = loc.file();
  const size_t slash = file.find_last_of('/');
  std::string out = (slash == std::string::npos ? file : file.substr(slash + 1)) + ":" + std::to_string(loc.line);
  const std::vector<std::string>& lines = file_lines(file);
  if (loc.line <= static_cast<int>(lines.size())) {
    const std::string text = clean(lines[static_cast<size_t>(loc.line - 1)]);
    if (!text.empty()) out += ": " + text;
  }
  return out;
}

}  // namespace ember

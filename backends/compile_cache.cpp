#include "backends/compile_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "core/ir/error.h"

namespace ember {

namespace fs = std::filesystem;

namespace {

// Format of `.sum` files; bump to invalidate every disk entry.
constexpr const char* kSumHeader = "ember-cache-sum 1";

uint64_t fnv1a64(std::string_view s, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  // Final avalanche (splitmix64) so nearby inputs differ in every output bit.
  h ^= h >> 30; h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27; h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

struct MemoryCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<void>> entries;
  std::unordered_map<std::string, std::unique_ptr<std::mutex>> key_mutexes;
};
MemoryCache& memory() {
  static MemoryCache* c = new MemoryCache;  // never destroyed: artifacts may outlive statics
  return *c;
}

// A suffix no other call in this or another live process produces.
std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return std::to_string(::getpid()) + "." +
         std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()) % 1000000) + "." +
         std::to_string(counter.fetch_add(1));
}

std::string sum_text(const std::string& bytes) {
  return std::string(kSumHeader) + "\n" + content_hash(bytes) + " " + std::to_string(bytes.size()) + "\n";
}

}  // namespace

std::string content_hash(std::string_view data) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(fnv1a64(data, 0)),
                static_cast<unsigned long long>(fnv1a64(data, 0x9e3779b97f4a7c15ull)));
  return buf;
}

std::string cache_dir() {
  std::string dir;
  if (const char* e = std::getenv("EMBER_CACHE_DIR"); e && *e) {
    dir = e;
  } else {
    const char* home = std::getenv("HOME");
    dir = std::string(home && *home ? home : "/tmp") + "/.cache/ember";
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir))
    throw BackendError("ember: cannot create the compile cache directory '" + dir + "' (set EMBER_CACHE_DIR)");
  return dir;
}

std::shared_ptr<void> memory_cache_get(const std::string& key) {
  MemoryCache& c = memory();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.entries.find(key);
  return it == c.entries.end() ? nullptr : it->second;
}

void memory_cache_put(const std::string& key, std::shared_ptr<void> artifact) {
  MemoryCache& c = memory();
  std::lock_guard<std::mutex> lock(c.mu);
  c.entries[key] = std::move(artifact);
}

void memory_cache_clear() {
  MemoryCache& c = memory();
  std::unordered_map<std::string, std::shared_ptr<void>> dropped;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    dropped.swap(c.entries);
  }
  // Artifacts are released here, outside the lock (unloading may take a while).
}

std::mutex& cache_key_mutex(const std::string& key) {
  MemoryCache& c = memory();
  std::lock_guard<std::mutex> lock(c.mu);
  auto& m = c.key_mutexes[key];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

std::string disk_entry_path(const std::string& key, const std::string& ext) { return cache_dir() + "/" + key + "." + ext; }

bool disk_entry_check(const std::string& key, const std::string& ext) {
  std::string path = disk_entry_path(key, ext);
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  std::string bytes, sum;
  if (read_file(path, bytes) && read_file(disk_entry_path(key, "sum"), sum) && sum == sum_text(bytes)) return true;
  disk_entry_remove(key, ext);
  return false;
}

void disk_entry_commit(const std::string& key, const std::string& ext, const std::string& tmp_path) {
  std::string bytes;
  if (!read_file(tmp_path, bytes)) throw BackendError("ember: cannot read the compiled artifact '" + tmp_path + "'");
  std::string path = disk_entry_path(key, ext);
  std::error_code ec;
  fs::rename(tmp_path, path, ec);
  if (ec) throw BackendError("ember: cannot move '" + tmp_path + "' to '" + path + "': " + ec.message());
  write_file_atomic(disk_entry_path(key, "sum"), sum_text(bytes));
}

void disk_entry_remove(const std::string& key, const std::string& ext) {
  std::error_code ec;
  fs::remove(disk_entry_path(key, ext), ec);
  fs::remove(disk_entry_path(key, "sum"), ec);
}

std::string cache_temp_path(const std::string& key, const std::string& suffix) {
  return cache_dir() + "/" + key + ".tmp." + unique_suffix() + suffix;
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp." + unique_suffix();
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw BackendError("ember: cannot write '" + tmp + "'");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw BackendError("ember: cannot write '" + path + "'");
  }
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream os;
  os << f.rdbuf();
  if (f.bad()) return false;
  out = os.str();
  return true;
}

}  // namespace ember

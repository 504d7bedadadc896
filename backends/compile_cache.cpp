#include "backends/compile_cache.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <list>
#include <set>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/ir/error.h"
#include "core/support/hash.h"
#include "core/support/log.h"

namespace ember {

namespace fs = std::filesystem;

namespace {

// Format of `.sum` files; bump to invalidate every disk entry. Version 2 names the entry's key,
// so an artifact copied under another key's name is never trusted.
constexpr const char* kSumHeader = "ember-cache-sum 2";
constexpr const char* kSumHeaderPrefix = "ember-cache-sum ";

// Temporary files of a compile that did not finish (a killed process) are removed when their
// process is gone and they are older than this, or when they are older than kStaleTempAny.
constexpr std::chrono::seconds kStaleTempDeadPid{10};
constexpr std::chrono::hours kStaleTempAny{1};

// The memory cache is an LRU list of at most memory_cache_capacity() entries: an evicted
// artifact is released (dlclose'd, its pipeline destroyed) once no compiled program uses it.
struct MemoryCache {
  std::mutex mu;
  std::list<std::pair<std::string, std::shared_ptr<void>>> lru;  // most recently used first
  std::unordered_map<std::string, decltype(lru)::iterator> entries;
  std::mutex key_mutexes[64];  // striped by key hash: a fixed set, whatever the number of keys
  std::mutex warn_mu;
  bool warned_unwritable = false;
  std::set<std::string> swept;  // directories whose stale temporary files were removed
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

std::string sum_text(const std::string& key, const std::string& bytes) {
  return std::string(kSumHeader) + "\n" + key + "\n" + content_hash(bytes) + " " + std::to_string(bytes.size()) + "\n";
}

void warn(const std::string& msg) { log_message(LogLevel::warning, msg); }

// Removes `<name>.tmp.<pid>.*` files left by a compile whose process died (or very old ones);
// those of a live process are another compile in progress and are left alone.
void sweep_stale_temps(const std::string& dir) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t at = name.find(".tmp.");
    if (at == std::string::npos) continue;
    std::error_code e2;
    const auto mtime = fs::last_write_time(it->path(), e2);
    if (e2) continue;
    const auto age = now - mtime;
    long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
    const bool dead = pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    if ((dead && age > kStaleTempDeadPid) || age > kStaleTempAny) fs::remove(it->path(), e2);
  }
}

}  // namespace

std::string content_hash(std::string_view data) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(fnv1a64_mixed(data)),
                static_cast<unsigned long long>(fnv1a64_mixed(data, kFnvOffset ^ 0x9e3779b97f4a7c15ull)));
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
  fs::create_directories(dir, ec);  // a failure shows when the cache is written (cache_unwritable)
  MemoryCache& c = memory();
  bool sweep;
  {
    std::lock_guard<std::mutex> lock(c.warn_mu);
    sweep = c.swept.insert(dir).second;
  }
  if (sweep && fs::is_directory(dir, ec)) sweep_stale_temps(dir);
  return dir;
}

void cache_unwritable(const std::string& reason) {
  MemoryCache& c = memory();
  {
    std::lock_guard<std::mutex> lock(c.warn_mu);
    if (c.warned_unwritable) return;
    c.warned_unwritable = true;
  }
  warn("the compile cache cannot be written (" + reason + "); kernels are compiled without saving them to disk "
       "(set EMBER_CACHE_DIR to a writable directory with free space)");
}

size_t memory_cache_capacity() {
  static const size_t n = [] {
    const char* e = std::getenv("EMBER_MEMORY_CACHE_ENTRIES");
    long v = e && *e ? std::atol(e) : 0;
    return v > 0 ? static_cast<size_t>(v) : size_t{128};
  }();
  return n;
}

size_t memory_cache_size() {
  MemoryCache& c = memory();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.entries.size();
}

std::shared_ptr<void> memory_cache_get(const std::string& key) {
  MemoryCache& c = memory();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.entries.find(key);
  if (it == c.entries.end()) return nullptr;
  c.lru.splice(c.lru.begin(), c.lru, it->second);
  return it->second->second;
}

void memory_cache_put(const std::string& key, std::shared_ptr<void> artifact) {
  MemoryCache& c = memory();
  std::vector<std::shared_ptr<void>> evicted;  // released after the lock (unloading may take a while)
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.entries.find(key);
    if (it != c.entries.end()) {
      evicted.push_back(std::move(it->second->second));
      it->second->second = std::move(artifact);
      c.lru.splice(c.lru.begin(), c.lru, it->second);
    } else {
      c.lru.emplace_front(key, std::move(artifact));
      c.entries[key] = c.lru.begin();
    }
    while (c.entries.size() > memory_cache_capacity()) {
      evicted.push_back(std::move(c.lru.back().second));
      c.entries.erase(c.lru.back().first);
      c.lru.pop_back();
    }
  }
}

void memory_cache_clear() {
  MemoryCache& c = memory();
  std::list<std::pair<std::string, std::shared_ptr<void>>> dropped;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    dropped.swap(c.lru);
    c.entries.clear();
  }
  // Artifacts are released here, outside the lock (unloading may take a while).
}

std::mutex& cache_key_mutex(const std::string& key) {
  return memory().key_mutexes[std::hash<std::string>()(key) % 64];
}

std::string disk_entry_path(const std::string& key, const std::string& ext) { return cache_dir() + "/" + key + "." + ext; }

bool disk_entry_check(const std::string& key, const std::string& ext) {
  std::string bytes;
  return disk_entry_read(key, ext, bytes);
}

bool disk_entry_read(const std::string& key, const std::string& ext, std::string& bytes) {
  std::string path = disk_entry_path(key, ext);
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  std::string sum;
  const bool read = read_file(path, bytes);
  const bool has_sum = read_file(disk_entry_path(key, "sum"), sum);
  if (read && has_sum && sum == sum_text(key, bytes)) return true;
  const char* why = !read ? "unreadable"
                    : !has_sum ? "no checksum file"
                    : sum.rfind(kSumHeaderPrefix, 0) == 0 && sum.rfind(kSumHeader, 0) != 0
                        ? "written by another Ember version"
                        : "checksum mismatch: truncated, corrupt or not this key's";
  disk_entry_corrupt(key, ext, why);
  return false;
}

void disk_entry_corrupt(const std::string& key, const std::string& ext, const std::string& why) {
  warn("compile cache entry '" + disk_entry_path(key, ext) + "' is not usable (" + why + "); rebuilding it");
  disk_entry_remove(key, ext);
}

void disk_entry_commit(const std::string& key, const std::string& ext, const std::string& tmp_path) {
  std::string bytes;
  std::error_code ec;
  if (!read_file(tmp_path, bytes)) {
    fs::remove(tmp_path, ec);
    throw BackendError("ember: cannot read the compiled artifact '" + tmp_path + "'");
  }
  // The checksum goes first: a reader that sees the artifact also sees its checksum (two
  // processes building one entry write the same bytes, whichever rename comes last).
  try {
    write_file_atomic(disk_entry_path(key, "sum"), sum_text(key, bytes));
  } catch (...) {
    fs::remove(tmp_path, ec);
    throw;
  }
  std::string path = disk_entry_path(key, ext);
  fs::rename(tmp_path, path, ec);
  if (ec) {
    std::error_code e2;
    fs::remove(tmp_path, e2);
    throw BackendError("ember: cannot move '" + tmp_path + "' to '" + path + "': " + ec.message());
  }
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
    const int open_errno = f ? 0 : errno;
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    const int write_errno = errno;
    if (f) f.close();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      const int e = open_errno ? open_errno : write_errno;
      throw BackendError("ember: cannot write '" + tmp + "'" + (e ? std::string(": ") + std::strerror(e) : ""));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code e2;
    fs::remove(tmp, e2);
    throw BackendError("ember: cannot write '" + path + "': " + ec.message());
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

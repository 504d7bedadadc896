// The compile cache shared by all backends (DESIGN §4, STYLE §9): content hashing, a
// process-wide memory cache of loaded artifacts, and a disk cache in $EMBER_CACHE_DIR (default
// ~/.cache/ember) whose entries are written atomically and checked against a checksum on read.
// A disk entry is `<key>.<ext>` plus `<key>.sum`; a bad entry is deleted, never trusted.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace ember {

// 128-bit content hash (two FNV-1a 64 lanes with different seeds) as 32 hex digits.
std::string content_hash(std::string_view data);

// The cache directory, created if missing: $EMBER_CACHE_DIR, else ~/.cache/ember.
std::string cache_dir();

// Process-wide, thread-safe map from cache key to a loaded artifact (a dlopen handle, a
// pipeline...). Keys must include the backend name.
std::shared_ptr<void> memory_cache_get(const std::string& key);
void memory_cache_put(const std::string& key, std::shared_ptr<void> artifact);
// Drops every memory entry (tests use it to force the disk path).
void memory_cache_clear();

// A mutex per key, so one process builds a given entry once while others wait for it.
std::mutex& cache_key_mutex(const std::string& key);

// Disk entries. disk_entry_path is `<dir>/<key>.<ext>`.
std::string disk_entry_path(const std::string& key, const std::string& ext);
// Whether `<key>.<ext>` exists and matches `<key>.sum`; a mismatching or partial entry is
// removed (so it gets rebuilt) and false returned.
bool disk_entry_check(const std::string& key, const std::string& ext);
// Publishes a finished artifact: renames `tmp_path` to `<key>.<ext>`, then writes `<key>.sum`.
void disk_entry_commit(const std::string& key, const std::string& ext, const std::string& tmp_path);
// Removes `<key>.<ext>` and `<key>.sum`.
void disk_entry_remove(const std::string& key, const std::string& ext);

// A fresh temporary path in the cache directory (unique per process and call).
std::string cache_temp_path(const std::string& key, const std::string& suffix);
// Writes a file atomically (temporary file in the same directory, then rename).
void write_file_atomic(const std::string& path, const std::string& bytes);
// Reads a whole file; false when it cannot be read.
bool read_file(const std::string& path, std::string& out);

}  // namespace ember

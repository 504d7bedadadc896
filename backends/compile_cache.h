// The compile cache shared by all backends (DESIGN §4, STYLE §9): content hashing, a
// process-wide memory cache of loaded artifacts, and a disk cache in $EMBER_CACHE_DIR (default
// ~/.cache/ember) whose entries are written atomically and checked against a checksum on read.
// A disk entry is `<key>.<ext>` plus `<key>.sum`; a bad entry is deleted, never trusted.
#pragma once
#include <cstdint>
#include <memory>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

namespace ember {

// 128-bit content hash (two FNV-1a 64 lanes with different seeds) as 32 hex digits.
std::string content_hash(std::string_view data);

// The cache directory: $EMBER_CACHE_DIR, else ~/.cache/ember, created if missing (never throws:
// a directory that cannot be made or written shows when an entry is written, and callers then
// go on without the disk cache, see cache_unwritable). The first call per directory in a
// process removes the temporary files of compiles that died (their process is gone).
std::string cache_dir();
// Warns once per process on stderr that the disk cache cannot be written (`reason`); compiling
// goes on without it.
void cache_unwritable(const std::string& reason);

// Process-wide, thread-safe map from cache key to a loaded artifact (a dlopen handle, a
// pipeline...). Keys must include the backend name. It keeps the memory_cache_capacity() most
// recently used entries ($EMBER_MEMORY_CACHE_ENTRIES, default 128); an evicted artifact is
// released when the last compiled program using it goes.
std::shared_ptr<void> memory_cache_get(const std::string& key);
void memory_cache_put(const std::string& key, std::shared_ptr<void> artifact);
size_t memory_cache_capacity();
size_t memory_cache_size();
// Drops every memory entry (tests use it to force the disk path).
void memory_cache_clear();

// A mutex for the key (one of a fixed set), so one process builds a given entry once while
// others wait for it. Never hold two at once.
std::mutex& cache_key_mutex(const std::string& key);

// Disk entries. disk_entry_path is `<dir>/<key>.<ext>`.
std::string disk_entry_path(const std::string& key, const std::string& ext);
// Whether `<key>.<ext>` exists and matches `<key>.sum`; a mismatching or partial entry is
// removed with a warning (so it gets rebuilt) and false returned.
bool disk_entry_check(const std::string& key, const std::string& ext);
// disk_entry_check that also hands back the entry's bytes (read once) when it is good.
bool disk_entry_read(const std::string& key, const std::string& ext, std::string& bytes);
// Warns that `<key>.<ext>` is not usable (`why`: e.g. the loader rejected it) and removes it.
void disk_entry_corrupt(const std::string& key, const std::string& ext, const std::string& why);
// Publishes a finished artifact: writes `<key>.sum`, then renames `tmp_path` to `<key>.<ext>`.
// Throws BackendError (and removes `tmp_path`) when the directory cannot be written.
void disk_entry_commit(const std::string& key, const std::string& ext, const std::string& tmp_path);
// Removes `<key>.<ext>` and `<key>.sum`.
void disk_entry_remove(const std::string& key, const std::string& ext);

// A fresh temporary path in the cache directory (unique per process and call).
std::string cache_temp_path(const std::string& key, const std::string& suffix);
// Writes a file atomically (temporary file in the same directory, then rename); throws
// BackendError with the reason (no space, permission) when it cannot.
void write_file_atomic(const std::string& path, const std::string& bytes);
// Reads a whole file; false when it cannot be read.
bool read_file(const std::string& path, std::string& out);

}  // namespace ember

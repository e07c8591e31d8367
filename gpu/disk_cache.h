#pragma once
// Internal to gpu/: the files behind Dawn's blob cache (the load and store
// callbacks of DawnCacheDeviceDescriptor), i.e. wgnn's pipeline cache on
// disk. Dawn hands over opaque keys and values (compiled SPIR-V, the
// driver's VkPipelineCache data); each pair is one file:
//
//   <root>/pipelines-v1/<scope>/<XXH3-128 of the key>.blob
//
// <scope> is a hash of what may make a value stale (the Dawn library, the
// adapter and its driver, the wgnn binary; see Context), so a new one never
// reads an old entry. A file is a 32-byte header (magic, key and value
// sizes, XXH3-64 of sizes, key and value), the key, the value; anything
// that does not check out (truncated, garbled, another key) is a miss.
// Files are written atomically (no fsync: a lost entry is only a miss), the
// whole root/pipelines-v1 is kept under a size bound by removing the
// entries used least recently (a hit touches its file), and a folder that
// cannot be written is one warning, then no more stores.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace wgnn::gpu {

struct DiskCacheCounters {
  uint64_t loads = 0;         // keys Dawn looked up
  uint64_t hits = 0;          // of them found (and intact)
  uint64_t misses = 0;        // not there, or not intact
  uint64_t corrupt = 0;       // of the misses, files that did not check out
  uint64_t stores = 0;        // values Dawn handed over and were written
  uint64_t store_failures = 0;
  uint64_t evicted = 0;       // files removed to stay under the bound
  uint64_t loaded_bytes = 0, stored_bytes = 0;
};

class DiskCache {
 public:
  // `root`: the cache folder (util::cache_dir()); `scope`: the name of the
  // subfolder for this Dawn, driver and wgnn; `description`: what the scope
  // stands for, written beside the entries (SCOPE.txt) for people.
  DiskCache(std::string root, std::string scope, std::string description, uint64_t max_bytes);

  // Dawn's protocol: called with no buffer, returns the value's size (0: a
  // miss); called again with a buffer of that size, copies the value and
  // returns its size (0 if it changed meanwhile). Never throws.
  size_t load(const void* key, size_t key_size, void* value, size_t value_size) noexcept;
  void store(const void* key, size_t key_size, const void* value, size_t value_size) noexcept;

  // wgnn's own entries (a model's list of pipelines), in the same files,
  // bound and eviction as Dawn's, but outside Dawn's counters, which tell
  // what Dawn found. get() is false for a missing or damaged entry; put()
  // never throws (a failed write is a warning, as for Dawn's).
  bool get(std::string_view key, std::string* value) noexcept;
  void put(std::string_view key, std::string_view value) noexcept;

  DiskCacheCounters counters() const;
  const std::string& folder() const { return folder_; }
  uint64_t max_bytes() const { return max_bytes_; }

  // Entry files, for tests: the file of `key`, and the format's constants.
  std::string entry_path(const void* key, size_t key_size) const;
  static constexpr size_t kHeaderBytes = 32;

 private:
  bool read_entry(const std::string& path, const void* key, size_t key_size, std::string* value);
  // Writes one entry (under mutex_); false when writes are off or the entry
  // is over the bound. Throws on a failed write.
  bool write_entry(const void* key, size_t key_size, const void* value, size_t value_size);
  void warn_once(const std::string& message);
  void evict_if_needed();

  const std::string root_, folder_, description_;
  const uint64_t max_bytes_;
  mutable std::mutex mutex_;
  DiskCacheCounters counters_;
  // The value found by a size query, until Dawn asks for the bytes.
  std::map<std::string, std::string> held_;
  bool folder_ready_ = false, writes_off_ = false, warned_ = false, corrupt_warned_ = false;
  bool total_known_ = false;
  uint64_t total_bytes_ = 0;  // of every entry under root/pipelines-v1, as last counted plus stores since
};

// A short folder name for a scope description (16 hex digits of its hash).
std::string scope_name(const std::string& description);

// Parses WGNN_PIPELINE_CACHE_MAX_MB (a whole number of MiB, at least 1):
// bytes; anything else throws an Error naming the variable.
uint64_t parse_cache_max_mb(const char* text);

}  // namespace wgnn::gpu

#include "gpu/disk_cache.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "gpu/error.h"
#include "util/file.h"

namespace wgnn::gpu {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'W', 'G', 'N', 'N', 'B', 'L', 'B', '1'};
constexpr const char* kPipelinesDir = "pipelines-v1";
constexpr const char* kSuffix = ".blob";
// No entry Dawn writes comes near this; a header claiming more is garbage.
constexpr uint64_t kMaxEntryBytes = 1ull << 30;

uint64_t checksum(uint64_t key_size, uint64_t value_size, const void* key, const void* value) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &key_size, sizeof key_size);
  XXH3_64bits_update(&state, &value_size, sizeof value_size);
  XXH3_64bits_update(&state, key, size_t(key_size));
  XXH3_64bits_update(&state, value, size_t(value_size));
  return XXH3_64bits_digest(&state);
}

std::string key_name(const void* key, size_t key_size) {
  const XXH128_hash_t h = XXH3_128bits(key, key_size);
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

}  // namespace

std::string scope_name(const std::string& description) {
  return fmt::format("{:016x}", XXH3_64bits(description.data(), description.size()));
}

uint64_t parse_cache_max_mb(const char* text) {
  const std::string t(text);
  const bool digits = !t.empty() && t.size() <= 9 && t.find_first_not_of("0123456789") == std::string::npos;
  const uint64_t mb = digits ? std::stoull(t) : 0;
  if (mb < 1) {
    throw Error(fmt::format("WGNN_PIPELINE_CACHE_MAX_MB='{}': give the pipeline cache's size bound as a whole "
                            "number of MiB, at least 1 (default 256)",
                            t));
  }
  return mb << 20;
}

DiskCache::DiskCache(std::string root, std::string scope, std::string description, uint64_t max_bytes)
    : root_(std::move(root)),
      folder_(root_ + "/" + kPipelinesDir + "/" + scope),
      description_(std::move(description)),
      max_bytes_(max_bytes) {}

DiskCacheCounters DiskCache::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

std::string DiskCache::entry_path(const void* key, size_t key_size) const {
  return folder_ + "/" + key_name(key, key_size) + kSuffix;
}

void DiskCache::warn_once(const std::string& message) {
  if (warned_) return;
  warned_ = true;
  std::fprintf(stderr, "wgnn: warning: %s; the pipeline cache stores nothing more in this process\n",
               message.c_str());
}

bool DiskCache::read_entry(const std::string& path, const void* key, size_t key_size, std::string* value) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // not there (or unreadable): a miss
  std::string bytes;
  struct stat st{};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && uint64_t(st.st_size) >= kHeaderBytes &&
            uint64_t(st.st_size) <= kMaxEntryBytes + kHeaderBytes;
  if (ok) {
    try {
      bytes = util::read_all(fd, path, size_t(kMaxEntryBytes + kHeaderBytes));
    } catch (const Error&) {
      ok = false;
    }
  }
  ::close(fd);
  uint64_t ksz = 0, vsz = 0, sum = 0;
  if (ok && bytes.size() >= kHeaderBytes) {
    std::memcpy(&ksz, bytes.data() + 8, 8);
    std::memcpy(&vsz, bytes.data() + 16, 8);
    std::memcpy(&sum, bytes.data() + 24, 8);
  }
  ok = ok && bytes.size() >= kHeaderBytes && std::memcmp(bytes.data(), kMagic, 8) == 0 && ksz == key_size &&
       vsz <= kMaxEntryBytes && bytes.size() == kHeaderBytes + ksz + vsz && vsz > 0 &&
       std::memcmp(bytes.data() + kHeaderBytes, key, key_size) == 0 &&
       checksum(ksz, vsz, bytes.data() + kHeaderBytes, bytes.data() + kHeaderBytes + ksz) == sum;
  if (!ok) {
    // Truncated, garbled, or (with a 128-bit name, hardly) another key: a
    // miss; Dawn compiles again and the store replaces the file.
    ++counters_.corrupt;
    if (!corrupt_warned_) {
      corrupt_warned_ = true;
      std::fprintf(stderr, "wgnn: warning: ignoring the damaged pipeline cache entry %s\n", path.c_str());
    }
    return false;
  }
  value->assign(bytes, size_t(kHeaderBytes + ksz), size_t(vsz));
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // used now: the last to be evicted
  return true;
}

size_t DiskCache::load(const void* key, size_t key_size, void* value, size_t value_size) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string name = key_name(key, key_size);
    const std::string path = folder_ + "/" + name + kSuffix;
    if (value == nullptr || value_size == 0) {
      ++counters_.loads;
      std::string v;
      if (!read_entry(path, key, key_size, &v)) {
        ++counters_.misses;
        return 0;
      }
      ++counters_.hits;
      counters_.loaded_bytes += v.size();
      if (held_.size() >= 64) held_.clear();  // Dawn did not come back for some: drop them
      const size_t n = v.size();
      held_[name] = std::move(v);
      return n;
    }
    std::string v;
    if (auto it = held_.find(name); it != held_.end()) {
      v = std::move(it->second);
      held_.erase(it);
    } else if (!read_entry(path, key, key_size, &v)) {
      return 0;
    }
    if (v.size() != value_size) return 0;
    std::memcpy(value, v.data(), value_size);
    return value_size;
  } catch (...) {
    return 0;  // out of memory, most likely: a miss
  }
}

bool DiskCache::write_entry(const void* key, size_t key_size, const void* value, size_t value_size) {
  if (writes_off_ || value_size == 0 || value_size > kMaxEntryBytes) return false;
  const uint64_t entry_bytes = kHeaderBytes + key_size + value_size;
  if (entry_bytes > max_bytes_) return false;  // larger than the whole bound: not kept
  if (!folder_ready_) {
    std::error_code ec;
    fs::create_directories(folder_, ec);
    if (ec) {
      writes_off_ = true;
      ++counters_.store_failures;
      warn_once(fmt::format("cannot create the pipeline cache folder {}: {}", folder_, ec.message()));
      return false;
    }
    const std::string scope_file = folder_ + "/SCOPE.txt";
    if (!fs::exists(scope_file, ec)) util::write_file_atomic(scope_file, description_, util::Sync::No);
    folder_ready_ = true;
  }
  std::string bytes(kHeaderBytes, '\0');
  const uint64_t ksz = key_size, vsz = value_size, sum = checksum(ksz, vsz, key, value);
  std::memcpy(bytes.data(), kMagic, 8);
  std::memcpy(bytes.data() + 8, &ksz, 8);
  std::memcpy(bytes.data() + 16, &vsz, 8);
  std::memcpy(bytes.data() + 24, &sum, 8);
  bytes.append(static_cast<const char*>(key), key_size);
  bytes.append(static_cast<const char*>(value), value_size);
  // Under a file size limit a longer write is SIGXFSZ (the process dies)
  // unless the signal is ignored: never try one.
  rlimit r{};
  if (getrlimit(RLIMIT_FSIZE, &r) == 0 && r.rlim_cur != RLIM_INFINITY && bytes.size() > r.rlim_cur) {
    throw Error(fmt::format("a pipeline cache entry of {} bytes is over the file size limit (ulimit -f)",
                            bytes.size()));
  }
  const std::string path = entry_path(key, key_size);
  util::write_file_atomic(path, bytes, util::Sync::No);
  total_bytes_ += bytes.size();
  evict_if_needed();
  return true;
}

void DiskCache::store(const void* key, size_t key_size, const void* value, size_t value_size) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (write_entry(key, key_size, value, value_size)) {
      ++counters_.stores;
      counters_.stored_bytes += kHeaderBytes + key_size + value_size;
    }
  } catch (const std::exception& e) {
    writes_off_ = true;
    ++counters_.store_failures;
    warn_once(e.what());
  } catch (...) {
    writes_off_ = true;
    ++counters_.store_failures;
  }
}

bool DiskCache::get(std::string_view key, std::string* value) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    return read_entry(entry_path(key.data(), key.size()), key.data(), key.size(), value);
  } catch (...) {
    return false;
  }
}

void DiskCache::put(std::string_view key, std::string_view value) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    write_entry(key.data(), key.size(), value.data(), value.size());
  } catch (const std::exception& e) {
    writes_off_ = true;
    warn_once(e.what());
  } catch (...) {
    writes_off_ = true;
  }
}

void DiskCache::evict_if_needed() {
  if (total_known_ && total_bytes_ <= max_bytes_) return;
  // Count (and, over the bound, trim) every scope's entries: folders of an
  // old Dawn or driver age out the same way.
  struct Entry {
    fs::file_time_type time;
    uint64_t bytes;
    fs::path path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(fs::path(root_) / kPipelinesDir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it.depth() > 1) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec) || it->path().extension() != kSuffix) continue;
    const uint64_t size = it->file_size(ec);
    const auto time = it->last_write_time(ec);
    if (ec) {
      ec.clear();
      continue;  // removed meanwhile by another process
    }
    entries.push_back({time, size, it->path()});
    total += size;
  }
  total_known_ = true;
  total_bytes_ = total;
  if (total <= max_bytes_) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.time < b.time; });
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    if (fs::remove(e.path, ec)) {
      total -= e.bytes;
      ++counters_.evicted;
    }
  }
  total_bytes_ = total;
}

}  // namespace wgnn::gpu

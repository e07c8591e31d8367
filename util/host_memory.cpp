#include "util/host_memory.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace wgnn::util {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;

size_t mapped_length(size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }

thread_local size_t t_map_min = kHostMapMin;

// The blocks mapped below kHostMapMin (under a MapLargeBlocks), so that
// host_free knows them from malloc's: a block may be freed on another
// thread, or after the scope.
std::mutex g_mapped_mutex;
std::unordered_map<void*, size_t>& mapped_below() {
  static auto* m = new std::unordered_map<void*, size_t>();
  return *m;
}

}  // namespace

MapLargeBlocks::MapLargeBlocks(size_t min_bytes) : previous_(t_map_min) {
  t_map_min = std::min(t_map_min, std::max(min_bytes, kHugePage));
}
MapLargeBlocks::~MapLargeBlocks() { t_map_min = previous_; }

bool host_alloc_zeroed(size_t bytes) { return bytes >= t_map_min; }

void* host_alloc(size_t bytes) {
  if (bytes < t_map_min) {
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw std::bad_alloc();
    return p;
  }
  // Map a huge page more than asked, then unmap the parts before the first
  // 2 MiB boundary and after the block: the block starts on a huge page.
  const size_t len = mapped_length(bytes);
  if (len < bytes || len + kHugePage < len) throw std::bad_alloc();
  void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (base + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
  if (start > base) munmap(raw, start - base);
  const uintptr_t end = start + len, raw_end = base + len + kHugePage;
  if (raw_end > end) munmap(reinterpret_cast<void*>(end), raw_end - end);
  void* p = reinterpret_cast<void*>(start);
  // Advice only: where transparent huge pages are off, 4 KiB pages it is.
  (void)madvise(p, len, MADV_HUGEPAGE);
  if (bytes < kHostMapMin) {
    try {
      std::lock_guard<std::mutex> lock(g_mapped_mutex);
      mapped_below().emplace(p, bytes);
    } catch (...) {
      munmap(p, len);
      throw;
    }
  }
  return p;
}

void host_free(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (bytes >= kHostMapMin) {
    munmap(p, mapped_length(bytes));
    return;
  }
  if (bytes >= kHugePage) {
    std::lock_guard<std::mutex> lock(g_mapped_mutex);
    if (mapped_below().erase(p)) {
      munmap(p, mapped_length(bytes));
      return;
    }
  }
  std::free(p);
}

uint64_t minor_page_faults() noexcept {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return uint64_t(u.ru_minflt);
}

}  // namespace wgnn::util

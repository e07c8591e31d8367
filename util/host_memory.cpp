#include "util/host_memory.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdlib>

namespace wgnn::util {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;

size_t mapped_length(size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }

}  // namespace

void* host_alloc(size_t bytes) {
  if (bytes < kHostMapMin) {
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
  return p;
}

void host_free(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kHostMapMin) {
    std::free(p);
  } else {
    munmap(p, mapped_length(bytes));
  }
}

uint64_t minor_page_faults() noexcept {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return uint64_t(u.ru_minflt);
}

}  // namespace wgnn::util

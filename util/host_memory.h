#pragma once
// Host memory for tensors: no zero fill where the bytes are written anyway,
// and large blocks in huge pages. A first run's outputs, folded weights and
// staging copies are fresh memory; each 4 KiB page of it costs a page fault
// on first touch (2.4 us on a cloud VM: a 124 MB output zero-filled, then
// copied into, took 80-108 ms, against 15 ms into memory already touched).
// Without the zero fill, the faults are taken by the threads that write
// the bytes (util::copy_parallel: in parallel); in 2 MiB pages there are
// 512 times fewer of them (bench/host_memory_bench.cpp). Host only.
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace wgnn::util {

// Blocks of at least this many bytes are mapped on their own (mmap, 2 MiB
// aligned, MADV_HUGEPAGE) and come zeroed from the kernel; glibc maps such
// blocks on its own anyway (its mmap threshold grows to 32 MiB at most),
// so a loop that frees and allocates them again does not lose its reuse.
constexpr size_t kHostMapMin = size_t(32) << 20;

// `bytes` of host memory (malloc below the mapping threshold, not zeroed; a
// mapping from it on, zeroed). Throws std::bad_alloc when there is none.
void* host_alloc(size_t bytes);
void host_free(void* p, size_t bytes) noexcept;
// Whether host_alloc(bytes) comes zeroed (mapped), on this thread now.
bool host_alloc_zeroed(size_t bytes);

// Lowers the mapping threshold on this thread for a scope (at least 2 MiB):
// for memory that is allocated once and kept, such as a model's weights at
// load, where nothing would reuse glibc's freed blocks anyway. The
// threshold stays kHostMapMin elsewhere, so that a loop's outputs keep
// glibc's reuse.
class MapLargeBlocks {
 public:
  explicit MapLargeBlocks(size_t min_bytes = size_t(2) << 20);
  ~MapLargeBlocks();
  MapLargeBlocks(const MapLargeBlocks&) = delete;
  MapLargeBlocks& operator=(const MapLargeBlocks&) = delete;

 private:
  size_t previous_;
};

// A std::allocator over host_alloc whose value-initialisation of trivial
// types is a no-op: std::vector<T, HostAllocator<T>>(n) or resize(n) leaves
// the new elements as the memory had them (zero for a fresh mapping,
// anything otherwise). Code that needs zeros writes them.
template <typename T>
struct HostAllocator {
  using value_type = T;
  HostAllocator() noexcept = default;
  template <typename U>
  HostAllocator(const HostAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(host_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { host_free(p, n * sizeof(T)); }
  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;  // default-initialised: no zero fill for trivial types
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const HostAllocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const HostAllocator<U>&) const noexcept {
    return false;
  }
};

// The process's minor page faults so far (getrusage; every thread's):
// where a phase touched fresh memory.
uint64_t minor_page_faults() noexcept;

// A tensor's bytes on the host.
using HostBytes = std::vector<uint8_t, HostAllocator<uint8_t>>;

}  // namespace wgnn::util

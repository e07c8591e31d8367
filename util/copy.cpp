#include "util/copy.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string_view>
#include <thread>

#include "util/thread_pool.h"

namespace wgnn::util {
namespace {

int max_threads() {
  static const int n = int(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  return n;
}

// Made on the first parallel copy, never destroyed: a pool whose threads
// outlive main() would be joined during static destruction, when a copy
// may still be running in another static's destructor.
ThreadPool& pool() {
  static ThreadPool* p = new ThreadPool(max_threads() - 1);
  return *p;
}

void copy_range(const std::vector<CopyJob>& jobs, size_t from, size_t to) {
  // [from, to) in the concatenation of the jobs' bytes.
  size_t at = 0;
  for (const CopyJob& j : jobs) {
    const size_t lo = std::max(from, at), hi = std::min(to, at + j.bytes);
    if (lo < hi) {
      std::memcpy(static_cast<char*>(j.dst) + (lo - at), static_cast<const char*>(j.src) + (lo - at), hi - lo);
    }
    at += j.bytes;
    if (at >= to) break;
  }
}

}  // namespace

int copy_threads(size_t bytes) {
  if (bytes < kParallelCopyMin) return 1;
  return int(std::min<size_t>(size_t(max_threads()), bytes / kParallelCopyPart));
}

void copy_parallel(const std::vector<CopyJob>& jobs) {
  size_t total = 0;
  for (const CopyJob& j : jobs) total += j.bytes;
  copy_parallel(jobs, copy_threads(total));
}

void copy_parallel(const std::vector<CopyJob>& jobs, int threads) {
  size_t total = 0;
  for (const CopyJob& j : jobs) total += j.bytes;
  if (threads <= 1 || total == 0) {
    for (const CopyJob& j : jobs) {
      if (j.bytes) std::memcpy(j.dst, j.src, j.bytes);
    }
    return;
  }
  // Shares of ceil(total / threads) rounded up to 4 KiB (whole pages where
  // the jobs are page-aligned); the last share ends at `total`. Rounding
  // floor(total / threads) up instead lost the last total % threads bytes
  // whenever the floor was already a multiple of 4 KiB (8 MiB + 17 bytes
  // on 8 threads).
  const size_t t = size_t(threads);
  const size_t share = ((total + t - 1) / t + 4095) / 4096 * 4096;
  std::vector<std::future<void>> parts;
  for (size_t k = 1; k < t; ++k) {
    const size_t from = std::min(total, k * share), to = k + 1 == t ? total : std::min(total, from + share);
    if (from < to) parts.push_back(pool().submit([&jobs, from, to] { copy_range(jobs, from, to); }));
  }
  copy_range(jobs, 0, std::min(total, share));
  for (auto& p : parts) p.get();
}

}  // namespace wgnn::util

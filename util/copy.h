#pragma once
// Large host copies on several threads. One core copies 5-10 GB/s; a
// model's outputs out of mapped readback memory (ISNet's 124 MB at 1024)
// or a photo into an upload buffer then cost milliseconds a run. Host only.
#include <cstddef>
#include <vector>

namespace wgnn::util {

struct CopyJob {
  void* dst;
  const void* src;
  size_t bytes;
};

// Copies every job (none overlapping another), as memcpy would. Where they
// add up to kParallelCopyMin bytes or more, they are cut into parts of at
// least kParallelCopyPart and spread over the calling thread and a
// process-wide pool of up to 7 more (the machine's cores less one); else on
// the calling thread alone. WGNN_PARALLEL_COPY=0 in the environment copies
// on the calling thread always.
constexpr size_t kParallelCopyMin = size_t(4) << 20;
constexpr size_t kParallelCopyPart = size_t(1) << 20;
void copy_parallel(const std::vector<CopyJob>& jobs);

// The threads copy_parallel uses for a copy of `bytes` (1: the caller alone).
int copy_threads(size_t bytes);

}  // namespace wgnn::util

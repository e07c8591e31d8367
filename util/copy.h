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
// the calling thread alone. (The setting WGNN_PARALLEL_COPY=0 makes
// graph/ copy on the calling thread always: copy_parallel(jobs, 1).)
// The Whisper-base encoder's 3 MB output took 240 us on one core of the
// H200's host (12.7 GB/s) against a GPU time of 4.7 ms. 512 KiB and parts
// of 128 KiB: a 224 x 224 float32 image (602 KB) into
// its upload buffer, on the path of every run of the image models, takes
// four threads rather than one.
constexpr size_t kParallelCopyMin = size_t(512) << 10;
constexpr size_t kParallelCopyPart = size_t(128) << 10;
void copy_parallel(const std::vector<CopyJob>& jobs);

// The same on `threads` threads (the caller and the pool; 1 or less: the
// caller alone), whatever the size: for tests, whose machines differ in
// cores.
void copy_parallel(const std::vector<CopyJob>& jobs, int threads);

// The threads copy_parallel uses for a copy of `bytes` (1: the caller alone).
int copy_threads(size_t bytes);

}  // namespace wgnn::util

#pragma once
// Buffers made on a thread of their own while the caller goes on. A Session
// asks at load for the readback buffers its first run will need (their
// sizes kept with its pipeline list in the disk cache), so that the driver's
// allocation of host-visible memory (ISNet's 124 MB of outputs: 23-40 ms on
// the H200) overlaps recording instead of adding to the first run.
//
// Only on a device whose calls Dawn makes thread-safe (Features::
// thread_safe, implicit-device-synchronization); elsewhere a batch makes
// nothing and take() finds nothing, so the caller makes its own.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/context.h"

namespace wgnn::gpu {

class BufferBatch {
 public:
  // Starts making a buffer of each size with `usage` (labelled `label`).
  BufferBatch(Context& ctx, std::vector<uint64_t> sizes, uint64_t usage, std::string label);
  // Stops the thread after the buffer it is making (if any) and waits for
  // it; buffers not taken are freed.
  ~BufferBatch();
  BufferBatch(const BufferBatch&) = delete;
  BufferBatch& operator=(const BufferBatch&) = delete;

  // The smallest buffer of the batch holding `bytes` with `usage`, waiting
  // for the one being made if it may be it; an invalid Buffer when none
  // fits (or making it failed: the caller's own attempt then says why).
  Buffer take(uint64_t bytes, uint64_t usage);
  // Waits for the thread: how many it made, and its wall time in ms.
  size_t made();
  double ms();
  size_t taken() const;

 private:
  void work(std::vector<uint64_t> sizes, std::string label);
  Context& ctx_;
  const uint64_t usage_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Buffer> ready_;
  std::vector<uint64_t> pending_;  // sizes still to be made, in order
  size_t made_ = 0, taken_ = 0;
  double ms_ = 0;
  bool done_ = true, stop_ = false;
  std::thread thread_;
};

}  // namespace wgnn::gpu

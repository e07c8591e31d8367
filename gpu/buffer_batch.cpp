#include "gpu/buffer_batch.h"

#include <algorithm>
#include <chrono>

namespace wgnn::gpu {

BufferBatch::BufferBatch(Context& ctx, std::vector<uint64_t> sizes, uint64_t usage, std::string label)
    : ctx_(ctx), usage_(usage) {
  if (!ctx.features().thread_safe || sizes.empty()) return;
  // The largest first: the ones whose allocation costs most are ready soonest.
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  pending_ = sizes;
  done_ = false;
  thread_ = std::thread([this, sizes = std::move(sizes), label = std::move(label)]() mutable {
    work(std::move(sizes), std::move(label));
  });
}

BufferBatch::~BufferBatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void BufferBatch::work(std::vector<uint64_t> sizes, std::string label) {
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t bytes : sizes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) break;
    }
    Buffer b;
    try {
      b = ctx_.create_buffer_uncounted(bytes, usage_, label);
    } catch (const std::exception&) {
      // Out of memory, a lost device: the rest is left to the caller, whose
      // own attempt reports it.
      break;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.push_back(std::move(b));
    pending_.erase(pending_.begin());
    ++made_;
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.clear();
  done_ = true;
  ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  cv_.notify_all();
}

Buffer BufferBatch::take(uint64_t bytes, uint64_t usage) {
  if ((usage & ~usage_) != 0) return {};
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // The smallest ready one that fits.
    auto best = ready_.end();
    for (auto it = ready_.begin(); it != ready_.end(); ++it) {
      if (it->size() >= bytes && (best == ready_.end() || it->size() < best->size())) best = it;
    }
    // One still to be made that fits better (sizes are made largest first,
    // and create_buffer rounds up to 16 bytes): wait for it.
    const bool better_coming = std::any_of(pending_.begin(), pending_.end(), [&](uint64_t p) {
      const uint64_t size = std::max<uint64_t>(16, (p + 15) / 16 * 16);
      return size >= bytes && (best == ready_.end() || size < best->size());
    });
    if (!better_coming) {
      if (best == ready_.end()) return {};
      Buffer out = std::move(*best);
      ready_.erase(best);
      ++taken_;
      return out;
    }
    cv_.wait(lock);
  }
}

size_t BufferBatch::made() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  return made_;
}

double BufferBatch::ms() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  return ms_;
}

size_t BufferBatch::taken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return taken_;
}

}  // namespace wgnn::gpu

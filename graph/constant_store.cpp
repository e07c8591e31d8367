#include "graph/constant_store.h"

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace wgnn {

gpu::Buffer ConstantStore::acquire(const Shape& shape, DType dtype, const void* data, size_t bytes,
                                   const std::string& name, std::string* key) {
  const XXH128_hash_t h = XXH3_128bits(data, bytes);
  std::string k = fmt::format("{}{}:{}:{:016x}{:016x}", dtype_name(dtype), shape_str(shape), bytes, h.high64, h.low64);
  const uint64_t gpu_bytes = uint64_t(numel(shape)) * gpu_dtype_size(dtype);
  auto it = entries_.find(k);
  if (it != entries_.end()) {
    ++it->second.refs;
    ++stats_.reuses;
    stats_.reused_bytes += gpu_bytes;
    *key = std::move(k);
    return it->second.buffer;
  }
  Entry e;
  e.buffer = ctx_.create_buffer(gpu_bytes, gpu::kStorageUsage, name);
  if (gpu_dtype_size(dtype) == dtype_size(dtype)) {
    ctx_.write(e.buffer, data, bytes, 0);
  } else {
    const std::vector<uint8_t> gpu = to_gpu_layout(dtype, data, size_t(numel(shape)), name);
    ctx_.write(e.buffer, gpu.data(), gpu.size(), 0);
  }
  e.refs = 1;
  e.gpu_bytes = gpu_bytes;
  ++stats_.uploads;
  stats_.uploaded_bytes += gpu_bytes;
  stats_.bytes += gpu_bytes;
  ++stats_.entries;
  gpu::Buffer b = e.buffer;
  entries_.emplace(k, std::move(e));
  *key = std::move(k);
  return b;
}

void ConstantStore::release(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  if (--it->second.refs > 0) return;
  stats_.bytes -= it->second.gpu_bytes;
  --stats_.entries;
  entries_.erase(it);
}

}  // namespace wgnn

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
  if (auto it = entries_.find(k); it != entries_.end()) {
    *key = std::move(k);
    return reuse(it->second);
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
  e.shape = shape;
  e.dtype = dtype;
  ++stats_.uploads;
  stats_.uploaded_bytes += gpu_bytes;
  stats_.bytes += gpu_bytes;
  ++stats_.entries;
  gpu::Buffer b = e.buffer;
  entries_.emplace(k, std::move(e));
  *key = std::move(k);
  return b;
}

gpu::Buffer ConstantStore::acquire_memo(const std::string& memo, const MakeHost& make, const std::string& name,
                                        std::string* key) {
  if (auto m = memo_.find(memo); m != memo_.end()) {
    if (auto it = entries_.find(m->second); it != entries_.end()) {
      *key = m->second;
      ++stats_.memo_hits;
      return reuse(it->second);
    }
  }
  // One scratch tensor for every conversion, kept: its memory is touched
  // (page faults) once for the largest, not once per constant.
  const HostTensor& t = make(scratch_);
  gpu::Buffer b = acquire(t.shape, t.dtype, t.data.data(), t.data.size(), name, key);
  memo_[memo] = *key;
  return b;
}

const Shape& ConstantStore::shape_of(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) throw Error(fmt::format("ConstantStore: no constant '{}'", key));
  return it->second.shape;
}

DType ConstantStore::dtype_of(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) throw Error(fmt::format("ConstantStore: no constant '{}'", key));
  return it->second.dtype;
}

gpu::Buffer ConstantStore::reuse(Entry& e) {
  ++e.refs;
  ++stats_.reuses;
  stats_.reused_bytes += e.gpu_bytes;
  return e.buffer;
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

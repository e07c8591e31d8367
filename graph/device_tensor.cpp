#include "graph/device_tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "graph/half.h"

namespace wgnn {

void ensure_capacity(gpu::Context& ctx, DeviceTensor& t, uint64_t bytes, const std::string& label) {
  const uint64_t need = std::max<uint64_t>(16, (bytes + 15) / 16 * 16);
  if (t.buffer.valid() && t.buffer.size() >= need) return;
  const uint64_t grown = t.buffer.valid() ? std::max(need, t.buffer.size() * 2) : need;
  t.buffer = ctx.create_buffer(grown, gpu::kStorageUsage, label);
}

DeviceTensor to_device(gpu::Context& ctx, const HostTensor& t, const std::string& label) {
  DeviceTensor d;
  d.dtype = t.dtype;
  d.stored = t.dtype;
  d.shape = t.shape;
  const std::vector<uint8_t> gpu = to_gpu_layout(t.dtype, t.data.data(), size_t(t.numel()), label);
  ensure_capacity(ctx, d, gpu.size(), label.empty() ? "device tensor" : label);
  if (!gpu.empty()) ctx.write(d.buffer, gpu.data(), gpu.size());
  return d;
}

HostTensor to_host(gpu::Context& ctx, const DeviceTensor& t) {
  if (!t.valid()) throw Error("to_host: the device tensor has no storage");
  if (t.stored != t.dtype && !(t.dtype == DType::F16 && t.stored == DType::F32)) {
    throw Error(fmt::format("to_host: a {} tensor stored as {}", dtype_name(t.dtype), dtype_name(t.stored)));
  }
  HostTensor out(t.dtype, t.shape);
  const uint64_t bytes = t.gpu_bytes();
  if (bytes == 0) return out;
  std::vector<uint8_t> gpu((bytes + 3) / 4 * 4);
  ctx.read(t.buffer, gpu.data(), gpu.size());
  if (t.stored != t.dtype) {  // float16 values widened to float32
    HostTensor wide(DType::F32, t.shape);
    std::copy(gpu.begin(), gpu.begin() + int64_t(bytes), wide.data.begin());
    const float* src = wide.as<float>();
    uint16_t* dst = out.as<uint16_t>();
    for (size_t i = 0, n = size_t(t.numel()); i < n; ++i) dst[i] = float_to_half(src[i]);
    return out;
  }
  from_gpu_layout(t.dtype, gpu.data(), size_t(t.numel()), out.data.data());
  return out;
}

}  // namespace wgnn

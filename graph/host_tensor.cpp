#include "graph/host_tensor.h"

#include <fmt/format.h>

#include <atomic>

#include "gpu/error.h"
#include "graph/half.h"

namespace wgnn {

namespace {
std::atomic<uint64_t> g_host_tensor_limit{uint64_t(16) << 30};
}

uint64_t host_tensor_limit() { return g_host_tensor_limit.load(); }
void set_host_tensor_limit(uint64_t bytes) { g_host_tensor_limit.store(bytes); }

size_t HostTensor::checked_size(DType d, const Shape& s) {
  const uint64_t bytes = checked_nbytes(s, dtype_size(d), "host tensor");
  if (bytes > host_tensor_limit()) {
    throw Error(fmt::format("a host tensor {} {} would take {} bytes, over the limit of {} bytes "
                            "(wgnn::set_host_tensor_limit)",
                            dtype_name(d), shape_str(s), bytes, host_tensor_limit()));
  }
  return size_t(bytes);
}

double HostTensor::get_double(size_t i) const {
  switch (dtype) {
    case DType::F32: return as<float>()[i];
    case DType::F16: return half_to_float(as<uint16_t>()[i]);
    case DType::I32: return as<int32_t>()[i];
    case DType::I64: return double(as<int64_t>()[i]);
    case DType::Bool:
    case DType::U8: return as<uint8_t>()[i];
    case DType::I8: return as<int8_t>()[i];
  }
  return 0;
}

int64_t HostTensor::get_int(size_t i) const {
  switch (dtype) {
    case DType::I64: return as<int64_t>()[i];
    case DType::I32: return as<int32_t>()[i];
    case DType::Bool:
    case DType::U8: return as<uint8_t>()[i];
    case DType::I8: return as<int8_t>()[i];
    default: return int64_t(get_double(i));
  }
}

HostTensor to_f16_saturated(const HostTensor& t) {
  if (t.dtype != DType::F32) return t;
  HostTensor h(DType::F16, t.shape);
  const float* src = t.as<float>();
  uint16_t* dst = h.as<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = float_to_half_saturate(src[i]);
  return h;
}

}  // namespace wgnn

#include "graph/host_tensor.h"

#include "graph/half.h"

namespace wgnn {

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

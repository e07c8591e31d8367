#pragma once
// A tensor in host memory, in host layout (dtype_size bytes per element,
// row-major): what users pass in and get out, what .npy files and ONNX
// TensorProtos hold.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace wgnn {

struct HostTensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> data;

  HostTensor() = default;
  HostTensor(DType d, Shape s) : dtype(d), shape(std::move(s)), data(size_t(wgnn::numel(shape)) * dtype_size(d)) {}
  int64_t numel() const { return wgnn::numel(shape); }
  size_t nbytes() const { return data.size(); }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(data.data());
  }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data.data());
  }
  // Element i as double / int64, converting from the dtype (f16 included).
  double get_double(size_t i) const;
  int64_t get_int(size_t i) const;
};

// A float32 tensor as float16 (float_to_half_saturate: finite values beyond
// +-65504 saturate); any other dtype is returned unchanged.
HostTensor to_f16_saturated(const HostTensor& t);

}  // namespace wgnn

#pragma once
// Test helpers for tensors of any dtype: values held as doubles on the host
// (exact for float32, float16, int32, int64 in the int32 range and bool),
// converted to and from each dtype's host layout.
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "graph/graph.h"
#include "graph/half.h"

namespace wgnn {

// gtest prints a DType parameter by name.
inline void PrintTo(DType d, std::ostream* os) { *os << dtype_name(d); }

}  // namespace wgnn

namespace wgnn::test {

// Random values that `dtype` holds exactly: floats in [lo, hi] (rounded to
// float16 for F16), integers in [lo, hi], bools 0/1.
inline std::vector<double> random_values(size_t n, DType dtype, uint32_t seed, double lo = -100, double hi = 100) {
  std::mt19937 rng(seed);
  std::vector<double> v(n);
  for (auto& x : v) {
    switch (dtype) {
      case DType::F32: x = std::uniform_real_distribution<float>(float(lo), float(hi))(rng); break;
      case DType::F16:
        x = half_to_float(float_to_half(std::uniform_real_distribution<float>(float(lo), float(hi))(rng)));
        break;
      case DType::Bool: x = double(rng() & 1u); break;
      case DType::U8: x = double(rng() % 256u); break;
      default: x = double(std::uniform_int_distribution<int64_t>(int64_t(lo), int64_t(hi))(rng)); break;
    }
  }
  return v;
}

// Values -> host layout of `dtype`.
inline std::vector<uint8_t> to_host_bytes(DType dtype, const std::vector<double>& v) {
  std::vector<uint8_t> out(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    uint8_t* p = out.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::F32: { const float f = float(v[i]); std::memcpy(p, &f, 4); break; }
      case DType::F16: { const uint16_t h = float_to_half(float(v[i])); std::memcpy(p, &h, 2); break; }
      case DType::I32: { const auto k = int32_t(v[i]); std::memcpy(p, &k, 4); break; }
      case DType::I64: { const auto k = int64_t(v[i]); std::memcpy(p, &k, 8); break; }
      case DType::Bool: *p = v[i] != 0; break;
      case DType::U8: *p = uint8_t(v[i]); break;
      case DType::I8: *p = uint8_t(int8_t(v[i])); break;
    }
  }
  return out;
}

inline std::vector<double> from_host_bytes(DType dtype, const std::vector<uint8_t>& bytes) {
  const size_t n = bytes.size() / dtype_size(dtype);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = bytes.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::F32: { float f; std::memcpy(&f, p, 4); v[i] = f; break; }
      case DType::F16: { uint16_t h; std::memcpy(&h, p, 2); v[i] = half_to_float(h); break; }
      case DType::I32: { int32_t k; std::memcpy(&k, p, 4); v[i] = k; break; }
      case DType::I64: { int64_t k; std::memcpy(&k, p, 8); v[i] = double(k); break; }
      case DType::Bool: v[i] = *p; break;
      case DType::U8: v[i] = *p; break;
      case DType::I8: v[i] = int8_t(*p); break;
    }
  }
  return v;
}

inline TensorRef put(Graph& g, const Shape& shape, DType dtype, const std::vector<double>& v,
                     TensorKind kind = TensorKind::Input) {
  const std::vector<uint8_t> bytes = to_host_bytes(dtype, v);
  if (kind == TensorKind::Constant) return g.add_constant(shape, dtype, bytes.data());
  TensorRef t = g.add_tensor(shape, dtype, kind);
  g.write(t, bytes.data(), bytes.size());
  return t;
}

inline std::vector<double> get(Graph& g, TensorRef t) {
  const TensorInfo& ti = g.info(t);
  std::vector<uint8_t> bytes(ti.nbytes());
  g.read(t, bytes.data(), bytes.size());
  return from_host_bytes(ti.dtype, bytes);
}

// Row-major coordinates of flat index i in `shape`, and back.
inline std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> c(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    c[k] = i % shape[k];
    i /= shape[k];
  }
  return c;
}
inline int64_t ravel(const std::vector<int64_t>& c, const Shape& shape) {
  int64_t i = 0;
  for (size_t k = 0; k < shape.size(); ++k) i = i * shape[k] + c[k];
  return i;
}

}  // namespace wgnn::test

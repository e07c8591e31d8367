#pragma once
// IEEE binary16 on the host (Imath's half: round-to-nearest-even).
#include <Imath/half.h>

#include <cstdint>
#include <vector>

namespace wgnn {

inline uint16_t float_to_half(float f) { return Imath::half(f).bits(); }
inline float half_to_float(uint16_t h) {
  Imath::half v;
  v.setBits(h);
  return float(v);
}
inline std::vector<uint16_t> to_half(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = float_to_half(v[i]);
  return o;
}
inline std::vector<float> from_half(const std::vector<uint16_t>& v) {
  std::vector<float> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = half_to_float(v[i]);
  return o;
}

}  // namespace wgnn

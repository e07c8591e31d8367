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
// float32 -> float16 for a model's values in fp16 mode: finite values beyond
// the float16 range saturate to +-65504 (the largest finite half) instead of
// becoming infinities, so a mask filled with float32's minimum (-3.4e38,
// torch.finfo(torch.float32).min) stays finite and `0 * mask` stays 0 rather
// than NaN. Infinities and NaN are kept; everything else rounds to nearest even.
inline uint16_t float_to_half_saturate(float f) {
  constexpr float kMax = 65504.f;
  if (f > kMax && f <= 3.4028235e38f) return 0x7bff;
  if (f < -kMax && f >= -3.4028235e38f) return 0xfbff;
  return float_to_half(f);
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

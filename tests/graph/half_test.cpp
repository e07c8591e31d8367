// float32 -> float16 for fp16 mode (graph/host_tensor.h, to_half_saturate):
// the vectorised, threaded conversion against the scalar definition
// (float_to_half_saturate, Imath's rounding), bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "graph/half.h"
#include "graph/host_tensor.h"

using namespace wgnn;

namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

void expect_same(const std::vector<float>& v) {
  std::vector<uint16_t> got(v.size());
  to_half_saturate(v.data(), got.data(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t want = float_to_half_saturate(v[i]);
    if (std::isnan(v[i])) {
      // NaN stays NaN (its payload bits may differ between the two).
      ASSERT_EQ(got[i] & 0x7c00, 0x7c00) << i;
      ASSERT_NE(got[i] & 0x03ff, 0) << i;
      continue;
    }
    ASSERT_EQ(got[i], want) << "element " << i << " = " << v[i];
  }
}

}  // namespace

TEST(Half, EdgeValuesConvertAsTheScalarDefinition) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.f, -0.f, 1.f, -1.f, 65504.f, -65504.f, 65505.f, 65519.f, 65520.f, 65536.f, -70000.f,
                          3.4028235e38f, -3.4028235e38f, inf, -inf, std::nanf(""), -std::nanf(""),
                          6.1035156e-05f, 6.0e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 1e-10f,
                          -1e-10f, 0.33333334f, 2049.f, 2051.f, 1.00048828125f, 1.000244140625f};
  // Every float32 exponent with a few mantissas, both signs: the normal,
  // subnormal and overflowing ranges of float16 and the ties between them.
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t m : {0u, 1u, 0x1000u, 0x1fffu, 0x2000u, 0x2001u, 0x3fffu, 0x400000u, 0x7fffffu})
      for (uint32_t s : {0u, 1u}) v.push_back(from_bits((s << 31) | (e << 23) | m));
  // Lengths that leave a tail after the eight-wide loop.
  for (size_t n : {size_t(1), size_t(7), size_t(9), v.size()}) {
    expect_same(std::vector<float>(v.begin(), v.begin() + std::ptrdiff_t(n)));
  }
}

TEST(Half, LargeArraysConvertInPartsAlike) {
  // More than one part (2^20 elements each), with an odd tail.
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.f, 3000.f);
  std::vector<float> v((size_t(1) << 21) + 12345);
  for (auto& x : v) x = d(rng);
  v[12] = 1e9f;
  v[v.size() - 1] = -1e9f;
  expect_same(v);
  const HostTensor t = [&] {
    HostTensor h(DType::F32, {int64_t(v.size())});
    std::memcpy(h.data.data(), v.data(), h.data.size());
    return h;
  }();
  const HostTensor h = to_f16_saturated(t);
  ASSERT_EQ(h.dtype, DType::F16);
  EXPECT_EQ(h.as<uint16_t>()[12], 0x7bff);
  EXPECT_EQ(h.as<uint16_t>()[v.size() - 1], 0xfbff);
}

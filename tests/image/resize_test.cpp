// Resampling and the matting pre/post-processing against plain C++
// references: area integration over each output pixel's footprint when
// shrinking, bilinear with half-pixel centers when growing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "error_of.h"
#include "image/matte.h"
#include "image/resize.h"

using namespace wgnn;
using wgnn::test::error_of;
using image::Image;
using testing::HasSubstr;

namespace {

// The weight of source pixel j in output pixel i along one axis, computed
// directly from the definitions.
double ref_weight(int n_src, int n_dst, int i, int j) {
  const double s = double(n_src) / n_dst;
  if (n_dst < n_src) {
    const double lo = i * s, hi = (i + 1) * s;
    return std::max(0.0, std::min<double>(j + 1, hi) - std::max<double>(j, lo)) / s;
  }
  if (n_dst == n_src) return i == j ? 1.0 : 0.0;
  double x = (i + 0.5) * s - 0.5;
  x = std::min(std::max(x, 0.0), double(n_src - 1));
  return std::max(0.0, 1.0 - std::abs(x - j));  // the tent
}

// Non-separable reference: every output pixel sums every source pixel.
std::vector<double> ref_resize(const std::vector<float>& src, int w, int h, int c, int dw, int dh) {
  std::vector<double> out(size_t(dw) * dh * c, 0.0);
  for (int y = 0; y < dh; ++y)
    for (int x = 0; x < dw; ++x)
      for (int sy = 0; sy < h; ++sy) {
        const double wy = ref_weight(h, dh, y, sy);
        if (wy == 0) continue;
        for (int sx = 0; sx < w; ++sx) {
          const double wxy = wy * ref_weight(w, dw, x, sx);
          if (wxy == 0) continue;
          for (int k = 0; k < c; ++k) out[(size_t(y) * dw + x) * c + k] += wxy * src[(size_t(sy) * w + sx) * c + k];
        }
      }
  return out;
}

std::vector<float> random_image(int w, int h, int c, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(0.f, 255.f);
  std::vector<float> v(size_t(w) * h * c);
  for (auto& x : v) x = d(rng);
  return v;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

TEST(ImageResize, ConstantStaysConstant) {
  const int sizes[][4] = {{64, 48, 20, 13}, {13, 7, 64, 50}, {100, 10, 33, 40}, {5, 5, 5, 5}, {1, 1, 9, 4}, {9, 4, 1, 1}};
  for (const auto& s : sizes) {
    const std::vector<float> src(size_t(s[0]) * s[1] * 3, 173.25f);
    const auto out = image::resize(src, s[0], s[1], 3, s[2], s[3]);
    ASSERT_EQ(out.size(), size_t(s[2]) * s[3] * 3);
    for (float v : out) ASSERT_NEAR(v, 173.25f, 1e-3f) << s[0] << "x" << s[1] << " -> " << s[2] << "x" << s[3];
  }
}

TEST(ImageResize, CheckerboardShrinksToItsMean) {
  std::vector<float> src(64 * 64);
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) src[size_t(y) * 64 + x] = ((x + y) & 1) ? 255.f : 0.f;
  for (int d : {32, 16, 8, 1}) {
    const auto out = image::resize(src, 64, 64, 1, d, d);
    for (float v : out) ASSERT_NEAR(v, 127.5f, 1e-3f) << d;
  }
  // A factor that is not an integer mixes unequal shares: the reference says how.
  const auto out = image::resize(src, 64, 64, 1, 24, 20);
  const auto ref = ref_resize(src, 64, 64, 1, 24, 20);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-3) << i;
  for (float v : out) ASSERT_NEAR(v, 127.5f, 40.f);  // no aliasing to 0 or 255
}

TEST(ImageResize, BilinearGrowthOfARampIsARamp) {
  const int w = 8, dw = 40;
  std::vector<float> src(size_t(w) * 2);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < w; ++x) src[size_t(y) * w + x] = float(10 * x);
  const auto out = image::resize(src, w, 2, 1, dw, 3);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < dw; ++x) {
      const double s = std::min(std::max((x + 0.5) * w / dw - 0.5, 0.0), double(w - 1));
      ASSERT_NEAR(out[size_t(y) * dw + x], 10 * s, 1e-4) << x;
    }
  // Between the clamped edges the step is constant.
  for (int x = 4; x < dw - 4; ++x) ASSERT_NEAR(out[size_t(x + 1)] - out[size_t(x)], 10.0 * w / dw, 1e-4);
}

TEST(ImageResize, MatchesTheReferenceOnRandomImages) {
  const int cases[][4] = {{37, 23, 16, 9}, {9, 7, 31, 22}, {40, 6, 13, 19}, {6, 40, 19, 13}, {17, 17, 17, 5}};
  unsigned seed = 1;
  for (const auto& s : cases) {
    const auto src = random_image(s[0], s[1], 3, seed++);
    const auto out = image::resize(src, s[0], s[1], 3, s[2], s[3]);
    const auto ref = ref_resize(src, s[0], s[1], 3, s[2], s[3]);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], ref[i], 2e-3) << s[0] << "x" << s[1] << " -> " << s[2] << "x" << s[3] << " at " << i;
  }
}

TEST(ImageResize, Errors) {
  EXPECT_THAT(error_of([] { image::resize(std::vector<float>(6), 2, 3, 1, 0, 4); }), HasSubstr("positive"));
  EXPECT_THAT(error_of([] { image::resize(std::vector<float>(5), 2, 3, 1, 4, 4); }), HasSubstr("needs 6 values"));
}

TEST(ImageNormalize, IsNetAndModNetValues) {
  Image img(2, 1, 3);
  const uint8_t px[2][3] = {{0, 128, 255}, {64, 200, 1}};
  for (int x = 0; x < 2; ++x)
    for (int k = 0; k < 3; ++k) img.at(x, 0, k) = px[x][k];
  // Same size: no resampling; planes R, G, B of 1x2.
  const auto is = image::to_planar(img, 2, 1, image::kISNetNormalization);
  const auto mo = image::to_planar(img, 2, 1, image::kMODNetNormalization);
  ASSERT_EQ(is.size(), 6u);
  for (int k = 0; k < 3; ++k)
    for (int x = 0; x < 2; ++x) {
      const double v = px[x][k];
      EXPECT_NEAR(is[size_t(k) * 2 + x], (v - 128) / 256, 1e-6) << k << "," << x;
      EXPECT_NEAR(mo[size_t(k) * 2 + x], (v / 255 - 0.5) / 0.5, 1e-6) << k << "," << x;
    }
  EXPECT_FLOAT_EQ(is[0], -0.5f);
  EXPECT_FLOAT_EQ(is[4 + 0], 127.f / 256.f);
  EXPECT_FLOAT_EQ(mo[0], -1.f);
  EXPECT_FLOAT_EQ(mo[4], 1.f);
}

TEST(ImageNormalize, ResizesBeforeNormalizing) {
  Image img(4, 4, 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x)
      for (int k = 0; k < 3; ++k) img.at(x, y, k) = uint8_t(x < 2 ? 0 : 200);
  const auto p = image::to_planar(img, 2, 2, image::kISNetNormalization);
  for (int k = 0; k < 3; ++k)
    for (int y = 0; y < 2; ++y) {
      EXPECT_NEAR(p[size_t(k) * 4 + y * 2 + 0], -0.5, 1e-6);
      EXPECT_NEAR(p[size_t(k) * 4 + y * 2 + 1], (200.0 - 128) / 256, 1e-6);
    }
  EXPECT_THAT(error_of([] { image::to_planar(Image(2, 2, 1), 2, 2, image::kISNetNormalization); }),
              HasSubstr("RGB"));
}

TEST(ImageMatteToAlpha, ClampsAndRounds) {
  const std::vector<float> m = {-0.5f, 0.f, 0.5f, 1.f, 1.5f, NAN, 0.2f, 0.998f};
  const Image a = image::matte_to_alpha(m, 4, 2, 4, 2);
  ASSERT_EQ(a.channels, 1);
  const std::vector<uint8_t> want = {0, 0, 128, 255, 255, 0, 51, 254};
  EXPECT_EQ(a.pixels, want);
}

TEST(ImageMatteToAlpha, GrowsBilinearlyAndShrinksByArea) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-0.2f, 1.2f);
  std::vector<float> m(5 * 4);
  for (auto& v : m) v = d(rng);
  std::vector<float> clamped(m.size());
  for (size_t i = 0; i < m.size(); ++i) clamped[i] = std::min(std::max(m[i], 0.f), 1.f);
  for (auto [w, h] : {std::pair{23, 17}, std::pair{3, 2}, std::pair{9, 3}}) {
    const Image a = image::matte_to_alpha(m, 5, 4, w, h);
    const auto ref = ref_resize(clamped, 5, 4, 1, w, h);
    ASSERT_EQ(a.width, w);
    ASSERT_EQ(a.height, h);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(a.pixels[i], 255 * ref[i], 0.5 + 1e-3) << w << "x" << h;
  }
  // A sigmoid matte (values of a model) keeps its order.
  std::vector<float> ramp(8);
  for (int x = 0; x < 8; ++x) ramp[size_t(x)] = float(sigmoid(x - 3.5));
  const Image a = image::matte_to_alpha(ramp, 8, 1, 64, 1);
  for (int x = 1; x < 64; ++x) ASSERT_GE(a.pixels[size_t(x)], a.pixels[size_t(x - 1)]);
  EXPECT_THAT(error_of([] { image::matte_to_alpha(std::vector<float>(3), 2, 2, 4, 4); }), HasSubstr("needs 4 values"));
}

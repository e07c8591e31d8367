#include "image/matte.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "image/resize.h"

namespace wgnn::image {

std::vector<float> to_planar(const Image& rgb, int w, int h, Normalization n) {
  if (rgb.channels != 3) throw Error(fmt::format("to_planar: needs an RGB image; got {} channels", rgb.channels));
  if (!(n.std != 0.f)) throw Error("to_planar: the normalization's std must not be 0");
  const std::vector<float> src(rgb.pixels.begin(), rgb.pixels.end());
  const std::vector<float> r = resize(src, rgb.width, rgb.height, 3, w, h);
  const size_t plane = size_t(w) * size_t(h);
  std::vector<float> out(3 * plane);
  const float inv = 1.f / n.std;
  for (size_t i = 0; i < plane; ++i) {
    for (size_t c = 0; c < 3; ++c) out[c * plane + i] = (r[3 * i + c] - n.mean) * inv;
  }
  return out;
}

Image matte_to_alpha(const std::vector<float>& matte, int mw, int mh, int w, int h) {
  if (mw <= 0 || mh <= 0 || matte.size() != size_t(mw) * size_t(mh)) {
    throw Error(fmt::format("matte_to_alpha: a {}x{} matte needs {} values; got {}", mw, mh,
                            size_t(std::max(mw, 0)) * size_t(std::max(mh, 0)), matte.size()));
  }
  std::vector<float> m(matte.size());
  std::transform(matte.begin(), matte.end(), m.begin(),
                 [](float v) { return std::isnan(v) ? 0.f : std::clamp(v, 0.f, 1.f); });
  const std::vector<float> r = resize(m, mw, mh, 1, w, h);
  Image alpha(w, h, 1);
  for (size_t i = 0; i < r.size(); ++i) {
    alpha.pixels[i] = uint8_t(std::clamp(std::lround(255.f * r[i]), 0L, 255L));
  }
  return alpha;
}

Image multiply_alpha(const Image& a, const Image& b) {
  if (a.channels != 1 || b.channels != 1 || a.width != b.width || a.height != b.height) {
    throw Error(fmt::format("multiply_alpha: needs two one-channel images of one size; got {}x{}x{} and {}x{}x{}",
                            a.width, a.height, a.channels, b.width, b.height, b.channels));
  }
  Image out(a.width, a.height, 1);
  for (size_t i = 0; i < out.pixels.size(); ++i) {
    out.pixels[i] = uint8_t((uint32_t(a.pixels[i]) * uint32_t(b.pixels[i]) + 127) / 255);
  }
  return out;
}

Image composite_over(const Image& rgba, const std::array<uint8_t, 4>& bg) {
  if (rgba.channels != 4) throw Error(fmt::format("composite_over: needs RGBA; got {} channels", rgba.channels));
  const bool opaque = bg[3] == 255;
  const int c = opaque ? 3 : 4;
  Image out(rgba.width, rgba.height, c);
  const size_t n = size_t(rgba.width) * size_t(rgba.height);
  const double ab = bg[3] / 255.0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = &rgba.pixels[4 * i];
    const double a = p[3] / 255.0;
    const double ao = a + ab * (1 - a);
    uint8_t* o = &out.pixels[size_t(c) * i];
    for (int k = 0; k < 3; ++k) {
      o[k] = ao > 0 ? uint8_t(std::lround((p[k] * a + bg[size_t(k)] * ab * (1 - a)) / ao)) : p[k];
    }
    if (!opaque) o[3] = uint8_t(std::lround(255 * ao));
  }
  return out;
}

}  // namespace wgnn::image

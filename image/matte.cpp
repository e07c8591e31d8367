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

Image matte_to_alpha(std::span<const float> matte, int mw, int mh, int w, int h) {
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

namespace {

// The cross's min (erode) or max (dilate) at every pixel.
Image cross_filter(const Image& a, bool take_max) {
  const int w = a.width, h = a.height;
  Image out(w, h, 1);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t v = a.at(x, y, 0);
      auto take = [&](int xx, int yy) {
        if (xx < 0 || yy < 0 || xx >= w || yy >= h) return;  // outside: left out
        const uint8_t u = a.at(xx, yy, 0);
        v = take_max ? std::max(v, u) : std::min(v, u);
      };
      take(x - 1, y);
      take(x + 1, y);
      take(x, y - 1);
      take(x, y + 1);
      out.at(x, y, 0) = v;
    }
  }
  return out;
}

// Index i mirrored into [0, n) without repeating the edge (n >= 1).
int reflect101(int i, int n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

}  // namespace

Image post_process_alpha(const Image& alpha) {
  if (alpha.channels != 1 || alpha.width <= 0 || alpha.height <= 0) {
    throw Error(fmt::format("post_process_alpha: needs a one-channel image; got {}x{}x{}", alpha.width, alpha.height,
                            alpha.channels));
  }
  const Image opened = cross_filter(cross_filter(alpha, false), true);
  const int w = alpha.width, h = alpha.height;
  // The 5-tap Gaussian, sigma 2, normalized to a sum of 1.
  double k[5], sum = 0;
  for (int i = 0; i < 5; ++i) sum += k[i] = std::exp(-double((i - 2) * (i - 2)) / (2 * 2.0 * 2.0));
  for (double& v : k) v /= sum;
  std::vector<double> rows(size_t(w) * size_t(h));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      double acc = 0;
      for (int i = 0; i < 5; ++i) acc += k[i] * opened.at(reflect101(x + i - 2, w), y, 0);
      rows[size_t(y) * size_t(w) + size_t(x)] = acc;
    }
  }
  Image out(w, h, 1);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      double acc = 0;
      for (int i = 0; i < 5; ++i) acc += k[i] * rows[size_t(reflect101(y + i - 2, h)) * size_t(w) + size_t(x)];
      // The blur is rounded to 8 bits before the threshold, as on an 8-bit image.
      out.at(x, y, 0) = std::lround(acc) < 127 ? 0 : 255;
    }
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

#include "image/resize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpu/error.h"

namespace wgnn::image {
namespace {

// For each output index along one axis: the source indices [first, first +
// count) and their weights (summing to 1).
struct Axis {
  std::vector<int> first, count;
  std::vector<size_t> offset;  // into weight
  std::vector<float> weight;
};

Axis axis_weights(int n_src, int n_dst) {
  Axis a;
  a.first.resize(size_t(n_dst));
  a.count.resize(size_t(n_dst));
  a.offset.resize(size_t(n_dst));
  const double scale = double(n_src) / double(n_dst);
  for (int i = 0; i < n_dst; ++i) {
    a.offset[size_t(i)] = a.weight.size();
    if (n_dst < n_src) {  // area: the source interval [lo, hi) this pixel covers
      const double lo = i * scale, hi = (i + 1) * scale;
      const int j0 = int(std::floor(lo));
      const int j1 = std::min(n_src, int(std::ceil(hi)));
      double sum = 0;
      std::vector<double> w;
      for (int j = j0; j < j1; ++j) {
        w.push_back(std::min<double>(j + 1, hi) - std::max<double>(j, lo));
        sum += w.back();
      }
      a.first[size_t(i)] = j0;
      a.count[size_t(i)] = j1 - j0;
      for (double x : w) a.weight.push_back(float(x / sum));
    } else if (n_dst > n_src) {  // bilinear, half-pixel centers, clamped
      const double x = std::clamp((i + 0.5) * scale - 0.5, 0.0, double(n_src - 1));
      const int j = std::min(int(std::floor(x)), n_src - 1);
      const double f = x - j;
      a.first[size_t(i)] = j;
      if (j + 1 < n_src && f > 0) {
        a.count[size_t(i)] = 2;
        a.weight.push_back(float(1 - f));
        a.weight.push_back(float(f));
      } else {
        a.count[size_t(i)] = 1;
        a.weight.push_back(1.f);
      }
    } else {
      a.first[size_t(i)] = i;
      a.count[size_t(i)] = 1;
      a.weight.push_back(1.f);
    }
  }
  return a;
}

}  // namespace

std::vector<float> resize(const std::vector<float>& src, int w, int h, int c, int dw, int dh) {
  if (w <= 0 || h <= 0 || c <= 0 || dw <= 0 || dh <= 0) {
    throw Error(fmt::format("resize: sizes must be positive; got {}x{}x{} to {}x{}", w, h, c, dw, dh));
  }
  if (src.size() != size_t(w) * size_t(h) * size_t(c)) {
    throw Error(fmt::format("resize: {}x{}x{} needs {} values; got {}", w, h, c, size_t(w) * size_t(h) * size_t(c),
                            src.size()));
  }
  const size_t C = size_t(c);
  // Rows first (h x dw), then columns (dh x dw).
  const Axis ax = axis_weights(w, dw);
  std::vector<float> mid(size_t(h) * size_t(dw) * C);
  for (size_t y = 0; y < size_t(h); ++y) {
    const float* row = src.data() + y * size_t(w) * C;
    float* out = mid.data() + y * size_t(dw) * C;
    for (size_t x = 0; x < size_t(dw); ++x) {
      const float* wt = ax.weight.data() + ax.offset[x];
      const float* s = row + size_t(ax.first[x]) * C;
      for (size_t k = 0; k < C; ++k) {
        float acc = 0;
        for (int t = 0; t < ax.count[x]; ++t) acc += wt[t] * s[size_t(t) * C + k];
        out[x * C + k] = acc;
      }
    }
  }
  const Axis ay = axis_weights(h, dh);
  const size_t stride = size_t(dw) * C;
  std::vector<float> dst(size_t(dh) * stride);
  for (size_t y = 0; y < size_t(dh); ++y) {
    const float* wt = ay.weight.data() + ay.offset[y];
    float* out = dst.data() + y * stride;
    for (int t = 0; t < ay.count[y]; ++t) {
      const float* s = mid.data() + size_t(ay.first[y] + t) * stride;
      for (size_t i = 0; i < stride; ++i) out[i] += wt[t] * s[i];
    }
  }
  return dst;
}

}  // namespace wgnn::image

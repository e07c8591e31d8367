// wgnn.resize against a C++ port of the ONNX reference implementation
// (interpolate_nd of onnx/backend/test/case/node/resize.py: recursive over
// dims, neighbours by sorting the edge-padded input), in double: every mode
// and nearest_mode with every coordinate transformation, growing and
// shrinking by integer and non-integer scales or to given sizes, dims other
// than the last two, crops with extrapolation, float16. ATen's upsample ops
// against ATen's formulas and small hand-checked results.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>

#include "op_test_util.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

struct Opts {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double a = -0.75;
  bool exclude = false;
  double fill = 0;
};

std::vector<double> coeffs(const Opts& o, double ratio, bool ratio_is_int) {
  if (o.mode == "linear") return {1 - ratio, ratio};
  if (o.mode == "cubic") {
    const double A = o.a;
    return {((A * (ratio + 1) - 5 * A) * (ratio + 1) + 8 * A) * (ratio + 1) - 4 * A,
            ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
            ((A + 2) * (1 - ratio) - (A + 3)) * (1 - ratio) * (1 - ratio) + 1,
            ((A * ((1 - ratio) + 1) - 5 * A) * ((1 - ratio) + 1) + 8 * A) * ((1 - ratio) + 1) - 4 * A};
  }
  if (ratio_is_int) return {0, 1};
  if (o.nearest == "round_prefer_floor") return {double(ratio <= 0.5), double(ratio > 0.5)};
  if (o.nearest == "round_prefer_ceil") return {double(ratio < 0.5), double(ratio >= 0.5)};
  if (o.nearest == "floor") return {1, 0};
  return {0, 1};  // ceil
}

// interpolate_1d_with_x over a line of `in` values read through `get`
// (only the neighbours are read, as np.dot over them would).
double interp1d(int64_t in, const std::function<double(int64_t)>& get, double scale, double x, double roi0,
                double roi1, const Opts& o) {
  const double out_w = scale * double(in);
  double xo;
  if (o.coord == "align_corners") {
    xo = out_w == 1 ? 0 : x * double(in - 1) / (out_w - 1);
  } else if (o.coord == "asymmetric") {
    xo = x / scale;
  } else if (o.coord == "tf_crop_and_resize") {
    xo = out_w == 1 ? (roi1 - roi0) * double(in - 1) / 2 : x * (roi1 - roi0) * double(in - 1) / (out_w - 1);
    xo += roi0 * double(in - 1);
    if (xo < 0 || xo > double(in - 1)) return o.fill;
  } else if (o.coord == "pytorch_half_pixel") {
    xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  } else if (o.coord == "tf_half_pixel_for_nn") {
    xo = (x + 0.5) / scale;
  } else {
    xo = (x + 0.5) / scale - 0.5;
  }
  const double xi = std::floor(xo);
  const bool is_int = xo == xi;
  std::vector<double> c = coeffs(o, is_int ? 1.0 : xo - xi, is_int);
  const int64_t n = int64_t(c.size());
  const int64_t pad = int64_t(std::ceil(double(n) / 2));
  const int64_t len = in + 2 * pad;
  std::vector<int64_t> idx(static_cast<size_t>(len));
  std::iota(idx.begin(), idx.end(), 0);
  const double xp = xo + double(pad);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t p, int64_t q) {
    const double dp = std::abs(xp - double(p)), dq = std::abs(xp - double(q));
    return dp != dq ? dp < dq : p < q;
  });
  idx.resize(size_t(n));
  std::sort(idx.begin(), idx.end());
  if (o.exclude) {
    double s = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t orig = idx[size_t(k)] - pad;
      if (orig < 0 || orig >= in) c[size_t(k)] = 0;
      s += c[size_t(k)];
    }
    for (double& v : c) v /= s;
  }
  double r = 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t orig = std::clamp<int64_t>(idx[size_t(k)] - pad, 0, in - 1);
    r += c[size_t(k)] * get(orig);
  }
  return r;
}

// interpolate_nd_with_x over a row-major block `data` of shape `shape`.
double interp_nd(const double* data, const Shape& shape, size_t dim, const std::vector<double>& scales,
                 const Shape& x, const std::vector<double>& roi, const Opts& o) {
  const size_t rank = shape.size();
  int64_t inner = 1;
  for (size_t d = dim + 1; d < rank; ++d) inner *= shape[d];
  auto get = [&](int64_t i) {
    return dim + 1 == rank ? data[i] : interp_nd(data + i * inner, shape, dim + 1, scales, x, roi, o);
  };
  return interp1d(shape[dim], get, scales[dim], double(x[dim]), roi.empty() ? 0 : roi[dim],
                  roi.empty() ? 1 : roi[dim + rank], o);
}

// Output shape from sizes, or floor(in * scale).
std::vector<double> reference(const std::vector<float>& xin, const Shape& in, const Shape& out,
                              const std::vector<double>& scales, const std::vector<double>& roi, const Opts& o) {
  std::vector<double> data(xin.begin(), xin.end());
  std::vector<double> res(static_cast<size_t>(numel(out)));
  Shape x(out.size());
  for (size_t i = 0; i < res.size(); ++i) {
    int64_t r = int64_t(i);
    for (size_t d = out.size(); d-- > 0;) {
      x[d] = r % out[d];
      r /= out[d];
    }
    res[i] = interp_nd(data.data(), in, 0, scales, x, roi, o);
  }
  return res;
}

ValueList doubles(const std::vector<double>& v) {
  ValueList l;
  for (double d : v) l.emplace_back(d);
  return l;
}

// Runs wgnn.resize by scales (sizes = floor(in * scale)) or by sizes
// (scale = out / in) and compares with the reference.
void check_resize(const Shape& in, const std::vector<double>& scales_or_sizes, bool by_sizes, const Opts& o,
                  DType dt = DType::F32, const std::vector<double>& roi = {}, uint32_t seed = 1) {
  if (dt == DType::F16 && !ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  SCOPED_TRACE(fmt::format("{} {} {} {} {} {}", shape_str(in), by_sizes ? "sizes" : "scales",
                           fmt::join(scales_or_sizes, ","), o.mode, o.coord, o.nearest));
  Shape out(in.size());
  std::vector<double> scales(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    if (by_sizes) {
      out[d] = int64_t(scales_or_sizes[d]);
      scales[d] = double(out[d]) / double(in[d]);
    } else {
      scales[d] = scales_or_sizes[d];
      out[d] = int64_t(std::floor(scales[d] * double(in[d])));
    }
  }
  Graph g(ctx());
  auto x = quantize(random_floats(size_t(numel(in)), -2, 2, seed), dt);
  TensorRef tx = upload(g, in, x, dt);
  Value sizes = by_sizes ? Value(IntList(out.begin(), out.end())) : Value(None{});
  Value sc = by_sizes ? Value(None{}) : Value(doubles(scales));
  TensorRef y = ops::call(g, "wgnn.resize.default",
                          {tx, sizes, sc, o.mode, o.coord, o.nearest, o.a, o.exclude, o.fill,
                           roi.empty() ? Value(None{}) : Value(doubles(roi))})
                    .tensor();
  EXPECT_EQ(g.info(y).shape, out);
  g.mark_output(y);
  g.run();
  auto ref = reference(x, in, out, scales, roi, o);
  const bool f16 = dt == DType::F16;
  EXPECT_TRUE(all_close(download(g, y), ref, f16 ? 1e-2 : 1e-5, f16 ? 2e-3 : 1e-5));
}

const std::vector<std::string> kCoords = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                          "tf_half_pixel_for_nn"};

class ResizeModes : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ResizeModes, ScalesAndSizes) {
  const auto [mode, nearest] = GetParam();
  for (const std::string& coord : kCoords) {
    Opts o;
    o.mode = mode;
    o.nearest = nearest;
    o.coord = coord;
    check_resize({2, 3, 5, 7}, {1, 1, 2, 3}, false, o);          // integer growth
    check_resize({1, 2, 6, 9}, {1, 1, 0.5, 0.6}, false, o);      // shrink
    check_resize({1, 2, 5, 4}, {1, 1, 1.7, 2.45}, false, o);     // non-integer growth
    check_resize({1, 1, 8, 7}, {1, 1, 0.45, 1.3}, false, o);     // one dim each way
    check_resize({1, 2, 4, 6}, {1, 2, 7, 4}, true, o);           // sizes
    check_resize({1, 1, 5, 5}, {1, 1, 1, 3}, true, o);           // a size of 1
  }
}
INSTANTIATE_TEST_SUITE_P(All, ResizeModes,
                         testing::Values(std::tuple{"nearest", "round_prefer_floor"},
                                         std::tuple{"nearest", "round_prefer_ceil"}, std::tuple{"nearest", "floor"},
                                         std::tuple{"nearest", "ceil"}, std::tuple{"linear", "round_prefer_floor"},
                                         std::tuple{"cubic", "round_prefer_floor"}),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

}  // namespace

TEST(Resize, CubicExcludeOutsideAndCoefficient) {
  Opts o;
  o.mode = "cubic";
  o.a = -0.5;
  o.exclude = true;
  check_resize({1, 1, 4, 4}, {1, 1, 2, 2}, false, o);
  check_resize({1, 1, 4, 4}, {1, 1, 0.8, 0.8}, false, o);
  check_resize({2, 2, 7, 5}, {1, 1, 1.5, 0.7}, false, o);
}

TEST(Resize, TfCropAndResize) {
  for (const char* mode : {"linear", "nearest", "cubic"}) {
    Opts o;
    o.mode = mode;
    o.coord = "tf_crop_and_resize";
    check_resize({1, 1, 4, 4}, {1, 1, 3, 3}, true, o, DType::F32, {0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8});
    o.fill = 10;
    check_resize({1, 1, 4, 4}, {1, 1, 3, 3}, true, o, DType::F32, {0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7});
    check_resize({1, 2, 5, 6}, {1, 2, 1, 4}, true, o, DType::F32, {0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3});
  }
}

TEST(Resize, OtherRanksAndDims) {
  Opts lin;
  lin.mode = "linear";
  check_resize({3, 10}, {1, 1.5}, false, lin);                       // rank 2
  check_resize({2, 3, 9}, {1, 1, 0.5}, false, lin);                  // rank 3, one dim
  check_resize({2, 3, 4, 5, 6}, {1, 1, 1.5, 2, 0.5}, false, lin);    // rank 5: two dispatches
  check_resize({4, 3, 5, 2}, {0.5, 2, 1, 1}, false, lin);            // leading dims
  check_resize({3, 4, 5}, {2, 1, 2}, false, lin);                    // non-adjacent dims
  check_resize({8}, {0.75}, false, lin);                             // rank 1
  Opts nn;
  check_resize({2, 5, 3, 4}, {1, 2, 1, 3}, false, nn);
  check_resize({2, 3, 4, 5}, {2, 3, 4, 5}, true, nn);                // same size: a copy
  check_resize({1, 1, 5, 5}, {1, 1, 1.1, 1.1}, false, nn);           // same size, shifted coordinates
}

TEST(Resize, Float16) {
  Opts o;
  o.mode = "linear";
  check_resize({1, 3, 6, 5}, {1, 1, 2, 0.6}, false, o, DType::F16);
  o.mode = "nearest";
  check_resize({1, 3, 6, 5}, {1, 1, 2, 3}, false, o, DType::F16);
}

TEST(Resize, LargePlanesBeyondOneGridDimension) {
  // Nearest, exact integer scales, checked by index arithmetic (the
  // reference above is too slow for millions of outputs): 4.2M outputs,
  // then 16.9M (more workgroups than one grid dimension holds).
  struct Case {
    Shape in;
    int64_t sh, sw;
    const char* coord;
    const char* nearest;
  };
  for (const Case& c : {Case{{1, 4, 512, 520}, 2, 2, "half_pixel", "round_prefer_floor"},
                        Case{{1, 1, 2, 2}, 4100, 1030, "asymmetric", "floor"}}) {
    SCOPED_TRACE(shape_str(c.in));
    Graph g(ctx());
    auto x = random_floats(size_t(numel(c.in)), -1, 1, 9);
    TensorRef tx = upload(g, c.in, x, DType::F32);
    const Shape out = {c.in[0], c.in[1], c.in[2] * c.sh, c.in[3] * c.sw};
    TensorRef y = ops::call(g, "wgnn.resize.default",
                            {tx, None{}, doubles({1, 1, double(c.sh), double(c.sw)}), std::string("nearest"),
                             std::string(c.coord), std::string(c.nearest)})
                      .tensor();
    g.run();
    std::vector<double> ref(static_cast<size_t>(numel(out)));
    size_t i = 0;
    for (int64_t p = 0; p < out[0] * out[1]; ++p) {
      for (int64_t h = 0; h < out[2]; ++h) {
        for (int64_t w = 0; w < out[3]; ++w) {
          // half_pixel, s = 2: x / 2 - 0.25 rounds (prefer floor) to x / 2;
          // asymmetric: x / s, floored.
          ref[i++] = x[size_t((p * c.in[2] + h / c.sh) * c.in[3] + w / c.sw)];
        }
      }
    }
    EXPECT_TRUE(all_close(download(g, y), ref, 0, 0));
  }
}

TEST(Resize, SimpleNearestModeOfUpsample) {
  // Resize-10 / Upsample: asymmetric coordinates, truncation where a dim
  // grows and ceil where it shrinks.
  Graph g(ctx());
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  TensorRef tx = upload(g, {1, 1, 2, 4}, x, DType::F32);
  TensorRef up = ops::call(g, "wgnn.resize.default",
                           {tx, None{}, doubles({1, 1, 2, 1.5}), std::string("nearest"), std::string("asymmetric"),
                            std::string("simple")})
                     .tensor();
  TensorRef down = ops::call(g, "wgnn.resize.default",
                             {tx, None{}, doubles({1, 1, 0.6, 0.6}), std::string("nearest"),
                              std::string("asymmetric"), std::string("simple")})
                       .tensor();
  g.mark_output(up);
  g.mark_output(down);
  g.run();
  // Columns of the growth: x / 1.5 = 0, 0.67, 1.33, 2, 2.67, 3.33 -> 0 0 1 2 2 3.
  std::vector<double> want_up = {1, 1, 2, 3, 3, 4, 1, 1, 2, 3, 3, 4, 5, 5, 6, 7, 7, 8, 5, 5, 6, 7, 7, 8};
  EXPECT_TRUE(all_close(download(g, up), want_up, 0, 0));
  // The ONNX Resize-10 example: [[1, 2, 3, 4], [5, 6, 7, 8]] * 0.6 -> [[1, 3]].
  EXPECT_TRUE(all_close(download(g, down), {1, 3}, 0, 0));
}

namespace {

// ATen's nearest and bilinear formulas (aten/src/ATen/native/UpSample.h), float.
std::vector<double> aten_reference(const std::vector<float>& x, const Shape& in, const Shape& out, bool bilinear,
                                   bool align, bool exact, const std::optional<std::vector<double>>& sf) {
  auto scale = [&](size_t d) -> float {
    const int64_t i = in[d], o = out[d];
    if (bilinear && align) return o > 1 ? float(i - 1) / float(o - 1) : 0.f;
    if (sf && (*sf)[d - 2] > 0) return float(1.0 / (*sf)[d - 2]);
    return float(i) / float(o);
  };
  const float sh = scale(2), sw = scale(3);
  auto nearest = [&](int64_t o, int64_t i, int64_t on, float s) -> int64_t {
    if (exact) return std::min(int64_t(std::floor((float(o) + 0.5f) * s)), i - 1);
    if (on == i) return o;
    if (on == 2 * i) return o / 2;
    return std::min(int64_t(std::floor(float(o) * s)), i - 1);
  };
  std::vector<double> r;
  const int64_t planes = in[0] * in[1];
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x.data() + p * in[2] * in[3];
    for (int64_t oh = 0; oh < out[2]; ++oh) {
      for (int64_t ow = 0; ow < out[3]; ++ow) {
        if (!bilinear) {
          r.push_back(xp[nearest(oh, in[2], out[2], sh) * in[3] + nearest(ow, in[3], out[3], sw)]);
          continue;
        }
        auto src = [&](float s, int64_t o) { return align ? s * float(o) : std::max(s * (float(o) + 0.5f) - 0.5f, 0.f); };
        const float hr = src(sh, oh), wr = src(sw, ow);
        const int64_t h1 = int64_t(hr), w1 = int64_t(wr);
        const int64_t hp = h1 < in[2] - 1 ? 1 : 0, wp = w1 < in[3] - 1 ? 1 : 0;
        const double l1 = hr - float(h1), l0 = 1 - l1, m1 = wr - float(w1), m0 = 1 - m1;
        auto v = [&](int64_t h, int64_t w) { return double(xp[h * in[3] + w]); };
        r.push_back(l0 * (m0 * v(h1, w1) + m1 * v(h1, w1 + wp)) + l1 * (m0 * v(h1 + hp, w1) + m1 * v(h1 + hp, w1 + wp)));
      }
    }
  }
  return r;
}

void check_aten(const char* op, const Shape& in, const std::optional<IntList>& size,
                const std::optional<std::vector<double>>& sf, bool align = false) {
  SCOPED_TRACE(fmt::format("{} {} size {} sf {} align {}", op, shape_str(in), size ? shape_str(*size) : "none",
                           sf ? fmt::format("{}", fmt::join(*sf, ",")) : "none", align));
  const bool bilinear = std::string(op).find("bilinear") != std::string::npos;
  const bool exact = std::string(op).find("exact") != std::string::npos;
  Graph g(ctx());
  auto x = random_floats(size_t(numel(in)), -1, 1, 5);
  TensorRef tx = upload(g, in, x, DType::F32);
  Value vs = size ? Value(*size) : Value(None{});
  Value vf = sf ? Value(doubles(*sf)) : Value(None{});
  ValueList args = bilinear ? ValueList{tx, vs, align, vf} : ValueList{tx, vs, vf};
  TensorRef y = ops::call(g, op, args).tensor();
  Shape out = in;
  for (size_t i = 0; i < 2; ++i) out[2 + i] = size ? (*size)[i] : int64_t(std::floor(double(in[2 + i]) * (*sf)[i]));
  EXPECT_EQ(g.info(y).shape, out);
  g.run();
  EXPECT_TRUE(all_close(download(g, y), aten_reference(x, in, out, bilinear, align, exact, sf), 1e-6, 1e-6));
}

}  // namespace

TEST(Upsample, AtenNearest) {
  check_aten("aten.upsample_nearest2d.vec", {2, 3, 5, 7}, IntList{10, 14}, std::nullopt);
  check_aten("aten.upsample_nearest2d.vec", {2, 3, 5, 7}, IntList{8, 3}, std::nullopt);
  check_aten("aten.upsample_nearest2d.vec", {1, 2, 5, 7}, std::nullopt, std::vector<double>{1.5, 0.5});
  check_aten("aten._upsample_nearest_exact2d.vec", {1, 2, 5, 7}, IntList{9, 4}, std::nullopt);
  check_aten("aten._upsample_nearest_exact2d.vec", {1, 2, 5, 7}, std::nullopt, std::vector<double>{2.5, 3.0});
}

TEST(Upsample, AtenBilinear) {
  for (bool align : {false, true}) {
    check_aten("aten.upsample_bilinear2d.vec", {2, 3, 5, 7}, IntList{10, 14}, std::nullopt, align);
    check_aten("aten.upsample_bilinear2d.vec", {1, 2, 8, 6}, IntList{3, 1}, std::nullopt, align);
    check_aten("aten.upsample_bilinear2d.vec", {1, 2, 5, 7}, std::nullopt, std::vector<double>{1.7, 0.6}, align);
  }
}

TEST(Upsample, HandChecked) {
  Graph g(ctx());
  TensorRef x = upload(g, {1, 1, 2, 2}, {1, 2, 3, 4}, DType::F32);
  TensorRef n = ops::call(g, "aten.upsample_nearest2d.vec", {x, IntList{4, 4}, None{}}).tensor();
  TensorRef b = ops::call(g, "aten.upsample_bilinear2d.vec", {x, IntList{4, 4}, false, None{}}).tensor();
  TensorRef c = ops::call(g, "aten.upsample_bilinear2d.vec", {x, IntList{3, 3}, true, None{}}).tensor();
  g.mark_output(n);
  g.mark_output(b);
  g.mark_output(c);
  g.run();
  EXPECT_TRUE(all_close(download(g, n), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 0, 0));
  EXPECT_TRUE(all_close(download(g, b),
                        {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4}, 1e-6, 0));
  EXPECT_TRUE(all_close(download(g, c), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4}, 1e-6, 0));
}

TEST(Resize, Errors) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({1, 2, 4, 4}, DType::F32, TensorKind::Input);
  TensorRef xi = g.add_tensor({1, 2, 4, 4}, DType::I32, TensorKind::Input);
  TensorRef x3 = g.add_tensor({2, 4, 4}, DType::F32, TensorKind::Input);
  auto expect_error = [&](const char* op, const ValueList& args, const char* needle) {
    try {
      ops::call(g, op, args);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(op));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  const char* rs = "wgnn.resize.default";
  const std::string nearest = "nearest", half = "half_pixel";
  expect_error(rs, {x}, "give 'sizes' or 'scales'");
  expect_error(rs, {x, IntList{1, 2, 8}}, "'sizes' has 3 values");
  expect_error(rs, {x, None{}, doubles({1, 1, 2})}, "'scales' has 3 values");
  expect_error(rs, {x, None{}, doubles({1, 1, 0, 2})}, "must be positive");
  expect_error(rs, {x, IntList{1, 2, 8, 8}, None{}, std::string("bicubic")}, "'mode' is 'bicubic'");
  expect_error(rs, {x, IntList{1, 2, 8, 8}, None{}, nearest, std::string("half_pixel_mirrored")},
               "'coordinate_transformation_mode' is 'half_pixel_mirrored'");
  expect_error(rs, {x, IntList{1, 2, 8, 8}, None{}, nearest, half, std::string("round")}, "'nearest_mode' is 'round'");
  expect_error(rs, {x, IntList{1, 2, 8, 8}, None{}, nearest, std::string("tf_crop_and_resize")}, "needs 'roi'");
  expect_error(rs, {xi, IntList{1, 2, 8, 8}}, "int32");
  expect_error(rs, {x, IntList{1, 2, -1, 8}}, "negative");
  const char* up = "aten.upsample_nearest2d.vec";
  expect_error(up, {x3, IntList{8, 8}, None{}}, "N x C x H x W");
  expect_error(up, {x, IntList{8, 8}, doubles({2, 2})}, "exactly one");
  expect_error(up, {x, None{}, None{}}, "exactly one");
  expect_error(up, {x, IntList{8}, None{}}, "2 values");
  expect_error("aten.upsample_bilinear2d.vec", {x, IntList{8, 8}, None{}, None{}}, "'align_corners' must be a Bool");
}

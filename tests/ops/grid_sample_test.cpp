// aten.grid_sampler_2d against a plain C++ reference of ONNX GridSample
// (its definition as ONNX's reference implementation writes it: a sampling
// point outside the image clamped (border) or reflected (reflection) first,
// then every tap padded the same way), every mode x padding x
// align_corners, grid points inside and outside [-1, 1], float32 and
// float16; and the argument errors.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <cmath>

#include "error_of.h"
#include "op_test_util.h"
#include "typed_values.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

double reflect(double v, double lo, double hi) {
  const double span = hi - lo;
  if (span <= 0) return lo;
  if (v < lo) {
    const double d = lo - v, n = std::floor(d / span), r = d - n * span;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (v > hi) {
    const double d = v - hi, n = std::floor(d / span), r = d - n * span;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return v;
}

struct Ref {
  int mode, pad;
  bool align;
  int64_t H, W;
  double lo(int64_t) const { return align ? 0.0 : -0.5; }
  double hi(int64_t size) const { return align ? double(size) - 1 : double(size) - 0.5; }
  double coord(double g, int64_t size) const {
    double v = align ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2;
    if (mode == 1) v = std::nearbyint(v);  // half to even
    if (v < lo(size) || v > hi(size)) {
      if (pad == 1) v = std::clamp(v, 0.0, double(size - 1));
      if (pad == 2) v = reflect(v, lo(size), hi(size));
    }
    return v;
  }
  // The padded index, or -1 for a zero.
  int64_t tap(int64_t i, int64_t size) const {
    if (pad == 0) return i >= 0 && i < size ? i : -1;
    if (pad == 1) return std::clamp<int64_t>(i, 0, size - 1);
    return std::clamp<int64_t>(int64_t(reflect(double(i), lo(size), hi(size))), 0, size - 1);
  }
  double pixel(const double* plane, int64_t r, int64_t c) const {
    const int64_t rr = tap(r, H), cc = tap(c, W);
    return rr < 0 || cc < 0 ? 0.0 : plane[rr * W + cc];
  }
};

std::array<double, 4> cubic(double t) {
  const double a = -0.75, x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
  return {((a * x0 - 5 * a) * x0 + 8 * a) * x0 - 4 * a, ((a + 2) * x1 - (a + 3)) * x1 * x1 + 1,
          ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1, ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a};
}

std::vector<double> reference(const Shape& xs, const std::vector<double>& x, const Shape& gs,
                              const std::vector<double>& grid, const Ref& ref) {
  const int64_t N = xs[0], C = xs[1], OH = gs[1], OW = gs[2];
  std::vector<double> y;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const double* plane = x.data() + (n * C + c) * ref.H * ref.W;
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          const size_t gi = size_t(((n * OH + i) * OW + j) * 2);
          const double cx = ref.coord(grid[gi], ref.W), cy = ref.coord(grid[gi + 1], ref.H);
          double v = 0;
          if (ref.mode == 1) {
            v = ref.pixel(plane, int64_t(cy), int64_t(cx));
          } else if (ref.mode == 0) {
            const double fx = std::floor(cx), fy = std::floor(cy), tx = cx - fx, ty = cy - fy;
            const int64_t c0 = int64_t(fx), r0 = int64_t(fy);
            v = (1 - ty) * ((1 - tx) * ref.pixel(plane, r0, c0) + tx * ref.pixel(plane, r0, c0 + 1)) +
                ty * ((1 - tx) * ref.pixel(plane, r0 + 1, c0) + tx * ref.pixel(plane, r0 + 1, c0 + 1));
          } else {
            const double fx = std::floor(cx), fy = std::floor(cy);
            const auto wx = cubic(cx - fx), wy = cubic(cy - fy);
            for (int a = 0; a < 4; ++a) {
              double row = 0;
              for (int b = 0; b < 4; ++b) row += wx[size_t(b)] * ref.pixel(plane, int64_t(fy) - 1 + a, int64_t(fx) - 1 + b);
              v += wy[size_t(a)] * row;
            }
          }
          y.push_back(v);
        }
    }
  return y;
}

class GridSample : public testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (GetParam() == DType::F16 && !ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  }
};

INSTANTIATE_TEST_SUITE_P(Dtypes, GridSample, testing::Values(DType::F32, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST_P(GridSample, EveryModePaddingAndAlignmentMatchesTheReference) {
  const DType dt = GetParam();
  const Shape xs{2, 3, 5, 7}, gs{2, 6, 9, 2};
  const std::vector<double> x = random_values(size_t(numel(xs)), dt, 11, -2, 2);
  // Points well outside [-1, 1] too (reflection folds them more than once).
  const std::vector<double> grid = random_values(size_t(numel(gs)), dt, 12, -2.6, 2.6);
  for (int mode = 0; mode < 3; ++mode)
    for (int pad = 0; pad < 3; ++pad)
      for (bool align : {false, true}) {
        SCOPED_TRACE(fmt::format("mode {} padding {} align_corners {}", mode, pad, align));
        Graph g(ctx());
        TensorRef t = put(g, xs, dt, x), gt = put(g, gs, dt, grid);
        TensorRef y = ops::call(g, "aten.grid_sampler_2d.default", {t, gt, int64_t(mode), int64_t(pad), align}).tensor();
        EXPECT_EQ(g.info(y).shape, (Shape{2, 3, 6, 9}));
        g.run();
        const std::vector<double> ref = reference(xs, x, gs, grid, Ref{mode, pad, align, 5, 7});
        std::vector<float> got;
        for (double v : get(g, y)) got.push_back(float(v));
        // float32 arithmetic (and a float16 result rounded once) on values of magnitude <= 2 * 1.6.
        EXPECT_TRUE(all_close(got, ref, dt == DType::F16 ? 4e-3 : 2e-6, dt == DType::F16 ? 1e-3 : 1e-6));
      }
}

TEST(GridSampleArgs, Errors) {
  Graph g(ctx());
  TensorRef x = put(g, {1, 1, 2, 2}, DType::F32, {1, 2, 3, 4});
  TensorRef grid = put(g, {1, 1, 1, 3}, DType::F32, {0, 0, 0});
  EXPECT_THAT(error_of([&] { ops::call(g, "aten.grid_sampler_2d.default", {x, grid, int64_t(0), int64_t(0), false}); }),
              HasSubstr("grid [N, OH, OW, 2]"));
  TensorRef grid2 = put(g, {1, 1, 1, 2}, DType::F32, {0, 0});
  EXPECT_THAT(error_of([&] { ops::call(g, "aten.grid_sampler_2d.default", {x, grid2, int64_t(3), int64_t(0), false}); }),
              HasSubstr("'interpolation_mode' is 3"));
}

}  // namespace

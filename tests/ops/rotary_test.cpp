// wgnn.rotary_pairs (the interleaved rotary form, ops/rotary.cpp) against a
// plain double reference: cos and sin broadcast over batch and heads from
// [1, S, 1, D/2], odd sizes, and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "error_of.h"
#include "gpu_fixture.h"
#include "ir/graph.h"
#include "ir/program.h"

using namespace wgnn;
using test::error_of;
using testing::HasSubstr;

namespace {

HostTensor filled(const Shape& s, double step, double offset) {
  HostTensor t(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = float(std::sin(step * double(i) + offset));
  return t;
}

}  // namespace

TEST(RotaryPairs, MatchesThePairwiseRotation) {
  for (const Shape xs : {Shape{1, 3, 2, 8}, Shape{2, 5, 3, 6}, Shape{1, 1, 4, 2}}) {
    const int64_t B = xs[0], S = xs[1], H = xs[2], D = xs[3], half = D / 2;
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {B, S, H, D});
    const TensorRef cs = g.input("cos", DType::F32, {1, S, 1, half});
    const TensorRef sn = g.input("sin", DType::F32, {1, S, 1, half});
    g.output(g.call("wgnn.rotary_pairs.default", {x, cs, sn}), "y");
    ir::Program p(test::ctx(), std::move(g));
    const HostTensor xv = filled(xs, 0.71, 0.2), cv = filled({1, S, 1, half}, 0.37, 1.1),
                     sv = filled({1, S, 1, half}, 0.53, -0.4);
    const HostTensor y = p.run({xv, cv, sv}).at(0);
    ASSERT_EQ(y.shape, xs);
    double worst = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t k = 0; k < half; ++k) {
            const int64_t at = ((b * S + s) * H + h) * D + 2 * k;
            const double re = xv.as<float>()[at], im = xv.as<float>()[at + 1];
            const double c = cv.as<float>()[s * half + k], sn_ = sv.as<float>()[s * half + k];
            worst = std::max(worst, std::abs(y.as<float>()[at] - (re * c - im * sn_)));
            worst = std::max(worst, std::abs(y.as<float>()[at + 1] - (im * c + re * sn_)));
          }
    EXPECT_LT(worst, 1e-6) << shape_str(xs);
  }
}

TEST(RotaryPairs, AnOddWidthOrTablesThatDoNotBroadcastAreErrors) {
  {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {1, 2, 1, 5});
    const TensorRef cs = g.input("cos", DType::F32, {1, 2, 1, 2});
    g.output(g.call("wgnn.rotary_pairs.default", {x, cs, cs}), "y");
    ir::Program p(test::ctx(), std::move(g));
    EXPECT_THAT(error_of([&] { p.run({filled({1, 2, 1, 5}, 1, 0), filled({1, 2, 1, 2}, 1, 0)}); }),
                HasSubstr("even last dim"));
  }
  {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {1, 2, 1, 4});
    const TensorRef cs = g.input("cos", DType::F32, {1, 3, 1, 2});
    g.output(g.call("wgnn.rotary_pairs.default", {x, cs, cs}), "y");
    ir::Program p(test::ctx(), std::move(g));
    EXPECT_THAT(error_of([&] { p.run({filled({1, 2, 1, 4}, 1, 0), filled({1, 3, 1, 2}, 1, 0)}); }),
                HasSubstr("do not broadcast"));
  }
}

// wgnn.rotary_pairs (the interleaved rotary form, ops/rotary.cpp) and
// wgnn.kv_present (ops/kv_present.cpp) against a
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

// wgnn.kv_present (GroupQueryAttention's present key or value, one
// dispatch) against a plain reference: each batch row its own past and
// valid lengths, rows beyond the past or the fresh rows zeros, float32
// and float16 (rows of two 32-bit words), and the errors.
TEST(KvPresent, RowsFromThePastThenTheFreshThenZeros) {
  const int64_t B = 3, H = 2, P = 5, S = 2, D = 4, L = 8;
  const std::vector<int64_t> past_len = {5, 2, 0}, valid_len = {7, 4, 1};
  for (DType dt : {DType::F32, DType::F16}) {
    if (dt == DType::F16 && !test::ctx().features().shader_f16) continue;
    ir::Graph g;
    const TensorRef past = g.input("past", DType::F32, {B, H, P, D});
    const TensorRef fresh = g.input("fresh", DType::F32, {B, H, S, D});
    const TensorRef pl = g.input("past_len", DType::I64, {B});
    const TensorRef vl = g.input("valid_len", DType::I64, {B});
    auto as = [&](TensorRef t) {
      return dt == DType::F32 ? t : g.call("aten._to_copy.default", {t, int64_t(5)});  // ATen's float16
    };
    TensorRef y = g.call("wgnn.kv_present.default", {as(past), as(fresh), pl, vl, L});
    if (dt != DType::F32) y = g.call("aten._to_copy.default", {y, int64_t(6)});  // float32
    g.output(y, "present");
    ir::Program p(test::ctx(), std::move(g));
    const HostTensor pv = filled({B, H, P, D}, 0.3, 0.1), fv = filled({B, H, S, D}, 0.7, 1.3);
    HostTensor plv(DType::I64, {B}), vlv(DType::I64, {B});
    for (int64_t b = 0; b < B; ++b) plv.as<int64_t>()[b] = past_len[size_t(b)], vlv.as<int64_t>()[b] = valid_len[size_t(b)];
    const HostTensor out = p.run({pv, fv, plv, vlv}).at(0);
    ASSERT_EQ(out.shape, (Shape{B, H, L, D}));
    double worst = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < L; ++j)
          for (int64_t d = 0; d < D; ++d) {
            double want = 0;
            if (j < past_len[size_t(b)]) {
              if (j < P) want = pv.as<float>()[((b * H + h) * P + j) * D + d];
            } else if (j < valid_len[size_t(b)] && j - past_len[size_t(b)] < S) {
              want = fv.as<float>()[((b * H + h) * S + (j - past_len[size_t(b)])) * D + d];
            }
            worst = std::max(worst, std::abs(double(out.as<float>()[((b * H + h) * L + j) * D + d]) - want));
          }
    // float32 rows are copied bit for bit; float16 ones rounded once.
    EXPECT_LE(worst, dt == DType::F32 ? 0.0 : 1e-3) << dtype_name(dt);
  }
}

TEST(KvPresent, MismatchedShapesAreErrors) {
  ir::Graph g;
  const TensorRef past = g.input("past", DType::F32, {1, 2, 3, 4});
  const TensorRef fresh = g.input("fresh", DType::F32, {1, 3, 1, 4});
  const TensorRef n = g.input("n", DType::I64, {1});
  g.output(g.call("wgnn.kv_present.default", {past, fresh, n, n, int64_t(4)}), "y");
  ir::Program p(test::ctx(), std::move(g));
  HostTensor nv(DType::I64, {1});
  nv.as<int64_t>()[0] = 1;
  EXPECT_THAT(error_of([&] { p.run({filled({1, 2, 3, 4}, 1, 0), filled({1, 3, 1, 4}, 1, 0), nv}); }),
              HasSubstr("one batch, heads and row"));
}

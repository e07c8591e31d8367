// aten.prelu.default against a C++ reference: one weight, one per channel,
// float16, NaN inputs, and the validation errors.
#include <gmock/gmock.h>

#include <cmath>
#include <limits>

#include "op_test_util.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

void check_prelu(const Shape& xs, int64_t nw, DType dt, uint32_t seed) {
  if (dt == DType::F16 && !ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  SCOPED_TRACE(shape_str(xs) + " weights " + std::to_string(nw));
  Graph g(ctx());
  auto x = quantize(random_floats(size_t(numel(xs)), -3, 3, seed), dt);
  auto w = quantize(random_floats(size_t(nw), -0.5f, 0.5f, seed + 1), dt);
  TensorRef y = ops::call(g, "aten.prelu.default", {upload(g, xs, x, dt), constant(g, {nw}, w, dt)}).tensor();
  EXPECT_EQ(g.info(y).shape, xs);
  g.run();
  int64_t inner = 1;
  for (size_t d = 2; d < xs.size(); ++d) inner *= xs[d];
  std::vector<double> ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double wi = nw == 1 ? w[0] : w[size_t((int64_t(i) / inner) % nw)];
    ref[i] = x[i] < 0 ? wi * x[i] : x[i];
  }
  EXPECT_TRUE(all_close(download(g, y), ref, dt == DType::F16 ? 2e-3 : 1e-7, dt == DType::F16 ? 1e-3 : 1e-6));
}

}  // namespace

TEST(Prelu, OneWeightAndPerChannel) {
  check_prelu({2, 3, 5, 7}, 1, DType::F32, 1);
  check_prelu({2, 3, 5, 7}, 3, DType::F32, 2);
  check_prelu({4, 6}, 6, DType::F32, 3);
  check_prelu({2, 5, 3, 4, 2}, 5, DType::F32, 4);
  check_prelu({7}, 1, DType::F32, 5);
  check_prelu({2, 3, 5, 7}, 3, DType::F16, 6);
}

TEST(Prelu, NaNStaysNaN) {
  Graph g(ctx());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TensorRef y = ops::call(g, "aten.prelu.default",
                          {upload(g, {1, 2, 2}, {nan, -1.f, 2.f, -4.f}, DType::F32), constant(g, {2}, {0.5f, 0.25f}, DType::F32)})
                    .tensor();
  g.run();
  auto got = download(g, y);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(got[1], -0.5f);
  EXPECT_EQ(got[2], 2.f);
  EXPECT_EQ(got[3], -1.f);
}

TEST(Prelu, Errors) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({2, 3, 4}, DType::F32, TensorKind::Input);
  TensorRef w4 = g.add_tensor({4}, DType::F32, TensorKind::Input);
  TensorRef w2d = g.add_tensor({3, 1}, DType::F32, TensorKind::Input);
  TensorRef wh = g.add_tensor({3}, DType::F16, TensorKind::Input);
  TensorRef xi = g.add_tensor({2, 3, 4}, DType::I32, TensorKind::Input);
  auto expect_error = [&](const ValueList& args, const char* needle) {
    try {
      ops::call(g, "aten.prelu.default", args);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("aten.prelu.default"));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expect_error({x, w4}, "expected one value, or [3]");
  expect_error({x, w2d}, "'weight' has shape [3, 1]");
  expect_error({x, wh}, "same dtype");
  expect_error({xi, w4}, "int32");
}

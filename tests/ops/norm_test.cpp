// batch_norm (inference) and layer_norm against double-precision references.
#include <gmock/gmock.h>

#include <cmath>

#include "op_test_util.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

struct LnCase {
  Shape shape;
  int k;  // trailing dims normalized
  bool weight, bias;
  DType dtype;
  float center = 0, spread = 1;
};

void run_layer_norm(const LnCase& c, uint32_t seed) {
  if (c.dtype == DType::F16 && !ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  const int64_t n = numel(c.shape);
  int64_t width = 1;
  for (size_t i = c.shape.size() - c.k; i < c.shape.size(); ++i) width *= c.shape[i];
  const int64_t rows = n / width;
  Graph g(ctx());
  auto x = quantize(random_floats(size_t(n), c.center - c.spread, c.center + c.spread, seed), c.dtype);
  auto w = quantize(random_floats(size_t(width), 0.5f, 1.5f, seed + 1), c.dtype);
  auto b = quantize(random_floats(size_t(width), -1, 1, seed + 2), c.dtype);
  Shape norm(c.shape.end() - c.k, c.shape.end());
  TensorRef tx = upload(g, c.shape, x, c.dtype);
  Value tw = c.weight ? Value(constant(g, norm, w, c.dtype)) : Value(None{});
  Value tb = c.bias ? Value(constant(g, norm, b, c.dtype)) : Value(None{});
  const double eps = 1e-5;
  Value out = ops::call(g, "aten.native_layer_norm.default", {tx, IntList(norm.begin(), norm.end()), tw, tb, eps});
  ASSERT_EQ(out.list().size(), 3u);
  TensorRef ty = out.list()[0].tensor(), tm = out.list()[1].tensor(), tr = out.list()[2].tensor();
  Shape stat(c.shape.begin(), c.shape.end() - c.k);
  stat.insert(stat.end(), size_t(c.k), 1);
  EXPECT_EQ(g.info(tm).shape, stat);
  EXPECT_EQ(g.info(tm).dtype, DType::F32);
  g.run();

  std::vector<double> ry(static_cast<size_t>(n)), rm(static_cast<size_t>(rows)), rr(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, m2 = 0;
    for (int64_t j = 0; j < width; ++j) mean += x[size_t(r * width + j)];
    mean /= double(width);
    for (int64_t j = 0; j < width; ++j) {
      const double d = x[size_t(r * width + j)] - mean;
      m2 += d * d;
    }
    const double rstd = 1 / std::sqrt(m2 / double(width) + eps);
    rm[size_t(r)] = mean;
    rr[size_t(r)] = rstd;
    for (int64_t j = 0; j < width; ++j) {
      double y = (x[size_t(r * width + j)] - mean) * rstd;
      if (c.weight) y *= w[size_t(j)];
      if (c.bias) y += b[size_t(j)];
      ry[size_t(r * width + j)] = y;
    }
  }
  const bool f16 = c.dtype == DType::F16;
  EXPECT_TRUE(all_close(download(g, ty), ry, f16 ? 1e-2 : 2e-5, f16 ? 4e-3 : 2e-5)) << "out";
  EXPECT_TRUE(all_close(download(g, tm), rm, f16 ? 1e-3 : 1e-5 * std::max({1.f, std::abs(c.center), c.spread}), 1e-5)) << "mean";
  EXPECT_TRUE(all_close(download(g, tr), rr, 1e-4, f16 ? 1e-3 : 1e-4)) << "rstd";
}

class LayerNormWidth : public testing::TestWithParam<std::tuple<int64_t, DType>> {};

TEST_P(LayerNormWidth, MatchesReference) {
  const auto [width, dtype] = GetParam();
  SCOPED_TRACE("width " + std::to_string(width));
  run_layer_norm({{7, width}, 1, true, true, dtype}, uint32_t(width));
}
INSTANTIATE_TEST_SUITE_P(Widths, LayerNormWidth,
                         testing::Combine(testing::Values<int64_t>(1, 3, 5, 63, 64, 65, 768, 1023, 1024, 1280, 3072,
                                                                   4097),
                                          testing::Values(DType::F32, DType::F16)));

}  // namespace

TEST(LayerNorm, OneElement) { run_layer_norm({{1}, 1, true, true, DType::F32}, 1); }
TEST(LayerNorm, OneRowLong) { run_layer_norm({{1, 20000}, 1, true, true, DType::F32}, 2); }
TEST(LayerNorm, ManyRowsBeyondOneGridDimension) {
  // 70000 rows, and with width 1 (256 rows per workgroup) 16.8M rows: more
  // workgroups than one grid dimension holds.
  run_layer_norm({{70000, 8}, 1, true, true, DType::F32}, 3);
  run_layer_norm({{16800000, 1}, 1, false, true, DType::F32}, 4);
}
TEST(LayerNorm, TwoTrailingDims) { run_layer_norm({{3, 5, 12, 64}, 2, true, true, DType::F32}, 5); }
TEST(LayerNorm, ThreeTrailingDimsOddWidth) { run_layer_norm({{2, 3, 5, 7}, 3, true, true, DType::F32}, 6); }
TEST(LayerNorm, AbsentWeight) { run_layer_norm({{9, 768}, 1, false, true, DType::F32}, 7); }
TEST(LayerNorm, AbsentBias) { run_layer_norm({{9, 768}, 1, true, false, DType::F32}, 8); }
TEST(LayerNorm, AbsentBoth) { run_layer_norm({{9, 65}, 1, false, false, DType::F32}, 9); }
TEST(LayerNorm, LargeMeanSmallSpread) {
  // mean 1e4, spread 1e-2: E[x^2] - E[x]^2 loses every digit here.
  run_layer_norm({{16, 1024}, 1, true, true, DType::F32, 1e4f, 1e-2f}, 10);
  run_layer_norm({{16, 1023}, 1, true, true, DType::F32, -3e4f, 3e-2f}, 11);
}
TEST(LayerNorm, HugeAndTinyMagnitudes) {
  run_layer_norm({{4, 768}, 1, true, true, DType::F32, 0, 1e15f}, 12);
  run_layer_norm({{4, 768}, 1, true, true, DType::F32, 0, 1e-3f}, 13);
}
TEST(LayerNorm, ConstantRowsGiveBias) {
  Graph g(ctx());
  std::vector<float> x(4 * 64, 3.25f);
  TensorRef tx = upload(g, {4, 64}, x, DType::F32);
  auto b = random_floats(64, -1, 1, 3);
  TensorRef tb = constant(g, {64}, b, DType::F32);
  Value out = ops::call(g, "aten.native_layer_norm.default", {tx, IntList{64}, None{}, tb, 1e-5});
  g.run();
  std::vector<double> ref(4 * 64);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = b[i % 64];
  EXPECT_TRUE(all_close(download(g, out.list()[0].tensor()), ref, 0, 0));
  EXPECT_TRUE(all_close(download(g, out.list()[2].tensor()), std::vector<double>(4, 1 / std::sqrt(1e-5f)), 0, 1e-6));
}

TEST(LayerNorm, Errors) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({4, 8}, DType::F32, TensorKind::Input);
  TensorRef w5 = g.add_tensor({5}, DType::F32, TensorKind::Input);
  TensorRef wh = g.add_tensor({8}, DType::F16, TensorKind::Input);
  TensorRef xi = g.add_tensor({4, 8}, DType::I32, TensorKind::Input);
  auto expect_error = [&](const ValueList& args, const char* needle) {
    try {
      ops::call(g, "aten.native_layer_norm.default", args);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("aten.native_layer_norm.default"));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expect_error({x, IntList{7}, None{}, None{}, 1e-5}, "does not match");
  expect_error({x, IntList{3, 4, 8}, None{}, None{}, 1e-5}, "trailing dims");
  expect_error({x, IntList{8}, w5, None{}, 1e-5}, "'weight' has shape [5]");
  expect_error({x, IntList{8}, wh, None{}, 1e-5}, "dtype float16");
  expect_error({x, IntList{8}, None{}, None{}, -1.0}, "'eps'");
  expect_error({xi, IntList{8}, None{}, None{}, 1e-5}, "int32");
  expect_error({x, IntList{8}, None{}, None{}, std::string("x")}, "Double or Int");
}

namespace {

struct BnCase {
  Shape shape;
  bool weight, bias;
  DType dtype, pdtype;
  bool constant_params = true;
};

void run_batch_norm(const BnCase& c, uint32_t seed) {
  if ((c.dtype == DType::F16 || c.pdtype == DType::F16) && !ctx().features().shader_f16) GTEST_SKIP();
  const int64_t n = numel(c.shape), C = c.shape[1];
  int64_t inner = 1;
  for (size_t d = 2; d < c.shape.size(); ++d) inner *= c.shape[d];
  Graph g(ctx());
  auto x = quantize(random_floats(size_t(n), -3, 5, seed), c.dtype);
  auto w = quantize(random_floats(size_t(C), 0.5f, 1.5f, seed + 1), c.pdtype);
  auto b = quantize(random_floats(size_t(C), -1, 1, seed + 2), c.pdtype);
  auto m = quantize(random_floats(size_t(C), -1, 2, seed + 3), c.pdtype);
  auto v = quantize(random_floats(size_t(C), 0.1f, 3, seed + 4), c.pdtype);
  auto param = [&](const std::vector<float>& d) {
    return c.constant_params ? constant(g, {C}, d, c.pdtype) : upload(g, {C}, d, c.pdtype);
  };
  TensorRef tx = upload(g, c.shape, x, c.dtype);
  Value tw = c.weight ? Value(param(w)) : Value(None{});
  Value tb = c.bias ? Value(param(b)) : Value(None{});
  const double eps = 1e-3;
  Value out = ops::call(g, "aten._native_batch_norm_legit_no_training.default",
                        {tx, tw, tb, param(m), param(v), 0.1, eps});
  ASSERT_EQ(out.list().size(), 3u);
  EXPECT_EQ(g.info(out.list()[1].tensor()).numel(), 0);
  g.run();
  g.run();  // a second run gives the same result (constants folded once)
  std::vector<double> ref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const size_t ch = size_t((i / inner) % C);
    double y = (x[size_t(i)] - m[ch]) / std::sqrt(double(v[ch]) + eps);
    if (c.weight) y *= w[ch];
    if (c.bias) y += b[ch];
    ref[size_t(i)] = y;
  }
  const bool f16 = c.dtype == DType::F16 || c.pdtype == DType::F16;
  EXPECT_TRUE(all_close(download(g, out.list()[0].tensor()), ref, f16 ? 1e-2 : 1e-5, f16 ? 4e-3 : 1e-5));
}

}  // namespace

TEST(BatchNorm, Rank2) { run_batch_norm({{5, 7}, true, true, DType::F32, DType::F32}, 1); }
TEST(BatchNorm, Rank3OddLength) { run_batch_norm({{2, 6, 13}, true, true, DType::F32, DType::F32}, 2); }
TEST(BatchNorm, Rank4) { run_batch_norm({{2, 16, 9, 12}, true, true, DType::F32, DType::F32}, 3); }
TEST(BatchNorm, Rank5) { run_batch_norm({{1, 3, 4, 5, 6}, true, true, DType::F32, DType::F32}, 4); }
TEST(BatchNorm, OneChannelLargePlane) { run_batch_norm({{1, 1, 1024, 1024}, true, true, DType::F32, DType::F32}, 5); }
TEST(BatchNorm, AbsentWeightAndBias) {
  run_batch_norm({{2, 5, 8, 8}, false, true, DType::F32, DType::F32}, 6);
  run_batch_norm({{2, 5, 8, 8}, true, false, DType::F32, DType::F32}, 7);
  run_batch_norm({{2, 5, 7, 7}, false, false, DType::F32, DType::F32}, 8);
}
TEST(BatchNorm, Float16) {
  run_batch_norm({{2, 8, 16, 16}, true, true, DType::F16, DType::F32}, 9);
  run_batch_norm({{2, 8, 5, 5}, true, true, DType::F16, DType::F16}, 10);
}
TEST(BatchNorm, ParametersAsInputsFoldEveryRun) {
  run_batch_norm({{2, 4, 8, 8}, true, true, DType::F32, DType::F32, false}, 11);
}
TEST(BatchNorm, SingleElement) { run_batch_norm({{1, 1}, true, true, DType::F32, DType::F32}, 12); }

TEST(BatchNorm, Errors) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({2, 4, 3, 3}, DType::F32, TensorKind::Input);
  TensorRef x1 = g.add_tensor({4}, DType::F32, TensorKind::Input);
  TensorRef c4 = g.add_tensor({4}, DType::F32, TensorKind::Input);
  TensorRef c5 = g.add_tensor({5}, DType::F32, TensorKind::Input);
  TensorRef h4 = g.add_tensor({4}, DType::F16, TensorKind::Input);
  auto expect_error = [&](const ValueList& args, const char* needle) {
    try {
      ops::call(g, "aten._native_batch_norm_legit_no_training.default", args);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("aten._native_batch_norm_legit_no_training.default"));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expect_error({x1, c4, c4, c4, c4, 0.1, 1e-5}, "rank 2 to 5");
  expect_error({x, c5, c4, c4, c4, 0.1, 1e-5}, "'weight' has shape [5]");
  expect_error({x, c4, c4, c4, c5, 0.1, 1e-5}, "'running_var' has shape [5]");
  expect_error({x, h4, c4, c4, c4, 0.1, 1e-5}, "must agree");
  expect_error({x, c4, c4, c4, c4, 0.1, -1e-5}, "'eps'");
  expect_error({x, c4, c4, c4}, "missing argument 4 'running_var'");
}

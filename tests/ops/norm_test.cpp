// batch_norm (inference) and layer_norm against double-precision references.
#include <gmock/gmock.h>

#include <cmath>
#include <limits>

#include "error_of.h"
#include "op_test_util.h"
#include "scoped_env.h"

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
  float ramp = 0;  // added across each row, 0 at its start to `ramp` at its end
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
  // The statistics are float32 sums of the inputs (exact in float32 for
  // float16 data): the mean within a few float32 steps of the inputs'
  // magnitude |center| + spread (a mean near 0 of inputs near 1e15 cannot be
  // closer), rstd relative only (it spans 1e-15 to 1e3 in these cases).
  const double magnitude = std::abs(double(c.center)) + double(c.spread);
  EXPECT_TRUE(all_close(download(g, tm), rm, 2e-6 * magnitude, 1e-6)) << "mean";
  EXPECT_TRUE(all_close(download(g, tr), rr, 0, 1e-4)) << "rstd";
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
// At most 8 rows take a thread per vec4 of the row (ops/norm.cpp): whole
// and ragged last chunks, vec4 and scalar rows.
TEST(LayerNorm, FewRowsWide) {
  run_layer_norm({{1, 768}, 1, true, true, DType::F32}, 20);
  run_layer_norm({{3, 1000}, 1, true, true, DType::F32}, 21);
  run_layer_norm({{8, 1, 4100}, 2, true, false, DType::F32}, 22);
  run_layer_norm({{2, 7}, 1, true, true, DType::F32}, 23);
}
// Rows for fewer than 128 workgroups take up to 64 threads each while the
// row has more vec4s than threads (ops/norm.cpp): DeiT-T's 197 rows of 192
// (48 vec4s: 64 threads, some without a chunk), BART's 32 of 768 (192
// vec4s: 64, three chunks each), and many rows keep a quarter of their
// vec4s; against the double reference, float16 included.
TEST(LayerNorm, FewRowsTakeMoreThreads) {
  auto label = [](const Shape& shape) {
    Graph g(ctx());
    TensorRef tx = upload(g, shape, std::vector<float>(size_t(numel(shape)), 1.f), DType::F32);
    ops::call(g, "aten.native_layer_norm.default", {tx, IntList{shape.back()}, None{}, None{}, 1e-5});
    return g.dispatches().at(0).label;
  };
  EXPECT_THAT(label({197, 192}), testing::HasSubstr("tpr=64 "));
  EXPECT_THAT(label({32, 768}), testing::HasSubstr("tpr=64 "));
  EXPECT_THAT(label({36864, 128}), testing::HasSubstr("tpr=8 "));  // 36,864 rows: as before
  run_layer_norm({{197, 192}, 1, true, true, DType::F32}, 24);
  run_layer_norm({{32, 768}, 1, true, true, DType::F32}, 25);
  run_layer_norm({{197, 192}, 1, true, true, DType::F16}, 26);
  run_layer_norm({{40, 52}, 1, true, true, DType::F32, 1e3f, 1e-1f}, 27);  // 13 vec4s: 16 threads
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

// wgnn.matmul_add_layer_norm refuses what it cannot take before it records
// anything (the IR then runs the nodes it was fused from), each refusal
// naming the argument.
TEST(MatmulAddLayerNorm, Errors) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({4, 16}, DType::F32, TensorKind::Input);
  TensorRef w = g.add_tensor({16, 8}, DType::F32, TensorKind::Input);
  TensorRef w3 = g.add_tensor({2, 16, 8}, DType::F32, TensorKind::Input);
  TensorRef res = g.add_tensor({4, 8}, DType::F32, TensorKind::Input);
  TensorRef res1 = g.add_tensor({1, 8}, DType::F32, TensorKind::Input);
  TensorRef lw5 = g.add_tensor({5}, DType::F32, TensorKind::Input);
  const Value none = None{};
  auto args = [&](TensorRef other, TensorRef r, IntList shape, Value lw, bool trans_self) {
    return ValueList{x,     other, none, 1.0, std::string("none"), trans_self, false, 0.0, 0.0, r, shape, lw,
                     none, 1e-5};
  };
  auto expect_error = [&](const ValueList& a, const char* needle) {
    const size_t before = g.dispatches().size();
    try {
      ops::call(g, "wgnn.matmul_add_layer_norm.default", a);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("wgnn.matmul_add_layer_norm.default"));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
    EXPECT_EQ(g.dispatches().size(), before) << needle;
  };
  expect_error(ValueList{x, w}, "takes 14 arguments");
  expect_error(args(w, res, {8}, none, true), "'trans_self' must be False");
  expect_error(args(w3, res, {8}, none, false), "'other' [2, 16, 8] 2-D");
  expect_error(args(w, res1, {8}, none, false), "argument 'residual' is float32 [1, 8]");
  expect_error(args(w, res, {4, 8}, none, false), "normalized_shape [4, 8]");
  expect_error(args(w, res, {8}, lw5, false), "argument 'weight' is float32 [5]");
  // What it takes, unsplit: the product then the add + layer norm.
  ops::call(g, "wgnn.matmul_add_layer_norm.default", args(w, res, {8}, none, false));
  ASSERT_EQ(g.dispatches().size(), 2u);
  EXPECT_THAT(g.dispatches()[1].label, HasSubstr("add_layer_norm"));
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

namespace {

struct GnCase {
  Shape shape;  // N, C, ...
  int64_t groups;
  bool weight, bias;
  DType dtype;
  float center = 0, spread = 1;
  float ramp = 0;  // added across each row, 0 at its start to `ramp` at its end
};

// Reference statistics per (n, group) in double.
void run_group_norm(const GnCase& c, uint32_t seed, bool instance = false) {
  if (c.dtype == DType::F16 && !ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  SCOPED_TRACE(shape_str(c.shape) + " groups " + std::to_string(c.groups));
  const int64_t n = numel(c.shape), N = c.shape[0], C = c.shape[1], hw = n / std::max<int64_t>(N * C, 1);
  const int64_t cg = C / c.groups, width = cg * hw;
  Graph g(ctx());
  auto x = random_floats(size_t(n), c.center - c.spread, c.center + c.spread, seed);
  if (c.ramp != 0)
    for (size_t i = 0; i < x.size(); ++i) x[i] += c.ramp * float(int64_t(i) % width) / float(width);
  x = quantize(x, c.dtype);
  auto w = quantize(random_floats(size_t(C), 0.5f, 1.5f, seed + 1), c.dtype);
  auto b = quantize(random_floats(size_t(C), -1, 1, seed + 2), c.dtype);
  TensorRef tx = upload(g, c.shape, x, c.dtype);
  Value tw = c.weight ? Value(constant(g, {C}, w, c.dtype)) : Value(None{});
  Value tb = c.bias ? Value(constant(g, {C}, b, c.dtype)) : Value(None{});
  const double eps = 1e-5;
  TensorRef ty{-1}, tm{-1}, tr{-1};
  if (instance) {
    ty = ops::call(g, "aten.instance_norm.default", {tx, tw, tb, None{}, None{}, true, 0.1, eps, false}).tensor();
  } else {
    Value out = ops::call(g, "aten.native_group_norm.default", {tx, tw, tb, N, C, hw, c.groups, eps});
    ASSERT_EQ(out.list().size(), 3u);
    ty = out.list()[0].tensor();
    tm = out.list()[1].tensor();
    tr = out.list()[2].tensor();
    EXPECT_EQ(g.info(tm).shape, (Shape{N, c.groups}));
    EXPECT_EQ(g.info(tr).dtype, DType::F32);
  }
  EXPECT_EQ(g.info(ty).shape, c.shape);
  g.run();
  const int64_t rows = N * c.groups;
  std::vector<double> ry(static_cast<size_t>(n)), rm(static_cast<size_t>(rows)), rr(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * width;
    double mean = 0, m2 = 0;
    for (int64_t j = 0; j < width; ++j) mean += xr[j];
    mean /= double(width);
    for (int64_t j = 0; j < width; ++j) m2 += (xr[j] - mean) * (xr[j] - mean);
    const double rstd = 1 / std::sqrt(m2 / double(width) + eps);
    rm[size_t(r)] = mean;
    rr[size_t(r)] = rstd;
    for (int64_t j = 0; j < width; ++j) {
      const size_t ch = size_t((r % c.groups) * cg + j / hw);
      double y = (xr[j] - mean) * rstd;
      if (c.weight) y *= w[ch];
      if (c.bias) y += b[ch];
      ry[size_t(r * width + j)] = y;
    }
  }
  const bool f16 = c.dtype == DType::F16;
  EXPECT_TRUE(all_close(download(g, ty), ry, f16 ? 1e-2 : 3e-5, f16 ? 4e-3 : 2e-5)) << "out";
  if (tm.id >= 0) {
    const double magnitude = std::abs(double(c.center)) + double(c.spread);  // as in run_layer_norm
    EXPECT_TRUE(all_close(download(g, tm), rm, 2e-6 * magnitude, 1e-6)) << "mean";
    EXPECT_TRUE(all_close(download(g, tr), rr, 0, 1e-4)) << "rstd";
  }
}

// aten.rms_norm and wgnn.add_rms_norm against a double reference: y = x /
// sqrt(mean(x^2) + eps) * w over the trailing dims (of x + x2, the sum also
// written); rows with a large mean and a small spread included (the kernel
// takes mean(x^2) as variance + mean^2).
struct RmsCase {
  Shape shape;
  int k;
  bool weight, add;
  DType dtype;
  float center = 0, spread = 1;
};

void run_rms_norm(const RmsCase& c, uint32_t seed) {
  if (c.dtype == DType::F16 && !ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  const int64_t n = numel(c.shape);
  int64_t width = 1;
  for (size_t i = c.shape.size() - c.k; i < c.shape.size(); ++i) width *= c.shape[i];
  const int64_t rows = n / width;
  Graph g(ctx());
  auto x = quantize(random_floats(size_t(n), c.center - c.spread, c.center + c.spread, seed), c.dtype);
  auto x2 = quantize(random_floats(size_t(n), -c.spread, c.spread, seed + 3), c.dtype);
  auto w = quantize(random_floats(size_t(width), 0.5f, 1.5f, seed + 1), c.dtype);
  Shape norm(c.shape.end() - c.k, c.shape.end());
  TensorRef tx = upload(g, c.shape, x, c.dtype);
  Value tw = c.weight ? Value(constant(g, norm, w, c.dtype)) : Value(None{});
  const double eps = 1e-6;
  TensorRef ty{-1}, ts{-1};
  if (c.add) {
    TensorRef tx2 = upload(g, c.shape, x2, c.dtype);
    Value out = ops::call(g, "wgnn.add_rms_norm.default", {tx, tx2, IntList(norm.begin(), norm.end()), tw, eps});
    ASSERT_EQ(out.list().size(), 2u);
    ty = out.list()[0].tensor();
    ts = out.list()[1].tensor();
  } else {
    ty = ops::call(g, "aten.rms_norm.default", {tx, IntList(norm.begin(), norm.end()), tw, eps}).tensor();
  }
  EXPECT_EQ(g.info(ty).shape, c.shape);
  EXPECT_EQ(g.info(ty).dtype, c.dtype);
  g.run();
  std::vector<double> ry(static_cast<size_t>(n)), rs(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t j = 0; j < width; ++j) {
      const size_t i = size_t(r * width + j);
      // The sum rounded to the dtype, as a separate add would give it.
      rs[i] = c.add ? double(quantize({float(x[i]) + float(x2[i])}, c.dtype)[0]) : double(x[i]);
      ms += rs[i] * rs[i];
    }
    const double rstd = 1 / std::sqrt(ms / double(width) + eps);
    for (int64_t j = 0; j < width; ++j) {
      const size_t i = size_t(r * width + j);
      ry[i] = rs[i] * rstd * (c.weight ? double(w[size_t(j)]) : 1.0);
    }
  }
  const bool f16 = c.dtype == DType::F16;
  EXPECT_TRUE(all_close(download(g, ty), ry, f16 ? 1e-2 : 2e-5, f16 ? 4e-3 : 2e-5)) << "out";
  if (c.add) EXPECT_TRUE(all_close(download(g, ts), rs, 0, 0)) << "sum";
}

TEST(RmsNorm, Widths) {
  for (int64_t width : {1, 3, 64, 65, 768, 1023, 4097}) {
    SCOPED_TRACE("width " + std::to_string(width));
    run_rms_norm({{7, width}, 1, true, false, DType::F32}, uint32_t(width));
  }
}
TEST(RmsNorm, DecoderStepRowsAndFloat16) {
  run_rms_norm({{1, 1, 768}, 1, true, false, DType::F32}, 21);
  run_rms_norm({{1, 1, 768}, 1, true, false, DType::F16}, 22);
  run_rms_norm({{3, 17, 2048}, 1, true, false, DType::F16}, 23);
}
TEST(RmsNorm, NoWeightTwoTrailingDims) { run_rms_norm({{3, 5, 12, 64}, 2, false, false, DType::F32}, 24); }
TEST(RmsNorm, LargeMeanSmallSpread) {
  // mean(x^2) from variance + mean^2: no cancellation to lose.
  run_rms_norm({{9, 768}, 1, true, false, DType::F32, 1000.f, 0.01f}, 25);
}
TEST(RmsNorm, AddThenNormWritesTheSum) {
  run_rms_norm({{5, 768}, 1, true, true, DType::F32}, 26);
  run_rms_norm({{1, 1, 2048}, 1, true, true, DType::F16}, 27);
}
TEST(RmsNorm, EpsNoneIsTheDtypesEpsilonAndBadArgumentsFail) {
  Graph g(ctx());
  std::vector<float> x{3e-4f, -4e-4f};  // mean(x^2) = 1.25e-7: the default eps matters
  TensorRef tx = upload(g, {1, 2}, x, DType::F32);
  TensorRef ty = ops::call(g, "aten.rms_norm.default", {tx, IntList{2}, None{}, None{}}).tensor();
  g.run();
  const double eps = double(std::numeric_limits<float>::epsilon());
  const double rstd = 1 / std::sqrt((9e-8 + 16e-8) / 2 + eps);
  EXPECT_TRUE(all_close(download(g, ty), {3e-4 * rstd, -4e-4 * rstd}, 1e-6, 1e-5));
  Graph g2(ctx());
  TensorRef t2 = upload(g2, {2, 3}, std::vector<float>(6, 1.f), DType::F32);
  TensorRef w4 = constant(g2, {4}, std::vector<float>(4, 1.f), DType::F32);
  EXPECT_THAT(error_of([&] { ops::call(g2, "aten.rms_norm.default", {t2, IntList{4}, None{}, 1e-6}); }),
              HasSubstr("normalized_shape [4] does not match the trailing dims of input [2, 3]"));
  EXPECT_THAT(error_of([&] { ops::call(g2, "aten.rms_norm.default", {t2, IntList{3}, w4, 1e-6}); }),
              HasSubstr("argument 'weight' has shape [4]; expected normalized_shape [3]"));
  EXPECT_THAT(error_of([&] { ops::call(g2, "aten.rms_norm.default", {t2, IntList{3}, None{}, -1.0}); }),
              HasSubstr("argument 'eps' is -1"));
}

}  // namespace

TEST(GroupNorm, Shapes) {
  run_group_norm({{2, 6, 5, 7}, 3, true, true, DType::F32}, 1);      // odd plane: scalar kernel
  run_group_norm({{2, 8, 4, 4}, 2, true, true, DType::F32}, 2);      // vec4
  run_group_norm({{1, 32, 17, 9}, 32, true, true, DType::F32}, 3);   // one channel per group
  run_group_norm({{3, 4, 1}, 1, true, true, DType::F32}, 4);         // one group
  run_group_norm({{5, 6}, 3, true, true, DType::F32}, 5);            // no spatial dims
  run_group_norm({{1, 1, 1}, 1, true, true, DType::F32}, 6);         // one element
  run_group_norm({{2, 4, 3, 5, 7}, 2, true, true, DType::F32}, 7);   // 3-D spatial
  run_group_norm({{1, 64, 48, 40}, 32, true, true, DType::F32}, 8);  // streamed rows (> 16 chunks per thread)
  run_group_norm({{2, 6, 5, 7}, 3, true, true, DType::F16}, 9);
  run_group_norm({{2, 8, 16, 16}, 4, true, true, DType::F16}, 10);
}
TEST(GroupNorm, AbsentAffine) {
  run_group_norm({{2, 6, 5, 7}, 2, false, true, DType::F32}, 11);
  run_group_norm({{2, 6, 5, 7}, 2, true, false, DType::F32}, 12);
  run_group_norm({{2, 6, 4, 4}, 6, false, false, DType::F32}, 13);
}
TEST(GroupNorm, LargeMeanSmallSpread) {
  run_group_norm({{2, 8, 16, 16}, 4, true, true, DType::F32, 1e4f, 1e-2f}, 14);
  run_group_norm({{2, 6, 33, 31}, 3, true, true, DType::F32, -3e4f, 3e-2f}, 15);
}
TEST(GroupNorm, ManyRows) { run_group_norm({{70000, 4, 3}, 2, true, true, DType::F32}, 16); }

// Few long rows go in slices, two dispatches (the slices' statistics, then
// each slice normalized from its row's merged statistics), by default:
// vec4 and scalar rows, a short last slice, float16, no affine, a large
// mean with a small spread, slices streamed (more than 16 chunks a
// thread); short rows keep one dispatch, and so do long ones with
// WGNN_GROUP_NORM_SPLIT=0 (one workgroup a row, streamed).
TEST(GroupNorm, SlicedRows) {
  wgnn::test::ScopedSetting env("WGNN_GROUP_NORM_SPLIT", "");  // the default
  run_group_norm({{1, 4, 128, 128}, 4, true, true, DType::F32}, 30);    // 4 rows of 4096 vec4s: 4 slices each
  run_group_norm({{1, 2, 65, 67}, 1, true, true, DType::F32}, 31);      // 8710 scalars: 8 slices, the last shorter
  run_group_norm({{2, 4, 128, 128}, 2, false, false, DType::F32}, 32);  // 8192 vec4s a row
  run_group_norm({{1, 2, 128, 128}, 2, true, true, DType::F32, 1e4f, 1e-2f}, 33);
  run_group_norm({{1, 1, 3072, 3072}, 1, true, true, DType::F32}, 34);  // 512 slices of 4608 vec4s
  run_group_norm({{1, 4, 128, 128}, 4, true, true, DType::F16}, 35);
  // Slices with different means (a ramp along the row): their merge's
  // between-slice term carries most of the variance.
  run_group_norm({{1, 2, 128, 128}, 2, true, true, DType::F32, 0, 0.1f, 8}, 36);
  auto labels = [](const Shape& shape, int64_t groups) {
    Graph g(ctx());
    TensorRef tx = upload(g, shape, std::vector<float>(size_t(numel(shape)), 1.f), DType::F32);
    ops::call(g, "aten.native_group_norm.default",
              {tx, None{}, None{}, shape[0], shape[1], numel(shape) / (shape[0] * shape[1]), groups, 1e-5});
    std::vector<std::string> l;
    for (const auto& n : g.dispatches()) l.push_back(n.label);
    return l;
  };
  EXPECT_THAT(labels({1, 4, 128, 128}, 4),
              testing::ElementsAre("group_norm 4 slices x 4 statistics", "group_norm 4 slices x 4 normalized"));
  EXPECT_EQ(labels({1, 4, 16, 16}, 4).size(), 1u);  // 64 vec4s a row: one dispatch
  {
    wgnn::test::ScopedSetting off("WGNN_GROUP_NORM_SPLIT", "0");
    EXPECT_THAT(labels({1, 4, 128, 128}, 4), testing::ElementsAre("group_norm tpr=256 cached16"));
    run_group_norm({{1, 4, 128, 128}, 4, true, true, DType::F32}, 37);
    run_group_norm({{1, 1, 256, 256}, 1, true, true, DType::F16}, 38);  // 64 chunks a thread, streamed
  }
  wgnn::test::ScopedSetting bad("WGNN_GROUP_NORM_SPLIT", "yes");
  EXPECT_THROW(labels({1, 4, 128, 128}, 4), Error);
}

// wgnn.instance_norm_activation and wgnn.batch_norm_activation
// (passes/fuse_norm_activation): the activation applied to what the plain
// op gives, bit for bit (the same kernels, the activation last), on rows in
// slices (4 rows of 4096 vec4s), one workgroup a row, scalar planes, and
// batch norm through instance norm's use_input_stats=False.
TEST(InstanceNorm, FusedActivationIsTheActivationOfThePlainOp) {
  for (const Shape& shape : {Shape{1, 4, 128, 128}, Shape{2, 3, 8, 8}, Shape{1, 2, 5, 7}}) {
    SCOPED_TRACE(shape_str(shape));
    const int64_t C = shape[1];
    Graph g(ctx());
    TensorRef tx = upload(g, shape, random_floats(size_t(numel(shape)), -3, 3, 80), DType::F32);
    TensorRef tw = constant(g, {C}, random_floats(size_t(C), 0.5f, 1.5f, 81), DType::F32);
    TensorRef tb = constant(g, {C}, random_floats(size_t(C), -1, 1, 82), DType::F32);
    TensorRef rm = constant(g, {C}, random_floats(size_t(C), -0.3f, 0.3f, 83), DType::F32);
    TensorRef rv = constant(g, {C}, random_floats(size_t(C), 0.2f, 2.f, 84), DType::F32);
    const ValueList in_args = {tx, tw, tb, None{}, None{}, true, 0.1, 1e-5, false};
    const ValueList bn_args = {tx, tw, tb, rm, rv, false, 0.1, 1e-5, false};
    TensorRef plain = ops::call(g, "aten.instance_norm.default", in_args).tensor();
    TensorRef plain_bn = ops::call(g, "aten.instance_norm.default", bn_args).tensor();
    auto with = [&](const ValueList& base, const char* act, double lo, double hi) {
      ValueList a = base;
      a.insert(a.end(), {std::string(act), lo, hi});
      return ops::call(g, "wgnn.instance_norm_activation.default", a).tensor();
    };
    TensorRef relu = with(in_args, "relu", 0, 0), clamp = with(in_args, "clamp", -0.5, 0.75),
              bn_relu = with(bn_args, "relu", 0, 0);
    for (TensorRef t : {plain, plain_bn, relu, clamp, bn_relu}) g.mark_output(t);
    g.run();
    const std::vector<float> p = g.read<float>(plain), pb = g.read<float>(plain_bn), r = g.read<float>(relu),
                             c = g.read<float>(clamp), br = g.read<float>(bn_relu);
    for (size_t i = 0; i < p.size(); ++i) {
      ASSERT_EQ(r[i], std::max(p[i], 0.0f)) << i;
      ASSERT_EQ(c[i], std::min(std::max(p[i], -0.5f), 0.75f)) << i;
      ASSERT_EQ(br[i], std::max(pb[i], 0.0f)) << i;
    }
  }
  Graph g(ctx());
  TensorRef tx = upload(g, {1, 2, 4, 4}, std::vector<float>(32, 1.f), DType::F32);
  EXPECT_THROW(ops::call(g, "wgnn.instance_norm_activation.default",
                         {tx, None{}, None{}, None{}, None{}, true, 0.1, 1e-5, false, std::string("swish"), 0.0, 0.0}),
               Error);
}

TEST(InstanceNorm, MatchesGroupNormPerChannel) {
  run_group_norm({{2, 3, 5, 7}, 3, true, true, DType::F32}, 20, true);
  run_group_norm({{2, 5, 8, 8}, 5, false, false, DType::F32}, 21, true);
  run_group_norm({{1, 4, 1000}, 4, true, true, DType::F32, 5e3f, 1e-2f}, 22, true);
  run_group_norm({{2, 3, 4, 4}, 3, true, true, DType::F16}, 23, true);
}

TEST(InstanceNorm, RunningStatsAreBatchNorm) {
  Graph g(ctx());
  const Shape s{2, 3, 4, 5};
  auto x = random_floats(120, -2, 2, 30);
  std::vector<float> m{0.5f, -1.f, 2.f}, v{1.f, 4.f, 0.25f}, w{1.f, 2.f, 3.f}, b{0.f, 1.f, -1.f};
  TensorRef y = ops::call(g, "aten.instance_norm.default",
                          {upload(g, s, x, DType::F32), constant(g, {3}, w, DType::F32), constant(g, {3}, b, DType::F32),
                           constant(g, {3}, m, DType::F32), constant(g, {3}, v, DType::F32), false, 0.1, 1e-5, false})
                    .tensor();
  g.run();
  std::vector<double> ref(120);
  for (size_t i = 0; i < 120; ++i) {
    const size_t ch = (i / 20) % 3;
    ref[i] = (x[i] - m[ch]) / std::sqrt(double(v[ch]) + 1e-5) * w[ch] + b[ch];
  }
  EXPECT_TRUE(all_close(download(g, y), ref, 1e-5, 1e-5));
}

TEST(GroupNorm, Errors) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({2, 6, 3, 3}, DType::F32, TensorKind::Input);
  TensorRef x1 = g.add_tensor({6}, DType::F32, TensorKind::Input);
  TensorRef w5 = g.add_tensor({5}, DType::F32, TensorKind::Input);
  TensorRef wh = g.add_tensor({6}, DType::F16, TensorKind::Input);
  TensorRef xi = g.add_tensor({2, 6, 3, 3}, DType::I32, TensorKind::Input);
  auto expect_error = [&](const char* op, const ValueList& args, const char* needle) {
    try {
      ops::call(g, op, args);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(op));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  const char* gn = "aten.native_group_norm.default";
  expect_error(gn, {x, None{}, None{}, 2, 6, 9, 4, 1e-5}, "'group' is 4");
  expect_error(gn, {x, None{}, None{}, 2, 6, 9, 0, 1e-5}, "'group' is 0");
  expect_error(gn, {x, None{}, None{}, 2, 6, 8, 3, 1e-5}, "do not describe input");
  expect_error(gn, {x, w5, None{}, 2, 6, 9, 3, 1e-5}, "'weight' has shape [5]");
  expect_error(gn, {x, None{}, wh, 2, 6, 9, 3, 1e-5}, "dtype float16");
  expect_error(gn, {x, None{}, None{}, 2, 6, 9, 3, -1.0}, "'eps'");
  expect_error(gn, {xi, None{}, None{}, 2, 6, 9, 3, 1e-5}, "int32");
  expect_error(gn, {x1, None{}, None{}, 1, 6, 1, 3, 1e-5}, "N x C");
  const char* in = "aten.instance_norm.default";
  expect_error(in, {x, None{}, None{}, None{}, None{}, false, 0.1, 1e-5, false}, "needs running_mean");
  expect_error(in, {x, w5, None{}, None{}, None{}, true, 0.1, 1e-5, false}, "'weight' has shape [5]");
}

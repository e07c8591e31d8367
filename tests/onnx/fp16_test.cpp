// float16 mode (SessionOptions::fp16): the host conversion, and whole models
// against a double-precision reference computed here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>
#include <random>

#include "gpu_fixture.h"
#include "graph/half.h"
#include "graph/host_tensor.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using onnx_import::Session;
using onnx_import::SessionOptions;
using wgnn::test::ModelBuilder;

namespace {

SessionOptions fp16_mode() {
  SessionOptions o;
  o.fp16 = true;
  return o;
}

std::vector<float> seeded(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

onnx::AttributeProto* attr(onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  return a;
}

}  // namespace

TEST(Fp16Conversion, SaturatesFiniteValuesBeyondTheHalfRange) {
  EXPECT_EQ(float_to_half_saturate(1.f), 0x3c00);
  EXPECT_EQ(float_to_half_saturate(-2.f), 0xc000);
  EXPECT_EQ(float_to_half_saturate(65504.f), 0x7bff);
  EXPECT_EQ(float_to_half_saturate(65519.f), 0x7bff);  // rounds down to the largest half
  EXPECT_EQ(float_to_half(65520.f), 0x7c00);          // plain conversion overflows here
  EXPECT_EQ(float_to_half_saturate(65520.f), 0x7bff);
  EXPECT_EQ(float_to_half_saturate(1e10f), 0x7bff);
  EXPECT_EQ(float_to_half_saturate(-std::numeric_limits<float>::max()), 0xfbff);  // torch.finfo(float32).min
  EXPECT_EQ(float_to_half_saturate(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half_saturate(-std::numeric_limits<float>::infinity()), 0xfc00);
  const uint16_t nan = float_to_half_saturate(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0) << std::hex << nan;
  EXPECT_EQ(float_to_half_saturate(1e-8f), float_to_half(1e-8f));  // subnormal range as usual
  EXPECT_EQ(half_to_float(float_to_half_saturate(0.1f)), half_to_float(float_to_half(0.1f)));
}

TEST(Fp16Conversion, HostTensorsOfFloat32Only) {
  HostTensor f(DType::F32, {2, 2});
  const float v[] = {0.5f, -3.4028235e38f, 70000.f, 3.f};
  std::memcpy(f.data.data(), v, sizeof v);
  HostTensor h = to_f16_saturated(f);
  ASSERT_EQ(h.dtype, DType::F16);
  EXPECT_EQ(h.shape, f.shape);
  EXPECT_EQ(h.get_double(0), 0.5);
  EXPECT_EQ(h.get_double(1), -65504.0);
  EXPECT_EQ(h.get_double(2), 65504.0);
  EXPECT_EQ(h.get_double(3), 3.0);
  HostTensor i(DType::I64, {3});
  i.as<int64_t>()[2] = int64_t(1) << 40;
  HostTensor j = to_f16_saturated(i);
  EXPECT_EQ(j.dtype, DType::I64);
  EXPECT_EQ(j.data, i.data);
}

// One attention block with the masks exporters write: a padding mask from
// int64 ids, Cast to float, (1 - m) * finfo(float32).min (0 * min must stay 0,
// not NaN), and a causal mask ConstantOfShape(finfo.min) -> Trilu folded on
// the host; softmax, a residual and LayerNormalization. In fp16 mode every
// float tensor of the graph is float16 except the graph's float32 input and
// outputs, and the outputs are within float16 accuracy of a double reference.
TEST(Fp16Session, MaskedAttentionMatchesADoubleReference) {
  if (!wgnn::test::ctx().features().shader_f16) GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks";

  constexpr int S = 6, D = 8;
  const float kMin = -std::numeric_limits<float>::max();
  ModelBuilder b;
  b.input("x", {1, S, D});
  b.input("mask", {1, S}, onnx::TensorProto::INT64);
  b.output("y", {1, S, D});
  b.output("p", {1, S, S});
  const auto wq = seeded(D * D, 1, 0.5f), wk = seeded(D * D, 2, 0.5f), wv = seeded(D * D, 3, 0.5f);
  const auto gamma = seeded(D, 4, 1.f), beta = seeded(D, 5, 0.2f);
  b.init_f32("Wq", {D, D}, wq);
  b.init_f32("Wk", {D, D}, wk, true);
  b.init_f32("Wv", {D, D}, wv);
  b.init_f32("gamma", {D}, gamma);
  b.init_f32("beta", {D}, beta);
  b.init_f32("scale", {}, {1.f / std::sqrt(float(D))});
  b.init_f32("one", {}, {1.f});
  b.init_f32("fmin", {}, {kMin});
  b.init_i64("ax1", {1});
  b.init_i64("ss", {S, S});
  b.init_i64("k1s", {});
  b.g->mutable_initializer(b.g->initializer_size() - 1)->add_int64_data(1);
  b.g->mutable_initializer(b.g->initializer_size() - 1)->clear_dims();
  b.node("MatMul", {"x", "Wq"}, {"q"});
  b.node("MatMul", {"x", "Wk"}, {"k"});
  b.node("MatMul", {"x", "Wv"}, {"v"});
  ModelBuilder::attr_ints(b.node("Transpose", {"k"}, {"kt"}), "perm", {0, 2, 1});
  b.node("MatMul", {"q", "kt"}, {"s0"});
  b.node("Mul", {"s0", "scale"}, {"s"});
  ModelBuilder::attr_int(b.node("Cast", {"mask"}, {"mf"}), "to", onnx::TensorProto::FLOAT);
  b.node("Sub", {"one", "mf"}, {"inv"});
  b.node("Mul", {"inv", "fmin"}, {"pm"});
  b.node("Unsqueeze", {"pm", "ax1"}, {"pm3"});
  auto* cos = b.node("ConstantOfShape", {"ss"}, {"full"});
  auto* val = attr(cos, "value");
  val->set_type(onnx::AttributeProto::TENSOR);
  val->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  val->mutable_t()->add_dims(1);
  val->mutable_t()->add_float_data(kMin);
  b.node("Trilu", {"full", "k1s"}, {"causal"});  // upper, k = 1: above the diagonal
  b.node("Add", {"s", "pm3"}, {"s1"});
  b.node("Add", {"s1", "causal"}, {"s2"});
  ModelBuilder::attr_int(b.node("Softmax", {"s2"}, {"p"}), "axis", -1);
  b.node("MatMul", {"p", "v"}, {"o"});
  b.node("Add", {"o", "x"}, {"r"});
  ModelBuilder::attr_int(b.node("LayerNormalization", {"r", "gamma", "beta"}, {"y"}), "axis", -1);
  const std::string path = b.save("fp16_attention.onnx");

  HostTensor x(DType::F32, {1, S, D});
  const auto xv = seeded(S * D, 6, 2.f);
  std::memcpy(x.data.data(), xv.data(), xv.size() * 4);
  HostTensor mask(DType::I64, {1, S});
  const int64_t mv[S] = {1, 1, 1, 1, 0, 0};  // the last two positions are padding
  std::memcpy(mask.data.data(), mv, sizeof mv);

  // The reference, in double, with the float32 model's mask values.
  auto mm = [](const std::vector<double>& a, const std::vector<float>& w) {
    std::vector<double> o(S * D, 0.0);
    for (int i = 0; i < S; ++i)
      for (int j = 0; j < D; ++j)
        for (int k = 0; k < D; ++k) o[i * D + j] += a[i * D + k] * double(w[k * D + j]);
    return o;
  };
  const std::vector<double> xd(xv.begin(), xv.end());
  const auto q = mm(xd, wq), k = mm(xd, wk), v = mm(xd, wv);
  std::vector<double> p_ref(S * S), y_ref(S * D);
  for (int i = 0; i < S; ++i) {
    std::vector<double> s(S);
    double mx = -INFINITY;
    for (int j = 0; j < S; ++j) {
      double d = 0;
      for (int c = 0; c < D; ++c) d += q[i * D + c] * k[j * D + c];
      s[j] = d / std::sqrt(double(D)) + (1.0 - double(mv[j])) * double(kMin) + (j > i ? double(kMin) : 0.0);
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (int j = 0; j < S; ++j) sum += (p_ref[i * S + j] = std::exp(s[j] - mx));
    for (int j = 0; j < S; ++j) p_ref[i * S + j] /= sum;
    std::vector<double> r(D);
    double mean = 0, var = 0;
    for (int c = 0; c < D; ++c) {
      r[c] = xd[i * D + c];
      for (int j = 0; j < S; ++j) r[c] += p_ref[i * S + j] * v[j * D + c];
      mean += r[c] / D;
    }
    for (int c = 0; c < D; ++c) var += (r[c] - mean) * (r[c] - mean) / D;
    for (int c = 0; c < D; ++c) y_ref[i * D + c] = (r[c] - mean) / std::sqrt(var + 1e-5) * gamma[c] + beta[c];
  }

  auto max_err = [](const HostTensor& got, const std::vector<double>& want, double* ref_max) {
    double e = 0, r = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double g = got.get_double(i);
      e = std::isnan(g) ? INFINITY : std::max(e, std::abs(g - want[i]));
      r = std::max(r, std::abs(want[i]));
    }
    *ref_max = r;
    return e;
  };

  Session s32(test::ctx(), path);
  auto out32 = s32.run({{"x", x}, {"mask", mask}});
  double ry = 0, rp = 0;
  EXPECT_LE(max_err(out32.at("y"), y_ref, &ry), 1e-4) << "float32 against the reference";

  Session s16(test::ctx(), path, fp16_mode());
  auto out16 = s16.run({{"x", x}, {"mask", mask}});
  ASSERT_EQ(out16.at("y").dtype, DType::F32);
  ASSERT_EQ(out16.at("p").dtype, DType::F32);
  const double ey = max_err(out16.at("y"), y_ref, &ry), ep = max_err(out16.at("p"), p_ref, &rp);
  std::printf("fp16 attention: y max abs err %.3g (max |ref| %.3g), p %.3g (max |ref| %.3g)\n", ey, ry, ep, rp);
  EXPECT_LE(ey, 1e-2 * ry + 1e-3);
  EXPECT_LE(ep, 1e-2 * rp + 1e-3);
  EXPECT_GT(ey, 0.0) << "bit-identical to float64: float16 mode did not take effect";
  // Masked probabilities are exactly 0 (no NaN from 0 * finfo.min).
  for (int i = 0; i < S; ++i)
    for (int j = 0; j < S; ++j)
      if (j > i || mv[j] == 0) EXPECT_EQ(out16.at("p").get_double(size_t(i * S + j)), 0.0) << i << "," << j;

  // Every float tensor of the graph is float16 except the float32 input x
  // (cast at entry), the two outputs (cast back) and layer_norm's mean and
  // rstd statistics ([1, S, 1], float32 by design, unused here).
  const Graph& g = s16.graph();
  int io_f32 = 0, stats_f32 = 0, f16_tensors = 0;
  for (size_t t = 0; t < g.tensor_count(); ++t) {
    const TensorInfo& ti = g.info(TensorRef{int(t)});
    if (ti.dtype == DType::F16) ++f16_tensors;
    if (ti.dtype != DType::F32) continue;
    if (ti.kind == TensorKind::Input || ti.kind == TensorKind::Output) {
      ++io_f32;
    } else {
      ++stats_f32;
      EXPECT_EQ(ti.shape, Shape({1, S, 1})) << "float32 tensor '" << ti.name << "' is not a layer_norm statistic";
    }
  }
  EXPECT_EQ(io_f32, 3);
  EXPECT_EQ(stats_f32, 2);
  EXPECT_GT(f16_tensors, 15);
}

// float16 tensors the model declares stay float16; a Cast to float32 makes
// float16 inside the graph and the declared float32 output is float32.
TEST(Fp16Session, DeclaredDtypesAreKept) {
  if (!wgnn::test::ctx().features().shader_f16) GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks";

  ModelBuilder b;
  b.input("h", {4}, onnx::TensorProto::FLOAT16);
  b.output("r", {4}, onnx::TensorProto::FLOAT16);
  b.output("f", {4});
  b.node("Relu", {"h"}, {"r"});
  ModelBuilder::attr_int(b.node("Cast", {"h"}, {"hc"}), "to", onnx::TensorProto::FLOAT);
  b.init_f32("two", {}, {2.f});
  b.node("Mul", {"hc", "two"}, {"f"});
  Session s(test::ctx(), b.save("fp16_dtypes.onnx"), fp16_mode());
  HostTensor h(DType::F16, {4});
  const float hv[] = {-1.5f, 0.25f, 3.f, 1000.f};
  for (int i = 0; i < 4; ++i) h.as<uint16_t>()[i] = float_to_half(hv[i]);
  auto out = s.run({{"h", h}});
  ASSERT_EQ(out.at("r").dtype, DType::F16);
  ASSERT_EQ(out.at("f").dtype, DType::F32);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out.at("r").get_double(size_t(i)), std::max(0.0, double(hv[i])));
    EXPECT_EQ(out.at("f").get_double(size_t(i)), 2.0 * hv[i]);
  }
}

// LayerNormalization's Mean output (float32 in the model) is float16 inside
// the graph, so ops mixing it with the normalized output work, and as a
// graph output it is cast back to float32.
TEST(Fp16Session, LayerNormStatisticsFollowTheMode) {
  if (!wgnn::test::ctx().features().shader_f16) GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks";

  ModelBuilder b;
  b.input("x", {2, 4});
  b.output("z", {2, 4});
  b.output("m", {2, 1});
  b.init_f32("s", {4}, {1, 1, 1, 1});
  b.init_f32("b", {4}, {0, 0, 0, 0});
  ModelBuilder::attr_int(b.node("LayerNormalization", {"x", "s", "b"}, {"y", "m"}), "axis", -1);
  b.node("Add", {"y", "m"}, {"z"});
  Session s(test::ctx(), b.save("fp16_ln_stats.onnx"), fp16_mode());
  HostTensor x(DType::F32, {2, 4});
  const float xv[] = {1, 2, 3, 4, -8, 0, 8, 16};
  std::memcpy(x.data.data(), xv, sizeof xv);
  auto out = s.run({{"x", x}});
  ASSERT_EQ(out.at("m").dtype, DType::F32);
  ASSERT_EQ(out.at("z").dtype, DType::F32);
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < 4; ++c) mean += xv[r * 4 + c] / 4.0;
    for (int c = 0; c < 4; ++c) var += (xv[r * 4 + c] - mean) * (xv[r * 4 + c] - mean) / 4.0;
    EXPECT_NEAR(out.at("m").get_double(size_t(r)), mean, 1e-3 * std::abs(mean) + 1e-3);
    for (int c = 0; c < 4; ++c) {
      const double want = (xv[r * 4 + c] - mean) / std::sqrt(var + 1e-5) + mean;
      EXPECT_NEAR(out.at("z").get_double(size_t(r * 4 + c)), want, 1e-2 * 4 + 1e-3) << r << "," << c;
    }
  }
}

// Constant BatchNormalization parameters stay float32 in fp16 mode (the op
// folds them into a float32 scale and shift): a mean of 100.01 would round
// to 100.0 in float16, which with a variance of 1e-4 shifts the output by 1.
TEST(Fp16Session, BatchNormParametersStayFloat32) {
  if (!wgnn::test::ctx().features().shader_f16) GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks";

  ModelBuilder b;
  b.input("x", {1, 2, 2, 2});
  b.output("y", {1, 2, 2, 2});
  b.init_f32("scale", {2}, {1.f, 0.5f});
  b.init_f32("bias", {2}, {0.f, 1.f});
  b.init_f32("mean", {2}, {100.01f, -0.5f});
  b.init_f32("var", {2}, {1e-4f, 2.f});
  b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"});
  Session s(test::ctx(), b.save("fp16_bn.onnx"), fp16_mode());
  HostTensor x(DType::F32, {1, 2, 2, 2});
  const float xv[] = {100.f, 100.f, 100.f, 100.f, 1.f, -2.f, 0.5f, 3.f};  // exact in float16
  std::memcpy(x.data.data(), xv, sizeof xv);
  auto y = s.run({{"x", x}}).at("y");
  const double sc[] = {1, 0.5}, bi[] = {0, 1}, mu[] = {100.01f, -0.5}, va[] = {1e-4f, 2};
  for (int i = 0; i < 8; ++i) {
    const int c = i / 4;
    const double want = (xv[i] - mu[c]) / std::sqrt(va[c] + 1e-5) * sc[c] + bi[c];  // -0.95 for channel 0
    EXPECT_NEAR(y.get_double(size_t(i)), want, 1e-2 * std::abs(want) + 1e-3) << i;
  }
  int f32_constants = 0;
  const Graph& g = s.graph();
  for (size_t t = 0; t < g.tensor_count(); ++t) {
    const TensorInfo& ti = g.info(TensorRef{int(t)});
    f32_constants += ti.kind == TensorKind::Constant && ti.dtype == DType::F32;
  }
  EXPECT_EQ(f32_constants, 4);
}

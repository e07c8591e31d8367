// float16 models on an adapter without shader-f16 (Session::widens_f16): a
// Context requested with WebGPU's default limits has no shader-f16, so the
// model's float16 values live as float32 on the GPU and each Cast to
// float16 rounds. Checked against a reference computed here with Imath's
// IEEE float16 conversion, and against the same model on the test binary's
// shader-f16 Context where lavapipe offers it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "error_of.h"
#include "gpu_fixture.h"
#include "graph/half.h"
#include "graph/host_tensor.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"
#include "ops/registry.h"

using namespace wgnn;
using onnx_import::Session;
using onnx_import::SessionOptions;
using wgnn::test::ModelBuilder;

namespace {

// A Context as a browser or a small GPU gives it: WebGPU's default limits,
// no shader-f16, no subgroups. One per test binary.
gpu::Context& default_ctx() {
  static gpu::Context* c = [] {
    gpu::ContextOptions o;
    o.limits = "default";
    return new gpu::Context(o);
  }();
  return *c;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// x -> Cast(f16) -> Mul(w16) -> Add(b16) -> [y16: a float16 output]
//                                        -> Cast(f32) -> Relu -> [y32]
// plus a float16 input z16 added to w16 -> [z_out] (float16).
std::string mixed_model() {
  ModelBuilder b;
  b.input("x", {2, 8});
  b.input("z16", {8}, onnx::TensorProto::FLOAT16);
  b.output("y16", {2, 8}, onnx::TensorProto::FLOAT16);
  b.output("y32", {2, 8});
  b.output("z_out", {8}, onnx::TensorProto::FLOAT16);
  auto f16_init = [&](const std::string& n, const std::vector<float>& v) {
    auto* t = b.g->add_initializer();
    t->set_name(n);
    t->set_data_type(onnx::TensorProto::FLOAT16);
    t->add_dims(int64_t(v.size()));
    std::string raw;
    for (float x : v) {
      const uint16_t h = float_to_half(x);
      raw.append(reinterpret_cast<const char*>(&h), 2);
    }
    t->set_raw_data(raw);
  };
  std::vector<float> w(8), bias(8);
  for (int i = 0; i < 8; ++i) w[size_t(i)] = 0.3f + 0.17f * float(i), bias[size_t(i)] = -1.1f + 0.29f * float(i);
  f16_init("w16", w);
  f16_init("b16", bias);
  ModelBuilder::attr_int(b.node("Cast", {"x"}, {"x16"}), "to", onnx::TensorProto::FLOAT16);
  b.node("Mul", {"x16", "w16"}, {"m16"});
  b.node("Add", {"m16", "b16"}, {"y16"});
  ModelBuilder::attr_int(b.node("Cast", {"y16"}, {"y32f"}), "to", onnx::TensorProto::FLOAT);
  b.node("Relu", {"y32f"}, {"y32"});
  b.node("Add", {"z16", "w16"}, {"z_out"});
  return b.save("f16_storage_mixed.onnx");
}

}  // namespace

TEST(F16Storage, DefaultLimitsGiveNoShaderF16AndWebGPUDefaults) {
  gpu::Context& c = default_ctx();
  EXPECT_EQ(c.limits_mode(), "default");
  EXPECT_FALSE(c.features().shader_f16);
  EXPECT_FALSE(c.features().subgroups);
  EXPECT_EQ(c.limits().max_storage_buffer_binding_size, 128ull << 20);
  EXPECT_EQ(c.limits().max_buffer_size, 256ull << 20);
  EXPECT_EQ(c.limits().max_compute_workgroup_storage_size, 16384u);
  EXPECT_EQ(c.limits().max_compute_invocations_per_workgroup, 256u);
}

TEST(F16Storage, JunkLimitsModeIsAnError) {
  gpu::ContextOptions o;
  o.limits = "small";
  EXPECT_THAT(test::error_of([&] { gpu::Context c(o); }),
              testing::HasSubstr("limits must be 'adapter' or 'default' (WGNN_LIMITS), not 'small'"));
}

TEST(F16Storage, RoundToF16MatchesIEEEConversionAtTheEdges) {
  Graph g(default_ctx());
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.f,        -0.f,       1.f,        1.0009765625f, 1.00048828125f,  // halfway: to even
                          1.00048828126f, 65504.f, 65519.99f, 65520.f,     -65520.f,       1e6f,
                          -3.4e38f,   inf,        -inf,       nan,           1e-8f,          2.98023224e-08f,
                          2.98023225e-08f, 5.96e-8f, 6.1e-5f, 6.103515625e-05f, -0.1f,       3.14159265f,
                          2049.f,     2051.f,     4097.f,     1e-30f};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-70000.f, 70000.f);
  for (int i = 0; i < 997; ++i) v.push_back(u(rng) * (i % 3 == 0 ? 1e-4f : 1.f));
  TensorRef x = g.add_tensor({int64_t(v.size())}, DType::F32, TensorKind::Input);
  g.write(x, v.data(), v.size() * 4);
  TensorRef y = ops::call(g, "wgnn.round_to_f16.default", {x}).tensor();
  g.run();
  const std::vector<float> got = g.read<float>(y);
  ASSERT_EQ(got.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float want = half_to_float(float_to_half(v[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE((bits(got[i]) & 0x7f800000u) == 0x7f800000u && (bits(got[i]) & 0x7fffffu) != 0) << i;
    } else {
      EXPECT_EQ(bits(got[i]), bits(want)) << "v[" << i << "] = " << v[i] << ": got " << got[i] << ", want " << want;
    }
  }
}

TEST(F16Storage, RoundToF16TakesFloat32Only) {
  Graph g(default_ctx());
  TensorRef x = g.add_tensor({4}, DType::I32, TensorKind::Input);
  EXPECT_THAT(test::error_of([&] { ops::call(g, "wgnn.round_to_f16.default", {x}); }),
              testing::HasSubstr("argument 'self' must be float32"));
}

TEST(F16Storage, MixedModelMatchesTheFloat16Reference) {
  const std::string path = mixed_model();
  Session s(default_ctx(), path);
  EXPECT_TRUE(s.widens_f16());
  EXPECT_TRUE(s.uses_f16());
  HostTensor x(DType::F32, {2, 8}), z(DType::F16, {8});
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  for (int i = 0; i < 16; ++i) x.as<float>()[i] = u(rng);
  x.as<float>()[3] = 70000.f;  // overflows float16 at the Cast: inf, then inf * w + b
  for (int i = 0; i < 8; ++i) z.as<uint16_t>()[i] = float_to_half(u(rng));
  auto out = s.run({{"x", x}, {"z16", z}});
  ASSERT_EQ(out.at("y16").dtype, DType::F16);
  ASSERT_EQ(out.at("y32").dtype, DType::F32);
  ASSERT_EQ(out.at("z_out").dtype, DType::F16);
  // The reference: Casts round as IEEE float16 conversions; the Mul and Add
  // run in float32 on float16 operands; outputs narrow to float16.
  auto h = [](float f) { return half_to_float(float_to_half(f)); };
  for (int i = 0; i < 16; ++i) {
    const int c = i % 8;
    const float w = h(0.3f + 0.17f * float(c)), b = h(-1.1f + 0.29f * float(c));
    const float y = h(x.as<float>()[i]) * w + b;
    EXPECT_EQ(out.at("y16").as<uint16_t>()[i], float_to_half(y)) << i;
    const float want32 = std::max(y, 0.f);
    EXPECT_EQ(bits(out.at("y32").as<float>()[i]), bits(want32)) << i << ": " << out.at("y32").as<float>()[i];
  }
  EXPECT_TRUE(std::isinf(out.at("y32").as<float>()[3]));
  for (int i = 0; i < 8; ++i) {
    const float want = half_to_float(z.as<uint16_t>()[i]) + h(0.3f + 0.17f * float(i));
    EXPECT_EQ(out.at("z_out").as<uint16_t>()[i], float_to_half(want)) << i;
  }
  // A second run reuses the graph and its widened staging.
  auto again = s.run({{"x", x}, {"z16", z}});
  EXPECT_EQ(s.builds(), 1);
  EXPECT_EQ(again.at("y16").data, out.at("y16").data);
  EXPECT_THAT(s.summary(), testing::HasSubstr("float16 values stored as float32"));
}

TEST(F16Storage, AgreesWithShaderF16StorageWithinFloat16Rounding) {
  if (!test::ctx().features().shader_f16) GTEST_SKIP() << "this adapter has no shader-f16 to compare with";
  const std::string path = mixed_model();
  Session wide(default_ctx(), path), native(test::ctx(), path);
  EXPECT_FALSE(native.widens_f16());
  HostTensor x(DType::F32, {2, 8}), z(DType::F16, {8});
  for (int i = 0; i < 16; ++i) x.as<float>()[i] = 0.37f * float(i) - 2.9f;
  for (int i = 0; i < 8; ++i) z.as<uint16_t>()[i] = float_to_half(0.5f * float(i) - 1.7f);
  auto a = wide.run({{"x", x}, {"z16", z}}), b = native.run({{"x", x}, {"z16", z}});
  for (const char* name : {"y16", "z_out"}) {
    const HostTensor &ta = a.at(name), &tb = b.at(name);
    for (int64_t i = 0; i < ta.numel(); ++i) {
      const float va = half_to_float(ta.as<uint16_t>()[i]), vb = half_to_float(tb.as<uint16_t>()[i]);
      // Native float16 storage rounds the product before the add: at most
      // one float16 ulp of |x w| plus one of the result apart.
      EXPECT_NEAR(va, vb, 2e-3f * (1.f + std::abs(vb))) << name << "[" << i << "]";
    }
  }
}

TEST(F16Storage, Float16ModeSaysItCannotRun) {
  const std::string path = mixed_model();
  SessionOptions o;
  o.fp16 = true;
  EXPECT_THAT(test::error_of([&] { Session s(default_ctx(), path, o); }),
              testing::AllOf(testing::HasSubstr("float16 mode needs the shader-f16 feature"),
                             testing::HasSubstr("requested with WebGPU's default limits"),
                             testing::HasSubstr("stored as float32")));
}

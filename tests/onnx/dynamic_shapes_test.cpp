// Results whose size depends on the data, in a Session: NonZero's count is
// computed on the GPU and read back (a probe plan, then the plan for that
// count, each built once per count); the same node folds on the host when
// its input is a constant; a window's size read back from the GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "gpu_fixture.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using onnx_import::Session;
using testing::HasSubstr;
using wgnn::test::ModelBuilder;

namespace {

HostTensor f32(std::vector<float> v) {
  HostTensor t(DType::F32, {int64_t(v.size())});
  std::copy(v.begin(), v.end(), t.as<float>());
  return t;
}

std::vector<int64_t> ints(const HostTensor& t) { return {t.as<int64_t>(), t.as<int64_t>() + t.numel()}; }

}  // namespace

TEST(DynamicShapes, NonZeroCountIsReadBackAndEachPlanBuiltOnce) {
  ModelBuilder b(13);
  b.input("x", {5});
  b.output("y", {1, -1}, onnx::TensorProto::INT64);
  b.node("NonZero", {"x"}, {"y"});
  Session s(test::ctx(), b.save("nonzero_gpu.onnx"));
  HostTensor y = s.run({{"x", f32({0, 2, 0, -1, 3})}}).at("y");
  EXPECT_EQ(y.shape, (Shape{1, 3}));
  EXPECT_EQ(ints(y), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(s.builds(), 2);  // the probe computing the count, then the plan for 3
  EXPECT_THAT(s.summary(), HasSubstr("1 result size that depends on the data read back from the GPU"));
  y = s.run({{"x", f32({5, 0, 0, 0, 4})}}).at("y");
  EXPECT_EQ(ints(y), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(s.builds(), 3);  // a new count: one new plan
  y = s.run({{"x", f32({0, 7, 0, 1, 1})}}).at("y");
  EXPECT_EQ(ints(y), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(s.builds(), 3);
  y = s.run({{"x", f32({0, 0, 0, 0, 0})}}).at("y");
  EXPECT_EQ(y.shape, (Shape{1, 0}));
}

TEST(DynamicShapes, NonZeroOfAConstantFoldsOnTheHost) {
  ModelBuilder b(13);
  b.input("x", {2});
  b.output("y", {-1}, onnx::TensorProto::INT64);
  b.output("z", {2});
  b.init_f32("c", {2, 2}, {0.f, 1.f, 2.f, 0.f});
  b.node("NonZero", {"c"}, {"nz"});
  b.init_i64("shape", {-1});
  b.node("Reshape", {"nz", "shape"}, {"y"});
  b.node("Relu", {"x"}, {"z"});
  Session s(test::ctx(), b.save("nonzero_host.onnx"));
  const auto out = s.run({{"x", f32({1, -1})}});
  EXPECT_EQ(ints(out.at("y")), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(s.builds(), 1);  // no probe
  EXPECT_THAT(s.summary(), testing::Not(HasSubstr("read back")));
}

TEST(DynamicShapes, WindowSizeComputedOnTheGpuIsReadBack) {
  ModelBuilder b(17);
  b.input("x", {4});
  b.output("w", {-1});
  auto* sum = b.node("ReduceSum", {"x"}, {"s"});
  ModelBuilder::attr_int(sum, "keepdims", 0);
  auto* cast = b.node("Cast", {"s"}, {"n"});
  ModelBuilder::attr_int(cast, "to", onnx::TensorProto::INT64);
  auto* w = b.node("HannWindow", {"n"}, {"w"});
  ModelBuilder::attr_int(w, "periodic", 0);
  Session s(test::ctx(), b.save("hann_gpu.onnx"));
  const HostTensor y = s.run({{"x", f32({1, 1, 2, 1})}}).at("w");  // size 5, symmetric
  ASSERT_EQ(y.shape, (Shape{5}));
  const std::vector<float> want{0.f, 0.5f, 1.f, 0.5f, 0.f};
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(y.as<float>()[i], want[i], 1e-6) << i;
  EXPECT_THAT(s.summary(), HasSubstr("1 result size that depends on the data read back"));
}

TEST(DynamicShapes, CompressOnAConditionComputedOnTheGpu) {
  ModelBuilder b(13);
  b.input("x", {2, 3});
  b.input("s", {3});
  b.output("y", {2, -1});
  b.init_f32("zero", {}, {0.f});
  b.node("Greater", {"s", "zero"}, {"cond"});
  auto* n = b.node("Compress", {"x", "cond"}, {"y"});
  ModelBuilder::attr_int(n, "axis", 1);
  Session s(test::ctx(), b.save("compress_gpu.onnx"));
  HostTensor x(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) x.as<float>()[i] = float(i + 1);
  const HostTensor y = s.run({{"x", x}, {"s", f32({1, -1, 2})}}).at("y");
  ASSERT_EQ(y.shape, (Shape{2, 2}));
  EXPECT_EQ(std::vector<float>(y.as<float>(), y.as<float>() + 4), (std::vector<float>{1, 3, 4, 6}));
  EXPECT_THAT(s.summary(), HasSubstr("1 result size that depends on the data read back"));
}

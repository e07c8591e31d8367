// Session::set_input_shape: a model declared at one size run at another.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "error_of.h"
#include "gpu_fixture.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using wgnn::test::error_of;
using onnx_import::Session;
using test::ModelBuilder;
using testing::HasSubstr;

namespace {

HostTensor ramp(const Shape& s) {
  HostTensor t(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = float(i % 7) - 3.f;
  return t;
}

}  // namespace

TEST(SessionInputShape, AFixedSizeModelRunsAtAnotherSize) {
  ModelBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.output("y", {1, 2, 4, 4});
  b.node("Relu", {"x"}, {"y"});
  Session s(test::ctx(), b.save("fixed_relu.onnx"));
  EXPECT_THAT(error_of([&] { s.run({{"x", ramp({1, 2, 6, 3})}}); }), HasSubstr("the model declares [1, 2, 4, 4]"));

  s.set_input_shape("x", {1, 2, -1, -1});
  EXPECT_EQ(s.inputs()[0].shape, (Shape{1, 2, -1, -1}));
  const HostTensor x = ramp({1, 2, 6, 3});
  const HostTensor y = s.run({{"x", x}}).at("y");
  ASSERT_EQ(y.shape, (Shape{1, 2, 6, 3}));
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.as<float>()[i], std::max(0.f, x.as<float>()[i])) << i;
  EXPECT_THAT(error_of([&] { s.run({{"x", ramp({1, 3, 6, 3})}}); }), HasSubstr("[1, 2, -1, -1]"));

  EXPECT_THAT(error_of([&] { s.set_input_shape("x", {1, 2, 4}); }), HasSubstr("has rank 4"));
  EXPECT_THAT(error_of([&] { s.set_input_shape("z", {1}); }), HasSubstr("'z' is not an input"));
}

// A declared rank is checked, rank 0 (a scalar) too, as ONNX Runtime does;
// an input declared without a shape takes any rank.
TEST(SessionInputShape, AScalarInputRefusesOtherRanks) {
  ModelBuilder b;
  b.input("x", {});
  b.output("y", {});
  b.node("Relu", {"x"}, {"y"});
  Session s(test::ctx(), b.save("scalar_relu.onnx"));
  ASSERT_TRUE(s.inputs()[0].ranked);
  EXPECT_THAT(error_of([&] { s.run({{"x", ramp({1})}}); }), HasSubstr("input 'x' has shape [1]; the model declares []"));
  const HostTensor y = s.run({{"x", ramp({})}}).at("y");
  EXPECT_EQ(y.shape, Shape{});

  ModelBuilder u;
  u.input("x", {});
  u.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  u.output("y", {});
  u.g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  u.node("Relu", {"x"}, {"y"});
  Session su(test::ctx(), u.save("unranked_relu.onnx"));
  EXPECT_FALSE(su.inputs()[0].ranked);
  EXPECT_EQ(su.run({{"x", ramp({2, 3})}}).at("y").shape, (Shape{2, 3}));
}

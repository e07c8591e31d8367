// Results whose size depends on the data, in a Session: NonZero's count is
// computed on the GPU and read back (a probe plan, then the plan for that
// count, each built once per count); the same node folds on the host when
// its input is a constant; a window's size read back from the GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fmt/format.h>

#include <functional>
#include <map>

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

namespace {

// The same one-node model twice: its float data `data` [shape] as an
// initializer (the node folds on the host) and as a graph input (the GPU
// ops and a read-back); every output must be equal, bit for bit.
void fold_matches_gpu(const std::string& op, const Shape& shape, const std::vector<float>& data,
                      const std::function<void(ModelBuilder&, bool)>& rest, const std::vector<std::string>& outs,
                      const std::function<void(onnx::NodeProto*)>& attrs) {
  std::map<std::string, HostTensor> got[2];
  for (const bool host : {true, false}) {
    ModelBuilder b(13);
    b.input("x", {1});
    b.output("xr", {1});
    b.node("Relu", {"x"}, {"xr"});
    if (host) {
      b.init_f32("d", shape, data);
    } else {
      b.input("d", shape);
    }
    rest(b, host);
    std::vector<std::string> in{"d"};
    for (const auto& n : b.g->initializer())
      if (n.name() != "d") in.push_back(n.name());
    for (const auto& o : outs) b.output(o, {-1}, o == "Y" ? onnx::TensorProto::FLOAT : onnx::TensorProto::INT64);
    attrs(b.node(op, in, outs));
    Session s(test::ctx(), b.save(op + (host ? "_host.onnx" : "_gpu.onnx")));
    std::map<std::string, HostTensor> feeds{{"x", f32({1})}};
    if (!host) {
      HostTensor d(DType::F32, shape);
      std::copy(data.begin(), data.end(), d.as<float>());
      feeds["d"] = d;
    }
    got[host] = s.run(feeds);
    if (host) {
      EXPECT_THAT(s.summary(), testing::Not(HasSubstr("read back"))) << op;
    } else {
      EXPECT_THAT(s.summary(), HasSubstr("read back from the GPU")) << op;
    }
  }
  for (const auto& o : outs) {
    SCOPED_TRACE(op + " output " + o);
    const HostTensor &a = got[1].at(o), &b = got[0].at(o);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.dtype, b.dtype);
    EXPECT_EQ(a.data, b.data);
    EXPECT_GT(a.numel(), 0);
  }
}

}  // namespace

TEST(DynamicShapes, UniqueFoldedOnTheHostMatchesTheGpu) {
  const std::vector<float> d{1, 2, 3, 0, 5, 1, 1, 2, 3, -1, 0, 4, 0, 5, 1, 7, 7, 7};
  for (const bool sorted : {true, false}) {
    for (const int64_t axis : {-1, 0, 1}) {
      SCOPED_TRACE(fmt::format("sorted {} axis {}", sorted, axis));
      fold_matches_gpu(
          "Unique", {6, 3}, d, [](ModelBuilder&, bool) {}, {"Y", "indices", "inverse_indices", "counts"},
          [&](onnx::NodeProto* n) {
            ModelBuilder::attr_int(n, "sorted", sorted);
            if (axis >= 0) ModelBuilder::attr_int(n, "axis", axis);
          });
    }
  }
}

TEST(DynamicShapes, NonMaxSuppressionFoldedOnTheHostMatchesTheGpu) {
  std::vector<float> boxes;
  for (int i = 0; i < 10; ++i) {
    const float o = float(i % 4) * 0.3f, w = 1.f + float(i % 3) * 0.2f;
    boxes.insert(boxes.end(), {o, o * 0.5f, o + w, o * 0.5f + w});
  }
  std::vector<float> scores;
  for (int i = 0; i < 20; ++i) scores.push_back(float((i * 7) % 11) / 11.f);
  for (const int64_t center : {0, 1}) {
    SCOPED_TRACE(fmt::format("center_point_box {}", center));
    // boxes as "d"; scores, max_output_boxes_per_class, iou and score thresholds as initializers.
    fold_matches_gpu(
        "NonMaxSuppression", {1, 10, 4}, boxes,
        [&](ModelBuilder& b, bool host) {
          (void)host;
          b.init_f32("scores", {1, 2, 10}, scores);
          b.init_i64("max_out", {4});
          b.init_f32("iou", {1}, {0.4f});
          b.init_f32("score", {1}, {0.1f});
        },
        {"selected"}, [&](onnx::NodeProto* n) { ModelBuilder::attr_int(n, "center_point_box", center); });
  }
}

TEST(DynamicShapes, CompressOfConstantsFoldsOnTheHost) {
  ModelBuilder b(13);
  b.input("x", {1});
  b.output("xr", {1});
  b.node("Relu", {"x"}, {"xr"});
  b.output("y", {-1});
  b.output("z", {-1, -1});
  b.init_f32("d", {2, 3}, {1, 2, 3, 4, 5, 6});
  auto* t = b.g->add_initializer();
  t->set_name("cond");
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_dims(3);
  for (int v : {0, 1, 1}) t->add_int32_data(v);
  b.node("Compress", {"d", "cond"}, {"y"});  // flattened: the first 3 values
  auto* n = b.node("Compress", {"d", "cond"}, {"z"});
  ModelBuilder::attr_int(n, "axis", 1);
  Session s(test::ctx(), b.save("compress_host.onnx"));
  const auto out = s.run({{"x", f32({1})}});
  EXPECT_EQ(std::vector<float>(out.at("y").as<float>(), out.at("y").as<float>() + 2), (std::vector<float>{2, 3}));
  EXPECT_EQ(out.at("z").shape, (Shape{2, 2}));
  EXPECT_EQ(std::vector<float>(out.at("z").as<float>(), out.at("z").as<float>() + 4),
            (std::vector<float>{2, 3, 5, 6}));
  EXPECT_THAT(s.summary(), testing::Not(HasSubstr("read back")));
}

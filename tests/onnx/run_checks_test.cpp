// Run-time rules through Sessions: Gather indices out of range and integer
// division by zero fail the run naming the node (SessionOptions::checked,
// on by default), and ReduceLogSumExp keeps infinities as ONNX Runtime does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "gpu_fixture.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using namespace wgnn::onnx_import;
using testing::HasSubstr;
using wgnn::test::ctx;
using wgnn::test::ModelBuilder;
using Tensors = std::map<std::string, HostTensor>;

namespace {

HostTensor i64(const Shape& s, const std::vector<int64_t>& v) {
  HostTensor t(DType::I64, s);
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

HostTensor f32(const Shape& s, const std::vector<float>& v) {
  HostTensor t(DType::F32, s);
  for (size_t i = 0; i < v.size(); ++i) t.as<float>()[i] = v[i];
  return t;
}

std::string run_error(Session& s, const Tensors& in) {
  try {
    s.run(in);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(RunChecks, GatherIndexOutOfRangeNamesTheNode) {
  ModelBuilder b;
  b.input("idx", {3}, onnx::TensorProto::INT64);
  b.init_f32("table", {5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  b.output("y", {3, 2});
  b.node("Gather", {"table", "idx"}, {"y"})->set_name("lookup");
  const std::string path = b.save("gather_range.onnx");
  {
    Session s(ctx(), path);
    EXPECT_THAT(run_error(s, {{"idx", i64({3}, {0, 7, 1})}}),
                HasSubstr("node 'lookup' (Gather, opset 17): aten.index_select.default: index 7 is out of range: accepted "
                          "[-5, 5) for dim 0 of size 5"));
    const Tensors out = s.run({{"idx", i64({3}, {0, -1, 4})}});  // the same session, valid indices
    EXPECT_EQ(out.at("y").as<float>()[2], 8.f);
    EXPECT_EQ(out.at("y").as<float>()[4], 8.f);
  }
  {
    SessionOptions o;
    o.checked = false;  // clamped: 7 reads row 4
    Session s(ctx(), path, o);
    const Tensors out = s.run({{"idx", i64({3}, {0, 7, 1})}});
    EXPECT_EQ(out.at("y").as<float>()[2], 8.f);
  }
}

TEST(RunChecks, IntegerDivAndModByZeroNameTheNode) {
  for (const char* op : {"Div", "Mod"}) {
    SCOPED_TRACE(op);
    ModelBuilder b;
    b.input("a", {4}, onnx::TensorProto::INT64);
    b.input("b", {4}, onnx::TensorProto::INT64);
    b.output("y", {4}, onnx::TensorProto::INT64);
    b.node(op, {"a", "b"}, {"y"})->set_name("divide");
    Session s(ctx(), b.save(std::string("int_") + op + ".onnx"));
    EXPECT_THAT(run_error(s, {{"a", i64({4}, {1, 2, 3, 4})}, {"b", i64({4}, {1, 0, 1, 1})}}),
                HasSubstr(std::string("node 'divide' (") + op + ", opset 17): "));
    EXPECT_THAT(run_error(s, {{"a", i64({4}, {1, 2, 3, 4})}, {"b", i64({4}, {1, 1, 1, 0})}}),
                HasSubstr("integer division by zero at element 3"));
    EXPECT_EQ(run_error(s, {{"a", i64({4}, {1, 2, 3, 4})}, {"b", i64({4}, {1, 1, 1, 1})}}), "no error");
  }
}

// ONNX Runtime: all -inf gives -inf, an inf gives inf (not inf - inf = NaN);
// NaN stays NaN.
TEST(RunChecks, ReduceLogSumExpKeepsInfinities) {
  const float inf = std::numeric_limits<float>::infinity();
  ModelBuilder b;
  b.input("x", {4, 2});
  b.output("y", {4});
  ModelBuilder::attr_ints(b.node("ReduceLogSumExp", {"x"}, {"y"}), "axes", {1});
  ModelBuilder::attr_int(b.g->mutable_node(0), "keepdims", 0);
  Session s(ctx(), b.save("logsumexp_inf.onnx"));
  const Tensors out = s.run({{"x", f32({4, 2}, {-inf, -inf, inf, 1.f, 0.f, std::log(3.f), std::nanf(""), 1.f})}});
  const float* y = out.at("y").as<float>();
  EXPECT_EQ(y[0], -inf);
  EXPECT_EQ(y[1], inf);
  EXPECT_NEAR(y[2], std::log(4.f), 1e-6);
  uint32_t bits;
  std::memcpy(&bits, &y[3], 4);
  EXPECT_GT(bits & 0x7fffffffu, 0x7f800000u) << "NaN stays NaN: " << y[3];
}

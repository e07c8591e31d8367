// If and Loop in a Session: a condition on a graph input decided at plan
// time, a condition on GPU data read back (a probe plan, then the plan for
// the value read, each built once), and what is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "error_of.h"
#include "gpu_fixture.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using onnx_import::Session;
using testing::HasSubstr;
using wgnn::test::error_of;
using wgnn::test::ModelBuilder;

namespace {

// A one-node branch: out = op(x).
onnx::GraphProto branch(const std::string& name, const std::string& op, const std::string& x) {
  onnx::GraphProto g;
  g.set_name(name);
  auto* n = g.add_node();
  n->set_op_type(op);
  n->add_input(x);
  n->add_output(name + "_out");
  auto* o = g.add_output();
  o->set_name(name + "_out");
  o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return g;
}

void set_graph(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

HostTensor f32(std::vector<float> v) {
  HostTensor t(DType::F32, {int64_t(v.size())});
  std::copy(v.begin(), v.end(), t.as<float>());
  return t;
}

std::vector<float> values(const HostTensor& t) { return {t.as<float>(), t.as<float>() + t.numel()}; }

}  // namespace

TEST(ControlFlow, ConditionOnGpuDataIsReadBackAndEachPlanBuiltOnce) {
  ModelBuilder b(13);
  b.input("x", {3});
  b.output("y", {3});
  b.init_f32("zero", {}, {0.f});
  auto* sum = b.node("ReduceSum", {"x"}, {"s"});
  ModelBuilder::attr_int(sum, "keepdims", 0);
  b.node("Greater", {"s", "zero"}, {"cond"});
  auto* n = b.node("If", {"cond"}, {"y"});
  set_graph(n, "then_branch", branch("pos", "Relu", "x"));
  set_graph(n, "else_branch", branch("neg", "Neg", "x"));
  Session s(test::ctx(), b.save("data_if.onnx"));
  auto y = s.run({{"x", f32({1, -0.5f, 2})}}).at("y");
  EXPECT_EQ(values(y), (std::vector<float>{1, 0, 2}));
  EXPECT_EQ(s.builds(), 2);  // the probe computing the condition, then the plan for "true"
  EXPECT_THAT(s.summary(), HasSubstr("1 decided by reading a GPU value back (1 probe plan kept"));
  y = s.run({{"x", f32({3, 1, 2})}}).at("y");
  EXPECT_EQ(values(y), (std::vector<float>{3, 1, 2}));
  EXPECT_EQ(s.builds(), 2);
  y = s.run({{"x", f32({-3, 1, 0.5f})}}).at("y");  // sum < 0: the other branch, one new plan
  EXPECT_EQ(values(y), (std::vector<float>{3, -1, -0.5f}));
  EXPECT_EQ(s.builds(), 3);
  y = s.run({{"x", f32({1, 1, 1})}}).at("y");
  EXPECT_EQ(values(y), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(s.builds(), 3);
}

TEST(ControlFlow, ConditionOnAGraphInputIsDecidedAtPlanTime) {
  ModelBuilder b(13);
  b.input("x", {2});
  b.input("sr", {}, onnx::TensorProto::INT64);
  b.output("y", {2});
  b.init_i64("k16", {16000});
  b.g->mutable_initializer(0)->clear_dims();  // a scalar
  b.node("Equal", {"sr", "k16"}, {"is16"});
  auto* n = b.node("If", {"is16"}, {"y"});
  set_graph(n, "then_branch", branch("a", "Neg", "x"));
  set_graph(n, "else_branch", branch("b", "Abs", "x"));
  Session s(test::ctx(), b.save("sr_if.onnx"));
  HostTensor sr(DType::I64, {});
  sr.as<int64_t>()[0] = 16000;
  EXPECT_EQ(values(s.run({{"x", f32({1, -2})}, {"sr", sr}}).at("y")), (std::vector<float>{-1, 2}));
  EXPECT_THAT(s.summary(), HasSubstr("1 condition or trip count known at plan time, 0 decided by reading"));
  sr.as<int64_t>()[0] = 8000;
  EXPECT_EQ(values(s.run({{"x", f32({1, -2})}, {"sr", sr}}).at("y")), (std::vector<float>{1, 2}));
  EXPECT_EQ(s.builds(), 2);  // one plan per value of sr
}

TEST(ControlFlow, LoopWithScanOutputsThatRunsNoIterationIsRefused) {
  ModelBuilder b(13);
  b.input("v", {2});
  b.output("v_out", {2});
  b.output("scan", {-1, 2});
  b.init_i64("trips", {0});
  b.g->mutable_initializer(0)->clear_dims();
  onnx::GraphProto body;
  body.set_name("body");
  for (auto [name, elem] : {std::pair<const char*, int>{"i", onnx::TensorProto::INT64},
                            {"c", onnx::TensorProto::BOOL}, {"v_in", onnx::TensorProto::FLOAT}}) {
    auto* in = body.add_input();
    in->set_name(name);
    in->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  }
  auto* id = body.add_node();
  id->set_op_type("Identity");
  id->add_input("c");
  id->add_output("c_out");
  auto* neg = body.add_node();
  neg->set_op_type("Neg");
  neg->add_input("v_in");
  neg->add_output("v_next");
  for (const char* o : {"c_out", "v_next", "v_in"}) body.add_output()->set_name(o);
  auto* n = b.node("Loop", {"trips", "", "v"}, {"v_out", "scan"});
  set_graph(n, "body", body);
  Session s(test::ctx(), b.save("loop0.onnx"));
  EXPECT_THAT(error_of([&] { s.run({{"v", f32({1, 2})}}); }),
              HasSubstr("a loop with scan outputs that runs no iteration"));
}

// A Loop whose condition is computed on the GPU each iteration: one probe
// per iteration, kept apart from the plans (more than max_plans of them), so
// a second run with the same data builds nothing.
TEST(ControlFlow, DataDependentLoopKeepsItsProbes) {
  ModelBuilder b(13);
  b.input("v", {2});
  b.output("v_out", {2});
  b.init_i64("trips", {100});
  b.g->mutable_initializer(0)->clear_dims();
  b.init_f32("two", {}, {2.f});
  b.init_f32("limit", {}, {20.f});
  onnx::GraphProto body;
  body.set_name("body");
  for (auto [name, elem] : {std::pair<const char*, int>{"i", onnx::TensorProto::INT64},
                            {"c", onnx::TensorProto::BOOL}, {"v_in", onnx::TensorProto::FLOAT}}) {
    auto* in = body.add_input();
    in->set_name(name);
    in->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  }
  auto add = [&](const char* op, std::vector<std::string> in, const char* out) {
    auto* n = body.add_node();
    n->set_op_type(op);
    for (auto& s : in) n->add_input(s);
    n->add_output(out);
    return n;
  };
  add("Mul", {"v_in", "two"}, "v_next");
  ModelBuilder::attr_int(add("ReduceMax", {"v_next"}, "m"), "keepdims", 0);
  add("Less", {"m", "limit"}, "c_out");
  for (const char* o : {"c_out", "v_next"}) body.add_output()->set_name(o);
  // The first condition: max(v) < limit, on the GPU too.
  ModelBuilder::attr_int(b.node("ReduceMax", {"v"}, {"m0"}), "keepdims", 0);
  b.node("Less", {"m0", "limit"}, {"go"});
  auto* n = b.node("Loop", {"trips", "go", "v"}, {"v_out"});
  set_graph(n, "body", body);
  Session s(test::ctx(), b.save("loop_data.onnx"));
  // 0.01 doubles 11 times to reach 20.48: 12 conditions read back.
  EXPECT_EQ(values(s.run({{"v", f32({0.01f, 0.005f})}}).at("v_out")), (std::vector<float>{20.48f, 10.24f}));
  const int built = s.builds();
  EXPECT_EQ(built, 13);  // 12 probes and the plan
  EXPECT_EQ(s.plans(), 1);
  EXPECT_EQ(values(s.run({{"v", f32({0.01f, 0.005f})}}).at("v_out")), (std::vector<float>{20.48f, 10.24f}));
  EXPECT_EQ(s.builds(), built);
  EXPECT_THAT(s.summary(), HasSubstr("12 decided by reading a GPU value back (12 probe plans kept"));
  EXPECT_THAT(s.summary(), HasSubstr("11 loop iterations unrolled"));
}

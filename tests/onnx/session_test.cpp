// ONNX sessions on models built here with the ONNX protobuf classes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "error_of.h"
#include "gpu_fixture.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using wgnn::test::error_of;
using onnx_import::Session;
using wgnn::test::ModelBuilder;
using testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

HostTensor f32(const Shape& s, float start = 0.f, float step = 1.f) {
  HostTensor t(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = start + step * float(i);
  return t;
}

}  // namespace

TEST(Session, ShapeArithmeticFoldsAndReshapeIsAView) {
  // y = relu(reshape(x, concat(shape(x)[0:1], [-1]))) with the shape chain
  // folded on the host.
  ModelBuilder b;
  b.input("x", {-1, 3, 4});
  b.output("y", {-1, 12});
  b.init_i64("zero", {0});
  b.init_i64("minus1", {-1});
  b.node("Shape", {"x"}, {"s"});
  auto* gather = b.node("Gather", {"s", "zero"}, {"n"});
  gather->add_attribute()->set_name("axis");
  gather->mutable_attribute(0)->set_type(onnx::AttributeProto::INT);
  gather->mutable_attribute(0)->set_i(0);
  auto* cat = b.node("Concat", {"n", "minus1"}, {"target"});
  auto* ax = cat->add_attribute();
  ax->set_name("axis");
  ax->set_type(onnx::AttributeProto::INT);
  ax->set_i(0);
  b.node("Reshape", {"x", "target"}, {"r"});
  b.node("Relu", {"r"}, {"y"});
  Session s(test::ctx(), b.save("fold.onnx"));
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].shape, (Shape{-1, 3, 4}));
  auto out = s.run({{"x", f32({2, 3, 4}, -5.f)}});
  const HostTensor& y = out.at("y");
  EXPECT_EQ(y.shape, (Shape{2, 12}));
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(y.as<float>()[i], std::max(0.f, -5.f + float(i)));
  EXPECT_EQ(s.graph().dispatches().size(), 1u);  // only the Relu reaches the GPU
  EXPECT_EQ(s.builds(), 1);

  // Same shapes again: no rebuild. New batch size: one more build.
  s.run({{"x", f32({2, 3, 4}, 1.f)}});
  EXPECT_EQ(s.builds(), 1);
  auto out3 = s.run({{"x", f32({3, 3, 4}, -1.f)}});
  EXPECT_EQ(out3.at("y").shape, (Shape{3, 12}));
  EXPECT_EQ(s.builds(), 2);
}

TEST(Session, LayerNormAndBatchNormFromInitializers) {
  ModelBuilder b;
  b.input("x", {2, 4, 3, 3});
  b.output("y", {2, 4, 3, 3});
  b.init_f32("scale", {4}, {1, 2, 0.5f, 1});
  b.init_f32("bias", {4}, {0, 1, -1, 0.25f}, /*raw=*/true);
  b.init_f32("mean", {4}, {0.1f, 0.2f, 0.3f, 0.4f});
  b.init_f32("var", {4}, {1, 2, 3, 4}, true);
  b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"});
  Session s(test::ctx(), b.save("bn.onnx"));
  HostTensor x = f32({2, 4, 3, 3}, -3.f, 0.1f);
  auto y = s.run({{"x", x}}).at("y");
  const float sc[] = {1, 2, 0.5f, 1}, bi[] = {0, 1, -1, 0.25f}, mu[] = {0.1f, 0.2f, 0.3f, 0.4f}, va[] = {1, 2, 3, 4};
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int c = int((i / 9) % 4);
    const double ref = (x.as<float>()[i] - mu[c]) / std::sqrt(va[c] + 1e-5) * sc[c] + bi[c];
    EXPECT_NEAR(y.as<float>()[i], ref, 1e-5) << i;
  }
}

// Session::run's in-place form: matching outputs are written where they
// are (same memory), others remade, entries that are no outputs dropped;
// the values are the allocating form's.
TEST(Session, RunIntoKeptOutputsReusesTheirMemory) {
  ModelBuilder b;
  b.input("x", {-1, 4});
  b.output("y", {-1, 4});
  b.output("z", {-1, 4});
  b.node("Sigmoid", {"x"}, {"y"});
  b.node("Relu", {"x"}, {"z"});
  Session s(test::ctx(), b.save("two_outputs.onnx"));
  const HostTensor x = f32({3, 4}, -1.f, 0.25f);
  const auto fresh = s.run({{"x", x}});
  std::map<std::string, HostTensor> kept;
  kept["stale"] = f32({1});
  kept["z"] = f32({7});  // wrong shape: remade
  s.run({{"x", x}}, kept);
  ASSERT_EQ(kept.size(), 2u);
  const uint8_t* y_mem = kept.at("y").data.data();
  const uint8_t* z_mem = kept.at("z").data.data();
  const HostTensor x2 = f32({3, 4}, 2.f, -0.5f);
  s.run({{"x", x2}}, kept);
  EXPECT_EQ(kept.at("y").data.data(), y_mem);
  EXPECT_EQ(kept.at("z").data.data(), z_mem);
  const auto fresh2 = s.run({{"x", x2}});
  EXPECT_EQ(kept.at("y").data, fresh2.at("y").data);
  EXPECT_EQ(kept.at("z").data, fresh2.at("z").data);
  EXPECT_NE(fresh.at("y").data, fresh2.at("y").data);
  s.run({{"x", f32({5, 4})}}, kept);  // another shape: remade to fit
  EXPECT_EQ(kept.at("y").shape, (Shape{5, 4}));
  EXPECT_EQ(kept.at("y").data, s.run({{"x", f32({5, 4})}}).at("y").data);
}

TEST(Session, OutputsOptionRunsAndReadsBackOnlyThose) {
  // y = relu(x); z = sigmoid(neg(x)): asking for y alone leaves z's two
  // dispatches out; asking for z, y returns both in that order.
  ModelBuilder b;
  b.input("x", {2, 3});
  b.output("y", {2, 3});
  b.output("z", {2, 3});
  b.node("Relu", {"x"}, {"y"});
  b.node("Neg", {"x"}, {"n"});
  b.node("Sigmoid", {"n"}, {"z"});
  const std::string path = b.save("two_outputs.onnx");
  const HostTensor x = f32({2, 3}, -2.f);
  Session all(test::ctx(), path);
  const auto both = all.run({{"x", x}});
  ASSERT_EQ(both.size(), 2u);
  const size_t all_dispatches = all.graph().dispatches().size();

  onnx_import::SessionOptions o;
  o.outputs = {"y"};
  Session one(test::ctx(), path, o);
  ASSERT_EQ(one.outputs().size(), 1u);
  EXPECT_EQ(one.outputs()[0].name, "y");
  const auto out = one.run({{"x", x}});
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out.at("y").as<float>()[i], std::max(0.f, -2.f + float(i)));
  EXPECT_LT(one.graph().dispatches().size(), all_dispatches);
  EXPECT_EQ(one.graph().dispatches().size(), 1u);  // the Relu alone

  o.outputs = {"z", "y"};
  Session two(test::ctx(), path, o);
  EXPECT_EQ(two.outputs()[0].name, "z");
  const auto zy = two.run({{"x", x}});
  for (int i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(zy.at("z").as<float>()[i], both.at("z").as<float>()[i]);
    EXPECT_NEAR(zy.at("z").as<float>()[i], 1.0 / (1.0 + std::exp(i - 2.0)), 1e-6);  // sigmoid(-x), x = i - 2
  }

  o.outputs = {"w"};
  EXPECT_THAT(error_of([&] { Session bad(test::ctx(), path, o); }),
              HasSubstr("'w' is not an output of the model; its outputs: 'y', 'z'"));
  o.outputs = {"y", "y"};
  EXPECT_THAT(error_of([&] { Session bad(test::ctx(), path, o); }), HasSubstr("'y' is given twice"));
}

TEST(Session, InputChecks) {
  ModelBuilder b;
  b.input("x", {-1, 4});
  b.output("y", {-1, 4});
  b.node("Sigmoid", {"x"}, {"y"});
  Session s(test::ctx(), b.save("sig.onnx"));
  EXPECT_THAT(error_of([&] { s.run({}); }), HasSubstr("input 'x' was not given"));
  EXPECT_THAT(error_of([&] { s.run({{"x", f32({2, 5})}}); }), HasSubstr("declares [-1, 4]"));
  HostTensor i(DType::I32, {2, 4});
  EXPECT_THAT(error_of([&] { s.run({{"x", i}}); }), HasSubstr("dtype int32"));
  EXPECT_THAT(error_of([&] { s.run({{"x", f32({1, 4})}, {"z", f32({1})}}); }), HasSubstr("'z' is not an input"));
}

TEST(Session, UnsupportedNodesAreAllListed) {
  ModelBuilder b;
  b.input("x", {4});
  b.output("y", {4});
  b.node("FancyOp", {"x"}, {"a"});
  b.node("Relu", {"a"}, {"b"});
  b.node("OtherFancyOp", {"b"}, {"y"});
  b.node("ThirdFancyOp", {"x"}, {"unused"});  // dead: not needed by any output
  const std::string msg = error_of([&] { Session s(test::ctx(), b.save("bad_ops.onnx")); });
  EXPECT_THAT(msg, HasSubstr("2 unsupported nodes"));
  EXPECT_THAT(msg, HasSubstr("FancyOp"));
  EXPECT_THAT(msg, HasSubstr("OtherFancyOp"));
  EXPECT_THAT(msg, testing::Not(HasSubstr("ThirdFancyOp")));
}

// Control flow: the nodes inside If's branches (at any depth) that wgnn
// lacks are counted and named, and refused when the model loads.
TEST(Session, UnsupportedNodesInsideSubgraphsAreCounted) {
  ModelBuilder b;
  b.input("cond", {}, onnx::TensorProto::BOOL);
  b.input("x", {4});
  b.output("y", {4});
  auto branch = [](const std::string& name, const std::vector<std::string>& ops) {
    onnx::GraphProto g;
    g.set_name(name);
    std::string prev = "x";
    for (size_t i = 0; i < ops.size(); ++i) {
      auto* n = g.add_node();
      n->set_op_type(ops[i]);
      n->set_name(name + "_" + std::to_string(i));
      n->add_input(prev);
      prev = name + "_out" + std::to_string(i);
      n->add_output(prev);
    }
    auto* o = g.add_output();
    o->set_name(prev);
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    return g;
  };
  auto add_if = [&](onnx::NodeProto* n, const onnx::GraphProto& then_g, const onnx::GraphProto& else_g) {
    auto* t = n->add_attribute();
    t->set_name("then_branch");
    t->set_type(onnx::AttributeProto::GRAPH);
    *t->mutable_g() = then_g;
    auto* e = n->add_attribute();
    e->set_name("else_branch");
    e->set_type(onnx::AttributeProto::GRAPH);
    *e->mutable_g() = else_g;
  };
  // then: FancyRnn, then a nested If (FancyRnn; Relu) ; else: Relu.
  onnx::GraphProto then_g = branch("then", {"FancyRnn"});
  {
    auto* inner = then_g.add_node();
    inner->set_op_type("If");
    inner->set_name("inner_if");
    inner->add_input("cond");
    inner->add_output("inner_out");
    add_if(inner, branch("inner_then", {"FancyRnn", "Relu"}), branch("inner_else", {"Relu"}));
    then_g.mutable_output(0)->set_name("inner_out");
  }
  auto* top = b.node("If", {"cond"}, {"y"});
  add_if(top, then_g, branch("else", {"Relu"}));
  const std::string msg = error_of([&] { Session s(test::ctx(), b.save("if_inside.onnx")); });
  // If is supported; inside it FancyRnn twice is not (the load refuses it).
  EXPECT_THAT(msg, HasSubstr("2 unsupported nodes (2 of them inside subgraphs)"));
  EXPECT_THAT(msg, HasSubstr("its subgraphs hold 6 nodes, 2 of them unsupported: FancyRnn x2"));
}

TEST(Session, MalformedFilesAreClearErrors) {
  const fs::path dir = fs::temp_directory_path();
  const std::string garbage = (dir / "wgnn_garbage.onnx").string();
  std::ofstream(garbage) << "this is not a model at all \x01\x02\x03";
  EXPECT_THAT(error_of([&] { Session s(test::ctx(), garbage); }), HasSubstr("not a valid ONNX model"));

  ModelBuilder b;
  b.input("x", {4});
  b.output("y", {4});
  b.node("Relu", {"x"}, {"y"});
  const std::string good = b.save("good.onnx");
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string truncated = (dir / "wgnn_truncated.onnx").string();
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_THAT(error_of([&] { Session s(test::ctx(), truncated); }), HasSubstr("not a valid ONNX model"));
  EXPECT_THAT(error_of([&] { Session s(test::ctx(), "/nonexistent/model.onnx"); }), HasSubstr("cannot open"));

  ModelBuilder m;
  m.input("x", {4});
  m.output("y", {4});
  m.node("Add", {"x", "ghost"}, {"y"});
  EXPECT_THAT(error_of([&] { Session s(test::ctx(), m.save("missing.onnx")); }),
              HasSubstr("input 'ghost' is produced by no node"));
}

TEST(Session, NodesOutOfOrderAreSorted) {
  // Like ISNet's converter output: the node feeding the first one comes last.
  ModelBuilder b;
  b.input("x", {4});
  b.output("y", {4});
  b.node("Relu", {"n"}, {"y"});
  b.node("Neg", {"x"}, {"n"});
  Session s(test::ctx(), b.save("unsorted.onnx"));
  HostTensor x(DType::F32, {4});
  for (int i = 0; i < 4; ++i) x.as<float>()[i] = float(i) - 2.f;
  auto y = s.run({{"x", x}}).at("y");
  EXPECT_EQ(y.as<float>()[0], 2.f);
  EXPECT_EQ(y.as<float>()[3], 0.f);

  ModelBuilder cyc;
  cyc.input("x", {4});
  cyc.output("y", {4});
  cyc.node("Add", {"x", "b"}, {"a"});
  cyc.node("Neg", {"a"}, {"b"});
  cyc.node("Relu", {"a"}, {"y"});
  EXPECT_THAT(error_of([&] { Session s2(test::ctx(), cyc.save("cycle.onnx")); }), HasSubstr("cycle"));
}

TEST(Session, ExternalData) {
  ModelBuilder b;
  b.input("x", {3});
  b.output("y", {3});
  auto* t = b.g->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(3);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = t->add_external_data();
  loc->set_key("location");
  loc->set_value("weights.bin");
  auto* off = t->add_external_data();
  off->set_key("offset");
  off->set_value("8");
  auto* len = t->add_external_data();
  len->set_key("length");
  len->set_value("12");
  b.node("Concat", {"x", "w"}, {"c"})->add_attribute()->set_name("axis");
  b.g->mutable_node(0)->mutable_attribute(0)->set_type(onnx::AttributeProto::INT);
  b.g->mutable_node(0)->mutable_attribute(0)->set_i(0);
  b.node("Shape", {"c"}, {"s"});
  b.node("Relu", {"x"}, {"y"});
  const std::string path = b.save("ext.onnx");
  const float w[] = {0, 0, 1.5f, -2.f, 3.f};
  std::ofstream(fs::path(path).parent_path() / "weights.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(w), sizeof(w));
  Session s(test::ctx(), path);
  auto y = s.run({{"x", f32({3}, -1.f)}}).at("y");
  EXPECT_EQ(y.as<float>()[2], 1.f);
  // A length that does not match the tensor is an error.
  b.g->mutable_initializer(0)->mutable_external_data(2)->set_value("8");
  EXPECT_THAT(error_of([&] { Session s2(test::ctx(), b.save("ext_bad.onnx")); }), HasSubstr("does not match"));
}

TEST(Session, ShapeGivenAsInputSpecializesTheGraph) {
  ModelBuilder b;
  b.input("x", {2, 6});
  b.input("shape", {2}, onnx::TensorProto::INT64);
  b.output("y", {-1, -1});
  b.node("Reshape", {"x", "shape"}, {"r"});
  b.node("Neg", {"r"}, {"y"});
  Session s(test::ctx(), b.save("reshape_input.onnx"));
  auto shape = [](int64_t a, int64_t c) {
    HostTensor t(DType::I64, {2});
    t.as<int64_t>()[0] = a;
    t.as<int64_t>()[1] = c;
    return t;
  };
  EXPECT_EQ(s.run({{"x", f32({2, 6})}, {"shape", shape(3, 4)}}).at("y").shape, (Shape{3, 4}));
  EXPECT_EQ(s.run({{"x", f32({2, 6})}, {"shape", shape(3, 4)}}).at("y").shape, (Shape{3, 4}));
  EXPECT_EQ(s.builds(), 1);
  auto y = s.run({{"x", f32({2, 6}, 1.f)}, {"shape", shape(12, -1)}}).at("y");
  EXPECT_EQ(y.shape, (Shape{12, 1}));
  EXPECT_EQ(y.as<float>()[11], -12.f);
  EXPECT_EQ(s.builds(), 2);
}

TEST(Session, StartAndFinishKeepTwoRunsInFlight) {
  // y = sigmoid(x) * 2 + x over a chain of nodes, z = relu(x): two runs
  // started before either is finished (each with its own readback), then a
  // third behind the second. Each result is its own inputs', checked
  // against the formula, and equal to a plain run().
  ModelBuilder b;
  b.input("x", {-1, 64});
  b.init_f32("two", {1}, {2.f});
  b.output("y", {-1, 64});
  b.output("z", {-1, 64});
  b.node("Sigmoid", {"x"}, {"s"});
  b.node("Mul", {"s", "two"}, {"m"});
  b.node("Add", {"m", "x"}, {"y"});
  b.node("Relu", {"x"}, {"z"});
  Session s(test::ctx(), b.save("pipelined.onnx"));
  auto check = [](const std::map<std::string, HostTensor>& out, const HostTensor& x, const char* what) {
    ASSERT_EQ(out.at("y").shape, x.shape) << what;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float v = x.as<float>()[i];
      EXPECT_NEAR(out.at("y").as<float>()[i], 2.f / (1.f + std::exp(-v)) + v, 1e-5f) << what << " at " << i;
      EXPECT_EQ(out.at("z").as<float>()[i], std::max(v, 0.f)) << what << " at " << i;
    }
  };
  const HostTensor x1 = f32({16, 64}, -3.f, 0.01f), x2 = f32({16, 64}, 4.f, -0.02f), x3 = f32({16, 64}, 0.5f, 0.001f);
  EXPECT_THAT(error_of([&] {
                std::map<std::string, HostTensor> o;
                s.finish(o);
              }),
              HasSubstr("no run was started"));
  s.start({{"x", x1}});
  {
    HostTensor x2_copy = x2;
    s.start({{"x", x2_copy}});
    x2_copy.as<float>()[0] = 1e6f;  // the run has its own copy once start() returns
  }
  EXPECT_EQ(s.started(), 2u);
  EXPECT_THAT(error_of([&] { s.start({{"x", x3}}); }), HasSubstr("at most 2"));
  EXPECT_THAT(error_of([&] { s.run({{"x", x3}}); }), HasSubstr("not finished"));
  std::map<std::string, HostTensor> out1, out2, out3;
  s.finish(out1);
  check(out1, x1, "first");
  EXPECT_THAT(error_of([&] { s.start({{"x", f32({3, 64})}}); }), HasSubstr("another plan than the run in flight"));
  s.start({{"x", x3}});  // behind the second
  s.finish(out2);
  check(out2, x2, "second");
  s.finish(out3);
  check(out3, x3, "third");
  EXPECT_EQ(s.started(), 0u);
  EXPECT_EQ(out3.at("y").data, s.run({{"x", x3}}).at("y").data);
  // Nothing in flight: another shape builds its plan.
  const HostTensor x4 = f32({3, 64}, -1.f, 0.01f);
  s.start({{"x", x4}});
  s.finish(out1);
  check(out1, x4, "another shape");
}

TEST(Session, StartedRunsReportTheirOwnRunChecks) {
  // A Gather index out of range in the first of two runs in flight fails
  // that run's finish() alone; the second (valid indices) is correct.
  ModelBuilder b;
  b.input("idx", {3}, onnx::TensorProto::INT64);
  b.init_f32("table", {5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  b.output("y", {3, 2});
  b.node("Gather", {"table", "idx"}, {"y"})->set_name("lookup");
  Session s(test::ctx(), b.save("gather_started.onnx"));
  auto idx = [](std::vector<int64_t> v) {
    HostTensor t(DType::I64, {3});
    for (size_t i = 0; i < 3; ++i) t.as<int64_t>()[i] = v[i];
    return t;
  };
  s.start({{"idx", idx({0, 7, 1})}});
  s.start({{"idx", idx({4, 0, 2})}});
  std::map<std::string, HostTensor> out;
  EXPECT_THAT(error_of([&] { s.finish(out); }), HasSubstr("index 7 is out of range"));
  s.finish(out);
  const std::vector<float> want = {8, 9, 0, 1, 4, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out.at("y").as<float>()[i], want[size_t(i)]);
}

TEST(Session, DroppedWithRunsInFlightWaitsForThem) {
  // Two runs started and never finished: the Session (and its Graph, whose
  // buffers they use) goes only after the GPU is done with them.
  ModelBuilder b;
  b.input("x", {4, 256});
  b.output("y", {4, 256});
  b.node("Sigmoid", {"x"}, {"y"});
  const std::string path = b.save("dropped.onnx");
  {
    Session s(test::ctx(), path);
    s.start({{"x", f32({4, 256})}});
    s.start({{"x", f32({4, 256}, 1.f)}});
  }
  Session again(test::ctx(), path);  // the context is sound afterwards
  const auto out = again.run({{"x", f32({4, 256}, -2.f, 0.f)}});
  EXPECT_NEAR(out.at("y").as<float>()[7], 1.f / (1.f + std::exp(2.f)), 1e-6f);
}

TEST(Session, PlanBuiltBeforeAnInputWasReadByValueIsFoundAgain) {
  // GroupQueryAttention reads seqlens_k on the host in a decoding step, not
  // in a first prompt: the prompt's plan, built first, is keyed without
  // its value, and must still be found after the decoding step's plan made
  // seqlens_k an input read by value.
  ModelBuilder b;
  auto* ms = b.m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  b.input("q", {1, -1, 8}, onnx::TensorProto::FLOAT, {"B", "S"});
  b.input("k", {1, -1, 4}, onnx::TensorProto::FLOAT, {"B", "S"});
  b.input("v", {1, -1, 4}, onnx::TensorProto::FLOAT, {"B", "S"});
  b.input("past_k", {1, 1, -1, 4}, onnx::TensorProto::FLOAT, {"B", "H", "P"});
  b.input("past_v", {1, 1, -1, 4}, onnx::TensorProto::FLOAT, {"B", "H", "P"});
  b.input("seqlens_k", {1}, onnx::TensorProto::INT32);
  b.input("total", {}, onnx::TensorProto::INT32);
  b.output("y", {1, -1, 8}, onnx::TensorProto::FLOAT, {"B", "S"});
  auto* n = b.node("GroupQueryAttention", {"q", "k", "v", "past_k", "past_v", "seqlens_k", "total"}, {"y"});
  n->set_domain("com.microsoft");
  ModelBuilder::attr_int(n, "num_heads", 2);
  ModelBuilder::attr_int(n, "kv_num_heads", 1);
  Session s(test::ctx(), b.save("gqa_value_input.onnx"));
  auto i32 = [](const Shape& shape, int32_t v) {
    HostTensor t(DType::I32, shape);
    t.as<int32_t>()[0] = v;
    return t;
  };
  const std::map<std::string, HostTensor> prompt = {
      {"q", f32({1, 3, 8}, 0.f, 0.1f)}, {"k", f32({1, 3, 4}, 0.f, 0.2f)}, {"v", f32({1, 3, 4})},
      {"past_k", f32({1, 1, 0, 4})},    {"past_v", f32({1, 1, 0, 4})},    {"seqlens_k", i32({1}, 2)},
      {"total", i32({}, 3)}};
  const std::map<std::string, HostTensor> step = {
      {"q", f32({1, 1, 8}, 0.f, 0.1f)}, {"k", f32({1, 1, 4}, 0.f, 0.2f)}, {"v", f32({1, 1, 4})},
      {"past_k", f32({1, 1, 3, 4})},    {"past_v", f32({1, 1, 3, 4})},    {"seqlens_k", i32({1}, 3)},
      {"total", i32({}, 4)}};
  const HostTensor first = s.run(prompt).at("y");
  s.run(step);
  EXPECT_EQ(s.builds(), 2);
  const HostTensor again = s.run(prompt).at("y");
  s.run(step);
  EXPECT_EQ(s.builds(), 2);
  ASSERT_EQ(again.numel(), first.numel());
  for (int64_t i = 0; i < first.numel(); ++i) EXPECT_EQ(again.as<float>()[i], first.as<float>()[i]);
}

// ONNX import through the IR (SessionOptions::ir_import, onnx/ir_trace.h):
// the mappers write the model as IR on a graph that only follows shapes,
// the passes rewrite it and ir::lower records it. Without fusion, the plan
// is the one the importer records directly: the same dispatches and
// bit-identical results. With it, the fusions that are IR passes (a
// convolution's residual add, a matrix product then ReLU into the
// product's epilogue) apply to ONNX models. A model whose control flow
// reads a GPU value back goes through the IR too: its probe plan (the
// model up to the value read back) is the IR traced so far.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <random>
#include <set>

#include "gpu_fixture.h"
#include "graph/graph.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"
#include "scoped_env.h"

using namespace wgnn;
using onnx_import::Session;
using onnx_import::SessionOptions;
using testing::HasSubstr;
using wgnn::test::ModelBuilder;

namespace {

std::vector<float> seeded(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

HostTensor tensor(const Shape& s, uint32_t seed) {
  HostTensor t(DType::F32, s);
  const std::vector<float> v = seeded(size_t(t.numel()), seed, 1.f);
  std::memcpy(t.data.data(), v.data(), v.size() * 4);
  return t;
}

struct Outcome {
  std::map<std::string, HostTensor> out;
  size_t dispatches = 0;
  std::multiset<std::string> ops;  // the last plan's dispatches, by op
  bool through_ir = false;
  std::string passes;
  std::string summary;
  std::set<std::string> recorded_ops;  // the first build's host time by ONNX op type: its keys
  int builds = 0;
};

Outcome run(const std::string& path, const std::vector<std::map<std::string, HostTensor>>& feeds, bool ir,
            bool fp16 = false, bool fusion = true) {
  SessionOptions o;
  o.ir_import = ir;
  o.fp16 = fp16;
  o.fusion = fusion;
  o.tiered = false;
  Session s(test::ctx(), path, o);
  Outcome r;
  for (const auto& f : feeds) {
    r.out = s.run(f);
    if (r.recorded_ops.empty())
      for (const auto& [op, ms] : s.last_build_phases().record_by_op) r.recorded_ops.insert(op);
    // Every shape's plan: the last build's phases say how it was made.
    r.through_ir = s.last_build_phases().through_ir;
    r.passes = s.last_build_phases().passes;
  }
  r.dispatches = s.graph().dispatches().size();
  for (const auto& d : s.graph().dispatches()) r.ops.insert(d.op);
  r.builds = s.builds();
  r.summary = s.summary();
  return r;
}

void expect_bits_equal(const HostTensor& a, const HostTensor& b) {
  ASSERT_EQ(a.dtype, b.dtype);
  ASSERT_EQ(a.shape, b.shape);
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.nbytes()), 0);
}

// A small network of the kinds of nodes the zoo's models have: a
// convolution with batch norm and ReLU (fused by the importer), a residual
// add, global pooling, a flatten, a MatMul with bias, GELU written out
// (fused), layer norm, a Concat, a Transpose, a Reshape, Softmax and a
// second output. Batch and size are dynamic.
std::string network(const std::string& name) {
  ModelBuilder b;
  b.input("x", {-1, 3, -1, -1}, onnx::TensorProto::FLOAT, {"N", "C", "H", "W"});
  b.output("probs", {-1, 2, 8}, onnx::TensorProto::FLOAT, {"N"});
  b.output("feat", {-1, 16}, onnx::TensorProto::FLOAT, {"N"});
  b.init_f32("w", {8, 3, 3, 3}, seeded(8 * 27, 1, 0.5f));
  b.init_f32("cb", {8}, seeded(8, 2, 0.3f));
  b.init_f32("gamma", {8}, seeded(8, 3, 1.f));
  b.init_f32("beta", {8}, seeded(8, 4, 0.5f));
  b.init_f32("mean", {8}, seeded(8, 5, 0.2f));
  std::vector<float> var = seeded(8, 6, 1.f);
  for (float& v : var) v = 0.2f + std::abs(v);
  b.init_f32("var", {8}, var);
  b.init_f32("w2", {8, 8, 1, 1}, seeded(64, 7, 0.5f));
  b.init_f32("fc", {8, 16}, seeded(128, 8, 0.5f));
  b.init_f32("fcb", {16}, seeded(16, 9, 0.2f));
  b.init_f32("lng", {16}, seeded(16, 10, 1.f));
  b.init_f32("lnb", {16}, seeded(16, 11, 0.2f));
  b.init_f32("sqrt2", {}, {1.4142135381698608f});
  b.init_f32("one", {}, {1.f});
  b.init_f32("half", {}, {0.5f});
  b.init_i64("shape", {-1, 2, 16});
  auto* conv = b.node("Conv", {"x", "w", "cb"}, {"c"});
  ModelBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
  b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"bn"});
  b.node("Relu", {"bn"}, {"r"});
  b.node("Conv", {"r", "w2"}, {"c2"});
  b.node("Add", {"c2", "r"}, {"res"});
  b.node("GlobalAveragePool", {"res"}, {"gap"});
  b.node("Flatten", {"gap"}, {"flat"});
  b.node("MatMul", {"flat", "fc"}, {"mm"});
  b.node("Add", {"mm", "fcb"}, {"lin"});
  b.node("Div", {"lin", "sqrt2"}, {"g1"});
  b.node("Erf", {"g1"}, {"g2"});
  b.node("Add", {"g2", "one"}, {"g3"});
  b.node("Mul", {"lin", "g3"}, {"g4"});
  b.node("Mul", {"g4", "half"}, {"gelu"});
  auto* ln = b.node("LayerNormalization", {"gelu", "lng", "lnb"}, {"feat"});
  ModelBuilder::attr_int(ln, "axis", -1);
  auto* cat = b.node("Concat", {"feat", "gelu"}, {"both"});
  ModelBuilder::attr_int(cat, "axis", 1);
  b.node("Reshape", {"both", "shape"}, {"r3"});
  auto* tr = b.node("Transpose", {"r3"}, {"t3"});
  ModelBuilder::attr_ints(tr, "perm", {0, 1, 2});
  auto* sl = b.node("Split", {"t3"}, {"s1", "s2"});
  ModelBuilder::attr_int(sl, "axis", 2);
  auto* sm = b.node("Softmax", {"s1"}, {"probs"});
  ModelBuilder::attr_int(sm, "axis", -1);
  return b.save(name);
}

}  // namespace

TEST(IrImport, ThePlanIsTheOneRecordedDirectlyWithTheSameBits) {
  const std::string path = network("ir_import_network.onnx");
  const std::vector<std::map<std::string, HostTensor>> feeds = {
      {{"x", tensor({2, 3, 9, 7}, 20)}}, {{"x", tensor({1, 3, 16, 16}, 21)}}, {{"x", tensor({3, 3, 5, 5}, 22)}}};
  for (const bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16 ? "fp16" : "fp32");
    if (fp16 && !test::ctx().features().shader_f16) continue;  // the float32 run covers the path
    for (size_t k = 0; k < feeds.size(); ++k) {
      // Each shape in a fresh Session, and all three in one (plans share
      // the constants: a made constant found again by its memo).
      const std::vector<std::map<std::string, HostTensor>> one = {feeds[k]};
      const Outcome ir = run(path, one, true, fp16, false), direct = run(path, one, false, fp16, false);
      EXPECT_TRUE(ir.through_ir);
      EXPECT_FALSE(direct.through_ir);
      // The build's host time stays by ONNX op type through the IR (each
      // IR node labelled with its ONNX node's type).
      for (const char* op : {"Conv", "MatMul", "LayerNormalization", "Softmax"}) {
        EXPECT_EQ(ir.recorded_ops.count(op), 1u) << op;
        EXPECT_EQ(direct.recorded_ops.count(op), 1u) << op;
      }
      EXPECT_EQ(ir.passes, "no rewrites");
      EXPECT_EQ(ir.dispatches, direct.dispatches);
      for (const char* o : {"probs", "feat"}) {
        SCOPED_TRACE(o);
        expect_bits_equal(ir.out.at(o), direct.out.at(o));
      }
    }
    const Outcome ir = run(path, feeds, true, fp16, false), direct = run(path, feeds, false, fp16, false);
    EXPECT_EQ(ir.builds, 3);
    for (const char* o : {"probs", "feat"}) expect_bits_equal(ir.out.at(o), direct.out.at(o));
    // Fused: every fusion is an IR pass (Conv + BatchNormalization + Relu,
    // the MatMul with its bias, the GELU chain in the product's epilogue,
    // the second convolution's residual add in its epilogue): no
    // elementwise or batch norm dispatch is left. Recorded directly, the
    // plan gets none of them.
    const Outcome fir = run(path, feeds, true, fp16), fdirect = run(path, feeds, false, fp16);
    EXPECT_EQ(fir.passes,
              "fuse_gelu 1, fuse_matmul_add 1, fuse_conv_batch_norm 1, fuse_conv_residual 1, fuse_conv_activation 1, "
              "fuse_matmul_activation 1");
    EXPECT_EQ(fdirect.dispatches, direct.dispatches);
    EXPECT_LT(fir.dispatches, fdirect.dispatches);
    for (const char* op : {"aten.add.Tensor", "aten.mul.Tensor", "aten.div.Tensor", "aten.erf.default",
                           "aten._native_batch_norm_legit_no_training.default", "aten.relu.default"}) {
      SCOPED_TRACE(op);
      EXPECT_EQ(fir.ops.count(op), 0u);
      EXPECT_GT(fdirect.ops.count(op), 0u);
    }
    const double tol = fp16 ? 2e-2 : 1e-5;
    for (const char* o : {"probs", "feat"}) {
      SCOPED_TRACE(o);
      const HostTensor &a = fir.out.at(o), &b = fdirect.out.at(o), &u = ir.out.at(o);
      ASSERT_EQ(a.shape, b.shape);
      for (int64_t i = 0; i < a.numel(); ++i) {
        EXPECT_NEAR(a.as<float>()[i], b.as<float>()[i], tol) << i;
        EXPECT_NEAR(a.as<float>()[i], u.as<float>()[i], tol) << i;
      }
    }
  }
}

TEST(IrImport, AFusionThatIsOnlyAPassAppliesToAnOnnxModel) {
  // MatMul + Add of a bias, then Relu: one product with the bias and the
  // ReLU in its epilogue (the IR passes fuse_matmul_add, then
  // fuse_matmul_activation); directly recorded, three dispatches.
  ModelBuilder b;
  b.input("x", {4, 32});
  b.output("y", {4, 24});
  b.init_f32("w", {32, 24}, seeded(32 * 24, 30, 0.5f));
  b.init_f32("bias", {24}, seeded(24, 31, 0.5f));
  b.node("MatMul", {"x", "w"}, {"mm"});
  b.node("Add", {"mm", "bias"}, {"lin"});
  b.node("Relu", {"lin"}, {"y"});
  const std::string path = b.save("ir_import_matmul_relu.onnx");
  const std::vector<std::map<std::string, HostTensor>> feeds = {{{"x", tensor({4, 32}, 32)}}};
  const Outcome ir = run(path, feeds, true), direct = run(path, feeds, false);
  EXPECT_EQ(ir.passes, "fuse_matmul_add 1, fuse_matmul_activation 1");
  EXPECT_EQ(ir.dispatches, 1u);
  EXPECT_EQ(direct.dispatches, 3u);
  const HostTensor& x = feeds[0].at("x");
  const std::vector<float> w = seeded(32 * 24, 30, 0.5f), bias = seeded(24, 31, 0.5f);
  int zeros = 0;
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 24; ++j) {
      double acc = bias[size_t(j)];
      for (int64_t k = 0; k < 32; ++k) acc += double(x.as<float>()[i * 32 + k]) * w[size_t(k * 24 + j)];
      const double want = std::max(acc, 0.0);
      zeros += want == 0;
      EXPECT_NEAR(ir.out.at("y").as<float>()[i * 24 + j], want, 1e-4 * (1 + std::abs(want))) << i << "," << j;
      // ReLU is exact: the fused epilogue and the separate kernel agree.
      EXPECT_EQ(ir.out.at("y").as<float>()[i * 24 + j], direct.out.at("y").as<float>()[i * 24 + j]);
    }
  }
  EXPECT_GT(zeros, 0);
}

TEST(IrImport, ControlFlowThatReadsTheGpuGoesThroughTheIrWithItsFusions) {
  // An If on a condition computed on the GPU: the probe plan (the model
  // up to the condition) and the plan built knowing it both go through the
  // IR, and the passes fuse on both sides of the readback: attention as
  // exporters write it (fuse_attention) and a GELU after a product
  // (fuse_gelu, fuse_matmul_activation) before the If, a convolution + batch norm
  // + ReLU and a product of dequantized 8-bit weights (fuse_matmul_dequant)
  // after it. Results against the same model recorded directly
  // without fusion (ir_import off: the importer's op calls, one by one).
  ModelBuilder b(13);
  b.input("q", {1, 2, 8, 16});
  b.input("k", {1, 2, 8, 16});
  b.input("v", {1, 2, 8, 16});
  b.input("img", {1, 3, 6, 6});
  b.output("o", {1, 2, 8, 16});
  b.output("y", {1, 4, 6, 6});
  b.init_f32("w1", {16, 16}, seeded(256, 3, 0.5f));
  b.init_f32("cw", {4, 3, 3, 3}, seeded(108, 4, 0.5f));
  b.init_f32("gamma", {4}, seeded(4, 5, 1.f));
  b.init_f32("beta", {4}, seeded(4, 6, 1.f));
  b.init_f32("mean", {4}, seeded(4, 7, 1.f));
  b.init_f32("var", {4}, {0.5f, 0.75f, 1.f, 1.25f});
  b.init_f32("scale", {}, {0.25f});
  b.init_f32("zero", {}, {0.f});
  b.init_f32("sqrt2", {}, {1.41421356f});
  b.init_f32("one", {}, {1.f});
  b.init_f32("half", {}, {0.5f});
  // o = gelu((softmax(q k^T * 0.25) v) w1), GELU written out as exporters do.
  ModelBuilder::attr_ints(b.node("Transpose", {"k"}, {"kt"}), "perm", {0, 1, 3, 2});
  b.node("MatMul", {"q", "kt"}, {"s"});
  b.node("Mul", {"s", "scale"}, {"ss"});
  auto* sm = b.node("Softmax", {"ss"}, {"p"});
  ModelBuilder::attr_int(sm, "axis", -1);
  b.node("MatMul", {"p", "v"}, {"a"});
  b.node("MatMul", {"a", "w1"}, {"h"});
  b.node("Div", {"h", "sqrt2"}, {"g1"});
  b.node("Erf", {"g1"}, {"g2"});
  b.node("Add", {"g2", "one"}, {"g3"});
  b.node("Mul", {"h", "g3"}, {"g4"});
  b.node("Mul", {"g4", "half"}, {"o"});
  // The condition: the sum of o, computed on the GPU, read back.
  auto* sum = b.node("ReduceSum", {"o"}, {"total"});
  ModelBuilder::attr_int(sum, "keepdims", 0);
  b.node("Greater", {"total", "zero"}, {"cond"});
  auto* n = b.node("If", {"cond"}, {"img2"});
  for (const auto& [attr, op] : {std::pair{"then_branch", "Relu"}, std::pair{"else_branch", "Neg"}}) {
    onnx::GraphProto g;
    g.set_name(attr);
    auto* bn = g.add_node();
    bn->set_op_type(op);
    bn->add_input("img");
    bn->add_output(std::string(attr) + "_out");
    auto* o = g.add_output();
    o->set_name(std::string(attr) + "_out");
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    auto* a = n->add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = g;
  }
  auto* conv = b.node("Conv", {"img2", "cw"}, {"c"});
  ModelBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
  b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"bn"});
  b.node("Relu", {"bn"}, {"y"});
  // z = o @ DequantizeLinear(8-bit weights, a scale per column).
  b.output("z", {1, 2, 8, 4});
  std::vector<int> wq(64);
  for (size_t i = 0; i < wq.size(); ++i) wq[i] = int(i * 37 % 255) - 127;
  b.init_8bit("wq", onnx::TensorProto::INT8, {16, 4}, wq);
  b.init_f32("wscale", {4}, {0.01f, 0.02f, 0.03f, 0.04f});
  b.node("DequantizeLinear", {"wq", "wscale"}, {"wd"});
  b.node("MatMul", {"o", "wd"}, {"z"});
  const std::string path = b.save("ir_import_if_fusions.onnx");
  std::map<std::string, HostTensor> feed = {
      {"q", tensor({1, 2, 8, 16}, 11)}, {"k", tensor({1, 2, 8, 16}, 12)}, {"v", tensor({1, 2, 8, 16}, 13)},
      {"img", tensor({1, 3, 6, 6}, 14)}};
  const Outcome r = run(path, {feed}, true);
  const Outcome direct = run(path, {feed}, false, false, /*fusion=*/false);
  EXPECT_TRUE(r.through_ir);
  EXPECT_THAT(r.summary, testing::Not(HasSubstr("recorded directly")));
  for (const char* pass :
       {"fuse_attention", "fuse_gelu", "fuse_matmul_activation", "fuse_conv_batch_norm", "fuse_matmul_dequant"}) {
    EXPECT_THAT(r.passes, HasSubstr(pass)) << r.passes;
  }
  EXPECT_EQ(r.ops.count("wgnn.attention.default"), 1u);
  EXPECT_EQ(r.ops.count("aten._softmax.default"), 0u);
  EXPECT_EQ(r.ops.count("wgnn.matmul_dequant.default"), 1u);
  // attention; the product with its GELU; the branch's ReLU; the
  // convolution with the batch norm and ReLU in it; the product reading
  // the 8-bit weights.
  EXPECT_EQ(r.dispatches, 5u);
  EXPECT_LT(r.dispatches, direct.dispatches);
  for (const char* name : {"o", "y", "z"}) {
    const HostTensor& a = r.out.at(name);
    const HostTensor& e = direct.out.at(name);
    ASSERT_EQ(a.shape, e.shape);
    for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.as<float>()[i], e.as<float>()[i], 1e-4) << name << " " << i;
  }
}

TEST(IrImport, EnvironmentVariableChoosesThePath) {
  ModelBuilder b;
  b.input("x", {8});
  b.output("y", {8});
  b.node("Relu", {"x"}, {"y"});
  const std::string path = b.save("ir_import_env.onnx");
  const std::vector<std::map<std::string, HostTensor>> feeds = {{{"x", tensor({8}, 40)}}};
  {
    test::ScopedSetting env("WGNN_IR_IMPORT", "0");
    EXPECT_FALSE(run(path, feeds, true).through_ir);
  }
  {
    test::ScopedSetting env("WGNN_IR_IMPORT", "1");
    EXPECT_TRUE(run(path, feeds, false).through_ir);
  }
  test::ScopedSetting env("WGNN_IR_IMPORT", "yes");
  EXPECT_THROW(Session(test::ctx(), path), Error);
}

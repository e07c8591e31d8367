// Op schemas (ops/schema.h): every declared schema names the op's arguments
// at the positions the op reads them. Each fused op is called with its
// epilogue written by name (NamedArgs) and compared with the unfused chain
// of ops it stands for; defaults written out are accepted as the op's own.
#include <gmock/gmock.h>

#include "error_of.h"
#include "op_test_util.h"
#include "ops/registry.h"
#include "ops/schema.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Runs `fused` and `chain` on one graph (their results marked outputs) and
// compares them.
void expect_same(Graph& g, TensorRef fused, TensorRef chain) {
  g.mark_output(fused);
  g.mark_output(chain);
  g.run();
  EXPECT_TRUE(all_close(download(g, fused), as_double(download(g, chain)), 1e-5, 1e-5));
}

}  // namespace

TEST(OpSchema, EveryDeclaredOpIsRegisteredAndItsNamesAreUnique) {
  ASSERT_FALSE(ops::schemas().empty());
  for (const ops::OpSchema& s : ops::schemas()) {
    SCOPED_TRACE(s.op);
    EXPECT_TRUE(ops::OpRegistry::global().has(s.op));
    for (size_t i = 0; i < s.args.size(); ++i) EXPECT_EQ(s.index(s.args[i].name), i);
    bool optional_seen = false;
    for (const ops::ArgSchema& a : s.args) {
      EXPECT_FALSE(optional_seen && a.required) << a.name << ": a required argument after an optional one";
      optional_seen = optional_seen || !a.required;
    }
  }
  EXPECT_EQ(ops::find_schema("aten.no_such_op.default"), nullptr);
  EXPECT_THAT(error_of([] { ops::schema("aten.no_such_op.default"); }), HasSubstr("no schema is declared"));
  EXPECT_THAT(error_of([] { ops::schema("wgnn.matmul_add.default").index("gamma"); }),
              HasSubstr("wgnn.matmul_add.default has no argument 'gamma' (its arguments: self, other, bias"));
}

TEST(OpSchema, NamedArgsFillDefaultsAndRefuseALeftOutRequiredArgument) {
  ValueList args{TensorRef{0}, TensorRef{1}};
  ops::NamedArgs m("wgnn.matmul_add.default", args);
  EXPECT_EQ(std::get<std::string>(m.get("act").v), "none");
  m.set_activation({ops::Activation::Clamp, -1, 2});
  ASSERT_EQ(args.size(), 9u);
  EXPECT_TRUE(args[2].is_none());
  EXPECT_EQ(std::get<double>(args[3].v), 1.0);  // alpha's default
  EXPECT_EQ(std::get<std::string>(args[4].v), "clamp");
  EXPECT_EQ(std::get<double>(args[7].v), -1.0);
  EXPECT_EQ(std::get<double>(args[8].v), 2.0);
  EXPECT_EQ(m.activation().act, ops::Activation::Clamp);
  ValueList conv{TensorRef{0}, TensorRef{1}};
  EXPECT_THAT(error_of([&] { ops::NamedArgs("wgnn.convolution_padded.default", conv).set("act", std::string("relu")); }),
              HasSubstr("past required argument 'bias'"));
  ValueList many(20, Value(None{}));
  EXPECT_THAT(error_of([&] { ops::NamedArgs("wgnn.matmul_add.default", many); }), HasSubstr("takes at most 10"));
}

TEST(OpSchema, ConvolutionEpilogueByName) {
  Graph g(ctx());
  TensorRef x = upload(g, {1, 2, 6, 5}, random_floats(60, -1, 1, 1), DType::F32);
  TensorRef w = constant(g, {3, 2, 3, 3}, random_floats(54, -1, 1, 2), DType::F32);
  TensorRef b = constant(g, {3}, random_floats(3, -1, 1, 3), DType::F32);
  TensorRef r = upload(g, {1, 3, 6, 5}, random_floats(90, -1, 1, 4), DType::F32);
  ValueList args{x, w, b, IntList{1, 1}, IntList{1, 1, 1, 1}, IntList{1, 1}, false, IntList{0, 0}, int64_t(1)};
  ops::NamedArgs named("wgnn.convolution_padded.default", args);
  named.set("residual", r);
  named.set_activation({ops::Activation::Clamp, -0.5, 0.75});
  TensorRef fused = ops::call(g, "wgnn.convolution_padded.default", args).tensor();
  TensorRef conv = ops::call(g, "aten.convolution.default",
                             {x, w, b, IntList{1}, IntList{1}, IntList{1}, false, IntList{0}, int64_t(1)})
                       .tensor();
  TensorRef sum = ops::call(g, "aten.add.Tensor", {conv, r}).tensor();
  expect_same(g, fused, ops::call(g, "aten.clamp.default", {sum, -0.5, 0.75}).tensor());
}

TEST(OpSchema, ProductEpilogueByName) {
  Graph g(ctx());
  TensorRef a = upload(g, {5, 8}, random_floats(40, -1, 1, 5), DType::F32);
  TensorRef b = upload(g, {6, 8}, random_floats(48, -1, 1, 6), DType::F32);
  TensorRef bias = constant(g, {6}, random_floats(6, -1, 1, 7), DType::F32);
  TensorRef res = upload(g, {5, 6}, random_floats(30, -1, 1, 8), DType::F32);
  ValueList args{a, b};
  ops::NamedArgs named("wgnn.matmul_add.default", args);
  named.set("bias", bias);
  named.set("trans_other", true);
  named.set("alpha", 0.5);
  named.set_activation({ops::Activation::Relu});
  named.set("residual", res);
  TensorRef fused = ops::call(g, "wgnn.matmul_add.default", args).tensor();
  TensorRef bt = ops::call(g, "aten.permute.default", {b, IntList{1, 0}}).tensor();
  TensorRef mm = ops::call(g, "aten.mm.default", {a, bt}).tensor();
  TensorRef half = constant(g, {1}, {0.5f}, DType::F32);
  TensorRef scaled = ops::call(g, "aten.mul.Tensor", {mm, half}).tensor();
  TensorRef biased = ops::call(g, "aten.add.Tensor", {scaled, bias}).tensor();
  TensorRef act = ops::call(g, "aten.relu.default", {biased}).tensor();
  expect_same(g, fused, ops::call(g, "aten.add.Tensor", {act, res}).tensor());
}

TEST(OpSchema, NormEpiloguesByName) {
  for (const bool batch : {true, false}) {
    SCOPED_TRACE(batch ? "batch norm" : "instance norm");
    Graph g(ctx());
    TensorRef x = upload(g, {2, 3, 4, 5}, random_floats(120, -2, 2, 9), DType::F32);
    TensorRef w = constant(g, {3}, random_floats(3, 0.5, 1.5, 10), DType::F32);
    TensorRef b = constant(g, {3}, random_floats(3, -1, 1, 11), DType::F32);
    TensorRef mean = constant(g, {3}, random_floats(3, -0.5, 0.5, 12), DType::F32);
    TensorRef var = constant(g, {3}, random_floats(3, 0.5, 2, 13), DType::F32);
    const std::string op = batch ? "aten._native_batch_norm_legit_no_training.default" : "aten.instance_norm.default";
    ValueList args = batch ? ValueList{x, w, b, mean, var}
                           : ValueList{x, w, b, None{}, None{}, true, 0.1, 1e-5, false};
    ValueList fused_args = args;
    const std::string fused_op =
        batch ? "wgnn.batch_norm_activation.default" : "wgnn.instance_norm_activation.default";
    ops::NamedArgs(fused_op, fused_args).set_activation({ops::Activation::GeluTanh});
    TensorRef fused = ops::call(g, fused_op, fused_args).tensor();
    const Value norm = ops::call(g, op, args);
    const TensorRef y = norm.is_list() ? norm.list()[0].tensor() : norm.tensor();
    expect_same(g, fused, ops::call(g, "aten.gelu.default", {y, std::string("tanh")}).tensor());
  }
}

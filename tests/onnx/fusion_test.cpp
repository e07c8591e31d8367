// Fused chains of ONNX nodes (the IR passes, passes/): GELU as exporters write it and
// MatMul with a constant scale and bias, each recorded as one dispatch. Every
// model runs fused and unfused (SessionOptions::fusion) and against a
// reference computed here; chains that must not be fused (an intermediate
// value used elsewhere or a graph output, other constants, shapes the fused
// op would change) keep the unfused dispatch count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <numbers>
#include <random>

#include "gpu_fixture.h"
#include "graph/half.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"
#include "scoped_env.h"
#include <algorithm>
#include <optional>

using namespace wgnn;
using onnx_import::Session;
using onnx_import::SessionOptions;
using testing::HasSubstr;
using wgnn::test::ModelBuilder;

namespace {

const float kSqrt2 = 1.4142135381698608f, kHalfSqrt2 = 0.70710678f;
const float kBeta = 0.7978845834732056f, kKappa = 0.044714998453855515f;

HostTensor seeded(const Shape& s, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  HostTensor t(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = u(rng);
  return t;
}
std::vector<float> values(const HostTensor& t) { return {t.as<float>(), t.as<float>() + t.numel()}; }

// A float32 scalar: a Constant node (as the TorchScript exporter writes
// them) or a rank-0 initializer.
void scalar(ModelBuilder& b, const std::string& name, float v, bool constant_node = true) {
  if (!constant_node) {
    b.init_f32(name, {}, {v});
    return;
  }
  auto* n = b.node("Constant", {}, {name});
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_float_data(v);
}

struct Result {
  HostTensor y;
  size_t dispatches = 0;
  std::string summary;
  std::vector<std::string> labels;  // each dispatch's
};

Result run(const std::string& path, const std::map<std::string, HostTensor>& in, bool fusion, bool fp16 = false,
           const std::string& out = "y") {
  SessionOptions o;
  o.fusion = fusion;
  o.fp16 = fp16;
  o.tiered = false;  // the plan on the kernels it will keep (tensor cores where it takes them)
  Session s(test::ctx(), path, o);
  Result r;
  r.y = s.run(in).at(out);
  r.dispatches = s.graph().dispatches().size();
  for (const auto& d : s.graph().dispatches()) r.labels.push_back(d.label);
  r.summary = s.summary();
  return r;
}

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

// Runs `path` (input x [2, 3, 8], output y) fused and unfused: both match
// `ref` elementwise within `tol` (relative to max |ref|), the dispatch
// counts are the expected ones.
void check(const std::string& path, const std::function<double(double)>& ref, size_t fused_dispatches,
           size_t unfused_dispatches, double tol = 1e-5) {
  const HostTensor x = seeded({2, 3, 8}, 7, 4.f);
  const Result f = run(path, {{"x", x}}, true), u = run(path, {{"x", x}}, false);
  EXPECT_EQ(f.dispatches, fused_dispatches) << path;
  EXPECT_EQ(u.dispatches, unfused_dispatches) << path;
  if (fused_dispatches < unfused_dispatches) EXPECT_THAT(f.summary, HasSubstr("fused chains"));
  else EXPECT_THAT(f.summary, testing::Not(HasSubstr("fused")));
  ASSERT_EQ(f.y.shape, x.shape);
  ASSERT_EQ(u.y.shape, x.shape);
  double scale = 0;
  for (float v : values(x)) scale = std::max(scale, std::abs(ref(v)));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double want = ref(x.as<float>()[i]);
    EXPECT_NEAR(f.y.as<float>()[i], want, tol * scale) << path << " fused, element " << i;
    EXPECT_NEAR(u.y.as<float>()[i], want, tol * scale) << path << " unfused, element " << i;
  }
}

// x / sqrt(2) (or x * (1 / sqrt(2))) -> Erf -> + 1 -> the tail of `variant`:
//   0: (x * t) * 0.5 (TorchScript's nn.GELU export)
//   1: (t * 0.5) * x, the scalars as initializers
//   2: t * (x * 0.5)
std::string gelu_erf_model(const std::string& name, int variant, bool mul_head, float k_div = kSqrt2,
                           float k_one = 1.f, float k_half = 0.5f) {
  ModelBuilder b;
  b.input("x", {2, 3, 8});
  b.output("y", {2, 3, 8});
  const bool nodes = variant != 1;
  scalar(b, "k_div", mul_head ? 1.f / k_div : k_div, nodes);
  scalar(b, "k_one", k_one, nodes);
  scalar(b, "k_half", k_half, nodes);
  b.node(mul_head ? "Mul" : "Div", {"x", "k_div"}, {"d"});
  b.node("Erf", {"d"}, {"e"});
  if (variant == 2) b.node("Add", {"k_one", "e"}, {"t"});
  else b.node("Add", {"e", "k_one"}, {"t"});
  if (variant == 0) {
    b.node("Mul", {"x", "t"}, {"m"});
    b.node("Mul", {"m", "k_half"}, {"y"});
  } else if (variant == 1) {
    b.node("Mul", {"k_half", "t"}, {"m"});
    b.node("Mul", {"m", "x"}, {"y"});
  } else {
    b.node("Mul", {"x", "k_half"}, {"h"});
    b.node("Mul", {"t", "h"}, {"y"});
  }
  return b.save(name);
}

}  // namespace

TEST(Fusion, GeluErfChainsAreOneDispatch) {
  check(gelu_erf_model("gelu_torch.onnx", 0, false), gelu_erf, 1, 5);
  check(gelu_erf_model("gelu_mul_head.onnx", 1, true), gelu_erf, 1, 5);
  check(gelu_erf_model("gelu_half_first.onnx", 2, false), gelu_erf, 1, 5);
  check(gelu_erf_model("gelu_half_first_mul.onnx", 2, true), gelu_erf, 1, 5);
}

TEST(Fusion, GeluTanhChainsAreOneDispatch) {
  // TorchScript's nn.GELU(approximate='tanh'): x * (x * x), and the Hugging
  // Face form with Pow(x, 3) and 0.5 * x first.
  for (bool pow : {false, true}) {
    ModelBuilder b;
    b.input("x", {2, 3, 8});
    b.output("y", {2, 3, 8});
    scalar(b, "kappa", kKappa);
    scalar(b, "beta", kBeta);
    scalar(b, "one", 1.f);
    scalar(b, "half", 0.5f);
    scalar(b, "three", 3.f);
    if (pow) {
      b.node("Pow", {"x", "three"}, {"cube"});
    } else {
      b.node("Mul", {"x", "x"}, {"sq"});
      b.node("Mul", {"x", "sq"}, {"cube"});
    }
    b.node("Mul", {"kappa", "cube"}, {"k"});
    b.node("Add", {"x", "k"}, {"s"});
    b.node("Mul", {"beta", "s"}, {"in"});
    b.node("Tanh", {"in"}, {"th"});
    b.node("Add", {"one", "th"}, {"t"});
    if (pow) {
      b.node("Mul", {"half", "x"}, {"h"});
      b.node("Mul", {"h", "t"}, {"y"});
    } else {
      b.node("Mul", {"x", "t"}, {"m"});
      b.node("Mul", {"half", "m"}, {"y"});
    }
    check(b.save(pow ? "gelu_tanh_pow.onnx" : "gelu_tanh.onnx"), gelu_tanh, 1, pow ? 8 : 9);
  }
}

TEST(Fusion, GeluWithOtherConstantsIsNotFused) {
  // Each a chain of the fused shape whose result differs from GELU.
  check(gelu_erf_model("not_gelu_div.onnx", 0, false, 1.5f),
        [](double x) { return 0.5 * x * (1 + std::erf(x / 1.5)); }, 5, 5);
  check(gelu_erf_model("not_gelu_one.onnx", 1, true, kSqrt2, 2.f),
        [](double x) { return 0.5 * x * (2 + std::erf(x / std::sqrt(2.0))); }, 5, 5);
  check(gelu_erf_model("not_gelu_half.onnx", 2, false, kSqrt2, 1.f, 0.25f),
        [](double x) { return 0.5 * gelu_erf(x); }, 5, 5);
}

TEST(Fusion, GeluWhoseIntermediateIsUsedElsewhereIsNotFused) {
  for (int c = 0; c < 2; ++c) {
    // c == 0: Erf's output is also a graph output; c == 1: 1 + erf is also
    // read by another node.
    ModelBuilder b;
    b.input("x", {2, 3, 8});
    b.output("y", {2, 3, 8});
    b.output("z", {2, 3, 8});
    scalar(b, "k_div", kSqrt2);
    scalar(b, "k_one", 1.f);
    scalar(b, "k_half", 0.5f);
    b.node("Div", {"x", "k_div"}, {"d"});
    b.node("Erf", {"d"}, {c == 0 ? "z" : "e"});
    b.node("Add", {c == 0 ? "z" : "e", "k_one"}, {"t"});
    if (c == 1) b.node("Relu", {"t"}, {"z"});
    b.node("Mul", {"x", "t"}, {"m"});
    b.node("Mul", {"m", "k_half"}, {"y"});
    const size_t n = c == 0 ? 5 : 6;
    check(b.save(c == 0 ? "gelu_output.onnx" : "gelu_shared.onnx"), gelu_erf, n, n);
    const HostTensor x = seeded({2, 3, 8}, 7, 4.f);
    const Result z = run(b.save("gelu_z.onnx"), {{"x", x}}, true, false, "z");
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double e = std::erf(double(x.as<float>()[i]) / std::sqrt(2.0));
      EXPECT_NEAR(z.y.as<float>()[i], c == 0 ? e : std::max(0.0, 1 + e), 1e-5);
    }
  }
}

namespace {

// y = MatMul(x [2, 5, 8], W [8, 6]) + bias (of shape `bias_shape`; a graph
// input when `bias_input`), the Add's operands in either order.
std::string matmul_bias_model(const std::string& name, const Shape& bias_shape, bool bias_first,
                              bool bias_input = false, bool product_is_output = false,
                              bool bias_identity = false) {
  ModelBuilder b;
  b.input("x", {2, 5, 8});
  b.output("y", {2, 5, 6});
  if (product_is_output) b.output("p", {2, 5, 6});
  b.init_f32("W", {8, 6}, values(seeded({8, 6}, 3, 1.f)));
  if (bias_input) b.input("b", bias_shape);
  else b.init_f32("b", bias_shape, values(seeded(bias_shape, 5, 1.f)));
  // An Identity of the bias, as the TorchScript exporter writes for a shared weight.
  const std::string bias = bias_identity ? "b_id" : "b";
  if (bias_identity) b.node("Identity", {"b"}, {"b_id"});
  b.node("MatMul", {"x", "W"}, {"p"});
  b.node("Add", bias_first ? std::vector<std::string>{bias, "p"} : std::vector<std::string>{"p", bias}, {"y"});
  return b.save(name);
}

// x @ W + b on the host, b broadcast from `bias_shape` to [2, 5, 6].
std::vector<double> matmul_bias_ref(const HostTensor& x, const Shape& bias_shape, const HostTensor& b) {
  const HostTensor w = seeded({8, 6}, 3, 1.f);
  std::vector<double> y(60);
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t n = 0; n < 6; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < 8; ++k) acc += double(x.as<float>()[r * 8 + k]) * w.as<float>()[k * 6 + n];
      int64_t bi = 0;
      if (bias_shape.size() >= 1 && bias_shape.back() == 6) bi += n;
      if (bias_shape.size() >= 2 && bias_shape[bias_shape.size() - 2] == 5) bi += (r % 5) * 6;
      y[size_t(r * 6 + n)] = acc + b.as<float>()[bi];
    }
  return y;
}

}  // namespace

TEST(Fusion, MatMulWithAConstantBiasIsOneDispatch) {
  const HostTensor x = seeded({2, 5, 8}, 11, 2.f);
  struct Case {
    Shape bias;
    bool bias_first, fused, identity = false;
  };
  // [5, 6] varies along M: an Add of its own.
  for (const Case& c : {Case{{6}, true, true}, Case{{6}, false, true}, Case{{1, 1, 6}, false, true},
                        Case{{1}, true, true}, Case{{5, 6}, false, false}, Case{{6}, true, true, true}}) {
    const std::string path =
        matmul_bias_model(fmt::format("matmul_bias_{}_{}_{}.onnx", shape_str(c.bias), c.bias_first, c.identity),
                          c.bias, c.bias_first, false, false, c.identity);
    const Result f = run(path, {{"x", x}}, true), u = run(path, {{"x", x}}, false);
    EXPECT_EQ(f.dispatches, c.fused ? 1u : 2u) << shape_str(c.bias);
    EXPECT_EQ(u.dispatches, 2u);
    ASSERT_EQ(f.y.shape, (Shape{2, 5, 6}));
    const std::vector<double> want = matmul_bias_ref(x, c.bias, seeded(c.bias, 5, 1.f));
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(f.y.as<float>()[i], want[i], 1e-5) << shape_str(c.bias) << " element " << i;
      // The bias is added to the same float32 product, in the same order.
      EXPECT_EQ(f.y.as<float>()[i], u.y.as<float>()[i]) << shape_str(c.bias) << " element " << i;
    }
  }
}

TEST(Fusion, MatMulWhoseBiasIsNotConstantOrProductIsUsedIsNotFused) {
  const HostTensor x = seeded({2, 5, 8}, 11, 2.f), b = seeded({6}, 5, 1.f);
  const Result in = run(matmul_bias_model("matmul_bias_input.onnx", {6}, false, true), {{"x", x}, {"b", b}}, true);
  EXPECT_EQ(in.dispatches, 2u);
  const std::string path = matmul_bias_model("matmul_product_out.onnx", {6}, false, false, true);
  const Result out = run(path, {{"x", x}}, true);
  EXPECT_EQ(out.dispatches, 2u);
  const std::vector<double> want = matmul_bias_ref(x, {6}, b);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(in.y.as<float>()[i], want[i], 1e-5);
    EXPECT_NEAR(out.y.as<float>()[i], want[i], 1e-5);
  }
  const Result p = run(path, {{"x", x}}, true, false, "p");
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(p.y.as<float>()[i], want[i] - b.as<float>()[i % 6], 1e-5);
}

namespace {

// Attention scores: (q * c_q) @ k / divisor, q [2, 4, 8], k [2, 8, 4].
std::string scaled_product_model(const std::string& name, float c_q, float divisor) {
  ModelBuilder b;
  b.input("q", {2, 4, 8});
  b.input("k", {2, 8, 4});
  b.output("y", {2, 4, 4});
  scalar(b, "c_q", c_q);
  scalar(b, "divisor", divisor);
  b.node("Mul", {"q", "c_q"}, {"qs"});
  b.node("MatMul", {"qs", "k"}, {"s"});
  b.node("Div", {"s", "divisor"}, {"y"});
  return b.save(name);
}

}  // namespace

TEST(Fusion, ScalarFactorsFoldIntoTheProduct) {
  const HostTensor q = seeded({2, 4, 8}, 1, 2.f), k = seeded({2, 8, 4}, 2, 2.f);
  // No fold by a zero divisor (inf, not 0 * inf): the chain is built node by node.
  for (float divisor : {4.f, 0.f}) {
    const std::string path = scaled_product_model(fmt::format("scaled_{}.onnx", divisor), 0.5f, divisor);
    const Result f = run(path, {{"q", q}, {"k", k}}, true);
    EXPECT_EQ(f.dispatches, divisor != 0 ? 1u : 3u);
    EXPECT_EQ(run(path, {{"q", q}, {"k", k}}, false).dispatches, 3u);
    ASSERT_EQ(f.y.shape, (Shape{2, 4, 4}));
    for (int64_t bi = 0; bi < 2; ++bi)
      for (int64_t m = 0; m < 4; ++m)
        for (int64_t n = 0; n < 4; ++n) {
          double acc = 0;
          for (int64_t kk = 0; kk < 8; ++kk)
            acc += double(q.as<float>()[(bi * 4 + m) * 8 + kk]) * 0.5 * k.as<float>()[(bi * 8 + kk) * 4 + n];
          const float got = f.y.as<float>()[(bi * 4 + m) * 4 + n];
          if (divisor == 0) {
            if (std::abs(acc) > 1e-3) EXPECT_EQ(got, acc > 0 ? INFINITY : -INFINITY);
          } else {
            EXPECT_NEAR(got, acc / divisor, 1e-5);
          }
        }
  }
}

TEST(Fusion, Float16ModeFusesMatMulBiasAndGelu) {
  if (!wgnn::test::ctx().features().shader_f16)
    GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks (the test checks both modes)";
  // A transformer MLP's first half: GELU(x @ W + b), in float16 mode against
  // a double-precision reference.
  ModelBuilder b;
  b.input("x", {2, 5, 8});
  b.output("y", {2, 5, 16});
  const HostTensor w = seeded({8, 16}, 3, 0.5f), bias = seeded({16}, 5, 0.5f);
  b.init_f32("W", {8, 16}, values(w));
  b.init_f32("b", {16}, values(bias));
  scalar(b, "k_div", kSqrt2);
  scalar(b, "k_one", 1.f);
  scalar(b, "k_half", 0.5f);
  b.node("MatMul", {"x", "W"}, {"p"});
  b.node("Add", {"b", "p"}, {"h"});
  b.node("Div", {"h", "k_div"}, {"d"});
  b.node("Erf", {"d"}, {"e"});
  b.node("Add", {"e", "k_one"}, {"t"});
  b.node("Mul", {"h", "t"}, {"m"});
  b.node("Mul", {"m", "k_half"}, {"y"});
  const std::string path = b.save("mlp_fp16.onnx");
  const HostTensor x = seeded({2, 5, 8}, 11, 2.f);
  const Result f = run(path, {{"x", x}}, true, true), u = run(path, {{"x", x}}, false, true);
  EXPECT_EQ(f.dispatches, 3u);  // cast in, the product with its bias and GELU, cast out
  EXPECT_EQ(u.dispatches, 9u);
  ASSERT_EQ(f.y.dtype, DType::F32);
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t n = 0; n < 16; ++n) {
      double acc = bias.as<float>()[n];
      for (int64_t k = 0; k < 8; ++k) acc += double(x.as<float>()[r * 8 + k]) * w.as<float>()[k * 16 + n];
      EXPECT_NEAR(f.y.as<float>()[r * 16 + n], gelu_erf(acc), 2e-2 + 2e-3 * std::abs(gelu_erf(acc)));
      EXPECT_NEAR(u.y.as<float>()[r * 16 + n], gelu_erf(acc), 2e-2 + 2e-3 * std::abs(gelu_erf(acc)));
    }
}

// GELU(x @ W + b) and GELU(x @ W) (erf and tanh forms): the GELU runs in the
// product's epilogue, one dispatch, against a double-precision reference.
TEST(Fusion, GeluAfterAMatMulRunsInItsEpilogue) {
  for (int v = 0; v < 4; ++v) {
    const bool with_bias = v % 2 == 0, tanh_form = v >= 2;
    SCOPED_TRACE(fmt::format("bias {} tanh {}", with_bias, tanh_form));
    ModelBuilder b;
    b.input("x", {2, 5, 8});
    b.output("y", {2, 5, 16});
    const HostTensor w = seeded({8, 16}, 3, 0.5f), bias = seeded({16}, 5, 0.5f);
    b.init_f32("W", {8, 16}, values(w));
    b.node("MatMul", {"x", "W"}, {"p"});
    std::string h = "p";
    if (with_bias) {
      b.init_f32("b", {16}, values(bias));
      b.node("Add", {"p", "b"}, {"h"});
      h = "h";
    }
    scalar(b, "k_one", 1.f);
    scalar(b, "k_half", 0.5f);
    if (tanh_form) {
      scalar(b, "k_three", 3.f);
      scalar(b, "k_kappa", kKappa);
      scalar(b, "k_beta", kBeta);
      b.node("Pow", {h, "k_three"}, {"c"});
      b.node("Mul", {"c", "k_kappa"}, {"kc"});
      b.node("Add", {h, "kc"}, {"s"});
      b.node("Mul", {"s", "k_beta"}, {"bs"});
      b.node("Tanh", {"bs"}, {"e"});
    } else {
      scalar(b, "k_div", kSqrt2);
      b.node("Div", {h, "k_div"}, {"d"});
      b.node("Erf", {"d"}, {"e"});
    }
    b.node("Add", {"e", "k_one"}, {"t"});
    b.node("Mul", {h, "t"}, {"m"});
    b.node("Mul", {"m", "k_half"}, {"y"});
    const std::string path = b.save(fmt::format("mm_gelu_{}.onnx", v));
    const HostTensor x = seeded({2, 5, 8}, 11, 2.f);
    const Result f = run(path, {{"x", x}}, true), u = run(path, {{"x", x}}, false);
    EXPECT_EQ(f.dispatches, 1u);
    EXPECT_EQ(u.dispatches, (with_bias ? 2u : 1u) + (tanh_form ? 8u : 5u));
    for (int64_t r = 0; r < 10; ++r)
      for (int64_t n = 0; n < 16; ++n) {
        double acc = with_bias ? bias.as<float>()[n] : 0.0;
        for (int64_t k = 0; k < 8; ++k) acc += double(x.as<float>()[r * 8 + k]) * w.as<float>()[k * 16 + n];
        const double want = tanh_form ? gelu_tanh(acc) : gelu_erf(acc);
        EXPECT_NEAR(f.y.as<float>()[r * 16 + n], want, 1e-5 + 1e-5 * std::abs(want)) << r << "," << n;
        EXPECT_NEAR(u.y.as<float>()[r * 16 + n], want, 1e-5 + 1e-5 * std::abs(want)) << r << "," << n;
      }
  }
}

// The product is also read elsewhere (here: a graph output): the GELU stays
// its own dispatch.
TEST(Fusion, GeluAfterAMatMulWhoseResultIsUsedElsewhereStaysSeparate) {
  ModelBuilder b;
  b.input("x", {2, 5, 8});
  b.output("y", {2, 5, 16});
  b.output("p", {2, 5, 16});
  b.init_f32("W", {8, 16}, values(seeded({8, 16}, 3, 0.5f)));
  scalar(b, "k_div", kSqrt2);
  scalar(b, "k_one", 1.f);
  scalar(b, "k_half", 0.5f);
  b.node("MatMul", {"x", "W"}, {"p"});
  b.node("Div", {"p", "k_div"}, {"d"});
  b.node("Erf", {"d"}, {"e"});
  b.node("Add", {"e", "k_one"}, {"t"});
  b.node("Mul", {"p", "t"}, {"m"});
  b.node("Mul", {"m", "k_half"}, {"y"});
  const std::string path = b.save("mm_gelu_shared.onnx");
  const Result f = run(path, {{"x", seeded({2, 5, 8}, 11, 2.f)}}, true);
  EXPECT_EQ(f.dispatches, 2u);  // the product, then the fused GELU
}

// Attention scores q @ k^T / c with k^T a Transpose of the last two dims
// (and the same on the left operand): the product reads the operand
// transposed, one dispatch instead of a copy and a product. A Transpose of
// other dims, or one whose output is read elsewhere, stays.
TEST(Fusion, TransposedOperandsAreReadInPlace) {
  struct Variant {
    const char* name;
    bool left;                   // the Transpose feeds the left operand
    std::vector<int64_t> perm;   // of the Transpose
    bool shared;                 // its output is also a graph output
    size_t fused, unfused;
  };
  for (const Variant& v : {Variant{"right", false, {0, 1, 3, 2}, false, 1, 3},
                           Variant{"left", true, {0, 1, 3, 2}, false, 1, 3},
                           Variant{"other dims", false, {1, 0, 3, 2}, false, 2, 3},
                           Variant{"shared", false, {0, 1, 3, 2}, true, 2, 3}}) {
    SCOPED_TRACE(v.name);
    ModelBuilder b;
    // left: y = (Q^T) @ K, Q stored [2, 3, 8, 5]; right: y = Q @ K^T, K stored [2, 3, 5, 8].
    const Shape qs = v.left ? Shape{2, 3, 8, 5} : Shape{2, 3, 5, 8};
    const Shape ks = v.left ? Shape{2, 3, 8, 5} : v.perm[0] == 1 ? Shape{3, 2, 5, 8} : Shape{2, 3, 5, 8};
    b.input("q", qs);
    b.input("k", ks);
    b.output("y", {2, 3, 5, 5});
    if (v.shared) b.output("t", v.left ? Shape{2, 3, 5, 8} : Shape{2, 3, 8, 5});
    scalar(b, "c", 4.f);
    const std::string transposed = v.left ? "q" : "k";
    auto* t = b.node("Transpose", {transposed}, {"t"});
    ModelBuilder::attr_ints(t, "perm", v.perm);
    if (v.left) b.node("MatMul", {"t", "k"}, {"p"});
    else b.node("MatMul", {"q", "t"}, {"p"});
    b.node("Div", {"p", "c"}, {"y"});
    const std::string path = b.save(fmt::format("scores_{}.onnx", v.perm[0] * 2 + v.left + 4 * v.shared));
    const HostTensor q = seeded(qs, 21, 1.f), k = seeded(ks, 22, 1.f);
    const Result f = run(path, {{"q", q}, {"k", k}}, true), u = run(path, {{"q", q}, {"k", k}}, false);
    EXPECT_EQ(f.dispatches, v.fused);
    EXPECT_EQ(u.dispatches, v.unfused);
    ASSERT_EQ(f.y.shape, (Shape{2, 3, 5, 5}));
    for (int64_t bh = 0; bh < 6; ++bh)
      for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 5; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < 8; ++d) {
            const double qv = v.left ? q.as<float>()[bh * 40 + d * 5 + i] : q.as<float>()[bh * 40 + i * 8 + d];
            // k [3, 2, 5, 8] under perm (1, 0, 3, 2): batch (b, h) reads k[h, b].
            const int64_t kb = v.perm[0] == 1 ? (bh % 3) * 2 + bh / 3 : bh;
            const double kv = v.left ? k.as<float>()[kb * 40 + d * 5 + j] : k.as<float>()[kb * 40 + j * 8 + d];
            acc += qv * kv;
          }
          const int64_t at = bh * 25 + i * 5 + j;
          EXPECT_NEAR(f.y.as<float>()[at], acc / 4, 1e-5) << at;
          EXPECT_NEAR(u.y.as<float>()[at], acc / 4, 1e-5) << at;
        }
  }
}

// Conv then an inference BatchNormalization: one convolution with the
// normalization folded into its weights and bias, the same values as the
// two ops (within float rounding). Not when the convolution's result is
// also a graph output.
TEST(Fusion, ConvThenBatchNormFoldsIntoTheConv) {
  for (int v = 0; v < 3; ++v) {
    const bool conv_bias = v != 1, shared = v == 2;
    SCOPED_TRACE(fmt::format("conv bias {} shared {}", conv_bias, shared));
    ModelBuilder b;
    b.input("x", {2, 3, 9, 9});
    b.output("y", {2, 8, 9, 9});
    if (shared) b.output("c", {2, 8, 9, 9});
    b.init_f32("w", {8, 3, 3, 3}, values(seeded({8, 3, 3, 3}, 31, 0.5f)));
    std::vector<std::string> in = {"x", "w"};
    if (conv_bias) {
      b.init_f32("cb", {8}, values(seeded({8}, 32, 0.5f)));
      in.push_back("cb");
    }
    auto* conv = b.node("Conv", in, {"c"});
    ModelBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
    std::vector<float> var = values(seeded({8}, 36, 1.f));
    for (float& x : var) x = 0.1f + std::abs(x);
    b.init_f32("gamma", {8}, values(seeded({8}, 33, 2.f)));
    b.init_f32("beta", {8}, values(seeded({8}, 34, 1.f)));
    b.init_f32("mean", {8}, values(seeded({8}, 35, 1.f)));
    b.init_f32("var", {8}, var);
    b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"y"});
    const std::string path = b.save(fmt::format("conv_bn_{}.onnx", v));
    const HostTensor x = seeded({2, 3, 9, 9}, 37, 1.f);
    const Result f = run(path, {{"x", x}}, true), u = run(path, {{"x", x}}, false);
    if (shared) {
      EXPECT_EQ(f.dispatches, u.dispatches);
    } else {
      EXPECT_EQ(f.dispatches + 1, u.dispatches);
      EXPECT_THAT(f.summary, HasSubstr("fused chains"));
    }
    double scale = 0;
    for (float y : values(u.y)) scale = std::max(scale, double(std::abs(y)));
    for (int64_t i = 0; i < u.y.numel(); ++i) EXPECT_NEAR(f.y.as<float>()[i], u.y.as<float>()[i], 1e-5 * scale) << i;
    if (test::ctx().features().shader_f16) {
      // float16 mode: the normalization as a float32 affine in the
      // convolution's epilogue (ConvBatchNormInFloat16RunsInTheEpilogue).
      const size_t f16 = run(path, {{"x", x}}, true, true).dispatches;
      const size_t u16 = run(path, {{"x", x}}, false, true).dispatches;
      EXPECT_EQ(f16 + (shared ? 0 : 1), u16);
    }
  }
}

// A Relu or Clip after a Conv (or a Conv + BatchNormalization) runs in the
// convolution's epilogue, for every convolution kernel (implicit GEMM,
// split-K, depthwise, pointwise), with the unfused run's values.
TEST(Fusion, ReluAndClipAfterAConvRunInItsEpilogue) {
  struct Variant {
    const char* name;
    Shape x, w;
    int64_t group;
    const char* act;  // Relu, Clip (0, 6 as inputs), ClipMax (max only)
    bool bn;
    size_t saved;     // dispatches the fusion saves
  };
  for (const Variant& v : {Variant{"gemm relu", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, "Relu", false, 1},
                           Variant{"gemm clip", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, "Clip", false, 1},
                           Variant{"gemm clip max only", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, "ClipMax", false, 1},
                           Variant{"gemm bn relu", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, "Relu", true, 2},
                           Variant{"split-k clip", {1, 256, 4, 4}, {8, 256, 3, 3}, 1, "Clip", false, 1},
                           Variant{"depthwise clip", {1, 8, 9, 9}, {8, 1, 3, 3}, 8, "Clip", false, 1},
                           Variant{"pointwise relu", {1, 16, 8, 8}, {24, 16, 1, 1}, 1, "Relu", false, 1}}) {
    SCOPED_TRACE(v.name);
    ModelBuilder b;
    const int64_t k = v.w[2];
    const Shape ys = {v.x[0], v.w[0], v.x[2], v.x[3]};
    b.input("x", v.x);
    b.output("y", ys);
    b.init_f32("w", v.w, values(seeded(v.w, 51, 0.6f)));
    b.init_f32("cb", {v.w[0]}, values(seeded({v.w[0]}, 52, 0.5f)));
    auto* conv = b.node("Conv", {"x", "w", "cb"}, {"c"});
    ModelBuilder::attr_ints(conv, "pads", {k / 2, k / 2, k / 2, k / 2});
    ModelBuilder::attr_int(conv, "group", v.group);
    std::string c = "c";
    if (v.bn) {
      std::vector<float> var = values(seeded({v.w[0]}, 56, 1.f));
      for (float& x : var) x = 0.1f + std::abs(x);
      b.init_f32("gamma", {v.w[0]}, values(seeded({v.w[0]}, 53, 2.f)));
      b.init_f32("beta", {v.w[0]}, values(seeded({v.w[0]}, 54, 1.f)));
      b.init_f32("mean", {v.w[0]}, values(seeded({v.w[0]}, 55, 1.f)));
      b.init_f32("var", {v.w[0]}, var);
      b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"n"});
      c = "n";
    }
    if (std::string(v.act) == "Relu") {
      b.node("Relu", {c}, {"y"});
    } else if (std::string(v.act) == "Clip") {
      scalar(b, "lo", 0.f, false);
      scalar(b, "hi", 0.75f, false);
      b.node("Clip", {c, "lo", "hi"}, {"y"});
    } else {
      scalar(b, "hi", 0.5f, false);
      b.node("Clip", {c, "", "hi"}, {"y"});
    }
    const std::string path = b.save(fmt::format("conv_act_{}.onnx", std::hash<std::string>{}(v.name) % 100000));
    const HostTensor x = seeded(v.x, 57, 1.f);
    const Result f = run(path, {{"x", x}}, true), u = run(path, {{"x", x}}, false);
    EXPECT_EQ(f.dispatches + v.saved, u.dispatches);
    ASSERT_EQ(f.y.shape, ys);
    double scale = 0;
    for (float y : values(u.y)) scale = std::max(scale, double(std::abs(y)));
    EXPECT_GT(scale, 0.0);
    int clipped = 0;
    for (int64_t i = 0; i < u.y.numel(); ++i) {
      EXPECT_NEAR(f.y.as<float>()[i], u.y.as<float>()[i], 1e-5 * scale) << i;
      clipped += u.y.as<float>()[i] == 0.f || u.y.as<float>()[i] == 0.75f || u.y.as<float>()[i] == 0.5f;
    }
    EXPECT_GT(clipped, 0);  // the activation did something
  }
}

// A residual block's sum: Conv (+ BatchNormalization) + Add of another
// value (+ Relu) is one convolution adding it in its epilogue, for each
// kernel and in float16 mode; the unfused run's values. The Add's other
// operand first or second; an Add that broadcasts stays correct. The
// float16 variants again on the tensor-core kernels (emulated here where
// the device has none), whose 81- and 64-pixel results (a multiple of 8 or
// not) take the residual in their epilogue too.
TEST(Fusion, ResidualAddAfterAConvRunsInItsEpilogue) {
  for (const bool emulated : {false, true}) {
    SCOPED_TRACE(emulated ? "tensor-core kernels emulated" : "the device's kernels");
    std::optional<test::ScopedSetting> mode;
    if (emulated) mode.emplace("WGNN_SUBGROUP_MATMUL", "emulate");
    struct Variant {
      const char* name;
      Shape x, w;
      int64_t group;
      bool bn, relu, residual_first, fp16;
      Shape r;       // the residual's shape ({}: the result's)
      size_t saved;  // dispatches the fusion saves
    };
    for (const Variant& v : {Variant{"gemm add relu", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, false, true, false, false, {}, 2},
                             Variant{"gemm add, residual first", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, false, false, true, false, {}, 1},
                             Variant{"gemm bn add relu", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, true, true, false, false, {}, 3},
                             Variant{"split-k add relu", {1, 256, 4, 4}, {8, 256, 3, 3}, 1, false, true, false, false, {}, 2},
                             Variant{"depthwise add", {1, 8, 9, 9}, {8, 1, 3, 3}, 8, false, false, false, false, {}, 1},
                             Variant{"pointwise bn add relu fp16", {1, 16, 8, 8}, {24, 16, 1, 1}, 1, true, true, false, true, {}, 3},
                             Variant{"gemm add relu fp16", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, false, true, false, true, {}, 2},
                             Variant{"broadcast add relu", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, false, true, false, false, {1, 8, 1, 1}, 0}}) {
      SCOPED_TRACE(v.name);
      if (v.fp16 && !test::ctx().features().shader_f16) continue;
      if (emulated && !v.fp16) continue;
      ModelBuilder b;
      const int64_t k = v.w[2];
      const Shape ys = {v.x[0], v.w[0], v.x[2], v.x[3]};
      const Shape rs = v.r.empty() ? ys : v.r;
      b.input("x", v.x);
      b.input("r", rs);
      b.output("y", ys);
      b.init_f32("w", v.w, values(seeded(v.w, 61, 0.6f)));
      b.init_f32("cb", {v.w[0]}, values(seeded({v.w[0]}, 62, 0.5f)));
      auto* conv = b.node("Conv", {"x", "w", "cb"}, {"c"});
      ModelBuilder::attr_ints(conv, "pads", {k / 2, k / 2, k / 2, k / 2});
      ModelBuilder::attr_int(conv, "group", v.group);
      std::string c = "c";
      if (v.bn) {
        std::vector<float> var = values(seeded({v.w[0]}, 66, 1.f));
        for (float& x : var) x = 0.1f + std::abs(x);
        b.init_f32("gamma", {v.w[0]}, values(seeded({v.w[0]}, 63, 2.f)));
        b.init_f32("beta", {v.w[0]}, values(seeded({v.w[0]}, 64, 1.f)));
        b.init_f32("mean", {v.w[0]}, values(seeded({v.w[0]}, 65, 1.f)));
        b.init_f32("var", {v.w[0]}, var);
        b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"n"});
        c = "n";
      }
      b.node("Add", v.residual_first ? std::vector<std::string>{"r", c} : std::vector<std::string>{c, "r"},
             {v.relu ? "s" : "y"});
      if (v.relu) b.node("Relu", {"s"}, {"y"});
      const std::string path = b.save(fmt::format("conv_residual_{}.onnx", std::hash<std::string>{}(v.name) % 100000));
      const HostTensor x = seeded(v.x, 67, 1.f), r = seeded(rs, 68, 1.f);
      const Result f = run(path, {{"x", x}, {"r", r}}, true, v.fp16), u = run(path, {{"x", x}, {"r", r}}, false, v.fp16);
      EXPECT_EQ(f.dispatches + v.saved, u.dispatches);
      ASSERT_EQ(f.y.shape, ys);
      double scale = 0;
      for (float y : values(u.y)) scale = std::max(scale, double(std::abs(y)));
      EXPECT_GT(scale, 0.0);
      int zeros = 0;
      for (int64_t i = 0; i < u.y.numel(); ++i) {
        EXPECT_NEAR(f.y.as<float>()[i], u.y.as<float>()[i], (v.fp16 ? 2e-3 : 1e-5) * scale) << i;
        zeros += u.y.as<float>()[i] == 0.f;
      }
      if (v.relu) EXPECT_GT(zeros, 0);
      if (emulated) {
        EXPECT_TRUE(std::any_of(f.labels.begin(), f.labels.end(), [](const std::string& l) {
          return l.find("subgroup-matrix") != std::string::npos && l.find("residual") != std::string::npos;
        })) << f.summary;
      }
    }
  }
}

// In float16 mode a Conv + BatchNormalization (+ Relu / Clip) is one
// dispatch: the weights stay as they are (float16) and the normalization is
// a float32 scale and shift per channel applied to the convolution rounded
// to float16 (the unfused run's values), for every convolution kernel;
// values against a double reference of that (on the float16 inputs,
// weights and bias) and the unfused float16 run.
TEST(Fusion, ConvBatchNormInFloat16RunsInTheEpilogue) {
  if (!test::ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  struct Variant {
    const char* name;
    Shape x, w;
    int64_t group;
    const char* act;  // "", Relu, Clip
    bool conv_bias;
  };
  for (const Variant& v : {Variant{"gemm", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, "", true},
                           Variant{"gemm relu no conv bias", {2, 3, 9, 9}, {8, 3, 3, 3}, 1, "Relu", false},
                           Variant{"gemm clip", {1, 16, 8, 8}, {24, 16, 3, 3}, 1, "Clip", true},
                           Variant{"split-k relu", {1, 256, 4, 4}, {8, 256, 3, 3}, 1, "Relu", true},
                           Variant{"depthwise clip", {1, 8, 9, 9}, {8, 1, 3, 3}, 8, "Clip", true},
                           Variant{"pointwise relu", {1, 16, 8, 8}, {24, 16, 1, 1}, 1, "Relu", true},
                           Variant{"groups", {1, 8, 6, 6}, {8, 4, 3, 3}, 2, "", true}}) {
    SCOPED_TRACE(v.name);
    ModelBuilder b;
    const int64_t k = v.w[2], cout = v.w[0];
    const Shape ys = {v.x[0], cout, v.x[2], v.x[3]};
    b.input("x", v.x);
    b.output("y", ys);
    const std::vector<float> w = values(seeded(v.w, 61, 0.6f)), cb = values(seeded({cout}, 62, 0.5f));
    b.init_f32("w", v.w, w);
    std::vector<std::string> in = {"x", "w"};
    if (v.conv_bias) {
      b.init_f32("cb", {cout}, cb);
      in.push_back("cb");
    }
    auto* conv = b.node("Conv", in, {"c"});
    ModelBuilder::attr_ints(conv, "pads", {k / 2, k / 2, k / 2, k / 2});
    ModelBuilder::attr_int(conv, "group", v.group);
    // A small variance (scales up to ~20) and a mean near the values: what
    // float16 folding into the weights or rounding before the
    // normalization would lose.
    std::vector<float> var = values(seeded({cout}, 66, 0.05f));
    for (float& x : var) x = 0.002f + std::abs(x);
    const std::vector<float> gamma = values(seeded({cout}, 63, 1.f)), beta = values(seeded({cout}, 64, 0.5f)),
                             mean = values(seeded({cout}, 65, 1.f));
    b.init_f32("gamma", {cout}, gamma);
    b.init_f32("beta", {cout}, beta);
    b.init_f32("mean", {cout}, mean);
    b.init_f32("var", {cout}, var);
    const std::string act = v.act;
    b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {act.empty() ? "y" : "n"});
    if (act == "Relu") b.node("Relu", {"n"}, {"y"});
    if (act == "Clip") {
      scalar(b, "lo", -1.f, false);
      scalar(b, "hi", 1.5f, false);
      b.node("Clip", {"n", "lo", "hi"}, {"y"});
    }
    const std::string path = b.save(fmt::format("conv_bn_f16_{}.onnx", std::hash<std::string>{}(v.name) % 100000));
    const HostTensor x = seeded(v.x, 67, 1.f);
    const Result f = run(path, {{"x", x}}, true, true), u = run(path, {{"x", x}}, false, true);
    EXPECT_EQ(f.dispatches + (act.empty() ? 1 : 2), u.dispatches);
    EXPECT_THAT(f.summary, HasSubstr("fused chains"));
    ASSERT_EQ(f.y.shape, ys);
    // The reference on the float16-rounded input, weights and bias, in
    // double, the convolution rounded to float16 before the normalization.
    auto h = [](float a) { return double(half_to_float(float_to_half(a))); };
    const int64_t n = v.x[0], cin = v.x[1], H = v.x[2], W = v.x[3], cin_g = cin / v.group, cout_g = cout / v.group;
    std::vector<double> ref(size_t(numel(ys)));
    double scale = 0;
    for (int64_t nn = 0; nn < n; ++nn)
      for (int64_t co = 0; co < cout; ++co)
        for (int64_t oy = 0; oy < H; ++oy)
          for (int64_t ox = 0; ox < W; ++ox) {
            double acc = v.conv_bias ? h(cb[size_t(co)]) : 0.0;
            const int64_t g0 = co / cout_g * cin_g;
            for (int64_t ci = 0; ci < cin_g; ++ci)
              for (int64_t ky = 0; ky < k; ++ky)
                for (int64_t kx = 0; kx < k; ++kx) {
                  const int64_t iy = oy - k / 2 + ky, ix = ox - k / 2 + kx;
                  if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                  acc += h(x.as<float>()[size_t(((nn * cin + g0 + ci) * H + iy) * W + ix)]) *
                         h(w[size_t(((co * cin_g + ci) * k + ky) * k + kx)]);
                }
            const size_t c = size_t(co);
            double y = (h(float(acc)) - mean[c]) / std::sqrt(double(var[c]) + 1e-5) * gamma[c] + beta[c];
            if (act == "Relu") y = std::max(y, 0.0);
            if (act == "Clip") y = std::clamp(y, -1.0, 1.5);
            ref[size_t(((nn * cout + co) * H + oy) * W + ox)] = y;
            scale = std::max(scale, std::abs(y));
          }
    size_t same = 0;
    for (int64_t i = 0; i < f.y.numel(); ++i) {
      const double r = ref[size_t(i)];
      // The output's float16 rounding (and, rarely, a convolution summed in
      // another order rounding to the neighbouring float16).
      EXPECT_NEAR(f.y.as<float>()[i], r, 1e-3 * scale + 1e-3 * std::abs(r)) << i;
      EXPECT_NEAR(f.y.as<float>()[i], u.y.as<float>()[i], 1e-3 * scale + 1e-3 * std::abs(r)) << i;
      same += f.y.as<float>()[i] == u.y.as<float>()[i];
    }
    // Mostly the very values of the unfused run (scale and shift computed
    // in double here, in f32 there).
    EXPECT_GT(double(same), 0.9 * double(f.y.numel()));
  }
}

TEST(Fusion, EnvironmentVariableTurnsItOff) {
  const std::string path = gelu_erf_model("gelu_env.onnx", 0, false);
  const HostTensor x = seeded({2, 3, 8}, 7, 4.f);
  wgnn::test::ctx().mutable_settings().set("WGNN_NO_FUSION", "1");
  const Result off = run(path, {{"x", x}}, true);
  wgnn::test::ctx().mutable_settings().set("WGNN_NO_FUSION", "0");
  const Result on = run(path, {{"x", x}}, true);
  wgnn::test::ctx().mutable_settings().unset("WGNN_NO_FUSION");
  EXPECT_EQ(off.dispatches, 5u);
  EXPECT_EQ(on.dispatches, 1u);
}

// Attention as exporters write it, recorded as one wgnn.attention dispatch
// that reads q, k and v where they were cut from (the copies the view nodes
// made are dropped as unread), against a double-precision reference.
namespace {

// O[b][h][l][:] = softmax(scale * q k^T + mask) v over q [B,H,L,D], k [B,H,S,D], v [B,H,S,Dv] given by accessors.
std::vector<double> attention_ref(int64_t B, int64_t H, int64_t L, int64_t S, int64_t D, int64_t Dv, double scale,
                                  const std::function<double(int64_t, int64_t, int64_t, int64_t)>& q,
                                  const std::function<double(int64_t, int64_t, int64_t, int64_t)>& k,
                                  const std::function<double(int64_t, int64_t, int64_t, int64_t)>& v,
                                  const std::function<double(int64_t, int64_t, int64_t, int64_t)>& mask) {
  std::vector<double> o(size_t(B * H * L * Dv));
  std::vector<double> s(static_cast<size_t>(S), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t l = 0; l < L; ++l) {
        double m = -1e300, sum = 0;
        for (int64_t j = 0; j < S; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) acc += q(b, h, l, d) * k(b, h, j, d);
          s[size_t(j)] = scale * acc + mask(b, h, l, j);
          m = std::max(m, s[size_t(j)]);
        }
        for (int64_t j = 0; j < S; ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - m));
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j) acc += s[size_t(j)] * v(b, h, j, d);
          o[size_t(((b * H + h) * L + l) * Dv + d)] = acc / sum;
        }
      }
  return o;
}

// DeiT's export (timm, scaled_dot_product_attention): the packed projection
// x [1, N, 3*H*D] reshaped to [1, N, 3, H, D], transposed (2, 0, 3, 1, 4),
// split into q, k, v, squeezed; both q and k^T multiplied by sqrt(1 /
// sqrt(D)) computed from q's shape; the result transposed back and
// reshaped to [1, N, H*D]. `extra`: the Softmax's result is also a graph
// output (then nothing may fuse).
std::string packed_attention_model(const std::string& name, int64_t N, int64_t H, int64_t D, bool extra) {
  ModelBuilder b;
  b.input("x", {1, N, 3 * H * D});
  b.output("y", {1, N, H * D});
  if (extra) b.output("p", {1, H, N, N});
  b.init_i64("shape5", {1, N, 3, H, D});
  b.node("Reshape", {"x", "shape5"}, {"r"});
  auto* t = b.node("Transpose", {"r"}, {"t"});
  ModelBuilder::attr_ints(t, "perm", {2, 0, 3, 1, 4});
  b.init_i64("ones", {1, 1, 1});
  auto* sp = b.node("Split", {"t", "ones"}, {"s0", "s1", "s2"});
  ModelBuilder::attr_int(sp, "axis", 0);
  b.init_i64("ax0", {0});
  b.node("Squeeze", {"s0", "ax0"}, {"q"});
  b.node("Squeeze", {"s1", "ax0"}, {"k"});
  b.node("Squeeze", {"s2", "ax0"}, {"v"});
  // scale = sqrt(1 / sqrt(q.shape[-1])), as the exporter computes it.
  b.node("Shape", {"q"}, {"qs"});
  b.init_i64("m1", {-1});
  b.init_i64("big", {std::numeric_limits<int64_t>::max()});
  b.node("Slice", {"qs", "m1", "big"}, {"dlast"});
  auto* cast = b.node("Cast", {"dlast"}, {"df"});
  ModelBuilder::attr_int(cast, "to", onnx::TensorProto::FLOAT);
  b.node("Sqrt", {"df"}, {"sd"});
  scalar(b, "one", 1.f);
  b.node("Div", {"one", "sd"}, {"inv"});
  b.node("Sqrt", {"inv"}, {"sq"});
  auto* kt = b.node("Transpose", {"k"}, {"kt"});
  ModelBuilder::attr_ints(kt, "perm", {0, 1, 3, 2});
  b.node("Mul", {"q", "sq"}, {"qm"});
  b.node("Mul", {"kt", "sq"}, {"km"});
  b.node("MatMul", {"qm", "km"}, {"sc"});
  auto* sm = b.node("Softmax", {"sc"}, {"p"});
  ModelBuilder::attr_int(sm, "axis", -1);
  b.node("MatMul", {"p", "v"}, {"o"});
  auto* ot = b.node("Transpose", {"o"}, {"ot"});
  ModelBuilder::attr_ints(ot, "perm", {0, 2, 1, 3});
  b.init_i64("shape3", {1, N, H * D});
  b.node("Reshape", {"ot", "shape3"}, {"y"});
  return b.save(name);
}

}  // namespace

TEST(Fusion, PackedAttentionIsOneDispatchReadingTheProjectionInPlace) {
  if (!wgnn::test::ctx().features().shader_f16)
    GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks (the test checks both modes)";
  const int64_t N = 13, H = 3, D = 8;
  const std::string path = packed_attention_model("attn_packed.onnx", N, H, D, false);
  const HostTensor x = seeded({1, N, 3 * H * D}, 71, 1.5f);
  const float* xp = x.as<float>();
  // x[0, n, which, h, d]
  auto at = [&](int64_t which) {
    return [=](int64_t, int64_t h, int64_t n, int64_t d) { return double(xp[((n * 3 + which) * H + h) * D + d]); };
  };
  const std::vector<double> ref = attention_ref(1, H, N, N, D, D, 1 / std::sqrt(double(D)), at(0), at(1), at(2),
                                                [](int64_t, int64_t, int64_t, int64_t) { return 0.0; });
  for (bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16 ? "fp16" : "fp32");
    const Result f = run(path, {{"x", x}}, true, fp16), u = run(path, {{"x", x}}, false, fp16);
    // In float16 mode the float32 input and output are converted on the GPU.
    EXPECT_EQ(f.dispatches, fp16 ? 3u : 1u) << f.summary;
    EXPECT_GE(u.dispatches, 8u);
    ASSERT_EQ(f.y.shape, (Shape{1, N, H * D}));
    const double tol = fp16 ? 1e-2 : 1e-5;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t i = (n * H + h) * D + d;
          const double want = ref[size_t((h * N + n) * D + d)];
          EXPECT_NEAR(f.y.as<float>()[i], want, tol) << i;
          EXPECT_NEAR(u.y.as<float>()[i], want, tol) << i;
        }
  }
}

TEST(Fusion, AttentionWhoseProbabilitiesAreAnOutputIsNotFused) {
  const int64_t N = 5, H = 2, D = 4;
  const std::string path = packed_attention_model("attn_packed_extra.onnx", N, H, D, true);
  const HostTensor x = seeded({1, N, 3 * H * D}, 72, 1.f);
  const Result f = run(path, {{"x", x}}, true), u = run(path, {{"x", x}}, false);
  // Not one attention op; its products still take their scale and their
  // transposed k in place (the IR pass fuse_matmul_add).
  EXPECT_THAT(f.summary, testing::Not(HasSubstr("of them fused chains")));
  EXPECT_THAT(f.summary, HasSubstr("fuse_matmul_add"));
  EXPECT_LT(f.dispatches, u.dispatches);
  for (int64_t i = 0; i < f.y.numel(); ++i) EXPECT_NEAR(f.y.as<float>()[i], u.y.as<float>()[i], 1e-6) << i;
}

// Whisper / BART (transformers' eager attention): q, k, v projections
// [1, L, H*D] / [1, S, H*D] reshaped to heads, k transposed (0, 2, 3, 1),
// the scores times a constant, plus a mask broadcast over the heads (a
// graph input or a constant), softmax, times v, heads merged back.
TEST(Fusion, HeadSplitAttentionWithAMaskIsOneDispatch) {
  if (!wgnn::test::ctx().features().shader_f16)
    GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks (the test checks both modes)";
  struct Variant {
    const char* name;
    int64_t L, S;
    bool mask, mask_const, div;
  };
  const int64_t H = 2, D = 8;
  for (const Variant& vr : {Variant{"self, input mask", 7, 7, true, false, false},
                            Variant{"cross, constant causal-style mask", 5, 11, true, true, false},
                            Variant{"no mask, divided", 6, 9, false, false, true}}) {
    SCOPED_TRACE(vr.name);
    const int64_t L = vr.L, S = vr.S;
    ModelBuilder b;
    b.input("q", {1, L, H * D});
    b.input("k", {1, S, H * D});
    b.input("v", {1, S, H * D});
    if (vr.mask && !vr.mask_const) b.input("mask", {1, 1, L, S});
    b.output("y", {1, L, H * D});
    HostTensor mask(DType::F32, {1, 1, L, S});
    for (int64_t l = 0; l < L; ++l)
      for (int64_t s = 0; s < S; ++s)
        mask.as<float>()[l * S + s] = (s > l + 2) ? -3.4028234663852886e38f : float((l + s) % 3) * 0.25f;
    if (vr.mask && vr.mask_const) b.init_f32("mask", {1, 1, L, S}, values(mask));
    b.init_i64("qshape", {1, L, -1, D});
    b.init_i64("kshape", {1, -1, H, D});
    b.node("Reshape", {"q", "qshape"}, {"qr"});
    b.node("Reshape", {"k", "kshape"}, {"kr"});
    b.node("Reshape", {"v", "kshape"}, {"vr"});
    ModelBuilder::attr_ints(b.node("Transpose", {"qr"}, {"qt"}), "perm", {0, 2, 1, 3});
    ModelBuilder::attr_ints(b.node("Transpose", {"kr"}, {"kt"}), "perm", {0, 2, 3, 1});
    ModelBuilder::attr_ints(b.node("Transpose", {"vr"}, {"vt"}), "perm", {0, 2, 1, 3});
    b.node("MatMul", {"qt", "kt"}, {"sc"});
    scalar(b, "c", vr.div ? 8.f : 0.125f);
    b.node(vr.div ? "Div" : "Mul", {"sc", "c"}, {"scs"});
    std::string logits = "scs";
    if (vr.mask) {
      b.node("Add", {"scs", "mask"}, {"masked"});
      logits = "masked";
    }
    ModelBuilder::attr_int(b.node("Softmax", {logits}, {"p"}), "axis", -1);
    b.node("MatMul", {"p", "vt"}, {"o"});
    ModelBuilder::attr_ints(b.node("Transpose", {"o"}, {"ot"}), "perm", {0, 2, 1, 3});
    b.init_i64("oshape", {1, L, -1});
    b.node("Reshape", {"ot", "oshape"}, {"y"});
    const std::string path = b.save(fmt::format("attn_heads_{}.onnx", std::hash<std::string>{}(vr.name) % 100000));
    const HostTensor q = seeded({1, L, H * D}, 73, 1.f), k = seeded({1, S, H * D}, 74, 1.f),
                     v = seeded({1, S, H * D}, 75, 1.f);
    std::map<std::string, HostTensor> in{{"q", q}, {"k", k}, {"v", v}};
    if (vr.mask && !vr.mask_const) in.emplace("mask", mask);
    auto heads = [&](const HostTensor& t) {
      return [&t](int64_t, int64_t h, int64_t n, int64_t d) { return double(t.as<float>()[(n * H + h) * D + d]); };
    };
    const std::vector<double> ref =
        attention_ref(1, H, L, S, D, D, vr.div ? 1 / 8.0 : 0.125, heads(q), heads(k), heads(v),
                      [&](int64_t, int64_t, int64_t l, int64_t s) { return vr.mask ? double(mask.as<float>()[l * S + s]) : 0.0; });
    for (bool fp16 : {false, true}) {
      SCOPED_TRACE(fp16 ? "fp16" : "fp32");
      const Result f = run(path, in, true, fp16), u = run(path, in, false, fp16);
      // float16 mode: plus the conversions of q, k, v, an input mask and the result.
      EXPECT_EQ(f.dispatches, fp16 ? (vr.mask && !vr.mask_const ? 6u : 5u) : 1u) << f.summary;
      EXPECT_GE(u.dispatches, 6u);
      ASSERT_EQ(f.y.shape, (Shape{1, L, H * D}));
      const double tol = fp16 ? 1e-2 : 1e-5;
      for (int64_t l = 0; l < L; ++l)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < D; ++d) {
            const int64_t i = (l * H + h) * D + d;
            const double want = ref[size_t((h * L + l) * D + d)];
            EXPECT_NEAR(f.y.as<float>()[i], want, tol) << i;
            EXPECT_NEAR(u.y.as<float>()[i], want, tol) << i;
          }
    }
  }
}

// masked_fill as exporters write it (Where(cond, -inf, scores): a causal
// mask from a constant and a key mask from an input) becomes the fused
// attention's additive mask (0 or -inf, built from the conditions): one
// attention and the mask's own small dispatches. A finite fill (torch's
// finfo.min) is no mask: where it replaces a -inf, a sum would differ, so
// the chain stays unfused. Against a double reference.
TEST(Fusion, MaskedFillWithMinusInfinityIsTheAttentionsMask) {
  const int64_t H = 2, L = 5, S = 5, D = 8;
  for (const float fill : {-std::numeric_limits<float>::infinity(), -3.4028234663852886e38f}) {
    SCOPED_TRACE(fill);
    ModelBuilder b;
    b.input("q", {1, H, L, D});
    b.input("k", {1, H, S, D});
    b.input("v", {1, H, S, D});
    b.input("keep", {1, 1, 1, S}, onnx::TensorProto::BOOL);
    b.output("y", {1, H, L, D});
    auto* causal = b.g->add_initializer();
    causal->set_name("causal");
    causal->set_data_type(onnx::TensorProto::BOOL);
    causal->add_dims(L);
    causal->add_dims(S);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t s2 = 0; s2 < S; ++s2) causal->add_int32_data(s2 > l ? 1 : 0);
    scalar(b, "ninf", -std::numeric_limits<float>::infinity());
    scalar(b, "fill", fill);
    scalar(b, "c", 0.25f);
    ModelBuilder::attr_ints(b.node("Transpose", {"k"}, {"kt"}), "perm", {0, 1, 3, 2});
    b.node("MatMul", {"q", "kt"}, {"sc"});
    b.node("Mul", {"sc", "c"}, {"scs"});
    b.node("Where", {"causal", "ninf", "scs"}, {"m1"});
    b.node("Not", {"keep"}, {"drop"});
    b.node("Where", {"drop", "fill", "m1"}, {"m2"});
    ModelBuilder::attr_int(b.node("Softmax", {"m2"}, {"p"}), "axis", -1);
    b.node("MatMul", {"p", "v"}, {"y"});
    const std::string path = b.save(std::isinf(fill) ? "attn_masked_fill_inf.onnx" : "attn_masked_fill_min.onnx");
    const HostTensor q = seeded({1, H, L, D}, 61, 1.f), k = seeded({1, H, S, D}, 62, 1.f),
                     v = seeded({1, H, S, D}, 63, 1.f);
    HostTensor keep(DType::Bool, {1, 1, 1, S});
    for (int64_t s2 = 0; s2 < S; ++s2) keep.data[size_t(s2)] = s2 == 1 ? 0 : 1;  // key 1 dropped
    const std::map<std::string, HostTensor> in{{"q", q}, {"k", k}, {"v", v}, {"keep", keep}};
    auto at = [](const HostTensor& t) {
      return [&t](int64_t, int64_t h, int64_t n, int64_t d) { return double(t.as<float>()[(h * L + n) * D + d]); };
    };
    const std::vector<double> ref = attention_ref(
        1, H, L, S, D, D, 0.25, at(q), at(k), at(v), [&](int64_t, int64_t, int64_t l, int64_t s2) {
          return s2 == 1 ? double(fill) : s2 > l ? -std::numeric_limits<double>::infinity() : 0.0;
        });
    const Result f = run(path, in, true), u = run(path, in, false);
    if (std::isinf(fill)) {
      EXPECT_THAT(f.summary, testing::HasSubstr("fuse_attention 1"));
      EXPECT_LT(f.dispatches, u.dispatches) << f.summary;
    } else {
      EXPECT_THAT(f.summary, testing::Not(testing::HasSubstr("fuse_attention 1"))) << f.summary;
    }
    for (int64_t i = 0; i < f.y.numel(); ++i) {
      EXPECT_NEAR(f.y.as<float>()[i], ref[size_t(i)], 1e-5) << i;
      EXPECT_NEAR(u.y.as<float>()[i], ref[size_t(i)], 1e-5) << i;
    }
  }
}

// Heads flattened into the batch ([B*H, L, D], rank 3), k transposed by a
// last-two-dims Transpose, no output transpose.
TEST(Fusion, Rank3AttentionIsOneDispatch) {
  const int64_t BH = 3, L = 4, S = 6, D = 5;
  ModelBuilder b;
  b.input("q", {BH, L, D});
  b.input("k", {BH, S, D});
  b.input("v", {BH, S, 7});
  b.output("y", {BH, L, 7});
  ModelBuilder::attr_ints(b.node("Transpose", {"k"}, {"kt"}), "perm", {0, 2, 1});
  b.node("MatMul", {"q", "kt"}, {"sc"});
  ModelBuilder::attr_int(b.node("Softmax", {"sc"}, {"p"}), "axis", 2);
  b.node("MatMul", {"p", "v"}, {"y"});
  const std::string path = b.save("attn_rank3.onnx");
  const HostTensor q = seeded({BH, L, D}, 76, 1.f), k = seeded({BH, S, D}, 77, 1.f), v = seeded({BH, S, 7}, 78, 1.f);
  const Result f = run(path, {{"q", q}, {"k", k}, {"v", v}}, true), u = run(path, {{"q", q}, {"k", k}, {"v", v}}, false);
  EXPECT_EQ(f.dispatches, 1u) << f.summary;
  EXPECT_EQ(u.dispatches, 4u);
  auto acc = [](const HostTensor& t, int64_t n, int64_t d) {
    return [&t, n, d](int64_t, int64_t h, int64_t i, int64_t j) { return double(t.as<float>()[(h * n + i) * d + j]); };
  };
  const std::vector<double> ref = attention_ref(1, BH, L, S, D, 7, 1.0, acc(q, L, D), acc(k, S, D), acc(v, S, 7),
                                                [](int64_t, int64_t, int64_t, int64_t) { return 0.0; });
  for (int64_t i = 0; i < f.y.numel(); ++i) {
    EXPECT_NEAR(f.y.as<float>()[i], ref[size_t(i)], 1e-5) << i;
    EXPECT_NEAR(u.y.as<float>()[i], ref[size_t(i)], 1e-5) << i;
  }
}

// A copy whose result only a Shape node reads is not run.
TEST(Fusion, CopiesReadOnlyForTheirShapeAreDropped) {
  ModelBuilder b;
  b.input("x", {2, 3, 4});
  b.output("y", {2, 4, 3});
  ModelBuilder::attr_ints(b.node("Transpose", {"x"}, {"t"}), "perm", {0, 2, 1});
  b.node("Shape", {"t"}, {"s"});
  b.node("Reshape", {"x", "s"}, {"y"});
  const std::string path = b.save("dead_copy.onnx");
  const HostTensor x = seeded({2, 3, 4}, 79, 1.f);
  const Result r = run(path, {{"x", x}}, false);
  EXPECT_EQ(r.dispatches, 0u) << r.summary;
  ASSERT_EQ(r.y.shape, (Shape{2, 4, 3}));
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(r.y.as<float>()[i], x.as<float>()[i]);
}

// A residual Add and the LayerNormalization of its sum: one dispatch that
// writes both, the sum read again afterwards. Also when a node between them
// reads the sum: the importer's own chain declines it, and the IR pass
// (passes/fuse_add_layer_norm.cpp) puts the fused op in the Add's place;
// directly recorded (WGNN_IR_IMPORT=0), it stays two dispatches.
TEST(Fusion, ResidualAddThenLayerNormIsOneDispatch) {
  if (!wgnn::test::ctx().features().shader_f16)
    GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks (the test checks both modes)";
  for (bool early_reader : {false, true}) {
    SCOPED_TRACE(early_reader ? "sum read before the norm" : "sum read after the norm");
    const int64_t R = 6, W = 40;
    ModelBuilder b;
    b.input("a", {2, R / 2, W});
    b.input("c", {2, R / 2, W});
    b.output("y", {2, R / 2, W});
    const HostTensor gamma = seeded({W}, 81, 1.f), beta = seeded({W}, 82, 0.5f);
    b.init_f32("gamma", {W}, values(gamma));
    b.init_f32("beta", {W}, values(beta));
    b.node("Add", {"a", "c"}, {"s"});
    std::string other = "s";
    if (early_reader) {
      b.node("Relu", {"s"}, {"rs"});
      other = "rs";
    }
    auto* ln = b.node("LayerNormalization", {"s", "gamma", "beta"}, {"n"});
    ModelBuilder::attr_int(ln, "axis", -1);
    b.node("Add", {other, "n"}, {"y"});
    const std::string path = b.save(fmt::format("add_ln_{}.onnx", int(early_reader)));
    const HostTensor a = seeded({2, R / 2, W}, 83, 2.f), c = seeded({2, R / 2, W}, 84, 2.f);
    std::vector<double> ref(size_t(R * W));
    for (int64_t r = 0; r < R; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < W; ++j) mean += double(a.as<float>()[r * W + j]) + c.as<float>()[r * W + j];
      mean /= double(W);
      for (int64_t j = 0; j < W; ++j) {
        const double d = double(a.as<float>()[r * W + j]) + c.as<float>()[r * W + j] - mean;
        var += d * d;
      }
      var /= double(W);
      for (int64_t j = 0; j < W; ++j) {
        const double s = double(a.as<float>()[r * W + j]) + c.as<float>()[r * W + j];
        const double o = (early_reader ? std::max(s, 0.0) : s);
        ref[size_t(r * W + j)] = o + (s - mean) / std::sqrt(var + 1e-5) * gamma.as<float>()[j] + beta.as<float>()[j];
      }
    }
    for (bool fp16 : {false, true}) {
      SCOPED_TRACE(fp16 ? "fp16" : "fp32");
      const Result f = run(path, {{"a", a}, {"c", c}}, true, fp16), u = run(path, {{"a", a}, {"c", c}}, false, fp16);
      EXPECT_EQ(f.dispatches + 1, u.dispatches) << f.summary;
      if (early_reader) {
        test::ScopedSetting direct("WGNN_IR_IMPORT", "0");
        EXPECT_EQ(run(path, {{"a", a}, {"c", c}}, true, fp16).dispatches, u.dispatches);
      }
      const double tol = fp16 ? 2e-2 : 1e-5;
      for (int64_t i = 0; i < R * W; ++i) {
        EXPECT_NEAR(f.y.as<float>()[i], ref[size_t(i)], tol) << i;
        EXPECT_NEAR(u.y.as<float>()[i], ref[size_t(i)], tol) << i;
      }
    }
  }
}

// softmax(q k^T) v over [BH, L, D] q and [BH, S, D] k and v, k transposed
// by a Transpose node; saved as `name`.
static std::string attention_model(const std::string& name, int64_t BH, int64_t L, int64_t S, int64_t D) {
  ModelBuilder b;
  b.input("q", {BH, L, D});
  b.input("k", {BH, S, D});
  b.input("v", {BH, S, D});
  b.output("y", {BH, L, D});
  ModelBuilder::attr_ints(b.node("Transpose", {"k"}, {"kt"}), "perm", {0, 2, 1});
  b.node("MatMul", {"q", "kt"}, {"sc"});
  ModelBuilder::attr_int(b.node("Softmax", {"sc"}, {"p"}), "axis", -1);
  b.node("MatMul", {"p", "v"}, {"y"});
  return b.save(name);
}

// Over the one-dispatch kernel's limit of keys (WGNN_ATTENTION_MAX_KEYS):
// float32 attention is still one wgnn.attention, which runs two products
// and a softmax reading q, k and v in place; in float16 mode the chain is
// built node by node (its products may run on tensor cores). Both match
// the one-dispatch kernel.
TEST(Fusion, AttentionOverMoreKeysThanTheLimitRunsAsTwoProducts) {
  const int64_t BH = 2, L = 3, S = 9, D = 4;
  const std::string path = attention_model("attn_limit.onnx", BH, L, S, D);
  const std::map<std::string, HostTensor> in{
      {"q", seeded({BH, L, D}, 85, 1.f)}, {"k", seeded({BH, S, D}, 86, 1.f)}, {"v", seeded({BH, S, D}, 87, 1.f)}};
  wgnn::test::ctx().mutable_settings().set("WGNN_ATTENTION_MAX_KEYS", "8");
  const Result limited = run(path, in, true);
  const Result limited16 = run(path, in, true, true);
  wgnn::test::ctx().mutable_settings().set("WGNN_ATTENTION_MAX_KEYS", "9");
  const Result fused = run(path, in, true);
  const Result fused16 = run(path, in, true, true);
  wgnn::test::ctx().mutable_settings().unset("WGNN_ATTENTION_MAX_KEYS");
  // float16 mode adds the casts of the inputs and the output alike.
  EXPECT_EQ(limited16.dispatches, fused16.dispatches + 2) << limited16.summary;
  EXPECT_THAT(limited16.summary, testing::Not(testing::HasSubstr("fuse_attention")));
  EXPECT_EQ(fused.dispatches, 1u);
  // Product (reading k transposed in place), softmax, product: inside
  // wgnn.attention in float32; in float16 mode, node by node (the IR pass
  // fuse_matmul_add reads k transposed).
  EXPECT_EQ(limited.dispatches, 3u) << limited.summary;
  EXPECT_THAT(limited.summary, testing::HasSubstr("fuse_attention 1"));
  for (int64_t i = 0; i < fused.y.numel(); ++i) EXPECT_NEAR(limited.y.as<float>()[i], fused.y.as<float>()[i], 1e-5) << i;
}

// In float16 mode with tensor cores (emulated here), attention over more
// keys than the limit is fused all the same: the tensor-core kernel takes
// any number of keys. One dispatch besides the float16 casts, as under the
// limit, and the float32 result within float16's error.
TEST(Fusion, LongFloat16AttentionFusedWhereTheTensorCoresTakeIt) {
  const int64_t BH = 2, L = 20, S = 12, D = 16;
  const std::string path = attention_model("attn_long_f16.onnx", BH, L, S, D);
  const std::map<std::string, HostTensor> in{
      {"q", seeded({BH, L, D}, 91, 1.f)}, {"k", seeded({BH, S, D}, 92, 1.f)}, {"v", seeded({BH, S, D}, 93, 1.f)}};
  const Result ref = run(path, in, true);  // float32, the one-dispatch kernel
  const Result under = run(path, in, true, true);
  test::ScopedSetting limit("WGNN_ATTENTION_MAX_KEYS", "8");
  {
    test::ScopedSetting emulate("WGNN_SUBGROUP_MATMUL", "emulate");
    test::ScopedSetting every("WGNN_SUBGROUP_ATTENTION", "1");  // however few queries
    const Result tc = run(path, in, true, true);
    EXPECT_EQ(tc.dispatches, under.dispatches) << tc.summary;
    for (int64_t i = 0; i < ref.y.numel(); ++i) EXPECT_NEAR(tc.y.as<float>()[i], ref.y.as<float>()[i], 4e-3) << i;
  }
  // Without them, the chain node by node as before.
  EXPECT_EQ(run(path, in, true, true).dispatches, under.dispatches + 2);
}

// Declined attention still gets its products' own fusion: the scores'
// scalar factor in the product's epilogue.
TEST(Fusion, DeclinedAttentionKeepsTheScaledProduct) {
  const int64_t BH = 2, L = 3, S = 9, D = 4;
  ModelBuilder b;
  b.input("q", {BH, L, D});
  b.input("kt", {BH, D, S});
  b.input("v", {BH, S, D});
  b.output("y", {BH, L, D});
  b.node("MatMul", {"q", "kt"}, {"sc"});
  scalar(b, "c", 0.5f);
  b.node("Mul", {"sc", "c"}, {"scs"});
  ModelBuilder::attr_int(b.node("Softmax", {"scs"}, {"p"}), "axis", -1);
  b.node("MatMul", {"p", "v"}, {"y"});
  const std::string path = b.save("attn_declined.onnx");
  const std::map<std::string, HostTensor> in{
      {"q", seeded({BH, L, D}, 88, 1.f)}, {"kt", seeded({BH, D, S}, 89, 1.f)}, {"v", seeded({BH, S, D}, 90, 1.f)}};
  wgnn::test::ctx().mutable_settings().set("WGNN_ATTENTION_MAX_KEYS", "8");
  const Result declined = run(path, in, true);
  wgnn::test::ctx().mutable_settings().unset("WGNN_ATTENTION_MAX_KEYS");
  const Result fused = run(path, in, true), plain = run(path, in, false);
  EXPECT_EQ(fused.dispatches, 1u);
  EXPECT_EQ(declined.dispatches, 3u) << declined.summary;  // scaled product, softmax, product
  EXPECT_EQ(plain.dispatches, 4u);
  for (int64_t i = 0; i < fused.y.numel(); ++i) {
    EXPECT_NEAR(declined.y.as<float>()[i], plain.y.as<float>()[i], 1e-5) << i;
    EXPECT_NEAR(fused.y.as<float>()[i], plain.y.as<float>()[i], 1e-5) << i;
  }
}

namespace {

// An 8-bit initializer (uint8 or int8, raw bytes).

}  // namespace

// DequantizeLinear of constant 8-bit weights read by a MatMul: one
// dispatch that reads the weights as stored (wgnn.matmul_dequant, made by
// passes/fuse_matmul_dequant.cpp); the same values as unfused (the weights
// dequantized on the host, then a float product) within float32 summation
// order. Blocked scales stay unfused. Weights the model also returns are
// read as stored by the product all the same (the output is the weights
// dequantized on the host).
TEST(Fusion, DequantizeLinearThenMatMulReadsTheWeightsAsStored) {
  const HostTensor x = seeded({2, 5, 12}, 21, 1.f);
  struct Case {
    int elem;          // TensorProto type of the weights
    int scales;        // 1 per tensor, else per column (axis 1, 7 values) or per row (axis 0, 12)
    bool zp, blocked, second_reader, fused;
  };
  for (const Case& c : {Case{onnx::TensorProto::INT8, 7, true, false, false, true},
                        Case{onnx::TensorProto::UINT8, 1, true, false, false, true},
                        Case{onnx::TensorProto::UINT8, 12, false, false, false, true},
                        Case{onnx::TensorProto::INT8, 7, false, true, false, false},
                        Case{onnx::TensorProto::INT8, 1, false, false, true, true}}) {
    SCOPED_TRACE(fmt::format("elem {} scales {} zp {} blocked {} second reader {}", c.elem, c.scales, c.zp, c.blocked,
                             c.second_reader));
    ModelBuilder b(c.blocked ? 21 : 13);
    b.input("x", {2, 5, 12});
    b.output("y", {2, 5, 7});
    const bool s8 = c.elem == onnx::TensorProto::INT8;
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> q(s8 ? -128 : 0, s8 ? 127 : 255);
    std::vector<int> w(12 * 7), z(size_t(c.blocked ? 28 : c.scales));
    for (int& v : w) v = q(rng);
    for (int& v : z) v = q(rng) / 8;
    b.init_8bit("w", c.elem, {12, 7}, w);
    const Shape ss = c.blocked ? Shape{4, 7} : c.scales == 1 ? Shape{} : Shape{c.scales};
    b.init_f32("s", ss, values(seeded(ss, 9, 0.05f)));
    std::vector<std::string> dq_in = {"w", "s"};
    if (c.zp) {
      b.init_8bit("z", c.elem, ss, z);
      dq_in.push_back("z");
    }
    auto* dq = b.node("DequantizeLinear", dq_in, {"wd"});
    if (c.scales == 12) ModelBuilder::attr_int(dq, "axis", 0);
    if (c.blocked) {
      ModelBuilder::attr_int(dq, "axis", 0);
      ModelBuilder::attr_int(dq, "block_size", 3);
    }
    b.node("MatMul", {"x", "wd"}, {c.second_reader ? "p" : "y"});
    if (c.second_reader) {
      b.output("wd", {12, 7});
      b.node("Identity", {"p"}, {"y"});
    }
    const std::string path = b.save(fmt::format("dq_matmul_{}_{}_{}_{}_{}.onnx", c.elem, c.scales, c.zp, c.blocked,
                                                c.second_reader));
    SessionOptions o;
    Session s(test::ctx(), path, o);
    const auto outs = s.run({{"x", x}});
    const HostTensor& fy = outs.at("y");
    if (c.second_reader) {  // the weights returned: (w - 0) * s, one scale
      const HostTensor& wd = outs.at("wd");
      ASSERT_EQ(wd.shape, (Shape{12, 7}));
      const float scale = seeded(ss, 9, 0.05f).as<float>()[0];
      for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(wd.as<float>()[i], float(w[i]) * scale) << "weight " << i;
    }
    bool dequant_kernel = false;
    for (const auto& d : s.graph().dispatches()) dequant_kernel |= d.label.find("matmul_dequant") != std::string::npos;
    EXPECT_EQ(dequant_kernel, c.fused);
    const Result u = run(path, {{"x", x}}, false);
    ASSERT_EQ(fy.shape, (Shape{2, 5, 7}));
    for (int64_t i = 0; i < fy.numel(); ++i) EXPECT_NEAR(fy.as<float>()[i], u.y.as<float>()[i], 1e-5) << "element " << i;
  }
}

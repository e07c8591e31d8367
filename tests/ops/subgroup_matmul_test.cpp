// The subgroup-matrix (tensor-core) matrix product (ops/subgroup_matmul.h).
// Everywhere: the WGSL generator's checks. Where the device offers f16
// subgroup matrices (a Dawn built from source on a GPU with cooperative
// matrices, with unsafe APIs allowed): float16 products through the ops,
// which then take the tensor-core kernel, against a double-precision
// reference and against the regular kernel of a device without subgroup
// matrices. On lavapipe and with the npm Dawn those cases skip; the regular
// kernels (the fallback) are covered by matmul_test and conv_test. The
// SubgroupMatmulEmulated cases run the same generated kernels with scalar
// code in place of subgroup matrices (WGNN_SUBGROUP_MATMUL=emulate) on any
// device with shader-f16, lavapipe included.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>

#include "scoped_env.h"
#include "error_of.h"
#include "op_test_util.h"
#include "ops/subgroup_attention.h"
#include "ops/subgroup_matmul.h"

using namespace wgnn;
using wgnn::test::ScopedSetting;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

gpu::Context& unsafe_ctx() {
  static gpu::Context* c = [] {
    gpu::ContextOptions opts;
    opts.allow_unsafe_apis = true;
    return new gpu::Context(opts);
  }();
  return *c;
}

struct Case {
  int64_t batch, M, K, N;
  bool ta, tb;
  std::optional<Shape> bias;  // broadcast to [batch, M, N] (or [M, N])
  double alpha, beta;
  bool shared_b;  // B without batch dims (broadcast)
};

// Runs one case on `c` through aten.matmul / wgnn.gemm; returns the result and
// the labels of the recorded dispatches.
std::vector<float> run_case(gpu::Context& c, const Case& k, const std::vector<float>& a, const std::vector<float>& b,
                            const std::vector<float>& bias, std::vector<std::string>* labels) {
  Graph g(c);
  const Shape as = k.batch > 1 ? Shape{k.batch, k.ta ? k.K : k.M, k.ta ? k.M : k.K} : Shape{k.ta ? k.K : k.M, k.ta ? k.M : k.K};
  const Shape b2 = k.tb ? Shape{k.N, k.K} : Shape{k.K, k.N};
  Shape bs = b2;
  if (k.batch > 1 && !k.shared_b) bs.insert(bs.begin(), k.batch);
  TensorRef ta = upload(g, as, a, DType::F16), tb = upload(g, bs, b, DType::F16);
  TensorRef y;
  if (k.batch == 1) {
    Value tc = k.bias ? Value(upload(g, *k.bias, bias, DType::F16)) : Value(None{});
    y = ops::call(g, "wgnn.gemm.default", {ta, tb, tc, k.alpha, k.beta, k.ta, k.tb}).tensor();
  } else {
    // Batched: transpose flags through aten.transpose views are not needed here;
    // the batched cases use untransposed operands.
    y = ops::call(g, "aten.matmul.default", {ta, tb}).tensor();
  }
  g.run();
  for (const auto& n : g.dispatches()) labels->push_back(n.label);
  return download(g, y);
}

std::vector<double> reference(const Case& k, const std::vector<float>& a, const std::vector<float>& b,
                              const std::vector<float>& bias) {
  std::vector<double> out(size_t(k.batch * k.M * k.N));
  for (int64_t t = 0; t < k.batch; ++t)
    for (int64_t m = 0; m < k.M; ++m)
      for (int64_t n = 0; n < k.N; ++n) {
        double s = 0;
        const size_t ao = size_t(t * k.M * k.K), bo = k.shared_b ? 0 : size_t(t * k.K * k.N);
        for (int64_t q = 0; q < k.K; ++q) {
          const double x = a[ao + size_t(k.ta ? q * k.M + m : m * k.K + q)];
          const double y = b[bo + size_t(k.tb ? n * k.K + q : q * k.N + n)];
          s += x * y;
        }
        double v = k.alpha * s;
        if (k.bias && k.beta != 0) {
          const Shape& cs = *k.bias;  // [N], [1, N], [M, 1] or [M, N]
          const int64_t cm = cs.size() == 2 && cs[0] != 1 ? m : 0;
          const int64_t cn = cs.back() != 1 ? n : 0;
          v += k.beta * bias[size_t(cm * (cs.back()) + cn)];
        }
        out[size_t((t * k.M + m) * k.N + n)] = v;
      }
  return out;
}

// sum |a b| (+ |beta bias|) per element, for f16_product_close.
std::vector<double> magnitude_reference(const Case& k, const std::vector<float>& a, const std::vector<float>& b,
                                        const std::vector<float>& bias) {
  Case m = k;
  m.alpha = std::abs(k.alpha), m.beta = std::abs(k.beta);
  return reference(m, magnitudes(a), magnitudes(b), magnitudes(bias));
}

}  // namespace

TEST(SubgroupMatmulWgsl, GeneratesEveryLayoutAndRejectsBadTiles) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool bias : {false, true}) {
        ops::SubgroupMatmulConfig c;
        c.bm = 256, c.bn = 128, c.bk = 32, c.sg_m = 4, c.sg_n = 4, c.stages = 1;
        c.a_trans = ta, c.b_trans = tb, c.bias = bias, c.out_f16 = bias;
        const std::string w = ops::subgroup_matmul_wgsl(c);
        EXPECT_THAT(w, HasSubstr("subgroupMatrixMultiplyAccumulate"));
        EXPECT_THAT(w, HasSubstr("@workgroup_size(512)"));
        // Transposed tiles are read as column-major subgroup matrices.
        EXPECT_EQ(w.find(", true, AS)") != std::string::npos, ta);
        EXPECT_EQ(w.find(", true, BS)") != std::string::npos, tb);
        EXPECT_LE(c.workgroup_bytes(), 48u * 1024u) << c.name();
      }
  for (ops::Activation act : {ops::Activation::Relu, ops::Activation::Clamp, ops::Activation::Gelu,
                              ops::Activation::GeluTanh}) {
    ops::SubgroupMatmulConfig c;
    c.out_f16 = true, c.act = act;
    const std::string w = ops::subgroup_matmul_wgsl(c);
    // The epilogue calls the one activation library (lib/activation.wgsl,
    // pasted in with lib/math.wgsl) with the activation's code.
    EXPECT_THAT(w, HasSubstr("fn apply_activation(code: u32"));
    EXPECT_THAT(w, HasSubstr(fmt::format("let v0 = apply_activation({}u, ", uint32_t(act))));
    EXPECT_THAT(w, HasSubstr(", P.lo, P.hi);"));
  }
  {
    ops::SubgroupMatmulConfig c;
    c.out_f16 = true;
    EXPECT_THAT(ops::subgroup_matmul_wgsl(c), testing::Not(HasSubstr("apply_activation")));
  }
  // The loads: from clamped per-thread addresses with K checked on the last
  // tile only, unless every load is to be checked (/c).
  for (const char* text : {"128x128x32:2x2:1", "64x64x32:2x2:2/t3", "128x128x32:2x2:1/c", "64x64x32:2x2:1/d2/t3"}) {
    const ops::SubgroupMatmulConfig c = ops::parse_subgroup_matmul_config(text);
    const std::string w = ops::subgroup_matmul_wgsl(c);
    EXPECT_EQ(w.find("let kfull = K % BK == 0u;") != std::string::npos, !c.checked_loads) << text;
    EXPECT_EQ(w.find("min(m0 + ") != std::string::npos, !c.checked_loads) << text;
    EXPECT_THAT(w, HasSubstr("if (gm < M && gk < K")) << text;  // the last tile's checked form
  }
  EXPECT_THROW(ops::parse_subgroup_matmul_config("128x128x32:2x2"), Error);
  ops::SubgroupMatmulConfig bad;
  bad.act = ops::Activation(uint32_t(ops::Activation::Silu) + 1);  // past the last code
  EXPECT_THROW(ops::subgroup_matmul_wgsl(bad), Error);
  bad = {};
  bad.bm = 100;  // not a multiple of 16 per subgroup row
  EXPECT_THROW(ops::subgroup_matmul_wgsl(bad), Error);
  bad = {};
  bad.stages = 3;
  EXPECT_THROW(ops::subgroup_matmul_wgsl(bad), Error);
  // Two tiles ahead in registers: a second register set; with two stages
  // the halves of the unrolled step alternate the buffers, one barrier each.
  const ops::SubgroupMatmulConfig d2 = ops::parse_subgroup_matmul_config("64x64x32:2x2:1/d2");
  EXPECT_EQ(d2.prefetch, 2u);
  EXPECT_THAT(d2.name(), HasSubstr(" d2"));
  EXPECT_THAT(ops::subgroup_matmul_wgsl(d2), HasSubstr("var rb0x = vec4<u32>();"));
  {
    const std::string w = ops::subgroup_matmul_wgsl(ops::parse_subgroup_matmul_config("64x64x32:2x2:2/d2"));
    EXPECT_THAT(w, HasSubstr("let abase = 1u * "));
    const auto loop = w.substr(w.find("for (var kt = 0u; kt < ktiles; kt += 2u)"));
    size_t barriers = 0;
    for (size_t at = loop.find("workgroupBarrier();"); at != std::string::npos && at < loop.find("let c_off");
         at = loop.find("workgroupBarrier();", at + 1))
      ++barriers;
    EXPECT_EQ(barriers, 2u);  // one a tile (one stage: two)
  }
  EXPECT_THROW(ops::parse_subgroup_matmul_config("64x64x32:2x2:1/d3"), Error);
  // Word loads (/w): the operands bound as words, no selects in the stores.
  const ops::SubgroupMatmulConfig w = ops::parse_subgroup_matmul_config("64x64x32:2x2:1/w");
  EXPECT_TRUE(w.word_loads);
  EXPECT_THAT(ops::subgroup_matmul_wgsl(w), HasSubstr("var<storage, read> A: array<u32>;"));
  EXPECT_THAT(ops::subgroup_matmul_wgsl(w), testing::Not(HasSubstr("select(v, v.yzwx")));
  EXPECT_THROW(ops::parse_subgroup_matmul_config("64x64x32:2x2:1/w/r"), Error);
  // vec4 workgroup tiles (/v): each chunk stored whole, the tiles read by the
  // same subgroup-matrix loads.
  {
    const ops::SubgroupMatmulConfig v = ops::parse_subgroup_matmul_config("64x64x32:2x2:1/v");
    EXPECT_TRUE(v.vec4_tiles);
    const std::string wv = ops::subgroup_matmul_wgsl(v);
    EXPECT_THAT(wv, HasSubstr("var<workgroup> sa: array<vec4<u32>, 320>;"));
    EXPECT_THAT(wv, HasSubstr("  sa[i / 8u] = v;"));
    EXPECT_THAT(wv, HasSubstr("subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&sa, "));
    EXPECT_THROW(ops::parse_subgroup_matmul_config("64x64x32:2x2:1/v/w"), Error);
  }
}

TEST(SubgroupMatmul, MatchesReferenceAndRegularKernel) {
  gpu::Context& c = unsafe_ctx();
  if (!ops::subgroup_matmul_supported(c)) GTEST_SKIP() << "no f16 subgroup matrices with this Dawn and adapter";
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16 for the regular kernel";
  const std::vector<Case> cases = {
      {1, 1, 8, 8, false, false, std::nullopt, 1, 0, false},
      {1, 37, 24, 40, false, false, std::nullopt, 1, 0, false},
      {1, 200, 72, 136, false, false, Shape{136}, 1, 1, false},
      {1, 136, 40, 264, true, false, Shape{136, 1}, 0.5, 2, false},  // A stored transposed: M % 8 == 0
      {1, 96, 88, 48, false, true, Shape{96, 48}, 1, 1, false},  // linear: x @ W^T + b
      {1, 64, 64, 64, true, true, std::nullopt, -1.5, 0, false},
      {3, 70, 32, 56, false, false, std::nullopt, 1, 0, false},
      {4, 33, 16, 24, false, false, std::nullopt, 1, 0, true},  // B shared by the batch
      {1, 2560, 256, 2048, false, false, Shape{2048}, 1, 1, false},  // the 128x128 tiles (320 of them)
      {1, 2000, 264, 2456, false, true, Shape{2456}, 1, 1, false},   // 128x128 tiles, ragged edges
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(fmt::format("batch {} M {} K {} N {} ta {} tb {} bias {} alpha {} beta {}", k.batch, k.M, k.K, k.N,
                             k.ta, k.tb, k.bias ? shape_str(*k.bias) : "none", k.alpha, k.beta));
    const uint32_t seed = uint32_t(k.M * 31 + k.K * 7 + k.N);
    const auto a = quantize(random_floats(size_t(k.batch * k.M * k.K), -1, 1, seed), DType::F16);
    const auto b = quantize(random_floats(size_t((k.shared_b ? 1 : k.batch) * k.K * k.N), -1, 1, seed + 1), DType::F16);
    const auto bias = k.bias ? quantize(random_floats(size_t(numel(*k.bias)), -1, 1, seed + 2), DType::F16)
                             : std::vector<float>{};
    std::vector<std::string> tc_labels, reg_labels;
    const auto tc = run_case(c, k, a, b, bias, &tc_labels);
    wgnn::test::ctx().mutable_settings().set("WGNN_SUBGROUP_MATMUL", "0");  // the regular kernel, also where ctx() has subgroup matrices
    const auto reg = run_case(ctx(), k, a, b, bias, &reg_labels);
    wgnn::test::ctx().mutable_settings().unset("WGNN_SUBGROUP_MATMUL");
    ASSERT_EQ(tc_labels.size(), 1u);
    // A single product of at most 8 rows takes kernels/gemv.wgsl instead
    // (ops/matmul.cpp), with or without subgroup matrices.
    const bool few_rows = k.batch == 1 && !k.ta && k.M <= 8;
    EXPECT_THAT(tc_labels[0], HasSubstr(few_rows ? "gemv" : "subgroup-matrix"));
    EXPECT_THAT(reg_labels[0], testing::Not(HasSubstr("subgroup-matrix")));
    const auto ref = reference(k, a, b, bias), mag = magnitude_reference(k, a, b, bias);
    // Both accumulate in f32 and round to f16 once: the float16 product bound.
    EXPECT_TRUE(f16_product_close(tc, ref, mag)) << "the tensor-core kernel";
    EXPECT_TRUE(f16_product_close(reg, ref, mag)) << "the regular kernel";
  }
}

// A float16 1x1 convolution (one group) runs as W @ X[n] + bias on subgroup
// matrices: against a double reference and the regular convolution kernel.
TEST(SubgroupMatmul, PointwiseConvolution) {
  gpu::Context& c = unsafe_ctx();
  if (!ops::subgroup_matmul_supported(c)) GTEST_SKIP() << "no f16 subgroup matrices with this Dawn and adapter";
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16 for the regular kernel";
  struct ConvCase {
    int64_t n, cin, cout, h, w;
    bool bias;
  };
  for (const ConvCase& k : {ConvCase{1, 32, 64, 28, 28, true}, ConvCase{2, 96, 24, 14, 14, false}, ConvCase{2, 96, 40, 14, 16, false},
                            ConvCase{1, 320, 1280, 7, 8, true}}) {
    SCOPED_TRACE(fmt::format("n {} cin {} cout {} {}x{} bias {}", k.n, k.cin, k.cout, k.h, k.w, k.bias));
    const uint32_t seed = uint32_t(k.cin * 13 + k.cout);
    const auto x = quantize(random_floats(size_t(k.n * k.cin * k.h * k.w), -1, 1, seed), DType::F16);
    const auto w = quantize(random_floats(size_t(k.cout * k.cin), -1, 1, seed + 1), DType::F16);
    const auto b = quantize(random_floats(size_t(k.cout), -1, 1, seed + 2), DType::F16);
    auto run = [&](gpu::Context& cx, std::string* label) {
      Graph g(cx);
      TensorRef tx = upload(g, {k.n, k.cin, k.h, k.w}, x, DType::F16);
      TensorRef tw = upload(g, {k.cout, k.cin, 1, 1}, w, DType::F16);
      Value tb = k.bias ? Value(upload(g, {k.cout}, b, DType::F16)) : Value(None{});
      TensorRef y = ops::call(g, "aten.convolution.default",
                              {tx, tw, tb, IntList{1, 1}, IntList{0, 0}, IntList{1, 1}, false, IntList{0, 0}, int64_t(1)})
                        .tensor();
      g.run();
      *label = g.dispatches().at(0).label;
      return download(g, y);
    };
    std::string tc_label, reg_label;
    const auto tc = run(c, &tc_label);
    wgnn::test::ctx().mutable_settings().set("WGNN_SUBGROUP_MATMUL", "0");
    const auto reg = run(ctx(), &reg_label);
    wgnn::test::ctx().mutable_settings().unset("WGNN_SUBGROUP_MATMUL");
    // The product reads X's rows as 8 halves: where H*W is not a multiple
    // of 8 (14x14 = 196) the convolution kernel, which gathers X in
    // scalars and writes its results one half at a time, takes it.
    EXPECT_THAT(tc_label, HasSubstr("conv 1x1 subgroup-matrix"));
    EXPECT_THAT(reg_label, testing::Not(HasSubstr("subgroup-matrix")));
    const int64_t hw = k.h * k.w;
    std::vector<double> ref(size_t(k.n * k.cout * hw)), mag(ref.size());
    for (int64_t n = 0; n < k.n; ++n)
      for (int64_t co = 0; co < k.cout; ++co)
        for (int64_t p = 0; p < hw; ++p) {
          double s = k.bias ? b[size_t(co)] : 0.0, sa = k.bias ? std::abs(b[size_t(co)]) : 0.0;
          for (int64_t ci = 0; ci < k.cin; ++ci) {
            const double t = double(w[size_t(co * k.cin + ci)]) * x[size_t((n * k.cin + ci) * hw + p)];
            s += t, sa += std::abs(t);
          }
          ref[size_t((n * k.cout + co) * hw + p)] = s;
          mag[size_t((n * k.cout + co) * hw + p)] = sa;
        }
    EXPECT_TRUE(f16_product_close(tc, ref, mag)) << "the tensor-core kernel";
    EXPECT_TRUE(f16_product_close(reg, ref, mag)) << "the regular kernel";
  }
}

// ---- convolutions as an implicit GEMM (SubgroupMatmulConfig::conv) ---------

namespace {

struct ConvCase {
  const char* name;
  int64_t n, cin, cout, h, w, kh, kw;
  int64_t sh, sw, top, left, bottom, right, dh, dw;
  bool bias;
  const char* act;  // none, relu, clamp (to [-0.25, 0.5])
  bool one_d = false;  // a 1-D convolution over w (h == kh == 1)
  // The weight an input rather than a constant (its rows, where K is not a
  // multiple of 8, are then padded on every run rather than once).
  bool weight_input = false;
  int64_t oh() const { return (h + top + bottom - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + left + right - dw * (kw - 1) - 1) / sw + 1; }
  int64_t K() const { return cin * kh * kw; }
};

ConvCase conv_case(const char* name, int64_t n, int64_t cin, int64_t cout, int64_t h, int64_t w, int64_t k, int64_t stride,
                   int64_t pad, int64_t dil, bool bias = true, const char* act = "none") {
  return {name, n, cin, cout, h, w, k, k, stride, stride, pad, pad, pad, pad, dil, dil, bias, act};
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = [] {
    std::vector<ConvCase> v = {
        conv_case("3x3 pad 1", 1, 16, 32, 16, 16, 3, 1, 1, 1),
        conv_case("3x3 pad 1 no bias", 1, 24, 40, 8, 12, 3, 1, 1, 1, false),
        conv_case("3x3 stride 2", 1, 8, 24, 16, 16, 3, 2, 1, 1),
        conv_case("5x5 pad 2", 1, 8, 16, 12, 10, 5, 1, 2, 1),
        conv_case("3x3 dilation 2", 1, 16, 40, 14, 12, 3, 1, 2, 2, true, "relu"),
        conv_case("7x7 stride 2 pad 3", 1, 8, 64, 32, 32, 7, 2, 3, 1),
        conv_case("odd height, 13x16", 2, 16, 24, 13, 16, 3, 1, 1, 1, true, "clamp"),
        conv_case("3x3 no padding, 10x10 -> 8x8", 2, 8, 16, 10, 10, 3, 1, 0, 1, false, "relu"),
        conv_case("1x1 stride 2", 2, 32, 64, 16, 16, 1, 2, 0, 1),
        conv_case("batch 2 relu", 2, 32, 48, 12, 12, 3, 1, 1, 1, true, "relu"),
        conv_case("batch 2 clamp", 2, 16, 136, 8, 16, 3, 1, 1, 1, true, "clamp"),
        // The Whisper encoder's form: a row of frames (H = 1), stride 2, GELU.
        {"1-D k3 stride 2 gelu", 1, 16, 32, 1, 48, 1, 3, 1, 2, 0, 0, 1, 1, 1, 1, true, "gelu"},
        conv_case("many channels", 1, 160, 72, 8, 8, 3, 1, 1, 1),
        // OH*OW not a multiple of 8: results written one half at a time
        // (ResNet-50's 14x14 and 7x7 stages; a 1x1 one too).
        conv_case("15x15 output", 1, 16, 24, 15, 15, 3, 1, 1, 1, true, "relu"),
        conv_case("3x3 stride 2 on 17x17", 2, 8, 16, 17, 17, 3, 2, 1, 1),
        conv_case("7x7, 3x3 pad 1", 2, 64, 72, 7, 7, 3, 1, 1, 1, true, "clamp"),
        conv_case("1x1 on 14x14", 2, 32, 40, 14, 14, 1, 1, 0, 1, true, "relu"),
        // K not a multiple of 8: the weight rows padded to one, zeros past
        // the end (an RGB image; MODNet's image concatenated to 32
        // channels; a 7x7 stem).
        conv_case("3 input channels", 1, 3, 16, 16, 16, 3, 1, 1, 1, true, "clamp"),
    };
    // Asymmetric (ONNX) pads, a non-square kernel with two strides and
    // dilations, a 1-D convolution.
    v.push_back({"asymmetric pads", 1, 8, 24, 11, 16, 3, 3, 1, 1, 0, 2, 2, 0, 1, 1, true, "none"});
    v.push_back({"3x5 strides 2x1 dilations 1x2", 2, 8, 16, 12, 20, 3, 5, 2, 1, 1, 4, 1, 4, 1, 2, true, "relu"});
    v.push_back({"1x7 pad 3", 1, 8, 16, 6, 20, 1, 7, 1, 1, 0, 3, 0, 3, 1, 1, false, "none"});
    ConvCase one_d{"1-D k=3 pad 1", 2, 16, 24, 1, 40, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, true, "none"};
    one_d.one_d = true;
    v.push_back(one_d);
    v.push_back(conv_case("35 channels, 3x3", 2, 35, 32, 12, 12, 3, 1, 1, 1, true, "relu"));
    v.push_back(conv_case("3 channels 7x7 stride 2", 1, 3, 64, 30, 30, 7, 2, 3, 1));
    ConvCase input_w = conv_case("3 input channels, the weight an input", 1, 3, 16, 16, 16, 3, 2, 1, 1, true, "relu");
    input_w.weight_input = true;
    v.push_back(input_w);
    return v;
  }();
  return cases;
}

struct ConvData {
  std::vector<float> x, w, b;
};

ConvData conv_data(const ConvCase& k) {
  const uint32_t seed = uint32_t(k.cin * 131 + k.cout * 7 + k.h * 3 + k.kh);
  return {quantize(random_floats(size_t(k.n * k.cin * k.h * k.w), -1, 1, seed), DType::F16),
          quantize(random_floats(size_t(k.cout * k.K()), -1, 1, seed + 1), DType::F16),
          quantize(random_floats(size_t(k.cout), -1, 1, seed + 2), DType::F16)};
}

// Runs the case through wgnn.convolution_padded on `c`; the first
// dispatch's label goes to `label`.
std::vector<float> run_conv(gpu::Context& c, const ConvCase& k, const ConvData& d, std::string* label,
                            int* pads = nullptr) {
  Graph g(c);
  const Shape xs = k.one_d ? Shape{k.n, k.cin, k.w} : Shape{k.n, k.cin, k.h, k.w};
  const Shape ws = k.one_d ? Shape{k.cout, k.cin, k.kw} : Shape{k.cout, k.cin, k.kh, k.kw};
  TensorRef tx = upload(g, xs, d.x, DType::F16);
  TensorRef tw = upload(g, ws, d.w, DType::F16, k.weight_input ? TensorKind::Input : TensorKind::Constant);
  Value tb = k.bias ? Value(upload(g, {k.cout}, d.b, DType::F16)) : Value(None{});
  ValueList args = k.one_d ? ValueList{tx, tw, tb, IntList{k.sw}, IntList{k.left, k.right}, IntList{k.dw}, false,
                                       IntList{0}, int64_t(1)}
                           : ValueList{tx, tw, tb, IntList{k.sh, k.sw}, IntList{k.top, k.left, k.bottom, k.right},
                                       IntList{k.dh, k.dw}, false, IntList{0, 0}, int64_t(1)};
  args.push_back(std::string(k.act));
  args.push_back(-0.25);
  args.push_back(0.5);
  TensorRef y = ops::call(g, "wgnn.convolution_padded.default", args).tensor();
  g.run();
  // The convolution's first dispatch (after a padding of its weight rows).
  *label = g.dispatches().at(0).label;
  for (const auto& n : g.dispatches())
    if (n.label.find("conv") != std::string::npos) {
      *label = n.label;
      break;
    }
  if (pads) {
    *pads = 0;
    for (const auto& n : g.dispatches()) *pads += n.label == "weight rows padded to 8";
  }
  return download(g, y);
}

std::vector<double> conv_reference(const ConvCase& k, const ConvData& d) {
  const int64_t oh = k.oh(), ow = k.ow();
  std::vector<double> out(size_t(k.n * k.cout * oh * ow));
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t co = 0; co < k.cout; ++co)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double s = k.bias ? d.b[size_t(co)] : 0.0;
          for (int64_t ci = 0; ci < k.cin; ++ci)
            for (int64_t ky = 0; ky < k.kh; ++ky)
              for (int64_t kx = 0; kx < k.kw; ++kx) {
                const int64_t iy = oy * k.sh - k.top + ky * k.dh, ix = ox * k.sw - k.left + kx * k.dw;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                s += double(d.w[size_t(((co * k.cin + ci) * k.kh + ky) * k.kw + kx)]) *
                     d.x[size_t(((n * k.cin + ci) * k.h + iy) * k.w + ix)];
              }
          if (std::string(k.act) == "relu") s = std::max(s, 0.0);
          if (std::string(k.act) == "clamp") s = std::clamp(s, -0.25, 0.5);
          if (std::string(k.act) == "gelu") s = 0.5 * s * (1 + std::erf(s / std::sqrt(2.0)));
          out[size_t(((n * k.cout + co) * oh + oy) * ow + ox)] = s;
        }
  return out;
}

// Every case on `c` (whose kernel WGNN_SUBGROUP_MATMUL picks) against the
// double reference and the regular kernel on ctx(); `label_has` is what
// the tensor-core dispatch's label holds.
void check_conv_cases(gpu::Context& c, const std::vector<ConvCase>& cases, const std::string& label_has,
                      bool tiles_fit = true) {
  for (const ConvCase& k : cases) {
    SCOPED_TRACE(fmt::format("{}: n {} cin {} cout {} {}x{} k {}x{}", k.name, k.n, k.cin, k.cout, k.h, k.w, k.kh, k.kw));
    const ConvData d = conv_data(k);
    std::string tc_label, reg_label;
    int pads = 0;
    const auto tc = run_conv(c, k, d, &tc_label, &pads);
    const char* mode = wgnn::test::ctx().settings().get("WGNN_SUBGROUP_MATMUL");
    const std::string saved = mode ? mode : "";
    wgnn::test::ctx().mutable_settings().set("WGNN_SUBGROUP_MATMUL", "0");
    const auto reg = run_conv(ctx(), k, d, &reg_label);
    if (mode) wgnn::test::ctx().mutable_settings().set("WGNN_SUBGROUP_MATMUL", saved.c_str()); else wgnn::test::ctx().mutable_settings().unset("WGNN_SUBGROUP_MATMUL");
    if (tiles_fit) {
      // Weight rows padded on every run only where the weight is an input
      // (a constant's once, in prepare).
      EXPECT_EQ(pads, k.K() % 8 != 0 && k.weight_input ? 1 : 0);
      EXPECT_THAT(tc_label, HasSubstr(fmt::format("conv {}x{}", k.kh, k.kw)));
      EXPECT_THAT(tc_label, HasSubstr(label_has));
      if (std::string(k.act) != "none") EXPECT_THAT(tc_label, HasSubstr(k.act));
    } else {
      EXPECT_THAT(tc_label, testing::Not(HasSubstr("subgroup-matrix")));
    }
    EXPECT_THAT(reg_label, testing::Not(HasSubstr("subgroup-matrix")));
    // The float16 product bound holds through relu and clamp (both move a
    // value by no more than its error), with sum |x w| + |b| unclamped.
    const auto ref = conv_reference(k, d);
    ConvCase plain = k;
    plain.act = "none";
    const auto mag = conv_reference(plain, ConvData{magnitudes(d.x), magnitudes(d.w), magnitudes(d.b)});
    EXPECT_TRUE(f16_product_close(tc, ref, mag));
    EXPECT_TRUE(f16_product_close(reg, ref, mag)) << "the regular kernel";
  }
}

// The tile configurations whose B staging differs: threads covering 2 rows
// (64x64 on 4 subgroups), one row (128x128), 4 rows (256x128 on 16; 64x32),
// half a row (BN = 256 on 128 threads, BN = 128 on 64: two column slots),
// 8 rows (BN = 16).
const char* const kConvConfigs[] = {"64x64x32:2x2:2",   "128x128x32:2x2:1", "256x128x32:4x4:1", "64x32x32:2x2:1",
                                    "128x256x32:2x2:2", "32x128x32:1x2:1",  "64x16x16:4x1:2",   "64x64x32:2x2:1/d2",
                                    "64x64x64:2x2:1"};


}  // namespace

// Everywhere: the convolution mode's WGSL for every tile shape, and its
// checks; its emulated form (scalar code in place of subgroup matrices)
// compiles on this device.
TEST(SubgroupMatmulWgsl, ConvolutionModeForEveryTileShape) {
  for (const char* text : kConvConfigs)
    for (ops::Activation act : {ops::Activation::None, ops::Activation::Relu, ops::Activation::Clamp})
      for (bool emulate : {false, true}) {
        ops::SubgroupMatmulConfig c = ops::parse_subgroup_matmul_config(text);
        c.conv = true, c.out_f16 = true, c.bias = act != ops::Activation::None, c.bias_f16 = true, c.act = act,
        c.emulate = emulate;
        SCOPED_TRACE(c.name());
        std::string w;
        ASSERT_NO_THROW(w = ops::subgroup_matmul_wgsl(c));
        EXPECT_THAT(c.name(), HasSubstr(" conv"));
        EXPECT_THAT(w, HasSubstr("var<storage, read> X: array<f16>;"));
        EXPECT_THAT(w, HasSubstr("step_c: u32"));
        EXPECT_EQ(w.find("B["), std::string::npos);  // no row loads of B
        EXPECT_EQ(w.find("subgroupMatrix") != std::string::npos, !emulate);
        EXPECT_EQ(w.find("chromium_experimental_subgroup_matrix") != std::string::npos, !emulate);
        if (emulate && ctx().features().shader_f16 && ops::subgroup_matmul_supported(ctx(), c)) {
          // Resolved here: Tint's compile and the driver's both checked, and
          // nothing left compiling when the process ends.
          EXPECT_NO_THROW(ctx().pipeline(c.name(), w).handle());
        }
      }
  ops::SubgroupMatmulConfig plain;
  EXPECT_NE(plain.name(), [] { ops::SubgroupMatmulConfig c; c.conv = true; return c.name(); }());
  // 64 threads neither cover whole rows of a 96-wide tile nor divide it.
  ops::SubgroupMatmulConfig bad = ops::parse_subgroup_matmul_config("32x96x32:1x2:1");
  bad.conv = true;
  EXPECT_THAT(error_of([&] { ops::subgroup_matmul_wgsl(bad); }), HasSubstr("convolution mode"));
  bad = {};
  bad.conv = true, bad.b_trans = true;
  EXPECT_THROW(ops::subgroup_matmul_wgsl(bad), Error);
  bad = {};
  bad.conv = true, bad.ablate = 1;
  EXPECT_THROW(ops::subgroup_matmul_wgsl(bad), Error);
  // Results one half at a time where OH*OW is not a multiple of 8: C is
  // bound as halves, every store checked against N, and so is a residual
  // read; a product (no conv) is refused.
  ops::SubgroupMatmulConfig odd = ops::parse_subgroup_matmul_config("64x64x32:2x2:1");
  odd.conv = true, odd.out_f16 = true, odd.odd_n = true;
  const std::string w = ops::subgroup_matmul_wgsl(odd);
  EXPECT_THAT(w, HasSubstr("var<storage, read_write> C: array<f16>;"));
  EXPECT_THAT(w, HasSubstr("if (col + 7u < P.N) { C[o + 7u] = f16(v7); }"));
  EXPECT_THAT(odd.name(), HasSubstr(" oddN"));
  odd.residual = odd.residual_first = true;
  const std::string wr = ops::subgroup_matmul_wgsl(odd);
  EXPECT_THAT(wr, HasSubstr("var<storage, read> RES: array<f16>;"));
  EXPECT_THAT(wr, HasSubstr("if (col + q < P.N) { rs[q] = f32(RES[ro + q]); }"));
  odd.residual = odd.residual_first = false, odd.conv = false;
  EXPECT_THAT(error_of([&] { ops::subgroup_matmul_wgsl(odd); }), HasSubstr("scalar float16 results"));
  // A convolution's residual: added to the rounded value, before the
  // activation; the flag alone is refused.
  ops::SubgroupMatmulConfig first = ops::parse_subgroup_matmul_config("64x64x32:2x2:1");
  first.conv = true, first.out_f16 = true, first.act = ops::Activation::Relu, first.residual = true,
  first.residual_first = true;
  const std::string fw = ops::subgroup_matmul_wgsl(first);
  EXPECT_THAT(fw, HasSubstr("let v7 = apply_activation(1u, round_f16(sc[s + 7u] * P.alpha) + rh[3].y, P.lo, P.hi);"));
  EXPECT_THAT(first.name(), HasSubstr(" residual-first"));
  first.residual = false;
  EXPECT_THAT(error_of([&] { ops::subgroup_matmul_wgsl(first); }), HasSubstr("residual before the activation"));
}

// Float16 KxK convolutions (one group) on subgroup matrices, against a
// double reference and the regular kernel, with the tile heuristic, then
// with each tile configuration on a few cases.
TEST(SubgroupMatmul, Convolution) {
  gpu::Context& c = unsafe_ctx();
  if (!ops::subgroup_matmul_supported(c)) GTEST_SKIP() << "no f16 subgroup matrices with this Dawn and adapter";
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16 for the regular kernel";
  check_conv_cases(c, conv_cases(), "subgroup-matrix");
  const std::vector<ConvCase> few = {conv_cases()[2], conv_cases()[6], conv_cases()[13], conv_cases()[18], conv_cases()[20]};
  for (const char* text : kConvConfigs) {
    SCOPED_TRACE(text);
    ScopedSetting env(c, "WGNN_SUBGROUP_MATMUL_CONFIG", text);
    // Tiles over the device's workgroup memory (128x256x32 with two
    // stages: 48 KiB; an H200 under Dawn allows 32) fall back to the
    // regular kernel, still with the right values.
    const bool fits = ops::parse_subgroup_matmul_config(text).workgroup_bytes() <=
                      c.limits().max_compute_workgroup_storage_size;
    check_conv_cases(c, few, "subgroup-matrix", fits);
  }
}

// A convolution whose tiles are 128x128 by the heuristic (at least 300 of
// them) on subgroup matrices.
TEST(SubgroupMatmul, ConvolutionLarge) {
  gpu::Context& c = unsafe_ctx();
  if (!ops::subgroup_matmul_supported(c)) GTEST_SKIP() << "no f16 subgroup matrices with this Dawn and adapter";
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16 for the regular kernel";
  check_conv_cases(c, {conv_case("128 channels 128x128 batch 3", 3, 32, 128, 128, 128, 3, 1, 1, 1, true, "relu")},
                   "subgroup-matrix");
}

// The same kernels emulated (WGNN_SUBGROUP_MATMUL=emulate: scalar code in
// place of subgroup matrices) run on any device with shader-f16: the
// convolution mode's gather, staging and epilogue checked on every tile
// configuration where there are no tensor cores (lavapipe).
TEST(SubgroupMatmulEmulated, Convolution) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  check_conv_cases(ctx(), conv_cases(), "subgroup-matrix");
}

// Each tile configuration of kConvConfigs, emulated, on a few cases: one
// test per configuration, so one this device cannot hold shows as skipped
// (scripts/gpu-check requires none skipped).
class SubgroupMatmulEmulatedConfig : public testing::TestWithParam<const char*> {};

TEST_P(SubgroupMatmulEmulatedConfig, Convolution) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  const std::vector<ConvCase> few = {conv_cases()[2], conv_cases()[6], conv_cases()[13], conv_cases()[18], conv_cases()[20]};
  ops::SubgroupMatmulConfig cfg = ops::parse_subgroup_matmul_config(GetParam());
  cfg.emulate = true, cfg.conv = true, cfg.out_f16 = true, cfg.bias = true, cfg.bias_f16 = true, cfg.act = ops::Activation::Relu;
  if (!ops::subgroup_matmul_supported(ctx(), cfg)) {  // lavapipe: 32 KB of workgroup memory
    GTEST_SKIP() << GetParam() << ": more workgroup memory or threads than this device has";
  }
  ScopedSetting env("WGNN_SUBGROUP_MATMUL_CONFIG", GetParam());
  check_conv_cases(ctx(), few, "emulated");
}
INSTANTIATE_TEST_SUITE_P(Tiles, SubgroupMatmulEmulatedConfig, testing::ValuesIn(kConvConfigs),
                         [](const testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

// One product through the ops with WGNN_SUBGROUP_MATMUL=emulate set: it
// must take the (emulated) tensor-core kernel, in one dispatch, and match the
// double-precision reference.
static void check_emulated_case(const Case& k, uint32_t seed) {
  const auto a = quantize(random_floats(size_t(k.batch * k.M * k.K), -1, 1, seed), DType::F16);
  const auto b = quantize(random_floats(size_t((k.shared_b ? 1 : k.batch) * k.K * k.N), -1, 1, seed + 1), DType::F16);
  const auto bias = k.bias ? quantize(random_floats(size_t(numel(*k.bias)), -1, 1, seed + 2), DType::F16)
                           : std::vector<float>{};
  std::vector<std::string> labels;
  const auto got = run_case(ctx(), k, a, b, bias, &labels);
  ASSERT_EQ(labels.size(), 1u);
  EXPECT_THAT(labels[0], HasSubstr("subgroup-matrix"));
  EXPECT_THAT(labels[0], HasSubstr("emulated"));
  EXPECT_TRUE(f16_product_close(got, reference(k, a, b, bias), magnitude_reference(k, a, b, bias)));
}

// The emulated kernel against the reference on plain products and a 1x1
// convolution (what runs on tensor cores elsewhere).
TEST(SubgroupMatmulEmulated, MatchesReference) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  const std::vector<Case> cases = {
      {1, 37, 24, 40, false, false, std::nullopt, 1, 0, false},
      {1, 200, 72, 136, false, false, Shape{136}, 1, 1, false},
      {1, 136, 40, 264, true, false, Shape{136, 1}, 0.5, 2, false},
      {1, 96, 88, 48, false, true, Shape{96, 48}, 1, 1, false},
      {1, 64, 64, 64, true, true, std::nullopt, -1.5, 0, false},
      {3, 70, 32, 56, false, false, std::nullopt, 1, 0, false},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(fmt::format("batch {} M {} K {} N {} ta {} tb {}", k.batch, k.M, k.K, k.N, k.ta, k.tb));
    check_emulated_case(k, uint32_t(k.M * 31 + k.K * 7 + k.N));
  }
  // A 1x1 convolution through the product path.
  check_conv_cases(ctx(), {conv_case("1x1", 2, 16, 24, 8, 8, 1, 1, 0, 1, true, "relu")}, "conv 1x1 subgroup-matrix");
}

// The fast loads (rows and columns clamped into the matrix, K checked on the
// last tile only) against the reference at every edge: M and N inside one
// tile, across a partial tile and exact multiples; K below one tile, with a
// tail, and a multiple of BK; every layout; batched with a shared B. Run for
// the tiles wgnn picks (64x64 and 128x128, one stage) and the two-stage
// 64x64 tile, emulated.
TEST(SubgroupMatmulEmulated, FastLoadsAtEveryEdge) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  const std::vector<Case> cases = {
      {1, 8, 8, 8, false, false, std::nullopt, 1, 0, false},      // one vec4 wide, one partial K tile
      {1, 128, 64, 128, false, false, std::nullopt, 1, 0, false},  // whole tiles, K a multiple of BK
      {1, 136, 40, 72, true, false, std::nullopt, 1, 0, false},    // partial tiles, a K tail of 8
      {1, 72, 96, 136, false, true, Shape{72, 1}, 1, 1, false},    // B transposed, K a multiple of 32
      {1, 64, 120, 64, true, true, Shape{64}, 2, 1, false},        // both transposed, K tail of 24
      {2, 40, 48, 24, false, false, std::nullopt, 1, 0, true},     // batched, B shared
      // Batched with a K tail: past K, A's rows run into the next row and
      // B's into the next batch entry (nonzero), so a missing K check shows.
      {2, 40, 40, 24, false, false, std::nullopt, 1, 0, false},
      // Five tiles of K with a tail: the two-tiles-ahead loads (/d2) end
      // on the first half of their unrolled step.
      {1, 72, 136, 64, false, false, std::nullopt, 1, 0, false},
  };
  for (const char* tiles :
       {"64x64x32:2x2:2", "128x128x32:2x2:1", "64x64x32:2x2:1", "64x64x64:2x2:1", "64x64x32:2x2:1/d2",
        "128x128x32:2x2:1/d2", "64x64x16:2x2:2/d2"}) {
    ScopedSetting env("WGNN_SUBGROUP_MATMUL_CONFIG", tiles);
    for (const Case& k : cases) {
      SCOPED_TRACE(fmt::format("{}: batch {} M {} K {} N {} ta {} tb {}", tiles, k.batch, k.M, k.K, k.N, k.ta, k.tb));
      check_emulated_case(k, uint32_t(k.M * 13 + k.K * 5 + k.N));
    }
  }
}

// WGNN_SUBGROUP_VEC4_TILES=1: the products' workgroup tiles as vec4<u32>
// (each chunk stored whole), emulated, against the reference at the edges
// and layouts above, on the tiles wgnn picks and a two-stage form; a
// convolution keeps its tiles of halves; a bad value says what it expects.
TEST(SubgroupMatmulEmulated, Vec4TilesMatchTheReference) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  ScopedSetting vec4("WGNN_SUBGROUP_VEC4_TILES", "1");
  const std::vector<Case> cases = {
      {1, 8, 8, 8, false, false, std::nullopt, 1, 0, false},
      {1, 136, 40, 72, true, false, std::nullopt, 1, 0, false},
      {1, 72, 96, 136, false, true, Shape{72, 1}, 1, 1, false},
      {1, 64, 120, 64, true, true, Shape{64}, 2, 1, false},
      {2, 40, 40, 24, false, false, std::nullopt, 1, 0, false},
      {1, 200, 72, 136, false, false, Shape{136}, 1, 1, false},
  };
  for (const char* tiles : {"", "64x64x16:2x2:2/d2"}) {
    ScopedSetting env("WGNN_SUBGROUP_MATMUL_CONFIG", tiles);
    for (const Case& k : cases) {
      SCOPED_TRACE(fmt::format("'{}': batch {} M {} K {} N {} ta {} tb {}", tiles, k.batch, k.M, k.K, k.N, k.ta, k.tb));
      check_emulated_case(k, uint32_t(k.M * 17 + k.K * 3 + k.N));
    }
  }
  check_conv_cases(ctx(), {conv_case("3x3", 1, 8, 16, 10, 10, 3, 1, 1, 1, true, "relu")}, "subgroup-matrix");
  ScopedSetting bad("WGNN_SUBGROUP_VEC4_TILES", "yes");
  EXPECT_THAT(error_of([] { ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 512, 512, 4096, 1); }), HasSubstr("expected 0 or 1"));
}

// Large float16 products whose N or K is not a multiple of 8 (the Whisper
// encoder's attention over 1,500 keys): their operands padded with zeros,
// the product on the (emulated) tensor-core kernel, the padding cropped;
// against the reference, with B transposed and scaled (the scores), K
// ragged and batched (probabilities times values), and both ragged; with
// WGNN_MATMUL_PAD=0 (the default, unset) the regular kernel and the same
// values.
TEST(SubgroupMatmulEmulated, RaggedProductsPaddedToMultiplesOf8) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  const std::vector<Case> cases = {
      {1, 1400, 64, 1500, false, true, std::nullopt, 0.125, 0, false},
      {2, 700, 1500, 64, false, false, std::nullopt, 1, 0, false},
      {1, 600, 1001, 230, false, false, std::nullopt, 1, 0, false},
  };
  uint32_t seed = 300;
  for (const Case& k : cases) {
    SCOPED_TRACE(fmt::format("batch {} M {} K {} N {} tb {}", k.batch, k.M, k.K, k.N, k.tb));
    const auto a = quantize(random_floats(size_t(k.batch * k.M * k.K), -1, 1, seed), DType::F16);
    const auto b = quantize(random_floats(size_t(k.batch * k.K * k.N), -1, 1, seed + 1), DType::F16);
    seed += 2;
    const auto ref = reference(k, a, b, {});
    const auto mag = magnitude_reference(k, a, b, {});
    for (const char* pad : {"1", "0"}) {
      ScopedSetting env("WGNN_MATMUL_PAD", pad);
      std::vector<std::string> labels;
      const auto got = run_case(ctx(), k, a, b, {}, &labels);
      bool padded = false, regular = false;
      for (const std::string& l : labels) {
        padded = padded || (l.find("gemm padded subgroup-matrix") != std::string::npos && l.find("emulated") != std::string::npos);
        regular = regular || l.find("subgroup-matrix") == std::string::npos && l.find("pad") == std::string::npos;
      }
      EXPECT_EQ(padded, pad[0] == '1') << fmt::format("{}", fmt::join(labels, " | "));
      EXPECT_EQ(regular, pad[0] == '0') << fmt::format("{}", fmt::join(labels, " | "));
      EXPECT_TRUE(f16_product_close(got, ref, mag)) << "WGNN_MATMUL_PAD=" << pad;
    }
  }
}

namespace {

// wgnn.matmul_add with a residual on the tensor-core path: the residual
// added in the kernel's epilogue, one dispatch labelled so, against the
// double-precision product plus the residual. `c` a context with subgroup
// matrices, or any with WGNN_SUBGROUP_MATMUL=emulate.
void check_residual_on_subgroup_path(gpu::Context& c) {
  Graph g(c);
  const Case k{1, 96, 64, 80, false, false, std::nullopt, 1, 0, false};
  const auto av = quantize(random_floats(size_t(k.M * k.K), -1, 1, 70), DType::F16);
  const auto bv = quantize(random_floats(size_t(k.K * k.N), -1, 1, 71), DType::F16);
  const auto rv = quantize(random_floats(size_t(k.M * k.N), -1, 1, 72), DType::F16);
  TensorRef a = upload(g, {k.M, k.K}, av, DType::F16), b = upload(g, {k.K, k.N}, bv, DType::F16);
  TensorRef r = upload(g, {k.M, k.N}, rv, DType::F16);
  const size_t before = g.dispatches().size();
  TensorRef y =
      ops::call(g, "wgnn.matmul_add.default", {a, b, None{}, 1.0, std::string("none"), false, false, 0.0, 0.0, r})
          .tensor();
  ASSERT_EQ(g.dispatches().size(), before + 1);
  EXPECT_THAT(g.dispatches()[before].label, HasSubstr("subgroup"));
  EXPECT_THAT(g.dispatches()[before].label, HasSubstr("residual"));
  g.run();
  auto ref = reference(k, av, bv, {}), mag = magnitude_reference(k, av, bv, {});
  for (size_t i = 0; i < ref.size(); ++i) ref[i] += rv[i], mag[i] += std::abs(rv[i]);
  EXPECT_TRUE(f16_product_close(download(g, y), ref, mag));
}

}  // namespace

TEST(SubgroupMatmul, ResidualInTheEpilogue) {
  gpu::Context& c = unsafe_ctx();
  if (!ops::subgroup_matmul_supported(c)) GTEST_SKIP() << "no f16 subgroup matrices with this Dawn and adapter";
  check_residual_on_subgroup_path(c);
}

TEST(SubgroupMatmulEmulated, ResidualInTheEpilogue) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  check_residual_on_subgroup_path(ctx());
}

namespace {

// One wgnn.matmul_add (bias [N], GELU, alpha, a residual) through the
// emulated tensor-core kernel; returns the labels. The result against a
// double-precision reference of act(alpha * A op(B) + bias) + residual.
// With `replay`, the graph replays those structural choices (and says
// whether it followed them in `followed`); `made` and `structure` receive
// its choices and Graph::structure().
std::vector<std::string> check_matmul_add_split(const Case& k, const char* act, uint32_t seed,
                                                const PlanChoices* replay = nullptr, bool* followed = nullptr,
                                                PlanChoices* made = nullptr,
                                                std::vector<int64_t>* structure = nullptr) {
  Graph g(ctx());
  if (replay) g.replay_choices(std::make_shared<const PlanChoices>(*replay));
  const Shape as = k.batch > 1 ? Shape{k.batch, k.ta ? k.K : k.M, k.ta ? k.M : k.K}
                               : Shape{k.ta ? k.K : k.M, k.ta ? k.M : k.K};
  Shape bs = k.tb ? Shape{k.N, k.K} : Shape{k.K, k.N};
  if (k.batch > 1 && !k.shared_b) bs.insert(bs.begin(), k.batch);
  const auto a = quantize(random_floats(size_t(numel(as)), -1, 1, seed), DType::F16);
  const auto b = quantize(random_floats(size_t(numel(bs)), -1, 1, seed + 1), DType::F16);
  const auto bias = quantize(random_floats(size_t(k.N), -1, 1, seed + 2), DType::F16);
  const auto res = quantize(random_floats(size_t(k.batch * k.M * k.N), -1, 1, seed + 3), DType::F16);
  TensorRef ta = upload(g, as, a, DType::F16), tb = upload(g, bs, b, DType::F16);
  TensorRef tc = upload(g, {k.N}, bias, DType::F16);
  Shape os = k.batch > 1 ? Shape{k.batch, k.M, k.N} : Shape{k.M, k.N};
  TensorRef tr = upload(g, os, res, DType::F16);
  const size_t before = g.dispatches().size();
  TensorRef y = ops::call(g, "wgnn.matmul_add.default",
                          {ta, tb, tc, k.alpha, std::string(act), k.ta, k.tb, 0.0, 0.0, tr})
                    .tensor();
  g.run();
  if (followed) *followed = g.replay_followed();
  if (made) *made = g.choices();
  if (structure) *structure = g.structure();
  std::vector<std::string> labels;
  for (size_t i = before; i < g.dispatches().size(); ++i) labels.push_back(g.dispatches()[i].label);
  Case r = k;
  r.bias = Shape{k.N};
  r.beta = 1;
  std::vector<double> ref = reference(r, a, b, bias), mag = magnitude_reference(r, a, b, bias);
  const bool gelu = std::string(act) == "gelu";
  for (size_t i = 0; i < ref.size(); ++i) {
    if (gelu) ref[i] = 0.5 * ref[i] * (1 + std::erf(ref[i] / std::sqrt(2.0)));
    ref[i] += res[i];
    mag[i] += std::abs(res[i]);
  }
  EXPECT_TRUE(f16_product_close(download(g, y), ref, mag));
  return labels;
}

}  // namespace

// Products of too few tiles, cut into ranges of K (split-K) on the emulated
// kernel, then summed with the bias, GELU and residual in a second pass:
// BART's decoder projections (32 rows), DaViT's channel attention (A read
// transposed, a long K), K ending inside a range and a tile, a batch of
// products each with its own B; WGNN_SUBGROUP_SPLITK=N forcing N ranges,
// =0 turning it off (one dispatch, the residual in its epilogue).
// How many ranges: products of at most 64 tiles from 8 steps of 32, in
// ranges of 4 steps or more; none otherwise (a deeper product of more
// tiles too), or with the setting off.
TEST(SubgroupMatmulSplits, RangesForFewTiles) {
  EXPECT_EQ(ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 32, 768, 768, 1).splits, 6);      // BART's 12 tiles, 24 steps
  EXPECT_EQ(ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 32, 768, 768, 1).kchunk, 128);   // 4 steps a range
  EXPECT_EQ(ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 256, 196, 2304, 1, true).splits, 18);  // ResNet-50's 3x3 on 14x14
  EXPECT_EQ(ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 256, 196, 2304, 1).splits, 15);  // a product: 32 tiles of 32x64, ranges of 5 steps
  EXPECT_EQ(ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 1500, 512, 2048, 1).splits, 1);   // Whisper's fc2: 192 tiles
  EXPECT_EQ(ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 64, 64, 224, 1).splits, 1);       // 7 steps
  {
    // The ranges follow the tiles the threshold picks: 512 x 512 x 4096 is
    // 16 tiles of 128x128 (32 ranges) or 64 of 64x64 (8).
    ScopedSetting big("WGNN_SUBGROUP_BIG_TILES", "10");
    EXPECT_EQ(ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 512, 512, 4096, 1).splits, 32);
    ScopedSetting bad("WGNN_SUBGROUP_BIG_TILES", "many");
    EXPECT_THAT(error_of([] { ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 512, 512, 4096, 1); }), HasSubstr("WGNN_SUBGROUP_BIG_TILES='many'"));
  }
  EXPECT_EQ(ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 512, 512, 4096, 1).splits, 8);
  {
    // The tuning switches of the tile choice say what they expect.
    ScopedSetting deep("WGNN_SUBGROUP_DEEP", "64x64x64:2x2:1");
    EXPECT_THAT(error_of([] { ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 512, 512, 4096, 1); }), HasSubstr("expected CONFIG@KMIN"));
  }
  {
    ScopedSetting prefetch("WGNN_SUBGROUP_PREFETCH", "3");
    EXPECT_THAT(error_of([] { ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 512, 512, 4096, 1); }), HasSubstr("expected 1 or 2"));
  }
  ScopedSetting off("WGNN_SUBGROUP_SPLITK", "0");
  EXPECT_EQ(ops::subgroup_gemm_splits(wgnn::test::ctx().settings(), 32, 768, 768, 1).splits, 1);
}

// The tiles pick_config gives (the recorded pipeline, nothing run):
// 32x64x32 for at most 48 tiles of 64x64 (a decoder's 32 rows; split-K
// ranges too); else 64x64 tiles 64 deep where at most 264 of them (two
// workgroups on each of an H200's multiprocessors) run whole and K is at
// least 128; 32 deep with more tiles or a shorter K; 128x128 from 300 such
// tiles. WGNN_SUBGROUP_SMALL_TILES=0 keeps 64x64 for few tiles.
TEST(SubgroupMatmulEmulated, TileDepthFollowsTheWave) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  const struct {
    int64_t M, N, K;
    const char* tiles;
  } cases[] = {
      {640, 448, 128, "64x64x64"},    // 70 tiles
      {768, 1408, 256, "64x64x64"},   // 264 tiles
      {1088, 1024, 256, "64x64x32"},  // 272 tiles
      {640, 448, 120, "64x64x32"},    // K below 128
      {256, 128, 1024, "32x64x32"},   // 8 tiles: split-K ranges
      {32, 768, 768, "32x64x32"},     // BART's 32 rows: 12 tiles
      {448, 384, 200, "32x64x32"},    // 42 tiles
      {448, 448, 200, "64x64x64"},    // 49 tiles
      {2560, 2048, 256, "128x128x32"},
  };
  auto first_kernel = [](int64_t M, int64_t N, int64_t K) {
    Graph g(ctx());
    TensorRef a = upload(g, {M, K}, std::vector<float>(size_t(M * K), 0.5f), DType::F16);
    TensorRef b = upload(g, {K, N}, std::vector<float>(size_t(K * N), 0.25f), DType::F16);
    ops::call(g, "aten.matmul.default", {a, b});
    return g.dispatches().empty() ? std::string() : g.dispatches()[0].pipeline->name();
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(fmt::format("{}x{}x{}", k.M, k.N, k.K));
    EXPECT_THAT(first_kernel(k.M, k.N, k.K), HasSubstr(fmt::format("subgroup matmul {} ", k.tiles)));
  }
  ScopedSetting off("WGNN_SUBGROUP_SMALL_TILES", "0");
  EXPECT_THAT(first_kernel(32, 768, 768), HasSubstr("subgroup matmul 64x64x32 "));
  EXPECT_THAT(first_kernel(448, 384, 200), HasSubstr("subgroup matmul 64x64x64 "));
}

TEST(SubgroupMatmulEmulated, SplitKForFewTiles) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  auto joined = [](const std::vector<std::string>& l) { return fmt::format("{}", fmt::join(l, " | ")); };
  const struct {
    Case k;
    const char* act;
    const char* splits;
  } cases[] = {
      {{1, 32, 768, 64, false, true, std::nullopt, 1, 1, false}, "gelu", "splitk=6"},
      {{1, 32, 4096, 32, true, false, std::nullopt, 0.25, 1, false}, "none", "splitk=32"},
      {{1, 40, 296, 24, false, false, std::nullopt, 0.5, 1, false}, "none", "splitk=2"},
      {{3, 16, 512, 16, false, false, std::nullopt, 1, 1, false}, "gelu", "splitk=4"},
  };
  uint32_t seed = 900;
  for (const auto& c : cases) {
    SCOPED_TRACE(fmt::format("batch {} M {} K {} N {} ta {} tb {}", c.k.batch, c.k.M, c.k.K, c.k.N, c.k.ta, c.k.tb));
    const auto labels = check_matmul_add_split(c.k, c.act, seed += 4);
    ASSERT_EQ(labels.size(), 2u) << joined(labels);
    EXPECT_THAT(labels[0], HasSubstr("subgroup-matrix"));
    EXPECT_THAT(labels[0], HasSubstr(c.splits));
    EXPECT_THAT(labels[0], HasSubstr("emulated"));
    EXPECT_THAT(labels[1], HasSubstr("gemm splitk sum"));
    EXPECT_THAT(labels[1], HasSubstr("bias residual"));
  }
  const Case mid{1, 136, 200, 72, false, false, std::nullopt, 1, 1, false};
  {
    ScopedSetting forced("WGNN_SUBGROUP_SPLITK", "3");
    const auto labels = check_matmul_add_split(mid, "gelu", 950);
    ASSERT_EQ(labels.size(), 2u) << joined(labels);
    EXPECT_THAT(labels[0], HasSubstr("splitk=3"));
  }
  {
    ScopedSetting off("WGNN_SUBGROUP_SPLITK", "0");
    const auto labels = check_matmul_add_split(cases[0].k, "gelu", 960);
    ASSERT_EQ(labels.size(), 1u) << joined(labels);
    EXPECT_THAT(labels[0], testing::Not(HasSubstr("splitk")));
    EXPECT_THAT(labels[0], HasSubstr("gelu residual"));
  }
}

// A product's split of K is a choice of the plan's structure
// (Graph::choose). Replayed where the product's own choice is no split
// (WGNN_SUBGROUP_SPLITK=0 stands in for a size whose tiles need none), it
// runs one range of K through the same two passes: the first size's
// structure, and the values of the product. Replayed the other way, no
// split where the product would split, one dispatch.
TEST(SubgroupMatmulEmulated, AReplayedSplitRunsOneRangeOfK) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  const Case k{1, 32, 768, 64, false, true, std::nullopt, 1, 1, false};
  PlanChoices split_log, whole_log;
  std::vector<int64_t> split_structure, whole_structure, s;
  bool followed = false;
  const auto split = check_matmul_add_split(k, "gelu", 970, nullptr, nullptr, &split_log, &split_structure);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_THAT(split[0], HasSubstr("splitk=6"));
  {
    ScopedSetting off("WGNN_SUBGROUP_SPLITK", "0");
    const auto whole = check_matmul_add_split(k, "gelu", 971, nullptr, nullptr, &whole_log, &whole_structure);
    ASSERT_EQ(whole.size(), 1u);
    const auto replayed = check_matmul_add_split(k, "gelu", 972, &split_log, &followed, nullptr, &s);
    EXPECT_TRUE(followed);
    EXPECT_EQ(s, split_structure);
    ASSERT_EQ(replayed.size(), 2u);
    EXPECT_THAT(replayed[0], HasSubstr("splitk=1"));
    EXPECT_THAT(replayed[1], HasSubstr("gemm splitk sum 1"));
  }
  const auto replayed = check_matmul_add_split(k, "gelu", 973, &whole_log, &followed, nullptr, &s);
  EXPECT_TRUE(followed);
  EXPECT_EQ(s, whole_structure);
  EXPECT_EQ(replayed.size(), 1u);
}

// Every workgroup variable of the subgroup-matrix kernels is a whole number
// of 16-byte units. On an H200 under Vulkan, one 4-byte variable (a u32 or
// an atomic<u32> flag) beside the tiles made the matrix results wrong, even
// where nothing wrote it (docs/DAWN.md): the tiles' loads and stores need
// 16-byte alignment, which variables of 4 bytes can break.
TEST(SubgroupKernels, WorkgroupVariablesAreWhole16ByteUnits) {
  auto check = [](const std::string& wgsl, const std::string& what) {
    static const std::map<std::string, uint64_t> bytes = {{"f16", 2}, {"f32", 4}, {"u32", 4}, {"i32", 4},
                                                          {"vec4<u32>", 16}, {"vec4<f32>", 16}, {"vec4<f16>", 8}, {"atomic<u32>", 4}};
    size_t at = 0, seen = 0;
    while ((at = wgsl.find("var<workgroup> ", at)) != std::string::npos) {
      const size_t colon = wgsl.find(':', at), semi = wgsl.find(';', at);
      ASSERT_NE(semi, std::string::npos);
      std::string type = wgsl.substr(colon + 2, semi - colon - 2);
      uint64_t n = 1;
      if (type.rfind("array<", 0) == 0) {
        const size_t comma = type.rfind(", ");
        n = std::stoull(type.substr(comma + 2, type.size() - comma - 3));
        type = type.substr(6, comma - 6);
      }
      const auto it = bytes.find(type);
      ASSERT_NE(it, bytes.end()) << what << ": " << wgsl.substr(at, semi - at);
      EXPECT_EQ(n * it->second % 16, 0u) << what << ": " << wgsl.substr(at, semi - at);
      at = semi;
      ++seen;
    }
    EXPECT_GT(seen, 0u) << what;
  };
  for (uint32_t d : {16u, 32u, 48u, 64u, 80u, 128u})
    for (uint32_t sg : {1u, 2u, 4u, 8u})
      for (uint32_t bkv : {16u, 32u, 48u, 64u})
        for (bool qreg : {false, true})
          for (bool ksplit : {false, true})
            for (int form = 0; form < 4; ++form) {
              ops::SubgroupAttentionConfig c;
              c.d = d, c.dv = d == 80 ? 32 : d, c.sg = sg, c.bkv = bkv, c.qreg = qreg, c.ksplit = ksplit, c.vec = true;
              c.v_double = form & 1, c.p_pad = form & 2, c.shuffle = form == 3;
              check(ops::subgroup_attention_wgsl(c), c.name());
            }
  for (uint32_t bm : {32u, 64u, 128u})
    for (uint32_t bn : {32u, 64u, 128u})
      for (uint32_t bk : {16u, 32u, 64u})
        for (uint32_t stages : {1u, 2u})
          for (bool trans : {false, true})
            for (bool full : {false, true}) {
              ops::SubgroupMatmulConfig c;
              c.bm = bm, c.bn = bn, c.bk = bk, c.stages = stages, c.a_trans = trans, c.b_trans = trans,
              c.full_tiles = full;
              check(ops::subgroup_matmul_wgsl(c), fmt::format("{}x{}x{} stages {} trans {} full {}", bm, bn, bk,
                                                              stages, trans, full));
            }
}

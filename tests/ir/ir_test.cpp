// The model IR and its passes on graphs built through the C++ API: each
// fusion applied (fewer dispatches, the same results as a double-precision
// host reference), the fallback to the unfused chain where a plan's shapes
// do not allow the fused op, constant folding, dead code, and plans per
// input shape sharing one upload of the constants.
#include <fmt/format.h>
#include <gmock/gmock.h>

#include <cmath>

#include "gpu/error.h"
#include "graph/half.h"
#include "ir/graph.h"
#include "ir/program.h"
#include "ops/registry.h"
#include "error_of.h"
#include "op_test_util.h"
#include "passes/passes.h"
#include "scoped_env.h"

namespace wgnn::test {
namespace {

// passes::optimize with the tests' settings, as a Session passes them
// (WGNN_DISABLE_PASSES, set by test::ScopedSetting).
passes::Report optimize_with_settings(ir::Graph& g) {
  passes::OptimizeOptions o;
  o.disabled = test::ctx().settings().value("WGNN_DISABLE_PASSES");
  return passes::optimize(g, o);
}

}  // namespace

namespace {

HostTensor host(const Shape& s, const std::vector<float>& v) {
  HostTensor t(DType::F32, s);
  std::memcpy(t.data.data(), v.data(), v.size() * 4);
  return t;
}

std::vector<float> floats(const HostTensor& t) {
  std::vector<float> v(size_t(t.numel()));
  if (t.dtype == DType::F16) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = half_to_float(t.as<uint16_t>()[i]);
    return v;
  }
  std::memcpy(v.data(), t.data.data(), v.size() * 4);
  return v;
}

// The double reference of multi-head attention over rows of E = H * D
// values: Q [L, E], K and V [S, E]; each head's softmax of scale * q.k
// over the S keys weighs V. Returns [L, E].
std::vector<double> attention_ref(const std::vector<double>& Q, const std::vector<double>& K,
                                  const std::vector<double>& V, int64_t L, int64_t S, int64_t H, int64_t D,
                                  double scale) {
  const int64_t E = H * D;
  std::vector<double> ref(size_t(L * E));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> p(static_cast<size_t>(S));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < S; ++j) {
        double sc = 0;
        for (int64_t d = 0; d < D; ++d) sc += Q[size_t(i * E + h * D + d)] * K[size_t(j * E + h * D + d)];
        mx = std::max(mx, p[size_t(j)] = sc * scale);
      }
      for (double& e : p) sum += (e = std::exp(e - mx));
      for (int64_t d = 0; d < D; ++d) {
        double o = 0;
        for (int64_t j = 0; j < S; ++j) o += p[size_t(j)] * V[size_t(j * E + h * D + d)];
        ref[size_t(i * E + h * D + d)] = o / sum;
      }
    }
  return ref;
}

// A float16 constant made from float32 values, as float16 mode's importer
// makes a model's weights (its source values kept for the passes).
TensorRef f16_made_constant(ir::Graph& g, const Shape& sh, const std::vector<float>& v) {
  auto src = std::make_shared<const HostTensor>(host(sh, v));
  return g.made_constant(DType::F16, sh, fmt::format("test:{}", static_cast<const void*>(src.get())),
                         [src](HostTensor& scratch) -> const HostTensor& {
                           to_f16_saturated(*src, scratch);
                           return scratch;
                         },
                         {}, src);
}

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// x [rows, K] @ w[N, K]^T + b, then gelu.
std::vector<double> linear_gelu_ref(const std::vector<float>& x, const std::vector<float>& w,
                                    const std::vector<float>& b, int64_t rows, int64_t K, int64_t N) {
  std::vector<double> out(size_t(rows * N));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      double s = b[size_t(n)];
      for (int64_t k = 0; k < K; ++k) s += double(x[size_t(r * K + k)]) * double(w[size_t(n * K + k)]);
      out[size_t(r * N + n)] = gelu(s);
    }
  }
  return out;
}

struct LinearGelu {
  ir::Graph g;
  std::vector<float> w = random_floats(32 * 64, -0.2f, 0.2f, 1), b = random_floats(32, -0.5f, 0.5f, 2);
  LinearGelu() {
    const TensorRef x = g.input("x", DType::F32, {"batch", 64});
    const TensorRef wc = g.constant(host({32, 64}, w), "w");
    const TensorRef bc = g.constant(host({32}, b), "b");
    const TensorRef h = g.call("aten.linear.default", {x, wc, bc}, "fc");
    g.output(g.call("aten.gelu.default", {h, std::string("none")}, "act"), "y");
  }
};

TEST(IrPasses, LinearThenGeluIsOneDispatchWithTheGeluInItsEpilogue) {
  LinearGelu plain, fused;
  const passes::Report r = optimize_with_settings(fused.g);
  EXPECT_EQ(r.count("fuse_matmul_activation"), 1u) << r.summary();
  ASSERT_EQ(fused.g.live_nodes(), 1u) << fused.g.dump();
  EXPECT_EQ(fused.g.nodes()[0].op, "wgnn.matmul_add.default");
  EXPECT_NE(fused.g.dump().find("'gelu'"), std::string::npos) << fused.g.dump();

  ir::Program unfused_p(ctx(), std::move(plain.g));
  ir::Program fused_p(ctx(), std::move(fused.g));
  for (int64_t rows : {3, 17}) {
    const std::vector<float> x = random_floats(size_t(rows * 64), -1.f, 1.f, uint32_t(rows));
    const auto ref = linear_gelu_ref(x, fused.w, fused.b, rows, 64, 32);
    const auto a = fused_p.run({host({rows, 64}, x)});
    const auto u = unfused_p.run({host({rows, 64}, x)});
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].shape, (Shape{rows, 32}));
    EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-5, 1e-4));
    EXPECT_TRUE(all_close(floats(u[0]), ref, 1e-5, 1e-4));
    EXPECT_EQ(fused_p.plan({{rows, 64}}).dispatches().size() + 1, unfused_p.plan({{rows, 64}}).dispatches().size());
    EXPECT_EQ(fused_p.last_lowering().fused, 1u);
    EXPECT_TRUE(fused_p.last_lowering().fallbacks.empty());
  }
  // Two shapes kept (one plan where their structures agree), the weights uploaded once.
  EXPECT_EQ(fused_p.plan_sizes(), 2);
  EXPECT_LE(fused_p.plans(), 2);
  EXPECT_EQ(fused_p.constants().stats().uploads, 2u);
  EXPECT_EQ(fused_p.constants().stats().entries, 2u);
}

TEST(IrPasses, GeluWrittenOutIsOneGeluThenInTheProductsEpilogue) {
  // x * 0.5 * (1 + erf(x / sqrt(2))) after a linear, in the ATen ops an
  // exporter's chain becomes: fuse_gelu makes it aten.gelu, which
  // fuse_matmul_activation then puts in the product's epilogue. The batch
  // dim is a symbol, so the scalars must be rank 0 (their rank is checked
  // against x's where x's shape is known). A chain with 0.6 in place of 0.5
  // is not GELU and stays.
  for (const float half : {0.5f, 0.6f}) {
    SCOPED_TRACE(half);
    ir::Graph g;
    const std::vector<float> w = random_floats(32 * 64, -0.2f, 0.2f, 1), b = random_floats(32, -0.5f, 0.5f, 2);
    const TensorRef x = g.input("x", DType::F32, {"batch", 64});
    const TensorRef h = g.call("aten.linear.default", {x, g.constant(host({32, 64}, w)), g.constant(host({32}, b))});
    const TensorRef d = g.call("aten.div.Tensor", {h, g.constant(host({}, {1.4142135381698608f}))});
    const TensorRef e = g.call("aten.erf.default", {d});
    const TensorRef t = g.call("aten.add.Tensor", {g.constant(host({}, {1.f})), e});
    const TensorRef m = g.call("aten.mul.Tensor", {h, t});
    g.output(g.call("aten.mul.Tensor", {m, g.constant(host({}, {half}))}), "y");
    const passes::Report r = optimize_with_settings(g);
    const bool gelu_chain = half == 0.5f;
    EXPECT_EQ(r.count("fuse_gelu"), gelu_chain ? 1u : 0u) << r.summary();
    EXPECT_EQ(r.count("fuse_matmul_activation"), gelu_chain ? 1u : 0u) << r.summary();
    EXPECT_EQ(g.live_nodes(), gelu_chain ? 1u : 6u) << g.dump();
    ir::Program p(ctx(), std::move(g));
    const std::vector<float> xv = random_floats(size_t(5 * 64), -1.f, 1.f, 9);
    const auto y = p.run({host({5, 64}, xv)});
    std::vector<double> ref = linear_gelu_ref(xv, w, b, 5, 64, 32);
    if (!gelu_chain)
      for (double& v : ref) v *= double(half) / 0.5;
    EXPECT_TRUE(all_close(floats(y[0]), ref, 1e-5, 1e-4));
    EXPECT_EQ(p.plan({{5, 64}}).dispatches().size(), gelu_chain ? 1u : 6u);
  }
}

TEST(IrPasses, FusedNodeFallsBackToItsChainWhereThePlanShapeDoesNotAllowIt) {
  // A 1-D input: aten.linear takes it, wgnn.matmul_add does not.
  ir::Graph g;
  const std::vector<float> w = random_floats(8 * 16, -1.f, 1.f, 3), b = random_floats(8, -1.f, 1.f, 4);
  const TensorRef x = g.input("x", DType::F32, {"k"});
  const TensorRef h = g.call("aten.linear.default", {x, g.constant(host({8, 16}, w)), g.constant(host({8}, b))});
  g.output(g.call("aten.gelu.default", {h}));
  EXPECT_EQ(optimize_with_settings(g).count("fuse_matmul_activation"), 1u);
  ir::Program p(ctx(), std::move(g));
  const std::vector<float> xv = random_floats(16, -1.f, 1.f, 5);
  const auto y = p.run({host({16}, xv)});
  EXPECT_EQ(y[0].shape, (Shape{8}));
  EXPECT_TRUE(all_close(floats(y[0]), linear_gelu_ref(xv, w, b, 1, 16, 8), 1e-5, 1e-4));
  ASSERT_EQ(p.last_lowering().fallbacks.size(), 1u);
  EXPECT_NE(p.last_lowering().fallbacks[0].find("at least 2-D"), std::string::npos) << p.last_lowering().fallbacks[0];
}

// Conv 3->8 (3x3, pad 1) + inference batch norm + relu, NCHW, in double.
std::vector<double> conv_bn_relu_ref(const std::vector<float>& x, const std::vector<float>& w,
                                     const std::vector<float>& bias, const std::vector<float>& gamma,
                                     const std::vector<float>& beta, const std::vector<float>& mean,
                                     const std::vector<float>& var, int64_t H, int64_t W, double eps) {
  std::vector<double> out(size_t(8 * H * W));
  for (int64_t co = 0; co < 8; ++co) {
    for (int64_t y = 0; y < H; ++y) {
      for (int64_t xx = 0; xx < W; ++xx) {
        double s = bias[size_t(co)];
        for (int64_t ci = 0; ci < 3; ++ci) {
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = y + ky - 1, ix = xx + kx - 1;
              if (iy < 0 || ix < 0 || iy >= H || ix >= W) continue;
              s += double(x[size_t((ci * H + iy) * W + ix)]) * double(w[size_t(((co * 3 + ci) * 3 + ky) * 3 + kx)]);
            }
          }
        }
        const double n = (s - mean[size_t(co)]) / std::sqrt(double(var[size_t(co)]) + eps) * gamma[size_t(co)] +
                         beta[size_t(co)];
        out[size_t((co * H + y) * W + xx)] = std::max(n, 0.0);
      }
    }
  }
  return out;
}

// The Whisper encoder's front: a 1-D convolution (stride 1, then 2) and a
// GELU, each pair one convolution applying the GELU in its epilogue
// (whatever kernel runs it: the implicit GEMM here, the patches and GEMM
// with WGNN_CONV_PATCHES=1), against the double reference.
TEST(IrPasses, ConvGeluIsOneConvolution) {
  const std::vector<float> w1 = random_floats(12 * 4 * 3, -0.5f, 0.5f, 60), b1 = random_floats(12, -0.2f, 0.2f, 61),
                           w2 = random_floats(12 * 12 * 3, -0.5f, 0.5f, 62), b2 = random_floats(12, -0.2f, 0.2f, 63);
  auto build = [&] {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {1, 4, "t"});
    const TensorRef c1 = g.call("aten.convolution.default",
                                {x, g.constant(host({12, 4, 3}, w1)), g.constant(host({12}, b1)), IntList{1},
                                 IntList{1}, IntList{1}, false, IntList{0}, int64_t(1)});
    const TensorRef h = g.call("aten.gelu.default", {c1});
    const TensorRef c2 = g.call("aten.convolution.default",
                                {h, g.constant(host({12, 12, 3}, w2)), g.constant(host({12}, b2)), IntList{2},
                                 IntList{1}, IntList{1}, false, IntList{0}, int64_t(1)});
    g.output(g.call("aten.gelu.default", {c2, std::string("none")}));
    return g;
  };
  ir::Graph fused = build();
  const passes::Report r = optimize_with_settings(fused);
  EXPECT_EQ(r.count("fuse_conv_activation"), 2u) << r.summary();
  ASSERT_EQ(fused.live_nodes(), 2u) << fused.dump();
  const int64_t T = 20;
  const std::vector<float> x = random_floats(size_t(4 * T), -2.f, 2.f, 64);
  const auto conv = [](const std::vector<double>& in, int64_t cin, int64_t len, const std::vector<float>& w,
                       const std::vector<float>& b, int64_t stride) {
    const int64_t lo = (len + 2 - 3) / stride + 1;
    std::vector<double> out(size_t(12 * lo));
    for (int64_t co = 0; co < 12; ++co) {
      for (int64_t t = 0; t < lo; ++t) {
        double v = b[size_t(co)];
        for (int64_t ci = 0; ci < cin; ++ci) {
          for (int64_t k = 0; k < 3; ++k) {
            const int64_t i = t * stride - 1 + k;
            if (i >= 0 && i < len) v += double(w[size_t((co * cin + ci) * 3 + k)]) * in[size_t(ci * len + i)];
          }
        }
        out[size_t(co * lo + t)] = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      }
    }
    return out;
  };
  const std::vector<double> ref = conv(conv(std::vector<double>(x.begin(), x.end()), 4, T, w1, b1, 1), 12, T, w2, b2, 2);
  for (const char* patches : {"0", "1"}) {
    SCOPED_TRACE(std::string("WGNN_CONV_PATCHES=") + patches);
    ScopedSetting env("WGNN_CONV_PATCHES", patches);
    ir::Program fp(ctx(), build());  // unfused
    ir::Graph f2 = build();
    optimize_with_settings(f2);
    ir::Program p2(ctx(), std::move(f2));
    const auto a = p2.run({host({1, 4, T}, x)});
    EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-5, 1e-5));
    // Two GELU dispatches fewer than the unfused graph.
    const auto& fused_d = p2.plan({{1, 4, T}}).dispatches();
    EXPECT_EQ(fused_d.size() + 2, fp.plan({{1, 4, T}}).dispatches().size());
    EXPECT_EQ(fused_d.size(), patches[0] == '1' ? 4u : 2u);
    for (const auto& d : fused_d) EXPECT_EQ(d.label.find("gelu") == std::string::npos, d.label.find("patches") != std::string::npos) << d.label;
  }
}

TEST(IrPasses, ConvBatchNormReluIsOneConvolution) {
  const std::vector<float> w = random_floats(8 * 3 * 9, -0.5f, 0.5f, 6), bias = random_floats(8, -0.2f, 0.2f, 7),
                           gamma = random_floats(8, 0.5f, 1.5f, 8), beta = random_floats(8, -0.5f, 0.5f, 9),
                           mean = random_floats(8, -0.3f, 0.3f, 10), var = random_floats(8, 0.2f, 2.f, 11);
  auto build = [&] {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {1, 3, "h", "w"});
    const TensorRef c = g.call("aten.convolution.default",
                               {x, g.constant(host({8, 3, 3, 3}, w)), g.constant(host({8}, bias)), IntList{1, 1},
                                IntList{1, 1}, IntList{1, 1}, false, IntList{0, 0}, int64_t(1)});
    const auto bn = g.call_multi("aten._native_batch_norm_legit_no_training.default",
                                 {c, g.constant(host({8}, gamma)), g.constant(host({8}, beta)),
                                  g.constant(host({8}, mean)), g.constant(host({8}, var)), 0.1, 1e-5},
                                 3);
    g.output(g.call("aten.relu.default", {bn[0]}));
    return g;
  };
  ir::Graph fused = build();
  const passes::Report r = optimize_with_settings(fused);
  EXPECT_EQ(r.count("fuse_conv_batch_norm"), 1u) << r.summary();
  EXPECT_EQ(r.count("fuse_conv_activation"), 1u) << r.summary();
  ASSERT_EQ(fused.live_nodes(), 1u) << fused.dump();
  EXPECT_EQ(fused.nodes()[0].op, "wgnn.convolution_padded.default");

  ir::Program fp(ctx(), std::move(fused)), up(ctx(), build());
  for (auto [H, W] : {std::pair<int64_t, int64_t>{9, 12}, {16, 5}}) {
    const std::vector<float> x = random_floats(size_t(3 * H * W), -1.f, 1.f, uint32_t(H * W));
    const auto ref = conv_bn_relu_ref(x, w, bias, gamma, beta, mean, var, H, W, 1e-5);
    const auto a = fp.run({host({1, 3, H, W}, x)});
    const auto u = up.run({host({1, 3, H, W}, x)});
    EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-4, 1e-4));
    EXPECT_TRUE(all_close(floats(u[0]), ref, 1e-4, 1e-4));
    EXPECT_LE(fp.plan({{1, 3, H, W}}).dispatches().size() + 2, up.plan({{1, 3, H, W}}).dispatches().size());
  }
}

// MODNet's IBNorm: batch norm on the first half of the channels, instance
// norm on the other, concatenated, then ReLU -> the two norms applying the
// ReLU as they store (fuse_norm_activation), the concatenation in the
// ReLU's place: one dispatch fewer, against the double reference, with
// vec4 planes (4 x 6) and scalar ones (5 x 3), and an instance norm alone
// followed by a clamp (ReLU6) or GELU. A norm whose result something else
// reads keeps its activation apart.
TEST(IrPasses, NormsTakeTheActivationAfterThem) {
  const int64_t C = 8, h = C / 2;
  const std::vector<float> gamma = random_floats(size_t(h), 0.5f, 1.5f, 70), beta = random_floats(size_t(h), -0.5f, 0.5f, 71),
                           mean = random_floats(size_t(h), -0.3f, 0.3f, 72), var = random_floats(size_t(h), 0.2f, 2.f, 73),
                           iw = random_floats(size_t(h), 0.5f, 1.5f, 74), ib = random_floats(size_t(h), -0.5f, 0.5f, 75);
  const double eps = 1e-5;
  auto build = [&](const std::string& tail) {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {1, C, "h", "w"});
    const TensorRef lo = g.call("aten.slice.Tensor", {x, int64_t(1), int64_t(0), h, int64_t(1)});
    const TensorRef hi = g.call("aten.slice.Tensor", {x, int64_t(1), h, C, int64_t(1)});
    const auto bn = g.call_multi("aten._native_batch_norm_legit_no_training.default",
                                 {lo, g.constant(host({h}, gamma)), g.constant(host({h}, beta)),
                                  g.constant(host({h}, mean)), g.constant(host({h}, var)), 0.1, eps},
                                 3);
    const TensorRef in = g.call("aten.instance_norm.default", {hi, g.constant(host({h}, iw)), g.constant(host({h}, ib)),
                                                               None{}, None{}, true, 0.1, eps, false});
    if (tail == "ibnorm") {
      const TensorRef cat = g.call("aten.cat.default", {ValueList{bn[0], in}, int64_t(1)});
      g.output(g.call("aten.relu.default", {cat}));
    } else if (tail == "shared") {  // the cat is read twice: its ReLU stays
      const TensorRef cat = g.call("aten.cat.default", {ValueList{bn[0], in}, int64_t(1)});
      g.output(g.call("aten.relu.default", {cat}));
      g.output(cat);
    } else {
      g.output(g.call("aten.relu.default", {bn[0]}));
      g.output(tail == "clamp" ? g.call("aten.clamp.default", {in, 0.0, 6.0})
                               : g.call("aten.gelu.default", {in, std::string("none")}));
    }
    return g;
  };
  // The double reference: both halves normalized, then `act` (per output).
  auto ref = [&](const std::vector<float>& x, int64_t H, int64_t W, int act_lo, int act_hi) {
    const int64_t P = H * W;
    std::vector<double> out(size_t(C * P));
    auto apply = [](int act, double v) {
      if (act == 1) return std::max(v, 0.0);
      if (act == 2) return std::min(std::max(v, 0.0), 6.0);
      if (act == 3) return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      return v;
    };
    for (int64_t c = 0; c < h; ++c) {
      const double s = double(gamma[size_t(c)]) / std::sqrt(double(var[size_t(c)]) + eps);
      for (int64_t k = 0; k < P; ++k)
        out[size_t(c * P + k)] =
            apply(act_lo, (double(x[size_t(c * P + k)]) - mean[size_t(c)]) * s + beta[size_t(c)]);
    }
    for (int64_t c = h; c < C; ++c) {
      double m = 0, v = 0;
      for (int64_t k = 0; k < P; ++k) m += x[size_t(c * P + k)];
      m /= double(P);
      for (int64_t k = 0; k < P; ++k) v += (x[size_t(c * P + k)] - m) * (x[size_t(c * P + k)] - m);
      v /= double(P);
      for (int64_t k = 0; k < P; ++k)
        out[size_t(c * P + k)] = apply(act_hi, (double(x[size_t(c * P + k)]) - m) / std::sqrt(v + eps) *
                                                   iw[size_t(c - h)] + ib[size_t(c - h)]);
    }
    return out;
  };
  auto part = [](const std::vector<double>& v, size_t from, size_t n) {
    return std::vector<double>(v.begin() + long(from), v.begin() + long(from + n));
  };
  for (const std::string tail : {"ibnorm", "clamp", "gelu", "shared"}) {
    SCOPED_TRACE(tail);
    ir::Graph fused = build(tail);
    const passes::Report r = optimize_with_settings(fused);
    EXPECT_EQ(r.count("fuse_norm_activation"), tail == "ibnorm" ? 1u : tail == "shared" ? 0u : 2u) << r.summary();
    const std::string dump = fused.dump();
    EXPECT_EQ(dump.find("aten.relu") == std::string::npos, tail != "shared") << dump;
    ir::Program fp(ctx(), std::move(fused)), up(ctx(), build(tail));
    for (auto [H, W] : {std::pair<int64_t, int64_t>{4, 6}, {5, 3}}) {
      const size_t P = size_t(H * W), half = size_t(h) * P;
      const std::vector<float> x = random_floats(size_t(C) * P, -2.f, 2.f, uint32_t(H * W));
      const auto a = fp.run({host({1, C, H, W}, x)});
      const auto u = up.run({host({1, C, H, W}, x)});
      if (tail == "ibnorm" || tail == "shared") {
        const auto want = ref(x, H, W, 1, 1);
        EXPECT_TRUE(all_close(floats(a[0]), want, 1e-4, 1e-4));
        EXPECT_TRUE(all_close(floats(u[0]), want, 1e-4, 1e-4));
      } else {
        const auto want = ref(x, H, W, 1, tail == "clamp" ? 2 : 3);
        EXPECT_TRUE(all_close(floats(a[0]), part(want, 0, half), 1e-4, 1e-4));
        EXPECT_TRUE(all_close(floats(a[1]), part(want, half, half), 1e-4, 1e-4));
        EXPECT_TRUE(all_close(floats(u[1]), part(want, half, half), 1e-4, 1e-4));
      }
      const size_t fd = fp.plan({{1, C, H, W}}).dispatches().size(), ud = up.plan({{1, C, H, W}}).dispatches().size();
      EXPECT_EQ(fd + (tail == "ibnorm" ? 1 : tail == "shared" ? 0 : 2), ud);
    }
  }
}

// A depthwise convolution between the permutes of a convolutional position
// encoding (x [N, H*W, C] -> [N, C, H, W] -> conv -> [N, H*W, C], DaViT's
// ConvPosEnc) becomes one channels-last convolution where the IR knows the
// shapes (as the ONNX importer's IR does; here set by hand): one dispatch
// in place of three, the same values bit for bit (each output sums the
// same products in the same order), and against the double reference.
TEST(IrPasses, DepthwiseConvBetweenChannelPermutesRunsChannelsLast) {
  const int64_t N = 2, H = 5, W = 6, C = 8;
  // residual: timm's form, x + conv(x) before the permute back (a channel
  // multiplier of 1); else a multiplier of 2 and no add.
  for (const bool residual : {false, true}) {
    SCOPED_TRACE(residual ? "x + conv(x)" : "conv(x)");
    const int64_t M = residual ? 1 : 2;
    const std::vector<float> w = random_floats(size_t(M * C * 9), -0.5f, 0.5f, 40),
                             bias = random_floats(size_t(M * C), -0.2f, 0.2f, 41);
    auto build = [&] {
      ir::Graph g;
      const TensorRef x = g.input("x", DType::F32, {N, H * W, C});
      const TensorRef p = g.call("aten.permute.default", {x, IntList{0, 2, 1}});
      const TensorRef u = g.call("aten.view.default", {p, IntList{N, C, H, W}});
      TensorRef c = g.call("aten.convolution.default",
                           {u, g.constant(host({M * C, 1, 3, 3}, w)), g.constant(host({M * C}, bias)), IntList{1, 1},
                            IntList{1, 1}, IntList{1, 1}, false, IntList{0, 0}, C});
      g.set_seen_shape(c, {N, M * C, H, W});
      if (residual) {
        c = g.call("aten.add.Tensor", {u, c});
        g.set_seen_shape(c, {N, M * C, H, W});
      }
      const TensorRef v = g.call("aten.view.default", {c, IntList{N, M * C, H * W}});
      const TensorRef y = g.call("aten.permute.default", {v, IntList{0, 2, 1}});
      g.set_seen_shape(p, {N, C, H * W});
      g.set_seen_shape(u, {N, C, H, W});
      g.set_seen_shape(v, {N, M * C, H * W});
      g.set_seen_shape(y, {N, H * W, M * C});
      g.output(y, "y");
      return g;
    };
    ir::Graph fused = build();
    const passes::Report r = optimize_with_settings(fused);
    EXPECT_EQ(r.count("fuse_conv_channels_last"), 1u) << r.summary();
    ASSERT_EQ(fused.live_nodes(), 1u) << fused.dump();
    EXPECT_EQ(fused.nodes()[0].op, "wgnn.conv_depthwise_channels_last.default");

    ir::Program fp(ctx(), std::move(fused)), up(ctx(), build());
    const std::vector<float> x = random_floats(size_t(N * H * W * C), -1.f, 1.f, 42);
    const auto a = fp.run({host({N, H * W, C}, x)});
    const auto u = up.run({host({N, H * W, C}, x)});
    EXPECT_EQ(floats(a[0]), floats(u[0]));
    EXPECT_EQ(fp.plan({{N, H * W, C}}).dispatches().size(), 1u);
    EXPECT_EQ(up.plan({{N, H * W, C}}).dispatches().size(), residual ? 4u : 3u);
    std::vector<double> ref(size_t(N * H * W * M * C));
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t oy = 0; oy < H; ++oy) {
        for (int64_t ox = 0; ox < W; ++ox) {
          for (int64_t co = 0; co < M * C; ++co) {
            double s = bias[size_t(co)];
            for (int64_t ky = 0; ky < 3; ++ky) {
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = oy + ky - 1, ix = ox + kx - 1;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                s += double(w[size_t(co * 9 + ky * 3 + kx)]) * double(x[size_t(((n * H + iy) * W + ix) * C + co / M)]);
              }
            }
            if (residual) s += double(x[size_t(((n * H + oy) * W + ox) * C + co)]);
            ref[size_t(((n * H + oy) * W + ox) * M * C + co)] = s;
          }
        }
      }
    }
    EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-5, 1e-5));
    if (residual) continue;
    // Without the shapes (an IR with symbolic dims), nothing changes.
    ir::Graph plain;
    const TensorRef x2 = plain.input("x", DType::F32, {N, "positions", C});
    const TensorRef p2 = plain.call("aten.permute.default", {x2, IntList{0, 2, 1}});
    const TensorRef u2 = plain.call("aten.view.default", {p2, IntList{N, C, H, W}});
    const TensorRef c2 = plain.call("aten.convolution.default",
                                    {u2, plain.constant(host({2 * C, 1, 3, 3}, w)), None{}, IntList{1, 1}, IntList{1, 1},
                                     IntList{1, 1}, false, IntList{0, 0}, C});
    plain.output(plain.call("aten.permute.default", {plain.call("aten.view.default", {c2, IntList{N, 2 * C, H * W}}),
                                                      IntList{0, 2, 1}}));
    EXPECT_EQ(optimize_with_settings(plain).count("fuse_conv_channels_last"), 0u);

    // WGNN_DISABLE_PASSES leaves a pass out; a name that is no pass is an error.
    {
      ScopedSetting off("WGNN_DISABLE_PASSES", "fuse_gelu,fuse_conv_channels_last");
      ir::Graph g = build();
      EXPECT_EQ(optimize_with_settings(g).count("fuse_conv_channels_last"), 0u);
      EXPECT_EQ(g.live_nodes(), 5u);
    }
    ScopedSetting bad("WGNN_DISABLE_PASSES", "fuse_everything");
    ir::Graph g = build();
    EXPECT_NE(error_of([&] { optimize_with_settings(g); }).find("'fuse_everything' is not a pass"), std::string::npos);
  }
}

// The same with the first permute taking x [N, H, W, C] to channels first
// at once (DaViT's stem, after its channels-last layer norm) and the
// residual x + conv(x): one channels-last convolution reading x through a
// view, one dispatch in place of four, bit for bit the unfused values and
// against the double reference.
TEST(IrPasses, DepthwiseConvAfterAChannelsFirstPermuteRunsChannelsLast) {
  const int64_t N = 2, H = 5, W = 6, C = 8;
  const std::vector<float> w = random_floats(size_t(C * 9), -0.5f, 0.5f, 43),
                           bias = random_floats(size_t(C), -0.2f, 0.2f, 44);
  auto build = [&] {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {N, H, W, C});
    const TensorRef u = g.call("aten.permute.default", {x, IntList{0, 3, 1, 2}});
    TensorRef c = g.call("aten.convolution.default",
                         {u, g.constant(host({C, 1, 3, 3}, w)), g.constant(host({C}, bias)), IntList{1, 1},
                          IntList{1, 1}, IntList{1, 1}, false, IntList{0, 0}, C});
    g.set_seen_shape(c, {N, C, H, W});
    c = g.call("aten.add.Tensor", {u, c});
    g.set_seen_shape(c, {N, C, H, W});
    const TensorRef v = g.call("aten.view.default", {c, IntList{N, C, H * W}});
    const TensorRef y = g.call("aten.permute.default", {v, IntList{0, 2, 1}});
    g.set_seen_shape(u, {N, C, H, W});
    g.set_seen_shape(v, {N, C, H * W});
    g.set_seen_shape(y, {N, H * W, C});
    g.output(y, "y");
    return g;
  };
  ir::Graph fused = build();
  const passes::Report r = optimize_with_settings(fused);
  EXPECT_EQ(r.count("fuse_conv_channels_last"), 1u) << r.summary();
  size_t cl = 0;
  for (const ir::Node& n : fused.nodes()) cl += !n.dead && n.op == "wgnn.conv_depthwise_channels_last.default";
  EXPECT_EQ(cl, 1u) << fused.dump();
  ir::Program fp(ctx(), std::move(fused)), up(ctx(), [&] {
    ScopedSetting off("WGNN_DISABLE_PASSES", "fuse_conv_channels_last");
    ir::Graph g = build();
    optimize_with_settings(g);
    return g;
  }());
  const std::vector<float> x = random_floats(size_t(N * H * W * C), -1.f, 1.f, 45);
  const auto a = fp.run({host({N, H, W, C}, x)});
  const auto u = up.run({host({N, H, W, C}, x)});
  EXPECT_EQ(fp.plan({{N, H, W, C}}).dispatches().size(), 1u);
  EXPECT_GE(up.plan({{N, H, W, C}}).dispatches().size(), 3u);
  EXPECT_EQ(floats(a[0]), floats(u[0]));
  std::vector<double> ref(size_t(N * H * W * C));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oy = 0; oy < H; ++oy)
      for (int64_t ox = 0; ox < W; ++ox)
        for (int64_t co = 0; co < C; ++co) {
          double s = bias[size_t(co)] + double(x[size_t(((n * H + oy) * W + ox) * C + co)]);
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = oy + ky - 1, ix = ox + kx - 1;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              s += double(w[size_t(co * 9 + ky * 3 + kx)]) * double(x[size_t(((n * H + iy) * W + ix) * C + co)]);
            }
          ref[size_t(((n * H + oy) * W + ox) * C + co)] = s;
        }
  EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-5, 1e-5));
}

// Two permutes with views between them whose composite moves nothing
// (DaViT's stage ends: tokens [N, H*W, C] -> [N, C, H*W] -> [N, C, H, W]
// -> [N, H, W, C]) become a view of the tokens: the product after them
// reads the tokens, one dispatch in place of three. A pair that does move
// elements ([0, 3, 2, 1] at the end) stays, and both give the reference.
TEST(IrPasses, PermutesThatCancelAreAView) {
  const int64_t N = 2, H = 3, W = 4, C = 5;
  for (const bool cancels : {true, false}) {
    SCOPED_TRACE(cancels ? "cancels" : "moves");
    const IntList last = cancels ? IntList{0, 2, 3, 1} : IntList{0, 3, 2, 1};
    const Shape ys = cancels ? Shape{N, H, W, C} : Shape{N, W, H, C};
    auto build = [&] {
      ir::Graph g;
      const TensorRef x = g.input("x", DType::F32, {N, H * W, C});
      const TensorRef p = g.call("aten.permute.default", {x, IntList{0, 2, 1}});
      const TensorRef v = g.call("aten.view.default", {p, IntList{N, C, H, W}});
      const TensorRef q = g.call("aten.permute.default", {v, last});
      const TensorRef y = g.call("aten.mul.Tensor", {q, g.constant(host({}, {2.f}))});
      g.set_seen_shape(p, {N, C, H * W});
      g.set_seen_shape(v, {N, C, H, W});
      g.set_seen_shape(q, ys);
      g.set_seen_shape(y, ys);
      g.output(y, "y");
      return g;
    };
    ir::Graph g = build();
    EXPECT_EQ(optimize_with_settings(g).count("cancel_permutes"), cancels ? 1u : 0u);
    ir::Program fp(ctx(), std::move(g));
    const std::vector<float> x = random_floats(size_t(N * H * W * C), -1.f, 1.f, 46);
    const auto a = fp.run({host({N, H * W, C}, x)});
    {
      std::string labels;
      for (const auto& d : fp.plan({{N, H * W, C}}).dispatches()) labels += d.label + "; ";
      EXPECT_EQ(fp.plan({{N, H * W, C}}).dispatches().size(), cancels ? 1u : 3u) << labels;
    }
    std::vector<float> want(x.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          for (int64_t c = 0; c < C; ++c) {
            const size_t to = cancels ? size_t(((n * H + h) * W + w) * C + c) : size_t(((n * W + w) * H + h) * C + c);
            want[to] = 2.f * x[size_t((n * H * W + h * W + w) * C + c)];
          }
    EXPECT_EQ(floats(a[0]), want);
  }
}

// x + linear(h) where no layer norm takes the sum (a transformer block's end
// before a permute): the residual in the product's epilogue, where the IR
// knows the shapes; one dispatch in place of two.
TEST(IrPasses, ResidualAddAfterAProductJoinsItsEpilogue) {
  const int64_t R = 20, K = 24, N = 16;
  const std::vector<float> w = random_floats(size_t(N * K), -0.3f, 0.3f, 50), b = random_floats(size_t(N), -0.2f, 0.2f, 51);
  auto build = [&] {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {R, N});
    const TensorRef h = g.input("h", DType::F32, {R, K});
    const TensorRef p = g.call("aten.linear.default", {h, g.constant(host({N, K}, w)), g.constant(host({N}, b))});
    const TensorRef y = g.call("aten.add.Tensor", {x, p});
    g.set_seen_shape(p, {R, N});
    g.set_seen_shape(y, {R, N});
    g.output(g.call("aten.permute.default", {y, IntList{1, 0}}), "y");
    return g;
  };
  ir::Graph fused = build();
  const passes::Report r = optimize_with_settings(fused);
  EXPECT_EQ(r.count("fuse_matmul_residual"), 1u) << r.summary();
  ASSERT_EQ(fused.live_nodes(), 2u) << fused.dump();
  ir::Program fp(ctx(), std::move(fused)), up(ctx(), build());
  const std::vector<float> x = random_floats(size_t(R * N), -1.f, 1.f, 52), h = random_floats(size_t(R * K), -1.f, 1.f, 53);
  const auto a = fp.run({host({R, N}, x), host({R, K}, h)});
  const auto u = up.run({host({R, N}, x), host({R, K}, h)});
  EXPECT_EQ(fp.plan({{R, N}, {R, K}}).dispatches().size() + 1, up.plan({{R, N}, {R, K}}).dispatches().size());
  std::vector<double> ref(size_t(R * N));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t i = 0; i < R; ++i) {
      double s = b[size_t(n)] + x[size_t(i * N + n)];
      for (int64_t k = 0; k < K; ++k) s += double(h[size_t(i * K + k)]) * double(w[size_t(n * K + k)]);
      ref[size_t(n * R + i)] = s;  // transposed by the permute
    }
  }
  EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(floats(u[0]), ref, 1e-5, 1e-5));
}

// ConvNeXt's layer scale: a per-channel constant times the second MLP
// product's result, after the permute back to channels first (and, in the
// second form, on the product directly, the constant first). The scale
// goes into the product's weight and bias (fuse_matmul_scale): one
// dispatch fewer, against the chain as it was and a double reference. A
// constant that varies along another dim, and a product with an
// activation, stay apart.
TEST(IrPasses, LayerScaleAfterAProductJoinsItsWeights) {
  const int64_t H = 3, W = 4, K = 16, C = 8;
  const std::vector<float> w = random_floats(size_t(K * C), -0.3f, 0.3f, 80), b = random_floats(size_t(C), -0.2f, 0.2f, 81),
                           gamma = random_floats(size_t(C), 0.5f, 2.f, 82), other = random_floats(size_t(H), 0.5f, 2.f, 83);
  enum Form { Permuted, Direct, OtherDim, Activation };
  auto build = [&](Form form, bool f16) {
    ir::Graph g;
    const auto c = [&](const Shape& sh, const std::vector<float>& v) {
      if (!f16) return g.constant(host(sh, v));
      return f16_made_constant(g, sh, v);
    };
    const TensorRef x = g.input("x", f16 ? DType::F16 : DType::F32, {1, H, W, K});
    const TensorRef m = g.call("aten.matmul.default", {x, c({K, C}, w)});
    TensorRef y = g.call("aten.add.Tensor", {m, c({C}, b)});
    for (TensorRef t : {m, y}) g.set_seen_shape(t, {1, H, W, C});
    if (form == Activation) {
      y = g.call("aten.relu.default", {y});
      g.set_seen_shape(y, {1, H, W, C});
    }
    TensorRef z;
    if (form == Direct) {
      z = g.call("aten.mul.Tensor", {c({C}, gamma), y});
      g.set_seen_shape(z, {1, H, W, C});
    } else {
      const TensorRef p = g.call("aten.permute.default", {y, IntList{0, 3, 1, 2}});
      z = g.call("aten.mul.Tensor", {p, form == OtherDim ? c({H, 1}, other) : c({C, 1, 1}, gamma)});
      g.set_seen_shape(p, {1, C, H, W});
      g.set_seen_shape(z, {1, C, H, W});
    }
    g.output(z, "z");
    return g;
  };
  const std::vector<float> x = random_floats(size_t(H * W * K), -1.f, 1.f, 84);
  for (Form form : {Permuted, Direct, OtherDim, Activation}) {
    for (bool f16 : {false, true}) {
      if (f16 && !ctx().features().shader_f16) continue;
      SCOPED_TRACE(fmt::format("form {}{}", int(form), f16 ? ", float16" : ""));
      ir::Graph fused = build(form, f16);
      const passes::Report r = optimize_with_settings(fused);
      const bool joins = form == Permuted || form == Direct;
      EXPECT_EQ(r.count("fuse_matmul_scale"), joins ? 1u : 0u) << r.summary();
      // The other passes alone: the chain as it was.
      ir::Graph kept = build(form, f16);
      {
        ScopedSetting off("WGNN_DISABLE_PASSES", "fuse_matmul_scale");
        optimize_with_settings(kept);
      }
      ir::Program fp(ctx(), std::move(fused)), up(ctx(), std::move(kept));
      HostTensor xh = host({1, H, W, K}, x);
      if (f16) xh = to_f16_saturated(xh);
      const auto a = fp.run({xh});
      const auto u = up.run({xh});
      EXPECT_EQ(fp.plan({{1, H, W, K}}).dispatches().size() + (joins ? 1 : 0), up.plan({{1, H, W, K}}).dispatches().size());
      // The double reference, laid out as z is.
      std::vector<double> ref(size_t(H * W * C));
      for (int64_t i = 0; i < H; ++i) {
        for (int64_t j = 0; j < W; ++j) {
          for (int64_t n = 0; n < C; ++n) {
            double s = b[size_t(n)];
            for (int64_t k = 0; k < K; ++k) s += double(x[size_t((i * W + j) * K + k)]) * double(w[size_t(k * C + n)]);
            if (form == Activation) s = std::max(s, 0.0);
            s *= form == OtherDim ? other[size_t(i)] : gamma[size_t(n)];
            ref[size_t(form == Direct ? (i * W + j) * C + n : (n * H + i) * W + j)] = s;
          }
        }
      }
      const double tol = f16 ? 2e-2 : 1e-5;
      EXPECT_TRUE(all_close(floats(a[0]), ref, tol, tol));
      EXPECT_TRUE(all_close(floats(u[0]), ref, tol, tol));
    }
  }
}

// ConvNeXt's residual add after its MLP's result goes back to channels
// first: add(x, permute(y)) becomes wgnn.add_permuted, which reads y
// through its strides (fuse_permute_add): one dispatch fewer than the
// other passes leave, the same values. A permute that something else reads
// too stays.
TEST(IrPasses, AddOfAPermuteReadsThroughStrides) {
  const int64_t C = 6, H = 3, W = 5;
  auto build = [&](bool shared) {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {1, C, H, W});
    const TensorRef y = g.input("y", DType::F32, {1, H, W, C});
    const TensorRef p = g.call("aten.permute.default", {y, IntList{0, 3, 1, 2}});
    const TensorRef z = g.call("aten.add.Tensor", {x, p});
    g.set_seen_shape(p, {1, C, H, W});
    g.set_seen_shape(z, {1, C, H, W});
    g.output(z, "z");
    if (shared) g.output(p, "p");
    return g;
  };
  const std::vector<float> x = random_floats(size_t(C * H * W), -1.f, 1.f, 90), y = random_floats(size_t(C * H * W), -1.f, 1.f, 91);
  std::vector<double> ref(size_t(C * H * W));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < H * W; ++i) ref[size_t(c * H * W + i)] = double(x[size_t(c * H * W + i)]) + y[size_t(i * C + c)];
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "the permute read elsewhere too" : "the permute read by the add alone");
    ir::Graph fused = build(shared);
    const passes::Report r = optimize_with_settings(fused);
    EXPECT_EQ(r.count("fuse_permute_add"), shared ? 0u : 1u) << r.summary();
    ir::Graph kept = build(shared);
    {
      ScopedSetting off("WGNN_DISABLE_PASSES", "fuse_permute_add");
      optimize_with_settings(kept);
    }
    ir::Program fp(ctx(), std::move(fused)), kp(ctx(), std::move(kept));
    const auto a = fp.run({host({1, C, H, W}, x), host({1, H, W, C}, y)});
    const auto k = kp.run({host({1, C, H, W}, x), host({1, H, W, C}, y)});
    EXPECT_EQ(fp.plan({{1, C, H, W}, {1, H, W, C}}).dispatches().size() + (shared ? 0 : 1),
              kp.plan({{1, C, H, W}, {1, H, W, C}}).dispatches().size());
    EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-6, 1e-6));
    EXPECT_TRUE(all_close(floats(k[0]), ref, 1e-6, 1e-6));
  }
}

// ConvNeXt's blocks as the importer leaves them: a channels-first stream
// (here after a 1x1 convolution), each block a depthwise convolution
// permuted to channels last, a product, and the product permuted back and
// added to the stream. channels_last_blocks runs the stream channels last:
// one permute at the start, each block a channels-last depthwise
// convolution and a product with the stream as its residual, and the last
// sum (the model's output) permuted back. Against a double reference and
// the pass left out; `shared`: the first block's sum is also an output, so
// it is permuted back for it and the stream goes on channels last.
TEST(IrPasses, ChannelsFirstBlocksRunChannelsLast) {
  const int64_t N = 2, C = 8, H = 5, W = 6, HW = H * W;
  const std::vector<float> w0 = random_floats(size_t(C * C), -0.4f, 0.4f, 110), b0 = random_floats(size_t(C), -0.2f, 0.2f, 111);
  std::vector<std::vector<float>> wd, bd, wl, bl;
  for (int k = 0; k < 2; ++k) {
    wd.push_back(random_floats(size_t(C * 9), -0.4f, 0.4f, uint32_t(112 + 4 * k)));
    bd.push_back(random_floats(size_t(C), -0.2f, 0.2f, uint32_t(113 + 4 * k)));
    wl.push_back(random_floats(size_t(C * C), -0.4f, 0.4f, uint32_t(114 + 4 * k)));
    bl.push_back(random_floats(size_t(C), -0.2f, 0.2f, uint32_t(115 + 4 * k)));
  }
  auto build = [&](bool shared) {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {N, C, H, W});
    TensorRef s = g.call("aten.convolution.default", {x, g.constant(host({C, C, 1, 1}, w0)), g.constant(host({C}, b0)),
                                                      IntList{1, 1}, IntList{0, 0}, IntList{1, 1}, false, IntList{0, 0}, 1});
    g.set_seen_shape(s, {N, C, H, W});
    for (int k = 0; k < 2; ++k) {
      const TensorRef c = g.call("aten.convolution.default",
                                 {s, g.constant(host({C, 1, 3, 3}, wd[size_t(k)])), g.constant(host({C}, bd[size_t(k)])),
                                  IntList{1, 1}, IntList{1, 1}, IntList{1, 1}, false, IntList{0, 0}, C});
      const TensorRef p = g.call("aten.permute.default", {c, IntList{0, 2, 3, 1}});
      const TensorRef h = g.call("aten.linear.default",
                                 {p, g.constant(host({C, C}, wl[size_t(k)])), g.constant(host({C}, bl[size_t(k)]))});
      const TensorRef q = g.call("aten.permute.default", {h, IntList{0, 3, 1, 2}});
      const TensorRef s2 = g.call("aten.add.Tensor", {s, q});
      g.set_seen_shape(c, {N, C, H, W});
      g.set_seen_shape(p, {N, H, W, C});
      g.set_seen_shape(h, {N, H, W, C});
      g.set_seen_shape(q, {N, C, H, W});
      g.set_seen_shape(s2, {N, C, H, W});
      if (shared && k == 0) g.output(s2, "s1");
      s = s2;
    }
    g.output(s, "y");
    return g;
  };
  const std::vector<float> x = random_floats(size_t(N * C * HW), -1.f, 1.f, 120);
  // The reference, channels first.
  std::vector<double> s(size_t(N * C * HW)), s1;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < C; ++co)
      for (int64_t i = 0; i < HW; ++i) {
        double v = b0[size_t(co)];
        for (int64_t ci = 0; ci < C; ++ci) v += double(w0[size_t(co * C + ci)]) * x[size_t((n * C + ci) * HW + i)];
        s[size_t((n * C + co) * HW + i)] = v;
      }
  for (int k = 0; k < 2; ++k) {
    std::vector<double> c(s.size()), s2(s.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t ch = 0; ch < C; ++ch)
        for (int64_t oy = 0; oy < H; ++oy)
          for (int64_t ox = 0; ox < W; ++ox) {
            double v = bd[size_t(k)][size_t(ch)];
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = oy + ky - 1, ix = ox + kx - 1;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                v += double(wd[size_t(k)][size_t(ch * 9 + ky * 3 + kx)]) * s[size_t((n * C + ch) * HW + iy * W + ix)];
              }
            c[size_t((n * C + ch) * HW + oy * W + ox)] = v;
          }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i)
        for (int64_t co = 0; co < C; ++co) {
          double v = bl[size_t(k)][size_t(co)];
          for (int64_t ci = 0; ci < C; ++ci) v += double(wl[size_t(k)][size_t(co * C + ci)]) * c[size_t((n * C + ci) * HW + i)];
          s2[size_t((n * C + co) * HW + i)] = s[size_t((n * C + co) * HW + i)] + v;
        }
    s = s2;
    if (k == 0) s1 = s;
  }
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "the first sum also an output" : "the last sum the only output");
    ir::Graph fused = build(shared);
    const passes::Report r = optimize_with_settings(fused);
    EXPECT_GT(r.count("channels_last_blocks"), 0u) << r.summary();
    size_t cl = 0;
    for (const ir::Node& n : fused.nodes()) cl += n.op == "wgnn.conv_depthwise_channels_last.default";
    EXPECT_EQ(cl, 2u) << fused.dump();
    ir::Graph kept = build(shared);
    {
      ScopedSetting off("WGNN_DISABLE_PASSES", "channels_last_blocks");
      optimize_with_settings(kept);
    }
    ir::Program fp(ctx(), std::move(fused)), kp(ctx(), std::move(kept));
    const auto a = fp.run({host({N, C, H, W}, x)});
    const auto k = kp.run({host({N, C, H, W}, x)});
    // Before: the 1x1 convolution, then per block a depthwise convolution,
    // a permute, a product and an add of a permute. After: the 1x1
    // convolution and a permute, per block a convolution and a product
    // that adds the stream, the sum permuted back (twice where the first
    // sum is an output too).
    EXPECT_EQ(kp.plan({{N, C, H, W}}).dispatches().size(), 9u);
    EXPECT_EQ(fp.plan({{N, C, H, W}}).dispatches().size(), shared ? 8u : 7u);
    ASSERT_EQ(a.size(), shared ? 2u : 1u);
    const HostTensor& y = a[shared ? 1 : 0];
    EXPECT_EQ(y.shape, (Shape{N, C, H, W}));
    EXPECT_TRUE(all_close(floats(y), s, 1e-5, 1e-5));
    EXPECT_TRUE(all_close(floats(k[shared ? 1 : 0]), s, 1e-5, 1e-5));
    if (shared) EXPECT_TRUE(all_close(floats(a[0]), s1, 1e-5, 1e-5));
  }
}

// Window attention's windows as timm's DaViT exports them: the map [B, L, C]
// viewed as [B, H, W, C], padded to whole windows, viewed and permuted into
// windows; (here the windows doubled); viewed and permuted back, cropped
// (two slices), viewed as rows and added to a residual. fuse_window_partition
// makes it wgnn.window_partition and wgnn.window_reverse with the add: two
// dispatches and the multiply, where the chain takes six and the multiply.
// Against y = res + 2 x, and the chain; without padding too.
TEST(IrPasses, WindowPartitionAndReverseRunAsTwoOps) {
  const int64_t B = 2, C = 8, WS = 4;
  for (const auto& [H, W] : {std::pair<int64_t, int64_t>{10, 7}, {8, 8}}) {
    SCOPED_TRACE(fmt::format("{}x{}", H, W));
    const int64_t NH = (H + WS - 1) / WS, NW = (W + WS - 1) / WS, HP = NH * WS, WP = NW * WS;
    const bool padded = HP != H || WP != W;
    auto build = [&, H = H, W = W] {
      ir::Graph g;
      const TensorRef x = g.input("x", DType::F32, {B, H * W, C});
      const TensorRef res = g.input("res", DType::F32, {B, H * W, C});
      TensorRef t = g.call("aten.view.default", {x, IntList{B, H, W, C}});
      g.set_seen_shape(t, {B, H, W, C});
      if (padded) {
        t = g.call("aten.pad.default", {t, IntList{0, 0, 0, WP - W, 0, HP - H}});
        g.set_seen_shape(t, {B, HP, WP, C});
      }
      const TensorRef v1 = g.call("aten.view.default", {t, IntList{B, NH, WS, NW, WS, C}});
      const TensorRef p1 = g.call("aten.permute.default", {v1, IntList{0, 1, 3, 2, 4, 5}});
      const TensorRef w1 = g.call("aten.view.default", {p1, IntList{B * NH * NW, WS * WS, C}});
      const TensorRef m = g.call("aten.mul.Tensor", {w1, g.constant(host({}, {2.f}))});
      const TensorRef v2 = g.call("aten.view.default", {m, IntList{B, NH, NW, WS, WS, C}});
      const TensorRef p2 = g.call("aten.permute.default", {v2, IntList{0, 1, 3, 2, 4, 5}});
      TensorRef r = g.call("aten.view.default", {p2, IntList{B, HP, WP, C}});
      g.set_seen_shape(v1, {B, NH, WS, NW, WS, C});
      g.set_seen_shape(p1, {B, NH, NW, WS, WS, C});
      g.set_seen_shape(w1, {B * NH * NW, WS * WS, C});
      g.set_seen_shape(m, {B * NH * NW, WS * WS, C});
      g.set_seen_shape(v2, {B, NH, NW, WS, WS, C});
      g.set_seen_shape(p2, {B, NH, WS, NW, WS, C});
      g.set_seen_shape(r, {B, HP, WP, C});
      if (padded) {
        r = g.call("aten.slice.Tensor", {r, int64_t(1), int64_t(0), H, int64_t(1)});
        g.set_seen_shape(r, {B, H, WP, C});
        r = g.call("aten.slice.Tensor", {r, int64_t(2), int64_t(0), W, int64_t(1)});
        g.set_seen_shape(r, {B, H, W, C});
      }
      const TensorRef rows = g.call("aten.view.default", {r, IntList{B, H * W, C}});
      g.set_seen_shape(rows, {B, H * W, C});
      const TensorRef y = g.call("aten.add.Tensor", {res, rows});
      g.set_seen_shape(y, {B, H * W, C});
      g.output(y, "y");
      return g;
    };
    ir::Graph fused = build();
    const passes::Report r = optimize_with_settings(fused);
    EXPECT_EQ(r.count("fuse_window_partition"), 2u) << r.summary();
    size_t part = 0, rev = 0;
    for (const ir::Node& n : fused.nodes()) {
      part += n.op == "wgnn.window_partition.default";
      rev += n.op == "wgnn.window_reverse.default" && n.args.size() == 3;
    }
    EXPECT_EQ(part, 1u) << fused.dump();
    EXPECT_EQ(rev, 1u) << fused.dump();
    ir::Graph kept = build();
    {
      ScopedSetting off("WGNN_DISABLE_PASSES", "fuse_window_partition");
      optimize_with_settings(kept);
    }
    ir::Program fp(ctx(), std::move(fused)), kp(ctx(), std::move(kept));
    const std::vector<float> x = random_floats(size_t(B * H * W * C), -1.f, 1.f, 130),
                             res = random_floats(size_t(B * H * W * C), -1.f, 1.f, 131);
    const auto a = fp.run({host({B, H * W, C}, x), host({B, H * W, C}, res)});
    const auto k = kp.run({host({B, H * W, C}, x), host({B, H * W, C}, res)});
    EXPECT_EQ(fp.plan({{B, H * W, C}, {B, H * W, C}}).dispatches().size(), 3u);
    // The pad (a copy where it pads), the partition's copy, the multiply,
    // the reverse's copy, the two crops (copies: B = 2), the add.
    EXPECT_EQ(kp.plan({{B, H * W, C}, {B, H * W, C}}).dispatches().size(), padded ? 7u : 4u);
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = res[i] + 2.f * x[i];
    EXPECT_EQ(floats(a[0]), want);
    EXPECT_EQ(floats(k[0]), want);
  }
}

// Whisper's and BART's self-attention as the importer leaves it: q, k and v
// three products of the same hidden states (k without a bias), q scaled
// after its bias, all read by wgnn.attention through head-split views. The
// factor goes into the attention's scale (fuse_attention_scale) and the
// three products become one with the weights side by side
// (fuse_qkv_projection): two nodes, against the separate products and a
// double reference, with the one-dispatch kernel and with the two products
// it becomes over more keys (WGNN_ATTENTION_MAX_KEYS=0).
TEST(IrPasses, AttentionProjectionsBecomeOneProduct) {
  const int64_t L = 24, E = 32, H = 4, D = E / H;
  const std::vector<float> wq = random_floats(size_t(E * E), -0.3f, 0.3f, 70), wk = random_floats(size_t(E * E), -0.3f, 0.3f, 71),
                           wv = random_floats(size_t(E * E), -0.3f, 0.3f, 72), bq = random_floats(size_t(E), -0.2f, 0.2f, 73),
                           bv = random_floats(size_t(E), -0.2f, 0.2f, 74);
  const IntList view{0, 1, H, L, D, L * E, D, E, 1};
  auto build = [&](bool shared_q, bool f16 = false, bool folded_biases = false) {
    ir::Graph g;
    // float16: constants made from float32 values, as float16 mode's importer makes them.
    // folded_biases: the biases hold float16 values, as a constant folded on
    // the host in float16 mode does (an Identity of a shared initializer).
    const auto c = [&](const Shape& sh, const std::vector<float>& v) {
      if (!f16) return g.constant(host(sh, v));
      if (folded_biases && sh.size() == 1) return g.constant(to_f16_saturated(host(sh, v)));
      return f16_made_constant(g, sh, v);
    };
    const TensorRef x = g.input("x", f16 ? DType::F16 : DType::F32, {L, E});
    const TensorRef pq = g.call("aten.add.Tensor", {g.call("aten.matmul.default", {x, c({E, E}, wq)}), c({E}, bq)});
    const TensorRef q = g.call("aten.mul.Tensor", {pq, c({}, {0.125f})});
    const TensorRef k = g.call("aten.matmul.default", {x, c({E, E}, wk)});
    const TensorRef v = g.call("aten.add.Tensor", {g.call("aten.matmul.default", {x, c({E, E}, wv)}), c({E}, bv)});
    for (TensorRef t : {pq, q, k, v}) g.set_seen_shape(t, {L, E});
    g.output(g.call("wgnn.attention.default", {q, k, v, None{}, 1.0, view, view, view, IntList{}, IntList{1, L, E},
                                               IntList{0, L * E, D, E, 1}}),
             "y");
    if (shared_q) g.output(q, "q");  // q read by another node: k and v alone join
    return g;
  };
  const std::vector<float> x = random_floats(size_t(L * E), -1.f, 1.f, 75);
  // The double reference.
  std::vector<double> Q(size_t(L * E)), K(size_t(L * E)), V(size_t(L * E)), ref(size_t(L * E));
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t n = 0; n < E; ++n) {
      double q = bq[size_t(n)], k = 0, v = bv[size_t(n)];
      for (int64_t c = 0; c < E; ++c) {
        const double xv = x[size_t(i * E + c)];
        q += xv * wq[size_t(c * E + n)], k += xv * wk[size_t(c * E + n)], v += xv * wv[size_t(c * E + n)];
      }
      Q[size_t(i * E + n)] = q * 0.125, K[size_t(i * E + n)] = k, V[size_t(i * E + n)] = v;
    }
  }
  ref = attention_ref(Q, K, V, L, L, H, D, 1.0);
  for (const char* limit : {"1024", "0"}) {
    SCOPED_TRACE(limit);
    ScopedSetting keys("WGNN_ATTENTION_MAX_KEYS", limit);
    ir::Graph fused = build(false);
    const passes::Report r = optimize_with_settings(fused);
    EXPECT_EQ(r.count("fuse_attention_scale"), 1u) << r.summary();
    EXPECT_EQ(r.count("fuse_qkv_projection"), 1u) << r.summary();
    ASSERT_EQ(fused.live_nodes(), 2u) << fused.dump();
    ir::Graph apart = build(true);
    const passes::Report ra = optimize_with_settings(apart);
    EXPECT_EQ(ra.count("fuse_qkv_projection"), 1u) << ra.summary();
    ir::Program fp(ctx(), std::move(fused)), ap(ctx(), std::move(apart)), up(ctx(), build(false));
    const auto a = fp.run({host({L, E}, x)});
    const auto b = ap.run({host({L, E}, x)});
    const auto u = up.run({host({L, E}, x)});
    EXPECT_LT(fp.plan({{L, E}}).dispatches().size(), ap.plan({{L, E}}).dispatches().size());
    EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-5, 1e-4));
    EXPECT_TRUE(all_close(floats(b[0]), ref, 1e-5, 1e-4));
    EXPECT_TRUE(all_close(floats(u[0]), ref, 1e-5, 1e-4));
  }
  // Float16 storage: the joined weights converted as the importer converts.
  if (ctx().features().shader_f16) {
    for (bool folded : {false, true}) {
      SCOPED_TRACE(folded ? "biases folded in float16" : "float16 made from the model's float32");
      ir::Graph fused = build(false, true, folded);
      const passes::Report r = optimize_with_settings(fused);
      EXPECT_EQ(r.count("fuse_qkv_projection"), 1u) << r.summary();
      ASSERT_EQ(fused.live_nodes(), 2u) << fused.dump();
      ir::Program fp(ctx(), std::move(fused)), up(ctx(), build(false, true, folded));
      HostTensor xh = to_f16_saturated(host({L, E}, x));
      const auto a = fp.run({xh});
      const auto u = up.run({xh});
      EXPECT_TRUE(all_close(floats(a[0]), ref, 2e-2, 1e-2));
      EXPECT_TRUE(all_close(floats(u[0]), ref, 2e-2, 1e-2));
    }
  }
}

// Attention as exporters write it, with grouped K/V heads (Llama's
// repeat_kv: k and v [1, KVH, S, D] viewed as [1, KVH, 1, S, D], expanded
// to G heads each and viewed as [1, H, S, D]), k transposed by a permute, a
// scalar factor and an additive mask: one wgnn.attention (fuse_attention)
// that reads k and v where they are, each of their heads at a stride of 0
// for its G query heads (no copy of the expansion). Against a double
// reference and the chain unfused.
TEST(IrPasses, GroupedKeyValueHeadsAreReadInPlace) {
  const int64_t H = 4, KVH = 2, G = H / KVH, L = 3, S = 7, D = 8;
  const std::vector<float> q = random_floats(size_t(H * L * D), -1.f, 1.f, 81),
                           k = random_floats(size_t(KVH * S * D), -1.f, 1.f, 82),
                           v = random_floats(size_t(KVH * S * D), -1.f, 1.f, 83),
                           mask = random_floats(size_t(L * S), -2.f, 0.f, 84);
  auto build = [&]() {
    ir::Graph g;
    const TensorRef tq = g.input("q", DType::F32, {1, H, L, D});
    const TensorRef tk = g.input("k", DType::F32, {1, KVH, S, D});
    const TensorRef tv = g.input("v", DType::F32, {1, KVH, S, D});
    const TensorRef m = g.constant(host({1, 1, L, S}, mask));
    auto repeat = [&](TensorRef x) {
      const TensorRef a = g.call("aten.view.default", {x, IntList{1, KVH, 1, S, D}});
      const TensorRef b = g.call("aten.expand.default", {a, IntList{1, KVH, G, S, D}});
      const TensorRef c = g.call("aten.view.default", {b, IntList{1, H, S, D}});
      g.set_seen_shape(a, {1, KVH, 1, S, D});
      g.set_seen_shape(b, {1, KVH, G, S, D});
      g.set_seen_shape(c, {1, H, S, D});
      return c;
    };
    const TensorRef kr = repeat(tk), vr = repeat(tv);
    const TensorRef kt = g.call("aten.permute.default", {kr, IntList{0, 1, 3, 2}});
    const TensorRef sc = g.call("aten.matmul.default", {tq, kt});
    const TensorRef scaled = g.call("aten.mul.Tensor", {sc, g.constant(host({}, {0.5f}))});
    const TensorRef masked = g.call("aten.add.Tensor", {scaled, m});
    const TensorRef p = g.call("aten._softmax.default", {masked, int64_t(-1), false});
    const TensorRef o = g.call("aten.matmul.default", {p, vr});
    g.set_seen_shape(kt, {1, H, D, S});
    for (TensorRef t : {sc, scaled, masked, p}) g.set_seen_shape(t, {1, H, L, S});
    g.set_seen_shape(o, {1, H, L, D});
    g.output(o, "y");
    return g;
  };
  // The double reference, per query head h reading K/V head h / G.
  std::vector<double> ref(size_t(H * L * D));
  for (int64_t h = 0; h < H; ++h) {
    const int64_t kh = h / G;
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> pr(static_cast<size_t>(S));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += double(q[size_t((h * L + i) * D + d)]) * k[size_t((kh * S + j) * D + d)];
        pr[size_t(j)] = 0.5 * dot + mask[size_t(i * S + j)];
        mx = std::max(mx, pr[size_t(j)]);
      }
      for (double& e : pr) sum += (e = std::exp(e - mx));
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j) acc += pr[size_t(j)] * v[size_t((kh * S + j) * D + d)];
        ref[size_t((h * L + i) * D + d)] = acc / sum;
      }
    }
  }
  ir::Graph fused = build();
  const passes::Report r = optimize_with_settings(fused);
  EXPECT_EQ(r.count("fuse_attention"), 1u) << r.summary();
  ASSERT_EQ(fused.live_nodes(), 1u) << fused.dump();
  ir::Program fp(ctx(), std::move(fused)), up(ctx(), build());
  const std::vector<HostTensor> in = {host({1, H, L, D}, q), host({1, KVH, S, D}, k), host({1, KVH, S, D}, v)};
  const auto a = fp.run(in);
  const auto u = up.run(in);
  EXPECT_EQ(fp.plan({{1, H, L, D}, {1, KVH, S, D}, {1, KVH, S, D}}).dispatches().size(), 1u);
  EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-5, 1e-4));
  EXPECT_TRUE(all_close(floats(u[0]), ref, 1e-5, 1e-4));
}

// A decoder step's products of one row (q, k and v before rotary
// positions, whatever reads them) -> one product with the weights side by
// side, each result a slice of its columns: a view with one row, so one
// dispatch. With three rows the slices would be copies: left alone.
TEST(IrPasses, ProductsOfOneRowBecomeOne) {
  const int64_t K = 16;
  const std::vector<int64_t> ns = {16, 8, 8};
  std::vector<std::vector<float>> ws;
  for (size_t j = 0; j < ns.size(); ++j) ws.push_back(random_floats(size_t(K * ns[j]), -0.5f, 0.5f, uint32_t(90 + j)));
  const std::vector<float> bias = random_floats(size_t(ns[1]), -0.2f, 0.2f, 95);
  auto build = [&](int64_t rows) {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {1, rows, K});
    for (size_t j = 0; j < ns.size(); ++j) {
      TensorRef y = g.call("aten.matmul.default", {x, g.constant(host({K, ns[j]}, ws[j]))});
      g.set_seen_shape(y, {1, rows, ns[j]});
      if (j == 1) {  // a bias: fuse_matmul_add's product
        y = g.call("aten.add.Tensor", {y, g.constant(host({ns[j]}, bias))});
        g.set_seen_shape(y, {1, rows, ns[j]});
      }
      g.output(g.call("aten.neg.default", {y}), "y" + std::to_string(j));  // read by something else
    }
    return g;
  };
  for (const int64_t rows : {int64_t(1), int64_t(3)}) {
    SCOPED_TRACE(rows);
    ir::Graph fused = build(rows);
    const passes::Report r = optimize_with_settings(fused);
    EXPECT_EQ(r.count("fuse_row_products"), rows == 1 ? 1u : 0u) << r.summary();
    const std::vector<float> xv = random_floats(size_t(rows * K), -1.f, 1.f, 96);
    ir::Program fp(ctx(), std::move(fused)), up(ctx(), build(rows));
    const auto a = fp.run({host({1, rows, K}, xv)});
    ir::Graph plain = build(rows);
    passes::OptimizeOptions off;
    off.fusion = false;
    passes::optimize(plain, off);
    ir::Program pp(ctx(), std::move(plain));
    const auto u = pp.run({host({1, rows, K}, xv)});
    // One product and three negations with one row; three products otherwise.
    EXPECT_EQ(fp.plan({{1, rows, K}}).dispatches().size(), rows == 1 ? 4u : 6u);
    for (size_t j = 0; j < ns.size(); ++j) {
      std::vector<double> ref(size_t(rows * ns[j]));
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t n = 0; n < ns[j]; ++n) {
          double acc = j == 1 ? double(bias[size_t(n)]) : 0.0;
          for (int64_t k = 0; k < K; ++k) acc += double(xv[size_t(i * K + k)]) * ws[j][size_t(k * ns[j] + n)];
          ref[size_t(i * ns[j] + n)] = -acc;
        }
      }
      EXPECT_TRUE(all_close(floats(a[j]), ref, 1e-5, 1e-4)) << j;
      EXPECT_TRUE(all_close(floats(u[j]), ref, 1e-5, 1e-4)) << j;
    }
  }
}

// A decoder step's q and k as adjacent column blocks of one product, each
// through rotary positions with the same cos and sin -> one rotary over
// both blocks' heads (join_rotary), q and k views of its head blocks:
// against the two rotaries unjoined and a double reference.
TEST(IrPasses, RotaryOfOneTokensQAndKIsOneDispatch) {
  const int64_t Hq = 4, Hk = 2, Hv = 2, D = 16, C = (Hq + Hk + Hv) * D;
  const std::vector<float> pv = random_floats(size_t(C), -1.f, 1.f, 97), cv = random_floats(size_t(D), -1.f, 1.f, 98),
                           sv = random_floats(size_t(D), -1.f, 1.f, 99);
  auto build = [&] {
    ir::Graph g;
    const TensorRef p = g.input("p", DType::F32, {1, 1, C});
    const TensorRef cs = g.input("cos", DType::F32, {1, 1, 1, D});
    const TensorRef sn = g.input("sin", DType::F32, {1, 1, 1, D});
    auto heads = [&](int64_t lo, int64_t h) {
      const TensorRef s = g.call("aten.slice.Tensor", {p, int64_t(-1), lo, lo + h * D, int64_t(1)});
      const TensorRef v = g.call("aten.view.default", {s, IntList{1, 1, h, D}});
      const TensorRef t = g.call("aten.permute.default", {v, IntList{0, 2, 1, 3}});
      g.set_seen_shape(s, {1, 1, h * D});
      g.set_seen_shape(v, {1, 1, h, D});
      g.set_seen_shape(t, {1, h, 1, D});
      const TensorRef r = g.call("wgnn.rotary_half.default", {t, cs, sn, D / 2});
      g.set_seen_shape(r, {1, h, 1, D});
      g.set_seen_dtype(r, DType::F32);
      return r;
    };
    const TensorRef q = heads(0, Hq), k = heads(Hq * D, Hk);
    g.output(g.call("aten.neg.default", {q}), "q");
    g.output(g.call("aten.neg.default", {k}), "k");
    return g;
  };
  ir::Graph joined = build();
  const passes::Report r = optimize_with_settings(joined);
  EXPECT_EQ(r.count("join_rotary"), 1u) << r.summary();
  ir::Program jp(ctx(), std::move(joined));
  ir::Graph plain = build();
  passes::OptimizeOptions off;
  off.fusion = false;
  passes::optimize(plain, off);
  ir::Program pp(ctx(), std::move(plain));
  const std::vector<HostTensor> in = {host({1, 1, C}, pv), host({1, 1, 1, D}, cv), host({1, 1, 1, D}, sv)};
  const auto a = jp.run(in), u = pp.run(in);
  // One rotary and the two negations, against two rotaries.
  EXPECT_EQ(jp.plan({{1, 1, C}, {1, 1, 1, D}, {1, 1, 1, D}}).dispatches().size(), 3u);
  EXPECT_EQ(pp.plan({{1, 1, C}, {1, 1, 1, D}, {1, 1, 1, D}}).dispatches().size(), 4u);
  for (int which = 0; which < 2; ++which) {
    const int64_t lo = which == 0 ? 0 : Hq * D, h = which == 0 ? Hq : Hk;
    std::vector<double> ref(size_t(h * D));
    for (int64_t head = 0; head < h; ++head)
      for (int64_t i = 0; i < D; ++i) {
        const double x = pv[size_t(lo + head * D + i)];
        const double rot = i < D / 2 ? -double(pv[size_t(lo + head * D + i + D / 2)]) : pv[size_t(lo + head * D + i - D / 2)];
        ref[size_t(head * D + i)] = -(x * cv[size_t(i)] + rot * sv[size_t(i)]);
      }
    EXPECT_TRUE(all_close(floats(a[size_t(which)]), ref, 1e-6, 1e-5)) << which;
    EXPECT_TRUE(all_close(floats(u[size_t(which)]), ref, 1e-6, 1e-5)) << which;
  }
}

// SwiGLU at a decoder step: silu(x Wg) * (x Wu) with one row -> the two
// products one (fuse_row_products), then the gate in its epilogue
// (fuse_matmul_silu_mul): one dispatch, against the chain unfused and a
// double reference. Three rows keep three dispatches (no joined product).
TEST(IrPasses, SwiGluOfOneRowIsOneDispatch) {
  const int64_t K = 32, F = 24;
  const std::vector<float> wg = random_floats(size_t(K * F), -0.5f, 0.5f, 110),
                           wu = random_floats(size_t(K * F), -0.5f, 0.5f, 111);
  auto build = [&](int64_t rows) {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {1, rows, K});
    const TensorRef gate = g.call("aten.matmul.default", {x, g.constant(host({K, F}, wg))});
    const TensorRef up = g.call("aten.matmul.default", {x, g.constant(host({K, F}, wu))});
    const TensorRef s = g.call("aten.silu.default", {gate});
    const TensorRef y = g.call("aten.mul.Tensor", {s, up});
    for (TensorRef t : {gate, up, s, y}) g.set_seen_shape(t, {1, rows, F});
    g.output(y, "y");
    return g;
  };
  for (const int64_t rows : {int64_t(1), int64_t(3)}) {
    SCOPED_TRACE(rows);
    ir::Graph fused = build(rows);
    const passes::Report r = optimize_with_settings(fused);
    EXPECT_EQ(r.count("fuse_matmul_silu_mul"), rows == 1 ? 1u : 0u) << r.summary();
    const std::vector<float> xv = random_floats(size_t(rows * K), -1.f, 1.f, 112);
    ir::Program fp(ctx(), std::move(fused));
    ir::Graph plain = build(rows);
    passes::OptimizeOptions off;
    off.fusion = false;
    passes::optimize(plain, off);
    ir::Program pp(ctx(), std::move(plain));
    const auto a = fp.run({host({1, rows, K}, xv)}), u = pp.run({host({1, rows, K}, xv)});
    EXPECT_EQ(fp.plan({{1, rows, K}}).dispatches().size(), rows == 1 ? 1u : 3u);
    std::vector<double> ref(size_t(rows * F));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t n = 0; n < F; ++n) {
        double gt = 0, up = 0;
        for (int64_t k = 0; k < K; ++k) {
          gt += double(xv[size_t(i * K + k)]) * wg[size_t(k * F + n)];
          up += double(xv[size_t(i * K + k)]) * wu[size_t(k * F + n)];
        }
        ref[size_t(i * F + n)] = gt / (1.0 + std::exp(-gt)) * up;
      }
    EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-5, 1e-4));
    EXPECT_TRUE(all_close(floats(u[0]), ref, 1e-5, 1e-4));
  }
}

// A decoder's cross-attention (BART): q a product of the decoder's states,
// k and v products of the encoder's -> k and v one product with their
// weights side by side (fuse_qkv_projection), q apart; against the separate
// products and a double reference, 8 queries over 20 keys.
TEST(IrPasses, CrossAttentionKeysAndValuesBecomeOneProduct) {
  const int64_t L = 8, S = 20, E = 32, H = 4, D = E / H;
  const std::vector<float> wq = random_floats(size_t(E * E), -0.3f, 0.3f, 90), wk = random_floats(size_t(E * E), -0.3f, 0.3f, 91),
                           wv = random_floats(size_t(E * E), -0.3f, 0.3f, 92), bk = random_floats(size_t(E), -0.2f, 0.2f, 93),
                           bv = random_floats(size_t(E), -0.2f, 0.2f, 94);
  // The weights and biases as plain constants, or as `made` gives them.
  using MakeConstant = std::function<TensorRef(ir::Graph&, const Shape&, const std::vector<float>&, const std::string&)>;
  const MakeConstant plain = [](ir::Graph& g, const Shape& shape, const std::vector<float>& v, const std::string&) {
    return g.constant(host(shape, v));
  };
  auto build = [&](const MakeConstant& w = {}) {
    const MakeConstant& make = w ? w : plain;
    ir::Graph g;
    const TensorRef y = g.input("y", DType::F32, {L, E});
    const TensorRef x = g.input("x", DType::F32, {S, E});
    const TensorRef q = g.call("aten.matmul.default", {y, make(g, {E, E}, wq, "wq")});
    const TensorRef k = g.call("aten.add.Tensor", {g.call("aten.matmul.default", {x, make(g, {E, E}, wk, "wk")}),
                                                   make(g, {E}, bk, "bk")});
    const TensorRef v = g.call("aten.add.Tensor", {g.call("aten.matmul.default", {x, make(g, {E, E}, wv, "wv")}),
                                                   make(g, {E}, bv, "bv")});
    g.set_seen_shape(q, {L, E});
    for (TensorRef t : {k, v}) g.set_seen_shape(t, {S, E});
    g.output(g.call("wgnn.attention.default",
                    {q, k, v, None{}, 0.25, IntList{0, 1, H, L, D, L * E, D, E, 1}, IntList{0, 1, H, S, D, S * E, D, E, 1},
                     IntList{0, 1, H, S, D, S * E, D, E, 1}, IntList{}, IntList{1, L, E}, IntList{0, L * E, D, E, 1}}),
             "out");
    return g;
  };
  const std::vector<float> yv = random_floats(size_t(L * E), -1.f, 1.f, 95), xv = random_floats(size_t(S * E), -1.f, 1.f, 96);
  std::vector<double> Q(size_t(L * E)), K(size_t(S * E)), V(size_t(S * E)), ref(size_t(L * E));
  for (int64_t i = 0; i < L; ++i)
    for (int64_t n = 0; n < E; ++n) {
      double q = 0;
      for (int64_t c = 0; c < E; ++c) q += double(yv[size_t(i * E + c)]) * wq[size_t(c * E + n)];
      Q[size_t(i * E + n)] = q;
    }
  for (int64_t j = 0; j < S; ++j)
    for (int64_t n = 0; n < E; ++n) {
      double k = bk[size_t(n)], v = bv[size_t(n)];
      for (int64_t c = 0; c < E; ++c) {
        k += double(xv[size_t(j * E + c)]) * wk[size_t(c * E + n)];
        v += double(xv[size_t(j * E + c)]) * wv[size_t(c * E + n)];
      }
      K[size_t(j * E + n)] = k, V[size_t(j * E + n)] = v;
    }
  ref = attention_ref(Q, K, V, L, S, H, D, 0.25);
  ir::Graph fused = build();
  const passes::Report r = optimize_with_settings(fused);
  EXPECT_EQ(r.count("fuse_qkv_projection"), 1u) << r.summary();
  ASSERT_EQ(fused.live_nodes(), 3u) << fused.dump();  // q, the joined k and v, the attention
  ir::Program fp(ctx(), std::move(fused)), up(ctx(), build());
  const auto a = fp.run({host({L, E}, yv), host({S, E}, xv)});
  const auto u = up.run({host({L, E}, yv), host({S, E}, xv)});
  EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-5, 1e-4));
  EXPECT_TRUE(all_close(floats(u[0]), ref, 1e-5, 1e-4));
  EXPECT_LT(fp.plan({{L, E}, {S, E}}).dispatches().size(), up.plan({{L, E}, {S, E}}).dispatches().size());
  // The weights and biases as a Session gives them (made constants named
  // by memos): the joined ones are made constants too, named by their
  // sources' memos, so a later plan finds them without joining again.
  const MakeConstant made = [](ir::Graph& g, const Shape& shape, const std::vector<float>& v, const std::string& memo) {
    auto src = std::make_shared<const HostTensor>(host(shape, v));
    return g.made_constant(DType::F32, shape, memo, [src](HostTensor&) -> const HostTensor& { return *src; }, memo, src);
  };
  ir::Graph g = build(made);
  EXPECT_EQ(optimize_with_settings(g).count("fuse_qkv_projection"), 1u);
  std::vector<std::string> memos;
  for (const ir::Node& n : g.nodes()) {
    if (n.dead || n.op != "wgnn.matmul_add.default" || n.args[1].tensor().id < 0) continue;
    for (size_t a : {size_t(1), size_t(2)}) {
      if (n.args[a].is_tensor()) memos.push_back(g.value(n.args[a].tensor()).memo);
    }
  }
  auto has = [&](const std::string& prefix) {
    return std::any_of(memos.begin(), memos.end(), [&](const std::string& m) { return m.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(has("joined(wk, wv;")) << g.dump();
  EXPECT_TRUE(has("joined_bias(bk, bv;")) << g.dump();
  ir::Program mp(ctx(), std::move(g));
  EXPECT_TRUE(all_close(floats(mp.run({host({L, E}, yv), host({S, E}, xv)})[0]), ref, 1e-5, 1e-4));
}

// (k * scale)^T @ v (DaViT's channel attention): the permute and the scalar
// factor, in that order, both into one wgnn.matmul_add (trans_self, alpha).
TEST(IrPasses, ScaledOperandReadTransposedIsOneProduct) {
  const int64_t B = 2, S = 12, D = 8;
  auto build = [&] {
    ir::Graph g;
    const TensorRef k = g.input("k", DType::F32, {B, S, D});
    const TensorRef v = g.input("v", DType::F32, {B, S, D});
    const TensorRef ks = g.call("aten.mul.Tensor", {k, g.constant(host({}, {0.25f}))});
    const TensorRef kt = g.call("aten.permute.default", {ks, IntList{0, 2, 1}});
    g.output(g.call("aten.matmul.default", {kt, v}), "y");
    return g;
  };
  ir::Graph fused = build();
  optimize_with_settings(fused);
  ASSERT_EQ(fused.live_nodes(), 1u) << fused.dump();
  EXPECT_EQ(fused.nodes()[0].op, "wgnn.matmul_add.default");
  ir::Program fp(ctx(), std::move(fused));
  const std::vector<float> k = random_floats(size_t(B * S * D), -1.f, 1.f, 60), v = random_floats(size_t(B * S * D), -1.f, 1.f, 61);
  const auto a = fp.run({host({B, S, D}, k), host({B, S, D}, v)});
  std::vector<double> ref(size_t(B * D * D));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < D; ++i) {
      for (int64_t j = 0; j < D; ++j) {
        double s = 0;
        for (int64_t t = 0; t < S; ++t) s += 0.25 * double(k[size_t((b * S + t) * D + i)]) * double(v[size_t((b * S + t) * D + j)]);
        ref[size_t((b * D + i) * D + j)] = s;
      }
    }
  }
  EXPECT_TRUE(all_close(floats(a[0]), ref, 1e-5, 1e-5));
}

TEST(IrPasses, ConvBatchNormResidualAddReluIsOneConvolution) {
  // A residual block's end, as a caller of the C++ API writes it: conv,
  // batch norm, + r (either operand order), relu -> one convolution whose
  // epilogue adds r; against the double reference, and a residual whose
  // shape broadcasts (one value per channel) still right.
  const std::vector<float> w = random_floats(8 * 3 * 9, -0.5f, 0.5f, 16), bias = random_floats(8, -0.2f, 0.2f, 17),
                           gamma = random_floats(8, 0.5f, 1.5f, 18), beta = random_floats(8, -0.5f, 0.5f, 19),
                           mean = random_floats(8, -0.3f, 0.3f, 20), var = random_floats(8, 0.2f, 2.f, 21);
  auto build = [&](bool residual_first, const ir::SymShape& rs) {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {1, 3, "h", "w"});
    const TensorRef r = g.input("r", DType::F32, rs);
    const TensorRef c = g.call("aten.convolution.default",
                               {x, g.constant(host({8, 3, 3, 3}, w)), g.constant(host({8}, bias)), IntList{1, 1},
                                IntList{1, 1}, IntList{1, 1}, false, IntList{0, 0}, int64_t(1)});
    const auto bn = g.call_multi("aten._native_batch_norm_legit_no_training.default",
                                 {c, g.constant(host({8}, gamma)), g.constant(host({8}, beta)),
                                  g.constant(host({8}, mean)), g.constant(host({8}, var)), 0.1, 1e-5},
                                 3);
    const TensorRef s = residual_first ? g.call("aten.add.Tensor", {r, bn[0]}) : g.call("aten.add.Tensor", {bn[0], r});
    g.output(g.call("aten.relu.default", {s}));
    return g;
  };
  for (bool residual_first : {false, true}) {
    for (const ir::SymShape& rs : {ir::SymShape{1, 8, "h", "w"}, ir::SymShape{1, 8, 1, 1}}) {
      SCOPED_TRACE(ir::sym_shape_str(rs));
      ir::Graph fused = build(residual_first, rs);
      const passes::Report rep = optimize_with_settings(fused);
      EXPECT_EQ(rep.count("fuse_conv_residual"), 1u) << rep.summary();
      EXPECT_EQ(rep.count("fuse_conv_activation"), 1u) << rep.summary();
      ASSERT_EQ(fused.live_nodes(), 1u) << fused.dump();
      ir::Program fp(ctx(), std::move(fused)), up(ctx(), build(residual_first, rs));
      const int64_t H = 7, W = 10;
      const std::vector<float> x = random_floats(size_t(3 * H * W), -1.f, 1.f, 22);
      const bool full = rs[2].symbolic();
      const std::vector<float> r = random_floats(size_t(full ? 8 * H * W : 8), -1.f, 1.f, 23);
      // conv + batch norm without the relu: the reference's relu applied to a shifted value.
      std::vector<double> pre(size_t(8 * H * W));
      const Shape rshape = full ? Shape{1, 8, H, W} : Shape{1, 8, 1, 1};
      const auto a = fp.run({host({1, 3, H, W}, x), host(rshape, r)});
      const auto u = up.run({host({1, 3, H, W}, x), host(rshape, r)});
      EXPECT_EQ(fp.plan({{1, 3, H, W}, rshape}).dispatches().size() + (full ? 3 : 1),
                up.plan({{1, 3, H, W}, rshape}).dispatches().size());
      const std::vector<float> uf = floats(u[0]);
      EXPECT_TRUE(all_close(floats(a[0]), std::vector<double>(uf.begin(), uf.end()), 1e-5, 1e-5));
      // The reference: relu(bn(conv) + r), bn(conv) from conv_bn_relu_ref with
      // a shift of 100 in beta (no value reaches the relu), less 100.
      std::vector<float> beta_up(beta);
      for (float& b : beta_up) b += 100.f;
      const auto lin = conv_bn_relu_ref(x, w, bias, gamma, beta_up, mean, var, H, W, 1e-5);
      for (size_t i = 0; i < pre.size(); ++i) {
        const double rv = full ? double(r[i]) : double(r[i / size_t(H * W)]);
        pre[i] = std::max(lin[i] - 100.0 + rv, 0.0);
      }
      EXPECT_TRUE(all_close(floats(a[0]), pre, 1e-4, 1e-4));
      EXPECT_TRUE(fp.last_lowering().fallbacks.empty());
    }
  }
}

// RMS norms as exporters write them (passes/fuse_rms_norm): each form is
// one aten.rms_norm node, and with the residual add before it one
// wgnn.add_rms_norm dispatch; the numbers against a double reference, and
// against the unfused chain.
TEST(IrPasses, RmsNormWrittenOutIsOneDispatch) {
  const int64_t R = 3, D = 64;
  const std::vector<float> wv = random_floats(size_t(D), 0.5f, 1.5f, 70);
  // kCastThenWeight: transformers' LlamaRMSNorm, weight * y.to(dtype), the
  // Cast to y's own dtype imported as a view to y's own shape.
  enum Form { kPowDivWeight, kMulRsqrt, kReciprocalWeightFirst, kDivOfOne, kCastThenWeight };
  for (Form form : {kPowDivWeight, kMulRsqrt, kReciprocalWeightFirst, kDivOfOne, kCastThenWeight}) {
    SCOPED_TRACE("form " + std::to_string(int(form)));
    const bool weighted = form == kPowDivWeight || form == kReciprocalWeightFirst || form == kCastThenWeight;
    auto build = [&] {
      ir::Graph g;
      const TensorRef a = g.input("a", DType::F32, {"rows", D});
      const TensorRef b = g.input("b", DType::F32, {"rows", D});
      const TensorRef x = g.call("aten.add.Tensor", {a, b});  // the residual sum, read again below
      // Without a weight the normalized shape comes from x's, which the
      // ONNX importer records (a result's shape is otherwise not known).
      if (!weighted) g.set_seen_shape(x, {R, D});
      const TensorRef sq = form == kPowDivWeight ? g.call("aten.pow.Tensor_Tensor", {x, g.constant(host({}, {2.f}))})
                                                 : g.call("aten.mul.Tensor", {x, x});
      const TensorRef ms = g.call("aten.mean.dim", {sq, IntList{-1}, true});
      const TensorRef t = g.call("aten.add.Tensor", {g.constant(host({}, {1e-6f})), ms});
      TensorRef y{-1};
      if (form == kPowDivWeight) {
        y = g.call("aten.div.Tensor", {x, g.call("aten.sqrt.default", {t})});
      } else if (form == kMulRsqrt || form == kCastThenWeight) {
        y = g.call("aten.mul.Tensor", {g.call("aten.rsqrt.default", {t}), x});
        if (form == kCastThenWeight) {
          g.set_seen_shape(y, {R, D});
          y = g.call("aten.view.default", {y, IntList{R, D}});
        }
      } else if (form == kReciprocalWeightFirst) {
        y = g.call("aten.mul.Tensor", {x, g.call("aten.reciprocal.default", {g.call("aten.sqrt.default", {t})})});
      } else {
        y = g.call("aten.mul.Tensor",
                   {x, g.call("aten.div.Tensor", {g.constant(host({}, {1.f})), g.call("aten.sqrt.default", {t})})});
      }
      if (weighted) {
        const TensorRef w = g.constant(host({D}, wv));
        y = form == kPowDivWeight ? g.call("aten.mul.Tensor", {y, w}) : g.call("aten.mul.Tensor", {w, y});
      }
      g.output(y, "norm");
      g.output(g.call("aten.add.Tensor", {x, x}), "twice");
      return g;
    };
    ir::Graph fused = build();
    const passes::Report r = optimize_with_settings(fused);
    EXPECT_EQ(r.count("fuse_rms_norm"), 1u) << r.summary();
    EXPECT_EQ(r.count("fuse_add_layer_norm"), 1u) << r.summary();
    EXPECT_EQ(fused.live_nodes(), 2u) << fused.dump();
    ir::Graph apart = build();
    {
      ScopedSetting off("WGNN_DISABLE_PASSES", "fuse_rms_norm");
      optimize_with_settings(apart);
    }
    ir::Program fp(ctx(), std::move(fused)), ap(ctx(), std::move(apart));
    const std::vector<float> av = random_floats(size_t(R * D), -2.f, 2.f, 71), bv = random_floats(size_t(R * D), -2.f, 2.f, 72);
    const auto got = fp.run({host({R, D}, av), host({R, D}, bv)});
    const auto base = ap.run({host({R, D}, av), host({R, D}, bv)});
    EXPECT_EQ(fp.plan({{R, D}, {R, D}}).dispatches().size(), 2u);  // add + norm, and the doubling
    EXPECT_TRUE(fp.last_lowering().fallbacks.empty());
    std::vector<double> norm(size_t(R * D));
    for (int64_t i = 0; i < R; ++i) {
      double ms = 0;
      for (int64_t k = 0; k < D; ++k) {
        const double v = double(av[size_t(i * D + k)] + bv[size_t(i * D + k)]);
        ms += v * v / double(D);
      }
      for (int64_t k = 0; k < D; ++k) {
        const double v = double(av[size_t(i * D + k)] + bv[size_t(i * D + k)]);
        norm[size_t(i * D + k)] = v / std::sqrt(ms + 1e-6) * (weighted ? double(wv[size_t(k)]) : 1.0);
      }
    }
    EXPECT_TRUE(all_close(floats(got[0]), norm, 1e-5, 1e-5));
    const std::vector<float> bf = floats(base[0]);
    EXPECT_TRUE(all_close(floats(got[0]), std::vector<double>(bf.begin(), bf.end()), 1e-5, 1e-5));
    EXPECT_EQ(floats(got[1]), floats(base[1]));
  }
}

// Rotary positions as transformers writes them (passes/fuse_rotary): q *
// cos + cat(-q[..., h:], q[..., :h]) * sin is one wgnn.rotary_half
// dispatch, cos and sin broadcast over the heads, against a double
// reference and the unfused chain; a partial rotary (a last dim other than
// 2h) falls back to the chain.
TEST(IrPasses, RotaryWrittenOutIsOneDispatch) {
  for (const int64_t D : {int64_t(32), int64_t(48)}) {
    SCOPED_TRACE("width " + std::to_string(D));
    const int64_t B = 2, H = 3, S = 5, h = 16;  // D 48: the slices take 32 of 48 (partial: refused)
    auto build = [&] {
      ir::Graph g;
      const TensorRef q = g.input("q", DType::F32, {B, H, S, D});
      const TensorRef cos = g.input("cos", DType::F32, {B, 1, S, 2 * h});
      const TensorRef sin = g.input("sin", DType::F32, {B, 1, S, 2 * h});
      const TensorRef x1 = g.call("aten.slice.Tensor", {q, int64_t(3), int64_t(0), h, int64_t(1)});
      const TensorRef x2 = g.call("aten.slice.Tensor", {q, int64_t(3), h, int64_t(2 * h), int64_t(1)});
      const TensorRef r = g.call("aten.cat.default", {ValueList{g.call("aten.neg.default", {x2}), x1}, int64_t(-1)});
      const TensorRef qc = D == 2 * h ? g.call("aten.mul.Tensor", {cos, q})
                                      : g.call("aten.mul.Tensor", {g.call("aten.slice.Tensor", {q, int64_t(3), int64_t(0), int64_t(2 * h), int64_t(1)}), cos});
      g.output(g.call("aten.add.Tensor", {g.call("aten.mul.Tensor", {r, sin}), qc}), "out");
      return g;
    };
    ir::Graph fused = build();
    const passes::Report rep = optimize_with_settings(fused);
    ir::Graph apart = build();
    {
      ScopedSetting off("WGNN_DISABLE_PASSES", "fuse_rotary");
      optimize_with_settings(apart);
    }
    const std::vector<float> qv = random_floats(size_t(B * H * S * D), -2.f, 2.f, 80);
    const std::vector<float> cv = random_floats(size_t(B * S * 2 * h), -1.f, 1.f, 81), sv = random_floats(size_t(B * S * 2 * h), -1.f, 1.f, 82);
    const std::vector<HostTensor> in{host({B, H, S, D}, qv), host({B, 1, S, 2 * h}, cv), host({B, 1, S, 2 * h}, sv)};
    ir::Program fp(ctx(), std::move(fused)), ap(ctx(), std::move(apart));
    const auto got = fp.run(in);
    const auto base = ap.run(in);
    if (D == 2 * h) {
      EXPECT_EQ(rep.count("fuse_rotary"), 1u) << rep.summary();
      EXPECT_EQ(fp.plan({{B, H, S, D}, {B, 1, S, 2 * h}, {B, 1, S, 2 * h}}).dispatches().size(), 1u);
      EXPECT_TRUE(fp.last_lowering().fallbacks.empty()) << fp.last_lowering().fallbacks.front();
    } else {
      // x * cos reads a slice of q, not q: no match.
      EXPECT_EQ(rep.count("fuse_rotary"), 0u) << rep.summary();
    }
    std::vector<double> ref(size_t(B * H * S * 2 * h));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t hh = 0; hh < H; ++hh)
        for (int64_t s = 0; s < S; ++s)
          for (int64_t j = 0; j < 2 * h; ++j) {
            const size_t qi = size_t(((b * H + hh) * S + s) * D), ci = size_t((b * S + s) * 2 * h + j);
            const double rot = j < h ? -double(qv[qi + size_t(j + h)]) : double(qv[qi + size_t(j - h)]);
            ref[size_t(((b * H + hh) * S + s) * 2 * h + j)] = double(qv[qi + size_t(j)]) * cv[ci] + rot * sv[ci];
          }
    EXPECT_TRUE(all_close(floats(got[0]), ref, 1e-5, 1e-5));
    const std::vector<float> bf = floats(base[0]);
    EXPECT_TRUE(all_close(floats(got[0]), std::vector<double>(bf.begin(), bf.end()), 1e-6, 1e-6));
  }
}

// The op on its own: a last dim other than 2 * half, cos of another dtype
// or a shape that does not broadcast to x's are refused, naming them.
TEST(IrPasses, RotaryOpRefusesWhatItCannotDo) {
  Graph g(ctx());
  const TensorRef x = g.add_tensor({1, 2, 3, 8}, DType::F32, TensorKind::Input, "x");
  const TensorRef c = g.add_tensor({1, 1, 3, 8}, DType::F32, TensorKind::Input, "c");
  const TensorRef bad = g.add_tensor({1, 2, 4, 8}, DType::F32, TensorKind::Input, "bad");
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.rotary_half.default", {x, c, c, int64_t(3)}); }),
              testing::HasSubstr("must have a last dim of 2 * half = 6"));
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.rotary_half.default", {x, bad, c, int64_t(4)}); }),
              testing::HasSubstr("broadcast"));
}

// SwiGLU's gate as exporters write it (passes/fuse_silu, then
// fuse_matmul_activation): silu(x @ gate) = p * sigmoid(p) becomes the
// product's epilogue, one dispatch for one row (a decoding step's
// matrix-vector kernel) and for several; against a double reference.
TEST(IrPasses, SiluAfterAProductIsItsEpilogue) {
  const int64_t K = 64, N = 48;
  const std::vector<float> w = random_floats(size_t(K * N), -0.3f, 0.3f, 90);
  for (const int64_t M : {int64_t(1), int64_t(5)}) {
    SCOPED_TRACE("rows " + std::to_string(M));
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {M, K});
    const TensorRef p = g.call("aten.matmul.default", {x, g.constant(host({K, N}, w))});
    g.output(g.call("aten.mul.Tensor", {g.call("aten.sigmoid.default", {p}), p}), "gate");
    const passes::Report r = optimize_with_settings(g);
    EXPECT_EQ(r.count("fuse_silu"), 1u) << r.summary();
    EXPECT_EQ(r.count("fuse_matmul_activation"), 1u) << r.summary();
    ir::Program prog(ctx(), std::move(g));
    const std::vector<float> xv = random_floats(size_t(M * K), -2.f, 2.f, 91);
    const auto out = prog.run({host({M, K}, xv)});
    EXPECT_EQ(prog.plan({{M, K}}).dispatches().size(), 1u);
    EXPECT_TRUE(prog.last_lowering().fallbacks.empty());
    std::vector<double> ref(size_t(M * N));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += double(xv[size_t(i * K + k)]) * double(w[size_t(k * N + j)]);
        ref[size_t(i * N + j)] = acc / (1 + std::exp(-acc));
      }
    EXPECT_TRUE(all_close(floats(out[0]), ref, 1e-5, 1e-4));
  }
}

// A chain that only looks like an RMS norm stays as it is: a mean over a
// leading dim, a square of another value, a sum read twice.
TEST(IrPasses, RmsNormLookalikesAreLeftAlone) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {4, 8});
    const TensorRef z = g.input("z", DType::F32, {4, 8});
    const TensorRef sq = g.call("aten.mul.Tensor", {x, variant == 1 ? z : x});
    const TensorRef ms = g.call("aten.mean.dim", {sq, IntList{variant == 0 ? 0 : 1}, true});
    const TensorRef t = g.call("aten.add.Tensor", {ms, g.constant(host({}, {1e-6f}))});
    const TensorRef y = g.call("aten.div.Tensor", {x, g.call("aten.sqrt.default", {t})});
    g.output(y, "y");
    if (variant == 2) g.output(t, "sum read again");
    EXPECT_EQ(optimize_with_settings(g).count("fuse_rms_norm"), 0u);
  }
}

TEST(IrPasses, AddThenLayerNormIsOneDispatchThatAlsoWritesTheSum) {
  auto build = [] {
    ir::Graph g;
    const TensorRef a = g.input("a", DType::F32, {"n", 24});
    const TensorRef b = g.input("b", DType::F32, {"n2", 24});
    const TensorRef s = g.call("aten.add.Tensor", {a, b});
    const auto ln = g.call_multi("aten.native_layer_norm.default", {s, IntList{24}, None{}, None{}, 1e-5}, 3);
    g.output(ln[0], "norm");
    g.output(g.call("aten.add.Tensor", {s, s}), "twice");  // the sum read again
    return g;
  };
  ir::Graph fused = build();
  EXPECT_EQ(optimize_with_settings(fused).count("fuse_add_layer_norm"), 1u);
  EXPECT_EQ(fused.live_nodes(), 2u) << fused.dump();
  ir::Program fp(ctx(), std::move(fused));
  for (int64_t n2 : {int64_t(5), int64_t(1)}) {  // the same shape; then b broadcasts: the unfused chain
    const std::vector<float> av = random_floats(5 * 24, -2.f, 2.f, 12), bv = random_floats(size_t(n2 * 24), -2.f, 2.f, 13);
    const auto out = fp.run({host({5, 24}, av), host({n2, 24}, bv)});
    std::vector<double> norm(5 * 24), twice(5 * 24);
    for (int64_t r = 0; r < 5; ++r) {
      double m = 0, v = 0;
      std::vector<double> s(24);
      for (int64_t k = 0; k < 24; ++k) {
        s[size_t(k)] = double(float(av[size_t(r * 24 + k)] + bv[size_t((n2 == 1 ? 0 : r) * 24 + k)]));
        m += s[size_t(k)] / 24;
      }
      for (double e : s) v += (e - m) * (e - m) / 24;
      for (int64_t k = 0; k < 24; ++k) {
        norm[size_t(r * 24 + k)] = (s[size_t(k)] - m) / std::sqrt(v + 1e-5);
        twice[size_t(r * 24 + k)] = 2 * s[size_t(k)];
      }
    }
    EXPECT_TRUE(all_close(floats(out[0]), norm, 1e-5, 1e-4));
    EXPECT_TRUE(all_close(floats(out[1]), twice, 1e-6, 1e-6));
    EXPECT_EQ(fp.last_lowering().fallbacks.size(), n2 == 1 ? 1u : 0u);
  }
}

// A product split along K (32 rows, K = 1024: a decoder's second
// feed-forward product), then the residual add and the layer norm: the
// norm adds the product's parts and bias as it loads its rows
// (fuse_matmul_layer_norm), one dispatch fewer than the split's own sum
// pass, the same bits as with it, and the norm and the sum against a
// double reference.
TEST(IrPasses, SplitProductSumInTheLayerNorm) {
  const int64_t R = 32, K = 1024, N = 64;
  const std::vector<float> w = random_floats(size_t(N * K), -0.05f, 0.05f, 60), b = random_floats(size_t(N), -0.2f, 0.2f, 61);
  const std::vector<float> lw = random_floats(size_t(N), 0.5f, 1.5f, 62), lb = random_floats(size_t(N), -0.5f, 0.5f, 63);
  auto build = [&] {
    ir::Graph g;
    const TensorRef h = g.input("h", DType::F32, {"rows", K});
    const TensorRef x = g.input("x", DType::F32, {"xrows", N});
    const TensorRef p = g.call("aten.linear.default", {h, g.constant(host({N, K}, w)), g.constant(host({N}, b))});
    const TensorRef s = g.call("aten.add.Tensor", {x, p});
    const auto ln = g.call_multi("aten.native_layer_norm.default",
                                 {s, IntList{N}, g.constant(host({N}, lw)), g.constant(host({N}, lb)), 1e-5}, 3);
    g.output(ln[0], "norm");
    g.output(g.call("aten.add.Tensor", {s, s}), "twice");  // the sum read again
    return g;
  };
  ir::Graph fused = build();
  const passes::Report r = optimize_with_settings(fused);
  EXPECT_EQ(r.count("fuse_matmul_layer_norm"), 1u) << r.summary();
  ir::Graph apart = build();
  {
    ScopedSetting off("WGNN_DISABLE_PASSES", "fuse_matmul_layer_norm");
    optimize_with_settings(apart);
  }
  ir::Program fp(ctx(), std::move(fused)), ap(ctx(), std::move(apart));
  const std::vector<float> h = random_floats(size_t(R * K), -1.f, 1.f, 64), x = random_floats(size_t(R * N), -1.f, 1.f, 65);
  const auto got = fp.run({host({R, K}, h), host({R, N}, x)});
  const auto base = ap.run({host({R, K}, h), host({R, N}, x)});
  std::string labels, base_labels;
  for (const auto& d : fp.plan({{R, K}, {R, N}}).dispatches()) labels += d.label + "; ";
  for (const auto& d : ap.plan({{R, K}, {R, N}}).dispatches()) base_labels += d.label + "; ";
  EXPECT_THAT(base_labels, testing::HasSubstr("gemm splitk sum"));  // the product is split
  EXPECT_THAT(labels, testing::Not(testing::HasSubstr("gemm splitk sum"))) << labels;
  EXPECT_THAT(labels, testing::HasSubstr("add_layer_norm")) << labels;
  EXPECT_THAT(labels, testing::HasSubstr("splitk sum")) << labels;
  EXPECT_EQ(fp.plan({{R, K}, {R, N}}).dispatches().size() + 1, ap.plan({{R, K}, {R, N}}).dispatches().size());
  EXPECT_EQ(floats(got[0]), floats(base[0]));
  EXPECT_EQ(floats(got[1]), floats(base[1]));
  std::vector<double> norm(size_t(R * N)), twice(size_t(R * N));
  for (int64_t i = 0; i < R; ++i) {
    std::vector<double> sv(static_cast<size_t>(N));
    double m = 0, v = 0;
    for (int64_t n = 0; n < N; ++n) {
      double acc = b[size_t(n)];
      for (int64_t k = 0; k < K; ++k) acc += double(h[size_t(i * K + k)]) * double(w[size_t(n * K + k)]);
      m += (sv[size_t(n)] = acc + x[size_t(i * N + n)]) / double(N);
    }
    for (double e : sv) v += (e - m) * (e - m) / double(N);
    for (int64_t n = 0; n < N; ++n) {
      norm[size_t(i * N + n)] = (sv[size_t(n)] - m) / std::sqrt(v + 1e-5) * lw[size_t(n)] + lb[size_t(n)];
      twice[size_t(i * N + n)] = 2 * sv[size_t(n)];
    }
  }
  EXPECT_TRUE(all_close(floats(got[0]), norm, 1e-4, 1e-4));
  EXPECT_TRUE(all_close(floats(got[1]), twice, 1e-4, 1e-4));
  EXPECT_TRUE(fp.last_lowering().fallbacks.empty());

  // A residual of one row, broadcast: the fused op refuses it before it
  // records anything, and so does the add + layer norm in its chain; the
  // product, the add and the norm run apart, with the same results as
  // without the pass.
  const std::vector<float> x1(x.begin(), x.begin() + N);
  const auto got1 = fp.run({host({R, K}, h), host({1, N}, x1)});
  const auto base1 = ap.run({host({R, K}, h), host({1, N}, x1)});
  EXPECT_EQ(fp.last_lowering().fallbacks.size(), 2u);
  EXPECT_EQ(floats(got1[0]), floats(base1[0]));
  EXPECT_EQ(floats(got1[1]), floats(base1[1]));

  // Under WebGPU's default limits (8 storage buffers a stage) the folded
  // layer norm's 9 do not fit: the product keeps its sum pass, the same bits.
  gpu::ContextOptions o;
  o.limits = "default";
  gpu::Context dc(o);
  ir::Graph small = build();
  optimize_with_settings(small);
  ir::Program dp(dc, std::move(small));
  const auto got2 = dp.run({host({R, K}, h), host({R, N}, x)});
  std::string labels2;
  for (const auto& d : dp.plan({{R, K}, {R, N}}).dispatches()) labels2 += d.label + "; ";
  EXPECT_THAT(labels2, testing::HasSubstr("gemm splitk sum")) << labels2;
  EXPECT_EQ(floats(got2[0]), floats(base[0]));
  EXPECT_EQ(floats(got2[1]), floats(base[1]));
}

TEST(IrPasses, ConstantsFoldOnTheDeviceAndDeadNodesGo) {
  ir::Graph g;
  const TensorRef x = g.input("x", DType::F32, {4});
  const TensorRef c1 = g.constant(host({4}, {1, 2, 3, 4}));
  const TensorRef c2 = g.constant(host({4}, {0.5f, 0.25f, 2, -1}));
  const TensorRef k = g.call("aten.mul.Tensor", {c1, c2});   // folded: [0.5, 0.5, 6, -4]
  const TensorRef k2 = g.call("aten.exp.default", {k});      // folded too, after k
  g.call("aten.relu.default", {x});                          // read by nobody
  g.output(g.call("aten.add.Tensor", {x, k2}));
  passes::OptimizeOptions o;
  o.context.ctx = &ctx();
  const passes::Report r = passes::optimize(g, o);
  EXPECT_EQ(r.count("fold_constants"), 2u) << r.summary();
  EXPECT_EQ(r.count("dead_code"), 1u) << r.summary();
  ASSERT_EQ(g.live_nodes(), 1u) << g.dump();
  ir::Program p(ctx(), std::move(g));
  const auto y = p.run({host({4}, {0, 1, 2, 3})});
  EXPECT_TRUE(all_close(floats(y[0]), {std::exp(0.5), 1 + std::exp(0.5), 2 + std::exp(6.0), 3 + std::exp(-4.0)}, 1e-6, 1e-5));
}

// Sizes of one structure are one plan's (graph/plan_cache.h, as a Session
// keeps them): with max_plan_sizes 2, the least recently used size goes.
TEST(IrProgram, SymbolsBindOneSizeAndSizesAreEvictedLeastRecentlyUsedFirst) {
  ir::Graph g;
  const TensorRef a = g.input("a", DType::F32, {"n", 4});
  const TensorRef b = g.input("b", DType::F32, {"n", 4});
  g.output(g.call("aten.add.Tensor", {a, b}));
  ir::ProgramOptions o;
  o.max_plan_sizes = 2;
  ir::Program p(ctx(), std::move(g), o);
  const std::string e1 = error_of([&] { p.run({HostTensor(DType::F32, {2, 4}), HostTensor(DType::F32, {3, 4})}); });
  EXPECT_NE(e1.find("'n'"), std::string::npos) << e1;
  const std::string e2 = error_of([&] { p.run({HostTensor(DType::F32, {2, 5}), HostTensor(DType::F32, {2, 5})}); });
  EXPECT_NE(e2.find("dim 1 is 4"), std::string::npos) << e2;
  const std::string e3 = error_of([&] { p.run({HostTensor(DType::I32, {2, 4}), HostTensor(DType::F32, {2, 4})}); });
  EXPECT_NE(e3.find("int32"), std::string::npos) << e3;
  for (int64_t n : {1, 2, 3, 1}) {
    const auto y = p.run({host({n, 4}, std::vector<float>(size_t(n * 4), 1.f)), host({n, 4}, std::vector<float>(size_t(n * 4), 2.f))});
    EXPECT_EQ(floats(y[0]), std::vector<float>(size_t(n * 4), 3.f));
  }
  EXPECT_EQ(p.plans(), 1);
  EXPECT_EQ(p.plan_sizes(), 2);
  EXPECT_EQ(p.builds(), 4);  // 1, 2, 3 (evicting 1), 1 again (evicting 2)
  EXPECT_EQ(p.evictions(), 2);
  EXPECT_GT(p.plan_buffer_bytes(), 0u);
}

TEST(IrGraph, ABadGraphIsAnErrorNotACrash) {
  ir::Graph g;
  EXPECT_THROW(g.input("x", DType::F32, {-2}), Error);
  const TensorRef x = g.input("x", DType::F32, {2});
  EXPECT_THROW(g.input("x", DType::F32, {2}), Error);
  EXPECT_THROW(g.call("aten.relu.default", {TensorRef{99}}), Error);
  EXPECT_THROW(ir::Program(ctx(), ir::Graph{}), Error);  // no output
  g.output(x);
  ir::Program p(ctx(), std::move(g));
  const std::string e = error_of([&] { p.run({HostTensor(DType::F32, {2})}); });
  EXPECT_NE(e.find("not computed by a node"), std::string::npos) << e;
  ir::Graph u;
  u.output(u.call("aten.no_such_op.default", {u.input("x", DType::F32, {2})}));
  ir::Program q(ctx(), std::move(u));
  const std::string e4 = error_of([&] { q.run({HostTensor(DType::F32, {2})}); });
  EXPECT_NE(e4.find("no_such_op"), std::string::npos) << e4;
}

// A slice of a whole dim (Phi-3's rotary takes the whole head: q[..., :16]
// of a 16-wide head, and q[..., 16:] the empty pass-through) is no node
// after sink_views: its readers read the input. Slices of part of a dim,
// with a step, or that are outputs stay. The values are the IR's as written.
TEST(IrPasses, SlicesOfAWholeDimAreDropped) {
  auto build = [] {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {2, 16});
    const TensorRef whole = g.call("aten.slice.Tensor", {x, int64_t(1), int64_t(0), int64_t(16), int64_t(1)});
    const TensorRef past_end = g.call("aten.slice.Tensor", {whole, int64_t(-1), int64_t(0), INT64_MAX, int64_t(1)});
    g.set_seen_shape(whole, {2, 16});
    g.set_seen_shape(past_end, {2, 16});
    const TensorRef part = g.call("aten.slice.Tensor", {past_end, int64_t(1), int64_t(0), int64_t(8), int64_t(1)});
    const TensorRef stepped = g.call("aten.slice.Tensor", {x, int64_t(1), int64_t(0), int64_t(16), int64_t(2)});
    g.output(g.call("aten.neg.default", {past_end}), "neg");
    g.output(g.call("aten.relu.default", {part}), "part");
    g.output(g.call("aten.exp.default", {stepped}), "stepped");
    return g;
  };
  ir::Graph g = build();
  optimize_with_settings(g);
  size_t slices = 0;
  for (const ir::Node& n : g.nodes()) slices += !n.dead && n.op == "aten.slice.Tensor";
  EXPECT_EQ(slices, 2u) << g.dump();  // the part and the stepped one
  ir::Program as_written(ctx(), build()), dropped(ctx(), std::move(g));
  const std::vector<HostTensor> in = {host({2, 16}, random_floats(32, -1.f, 1.f, 97))};
  const auto want = as_written.run(in);
  const auto got = dropped.run(in);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(floats(got[i]), floats(want[i])) << "output " << i;
}

// The views torch.export writes around products (ExecuTorch programs):
// linear(view(x)) -> view -> gelu, and bmm of views that merge leading
// dims with a scaled q and a transposed k. passes/sink_views moves the
// views aside, so the GELU joins the linear layer's epilogue and the bmm
// becomes one product reading k transposed with the scale in alpha; the
// results equal the IR run as written.
TEST(IrPasses, ExportViewsMoveOutOfTheProductsWay) {
  const int64_t T = 6, K = 16, N = 24, D = 8;
  const std::vector<float> w = random_floats(size_t(N * K), -0.3f, 0.3f, 92);
  const std::vector<float> b = random_floats(size_t(N), -0.1f, 0.1f, 93);
  auto build = [&] {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {1, T, K});
    const TensorRef q = g.input("q", DType::F32, {2, 3, T, D});
    const TensorRef k = g.input("k", DType::F32, {2, 3, T, D});
    auto seen = [&](TensorRef r, Shape s) {
      g.set_seen_shape(r, std::move(s));
      return r;
    };
    const TensorRef v = seen(g.call("aten.view.default", {x, IntList{T, K}}), {T, K});
    const TensorRef l = seen(g.call("aten.linear.default", {v, g.constant(host({N, K}, w)), g.constant(host({N}, b))}), {T, N});
    const TensorRef u = seen(g.call("aten.view.default", {l, IntList{T, N}}), {T, N});
    const TensorRef a = seen(g.call("aten.gelu.default", {u, std::string("none")}), {T, N});
    g.output(seen(g.call("aten.view.default", {a, IntList{1, T, N}}), {1, T, N}), "mlp");
    const TensorRef kt = seen(g.call("aten.permute.default", {k, IntList{0, 1, 3, 2}}), {2, 3, D, T});
    const TensorRef qs = seen(g.call("aten.mul.Tensor", {q, g.constant(host({}, {0.5f}))}), {2, 3, T, D});
    const TensorRef a3 = seen(g.call("aten.view.default", {qs, IntList{6, T, D}}), {6, T, D});
    const TensorRef b3 = seen(g.call("aten.view.default", {kt, IntList{6, D, T}}), {6, D, T});
    const TensorRef s = seen(g.call("aten.bmm.default", {a3, b3}), {6, T, T});
    g.output(seen(g.call("aten.view.default", {s, IntList{2, 3, T, T}}), {2, 3, T, T}), "scores");
    return g;
  };
  ir::Graph fused = build();
  const passes::Report r = optimize_with_settings(fused);
  EXPECT_GT(r.count("sink_views"), 0u) << r.summary();
  EXPECT_EQ(r.count("fuse_matmul_activation"), 1u) << r.summary();
  EXPECT_GE(r.count("fuse_matmul_add"), 1u) << r.summary();
  ir::Program as_written(ctx(), build());
  ir::Program moved(ctx(), std::move(fused));
  const std::vector<HostTensor> in = {host({1, T, K}, random_floats(size_t(T * K), -2.f, 2.f, 94)),
                                      host({2, 3, T, D}, random_floats(size_t(36 * D), -1.f, 1.f, 95)),
                                      host({2, 3, T, D}, random_floats(size_t(36 * D), -1.f, 1.f, 96))};
  const auto want = as_written.run(in);
  const auto got = moved.run(in);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].shape, want[i].shape);
    const std::vector<float> g0 = floats(got[i]), w0 = floats(want[i]);
    EXPECT_TRUE(all_close(g0, std::vector<double>(w0.begin(), w0.end()), 1e-5, 1e-5)) << "output " << i;
  }
  const std::vector<Shape> shapes = {{1, T, K}, {2, 3, T, D}, {2, 3, T, D}};
  // linear + gelu: one dispatch; scale, transpose and bmm: one product.
  EXPECT_EQ(moved.plan(shapes).dispatches().size(), 2u);
  EXPECT_GT(as_written.plan(shapes).dispatches().size(), 2u);
}


// The same op on the same arguments twice (as GroupQueryAttention's
// lowering repeats its positions and mask per layer; constants of equal
// bytes count as the same argument) is computed once; a result the model
// returns stays its own; the outputs equal the graph run as written.
TEST(IrPasses, CommonSubexpressionsAreComputedOnce) {
  auto build = [] {
    ir::Graph g;
    const TensorRef x = g.input("x", DType::F32, {4, 8});
    auto one = [&] {
      HostTensor t(DType::F32, {});
      t.as<float>()[0] = 1.5f;
      return g.constant(t);
    };
    const TensorRef a1 = g.call("aten.add.Tensor", {x, one()});
    const TensorRef a2 = g.call("aten.add.Tensor", {x, one()});  // the same sum, another constant
    const TensorRef s1 = g.call("aten.sigmoid.default", {a1});
    const TensorRef s2 = g.call("aten.sigmoid.default", {a2});  // then the same sigmoid
    const TensorRef other = g.call("aten.add.Tensor", {x, x});
    g.output(g.call("aten.mul.Tensor", {s1, other}), "first");
    g.output(g.call("aten.mul.Tensor", {s2, x}), "second");
    g.output(g.call("aten.add.Tensor", {x, x}), "returned");  // other's twin, but the model returns it
    return g;
  };
  ir::Graph g = build();
  const passes::Report r = optimize_with_settings(g);
  EXPECT_EQ(r.count("common_subexpressions"), 2u) << g.dump();  // a2 and s2
  size_t adds = 0, sigmoids = 0;
  for (const ir::Node& n : g.nodes()) {
    adds += !n.dead && n.op == "aten.add.Tensor";
    sigmoids += !n.dead && n.op == "aten.sigmoid.default";
  }
  EXPECT_EQ(sigmoids, 1u) << g.dump();
  EXPECT_EQ(adds, 3u) << g.dump();  // x + 1.5 once, x + x twice (one returned)
  ir::Program as_written(ctx(), build()), merged(ctx(), std::move(g));
  const std::vector<HostTensor> in = {host({4, 8}, random_floats(32, -1.f, 1.f, 98))};
  const auto want = as_written.run(in);
  const auto got = merged.run(in);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(floats(got[i]), floats(want[i])) << "output " << i;
}

}  // namespace
}  // namespace wgnn::test

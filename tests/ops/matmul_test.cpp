// matmul, mm, bmm, addmm, linear and wgnn.gemm against a double-precision
// reference: edge sizes of the 64 x 64 tiles, K not a multiple of 4 (scalar
// loads) and a multiple (vec4 loads), transposed operands, broadcast batch
// dims and biases, 1-D operands, more workgroups than one grid dimension,
// float16, and every validation error.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include "error_of.h"
#include "op_test_util.h"
#include "scoped_env.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

bool has_f16() { return ctx().features().shader_f16; }

// A host matrix stack: shape and row-major values.
struct HostT {
  Shape shape;
  std::vector<float> v;
};

HostT make(const Shape& shape, DType dtype, uint32_t seed, float lo = -1, float hi = 1) {
  return {shape, quantize(random_floats(size_t(numel(shape)), lo, hi, seed), dtype)};
}

// Value of `t` (right-aligned to `rank` dims) at coordinate `idx` of a
// broadcast result: dims of size 1 repeat.
double at(const HostT& t, const Shape& idx) {
  const size_t off = idx.size() - t.shape.size();
  int64_t flat = 0;
  for (size_t d = 0; d < t.shape.size(); ++d) flat = flat * t.shape[d] + (t.shape[d] == 1 ? 0 : idx[off + d]);
  return t.v[size_t(flat)];
}

// The reference: out[batch..., m, n] = alpha * sum_k A[m, k] B[k, n] + beta * C
// with numpy broadcasting of the batch dims (A, B at least 2-D here) and
// C broadcast to the whole result.
std::vector<double> reference(const HostT& A, const HostT& B, bool ta, bool tb, const HostT* C, double alpha,
                              double beta, Shape* out_shape = nullptr) {
  const size_t ra = A.shape.size(), rb = B.shape.size();
  const int64_t M = ta ? A.shape[ra - 1] : A.shape[ra - 2], K = ta ? A.shape[ra - 2] : A.shape[ra - 1];
  const int64_t N = tb ? B.shape[rb - 2] : B.shape[rb - 1];
  const size_t nb = std::max(ra, rb) - 2;
  Shape batch(nb, 1);
  for (size_t i = 0; i < nb; ++i) {
    const int64_t da = i + ra >= nb + 2 ? A.shape[i + ra - nb - 2] : 1;
    const int64_t db = i + rb >= nb + 2 ? B.shape[i + rb - nb - 2] : 1;
    batch[i] = std::max(da, db);
  }
  Shape full = batch;
  full.push_back(M);
  full.push_back(N);
  if (out_shape) *out_shape = full;
  std::vector<double> out(size_t(numel(full)));
  Shape idx(full.size(), 0);
  for (size_t o = 0; o < out.size(); ++o) {
    int64_t r = int64_t(o);
    for (size_t d = full.size(); d-- > 0;) {
      idx[d] = r % full[d];
      r /= full[d];
    }
    const int64_t m = idx[nb], n = idx[nb + 1];
    Shape ia(idx.begin(), idx.end()), ib(idx.begin(), idx.end());
    double s = 0;
    for (int64_t k = 0; k < K; ++k) {
      ia[nb] = ta ? k : m;
      ia[nb + 1] = ta ? m : k;
      ib[nb] = tb ? n : k;
      ib[nb + 1] = tb ? k : n;
      s += at(A, ia) * at(B, ib);
    }
    double y = alpha * s;
    if (C && beta != 0) y += beta * at(*C, idx);
    out[o] = y;
  }
  return out;
}

double atol_for(int64_t K) { return 2e-6 * double(K + 1); }
constexpr double kRtol = 1e-5;

HostT magnitudes(const HostT& t) { return {t.shape, wgnn::test::magnitudes(t.v)}; }

// float32 within atol_for(K) + 1e-5 |ref|; float16 within the float16
// product bound (f16_product_close), sum |a b| from the same reference on
// the magnitudes.
::testing::AssertionResult product_close(const std::vector<float>& got, const HostT& A, const HostT& B, bool ta,
                                         bool tb, const HostT* C, double alpha, double beta, DType dt, int64_t K) {
  const auto ref = reference(A, B, ta, tb, C, alpha, beta);
  if (dt != DType::F16) return all_close(got, ref, atol_for(K) * std::max(1.0, std::abs(alpha)), kRtol);
  const HostT mC = C ? magnitudes(*C) : HostT{};
  return f16_product_close(got, ref,
                           reference(magnitudes(A), magnitudes(B), ta, tb, C ? &mC : nullptr, std::abs(alpha),
                                     std::abs(beta)));
}

// aten.matmul.default on 2-D and larger operands.
void check_matmul(const Shape& as, const Shape& bs, DType dt, uint32_t seed) {
  if (dt == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  SCOPED_TRACE(shape_str(as) + " x " + shape_str(bs) + " " + dtype_name(dt));
  Graph g(ctx());
  HostT A = make(as, dt, seed), B = make(bs, dt, seed + 1);
  TensorRef ta = upload(g, as, A.v, dt), tb = upload(g, bs, B.v, dt);
  TensorRef y = ops::call(g, "aten.matmul.default", {ta, tb}).tensor();
  Shape want;
  reference(A, B, false, false, nullptr, 1, 0, &want);
  EXPECT_EQ(g.info(y).shape, want);
  EXPECT_EQ(g.info(y).dtype, dt);
  g.run();
  EXPECT_TRUE(product_close(download(g, y), A, B, false, false, nullptr, 1, 0, dt, as.back()));
}

class MatmulSizes : public testing::TestWithParam<std::tuple<std::array<int64_t, 3>, DType>> {};

TEST_P(MatmulSizes, MatchesReference) {
  const auto [mkn, dt] = GetParam();
  const auto [M, K, N] = mkn;
  check_matmul({M, K}, {K, N}, dt, uint32_t(M * 7 + K * 3 + N));
}
INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulSizes,
    testing::Combine(testing::Values(std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{7, 13, 5},
                                     std::array<int64_t, 3>{64, 64, 64}, std::array<int64_t, 3>{129, 257, 65},
                                     std::array<int64_t, 3>{65, 16, 63}, std::array<int64_t, 3>{3, 8, 4},
                                     std::array<int64_t, 3>{1, 300, 1}, std::array<int64_t, 3>{200, 3, 130},
                                     std::array<int64_t, 3>{17, 4, 1}, std::array<int64_t, 3>{1, 36, 100}),
                     testing::Values(DType::F32, DType::F16)));

}  // namespace

TEST(Matmul, Large) { check_matmul({256, 384}, {384, 320}, DType::F32, 1); }
TEST(Matmul, LargeF16) { check_matmul({192, 260}, {260, 136}, DType::F16, 2); }

TEST(Matmul, BatchBroadcast) {
  check_matmul({2, 1, 7, 9}, {3, 9, 5}, DType::F32, 3);
  check_matmul({2, 1, 12, 8}, {3, 8, 16}, DType::F32, 4);  // vec4 loads
  check_matmul({4, 5, 6}, {6, 3}, DType::F32, 5);          // shared B: one taller product
  check_matmul({5, 6}, {4, 6, 3}, DType::F32, 6);          // shared A
  check_matmul({1, 3, 70, 33}, {2, 1, 33, 66}, DType::F32, 7);
  check_matmul({2, 3, 1, 4, 5, 6}, {3, 1, 6, 7}, DType::F32, 8);
  check_matmul({2, 1, 7, 9}, {3, 9, 5}, DType::F16, 9);
}

TEST(Matmul, Float16OverflowIsInfinity) {
  if (!has_f16()) GTEST_SKIP() << "no shader-f16";
  Graph g(ctx());
  // 300 * 300 = 90000 and -90000 overflow float16 (max 65504); 200 * 300 fits.
  TensorRef a = upload(g, {3, 1}, {300.f, -300.f, 200.f}, DType::F16);
  TensorRef b = upload(g, {1, 1}, {300.f}, DType::F16);
  TensorRef y = ops::call(g, "aten.matmul.default", {a, b}).tensor();
  g.run();
  auto got = download(g, y);
  EXPECT_EQ(got[0], INFINITY);
  EXPECT_EQ(got[1], -INFINITY);
  EXPECT_EQ(got[2], 60000.f);
}

TEST(Matmul, ManyBatchesBeyondOneGridDimension) {
  // 70000 batches of one tile each: more workgroups than one dimension holds.
  check_matmul({70000, 3, 5}, {70000, 5, 2}, DType::F32, 10);
}

TEST(Matmul, OneDimensionalOperands) {
  struct Case {
    Shape a, b, out;
  };
  for (const Case& c : {Case{{5}, {5}, {}}, Case{{6}, {6, 3}, {3}}, Case{{4, 6}, {6}, {4}},
                        Case{{7}, {2, 7, 3}, {2, 3}}, Case{{2, 3, 7}, {7}, {2, 3}}, Case{{1}, {1}, {}},
                        Case{{260}, {260}, {}}}) {
    SCOPED_TRACE(shape_str(c.a) + " x " + shape_str(c.b));
    Graph g(ctx());
    HostT A = make(c.a, DType::F32, 11), B = make(c.b, DType::F32, 12);
    TensorRef y = ops::call(g, "aten.matmul.default",
                            {upload(g, c.a, A.v, DType::F32), upload(g, c.b, B.v, DType::F32)})
                      .tensor();
    EXPECT_EQ(g.info(y).shape, c.out);
    // Reference with the 1-D operands made 2-D.
    HostT A2 = A, B2 = B;
    if (c.a.size() == 1) A2.shape = {1, c.a[0]};
    if (c.b.size() == 1) B2.shape = {c.b[0], 1};
    auto ref = reference(A2, B2, false, false, nullptr, 1, 0);
    g.run();
    EXPECT_TRUE(all_close(download(g, y), ref, 1e-4, 1e-5));
  }
}

TEST(Matmul, EmptyAndZeroInner) {
  Graph g(ctx());
  // K = 0: a product of empty sums is zero.
  TensorRef a = upload(g, {3, 0}, {}, DType::F32), b = upload(g, {0, 5}, {}, DType::F32);
  TensorRef y = ops::call(g, "aten.matmul.default", {a, b}).tensor();
  EXPECT_EQ(g.info(y).shape, (Shape{3, 5}));
  // M = 0: an empty result, no dispatch.
  TensorRef e = ops::call(g, "aten.matmul.default", {upload(g, {0, 4}, {}, DType::F32),
                                                     upload(g, {4, 2}, std::vector<float>(8, 1.f), DType::F32)})
                    .tensor();
  EXPECT_EQ(g.info(e).shape, (Shape{0, 2}));
  g.mark_output(y);
  g.run();
  EXPECT_TRUE(all_close(download(g, y), std::vector<double>(15, 0.0), 0, 0));
}

TEST(Matmul, MmAndBmm) {
  Graph g(ctx());
  HostT A = make({9, 10}, DType::F32, 13), B = make({10, 11}, DType::F32, 14);
  TensorRef y = ops::call(g, "aten.mm.default", {upload(g, A.shape, A.v, DType::F32), upload(g, B.shape, B.v, DType::F32)})
                    .tensor();
  HostT C = make({3, 9, 10}, DType::F32, 15), D = make({3, 10, 4}, DType::F32, 16);
  TensorRef z =
      ops::call(g, "aten.bmm.default", {upload(g, C.shape, C.v, DType::F32), upload(g, D.shape, D.v, DType::F32)})
          .tensor();
  g.run();
  EXPECT_TRUE(all_close(download(g, y), reference(A, B, false, false, nullptr, 1, 0), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(download(g, z), reference(C, D, false, false, nullptr, 1, 0), 1e-5, 1e-5));
}

namespace {

// addmm and gemm: alpha * op(A) @ op(B) + beta * C.
void check_gemm(int64_t M, int64_t K, int64_t N, bool ta, bool tb, const std::optional<Shape>& cs, double alpha,
                double beta, DType dt, bool use_addmm, uint32_t seed) {
  if (dt == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  SCOPED_TRACE(fmt::format("{}x{}x{} ta={} tb={} C={} alpha={} beta={} {}", M, K, N, ta, tb,
                           cs ? shape_str(*cs) : "none", alpha, beta, dtype_name(dt)));
  Graph g(ctx());
  HostT A = make(ta ? Shape{K, M} : Shape{M, K}, dt, seed), B = make(tb ? Shape{N, K} : Shape{K, N}, dt, seed + 1);
  HostT C = cs ? make(*cs, dt, seed + 2) : HostT{};
  TensorRef tA = upload(g, A.shape, A.v, dt), tB = upload(g, B.shape, B.v, dt);
  Value tC = cs ? Value(upload(g, C.shape, C.v, dt)) : Value(None{});
  TensorRef y;
  if (use_addmm) {
    y = ops::call(g, "aten.addmm.default", {tC, tA, tB, beta, alpha}).tensor();
  } else {
    y = ops::call(g, "wgnn.gemm.default", {tA, tB, tC, alpha, beta, ta, tb}).tensor();
  }
  EXPECT_EQ(g.info(y).shape, (Shape{M, N}));
  g.run();
  EXPECT_TRUE(product_close(download(g, y), A, B, ta, tb, cs ? &C : nullptr, alpha, beta, dt, K));
}

}  // namespace

// Split-K (float32): few tiles and a long K cut into ranges whose
// parts a second pass adds. Uneven last ranges, K not a multiple of 4 or
// 16, batches, transposes, alpha and an activation.
std::string labels_of(Graph& g) {
  std::string all;
  for (const auto& d : g.dispatches()) all += (all.empty() ? "" : " | ") + d.label;
  return all;
}

TEST(Matmul, LongKSplitsAcrossWorkgroups) {
  {
    // DaViT's channel attention: 32 x 32 per head, K the pixels.
    Graph g(ctx());
    TensorRef a = g.add_tensor({4, 32, 4096}, DType::F32, TensorKind::Input);
    TensorRef b = g.add_tensor({4, 4096, 32}, DType::F32, TensorKind::Input);
    ops::call(g, "aten.matmul.default", {a, b});
    EXPECT_EQ(labels_of(g), "gemm 32x32x4096 batch 4 splitk=16 | gemm splitk sum 16");
  }
  {
    Graph g(ctx());  // enough tiles (1024 of 64 x 64): no split
    TensorRef a = g.add_tensor({2048, 4096}, DType::F32, TensorKind::Input);
    TensorRef b = g.add_tensor({4096, 2048}, DType::F32, TensorKind::Input);
    ops::call(g, "aten.matmul.default", {a, b});
    EXPECT_THAT(labels_of(g), testing::Not(HasSubstr("splitk")));
  }
  {
    // The Whisper encoder's second feed-forward product: 376 tiles of
    // 32 x 64, K = 2048 in two ranges of 1024; K = 512 is not cut.
    Graph g(ctx());
    TensorRef a = g.add_tensor({1500, 2048}, DType::F32, TensorKind::Input);
    TensorRef b = g.add_tensor({2048, 512}, DType::F32, TensorKind::Input);
    TensorRef bias = g.add_tensor({512}, DType::F32, TensorKind::Input);
    ops::call(g, "wgnn.matmul_add.default", {a, b, bias});
    EXPECT_EQ(labels_of(g), "gemm 1500x512x2048 bias splitk=2 | gemm splitk sum 2 bias");
    TensorRef c = g.add_tensor({1500, 512}, DType::F32, TensorKind::Input);
    TensorRef d = g.add_tensor({512, 512}, DType::F32, TensorKind::Input);
    const size_t before = g.dispatches().size();
    ops::call(g, "wgnn.matmul_add.default", {c, d, bias});
    EXPECT_EQ(g.dispatches().size() - before, 1u);
  }
  check_matmul({4, 32, 4096}, {4, 4096, 32}, DType::F32, 41);
  check_matmul({3, 2, 5, 3001}, {3001, 7}, DType::F32, 42);  // K odd: scalar loads, an uneven last range
  check_matmul({70, 1030}, {1030, 66}, DType::F32, 43);      // edge tiles
  check_matmul({32, 2048}, {2, 2048, 24}, DType::F32, 44);   // A broadcast over the batch
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) check_gemm(33, 2050, 36, ta, tb, std::nullopt, -0.75, 1.0, DType::F32, false, 45);
  }
  // A bias (the same for every batch: a row, a column, a whole matrix) is
  // added by the sum pass, after alpha, as the kernel's own epilogue does.
  for (const Shape& c : {Shape{36}, Shape{33, 1}, Shape{33, 36}}) {
    check_gemm(33, 2050, 36, false, true, c, -0.75, 0.5, DType::F32, false, 48);
  }
  {
    Graph g(ctx());
    TensorRef a = g.add_tensor({32, 4096}, DType::F32, TensorKind::Input);
    TensorRef b = g.add_tensor({4096, 32}, DType::F32, TensorKind::Input);
    TensorRef bias = g.add_tensor({32}, DType::F32, TensorKind::Input);
    ops::call(g, "wgnn.matmul_add.default", {a, b, bias});
    EXPECT_EQ(labels_of(g), "gemm 32x32x4096 bias splitk=16 | gemm splitk sum 16 bias");
  }
}

TEST(Matmul, SplitKWithAnActivationInItsEpilogue) {
  Graph g(ctx());
  HostT A = make({40, 3000}, DType::F32, 46), B = make({3000, 24}, DType::F32, 47);
  TensorRef ta = upload(g, A.shape, A.v, DType::F32), tb = upload(g, B.shape, B.v, DType::F32);
  TensorRef y = ops::call(g, "wgnn.matmul_add.default", {ta, tb, None{}, 0.5, std::string("relu")}).tensor();
  EXPECT_THAT(labels_of(g), HasSubstr("splitk sum"));
  g.run();
  std::vector<double> ref = reference(A, B, false, false, nullptr, 0.5, 0);
  for (double& v : ref) v = std::max(0.0, v);
  EXPECT_TRUE(all_close(download(g, y), ref, atol_for(3000), kRtol));
}

// Every tile ops/matmul.cpp may pick (WGNN_MATMUL_TILE fixes it): edge
// tiles, scalar and vec4 loads, transposes, a bias, alpha and beta,
// float16, split-K.
TEST(Matmul, EveryTileMatchesTheReference) {
  for (const char* tile : {"64x64", "32x64", "32x32"}) {
    SCOPED_TRACE(tile);
    test::ScopedSetting fix("WGNN_MATMUL_TILE", tile);
    check_matmul({129, 257}, {257, 131}, DType::F32, 51);
    check_matmul({2, 136, 64}, {2, 64, 260}, DType::F32, 52);
    check_matmul({70, 1030}, {1030, 66}, DType::F32, 53);  // split-K
    check_matmul({130, 200}, {200, 70}, DType::F32, 56);    // 64x64: 8 x 4 per thread (K >= 128)
    check_matmul({130, 200}, {200, 70}, DType::F16, 57);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        check_gemm(130, 68, 129, ta, tb, Shape{130, 129}, 0.5, 2.0, DType::F32, false, 54);
        check_gemm(131, 33, 70, ta, tb, Shape{70}, 1.0, 1.0, DType::F16, false, 55);
      }
    }
  }
}

// The configurations WGNN_MATMUL_CONFIG can fix (per-thread blocks of 8, K
// steps of 8 and 32, two stages, 8 x 4 invocation blocks), on the same
// products as every tile above.
TEST(Matmul, EveryConfigurationMatchesTheReference) {
  // The last two: a list, each for the products whose default tile is its own.
  for (const char* cfg : {"64x64:4x4:k32:s2:w", "128x128:8x8:k8:s2:w", "128x64:8x4:k16:s1", "64x128:4x8:k16:s2",
                          "32x64:4x4:k16:s2:w", "64x64:4x4:k16:s1:w", "64x64:8x4:k16:s1:w,32x64:4x4:k16:s2",
                          "32x64:4x8:k16:s1,64x64:4x8:k16:s1:w"}) {
    SCOPED_TRACE(cfg);
    test::ScopedSetting fix("WGNN_MATMUL_CONFIG", cfg);
    check_matmul({129, 257}, {257, 131}, DType::F32, 61);
    check_matmul({2, 136, 64}, {2, 64, 260}, DType::F32, 62);
    check_matmul({70, 1030}, {1030, 66}, DType::F32, 63);  // split-K
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        check_gemm(130, 68, 129, ta, tb, Shape{130, 129}, 0.5, 2.0, DType::F32, false, 64);
        check_gemm(131, 33, 70, ta, tb, Shape{70}, 1.0, 1.0, DType::F16, false, 65);
      }
    }
  }
}

TEST(Matmul, AMalformedConfigurationIsAnError) {
  for (const char* cfg : {"64x64:4x4:k12", "64x64:2x4", "256x256:4x4", "64x64:s3", "64", "64x64:k", "32x32:8x8:w",
                          "64x64:4x4,32x64:2x2"}) {
    SCOPED_TRACE(cfg);
    test::ScopedSetting fix("WGNN_MATMUL_CONFIG", cfg);
    Graph g(ctx());
    HostT A = make({40, 24}, DType::F32, 1), B = make({24, 16}, DType::F32, 2);  // not a gemv product
    EXPECT_THROW(ops::call(g, "aten.mm.default",
                           {upload(g, A.shape, A.v, DType::F32), upload(g, B.shape, B.v, DType::F32)}),
                 Error);
  }
}

// wgnn.matmul_add's residual, added last: in the regular kernel's
// epilogue (a single product, a batch against one weight, with a bias and
// an activation, a shape split-K would take without it), by a separate add
// on the gemv path. Against the same product without it plus aten.add, and
// the double reference.
TEST(Matmul, ResidualAddedInTheEpilogue) {
  struct Case {
    Shape a, b;
    bool bias;
    const char* act;
    bool epilogue;  // the regular kernel adds it; else a separate add
  };
  const std::vector<Case> cases = {
      {{70, 40}, {40, 50}, true, "relu", true},
      {{2, 33, 20}, {20, 18}, true, "none", true},
      {{40, 3000}, {3000, 24}, false, "none", true},  // float32: split-K, the residual in the sum pass
      {{40, 3000}, {3000, 24}, true, "relu", true},   // the same with a bias and an activation
      {{4, 64}, {64, 40}, true, "none", false},
  };
  uint32_t seed = 900;
  for (DType dt : {DType::F32, DType::F16}) {
    if (dt == DType::F16 && !has_f16()) continue;
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} x {} {} {}", shape_str(c.a), shape_str(c.b), c.act, dtype_name(dt)));
      Graph g(ctx());
      HostT A = make(c.a, dt, seed), B = make(c.b, dt, seed + 1), Bi = make({c.b.back()}, dt, seed + 2);
      Shape out = c.a;
      out.back() = c.b.back();
      HostT R = make(out, dt, seed + 3);
      seed += 4;
      TensorRef ta = upload(g, c.a, A.v, dt), tb = upload(g, c.b, B.v, dt), tr = upload(g, out, R.v, dt);
      const Value bias = c.bias ? Value(upload(g, Bi.shape, Bi.v, dt)) : Value(None{});
      const ValueList args{ta, tb, bias, 1.0, std::string(c.act), false, false, 0.0, 0.0};
      const size_t before = g.dispatches().size();
      ValueList with = args;
      with.push_back(tr);
      TensorRef y = ops::call(g, "wgnn.matmul_add.default", with).tensor();
      // Float32 over K = 3000: split-K, whose sum pass adds the residual.
      // Float16 where the context has subgroup matrices (WGNN_ALLOW_UNSAFE_APIS=1
      // on a GPU that offers them): the tensor-core path, the residual in its
      // epilogue or split-K's sum pass (SubgroupMatmul.ResidualInTheEpilogue
      // and SubgroupMatmulEmulated.SplitKForFewTiles check those).
      const bool split = dt == DType::F32 && c.a.back() > 1000;
      const bool tensor_cores = dt == DType::F16 && ctx().features().subgroup_matrix;
      if (!tensor_cores) {
        EXPECT_EQ(g.dispatches().size() - before, c.epilogue && !split ? 1u : 2u);
        EXPECT_EQ(g.dispatches()[before].label.find(" residual") != std::string::npos, c.epilogue)
            << g.dispatches()[before].label;
      }
      if (split) {
        EXPECT_THAT(g.dispatches().back().label, HasSubstr("splitk sum"));
        EXPECT_THAT(g.dispatches().back().label, HasSubstr(" residual"));
      }
      TensorRef p = ops::call(g, "wgnn.matmul_add.default", args).tensor();
      TensorRef sum = ops::call(g, "aten.add.Tensor", {p, tr}).tensor();
      EXPECT_EQ(g.info(y).shape, out);
      g.run();
      const std::vector<float> got = download(g, y), want = download(g, sum);
      // The same values as the separate add, up to the compiler's contraction
      // of the epilogue's sums (a last bit of float32; float16 results round
      // the same product) and, for the long K, split-K's order of the sums.
      // The tensor-core path rounds once, after the residual, where the
      // separate add rounds the product first: only the reference below.
      std::vector<double> w(want.begin(), want.end());
      const double tight = c.a.back() > 1000 ? atol_for(c.a.back()) : 1e-6;
      if (!tensor_cores)
        EXPECT_TRUE(dt == DType::F32 ? all_close(got, w, tight, 1e-6) : all_close(got, w, 0.0, 1e-3));
      std::vector<double> ref = reference(A, B, false, false, c.bias ? &Bi : nullptr, 1, 1);
      for (size_t i = 0; i < ref.size(); ++i) {
        if (std::string(c.act) == "relu") ref[i] = std::max(0.0, ref[i]);
        ref[i] += R.v[i];
      }
      const int64_t K = c.a.back();
      EXPECT_TRUE(dt == DType::F32 ? all_close(got, ref, atol_for(K), kRtol) : all_close(got, ref, 2e-2, 1e-2));
    }
  }
  Graph g(ctx());
  HostT A = make({8, 8}, DType::F32, 1);
  TensorRef t = upload(g, {8, 8}, A.v, DType::F32);
  EXPECT_THAT(error_of([&] {
                ops::call(g, "wgnn.matmul_add.default", {t, t, None{}, 1.0, std::string("none"), false, false, 0.0,
                                                         0.0, upload(g, {8}, std::vector<float>(8, 1.0f), DType::F32)});
              }),
              HasSubstr("argument 'residual'"));
}

TEST(Gemm, Transposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      check_gemm(7, 13, 5, ta, tb, Shape{5}, 1.0, 1.0, DType::F32, false, 20);
      check_gemm(129, 68, 72, ta, tb, Shape{129, 72}, 0.5, 2.0, DType::F32, false, 21);  // vec4 loads
      check_gemm(65, 33, 70, ta, tb, std::nullopt, -1.5, 1.0, DType::F32, false, 22);
      check_gemm(66, 20, 67, ta, tb, Shape{1}, 1.0, 1.0, DType::F16, false, 23);
    }
  }
}

TEST(Gemm, BiasBroadcasts) {
  check_gemm(6, 5, 4, false, false, Shape{}, 1.0, 0.25, DType::F32, false, 30);      // scalar
  check_gemm(6, 5, 4, false, false, Shape{1}, 1.0, 1.0, DType::F32, false, 31);      // one element
  check_gemm(6, 5, 4, false, false, Shape{4}, 1.0, 1.0, DType::F32, false, 32);      // per column
  check_gemm(6, 5, 4, false, false, Shape{6, 1}, 1.0, 1.0, DType::F32, false, 33);   // per row
  check_gemm(6, 5, 4, false, false, Shape{1, 4}, 1.0, 1.0, DType::F32, false, 34);
  check_gemm(6, 5, 4, false, false, Shape{6, 4}, 2.0, -1.0, DType::F32, false, 35);  // full
}

TEST(Gemm, BetaZeroIgnoresC) {
  Graph g(ctx());
  HostT A = make({3, 4}, DType::F32, 40), B = make({4, 2}, DType::F32, 41);
  std::vector<float> nan(6, std::numeric_limits<float>::quiet_NaN());
  TensorRef y = ops::call(g, "wgnn.gemm.default",
                          {upload(g, A.shape, A.v, DType::F32), upload(g, B.shape, B.v, DType::F32),
                           upload(g, {3, 2}, nan, DType::F32), 1.0, 0.0, false, false})
                    .tensor();
  g.run();
  EXPECT_TRUE(all_close(download(g, y), reference(A, B, false, false, nullptr, 1, 0), 1e-5, 1e-5));
}

TEST(Addmm, BetaAlpha) {
  check_gemm(7, 13, 5, false, false, Shape{5}, 1.0, 1.0, DType::F32, true, 50);
  check_gemm(70, 31, 66, false, false, Shape{70, 66}, 0.5, 3.0, DType::F32, true, 51);
  check_gemm(9, 8, 12, false, false, Shape{9, 1}, 2.0, 0.5, DType::F32, true, 52);
  check_gemm(9, 8, 12, false, false, Shape{12}, 1.0, 1.0, DType::F16, true, 53);
}

namespace {

void check_linear(const Shape& xs, int64_t N, const std::optional<Shape>& bias_shape, DType dt, uint32_t seed,
                  bool vector_weight = false) {
  if (dt == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  SCOPED_TRACE(fmt::format("{} N={} bias {} {}", shape_str(xs), N, bias_shape ? shape_str(*bias_shape) : "none",
                           dtype_name(dt)));
  const int64_t K = xs.back();
  Graph g(ctx());
  HostT X = make(xs, dt, seed);
  HostT W = make(vector_weight ? Shape{K} : Shape{N, K}, dt, seed + 1);
  HostT Bi = bias_shape ? make(*bias_shape, dt, seed + 2) : HostT{};
  TensorRef y = ops::call(g, "aten.linear.default",
                          {upload(g, xs, X.v, dt), upload(g, W.shape, W.v, dt),
                           bias_shape ? Value(upload(g, Bi.shape, Bi.v, dt)) : Value(None{})})
                    .tensor();
  Shape want(xs.begin(), xs.end() - 1);
  if (!vector_weight) want.push_back(N);
  EXPECT_EQ(g.info(y).shape, want);
  g.run();
  // Reference as [rows, K] x [N, K]^T + bias broadcast to the result.
  HostT X2{{numel(xs) / std::max<int64_t>(K, 1), K}, X.v};
  HostT W2{{vector_weight ? 1 : N, K}, W.v};
  auto prod = reference(X2, W2, false, true, nullptr, 1, 0);
  auto mag = reference(magnitudes(X2), magnitudes(W2), false, true, nullptr, 1, 0);
  if (bias_shape) {
    Shape idx(want.size());
    for (size_t o = 0; o < prod.size(); ++o) {
      int64_t r = int64_t(o);
      for (size_t d = want.size(); d-- > 0;) {
        idx[d] = r % want[d];
        r /= want[d];
      }
      prod[o] += at(Bi, idx);
      mag[o] += std::abs(at(Bi, idx));
    }
  }
  EXPECT_TRUE(dt == DType::F16 ? f16_product_close(download(g, y), prod, mag)
                               : all_close(download(g, y), prod, atol_for(K), kRtol));
}

}  // namespace

TEST(Linear, Shapes) {
  check_linear({2, 3, 16}, 8, Shape{8}, DType::F32, 60);    // shared weight: one [6, 16] product
  check_linear({5, 13}, 7, Shape{7}, DType::F32, 61);
  check_linear({5, 13}, 7, std::nullopt, DType::F32, 62);
  check_linear({13}, 7, Shape{7}, DType::F32, 63);            // 1-D input
  check_linear({3, 70, 33}, 65, Shape{65}, DType::F32, 64);
  check_linear({2, 3, 16}, 8, Shape{3, 8}, DType::F32, 65);  // bias varying along rows
  check_linear({2, 3, 16}, 8, Shape{2, 1, 8}, DType::F32, 66);
  check_linear({4, 9}, 1, Shape{1}, DType::F32, 67);
  check_linear({4, 9}, 1, std::nullopt, DType::F32, 68, true);  // 1-D weight: no N dim
  check_linear({2, 3, 16}, 8, Shape{8}, DType::F16, 69);
}

TEST(Matmul, Errors) {
  Graph g(ctx());
  TensorRef a = g.add_tensor({3, 4}, DType::F32, TensorKind::Input);
  TensorRef b = g.add_tensor({5, 2}, DType::F32, TensorKind::Input);
  TensorRef c = g.add_tensor({4, 2}, DType::F32, TensorKind::Input);
  TensorRef h = g.add_tensor({4, 2}, DType::F16, TensorKind::Input);
  TensorRef i = g.add_tensor({4, 2}, DType::I32, TensorKind::Input);
  TensorRef s = g.add_tensor({}, DType::F32, TensorKind::Input);
  TensorRef b3 = g.add_tensor({2, 4, 2}, DType::F32, TensorKind::Input);
  TensorRef a3 = g.add_tensor({3, 3, 4}, DType::F32, TensorKind::Input);
  TensorRef bias = g.add_tensor({5}, DType::F32, TensorKind::Input);
  auto expect_error = [&](const char* op, const ValueList& args, const char* needle) {
    try {
      ops::call(g, op, args);
      ADD_FAILURE() << op << ": no error for " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(op));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expect_error("aten.matmul.default", {a, b}, "cannot be multiplied (4 != 5)");
  expect_error("aten.matmul.default", {a, h}, "same dtype");
  expect_error("aten.matmul.default", {a, i}, "int32");
  expect_error("aten.matmul.default", {s, c}, "at least 1-D");
  expect_error("aten.matmul.default", {a3, b3}, "do not broadcast");
  expect_error("aten.matmul.default", {a, c, c}, "takes 2 arguments");
  expect_error("aten.mm.default", {a3, c}, "expects 2-D");
  expect_error("aten.bmm.default", {a3, b3}, "batch sizes differ");
  expect_error("aten.addmm.default", {bias, a, c}, "'self' [5] does not broadcast");
  expect_error("aten.addmm.default", {c, a, b}, "cannot be multiplied");
  expect_error("aten.linear.default", {a, b}, "do not match");
  expect_error("aten.linear.default", {a, a3}, "must be 2-D");
  expect_error("aten.linear.default", {a, g.add_tensor({2, 4}, DType::F32, TensorKind::Input), bias},
               "'bias' [5] does not broadcast");
  expect_error("wgnn.gemm.default", {a, c, None{}, 1.0, 1.0, true, false}, "inner dims differ");
  expect_error("wgnn.gemm.default", {a, c, h, 1.0, 1.0}, "'C' has dtype float16");
  expect_error("wgnn.gemm.default", {a, c, None{}, std::string("x")}, "'alpha'");
  expect_error("wgnn.gemm.default", {a3, c}, "must be 2-D");
}

namespace {

// wgnn.matmul_add with at most 8 rows (kernels/gemv.wgsl): B as [K, N] and
// as [N, K], edges of every size, a bias, alpha and the activations, in
// float32 and float16, against the double reference.
void check_gemv(int64_t M, int64_t K, int64_t N, bool tb, const char* act, DType dt, uint32_t seed) {
  if (dt == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  SCOPED_TRACE(fmt::format("M {} K {} N {} {} {} {}", M, K, N, tb ? "Bt" : "B", act, dtype_name(dt)));
  Graph g(ctx());
  HostT A = make({M, K}, dt, seed), B = make(tb ? Shape{N, K} : Shape{K, N}, dt, seed + 1);
  HostT C = make({N}, dt, seed + 2);
  const double alpha = 0.75;
  TensorRef y = ops::call(g, "wgnn.matmul_add.default",
                          {upload(g, A.shape, A.v, dt), upload(g, B.shape, B.v, dt), upload(g, C.shape, C.v, dt),
                           alpha, std::string(act), false, tb})
                    .tensor();
  ASSERT_EQ(g.info(y).shape, (Shape{M, N}));
  bool gemv = false;
  for (const auto& d : g.dispatches()) gemv = gemv || d.label.rfind("gemv", 0) == 0;
  EXPECT_TRUE(gemv) << "the product did not take the few-rows kernel";
  g.run();
  auto ref = reference(A, B, false, tb, &C, alpha, 1.0);
  auto mag = reference(magnitudes(A), magnitudes(B), false, tb, nullptr, alpha, 0.0);
  for (size_t i = 0; i < ref.size(); ++i) {
    mag[i] += std::abs(C.v[i % size_t(N)]);
    const double v = ref[i];
    if (std::string(act) == "relu") ref[i] = std::max(v, 0.0);
    if (std::string(act) == "gelu") ref[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  }
  EXPECT_TRUE(dt == DType::F16 ? f16_product_close(download(g, y), ref, mag)
                               : all_close(download(g, y), ref, atol_for(K) * 2, kRtol));
}

}  // namespace

TEST(Gemv, FewRowsMatchTheReference) {
  uint32_t seed = 300;
  for (const int64_t M : {1, 2, 5, 8})
    for (const int64_t K : {1, 3, 8, 100, 768})
      for (const int64_t N : {1, 5, 64, 130})
        for (const bool tb : {false, true}) check_gemv(M, K, N, tb, "none", DType::F32, seed++);
}

// B [K, N] takes 4, 8 or 16 columns per workgroup by N (4 up to 2047, 8
// from 2048, 16 from 4096): each width with ragged last columns; B [N, K]
// 1 to 16.
TEST(Gemv, EveryColumnWidth) {
  check_gemv(2, 100, 2050, false, "none", DType::F32, 410);
  check_gemv(3, 37, 4102, false, "relu", DType::F32, 411);
  check_gemv(1, 300, 1023, false, "none", DType::F32, 412);
  // B [N, K]: 16 columns per workgroup from N = 4096, then 8, 4, 2 and 1
  // (below 512), K read four vec4s at a time, ragged or shorter than that.
  check_gemv(3, 515, 4100, true, "relu", DType::F32, 413);
  check_gemv(1, 64, 2100, true, "none", DType::F32, 414);
  check_gemv(1, 2048, 1500, true, "none", DType::F32, 415);
  check_gemv(2, 2049, 1000, true, "none", DType::F32, 416);
  check_gemv(1, 1280, 1000, true, "none", DType::F16, 417);
}

TEST(Gemv, EpilogueAndFloat16) {
  check_gemv(1, 768, 3072, false, "gelu", DType::F32, 400);
  check_gemv(3, 64, 50, true, "relu", DType::F32, 401);
  check_gemv(1, 768, 1001, false, "none", DType::F16, 402);
  check_gemv(4, 100, 77, true, "gelu", DType::F16, 403);
  check_gemv(1, 2048, 4, false, "relu", DType::F16, 404);
}

namespace {

// wgnn.matmul_silu_mul: silu(gate) * up of one product with the gate's and
// the up product's weights side by side (B [K, 2F], bias [2F]), against the
// double reference of the two products and the multiply.
void check_silu_mul(int64_t M, int64_t K, int64_t F, bool bias, DType dt, uint32_t seed) {
  if (dt == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  SCOPED_TRACE(fmt::format("M {} K {} F {} bias {} {}", M, K, F, bias, dtype_name(dt)));
  Graph g(ctx());
  HostT A = make({1, M, K}, dt, seed), B = make({K, 2 * F}, dt, seed + 1), C = make({2 * F}, dt, seed + 2);
  ValueList args{upload(g, A.shape, A.v, dt), upload(g, B.shape, B.v, dt)};
  if (bias) args.push_back(upload(g, C.shape, C.v, dt));
  TensorRef y = ops::call(g, "wgnn.matmul_silu_mul.default", args).tensor();
  ASSERT_EQ(g.info(y).shape, (Shape{1, M, F}));
  EXPECT_EQ(g.dispatches().size(), 1u);
  g.run();
  HostT A2 = A;
  A2.shape = {M, K};
  const auto p = reference(A2, B, false, false, bias ? &C : nullptr, 1.0, bias ? 1.0 : 0.0);
  const auto mag = reference(magnitudes(A2), magnitudes(B), false, false, nullptr, 1.0, 0.0);
  std::vector<double> ref(size_t(M * F)), rmag(size_t(M * F));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < F; ++n) {
      const double gt = p[size_t(m * 2 * F + n)], up = p[size_t(m * 2 * F + F + n)];
      ref[size_t(m * F + n)] = gt / (1.0 + std::exp(-gt)) * up;
      rmag[size_t(m * F + n)] = (mag[size_t(m * 2 * F + n)] + 1) * (mag[size_t(m * 2 * F + F + n)] + 1);
    }
  EXPECT_TRUE(dt == DType::F16 ? f16_product_close(download(g, y), ref, rmag)
                               : all_close(download(g, y), ref, atol_for(K) * 4, kRtol));
}

}  // namespace

TEST(Gemv, SiluMulOfTheGateAndUpProductsSideBySide) {
  check_silu_mul(1, 128, 384, false, DType::F32, 500);
  check_silu_mul(1, 768, 2050, true, DType::F32, 501);  // 8 columns per workgroup, ragged
  check_silu_mul(3, 100, 10, true, DType::F32, 502);    // few columns, a ragged vec4
  check_silu_mul(8, 64, 33, false, DType::F32, 503);
  check_silu_mul(1, 256, 130, true, DType::F16, 504);
  // More than 8 rows: refused (the pass keeps the chain for those).
  Graph g(ctx());
  ValueList args{g.add_tensor({9, 16}, DType::F32, TensorKind::Input), g.add_tensor({16, 8}, DType::F32, TensorKind::Input)};
  EXPECT_THROW(ops::call(g, "wgnn.matmul_silu_mul.default", args), Error);
  ValueList odd{g.add_tensor({1, 16}, DType::F32, TensorKind::Input), g.add_tensor({16, 7}, DType::F32, TensorKind::Input)};
  EXPECT_THROW(ops::call(g, "wgnn.matmul_silu_mul.default", odd), Error);
}

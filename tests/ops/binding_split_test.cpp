// The split paths for tensors over maxStorageBufferBindingSize, at their
// edges, on a Context whose binding limit wgnn caps at 64 KiB (so the
// tensors stay small): a tensor exactly at the limit (one dispatch), one
// element over (split), and splits that fall inside a row. Every result is
// compared with a plain C++ reference; the dispatch counts show the split
// happened.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "op_test_util.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

constexpr uint64_t kLimit = 64 << 10;        // bytes
constexpr int64_t kFloats = kLimit / 4;      // float32 elements at the limit

gpu::Context& small_ctx() {
  static gpu::Context* c = [] {
    gpu::ContextOptions o;
    o.max_storage_buffer_binding_size = kLimit;
    o.max_buffer_size = 16 * kLimit;
    return new gpu::Context(o);
  }();
  return *c;
}

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Bit-exact equality (data movement).
::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) != 0) {
      return ::testing::AssertionFailure() << "element " << i << " of " << got.size() << ": got " << got[i]
                                           << " want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

size_t run_graph(Graph& g, TensorRef out) {
  g.mark_output(out);
  g.run();
  return g.dispatches().size();
}

}  // namespace

TEST(BindingSplit, ContextCapsTheLimit) {
  EXPECT_EQ(small_ctx().limits().max_storage_buffer_binding_size, kLimit);
}

TEST(BindingSplit, UnaryAtTheLimitAndOneOver) {
  for (const int64_t n : {kFloats, kFloats + 1, 3 * kFloats + 5}) {
    Graph g(small_ctx());
    const auto xs = random_floats(size_t(n), -2.f, 2.f, 1);
    TensorRef x = upload(g, {n}, xs, DType::F32);
    TensorRef y = ops::call(g, "aten.neg.default", {x}).tensor();
    const size_t d = run_graph(g, y);
    EXPECT_EQ(d, size_t((n * 4 + kLimit - 1) / kLimit)) << n;
    std::vector<float> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) want[i] = -xs[i];
    EXPECT_TRUE(same_bits(download(g, y), want)) << n;
  }
}

TEST(BindingSplit, BinarySameShapeSplitsInsideRows) {
  // Rows of 1000 floats: the flat spans end inside a row.
  for (const int64_t rows : {int64_t(kFloats / 1000), int64_t(kFloats / 1000) + 1, int64_t(50)}) {
    Graph g(small_ctx());
    const auto xs = random_floats(size_t(rows * 1000), -1.f, 1.f, 2), ys = random_floats(xs.size(), -1.f, 1.f, 3);
    TensorRef x = upload(g, {rows, 1000}, xs, DType::F32), y = upload(g, {rows, 1000}, ys, DType::F32);
    TensorRef z = ops::call(g, "aten.mul.Tensor", {x, y}).tensor();
    const size_t d = run_graph(g, z);
    if (rows * 1000 * 4 > int64_t(kLimit)) EXPECT_GE(d, 2u);
    std::vector<float> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) want[i] = xs[i] * ys[i];
    EXPECT_TRUE(same_bits(download(g, z), want)) << rows;
  }
  // Exactly at the limit: one dispatch.
  Graph g(small_ctx());
  const auto xs = random_floats(size_t(kFloats), -1.f, 1.f, 4);
  TensorRef x = upload(g, {kFloats}, xs, DType::F32);
  TensorRef z = ops::call(g, "aten.add.Tensor", {x, x}).tensor();
  EXPECT_EQ(run_graph(g, z), 1u);
}

TEST(BindingSplit, BinaryBroadcastsASmallOperand) {
  // [R, 37] + [37] (bound whole) and [R, 37] * [R, 1] (bound by row range):
  // rows of 37 floats, so spans are whole rows but not whole vec4 groups.
  const int64_t rows = kFloats / 37 * 2 + 3, cols = 37;
  const auto xs = random_floats(size_t(rows * cols), -1.f, 1.f, 5);
  const auto bs = random_floats(size_t(cols), -1.f, 1.f, 6), cs = random_floats(size_t(rows), -1.f, 1.f, 7);
  Graph g(small_ctx());
  TensorRef x = upload(g, {rows, cols}, xs, DType::F32);
  TensorRef b = upload(g, {cols}, bs, DType::F32), c = upload(g, {rows, 1}, cs, DType::F32);
  TensorRef s = ops::call(g, "aten.add.Tensor", {x, b}).tensor();
  TensorRef p = ops::call(g, "aten.mul.Tensor", {s, c}).tensor();
  EXPECT_GE(run_graph(g, p), 6u);
  std::vector<float> want(xs.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) want[size_t(r * cols + k)] = (xs[size_t(r * cols + k)] + bs[size_t(k)]) * cs[size_t(r)];
  }
  EXPECT_TRUE(same_bits(download(g, p), want));
}

TEST(BindingSplit, IndexSelectOnALargeTable) {
  // Tables of rows of 64 floats: exactly at the limit (256 rows), one row
  // over, and 5x over with a result over the limit too.
  const int64_t dim = 64;
  for (const int64_t vocab : {kFloats / dim, kFloats / dim + 1, 5 * kFloats / dim + 3}) {
    const int64_t n = vocab > kFloats / dim * 2 ? 500 : 40;  // 500 x 64 x 4 = 128000 bytes: over the limit
    Graph g(small_ctx());
    const auto table = random_floats(size_t(vocab * dim), -1.f, 1.f, 8);
    std::vector<int32_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = int32_t((i * 7919) % vocab);
    idx[0] = int32_t(vocab - 1);
    idx[1] = 0;
    idx[2] = -1;  // the last row
    TensorRef t = upload(g, {vocab, dim}, table, DType::F32);
    TensorRef ix = g.add_tensor({n}, DType::I32, TensorKind::Input);
    g.write(ix, idx.data(), idx.size() * 4);
    TensorRef y = ops::call(g, "aten.index_select.default", {t, int64_t(0), ix}).tensor();
    const size_t d = run_graph(g, y);
    if (vocab * dim * 4 > int64_t(kLimit)) {
      EXPECT_GE(d, n > 100 ? 12u : 2u) << vocab;  // 6 table parts x 2 result parts
    } else {
      EXPECT_EQ(d, 1u);
    }
    std::vector<float> want;
    for (int32_t i : idx) {
      const int64_t r = i < 0 ? i + vocab : i;
      want.insert(want.end(), table.begin() + r * dim, table.begin() + (r + 1) * dim);
    }
    EXPECT_TRUE(same_bits(download(g, y), want)) << vocab;
  }
}

TEST(BindingSplit, GatherElementsOnALargeTable) {
  // aten.gather along dim 0 of a [300, 64] table (76800 bytes): an index
  // per output element, rows from both table parts.
  const int64_t V = 300, D = 64, n = 50;
  Graph g(small_ctx());
  const auto table = random_floats(size_t(V * D), -1.f, 1.f, 22);
  std::vector<int32_t> idx(static_cast<size_t>(n * D));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int32_t((i * 7919 + i / 3) % size_t(V));
  idx[5] = -1;
  TensorRef t = upload(g, {V, D}, table, DType::F32);
  TensorRef ix = g.add_tensor({n, D}, DType::I32, TensorKind::Input);
  g.write(ix, idx.data(), idx.size() * 4);
  TensorRef y = ops::call(g, "aten.gather.default", {t, int64_t(0), ix}).tensor();
  EXPECT_GE(run_graph(g, y), 2u);
  std::vector<float> want(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    const int64_t r = idx[i] < 0 ? idx[i] + V : idx[i];
    want[i] = table[size_t(r * D) + i % size_t(D)];
  }
  EXPECT_TRUE(same_bits(download(g, y), want));
}

TEST(BindingSplit, Float16CopiesAndUnarySplit) {
  if (!small_ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  // float16 [300, 130]: 78000 bytes; a transpose (2-byte elements, spans
  // inside rows) and a unary op on the result.
  const int64_t R = 300, C = 130;
  const auto xs = quantize(random_floats(size_t(R * C), -1.f, 1.f, 21), DType::F16);
  Graph g(small_ctx());
  TensorRef x = upload(g, {R, C}, xs, DType::F16);
  TensorRef t = ops::call(g, "aten.permute.default", {x, IntList{1, 0}}).tensor();
  TensorRef y = ops::call(g, "aten.abs.default", {t}).tensor();
  EXPECT_GE(run_graph(g, y), 4u);
  std::vector<float> want(xs.size());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) want[size_t(c * R + r)] = std::fabs(xs[size_t(r * C + c)]);
  EXPECT_TRUE(same_bits(download(g, y), want));
}

TEST(BindingSplit, CopiesSplit) {
  // Transpose of [300, 70] (84000 bytes, both sides over), a slice with a
  // negative step, an expand into a result over the limit, and a cat along
  // the last dim (a strided destination).
  const int64_t R = 300, C = 70;
  const auto xs = random_floats(size_t(R * C), -1.f, 1.f, 9);
  {
    Graph g(small_ctx());
    TensorRef x = upload(g, {R, C}, xs, DType::F32);
    TensorRef y = ops::call(g, "aten.permute.default", {x, IntList{1, 0}}).tensor();
    // Blocks, not rows: 2 x 2 parts (a row at a time would take 140).
    const size_t d = run_graph(g, y);
    EXPECT_GE(d, 2u);
    EXPECT_LE(d, 6u);
    std::vector<float> want(xs.size());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) want[size_t(c * R + r)] = xs[size_t(r * C + c)];
    EXPECT_TRUE(same_bits(download(g, y), want));
  }
  {
    Graph g(small_ctx());
    TensorRef x = upload(g, {R * C}, xs, DType::F32);
    TensorRef y = ops::call(g, "aten.slice.Tensor", {x, int64_t(0), int64_t(-1), None{}, int64_t(-1)}).tensor();
    EXPECT_GE(run_graph(g, y), 2u);
    std::vector<float> want(xs.rbegin(), xs.rend());
    EXPECT_TRUE(same_bits(download(g, y), want));
  }
  {
    Graph g(small_ctx());
    const auto row = random_floats(size_t(C), -1.f, 1.f, 10);
    TensorRef x = upload(g, {1, C}, row, DType::F32);
    TensorRef y = ops::call(g, "aten.expand.default", {x, IntList{R, C}}).tensor();
    EXPECT_GE(run_graph(g, y), 2u);
    std::vector<float> want;
    for (int64_t r = 0; r < R; ++r) want.insert(want.end(), row.begin(), row.end());
    EXPECT_TRUE(same_bits(download(g, y), want));
  }
  {
    Graph g(small_ctx());
    const auto ys = random_floats(size_t(R * 3), -1.f, 1.f, 11);
    TensorRef x = upload(g, {R, C}, xs, DType::F32);
    TensorRef y = upload(g, {R, 3}, ys, DType::F32);
    TensorRef z = ops::call(g, "aten.cat.default", {ValueList{x, y}, int64_t(1)}).tensor();
    EXPECT_GE(run_graph(g, z), 3u);
    std::vector<float> want;
    for (int64_t r = 0; r < R; ++r) {
      want.insert(want.end(), xs.begin() + r * C, xs.begin() + (r + 1) * C);
      want.insert(want.end(), ys.begin() + r * 3, ys.begin() + (r + 1) * 3);
    }
    EXPECT_TRUE(same_bits(download(g, z), want));
  }
}

TEST(BindingSplit, CatAlongDim0IntoAResultOverTheLimit) {
  // Two inputs of 48000 bytes each into a 96000-byte result: each copy
  // writes its block of the result through a range.
  const auto xs = random_floats(12000, -1.f, 1.f, 23), ys = random_floats(12000, -1.f, 1.f, 24);
  Graph g(small_ctx());
  TensorRef x = upload(g, {100, 120}, xs, DType::F32), y = upload(g, {100, 120}, ys, DType::F32);
  TensorRef z = ops::call(g, "aten.cat.default", {ValueList{x, y}, int64_t(0)}).tensor();
  EXPECT_EQ(run_graph(g, z), 2u);
  std::vector<float> want(xs);
  want.insert(want.end(), ys.begin(), ys.end());
  EXPECT_TRUE(same_bits(download(g, z), want));
}

namespace {

// out[m, n] = sum_k x[m, k] * w(k, n) (+ bias[n]).
std::vector<double> product(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* bias,
                            int64_t M, int64_t K, int64_t N, bool w_is_nk) {
  std::vector<double> out(size_t(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? (*bias)[size_t(n)] : 0.0;
      for (int64_t k = 0; k < K; ++k) {
        s += double(x[size_t(m * K + k)]) * w[size_t(w_is_nk ? n * K + k : k * N + n)];
      }
      out[size_t(m * N + n)] = s;
    }
  }
  return out;
}

}  // namespace

TEST(BindingSplit, LinearWithAWeightOverTheLimit) {
  // An output head: weight [N, K] with N * K * 4 just over and well over
  // the limit; N not a multiple of the span (a partial last span).
  const int64_t M = 5, K = 64;
  for (const int64_t N : {int64_t(kFloats / K), int64_t(kFloats / K) + 1, int64_t(3 * kFloats / K + 7)}) {
    Graph g(small_ctx());
    const auto xs = random_floats(size_t(M * K), -1.f, 1.f, 12), ws = random_floats(size_t(N * K), -1.f, 1.f, 13);
    const auto bs = random_floats(size_t(N), -1.f, 1.f, 14);
    TensorRef x = upload(g, {M, K}, xs, DType::F32);
    TensorRef w = constant(g, {N, K}, ws, DType::F32);
    TensorRef b = constant(g, {N}, bs, DType::F32);
    TensorRef y = ops::call(g, "aten.linear.default", {x, w, b}).tensor();
    const size_t d = run_graph(g, y);
    if (N * K * 4 > int64_t(kLimit)) {
      EXPECT_GE(d, 3u) << N;  // parts and the join
    } else {
      EXPECT_EQ(d, 1u);
    }
    EXPECT_EQ(g.info(y).shape, (Shape{M, N}));
    EXPECT_TRUE(all_close(download(g, y), product(xs, ws, &bs, M, K, N, true), 1e-4, 1e-4)) << N;
  }
}

TEST(BindingSplit, MatmulSplitsKAndM) {
  // [M, K] @ [K, N] with B over the limit: spans of K summed in turn (K not
  // a multiple of the span); then A and the result over the limit with a
  // small B: spans of rows.
  {
    const int64_t M = 3, K = 1001, N = 20;  // B: 80080 bytes
    Graph g(small_ctx());
    const auto xs = random_floats(size_t(M * K), -1.f, 1.f, 15), ws = random_floats(size_t(K * N), -1.f, 1.f, 16);
    TensorRef x = upload(g, {M, K}, xs, DType::F32);
    TensorRef w = upload(g, {K, N}, ws, DType::F32);
    TensorRef y = ops::call(g, "aten.matmul.default", {x, w}).tensor();
    EXPECT_GE(run_graph(g, y), 2u);
    EXPECT_TRUE(all_close(download(g, y), product(xs, ws, nullptr, M, K, N, false), 1e-4, 1e-4));
  }
  {
    const int64_t M = 700, K = 30, N = 33;  // A: 84000 bytes, result 92400 bytes
    Graph g(small_ctx());
    const auto xs = random_floats(size_t(M * K), -1.f, 1.f, 17), ws = random_floats(size_t(K * N), -1.f, 1.f, 18);
    const auto bs = random_floats(size_t(N), -1.f, 1.f, 19);
    TensorRef x = upload(g, {M, K}, xs, DType::F32);
    TensorRef w = upload(g, {K, N}, ws, DType::F32);
    TensorRef b = upload(g, {N}, bs, DType::F32);
    TensorRef y = ops::call(g, "aten.addmm.default", {b, x, w}).tensor();
    EXPECT_GE(run_graph(g, y), 2u);
    EXPECT_TRUE(all_close(download(g, y), product(xs, ws, &bs, M, K, N, false), 1e-4, 1e-4));
  }
}

TEST(BindingSplit, BatchedMatmulSplitsTheBatch) {
  // bmm [6, 40, 80] x [6, 80, 70]: both operands and the result over the
  // limit; spans of the batch.
  const int64_t Bn = 6, M = 40, K = 80, N = 70;
  const auto xs = random_floats(size_t(Bn * M * K), -1.f, 1.f, 25), ws = random_floats(size_t(Bn * K * N), -1.f, 1.f, 26);
  Graph g(small_ctx());
  TensorRef x = upload(g, {Bn, M, K}, xs, DType::F32), w = upload(g, {Bn, K, N}, ws, DType::F32);
  TensorRef y = ops::call(g, "aten.bmm.default", {x, w}).tensor();
  EXPECT_GE(run_graph(g, y), 3u);
  std::vector<double> want;
  for (int64_t b = 0; b < Bn; ++b) {
    const std::vector<float> xb(xs.begin() + b * M * K, xs.begin() + (b + 1) * M * K);
    const std::vector<float> wb(ws.begin() + b * K * N, ws.begin() + (b + 1) * K * N);
    const auto r = product(xb, wb, nullptr, M, K, N, false);
    want.insert(want.end(), r.begin(), r.end());
  }
  EXPECT_TRUE(all_close(download(g, y), want, 1e-4, 1e-4));
}

TEST(BindingSplit, ReductionsSplit) {
  // [R, C] over the limit (C = 70: spans inside no row, but R spans are
  // not vec4 groups): sum over C (spans of kept rows), amax over R (spans
  // of reduced rows, partials joined), mean over everything.
  const int64_t R = 300, C = 70;
  const auto xs = random_floats(size_t(R * C), -1.f, 1.f, 20);
  Graph g(small_ctx());
  TensorRef x = upload(g, {R, C}, xs, DType::F32);
  TensorRef s = ops::call(g, "aten.sum.dim_IntList", {x, IntList{1}, false, None{}}).tensor();
  TensorRef m = ops::call(g, "aten.amax.default", {x, IntList{0}, false}).tensor();
  TensorRef mean = ops::call(g, "aten.mean.dim", {x, None{}, false, None{}}).tensor();
  g.mark_output(s);
  g.mark_output(m);
  g.mark_output(mean);
  g.run();
  EXPECT_GE(g.dispatches().size(), 8u);
  std::vector<double> want_s(size_t(R), 0.0), want_m(size_t(C), -1e30);
  double total = 0;
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      const double v = xs[size_t(r * C + c)];
      want_s[size_t(r)] += v;
      want_m[size_t(c)] = std::max(want_m[size_t(c)], v);
      total += v;
    }
  }
  EXPECT_TRUE(all_close(download(g, s), want_s, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(download(g, m), want_m, 0, 0));
  EXPECT_TRUE(all_close(download(g, mean), {total / double(R * C)}, 1e-6, 1e-5));
}

TEST(BindingSplit, SoftmaxSplitsRows) {
  // [300, 70] (84000 bytes): over the last dim (rows of 70) and over dim 0
  // of [3, 100, 70] (strided, spans of the leading 3).
  const int64_t R = 300, C = 70;
  const auto xs = random_floats(size_t(R * C), -4.f, 4.f, 27);
  Graph g(small_ctx());
  TensorRef x = upload(g, {R, C}, xs, DType::F32);
  TensorRef last = ops::call(g, "aten._softmax.default", {x, int64_t(1), false}).tensor();
  TensorRef x3 = g.add_view(x, {3, 100, C});
  TensorRef mid = ops::call(g, "aten._log_softmax.default", {x3, int64_t(1), false}).tensor();
  g.mark_output(last);
  g.mark_output(mid);
  g.run();
  EXPECT_GE(g.dispatches().size(), 4u);
  std::vector<double> want_last(xs.size()), want_mid(xs.size());
  for (int64_t r = 0; r < R; ++r) {
    double m = -1e30, z = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, double(xs[size_t(r * C + c)]));
    for (int64_t c = 0; c < C; ++c) z += std::exp(double(xs[size_t(r * C + c)]) - m);
    for (int64_t c = 0; c < C; ++c) want_last[size_t(r * C + c)] = std::exp(double(xs[size_t(r * C + c)]) - m) / z;
  }
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      double m = -1e30, z = 0;
      auto at = [&](int64_t i) { return double(xs[size_t((b * 100 + i) * C + c)]); };
      for (int64_t i = 0; i < 100; ++i) m = std::max(m, at(i));
      for (int64_t i = 0; i < 100; ++i) z += std::exp(at(i) - m);
      for (int64_t i = 0; i < 100; ++i) want_mid[size_t((b * 100 + i) * C + c)] = at(i) - m - std::log(z);
    }
  }
  EXPECT_TRUE(all_close(download(g, last), want_last, 1e-6, 1e-5));
  EXPECT_TRUE(all_close(download(g, mid), want_mid, 1e-5, 1e-5));
}

TEST(BindingSplit, LayerNormSplitsRows) {
  // [300, 70] (84000 bytes), with weight and bias: spans of rows.
  const int64_t R = 300, C = 70;
  const auto xs = random_floats(size_t(R * C), -2.f, 2.f, 28);
  const auto ws = random_floats(size_t(C), 0.5f, 1.5f, 29), bs = random_floats(size_t(C), -1.f, 1.f, 30);
  Graph g(small_ctx());
  TensorRef x = upload(g, {R, C}, xs, DType::F32);
  TensorRef w = upload(g, {C}, ws, DType::F32), b = upload(g, {C}, bs, DType::F32);
  const ValueList outs = ops::call(g, "aten.native_layer_norm.default", {x, IntList{C}, w, b, 1e-5}).list();
  TensorRef y = outs[0].tensor();
  EXPECT_GE(run_graph(g, y), 2u);
  std::vector<double> want(xs.size());
  for (int64_t r = 0; r < R; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += xs[size_t(r * C + c)];
    m /= double(C);
    for (int64_t c = 0; c < C; ++c) v += (xs[size_t(r * C + c)] - m) * (xs[size_t(r * C + c)] - m);
    const double rstd = 1.0 / std::sqrt(v / double(C) + 1e-5);
    for (int64_t c = 0; c < C; ++c) {
      want[size_t(r * C + c)] = (xs[size_t(r * C + c)] - m) * rstd * ws[size_t(c)] + bs[size_t(c)];
    }
  }
  EXPECT_TRUE(all_close(download(g, y), want, 1e-5, 1e-5));
}

TEST(BindingSplit, WhatCannotRunSaysWhy) {
  // argmax binds its input whole: the error names the op, the tensor,
  // its size, the limit and the ops that split.
  Graph g(small_ctx());
  TensorRef x = g.add_tensor({kFloats + 4}, DType::F32, TensorKind::Input, "x");
  try {
    ops::call(g, "aten.argmax.default", {x, int64_t(0), false});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("aten.argmax.default"));
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("is {} bytes", (kFloats + 4) * 4)));
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("maxStorageBufferBindingSize of {} bytes", kLimit)));
    EXPECT_THAT(e.what(), HasSubstr("ops that split"));
    EXPECT_THAT(e.what(), HasSubstr("an adapter with a larger maxStorageBufferBindingSize"));
  }
  // Under WebGPU's default limits the error names the setting that lifts them.
  gpu::ContextOptions o;
  o.limits = "default";
  gpu::Context dc(o);
  Graph gd(dc);
  TensorRef big = gd.add_tensor({int64_t(dc.limits().max_storage_buffer_binding_size / 4 + 4)}, DType::F32,
                                TensorKind::Input, "big");
  try {
    ops::call(gd, "aten.argmax.default", {big, int64_t(0), false});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("WGNN_LIMITS=adapter"));
  }
  // An input over maxBufferSize: the op splits its bindings, but the
  // tensor cannot have a buffer; prepare() says so before allocating.
  {
    Graph gb(small_ctx());
    TensorRef huge = gb.add_tensor({16 * kFloats + 4}, DType::F32, TensorKind::Input, "huge");
    TensorRef out = ops::call(gb, "aten.neg.default", {huge}).tensor();
    gb.mark_output(out);
    try {
      gb.prepare();
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("aten.neg.default: tensor '"));  // its result or 'huge', both too large
      EXPECT_THAT(e.what(), HasSubstr(fmt::format("float32 [{}] is {} bytes", 16 * kFloats + 4, (16 * kFloats + 4) * 4)));
      EXPECT_THAT(e.what(), HasSubstr(fmt::format("maxBufferSize of {} bytes; a tensor is one buffer", 16 * kLimit)));
    }
    EXPECT_FALSE(gb.info(huge).buffer.valid());
  }
  // A result over maxBufferSize cannot exist at all.
  TensorRef r = g.add_tensor({1, 64}, DType::F32, TensorKind::Input, "row");
  try {
    ops::call(g, "aten.expand.default", {r, IntList{int64_t(16 * kFloats / 64 + 1), 64}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("aten.expand.default"));
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("maxBufferSize of {} bytes", 16 * kLimit)));
  }
}

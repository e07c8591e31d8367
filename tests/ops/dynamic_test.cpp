// The ops whose result size depends on the data (ops/dynamic.cpp) and
// wgnn.dft (ops/spectral.cpp) against plain C++ references: NonZero's
// count and coordinates over several blocks (floats with -0.0 and NaN,
// integers), Unique flattened and along an axis, sorted and in order of
// first occurrence, NonMaxSuppression in both box formats with and without
// a score threshold, and the DFT forward, inverse, one-sided, from a
// one-sided spectrum and framed with a window (STFT).
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <array>
#include <map>

#include "error_of.h"
#include "op_test_util.h"
#include "ops/registry.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

int32_t read_count(Graph& g, TensorRef t) { return g.read<int32_t>(t)[0]; }

TEST(NonZero, CountAndCoordinatesMatchTheReference) {
  for (const Shape shape : {Shape{7}, Shape{3, 5, 70}, Shape{2, 600}}) {
    std::vector<float> x = random_floats(size_t(numel(shape)), -1, 1, uint32_t(numel(shape)));
    for (size_t i = 0; i < x.size(); ++i) {
      if (i % 3 == 0) x[i] = 0.f;
      if (i % 7 == 1) x[i] = -0.f;
    }
    x[x.size() / 2] = std::nanf("");
    std::vector<int64_t> ref_at;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] != 0.f || std::isnan(x[i])) ref_at.push_back(int64_t(i));
    const int64_t k = int64_t(ref_at.size());
    Graph g(ctx());
    TensorRef t = upload(g, shape, x, DType::F32);
    TensorRef n = ops::call(g, "wgnn.nonzero_count.default", {t}).tensor();
    TensorRef y = ops::call(g, "wgnn.nonzero.default", {t, k}).tensor();
    g.mark_output(n);
    g.mark_output(y);
    g.run();
    EXPECT_EQ(read_count(g, n), k) << shape_str(shape);
    ASSERT_EQ(g.info(y).shape, (Shape{int64_t(shape.size()), k}));
    const std::vector<int64_t> got = g.read<int64_t>(y);
    for (int64_t j = 0; j < k; ++j) {
      int64_t rest = ref_at[size_t(j)];
      for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
        ASSERT_EQ(got[size_t(d * k + j)], rest % shape[size_t(d)]) << shape_str(shape) << " nonzero " << j;
        rest /= shape[size_t(d)];
      }
    }
  }
}

TEST(NonZero, IntegersAndRefusals) {
  Graph g(ctx());
  const std::vector<int32_t> v{0, 5, 0, -3, 0, 0, 1};
  TensorRef t = g.add_constant({7}, DType::I32, v.data());
  TensorRef n = ops::call(g, "wgnn.nonzero_count.default", {t}).tensor();
  TensorRef y = ops::call(g, "wgnn.nonzero.default", {t, int64_t(3)}).tensor();
  g.mark_output(n);
  g.mark_output(y);
  g.run();
  EXPECT_EQ(read_count(g, n), 3);
  EXPECT_EQ(g.read<int64_t>(y), (std::vector<int64_t>{1, 3, 6}));
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.nonzero.default", {t, int64_t(8)}); }), HasSubstr("found"));
}

struct UniqueRef {
  std::vector<int32_t> y;
  std::vector<int64_t> idx, inv, cnt;
};

// x [outer, rows, inner] of int32.
UniqueRef unique_ref(const std::vector<int32_t>& x, int64_t outer, int64_t rows, int64_t inner, bool sorted) {
  auto slice = [&](int64_t r) {
    std::vector<int32_t> s;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t q = 0; q < inner; ++q) s.push_back(x[size_t((o * rows + r) * inner + q)]);
    return s;
  };
  std::vector<std::vector<int32_t>> uniq;
  std::vector<int64_t> first;
  for (int64_t r = 0; r < rows; ++r) {
    if (std::find(uniq.begin(), uniq.end(), slice(r)) == uniq.end()) uniq.push_back(slice(r)), first.push_back(r);
  }
  std::vector<size_t> order(uniq.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (sorted) std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return uniq[a] < uniq[b]; });
  UniqueRef u;
  const int64_t k = int64_t(uniq.size());
  u.y.resize(size_t(outer * k * inner));
  for (int64_t p = 0; p < k; ++p) {
    const auto& s = uniq[order[size_t(p)]];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t q = 0; q < inner; ++q) u.y[size_t((o * k + p) * inner + q)] = s[size_t(o * inner + q)];
    u.idx.push_back(first[order[size_t(p)]]);
    u.cnt.push_back(0);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const size_t which = size_t(std::find(uniq.begin(), uniq.end(), slice(r)) - uniq.begin());
    const int64_t p = int64_t(std::find(order.begin(), order.end(), which) - order.begin());
    u.inv.push_back(p);
    ++u.cnt[size_t(p)];
  }
  return u;
}

TEST(Unique, FlattenedAndAlongAnAxisSortedAndNot) {
  struct Case {
    int64_t outer, rows, inner;
  };
  for (const Case cs : {Case{1, 300, 1}, Case{2, 40, 3}, Case{1, 17, 2}}) {
    for (const bool sorted : {true, false}) {
      std::vector<int32_t> x(size_t(cs.outer * cs.rows * cs.inner));
      std::mt19937 rng(uint32_t(cs.rows));
      for (auto& v : x) v = int32_t(rng() % 3) - 1;
      const UniqueRef ref = unique_ref(x, cs.outer, cs.rows, cs.inner, sorted);
      const int64_t k = int64_t(ref.idx.size());
      Graph g(ctx());
      TensorRef t = g.add_constant({cs.outer, cs.rows, cs.inner}, DType::I32, x.data());
      TensorRef first = ops::call(g, "wgnn.unique_first.default", {t}).tensor();
      TensorRef n = ops::call(g, "wgnn.nonzero_count.default", {first}).tensor();
      const ValueList r = ops::call(g, "wgnn.unique.default", {t, first, k, sorted}).list();
      g.mark_output(n);
      for (const Value& v : r) g.mark_output(v.tensor());
      g.run();
      const std::string what = fmt::format("[{}, {}, {}] sorted {}", cs.outer, cs.rows, cs.inner, sorted);
      EXPECT_EQ(read_count(g, n), k) << what;
      EXPECT_EQ(g.read<int32_t>(r[0].tensor()), ref.y) << what;
      EXPECT_EQ(g.read<int64_t>(r[1].tensor()), ref.idx) << what;
      EXPECT_EQ(g.read<int64_t>(r[2].tensor()), ref.inv) << what;
      EXPECT_EQ(g.read<int64_t>(r[3].tensor()), ref.cnt) << what;
    }
  }
}

TEST(Unique, FloatsSorted) {
  const std::vector<float> x{2.5f, -1.f, 2.5f, 0.f, -0.f, 7.f, -1.f};
  Graph g(ctx());
  TensorRef t = upload(g, {1, 7, 1}, x, DType::F32);
  TensorRef first = ops::call(g, "wgnn.unique_first.default", {t}).tensor();
  const ValueList r = ops::call(g, "wgnn.unique.default", {t, first, int64_t(4), true}).list();
  for (const Value& v : r) g.mark_output(v.tensor());
  g.run();
  EXPECT_EQ(download(g, r[0].tensor()), (std::vector<float>{-1.f, 0.f, 2.5f, 7.f}));
  EXPECT_EQ(g.read<int64_t>(r[1].tensor()), (std::vector<int64_t>{1, 3, 0, 5}));
  EXPECT_EQ(g.read<int64_t>(r[2].tensor()), (std::vector<int64_t>{2, 0, 2, 1, 1, 3, 0}));
  EXPECT_EQ(g.read<int64_t>(r[3].tensor()), (std::vector<int64_t>{2, 2, 2, 1}));
}

// NonMaxSuppression's definition, sorting the candidates.
std::vector<int64_t> nms_ref(const std::vector<float>& boxes, const std::vector<float>& scores, int64_t B, int64_t C,
                             int64_t N, int64_t max_out, float iou, bool has_score, float score_thr, bool center) {
  auto extent = [&](int64_t b, int64_t i) {
    const float* v = &boxes[size_t((b * N + i) * 4)];
    if (center) return std::array<float, 4>{v[0] - v[2] / 2, v[0] + v[2] / 2, v[1] - v[3] / 2, v[1] + v[3] / 2};
    return std::array<float, 4>{std::min(v[1], v[3]), std::max(v[1], v[3]), std::min(v[0], v[2]),
                                std::max(v[0], v[2])};
  };
  auto over = [&](int64_t b, int64_t i, int64_t j) {
    const auto p = extent(b, i), q = extent(b, j);
    const float w = std::min(p[1], q[1]) - std::max(p[0], q[0]), h = std::min(p[3], q[3]) - std::max(p[2], q[2]);
    if (w <= 0 || h <= 0) return false;
    const float inter = w * h, a1 = (p[1] - p[0]) * (p[3] - p[2]), a2 = (q[1] - q[0]) * (q[3] - q[2]);
    return inter / (a1 + a2 - inter) > iou;
  };
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      std::vector<int64_t> cand;
      for (int64_t j = 0; j < N; ++j)
        if (!has_score || scores[size_t((b * C + c) * N + j)] > score_thr) cand.push_back(j);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t p, int64_t q) {
        return scores[size_t((b * C + c) * N + p)] > scores[size_t((b * C + c) * N + q)];
      });
      std::vector<int64_t> kept;
      for (int64_t j : cand) {
        if (int64_t(kept.size()) == max_out) break;
        if (std::none_of(kept.begin(), kept.end(), [&](int64_t t) { return over(b, j, t); })) {
          kept.push_back(j);
          rows.insert(rows.end(), {b, c, j});
        }
      }
    }
  return rows;
}

TEST(NonMaxSuppression, MatchesTheReference) {
  const int64_t B = 2, C = 3;
  for (const int64_t N : {int64_t(60), int64_t(300)}) {  // under and over the workgroup's 64 invocations
  for (const bool center : {false, true}) {
    for (const bool has_score : {false, true}) {
      std::vector<float> boxes = random_floats(size_t(B * N * 4), 0, 10, uint32_t(5 + center + N));
      std::vector<float> scores = random_floats(size_t(B * C * N), 0, 1, 9 + has_score);
      scores[3] = scores[4];  // a tie: the lower index first
      const int64_t max_out = 7;
      const float iou = 0.3f, score_thr = 0.4f;
      const std::vector<int64_t> ref = nms_ref(boxes, scores, B, C, N, max_out, iou, has_score, score_thr, center);
      Graph g(ctx());
      TensorRef tb = upload(g, {B, N, 4}, boxes, DType::F32);
      TensorRef ts = upload(g, {B, C, N}, scores, DType::F32);
      TensorRef thr = constant(g, {2}, {iou, score_thr}, DType::F32);
      const ValueList s =
          ops::call(g, "wgnn.nms_select.default", {tb, ts, thr, max_out, has_score, int64_t(center)}).list();
      TensorRef total = ops::call(g, "wgnn.sum_count.default", {s[1]}).tensor();
      const int64_t k = int64_t(ref.size() / 3);
      TensorRef y = ops::call(g, "wgnn.nms.default", {s[0], s[1], k, C}).tensor();
      g.mark_output(total);
      g.mark_output(y);
      g.run();
      EXPECT_EQ(read_count(g, total), k) << "center " << center << " score " << has_score;
      EXPECT_EQ(g.read<int64_t>(y), ref) << "center " << center << " score " << has_score;
    }
  }
  }
}

// x [outer, len, inner, comps]; the kernel's definition in double.
std::vector<double> dft_ref(const std::vector<float>& x, int64_t outer, int64_t len, int64_t inner, int64_t comps,
                            const std::vector<float>& w, int64_t n, int64_t bins, int64_t frames, int64_t step,
                            bool inverse, bool herm) {
  std::vector<double> out;
  const double sg = inverse ? 1 : -1;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t k = 0; k < bins; ++k)
        for (int64_t q = 0; q < inner; ++q) {
          std::complex<double> acc = 0;
          auto at = [&](int64_t pos) -> std::complex<double> {
            if (pos >= len) return 0;
            const size_t i = size_t(((o * len + pos) * inner + q) * comps);
            return {x[i], comps == 2 ? x[i + 1] : 0.0};
          };
          for (int64_t j = 0; j < n; ++j) {
            std::complex<double> v = herm ? (2 * j <= n ? at(j) : std::conj(at(n - j))) : at(f * step + j);
            if (!w.empty()) v *= w[size_t(j)];
            acc += v * std::polar(1.0, sg * 2 * M_PI * double((j * k) % n) / double(n));
          }
          if (inverse) acc /= double(n);
          out.push_back(acc.real());
          if (!herm) out.push_back(acc.imag());
        }
  return out;
}

TEST(Dft, ForwardInverseOneSidedHermitianAndFramed) {
  struct Case {
    int64_t outer, len, inner, comps, n, bins, frames, step;
    bool inverse, herm, window;
  };
  for (const Case c : {Case{2, 10, 3, 1, 10, 10, 1, 0, false, false, false},   // real, full
                       Case{1, 16, 1, 2, 16, 9, 1, 0, false, false, false},    // complex, one-sided bins
                       Case{3, 8, 2, 2, 8, 8, 1, 0, true, false, false},       // inverse
                       Case{1, 12, 1, 1, 20, 20, 1, 0, false, false, false},   // zero-padded
                       Case{2, 5, 1, 2, 8, 8, 1, 0, true, true, false},        // from a one-sided spectrum
                       Case{2, 50, 1, 1, 16, 9, 5, 8, false, false, true}}) {  // STFT frames with a window
    const std::vector<float> x = random_floats(size_t(c.outer * c.len * c.inner * c.comps), -1, 1, uint32_t(c.len));
    const std::vector<float> w = c.window ? random_floats(size_t(c.n), 0, 1, 3) : std::vector<float>{};
    Graph g(ctx());
    TensorRef t = upload(g, {c.outer, c.len, c.inner, c.comps}, x, DType::F32);
    Value wv = c.window ? Value(constant(g, {c.n}, w, DType::F32)) : Value(None{});
    TensorRef y = ops::call(g, "wgnn.dft.default", {t, wv, c.n, c.bins, c.frames, c.step, c.inverse, c.herm}).tensor();
    g.mark_output(y);
    g.run();
    EXPECT_EQ(g.info(y).shape, (Shape{c.outer, c.frames, c.bins, c.inner, c.herm ? 1 : 2}));
    EXPECT_TRUE(all_close(download(g, y),
                          dft_ref(x, c.outer, c.len, c.inner, c.comps, w, c.n, c.bins, c.frames, c.step, c.inverse,
                                  c.herm),
                          1e-5, 1e-4))
        << "len " << c.len << " n " << c.n;
  }
}

}  // namespace

namespace {

TEST(Unique, TooManySlicesForTheQuadraticKernelIsRefused) {
  Graph g(ctx());
  TensorRef t = g.add_tensor({1, 300000, 1}, DType::I32, TensorKind::Input);
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.unique_first.default", {t}); }), HasSubstr("every pair of slices"));
}

}  // namespace

// aten.topk, wgnn.gather_nd, wgnn.scatter_nd, aten.scatter.src,
// aten.scatter_reduce.two and wgnn.cumsum against plain C++ references, for
// float32, float16, int32 and int64 (stored as int32). Selections and
// moves must match exactly; sums within float32 rounding.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "error_of.h"
#include "op_test_util.h"
#include "typed_values.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

class IndexOps : public testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (GetParam() == DType::F16 && !ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  }
};

INSTANTIATE_TEST_SUITE_P(Dtypes, IndexOps, testing::Values(DType::F32, DType::F16, DType::I32, DType::I64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// TopK's reference: per row along dim, indices ordered by value (largest
// or smallest first), equal values by the lower index.
void topk_ref(const Shape& s, const std::vector<double>& x, int64_t dim, int64_t k, bool largest,
              std::vector<double>& values, std::vector<double>& indices) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= s[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t n = s[size_t(dim)];
  values.assign(size_t(outer * k * inner), 0);
  indices.assign(values.size(), 0);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> ord{};
      ord.resize(size_t(n));
      std::iota(ord.begin(), ord.end(), 0);
      auto at = [&](int64_t j) { return x[size_t((o * n + j) * inner + i)]; };
      std::stable_sort(ord.begin(), ord.end(), [&](int64_t p, int64_t q) {
        return largest ? at(p) > at(q) : at(p) < at(q);
      });
      for (int64_t j = 0; j < k; ++j) {
        values[size_t((o * k + j) * inner + i)] = at(ord[size_t(j)]);
        indices[size_t((o * k + j) * inner + i)] = double(ord[size_t(j)]);
      }
    }
  }
}

TEST_P(IndexOps, TopKMatchesAStableSort) {
  const DType dt = GetParam();
  struct Case {
    Shape shape;
    int64_t dim, k;
    bool largest;
    double lo, hi;  // value range (narrow: many ties)
  };
  const std::vector<Case> cases = {
      {{3, 50000}, -1, 5, true, -1000, 1000},  // a vocabulary-long row
      {{2, 20000}, 1, 40, false, -3, 3},       // ties everywhere
      {{4, 7, 5}, 1, 3, false, -100, 100},     // a middle axis
      {{4, 7, 5}, 0, 4, true, -2, 2},          // the outer axis, k = n
      {{6, 300}, 1, 300, true, -50, 50},       // a full sort
      {{9}, 0, 1, true, -5, 5},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} dim {} k {} largest {}", shape_str(c.shape), c.dim, c.k, c.largest));
    const std::vector<double> x = random_values(size_t(numel(c.shape)), dt, seed++, c.lo, c.hi);
    Graph g(ctx());
    TensorRef t = put(g, c.shape, dt, x);
    Value r = ops::call(g, "aten.topk.default", {t, c.k, c.dim, c.largest, true});
    TensorRef v = r.list()[0].tensor(), i = r.list()[1].tensor();
    EXPECT_EQ(g.info(i).dtype, DType::I64);
    g.run();
    std::vector<double> rv, ri;
    const int64_t dim = c.dim < 0 ? c.dim + int64_t(c.shape.size()) : c.dim;
    topk_ref(c.shape, x, dim, c.k, c.largest, rv, ri);
    EXPECT_EQ(get(g, v), rv);
    EXPECT_EQ(get(g, i), ri);
  }
}

TEST(TopK, FloatSpecialsAndErrors) {
  Graph g(ctx());
  // -0 and +0 tie (the lower index first); -inf and +inf order as values.
  TensorRef t = put(g, {6}, DType::F32, {0.0, -INFINITY, -0.0, 2.5, INFINITY, -1.0});
  Value r = ops::call(g, "aten.topk.default", {t, int64_t(6), int64_t(0), true, true});
  g.run();
  EXPECT_EQ(get(g, r.list()[1].tensor()), (std::vector<double>{4, 3, 0, 2, 5, 1}));
  EXPECT_THAT(error_of([&] { ops::call(g, "aten.topk.default", {t, int64_t(7), int64_t(0), true, true}); }),
              HasSubstr("argument 'k' is 7; accepted: 0 to 6"));
  TensorRef b = put(g, {3}, DType::Bool, {1, 0, 1});
  EXPECT_THAT(error_of([&] { ops::call(g, "aten.topk.default", {b, int64_t(1), int64_t(0), true, true}); }),
              HasSubstr("dtype bool"));
}

TEST_P(IndexOps, GatherNdWithBatchDims) {
  const DType dt = GetParam();
  // data [2, 3, 4, 5]; batch_dims 0 (tuples of 2 over dims 0, 1) and 1
  // (tuples of 2 over dims 1, 2 of each batch element).
  const Shape ds{2, 3, 4, 5};
  const std::vector<double> x = random_values(size_t(numel(ds)), dt, 7);
  for (int64_t b : {0, 1}) {
    SCOPED_TRACE(b);
    Graph g(ctx());
    TensorRef t = put(g, ds, dt, x);
    std::vector<double> idx;
    Shape is;
    if (b == 0) {
      is = {3, 2};
      idx = {1, 2, 0, -1, -2, 0};
    } else {
      is = {2, 3, 2};
      idx = {0, 0, 2, 3, 1, -4, 2, 1, 0, 0, -1, -1};
    }
    TensorRef it = put(g, is, DType::I64, idx);
    TensorRef y = ops::call(g, "wgnn.gather_nd.default", {t, it, b}).tensor();
    g.run();
    std::vector<double> ref;
    const int64_t tuples = numel(is) / 2;
    for (int64_t m = 0; m < tuples; ++m) {
      int64_t i0 = int64_t(idx[size_t(2 * m)]), i1 = int64_t(idx[size_t(2 * m + 1)]);
      if (b == 0) {
        i0 = (i0 + 2) % 2, i1 = (i1 + 3) % 3;
        for (int64_t s = 0; s < 20; ++s) ref.push_back(x[size_t((i0 * 3 + i1) * 20 + s)]);
      } else {
        const int64_t bb = m / 3;
        i0 = (i0 + 3) % 3, i1 = (i1 + 4) % 4;
        for (int64_t s = 0; s < 5; ++s) ref.push_back(x[size_t(((bb * 3 + i0) * 4 + i1) * 5 + s)]);
      }
    }
    EXPECT_EQ(get(g, y), ref);
    EXPECT_EQ(g.info(y).shape, b == 0 ? (Shape{3, 4, 5}) : (Shape{2, 3, 5}));
  }
}

TEST(GatherNd, IndexOutOfRangeIsARunTimeErrorWhenChecked) {
  Graph g(ctx());
  TensorRef t = put(g, {2, 3}, DType::F32, {1, 2, 3, 4, 5, 6});
  TensorRef it = put(g, {2, 2}, DType::I64, {0, 1, 1, 3});
  ops::call(g, "wgnn.gather_nd.default", {t, it, int64_t(0)});
  EXPECT_EQ(g.check_count(), 1u);
  EXPECT_THAT(error_of([&] { g.run(); }), HasSubstr("wgnn.gather_nd.default: index 3 is out of range"));
  TensorRef c = put(g, {1, 2}, DType::I64, {2, 0}, TensorKind::Constant);
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.gather_nd.default", {t, c, int64_t(0)}); }),
              HasSubstr("holds 2 at flat position 0; accepted: indices in [-2, 2) for dim 0"));
}

double combine(const std::string& r, double a, double b) {
  if (r == "add" || r == "sum") return a + b;
  if (r == "mul" || r == "prod") return a * b;
  if (r == "max" || r == "amax") return std::max(a, b);
  if (r == "min" || r == "amin") return std::min(a, b);
  return b;
}

// Float results within float32 (float16) rounding of the reference; integers exactly.
void expect_values(DType dt, const std::vector<double>& got, const std::vector<double>& ref) {
  if (dt == DType::I32 || dt == DType::I64) {
    EXPECT_EQ(got, ref);
    return;
  }
  std::vector<float> g(got.begin(), got.end());
  EXPECT_TRUE(all_close(g, ref, 1e-5, dt == DType::F16 ? 4e-3 : 1e-5));
}

TEST_P(IndexOps, ScatterNdEveryReduction) {
  const DType dt = GetParam();
  // data [4, 3, 2]; index [5, 1] (rows, duplicates 1 and -3 == 1) -> slices [3, 2].
  const Shape ds{4, 3, 2};
  const std::vector<double> x = random_values(24, dt, 3, -4, 4);
  const std::vector<double> idx = {1, 3, -3, 0, 3};
  const std::vector<double> u = random_values(30, dt, 4, -4, 4);
  for (const std::string r : {"none", "add", "mul", "max", "min"}) {
    SCOPED_TRACE(r);
    Graph g(ctx());
    TensorRef t = put(g, ds, dt, x);
    TensorRef it = put(g, {5, 1}, DType::I64, idx);
    TensorRef ut = put(g, {5, 3, 2}, dt, u);
    TensorRef y = ops::call(g, "wgnn.scatter_nd.default", {t, it, ut, r}).tensor();
    g.run();
    std::vector<double> ref = x;
    for (int64_t m = 0; m < 5; ++m) {
      const int64_t row = (int64_t(idx[size_t(m)]) + 4) % 4;
      for (int64_t s = 0; s < 6; ++s) {
        double& e = ref[size_t(row * 6 + s)];
        e = combine(r, e, u[size_t(m * 6 + s)]);
      }
    }
    const std::vector<double> got = get(g, y);
    if (r == "none") {
      // Rows 1 and 3 have two updates each: either may win. Row 0 has one, row 2 none.
      for (int64_t s = 0; s < 6; ++s) {
        EXPECT_EQ(got[size_t(0 * 6 + s)], u[size_t(3 * 6 + s)]);
        EXPECT_EQ(got[size_t(2 * 6 + s)], x[size_t(2 * 6 + s)]);
        EXPECT_THAT(got[size_t(1 * 6 + s)], testing::AnyOf(u[size_t(0 * 6 + s)], u[size_t(2 * 6 + s)]));
        EXPECT_THAT(got[size_t(3 * 6 + s)], testing::AnyOf(u[size_t(1 * 6 + s)], u[size_t(4 * 6 + s)]));
      }
    } else {
      expect_values(dt, got, ref);
    }
  }
}

TEST_P(IndexOps, ScatterElementsAlongAnAxis) {
  const DType dt = GetParam();
  // data [3, 5], index [3, 4] along dim 1 (negative ones among them, duplicates within rows).
  const std::vector<double> x = random_values(15, dt, 5, -4, 4);
  const std::vector<double> idx = {0, 4, -1, 2, 1, 1, -5, 3, 2, 0, 2, -3};
  const std::vector<double> u = random_values(12, dt, 6, -4, 4);
  for (const std::string r : {"sum", "prod", "amax", "amin"}) {
    SCOPED_TRACE(r);
    Graph g(ctx());
    TensorRef t = put(g, {3, 5}, dt, x);
    TensorRef it = put(g, {3, 4}, DType::I64, idx);
    TensorRef ut = put(g, {3, 4}, dt, u);
    TensorRef y = ops::call(g, "aten.scatter_reduce.two", {t, int64_t(1), it, ut, r, true}).tensor();
    g.run();
    std::vector<double> ref = x;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t col = (int64_t(idx[size_t(i * 4 + j)]) + 5) % 5;
        double& e = ref[size_t(i * 5 + col)];
        e = combine(r, e, u[size_t(i * 4 + j)]);
      }
    expect_values(dt, get(g, y), ref);
  }
  // scatter.src along dim 0, index [2, 5] without duplicates per column.
  Graph g(ctx());
  TensorRef t = put(g, {3, 5}, dt, x);
  const std::vector<double> i0 = {2, 0, -1, 1, 0, 0, 1, 1, -3, 2};
  TensorRef it = put(g, {2, 5}, DType::I32, i0);
  TensorRef ut = put(g, {2, 5}, dt, std::vector<double>(u.begin(), u.begin() + 10));
  TensorRef y = ops::call(g, "aten.scatter.src", {t, int64_t(0), it, ut}).tensor();
  g.run();
  std::vector<double> ref = x;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j) ref[size_t(((int64_t(i0[size_t(i * 5 + j)]) + 3) % 3) * 5 + j)] = u[size_t(i * 5 + j)];
  EXPECT_EQ(get(g, y), ref);
}

TEST(Scatter, IndexOutOfRangeIsARunTimeErrorWhenCheckedElseDropped) {
  for (bool checked : {true, false}) {
    Graph g(ctx());
    g.set_checked(checked);
    TensorRef t = put(g, {4}, DType::F32, {1, 2, 3, 4});
    TensorRef it = put(g, {2}, DType::I64, {1, 4});
    TensorRef ut = put(g, {2}, DType::F32, {10, 20});
    TensorRef y = ops::call(g, "aten.scatter.src", {t, int64_t(0), it, ut}).tensor();
    if (checked) {
      EXPECT_THAT(error_of([&] { g.run(); }), HasSubstr("aten.scatter.src: index 4 is out of range"));
    } else {
      g.run();
      EXPECT_EQ(get(g, y), (std::vector<double>{1, 10, 3, 4}));
    }
  }
}

// wgnn.cumsum and wgnn.cumprod (ONNX CumSum, CumProd); products over a
// shorter axis of smaller values, to stay in range.
TEST_P(IndexOps, CumSumAndCumProdEveryMode) {
  const DType dt = GetParam();
  for (bool product : {false, true}) {
    const Shape s = product ? Shape{3, 7, 4} : Shape{3, 37, 4};
    const std::vector<double> x = random_values(size_t(numel(s)), dt, 9, product ? -2 : -8, product ? 2 : 8);
    for (int64_t dim : {0, 1, -1}) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          SCOPED_TRACE(fmt::format("{} dim {} exclusive {} reverse {}", product ? "cumprod" : "cumsum", dim, exclusive, reverse));
          Graph g(ctx());
          TensorRef t = put(g, s, dt, x);
          TensorRef y = ops::call(g, product ? "wgnn.cumprod.default" : "wgnn.cumsum.default", {t, dim, exclusive, reverse}).tensor();
          g.run();
          const int64_t d = dim < 0 ? dim + 3 : dim;
          int64_t outer = 1, inner = 1;
          for (int64_t k = 0; k < d; ++k) outer *= s[size_t(k)];
          for (int64_t k = d + 1; k < 3; ++k) inner *= s[size_t(k)];
          const int64_t n = s[size_t(d)];
          std::vector<double> ref(x.size());
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
              double acc = product ? 1 : 0;
              for (int64_t q = 0; q < n; ++q) {
                const int64_t j = reverse ? n - 1 - q : q;
                const size_t at = size_t((o * n + j) * inner + i);
                if (exclusive) {
                  ref[at] = acc;
                  acc = product ? acc * x[at] : acc + x[at];
                } else {
                  acc = product ? acc * x[at] : acc + x[at];
                  ref[at] = acc;
                }
              }
            }
          if (dt == DType::F16) {
            // Each result rounded once to float16 (float32 accumulation).
            std::vector<float> got;
            for (double v : get(g, y)) got.push_back(float(v));
            EXPECT_TRUE(all_close(got, ref, 1e-5, 1e-3));
          } else {
            expect_values(dt, get(g, y), ref);
          }
        }
      }
    }
  }
}

}  // namespace

namespace {

TEST(BitShift, Uint8AgainstThePlainShift) {
  // Every value 0..255 by every shift 0..9 (broadcast [256, 1] x [1, 10]).
  Graph g(ctx());
  std::vector<double> xs(256), ss(10);
  for (int i = 0; i < 256; ++i) xs[size_t(i)] = i;
  for (int s = 0; s < 10; ++s) ss[size_t(s)] = s;
  TensorRef x = put(g, {256, 1}, DType::U8, xs), s = put(g, {1, 10}, DType::U8, ss);
  TensorRef l = ops::call(g, "aten.bitwise_left_shift.Tensor", {x, s}).tensor();
  TensorRef r = ops::call(g, "aten.bitwise_right_shift.Tensor", {x, s}).tensor();
  EXPECT_EQ(g.info(l).dtype, DType::U8);
  g.run();
  std::vector<double> want_l, want_r;
  for (int i = 0; i < 256; ++i)
    for (int k = 0; k < 10; ++k) {
      want_l.push_back(double(uint8_t(unsigned(i) << unsigned(k))));
      want_r.push_back(double(uint8_t(unsigned(i) >> unsigned(k))));
    }
  EXPECT_EQ(get(g, l), want_l);
  EXPECT_EQ(get(g, r), want_r);
  TensorRef f = put(g, {2}, DType::F32, {1, 2});
  EXPECT_THAT(error_of([&] { ops::call(g, "aten.bitwise_left_shift.Tensor", {f, f}); }), HasSubstr("float32"));
}

// aten.bitwise_and / or / xor (ONNX BitwiseAnd, Or, Xor, and Not as xor
// with all ones) against the C++ operators, negative values and int64
// values beyond 32 bits' sign among them, broadcast [5, 1] x [1, 4].
TEST(Bitwise, AndOrXorOnEveryIntegerDtype) {
  for (DType dt : {DType::I32, DType::I64, DType::U8, DType::I8}) {
    SCOPED_TRACE(dtype_name(dt));
    const bool u8 = dt == DType::U8;
    const std::vector<double> xs = u8 ? std::vector<double>{0, 1, 0x5a, 0xf0, 255}
                                      : std::vector<double>{0, 1, -1, -128, 0x5a};
    const std::vector<double> ys = u8 ? std::vector<double>{0, 0x0f, 0xa5, 255} : std::vector<double>{0, -2, 0x3c, 127};
    Graph g(ctx());
    TensorRef x = put(g, {5, 1}, dt, xs), y = put(g, {1, 4}, dt, ys);
    const char* names[] = {"aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor"};
    std::vector<TensorRef> r;
    for (const char* n : names) r.push_back(ops::call(g, n, {x, y}).tensor());
    g.run();
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE(names[k]);
      EXPECT_EQ(g.info(r[size_t(k)]).dtype, dt);
      std::vector<double> want;
      for (double a : xs)
        for (double b : ys) {
          const int64_t i = int64_t(a), j = int64_t(b);
          const int64_t v = k == 0 ? (i & j) : k == 1 ? (i | j) : (i ^ j);
          want.push_back(double(u8 ? int64_t(uint8_t(v)) : v));
        }
      EXPECT_EQ(get(g, r[size_t(k)]), want);
    }
  }
  Graph g(ctx());
  TensorRef f = put(g, {2}, DType::F32, {1, 2});
  EXPECT_THAT(error_of([&] { ops::call(g, "aten.bitwise_and.Tensor", {f, f}); }), HasSubstr("float32"));
}

// Python's remainder and C's fmod at IEEE's edges (ONNX Mod, numpy's mod
// and fmod): signed zeros, infinite divisors, infinite dividends, zero
// divisors and NaN.
TEST(Remainder, IeeeEdgesAsNumpy) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const std::vector<double> x = {0, -0.0, 0, -0.0, -3, 3, -1, 1, inf, -inf, 1, 1, nan, 1, 5.5, -5.5};
  const std::vector<double> y = {-2, 2, 2, -2, inf, inf, -inf, -inf, 2, 2, 0, -0.0, 2, nan, 2, 2};
  for (DType dt : {DType::F32, DType::F16}) {
    if (dt == DType::F16 && !ctx().features().shader_f16) continue;  // float32 still checked
    SCOPED_TRACE(dtype_name(dt));
    Graph g(ctx());
    const Shape s{int64_t(x.size())};
    TensorRef a = put(g, s, dt, x), b = put(g, s, dt, y);
    TensorRef rem = ops::call(g, "aten.remainder.Tensor", {a, b}).tensor();
    TensorRef fm = ops::call(g, "aten.fmod.Tensor", {a, b}).tensor();
    g.run();
    const std::vector<double> got_rem = get(g, rem), got_fm = get(g, fm);
    for (size_t i = 0; i < x.size(); ++i) {
      SCOPED_TRACE(fmt::format("x {} y {}", x[i], y[i]));
      double r = std::fmod(x[i], y[i]);
      const double f = r;
      if (r != 0 && std::signbit(r) != std::signbit(y[i])) r += y[i];
      if (r == 0) r = std::copysign(0.0, y[i]);
      for (auto [got, want] : {std::pair{got_rem[i], r}, std::pair{got_fm[i], f}}) {
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << got;
        } else {
          EXPECT_EQ(got, want);
          EXPECT_EQ(std::signbit(got), std::signbit(want)) << got << " vs " << want;
        }
      }
    }
  }
}

}  // namespace

namespace {

TEST(Scatter, WritesACopyNeverSelf) {
  // self a constant and an input: each run starts again from self (an add
  // into self itself would accumulate over runs), and self keeps its values.
  for (TensorKind kind : {TensorKind::Constant, TensorKind::Input}) {
    Graph g(ctx());
    TensorRef t = put(g, {2, 3}, DType::F32, {1, 2, 3, 4, 5, 6}, kind);
    TensorRef it = put(g, {1, 1}, DType::I64, {1});
    TensorRef ut = put(g, {1, 3}, DType::F32, {10, 20, 30});
    TensorRef y = ops::call(g, "wgnn.scatter_nd.default", {t, it, ut, std::string("add")}).tensor();
    TensorRef z = ops::call(g, "aten.scatter_reduce.two", {t, int64_t(0), put(g, {1, 3}, DType::I64, {0, 0, 0}), ut,
                                                           std::string("sum"), true})
                      .tensor();
    g.mark_output(y);
    g.mark_output(z);
    for (int run = 0; run < 2; ++run) {
      g.run();
      EXPECT_EQ(get(g, y), (std::vector<double>{1, 2, 3, 14, 25, 36}));
      EXPECT_EQ(get(g, z), (std::vector<double>{11, 22, 33, 4, 5, 6}));
    }
    EXPECT_EQ(get(g, t), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  }
}

}  // namespace

namespace {

TEST(CumSum, AtenFormIsTheInclusiveForwardSum) {
  Graph g(ctx());
  TensorRef t = put(g, {2, 3}, DType::I32, {1, 2, 3, 4, 5, 6});
  TensorRef y = ops::call(g, "aten.cumsum.default", {t, int64_t(1)}).tensor();
  g.mark_output(y);
  g.run();
  EXPECT_EQ(get(g, y), (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_THAT(error_of([&] { ops::call(g, "aten.cumsum.default", {t, int64_t(1), int64_t(6)}); }),
              HasSubstr("'dtype' other than None"));
}

}  // namespace

namespace {

TEST(Scatter, BoolAndUint8WithoutReduction) {
  for (DType dt : {DType::Bool, DType::U8, DType::I8}) {
    SCOPED_TRACE(dtype_name(dt));
    Graph g(ctx());
    const double hi = dt == DType::Bool ? 1 : dt == DType::U8 ? 200 : -7;
    TensorRef t = put(g, {2, 3}, dt, {0, 0, 0, 0, 0, 0});
    TensorRef it = put(g, {2, 1}, DType::I64, {1, -2});
    TensorRef ut = put(g, {2, 3}, dt, {hi, 0, hi, 1, 1, 0});
    TensorRef y = ops::call(g, "wgnn.scatter_nd.default", {t, it, ut, std::string("none")}).tensor();
    g.mark_output(y);
    g.run();
    EXPECT_EQ(get(g, y), (std::vector<double>{1, 1, 0, hi, 0, hi}));
    EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.scatter_nd.default", {t, it, ut, std::string("add")}); }),
                HasSubstr("a reduction takes float32"));
  }
}

}  // namespace

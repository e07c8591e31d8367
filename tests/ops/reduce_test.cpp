// Reductions (sum, mean, amax, amin, prod over dim lists), argmax / argmin
// and softmax / log_softmax against double-precision C++ references.
#include <gmock/gmock.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <optional>

#include "op_test_util.h"
#include "typed_values.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

bool no_f16(DType dt) { return dt == DType::F16 && !ctx().features().shader_f16; }
bool is_float(DType dt) { return dt == DType::F32 || dt == DType::F16; }

enum class Red { Sum, Mean, Max, Min, Prod };

const char* red_op(Red r) {
  switch (r) {
    case Red::Sum: return "aten.sum.dim_IntList";
    case Red::Mean: return "aten.mean.dim";
    case Red::Max: return "aten.amax.default";
    case Red::Min: return "aten.amin.default";
    case Red::Prod: return "aten.prod.dim_int";
  }
  return "";
}

struct RedCase {
  Shape shape;
  std::optional<IntList> dims;  // nullopt: None
  bool keepdim;
};

std::string case_name(const RedCase& c) {
  return fmt::format("{} dims {} keepdim {}", shape_str(c.shape), c.dims ? shape_str(*c.dims) : "None", c.keepdim);
}

// The reference: the result's shape and values (double), reduced in double.
std::pair<Shape, std::vector<double>> reference(Red r, const Shape& shape, const std::vector<double>& x,
                                                 const std::optional<IntList>& dims, bool keepdim) {
  const size_t rank = shape.size();
  std::vector<bool> red(rank, !dims || dims->empty());
  if (dims) {
    for (int64_t d : *dims) {
      if (rank > 0) red[size_t(d < 0 ? d + int64_t(rank) : d)] = true;
    }
  }
  Shape out, kept;
  for (size_t d = 0; d < rank; ++d) {
    if (!red[d]) kept.push_back(shape[d]);
    if (!red[d] || keepdim) out.push_back(red[d] ? 1 : shape[d]);
  }
  const size_t n_out = size_t(numel(kept));
  std::vector<double> acc(n_out, r == Red::Prod ? 1.0 : 0.0);
  std::vector<int64_t> cnt(n_out, 0);
  for (int64_t i = 0; i < numel(shape); ++i) {
    const auto c = unravel(i, shape);
    std::vector<int64_t> k;
    for (size_t d = 0; d < rank; ++d) {
      if (!red[d]) k.push_back(c[d]);
    }
    const size_t o = size_t(ravel(k, kept));
    const double v = x[size_t(i)];
    switch (r) {
      case Red::Sum:
      case Red::Mean: acc[o] += v; break;
      case Red::Prod: acc[o] *= v; break;
      case Red::Max: acc[o] = cnt[o] ? std::max(acc[o], v) : v; break;
      case Red::Min: acc[o] = cnt[o] ? std::min(acc[o], v) : v; break;
    }
    ++cnt[o];
  }
  if (r == Red::Mean) {
    for (size_t o = 0; o < n_out; ++o) acc[o] /= double(cnt[o]);
  }
  return {out, acc};
}

void run_reduce(Red r, DType dt, const RedCase& c, uint32_t seed) {
  SCOPED_TRACE(std::string(red_op(r)) + " " + dtype_name(dt) + " " + case_name(c));
  Graph g(ctx());
  const double lo = r == Red::Prod ? (is_float(dt) ? 0.5 : -2) : is_float(dt) ? -1 : -100;
  const double hi = r == Red::Prod ? (is_float(dt) ? 1.5 : 2) : is_float(dt) ? 1 : 100;
  const auto x = random_values(size_t(numel(c.shape)), dt, seed, lo, hi);
  ValueList args{put(g, c.shape, dt, x), c.dims ? Value(*c.dims) : Value(None{}), c.keepdim};
  if (r == Red::Prod) args[1] = (*c.dims)[0];
  TensorRef y = ops::call(g, red_op(r), args).tensor();
  auto [shape, ref] = reference(r, c.shape, x, c.dims, c.keepdim);
  ASSERT_EQ(g.info(y).shape, shape);
  const bool widens = (r == Red::Sum || r == Red::Prod) && !is_float(dt);
  ASSERT_EQ(g.info(y).dtype, widens ? DType::I64 : dt);
  g.run();
  const auto got = get(g, y);
  if (!is_float(dt)) {
    EXPECT_EQ(got, ref);
    return;
  }
  std::vector<float> gotf(got.begin(), got.end());
  int64_t count = std::max<int64_t>(numel(c.shape) / std::max<int64_t>(int64_t(ref.size()), 1), 1);
  if (dt == DType::F16) {
    EXPECT_TRUE(all_close(gotf, ref, 1e-3, 2e-3));
  } else {
    EXPECT_TRUE(all_close(gotf, ref, 2e-7 * double(count), 1e-5));
  }
}

const std::vector<RedCase>& reduce_cases() {
  static const std::vector<RedCase> cases = [] {
    std::vector<RedCase> v;
    const std::vector<std::pair<Shape, std::optional<IntList>>> base = {
        {{3, 5, 7}, IntList{2}},          {{3, 5, 7}, IntList{0}},        {{3, 5, 7}, IntList{1}},
        {{3, 5, 7}, IntList{0, 2}},       {{3, 5, 7}, IntList{-1, -2}},   {{3, 5, 7}, IntList{0, 1}},
        {{3, 5, 7}, IntList{}},           {{3, 5, 7}, std::nullopt},      {{3, 5, 7}, IntList{2, 0, 1}},
        {{2, 3, 4, 5, 6}, IntList{1, 3}}, {{2, 3, 4, 5, 6}, IntList{0, 2, 4}}, {{2, 3, 1, 4, 5, 3}, IntList{-1, 2, 3}},
        {{7}, IntList{0}},                {{}, IntList{}},                {{}, IntList{0}},
        {{4, 1, 6}, IntList{1}},          {{1, 1, 9}, IntList{0, 1}},     {{3, 5000}, IntList{1}},
        {{5000, 3}, IntList{0}},          {{2, 3000, 5}, IntList{1}},     {{100003}, IntList{0}},
        {{64, 2, 65}, IntList{0, 2}},     {{2, 40000}, IntList{1}},       {{40000, 3}, IntList{0}},
        {{2, 20000, 3}, IntList{1}},
    };
    for (const auto& [shape, dims] : base) {
      for (bool keepdim : {false, true}) v.push_back({shape, dims, keepdim});
    }
    return v;
  }();
  return cases;
}

class Reduce : public testing::TestWithParam<std::tuple<Red, DType>> {};

TEST_P(Reduce, MatchesReference) {
  const auto [r, dt] = GetParam();
  if (no_f16(dt)) GTEST_SKIP() << "no shader-f16";
  uint32_t seed = 1;
  for (const RedCase& c : reduce_cases()) {
    if (r == Red::Prod && !(c.dims && c.dims->size() == 1)) continue;
    if (r == Red::Prod && numel(c.shape) > 1000) continue;  // keep products in range
    run_reduce(r, dt, c, seed++);
  }
}

std::string reduce_name(const testing::TestParamInfo<std::tuple<Red, DType>>& info) {
  const char* names[] = {"sum", "mean", "amax", "amin", "prod"};
  return std::string(names[int(std::get<0>(info.param))]) + "_" + dtype_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Floats, Reduce,
                         testing::Combine(testing::Values(Red::Sum, Red::Mean, Red::Max, Red::Min, Red::Prod),
                                          testing::Values(DType::F32, DType::F16)),
                         reduce_name);
INSTANTIATE_TEST_SUITE_P(Integers, Reduce,
                         testing::Combine(testing::Values(Red::Sum, Red::Max, Red::Min, Red::Prod),
                                          testing::Values(DType::I32, DType::I64, DType::Bool)),
                         reduce_name);

TEST(ReduceOps, EmptyReductions) {
  // Over zero elements: sum 0, prod 1, mean NaN (as in ATen); no output: no dispatch.
  Graph g(ctx());
  TensorRef x = g.add_tensor({3, 0, 2}, DType::F32, TensorKind::Input);
  TensorRef s = ops::call(g, "aten.sum.dim_IntList", {x, IntList{1}, false}).tensor();
  TensorRef p = ops::call(g, "aten.prod.dim_int", {x, 1, true}).tensor();
  TensorRef m = ops::call(g, "aten.mean.dim", {x, IntList{1}, false}).tensor();
  TensorRef e = ops::call(g, "aten.amax.default", {x, IntList{0}, false}).tensor();
  EXPECT_EQ(g.info(p).shape, (Shape{3, 1, 2}));
  EXPECT_EQ(g.info(e).shape, (Shape{0, 2}));
  EXPECT_EQ(g.dispatches().size(), 3u);
  g.run();
  EXPECT_EQ(get(g, s), std::vector<double>(6, 0.0));
  EXPECT_EQ(get(g, p), std::vector<double>(6, 1.0));
  for (double v : get(g, m)) EXPECT_TRUE(std::isnan(v));
}

TEST(ReduceOps, MaxAndMinPropagateNaN) {
  Graph g(ctx());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  TensorRef x = put(g, {3, 4}, DType::F32, {1, nan, 3, 2, -inf, -inf, -inf, -inf, 5, 4, inf, nan});
  TensorRef mx = ops::call(g, "aten.amax.default", {x, IntList{1}}).tensor();
  TensorRef mn = ops::call(g, "aten.amin.default", {x, IntList{1}}).tensor();
  TensorRef mx0 = ops::call(g, "aten.amax.default", {x, IntList{0}}).tensor();
  g.run();
  const auto a = get(g, mx), b = get(g, mn), c = get(g, mx0);
  EXPECT_TRUE(std::isnan(a[0]));
  EXPECT_EQ(a[1], -inf);
  EXPECT_TRUE(std::isnan(a[2]));
  EXPECT_TRUE(std::isnan(b[0]));
  EXPECT_EQ(b[1], -inf);
  EXPECT_TRUE(std::isnan(b[2]));
  EXPECT_EQ(c[0], 5);
  EXPECT_TRUE(std::isnan(c[1]));
  EXPECT_EQ(c[2], inf);
  EXPECT_TRUE(std::isnan(c[3]));
}

// argmax / argmin against a C++ reference: random values with many ties
// (integers in a small range, stored exactly in every dtype), every dim, keepdim,
// the first or the last of equal extremes, and the flattened form.
TEST(ReduceOps, ArgmaxArgmin) {
  struct Case {
    Shape shape;
    std::optional<int64_t> dim;
    bool keepdim;
  };
  const std::vector<Case> cases = {
      {{7}, 0, false},         {{5, 9}, 1, false},   {{5, 9}, 0, true},  {{3, 4, 6}, -2, false},
      {{3, 4, 6}, 2, true},    {{2, 3, 4, 5}, std::nullopt, false},      {{2, 3, 4}, std::nullopt, true},
      {{1000}, 0, false},      {{4, 1, 3}, 1, false}, {{}, std::nullopt, false},
  };
  uint32_t seed = 300;
  for (DType dt : {DType::F32, DType::F16, DType::I32, DType::I64}) {
    if (no_f16(dt)) continue;
    for (const Case& c : cases) {
      for (const bool max : {true, false}) {
        for (const bool last : {false, true}) {
          SCOPED_TRACE(fmt::format("{} {} dim {} keepdim {} {} last {}", dtype_name(dt), shape_str(c.shape),
                                   c.dim ? std::to_string(*c.dim) : "None", c.keepdim, max ? "argmax" : "argmin",
                                   last));
          Graph g(ctx());
          const auto x = random_values(size_t(numel(c.shape)), dt, seed++, -3, 3);
          std::vector<double> xi = x;
          if (is_float(dt))
            for (auto& v : xi) v = std::round(v);  // ties
          TensorRef y = ops::call(g, max ? "aten.argmax.default" : "aten.argmin.default",
                                  {put(g, c.shape, dt, xi), c.dim ? Value(*c.dim) : Value(None{}), c.keepdim, last})
                            .tensor();
          // Reference: [outer, n, inner].
          const int64_t r = int64_t(c.shape.size());
          int64_t outer = 1, n = 1, inner = 1;
          Shape out;
          if (!c.dim) {
            n = numel(c.shape);
            if (c.keepdim) out = Shape(c.shape.size(), 1);
          } else {
            const int64_t d = *c.dim < 0 ? *c.dim + r : *c.dim;
            for (int64_t k = 0; k < r; ++k) {
              if (k < d) outer *= c.shape[size_t(k)];
              if (k > d) inner *= c.shape[size_t(k)];
              if (k == d) n = c.shape[size_t(k)];
              if (k != d) out.push_back(c.shape[size_t(k)]);
              else if (c.keepdim) out.push_back(1);
            }
          }
          ASSERT_EQ(g.info(y).shape, out);
          ASSERT_EQ(g.info(y).dtype, DType::I64);
          std::vector<double> want;
          for (int64_t o = 0; o < outer; ++o) {
            for (int64_t i = 0; i < inner; ++i) {
              int64_t best = 0;
              for (int64_t k = 1; k < n; ++k) {
                const double v = xi[size_t((o * n + k) * inner + i)], b = xi[size_t((o * n + best) * inner + i)];
                if ((max ? v > b : v < b) || (last && v == b)) best = k;
              }
              want.push_back(double(best));
            }
          }
          g.run();
          EXPECT_EQ(get(g, y), want);
        }
      }
    }
  }
}

TEST(ReduceOps, ArgmaxNaNWinsAndErrors) {
  Graph g(ctx());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TensorRef x = put(g, {2, 4}, DType::F32, {1, nan, 3, nan, 2, 5, 5, 1});
  TensorRef mx = ops::call(g, "aten.argmax.default", {x, 1}).tensor();
  TensorRef mn = ops::call(g, "aten.argmin.default", {x, 1}).tensor();
  g.run();
  EXPECT_EQ(get(g, mx), (std::vector<double>{1, 1}));
  EXPECT_EQ(get(g, mn), (std::vector<double>{1, 3}));
  auto expect_error = [&](const Shape& shape, DType dt, int64_t dim, const char* needle) {
    Graph g2(ctx());
    try {
      ops::call(g2, "aten.argmax.default", {g2.add_tensor(shape, dt, TensorKind::Input), dim});
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("aten.argmax.default"));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expect_error({3}, DType::Bool, 0, "accepted: float32, float16, int32, int64");
  expect_error({3, 0}, DType::F32, 1, "no elements");
  expect_error({3, 2}, DType::F32, 2, "'dim' is 2");
}

TEST(ReduceOps, LongReductionsSplitInTwoPasses) {
  // Few outputs of many elements: partial results per segment, then a
  // second pass (inner rows, strided layouts and all dims).
  struct Case {
    Shape shape;
    IntList dims;
  };
  for (const Case& c : {Case{{3, 50000}, {1}}, Case{{50000, 3}, {0}}, Case{{4, 30000, 2}, {1}}, Case{{300007}, {}}}) {
    for (Red r : {Red::Sum, Red::Mean, Red::Max, Red::Min}) {
      for (DType dt : {DType::F32, DType::I64}) {
        if (r == Red::Mean && dt == DType::I64) continue;
        SCOPED_TRACE(std::string(red_op(r)) + " " + dtype_name(dt) + " " + shape_str(c.shape));
        Graph g(ctx());
        const auto x = random_values(size_t(numel(c.shape)), dt, 77, is_float(dt) ? -1 : -100, is_float(dt) ? 1 : 100);
        TensorRef y = ops::call(g, red_op(r), {put(g, c.shape, dt, x), c.dims, false}).tensor();
        EXPECT_EQ(g.dispatches().size(), 2u);
        g.run();
        const auto ref = reference(r, c.shape, x, c.dims, false).second;
        const auto got = get(g, y);
        if (dt == DType::I64) {
          EXPECT_EQ(got, ref);
        } else {
          EXPECT_TRUE(all_close(std::vector<float>(got.begin(), got.end()), ref, 1e-4, 1e-5));
        }
      }
    }
  }
}

TEST(ReduceOps, DtypeArgument) {
  // ScalarType codes: 6 float32, 5 float16, 3 int32, 4 int64.
  const bool f16 = ctx().features().shader_f16;
  Graph g(ctx());
  TensorRef xi = put(g, {2, 3}, DType::I32, {1, 2, 3, 4, 5, 6});
  TensorRef xf = put(g, {2, 3}, DType::F32, {1.5, 2, 3, 4, 5.25, -6});
  struct Case {
    std::string op;
    TensorRef x;
    int64_t code;
    DType want;
    std::vector<double> ref;
  };
  std::vector<Case> cases = {
      {"aten.sum.dim_IntList", xi, 4, DType::I64, {6, 15}},
      {"aten.sum.dim_IntList", xi, 3, DType::I32, {6, 15}},
      {"aten.sum.dim_IntList", xi, 6, DType::F32, {6, 15}},
      {"aten.prod.dim_int", xi, 3, DType::I32, {6, 120}},
      {"aten.mean.dim", xf, 6, DType::F32, {6.5 / 3, 3.25 / 3}},
  };
  if (f16) {
    cases.push_back({"aten.mean.dim", xf, 5, DType::F16, {half_to_float(float_to_half(6.5f / 3)),
                                                          half_to_float(float_to_half(3.25f / 3))}});
  }
  std::vector<TensorRef> ys;
  for (const Case& c : cases) {
    const Value dims = c.op == "aten.prod.dim_int" ? Value(1) : Value(IntList{1});
    ys.push_back(ops::call(g, c.op, {c.x, dims, false, c.code}).tensor());
    EXPECT_EQ(g.info(ys.back()).dtype, c.want) << c.op << " " << c.code;
  }
  g.run();
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto got = get(g, ys[i]);
    ASSERT_EQ(got.size(), 2u);
    for (size_t k = 0; k < 2; ++k) EXPECT_NEAR(got[k], cases[i].ref[k], 1e-6) << cases[i].op << " " << cases[i].code;
  }
}

TEST(ReduceOps, Errors) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({2, 3, 4}, DType::F32, TensorKind::Input);
  TensorRef xi = g.add_tensor({2, 3, 4}, DType::I32, TensorKind::Input);
  TensorRef z = g.add_tensor({2, 0}, DType::F32, TensorKind::Input);
  auto expect_error = [&](const std::string& op, const ValueList& args, const char* needle) {
    try {
      ops::call(g, op, args);
      ADD_FAILURE() << op << ": no error for " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(op));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expect_error("aten.sum.dim_IntList", {x, IntList{3}, false}, "'dim' is 3; accepted for rank 3: -3..2");
  expect_error("aten.sum.dim_IntList", {x, IntList{1, -2}, false}, "dim 1 appears more than once");
  expect_error("aten.sum.dim_IntList", {x, std::string("a"), false}, "must be an IntList");
  expect_error("aten.sum.dim_IntList", {x, IntList{1}, false, int64_t(7)}, "'dtype' is Int 7; accepted: None or");
  expect_error("aten.mean.dim", {x, IntList{1}, false, int64_t(3)}, "float16 (5)");
  expect_error("aten.sum.dim_IntList", {x, IntList{1}, false, int64_t(4)}, "float16 (5)");
  expect_error("aten.mean.dim", {xi, IntList{1}, false}, "dtype int32; accepted: float32, float16");
  expect_error("aten.amax.default", {z, IntList{1}, false}, "size 0 in a reduced dim");
  expect_error("aten.amin.default", {z, IntList{}, false}, "size 0 in a reduced dim");
  expect_error("aten.prod.dim_int", {x, IntList{0, 1}, false}, "'dim' must be an Int");
  expect_error("aten.amax.default", {g.add_tensor({1, 1, 1, 1, 1, 1, 1, 1, 1}, DType::F32), IntList{}}, "rank 9");
  expect_error("aten._softmax.default", {xi, 1, false}, "dtype int32");
  expect_error("aten._softmax.default", {x, 3, false}, "'dim' is 3");
  expect_error("aten._log_softmax.default", {x, -4, false}, "'dim' is -4");
  expect_error("aten._softmax.default", {x, 1, true}, "'half_to_float' is True but self is float32");
}

// --------------------------------------------------------------------------
// Softmax

struct SmCase {
  Shape shape;
  int64_t dim;
  bool log;
  DType dtype;
  bool half_to_float = false;
  double offset = 0, spread = 4;
};

void run_softmax(const SmCase& c, uint32_t seed) {
  if (no_f16(c.dtype)) GTEST_SKIP() << "no shader-f16";
  const char* op = c.log ? "aten._log_softmax.default" : "aten._softmax.default";
  SCOPED_TRACE(fmt::format("{} {} {} dim {}{} offset {}", op, dtype_name(c.dtype), shape_str(c.shape), c.dim,
                           c.half_to_float ? " half_to_float" : "", c.offset));
  Graph g(ctx());
  const auto x = random_values(size_t(numel(c.shape)), c.dtype, seed, c.offset - c.spread, c.offset + c.spread);
  TensorRef y = ops::call(g, op, {put(g, c.shape, c.dtype, x), c.dim, c.half_to_float}).tensor();
  ASSERT_EQ(g.info(y).shape, c.shape);
  const DType out = c.half_to_float ? DType::F32 : c.dtype;
  ASSERT_EQ(g.info(y).dtype, out);
  g.run();
  // Reference: [outer, n, inner] around the axis.
  const size_t r = c.shape.size();
  const size_t d = r == 0 ? 0 : size_t(c.dim < 0 ? c.dim + int64_t(r) : c.dim);
  int64_t outer = 1, n = 1, inner = 1;
  for (size_t k = 0; k < r; ++k) (k < d ? outer : k == d ? n : inner) *= c.shape[k];
  std::vector<double> ref(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return size_t((o * n + k) * inner + i); };
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, x[at(k)]);
      for (int64_t k = 0; k < n; ++k) s += std::exp(x[at(k)] - m);
      for (int64_t k = 0; k < n; ++k) {
        ref[at(k)] = c.log ? x[at(k)] - m - std::log(s) : std::exp(x[at(k)] - m) / s;
      }
    }
  }
  const auto got = get(g, y);
  const std::vector<float> gotf(got.begin(), got.end());
  if (out == DType::F16) {
    EXPECT_TRUE(all_close(gotf, ref, 1e-3, 2e-3));
  } else if (c.log) {
    EXPECT_TRUE(all_close(gotf, ref, 1e-5, 1e-5));
  } else {
    EXPECT_TRUE(all_close(gotf, ref, 1e-7, 1e-5));
  }
}

class SoftmaxAxes : public testing::TestWithParam<std::tuple<int64_t, bool, DType>> {};

TEST_P(SoftmaxAxes, MatchesReference) {
  const auto [dim, log, dt] = GetParam();
  run_softmax({{3, 5, 7}, dim, log, dt}, uint32_t(10 + dim));
  if (dt == DType::F16) run_softmax({{3, 5, 7}, dim, log, dt, true}, uint32_t(20 + dim));
}

INSTANTIATE_TEST_SUITE_P(EveryAxis, SoftmaxAxes,
                         testing::Combine(testing::Values<int64_t>(0, 1, 2, -1, -2, -3), testing::Bool(),
                                          testing::Values(DType::F32, DType::F16)));

class SoftmaxWidth : public testing::TestWithParam<std::tuple<int64_t, bool, DType>> {};

TEST_P(SoftmaxWidth, LastAxis) {
  const auto [width, log, dt] = GetParam();
  run_softmax({{5, width}, -1, log, dt}, uint32_t(width));
}

INSTANTIATE_TEST_SUITE_P(Widths, SoftmaxWidth,
                         testing::Combine(testing::Values<int64_t>(1, 3, 16, 63, 1000, 4096, 4097, 20000),
                                          testing::Bool(), testing::Values(DType::F32, DType::F16)));

}  // namespace

TEST(Softmax, LargeMagnitudes) {
  // 1e4 offsets: exp overflows without the max subtracted.
  for (bool log : {false, true}) {
    run_softmax({{4, 300}, 1, log, DType::F32, false, 1e4, 20}, 1);
    run_softmax({{4, 300, 3}, 1, log, DType::F32, false, -1e4, 20}, 2);
    run_softmax({{4, 4097}, -1, log, DType::F32, false, 1e4, 50}, 3);
    run_softmax({{4, 33}, 1, log, DType::F16, false, 1e4, 100}, 4);
  }
}

TEST(Softmax, ManyRowsAndZeroDimensional) {
  run_softmax({{70000, 3}, 1, false, DType::F32}, 5);
  run_softmax({{3, 70000}, 0, true, DType::F32}, 6);
  run_softmax({{}, 0, false, DType::F32}, 7);
  run_softmax({{2, 1, 3, 1, 2, 3}, 4, false, DType::F32}, 8);
}

TEST(Softmax, InfinitiesAndEmpty) {
  // Masked (-inf) entries get 0 (log: -inf); a row of -inf gives NaN as in PyTorch.
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t dim : {1, 0}) {
    Graph g(ctx());
    std::vector<double> x = {1, -inf, 2, -inf, -inf, -inf, -inf, 0, -inf};
    if (dim == 0) x = {1, -inf, -inf, -inf, -inf, 0, 2, -inf, -inf};  // the transpose
    TensorRef t = put(g, {3, 3}, DType::F32, x);
    TensorRef y = ops::call(g, "aten._softmax.default", {t, dim, false}).tensor();
    TensorRef l = ops::call(g, "aten._log_softmax.default", {t, dim, false}).tensor();
    TensorRef e = ops::call(g, "aten._softmax.default", {g.add_tensor({0, 3}, DType::F32), dim, false}).tensor();
    EXPECT_EQ(g.info(e).shape, (Shape{0, 3}));
    EXPECT_EQ(g.dispatches().size(), 2u);
    g.run();
    auto sm = get(g, y), ls = get(g, l);
    auto idx = [&](size_t row, size_t k) { return dim == 1 ? row * 3 + k : k * 3 + row; };
    const double e1 = std::exp(-1.0);
    EXPECT_NEAR(sm[idx(0, 0)], e1 / (1 + e1), 1e-6);
    EXPECT_EQ(sm[idx(0, 1)], 0);
    EXPECT_NEAR(sm[idx(0, 2)], 1 / (1 + e1), 1e-6);
    EXPECT_EQ(ls[idx(0, 1)], -inf);
    for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(std::isnan(sm[idx(1, k)])) << k;
    EXPECT_EQ(sm[idx(2, 1)], 1);
    EXPECT_EQ(ls[idx(2, 1)], 0);
  }
}

TEST(Softmax, NaNMakesTheRowNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t dim : {1, 0}) {
    Graph g(ctx());
    // Row (dim 1) or column (dim 0) 0 holds a NaN; the other is finite.
    std::vector<double> x = dim == 1 ? std::vector<double>{1, nan, 2, 0, 1, 2} : std::vector<double>{1, 0, nan, 1, 2, 2};
    const Shape shape = dim == 1 ? Shape{2, 3} : Shape{3, 2};
    TensorRef y = ops::call(g, "aten._softmax.default", {put(g, shape, DType::F32, x), dim, false}).tensor();
    g.run();
    const auto got = get(g, y);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_TRUE(std::isnan(got[dim == 1 ? k : k * 2])) << k;
      EXPECT_FALSE(std::isnan(got[dim == 1 ? 3 + k : k * 2 + 1])) << k;
    }
  }
}

// Rows of a workgroup each (256 threads): widths of the Whisper encoder's
// attention (1500), cached in registers and streamed (5000); rows with a
// NaN at the end, all -inf, one finite among -inf, a +inf, and large
// offsets, against the double reference.
TEST(Softmax, LongRowsWithNaNAndInfinities) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  {
    for (const int64_t width : {int64_t(1500), int64_t(5000)}) {
      for (const bool log : {false, true}) {
        SCOPED_TRACE(fmt::format("width {} log {}", width, log));
        const int64_t rows = 7;
        std::vector<double> x = random_values(size_t(rows * width), DType::F32, uint32_t(width), -6, 6);
        for (int64_t k = 0; k < width; ++k) {
          x[size_t(1 * width + k)] = -inf;
          x[size_t(2 * width + k)] = k == width / 3 ? 0.5 : -inf;
          x[size_t(4 * width + k)] += 1e4;
          x[size_t(5 * width + k)] -= 1e4;
        }
        x[size_t(width - 1)] = nan;           // row 0: NaN in the last lane's share
        x[size_t(3 * width + 17)] = inf;      // row 3: +inf gives NaN (inf - inf)
        for (double& v : x) v = double(float(v));  // what the tensor holds
        Graph g(ctx());
        TensorRef y = ops::call(g, log ? "aten._log_softmax.default" : "aten._softmax.default",
                                {put(g, {rows, width}, DType::F32, x), int64_t(-1), false})
                          .tensor();
        ASSERT_EQ(g.dispatches().size(), 1u);
        g.run();
        const auto got = get(g, y);
        for (int64_t r = 0; r < rows; ++r) {
          const auto at = [&](int64_t k) { return size_t(r * width + k); };
          double m = -inf, s = 0;
          bool any_nan = false;
          for (int64_t k = 0; k < width; ++k) {
            any_nan = any_nan || std::isnan(x[at(k)]);
            m = std::max(m, x[at(k)]);
          }
          for (int64_t k = 0; k < width; ++k) s += std::exp(x[at(k)] - m);
          for (int64_t k = 0; k < width; ++k) {
            const double want = any_nan || std::isnan(s) ? nan : log ? x[at(k)] - m - std::log(s) : std::exp(x[at(k)] - m) / s;
            if (std::isnan(want)) {
              ASSERT_TRUE(std::isnan(got[at(k)])) << "row " << r << " column " << k << ": " << got[at(k)];
            } else if (std::isinf(want)) {
              ASSERT_EQ(got[at(k)], want) << "row " << r << " column " << k;
            } else {
              ASSERT_NEAR(got[at(k)], want, log ? 1e-4 : 1e-6 + 1e-5 * std::abs(want)) << "row " << r << " column " << k;
            }
          }
        }
      }
    }
  }
}

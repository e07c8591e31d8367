// Binary, comparison, logical, where and cast ops against plain C++
// references: every op in float32, float16, int32 and int64, on broadcast
// shapes (0-d, [1], rank 8, empty), odd sizes, and every validation error.
#include <gmock/gmock.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include <fmt/format.h>

#include "error_of.h"
#include "op_test_util.h"
#include "ops/layout.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

bool has_f16() { return ctx().features().shader_f16; }

// Host values (as double) -> a tensor of `dtype`, and back.
TensorRef put(Graph& g, const Shape& shape, const std::vector<double>& v, DType dtype) {
  EXPECT_EQ(int64_t(v.size()), numel(shape));
  TensorRef t = g.add_tensor(shape, dtype, TensorKind::Input);
  auto write = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = T(v[i]);
    g.write(t, h.data(), h.size() * sizeof(T));
  };
  switch (dtype) {
    case DType::F32: write(float{}); break;
    case DType::F16: {
      std::vector<float> f(v.begin(), v.end());
      auto h = to_half(f);
      g.write(t, h.data(), h.size() * 2);
      break;
    }
    case DType::I32: write(int32_t{}); break;
    case DType::I64: write(int64_t{}); break;
    case DType::Bool:
    case DType::U8: write(uint8_t{}); break;
    case DType::I8: write(int8_t{}); break;
  }
  return t;
}

std::vector<double> get(Graph& g, TensorRef t) {
  auto conv = [](const auto& h) { return std::vector<double>(h.begin(), h.end()); };
  switch (g.info(t).dtype) {
    case DType::F32: return conv(g.read<float>(t));
    case DType::F16: return conv(from_half(g.read<uint16_t>(t)));
    case DType::I32: return conv(g.read<int32_t>(t));
    case DType::I64: return conv(g.read<int64_t>(t));
    case DType::Bool:
    case DType::U8: return conv(g.read<uint8_t>(t));
    case DType::I8: return conv(g.read<int8_t>(t));
  }
  return {};
}

// What `dtype` stores of v (f16 rounding; integers are exact here).
double stored(double v, DType dtype) {
  if (dtype == DType::F32) return double(float(v));
  if (dtype == DType::F16) return double(half_to_float(float_to_half(float(v))));
  return v;
}

// Element-wise within atol + rtol * |ref|; NaN matches NaN, inf matches the
// same inf.
::testing::AssertionResult matches(const std::vector<double>& got, const std::vector<double>& ref, double atol,
                                   double rtol) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != reference " << ref.size();
  }
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok;
    if (std::isnan(ref[i]) || std::isnan(got[i])) {
      ok = std::isnan(ref[i]) && std::isnan(got[i]);
    } else if (std::isinf(ref[i]) || std::isinf(got[i])) {
      ok = got[i] == ref[i];
    } else {
      ok = std::abs(got[i] - ref[i]) <= atol + rtol * std::abs(ref[i]);
    }
    if (!ok) {
      if (bad < 6) first += "\n  [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " +
                            std::to_string(ref[i]);
      ++bad;
    }
  }
  if (bad) return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements off" << first;
  return ::testing::AssertionSuccess();
}

// Shape [a..] broadcast to `out`: the flat index into the input of output
// element `flat` (written independently of ops/layout).
size_t source_index(const Shape& in, const Shape& out, size_t flat) {
  size_t idx = 0, stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t d = out.size() - 1 - k;
    const size_t coord = flat % size_t(out[d]);
    flat /= size_t(out[d]);
    if (k < in.size()) {
      const size_t dim = size_t(in[in.size() - 1 - k]);
      if (dim != 1) idx += coord * stride;
      stride *= dim;
    }
  }
  return idx;
}

Shape broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1, db = k < b.size() ? b[b.size() - 1 - k] : 1;
    out[out.size() - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

// ---- input domains
enum class Dom { General, Divisor, PowBase, PowExp, Ties };

std::vector<double> make(Dom dom, size_t n, bool integer, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> v(n);
  for (auto& x : v) {
    const double r = u(rng), s = u(rng) < 0.5 ? -1 : 1;
    switch (dom) {
      case Dom::General: x = integer ? std::floor(r * 101) - 50 : r * 8 - 4; break;
      case Dom::Divisor: x = s * (integer ? std::floor(r * 9) + 1 : 0.25 + r * 2.75); break;
      case Dom::PowBase: x = integer ? std::floor(r * 11) - 5 : s * (0.25 + r * 2.75); break;
      case Dom::PowExp:
        x = integer ? std::floor(r * 7) : (u(rng) < 0.5 ? std::floor(r * 7) - 3 : r * 4 - 2);
        break;
      case Dom::Ties: {
        static const double f[] = {-1.5, 0, 0.5, 2}, i[] = {-2, -1, 0, 1, 2};
        x = integer ? i[size_t(r * 5)] : f[size_t(r * 4)];
        break;
      }
    }
  }
  return v;
}

double py_mod(double x, double y) {
  double r = std::fmod(x, y);
  if (r != 0 && (r < 0) != (y < 0)) r += y;
  return r;
}

// C semantics of pow, as the kernel implements it.
double pow_ref(double x, double y) { return y == 0 ? 1.0 : std::pow(x, y); }

struct BinCase {
  std::string name;  // test name
  std::string op;
  ValueList extra;   // arguments after self, other
  Dom dx, dy;
  std::function<double(double, double)> f;
  bool bool_out = false;
  bool int_true_div = false;  // integer inputs give float32
  bool bool_ok = false;       // accepts bool inputs too
};

const std::vector<BinCase>& bin_cases() {
  static const std::vector<BinCase> c = {
      {"add", "aten.add.Tensor", {}, Dom::General, Dom::General, [](double x, double y) { return x + y; }},
      {"add_alpha", "aten.add.Tensor", {Value(int64_t(3))}, Dom::General, Dom::General,
       [](double x, double y) { return x + 3 * y; }},
      {"sub", "aten.sub.Tensor", {}, Dom::General, Dom::General, [](double x, double y) { return x - y; }},
      {"sub_alpha", "aten.sub.Tensor", {Value(int64_t(-2))}, Dom::General, Dom::General,
       [](double x, double y) { return x + 2 * y; }},
      {"mul", "aten.mul.Tensor", {}, Dom::General, Dom::General, [](double x, double y) { return x * y; }},
      {"div", "aten.div.Tensor", {}, Dom::General, Dom::Divisor, [](double x, double y) { return x / y; }, false,
       true},
      {"div_none", "aten.div.Tensor_mode", {None{}}, Dom::General, Dom::Divisor,
       [](double x, double y) { return x / y; }, false, true},
      {"div_trunc", "aten.div.Tensor_mode", {std::string("trunc")}, Dom::General, Dom::Divisor,
       [](double x, double y) { return std::trunc(x / y); }},
      {"div_floor", "aten.div.Tensor_mode", {std::string("floor")}, Dom::General, Dom::Divisor,
       [](double x, double y) { return std::floor(x / y); }},
      {"pow", "aten.pow.Tensor_Tensor", {}, Dom::PowBase, Dom::PowExp, pow_ref},
      {"minimum", "aten.minimum.default", {}, Dom::Ties, Dom::General,
       [](double x, double y) { return std::min(x, y); }, false, false, true},
      {"maximum", "aten.maximum.default", {}, Dom::Ties, Dom::General,
       [](double x, double y) { return std::max(x, y); }, false, false, true},
      {"remainder", "aten.remainder.Tensor", {}, Dom::General, Dom::Divisor, py_mod},
      {"fmod", "aten.fmod.Tensor", {}, Dom::General, Dom::Divisor, [](double x, double y) { return std::fmod(x, y); }},
      {"eq", "aten.eq.Tensor", {}, Dom::Ties, Dom::Ties, [](double x, double y) { return double(x == y); }, true,
       false, true},
      {"ne", "aten.ne.Tensor", {}, Dom::Ties, Dom::Ties, [](double x, double y) { return double(x != y); }, true,
       false, true},
      {"lt", "aten.lt.Tensor", {}, Dom::Ties, Dom::Ties, [](double x, double y) { return double(x < y); }, true,
       false, true},
      {"le", "aten.le.Tensor", {}, Dom::Ties, Dom::Ties, [](double x, double y) { return double(x <= y); }, true,
       false, true},
      {"gt", "aten.gt.Tensor", {}, Dom::Ties, Dom::Ties, [](double x, double y) { return double(x > y); }, true,
       false, true},
      {"ge", "aten.ge.Tensor", {}, Dom::Ties, Dom::Ties, [](double x, double y) { return double(x >= y); }, true,
       false, true},
      {"logical_and", "aten.logical_and.default", {}, Dom::Ties, Dom::Ties,
       [](double x, double y) { return double(x != 0 && y != 0); }, true, false, true},
      {"logical_or", "aten.logical_or.default", {}, Dom::Ties, Dom::Ties,
       [](double x, double y) { return double(x != 0 || y != 0); }, true, false, true},
      {"logical_xor", "aten.logical_xor.default", {}, Dom::Ties, Dom::Ties,
       [](double x, double y) { return double((x != 0) != (y != 0)); }, true, false, true},
  };
  return c;
}

// Broadcast pairs: odd sizes, same shapes (vec4 fast path), one element
// (splat), 0-d, strided both sides, rank 8, and empty results.
const std::vector<std::pair<Shape, Shape>>& shape_pairs() {
  static const std::vector<std::pair<Shape, Shape>> s = {
      {{3, 1, 5}, {4, 1}},
      {{}, {2, 3}},
      {{2, 3}, {}},
      {{}, {}},
      {{1}, {7}},
      {{7}, {1}},
      {{1027}, {1027}},
      {{2, 3, 4}, {2, 3, 4}},
      {{5}, {1, 5}},
      {{5, 1}, {1, 6}},
      {{2, 3, 4, 5}, {1, 3, 1, 1}},
      {{2, 1, 3, 1, 2, 3}, {1, 2, 1, 4, 1, 3}},
      {{2, 1, 2, 1, 3, 1, 2, 1}, {1, 2, 1, 2, 1, 3, 1, 2}},
      {{2, 3, 1}, {3, 70}},
      {{0, 3}, {1, 3}},
      {{0}, {}},
  };
  return s;
}

class Binary : public testing::TestWithParam<std::tuple<size_t, DType>> {};

TEST_P(Binary, MatchesReference) {
  const auto [ci, dtype] = GetParam();
  const BinCase& c = bin_cases()[ci];
  if (dtype == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  const bool integer = dtype != DType::F32 && dtype != DType::F16;
  Graph g(ctx());
  struct Run {
    Shape out;
    std::vector<double> ref;
    TensorRef y;
  };
  std::vector<Run> runs;
  uint32_t seed = uint32_t(ci * 131 + size_t(dtype) * 17);
  for (const auto& [sa, sb] : shape_pairs()) {
    auto x = make(c.dx, size_t(numel(sa)), integer, ++seed);
    auto y = make(c.dy, size_t(numel(sb)), integer, ++seed);
    if (dtype == DType::Bool) {
      for (auto& v : x) v = v != 0;
      for (auto& v : y) v = v != 0;
    }
    for (auto& v : x) v = stored(v, dtype);
    for (auto& v : y) v = stored(v, dtype);
    ValueList args{put(g, sa, x, dtype), put(g, sb, y, dtype)};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    Run r;
    r.out = broadcast(sa, sb);
    r.y = ops::call(g, c.op, args).tensor();
    EXPECT_EQ(g.info(r.y).shape, r.out) << shape_str(sa) << " " << shape_str(sb);
    const DType want = c.bool_out ? DType::Bool : (integer && c.int_true_div ? DType::F32 : dtype);
    EXPECT_EQ(g.info(r.y).dtype, want);
    r.ref.resize(size_t(numel(r.out)));
    for (size_t i = 0; i < r.ref.size(); ++i) {
      r.ref[i] = c.f(x[source_index(sa, r.out, i)], y[source_index(sb, r.out, i)]);
    }
    runs.push_back(std::move(r));
  }
  g.run();
  for (size_t k = 0; k < runs.size(); ++k) {
    SCOPED_TRACE(c.name + " " + dtype_name(dtype) + " " + shape_str(shape_pairs()[k].first) + " with " +
                 shape_str(shape_pairs()[k].second));
    const DType od = g.info(runs[k].y).dtype;
    const double tol = od == DType::F16 ? 1e-3 : od == DType::F32 ? (c.name == "pow" ? 1e-5 : 1e-6) : 0;
    // Remainders are exact in f32; in f16 the f16-rounded quotient matters
    // only through the final rounding.
    EXPECT_TRUE(matches(get(g, runs[k].y), runs[k].ref, tol, tol));
  }
}

std::string bin_name(const testing::TestParamInfo<std::tuple<size_t, DType>>& p) {
  return bin_cases()[std::get<0>(p.param)].name + "_" + dtype_name(std::get<1>(p.param));
}

// Every case in float32, float16, int32 and int64, and in bool where defined.
std::vector<std::tuple<size_t, DType>> bin_params() {
  std::vector<std::tuple<size_t, DType>> p;
  for (size_t i = 0; i < bin_cases().size(); ++i) {
    for (DType d : {DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool}) {
      if (d != DType::Bool || bin_cases()[i].bool_ok) p.emplace_back(i, d);
    }
  }
  return p;
}

INSTANTIATE_TEST_SUITE_P(AllOps, Binary, testing::ValuesIn(bin_params()), bin_name);

}  // namespace

TEST(BinaryOps, IntegerDivisionTruncatesOrFloors) {
  const std::vector<double> x = {7, -7, 7, -7, 0, 1, -1, 6, -6, 2147483647};
  const std::vector<double> y = {2, 2, -2, -2, 3, -3, 3, 3, 4, 2};
  const std::vector<double> trunc = {3, -3, -3, 3, 0, 0, 0, 2, -1, 1073741823};
  const std::vector<double> floor = {3, -4, -4, 3, 0, -1, -1, 2, -2, 1073741823};
  for (DType dt : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtype_name(dt));
    Graph g(ctx());
    TensorRef tx = put(g, {10}, x, dt), ty = put(g, {10}, y, dt);
    TensorRef t = ops::call(g, "aten.div.Tensor_mode", {tx, ty, std::string("trunc")}).tensor();
    TensorRef f = ops::call(g, "aten.div.Tensor_mode", {tx, ty, std::string("floor")}).tensor();
    TensorRef d = ops::call(g, "aten.div.Tensor", {tx, ty}).tensor();
    EXPECT_EQ(g.info(t).dtype, dt);
    EXPECT_EQ(g.info(d).dtype, DType::F32);  // true division
    g.run();
    EXPECT_EQ(get(g, t), trunc);
    EXPECT_EQ(get(g, f), floor);
    EXPECT_TRUE(matches(get(g, d), {3.5, -3.5, -3.5, 3.5, 0, -1 / 3.0, -1 / 3.0, 2, -1.5, 1073741823.5}, 0, 1e-7));
  }
  // Floats round the true quotient.
  Graph g(ctx());
  TensorRef tx = put(g, {4}, {7.5, -7.5, -0.5, 9}, DType::F32), ty = put(g, {4}, {2, 2, 4, -3}, DType::F32);
  TensorRef t = ops::call(g, "aten.div.Tensor_mode", {tx, ty, std::string("trunc")}).tensor();
  TensorRef f = ops::call(g, "aten.div.Tensor_mode", {tx, ty, std::string("floor")}).tensor();
  g.run();
  EXPECT_EQ(get(g, t), (std::vector<double>{3, -3, -0.0, -3}));
  EXPECT_EQ(get(g, f), (std::vector<double>{3, -4, -1, -3}));
}

TEST(BinaryOps, RemainderTakesTheDivisorsSignFmodTheDividends) {
  const std::vector<double> x = {-7, 7, -7, 7, -6, 0, 5};
  const std::vector<double> y = {3, -3, -3, 3, 3, -2, 7};
  const std::vector<double> rem = {2, -2, -1, 1, 0, 0, 5};
  const std::vector<double> fmod = {-1, 1, -1, 1, 0, 0, 5};
  for (DType dt : {DType::I32, DType::I64, DType::F32, DType::F16}) {
    if (dt == DType::F16 && !has_f16()) continue;
    SCOPED_TRACE(dtype_name(dt));
    Graph g(ctx());
    TensorRef tx = put(g, {7}, x, dt), ty = put(g, {7}, y, dt);
    TensorRef r = ops::call(g, "aten.remainder.Tensor", {tx, ty}).tensor();
    TensorRef f = ops::call(g, "aten.fmod.Tensor", {tx, ty}).tensor();
    g.run();
    EXPECT_EQ(get(g, r), rem);
    EXPECT_EQ(get(g, f), fmod);
  }
  Graph g(ctx());
  TensorRef tx = put(g, {4}, {-7.5, 7.5, 1e6f + 0.25, -0.75}, DType::F32);
  TensorRef ty = put(g, {4}, {2, -2, 3, 0.5}, DType::F32);
  TensorRef r = ops::call(g, "aten.remainder.Tensor", {tx, ty}).tensor();
  TensorRef f = ops::call(g, "aten.fmod.Tensor", {tx, ty}).tensor();
  g.run();
  EXPECT_EQ(get(g, r), (std::vector<double>{0.5, -0.5, 1.25, 0.25}));
  EXPECT_EQ(get(g, f), (std::vector<double>{-1.5, 1.5, 1.25, -0.25}));
}

TEST(BinaryOps, PowOfNegativeBasesAndZero) {
  Graph g(ctx());
  const std::vector<double> x = {-2, -2, -2, -8, 0, 0, 0, 3, -1.5, 2};
  const std::vector<double> y = {3, 2, -1, 1 / 3.0, 2, 0, -1, 0, 0.5, 0.5};
  TensorRef tx = put(g, {10}, x, DType::F32), ty = put(g, {10}, y, DType::F32);
  TensorRef p = ops::call(g, "aten.pow.Tensor_Tensor", {tx, ty}).tensor();
  TensorRef xi = put(g, {8}, {2, -2, -3, 1, -1, -1, 5, 0}, DType::I32);
  TensorRef yi = put(g, {8}, {10, 3, 0, -4, -3, -2, -1, 0}, DType::I32);
  TensorRef pi = ops::call(g, "aten.pow.Tensor_Tensor", {xi, yi}).tensor();
  g.run();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  EXPECT_TRUE(matches(get(g, p), {-8, 4, -0.5, nan, 0, 1, inf, 1, nan, std::sqrt(2.0)}, 0, 1e-6));
  EXPECT_EQ(get(g, pi), (std::vector<double>{1024, -8, 1, 1, -1, 1, 0, 1}));
}

TEST(BinaryOps, NaNPropagatesAndCompares) {
  Graph g(ctx());
  const double nan = std::nan("");
  TensorRef x = put(g, {4}, {nan, 1, nan, 0}, DType::F32);
  TensorRef y = put(g, {4}, {1, nan, nan, 0}, DType::F32);
  std::map<std::string, TensorRef> out;
  for (const char* op : {"minimum.default", "maximum.default", "eq.Tensor", "ne.Tensor", "lt.Tensor", "ge.Tensor",
                         "logical_and.default", "logical_or.default"}) {
    out[op] = ops::call(g, std::string("aten.") + op, {x, y}).tensor();
  }
  TensorRef n = ops::call(g, "aten.logical_not.default", {x}).tensor();
  g.run();
  EXPECT_TRUE(matches(get(g, out["minimum.default"]), {nan, nan, nan, 0}, 0, 0));
  EXPECT_TRUE(matches(get(g, out["maximum.default"]), {nan, nan, nan, 0}, 0, 0));
  EXPECT_EQ(get(g, out["eq.Tensor"]), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(get(g, out["ne.Tensor"]), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_EQ(get(g, out["lt.Tensor"]), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(get(g, out["ge.Tensor"]), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(get(g, out["logical_and.default"]), (std::vector<double>{1, 1, 1, 0}));  // NaN is true
  EXPECT_EQ(get(g, out["logical_or.default"]), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_EQ(get(g, n), (std::vector<double>{0, 0, 0, 1}));
}

TEST(BinaryOps, LogicalNotEveryDtype) {
  for (DType dt : {DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool, DType::U8, DType::I8}) {
    if (dt == DType::F16 && !has_f16()) continue;
    SCOPED_TRACE(dtype_name(dt));
    Graph g(ctx());
    const bool b = dt == DType::Bool, u = dt == DType::U8;
    std::vector<double> v = {0, 1, b ? 1.0 : 2, b ? 1.0 : u ? 200 : -3, 0};
    TensorRef x = put(g, {5}, v, dt);
    TensorRef y = ops::call(g, "aten.logical_not.default", {x}).tensor();
    EXPECT_EQ(g.info(y).dtype, DType::Bool);
    g.run();
    EXPECT_EQ(get(g, y), (std::vector<double>{1, 0, 0, 0, 1}));
  }
}

TEST(BinaryOps, IntegerArithmeticWrapsInInt32) {
  Graph g(ctx());
  TensorRef x = put(g, {2}, {2147483647, -2147483648.0}, DType::I32);
  TensorRef y = put(g, {2}, {1, 1}, DType::I32);
  TensorRef s = ops::call(g, "aten.add.Tensor", {x, y}).tensor();
  TensorRef d = ops::call(g, "aten.sub.Tensor", {x, y}).tensor();
  g.run();
  EXPECT_EQ(get(g, s), (std::vector<double>{-2147483648.0, -2147483647}));
  EXPECT_EQ(get(g, d), (std::vector<double>{2147483646, 2147483647}));
}

TEST(BinaryOps, EmptyResultRecordsNoDispatch) {
  Graph g(ctx());
  TensorRef x = put(g, {0, 3}, {}, DType::F32), y = put(g, {1, 3}, {1, 2, 3}, DType::F32);
  TensorRef z = ops::call(g, "aten.mul.Tensor", {x, y}).tensor();
  TensorRef w = ops::call(g, "aten._to_copy.default", {z, int64_t(3)}).tensor();
  EXPECT_EQ(g.info(z).shape, (Shape{0, 3}));
  EXPECT_EQ(g.info(w).dtype, DType::I32);
  EXPECT_TRUE(g.dispatches().empty());
  g.run();
  EXPECT_TRUE(get(g, w).empty());
}

TEST(BinaryOps, MoreWorkgroupsThanOneGridDimension) {
  // 64Mi - 1 float16 elements (just under 128 MiB): 65536 workgroups of
  // 1024 elements, one more than a grid dimension holds.
  if (!has_f16()) GTEST_SKIP() << "no shader-f16";
  const int64_t n = (int64_t(1) << 26) - 1;
  if (uint64_t(n) * 2 > ctx().limits().max_storage_buffer_binding_size) GTEST_SKIP() << "binding limit";
  Graph g(ctx());
  std::vector<uint16_t> h(static_cast<size_t>(n));
  for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_half(float(i % 1000));
  TensorRef x = g.add_tensor({n}, DType::F16, TensorKind::Input);
  g.write(x, h.data(), h.size() * 2);
  TensorRef one = put(g, {}, {1}, DType::F16);
  TensorRef y = ops::call(g, "aten.add.Tensor", {x, one}).tensor();
  g.run();
  const auto r = g.read<uint16_t>(y);
  size_t bad = 0;
  for (size_t i = 0; i < r.size(); ++i) bad += half_to_float(r[i]) != float(i % 1000 + 1);
  EXPECT_EQ(bad, 0u);
}

namespace {

class Where : public testing::TestWithParam<DType> {};

TEST_P(Where, ThreeWayBroadcast) {
  const DType dt = GetParam();
  if (dt == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  const std::vector<std::array<Shape, 3>> cases = {
      {Shape{3, 1, 1}, Shape{1, 4, 1}, Shape{1, 1, 5}},
      {Shape{}, Shape{2, 3}, Shape{3}},
      {Shape{2, 3}, Shape{}, Shape{}},
      {Shape{7, 9}, Shape{7, 9}, Shape{7, 9}},
      {Shape{4, 1}, Shape{4, 6}, Shape{}},
      {Shape{2, 1, 2, 1, 2, 1}, Shape{1, 3, 1, 3, 1, 3}, Shape{2, 3, 2, 3, 2, 3}},
      {Shape{0, 2}, Shape{1, 2}, Shape{1}},
  };
  Graph g(ctx());
  std::vector<std::pair<TensorRef, std::vector<double>>> outs;
  uint32_t seed = 7;
  const bool integer = dt != DType::F32 && dt != DType::F16;
  for (const auto& [sc, sx, sy] : cases) {
    auto c = make(Dom::Ties, size_t(numel(sc)), true, ++seed);
    for (auto& v : c) v = v > 0;
    auto x = make(Dom::General, size_t(numel(sx)), integer, ++seed);
    auto y = make(Dom::General, size_t(numel(sy)), integer, ++seed);
    for (auto* v : {&x, &y}) {
      for (auto& e : *v) e = dt == DType::Bool ? double(e > 0) : dt == DType::U8 ? std::abs(e) : stored(e, dt);
    }
    TensorRef t = ops::call(g, "aten.where.self", {put(g, sc, c, DType::Bool), put(g, sx, x, dt), put(g, sy, y, dt)})
                      .tensor();
    const Shape out = broadcast(broadcast(sc, sx), sy);
    EXPECT_EQ(g.info(t).shape, out);
    EXPECT_EQ(g.info(t).dtype, dt);
    std::vector<double> ref(size_t(numel(out)));
    for (size_t i = 0; i < ref.size(); ++i) {
      ref[i] = c[source_index(sc, out, i)] != 0 ? x[source_index(sx, out, i)] : y[source_index(sy, out, i)];
    }
    outs.emplace_back(t, ref);
  }
  g.run();
  for (size_t k = 0; k < outs.size(); ++k) {
    SCOPED_TRACE("case " + std::to_string(k));
    EXPECT_EQ(get(g, outs[k].first), outs[k].second);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Where,
                         testing::Values(DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool, DType::U8,
                                         DType::I8),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

// ---- casts

int64_t aten_code(DType d) {
  switch (d) {
    case DType::U8: return 0;
    case DType::I8: return 1;
    case DType::I32: return 3;
    case DType::I64: return 4;
    case DType::F16: return 5;
    case DType::F32: return 6;
    case DType::Bool: return 11;
  }
  return -1;
}

std::vector<double> cast_sources(DType src) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  switch (src) {
    case DType::F32:
    case DType::F16:
      return {-2.7, -0.5, -0.0, 0, 0.5, 1.5, 2.9, 100.25, -129.5, 300.75, 65519, 70000, 1e10, -1e10, nan, inf, -inf};
    case DType::I32:
    case DType::I64: return {-300, -129, -128, -1, 0, 1, 127, 128, 255, 256, 70000, 2147483647, -2147483648.0};
    case DType::I8: return {-128, -5, -1, 0, 1, 5, 127};
    case DType::U8: return {0, 1, 5, 127, 128, 200, 255};
    case DType::Bool: return {0, 1, 1, 0};
  }
  return {};
}

double cast_ref(double v, DType dst) {
  const bool is_int_dst = dst == DType::I32 || dst == DType::I64 || dst == DType::I8 || dst == DType::U8;
  if (is_int_dst) {
    // Truncation toward zero, saturating at int32 (int64 storage), NaN -> 0.
    double t = std::isnan(v) ? 0 : std::trunc(v);
    t = std::clamp(t, -2147483648.0, 2147483647.0);
    const auto i = int32_t(t);
    if (dst == DType::I8) return double(int8_t(uint8_t(uint32_t(i) & 0xff)));
    if (dst == DType::U8) return double(uint32_t(i) & 0xff);
    return double(i);
  }
  if (dst == DType::Bool) return v != 0 || std::isnan(v) ? 1 : 0;
  return stored(v, dst);  // f32 / f16 rounding (f16 overflows to inf)
}

class Cast : public testing::TestWithParam<std::tuple<DType, DType>> {};

TEST_P(Cast, MatchesReference) {
  const auto [src, dst] = GetParam();
  if ((src == DType::F16 || dst == DType::F16) && !has_f16()) GTEST_SKIP() << "no shader-f16";
  Graph g(ctx());
  std::vector<double> v = cast_sources(src);
  for (auto& e : v) e = stored(e, src);
  // Odd sizes, a 2-D shape, and a 0-d tensor.
  const int64_t n = int64_t(v.size());
  TensorRef x = put(g, {n}, v, src);
  TensorRef x2 = put(g, {1, n}, v, src);
  TensorRef x0 = put(g, {}, {v[1]}, src);
  TensorRef y = ops::call(g, "aten._to_copy.default", {x, aten_code(dst)}).tensor();
  TensorRef y2 = ops::call(g, "aten._to_copy.default", {x2, aten_code(dst)}).tensor();
  TensorRef y0 = ops::call(g, "aten._to_copy.default", {x0, aten_code(dst)}).tensor();
  EXPECT_EQ(g.info(y).dtype, dst);
  EXPECT_EQ(g.info(y2).shape, (Shape{1, n}));
  EXPECT_EQ(g.info(y0).shape, Shape{});
  g.run();
  std::vector<double> ref(v.size());
  for (size_t i = 0; i < v.size(); ++i) ref[i] = cast_ref(v[i], dst);
  // int -> float rounds to nearest; f16 results within one f16 rounding.
  const double rtol = dst == DType::F16 ? 1e-3 : 0;
  EXPECT_TRUE(matches(get(g, y), ref, 0, rtol)) << dtype_name(src) << " -> " << dtype_name(dst);
  EXPECT_TRUE(matches(get(g, y2), ref, 0, rtol));
  EXPECT_TRUE(matches(get(g, y0), {ref[1]}, 0, rtol));
}

INSTANTIATE_TEST_SUITE_P(AllPairs, Cast,
                         testing::Combine(testing::Values(DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool,
                                                          DType::U8, DType::I8),
                                          testing::Values(DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool,
                                                          DType::U8, DType::I8)),
                         [](const auto& p) {
                           return std::string(dtype_name(std::get<0>(p.param))) + "_to_" +
                                  dtype_name(std::get<1>(p.param));
                         });

}  // namespace

TEST(Cast, FloatToIntTruncatesTowardZero) {
  Graph g(ctx());
  TensorRef x = put(g, {6}, {-0.5, -1.5, -2.99, 0.5, 1.99, -0.0}, DType::F32);
  TensorRef y = ops::call(g, "aten._to_copy.default", {x, int64_t(4)}).tensor();
  TensorRef n = ops::call(g, "aten._to_copy.default", {x, None{}}).tensor();  // a copy
  g.run();
  EXPECT_EQ(g.info(y).dtype, DType::I64);
  EXPECT_EQ(g.read<int64_t>(y), (std::vector<int64_t>{0, -1, -2, 0, 1, 0}));
  EXPECT_EQ(g.info(n).dtype, DType::F32);
  EXPECT_EQ(get(g, n), (std::vector<double>{-0.5, -1.5, double(-2.99f), 0.5, double(1.99f), 0}));
}

// ---- errors

namespace {

void expect_error(Graph& g, const std::string& op, const ValueList& args, std::vector<std::string> needles) {
  try {
    ops::call(g, op, args);
    ADD_FAILURE() << "no error from " << op << " (expected " << needles[0] << ")";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(op));
    for (const auto& n : needles) EXPECT_THAT(e.what(), HasSubstr(n));
  }
}

}  // namespace

TEST(BinaryOps, Errors) {
  Graph g(ctx());
  TensorRef f34 = g.add_tensor({3, 4}, DType::F32, TensorKind::Input);
  TensorRef f5 = g.add_tensor({5}, DType::F32, TensorKind::Input);
  TensorRef i34 = g.add_tensor({3, 4}, DType::I32, TensorKind::Input);
  TensorRef l34 = g.add_tensor({3, 4}, DType::I64, TensorKind::Input);
  TensorRef b34 = g.add_tensor({3, 4}, DType::Bool, TensorKind::Input);
  TensorRef r9 = g.add_tensor(Shape(9, 1), DType::F32, TensorKind::Input);
  expect_error(g, "aten.add.Tensor", {f34, f5}, {"do not broadcast", "'self' [3, 4]", "'other' [5]"});
  expect_error(g, "aten.mul.Tensor", {f34, i34}, {"'self' (float32)", "'other' (int32)", "same dtype"});
  expect_error(g, "aten.eq.Tensor", {i34, l34}, {"int32", "int64"});
  expect_error(g, "aten.div.Tensor_mode", {f34, f34, std::string("round")},
               {"'rounding_mode' is 'round'", "'trunc', 'floor', None"});
  expect_error(g, "aten.div.Tensor_mode", {f34, f34, int64_t(1)}, {"'rounding_mode'", "Int 1"});
  expect_error(g, "aten._to_copy.default", {f34, int64_t(7)}, {"'dtype' is 7 (float64)", "11 (bool)"});
  expect_error(g, "aten._to_copy.default", {f34, int64_t(15)}, {"15 (bfloat16)"});
  expect_error(g, "aten._to_copy.default", {f34, std::string("float")}, {"'dtype'", "Int"});
  expect_error(g, "aten.sub.Tensor", {b34, b34}, {"'self' has dtype bool", "accepted: float32, float16, int32, int64"});
  expect_error(g, "aten.add.Tensor", {i34, i34, 0.5}, {"'alpha'", "Double 0.5", "Int"});
  expect_error(g, "aten.where.self", {f34, f34, f34}, {"'condition' has dtype float32", "accepted: bool"});
  expect_error(g, "aten.where.self", {b34, f34, i34}, {"'self' (float32)", "'other' (int32)"});
  expect_error(g, "aten.where.self", {b34, f34, f5}, {"do not broadcast", "'condition' [3, 4]", "'other' [5]"});
  expect_error(g, "aten.add.Tensor", {r9, f34}, {"'self' has rank 9"});
  expect_error(g, "aten.mul.Tensor", {f34, 2.0}, {"'other' must be a Tensor", "Double 2"});
  expect_error(g, "aten.mul.Tensor", {f34, f34, f34}, {"at most 2 arguments, got 3"});
  expect_error(g, "aten.logical_not.default", {}, {"missing argument 0 'self'"});
}

// Over maxStorageBufferBindingSize the work is split (recorded only here;
// tests/ops/binding_split_test runs the splits); over maxBufferSize a
// result cannot exist.
TEST(BinaryOps, SplitsTensorsOverBindingLimit) {
  Graph g(ctx());
  const uint64_t limit = ctx().limits().max_storage_buffer_binding_size;
  TensorRef x = g.add_tensor({int64_t(limit / 4 + 4)}, DType::F32, TensorKind::Input);  // never allocated
  TensorRef one = g.add_tensor({1}, DType::F32, TensorKind::Input);
  ops::call(g, "aten.add.Tensor", {x, one});
  EXPECT_EQ(g.dispatches().size(), 2u);
  const uint64_t most = ctx().limits().max_buffer_size;
  if (most / 4 > UINT32_MAX - 1024) return;  // 32-bit indexing gives out first
  TensorRef col = g.add_tensor({int64_t(most / 4 / 1024 + 1), 1}, DType::F32, TensorKind::Input);
  TensorRef row = g.add_tensor({1024}, DType::F32, TensorKind::Input);
  expect_error(g, "aten.mul.Tensor", {col, row}, {"maxBufferSize", "the result float32"});
}

// C's pow at the edges: the sign of -0 with odd exponents, 1^y = 1 even for
// NaN, (-1)^+-inf = 1.
TEST(BinaryOps, PowOfSignedZeroOneAndInfinity) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const std::vector<double> x = {-0.0, -0.0, 0.0, -0.0, -0.0, 1, 1, -1, -1, nan, 0.5, 2};
  const std::vector<double> y = {-1, -2, -1, 3, 2, nan, inf, inf, -inf, 0, inf, -inf};
  const std::vector<double> want = {-inf, inf, inf, -0.0, 0, 1, 1, 1, 1, 1, 0, 0};
  Graph g(ctx());
  TensorRef tx = put(g, {12}, x, DType::F32), ty = put(g, {12}, y, DType::F32);
  TensorRef p = ops::call(g, "aten.pow.Tensor_Tensor", {tx, ty}).tensor();
  g.run();
  const auto got = get(g, p);
  EXPECT_TRUE(matches(got, want, 0, 0));
  EXPECT_TRUE(std::signbit(got[3])) << "(-0)^3 is -0";
  EXPECT_FALSE(std::signbit(got[4])) << "(-0)^2 is +0";
}

// Integer division and remainder by zero fail the run in checked mode (the
// default), naming the op and the element; unchecked, WGSL's x / 0 = x and
// x % 0 = 0 are returned. The lanes past the end of the last vec4 group
// are not divisors (5 elements: 3 of the last group's lanes are padding).
TEST(BinaryOps, IntegerDivisionByZeroIsAnErrorInCheckedMode) {
  const std::vector<std::pair<std::string, ValueList>> ops = {{"aten.div.Tensor_mode", {std::string("trunc")}},
                                                             {"aten.div.Tensor_mode", {std::string("floor")}},
                                                             {"aten.remainder.Tensor", {}},
                                                             {"aten.fmod.Tensor", {}}};
  for (DType dt : {DType::I32, DType::I64}) {
    for (const auto& [op, extra] : ops) {
      SCOPED_TRACE(op + " " + dtype_name(dt));
      Graph g(ctx());
      TensorRef x = put(g, {5}, {7, 8, 9, 10, 11}, dt);
      TensorRef y = put(g, {5}, {1, 2, 3, 0, 5}, dt);
      ValueList args{x, y};
      args.insert(args.end(), extra.begin(), extra.end());
      TensorRef r = ops::call(g, op, args).tensor();
      try {
        g.run();
        ADD_FAILURE() << "no error for a division by zero";
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr(op + ": integer division by zero at element 3"));
      }
      // The same graph runs once the divisor has no zero.
      const std::vector<int64_t> ok64 = {1, 2, 3, 4, 5};
      const std::vector<int32_t> ok32 = {1, 2, 3, 4, 5};
      if (dt == DType::I64) g.write(y, ok64.data(), 5 * sizeof(int64_t));
      else g.write(y, ok32.data(), 5 * sizeof(int32_t));
      EXPECT_NO_THROW(g.run());
      EXPECT_EQ(get(g, r)[0], op == "aten.div.Tensor_mode" ? 7 : 0);
    }
    // Unchecked: no check, WGSL's values.
    Graph g(ctx());
    g.set_checked(false);
    TensorRef r = ops::call(g, "aten.div.Tensor_mode", {put(g, {2}, {7, 8}, dt), put(g, {2}, {0, 2}, dt),
                                                        std::string("trunc")}).tensor();
    EXPECT_EQ(g.check_count(), 0u);
    g.run();
    EXPECT_EQ(get(g, r), (std::vector<double>{7, 4}));
  }
}

// wgnn.add_permuted: self + permute(other, dims) read through other's
// strides (no copy), against the reference of the two steps: channels last
// back to first (ConvNeXt's), a broadcast self, negative dims, float16 and
// int32; and the errors.
TEST(BinaryOps, AddOfAPermutedOperand) {
  struct Case {
    Shape x, y;
    IntList dims;
    DType dt;
  };
  const std::vector<Case> cases = {
      {{2, 5, 3, 4}, {2, 3, 4, 5}, {0, 3, 1, 2}, DType::F32},
      {{5, 1, 1}, {1, 3, 4, 5}, {0, -1, 1, 2}, DType::F32},
      {{3, 7}, {7, 3}, {1, 0}, DType::F16},
      {{4, 2, 3}, {3, 4, 2}, {1, 2, 0}, DType::I32},
  };
  uint32_t seed = 900;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("x {} y {} dims {} {}", shape_str(c.x), shape_str(c.y), shape_str(c.dims), dtype_name(c.dt)));
    if (c.dt == DType::F16 && !has_f16()) continue;
    std::vector<float> x = quantize(random_floats(size_t(numel(c.x)), -4, 4, seed++), c.dt);
    std::vector<float> y = quantize(random_floats(size_t(numel(c.y)), -4, 4, seed++), c.dt);
    if (c.dt == DType::I32) {
      for (float& v : x) v = std::round(v);
      for (float& v : y) v = std::round(v);
    }
    Graph g(ctx());
    TensorRef z = ops::call(g, "wgnn.add_permuted.default",
                            {put(g, c.x, std::vector<double>(x.begin(), x.end()), c.dt),
                             put(g, c.y, std::vector<double>(y.begin(), y.end()), c.dt), c.dims})
                      .tensor();
    // The reference: y permuted, then numpy broadcasting.
    const size_t r = c.y.size();
    IntList d = c.dims;
    for (int64_t& v : d) v = v < 0 ? v + int64_t(r) : v;
    Shape ps(r);
    for (size_t k = 0; k < r; ++k) ps[k] = c.y[size_t(d[k])];
    ASSERT_EQ(g.info(z).shape, ps);
    const Shape ys = ops::contiguous_strides(c.y), xs = ops::broadcast_strides(c.x, ps);
    std::vector<double> ref(size_t(numel(ps)));
    for (int64_t i = 0; i < numel(ps); ++i) {
      int64_t rest = i, yo = 0, xo = 0;
      for (size_t k = r; k-- > 0;) {
        const int64_t idx = rest % ps[k];
        rest /= ps[k];
        yo += idx * ys[size_t(d[k])];
        xo += idx * xs[k];
      }
      ref[size_t(i)] = double(x[size_t(xo)]) + double(y[size_t(yo)]);
    }
    g.run();
    const std::vector<double> got = get(g, z);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_NEAR(got[i], ref[i], c.dt == DType::F16 ? 1e-2 * (1 + std::abs(ref[i])) : 1e-6) << "at " << i;
    }
  }
  Graph g(ctx());
  TensorRef a = g.add_tensor({2, 3}, DType::F32, TensorKind::Input), b = g.add_tensor({3, 2}, DType::F32, TensorKind::Input);
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.add_permuted.default", {a, b, IntList{0, 0}}); }),
              HasSubstr("not a permutation"));
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.add_permuted.default", {a, b, IntList{0, 1}}); }),
              HasSubstr("do not broadcast"));
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.add_permuted.default", {a, b}); }), HasSubstr("takes 3 arguments"));
}

// wgnn.silu_mul (passes/fuse_silu_mul: SwiGLU's gate times its up product):
// silu(x) * y against a double reference, float32 and float16; integers
// refused.
TEST(BinaryOps, SiluMulIsTheGateTimesUp) {
  std::vector<double> x, y;
  for (int i = 0; i < 37; ++i) {
    x.push_back(-9.0 + 0.5 * i);
    y.push_back(0.25 * (i % 7) - 0.75);
  }
  for (DType dt : {DType::F32, DType::F16}) {
    if (dt == DType::F16 && !ctx().features().shader_f16) continue;
    SCOPED_TRACE(dtype_name(dt));
    Graph g(ctx());
    TensorRef tx = put(g, {37}, x, dt), ty = put(g, {37}, y, dt);
    TensorRef r = ops::call(g, "wgnn.silu_mul.default", {tx, ty}).tensor();
    g.run();
    const std::vector<double> got = get(g, r);
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = x[i] / (1 + std::exp(-x[i])) * y[i];
      EXPECT_NEAR(got[i], want, dt == DType::F32 ? 1e-5 : 2e-2) << i;
    }
  }
  Graph g(ctx());
  TensorRef ti = put(g, {4}, {1, 2, 3, 4}, DType::I32);
  EXPECT_THROW(ops::call(g, "wgnn.silu_mul.default", {ti, ti}), Error);
}

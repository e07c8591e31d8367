// Unary elementwise ops against a double-precision reference, f32 and f16,
// on sizes that are not multiples of 4, out of place and in place.
#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "op_test_util.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

struct RefOp {
  std::string name;
  std::function<double(double)> f;
  float lo, hi;  // input range
  ValueList extra = {};
  double atol = 1e-6, rtol = 2e-6;
};

double erf_ref(double x) { return std::erf(x); }

const std::vector<RefOp>& ref_ops() {
  static const std::vector<RefOp> ops = {
      {"relu", [](double x) { return x > 0 ? x : 0; }, -4, 4},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -20, 20},
      {"tanh", [](double x) { return std::tanh(x); }, -20, 20, {}, 2e-6, 1e-5},
      {"exp", [](double x) { return std::exp(x); }, -10, 10, {}, 1e-6, 1e-5},
      {"log", [](double x) { return std::log(x); }, 0.01f, 100, {}, 2e-6, 1e-5},
      {"sqrt", [](double x) { return std::sqrt(x); }, 0, 100},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, 0.01f, 100, {}, 1e-6, 1e-5},
      {"neg", [](double x) { return -x; }, -4, 4},
      {"abs", [](double x) { return std::abs(x); }, -4, 4},
      {"sin", [](double x) { return std::sin(x); }, -6, 6, {}, 1e-5, 1e-5},
      {"cos", [](double x) { return std::cos(x); }, -6, 6, {}, 1e-5, 1e-5},
      {"erf", erf_ref, -5, 5, {}, 1e-6, 1e-6},
      {"silu", [](double x) { return x / (1 + std::exp(-x)); }, -20, 20, {}, 1e-6, 1e-5},
      {"hardswish", [](double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }, -5, 5},
      {"hardsigmoid", [](double x) { return std::min(std::max(x / 6 + 0.5, 0.0), 1.0); }, -5, 5},
      {"leaky_relu", [](double x) { return x >= 0 ? x : 0.2 * x; }, -4, 4, {0.2}},
      {"clamp", [](double x) { return std::min(std::max(x, -0.5), 1.5); }, -4, 4, {-0.5, 1.5}},
      {"clamp", [](double x) { return std::max(x, -0.5); }, -4, 4, {-0.5, None{}}},
      {"gelu", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -6, 6, {}, 1e-6, 1e-5},
      {"gelu",
       [](double x) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
       },
       -6, 6, {std::string("tanh")}, 1e-6, 1e-5},
      {"tan", [](double x) { return std::tan(x); }, -1.4f, 1.4f, {}, 1e-5, 1e-5},
      {"asin", [](double x) { return std::asin(x); }, -0.99f, 0.99f, {}, 1e-6, 1e-5},
      {"acos", [](double x) { return std::acos(x); }, -0.99f, 0.99f, {}, 1e-6, 1e-5},
      {"atan", [](double x) { return std::atan(x); }, -10, 10, {}, 1e-6, 1e-5},
      {"sinh", [](double x) { return std::sinh(x); }, -5, 5, {}, 1e-5, 1e-5},
      {"cosh", [](double x) { return std::cosh(x); }, -5, 5, {}, 1e-5, 1e-5},
      {"asinh", [](double x) { return std::asinh(x); }, -10, 10, {}, 1e-6, 1e-5},
      {"acosh", [](double x) { return std::acosh(x); }, 1.01f, 10, {}, 1e-5, 1e-5},
      {"atanh", [](double x) { return std::atanh(x); }, -0.9f, 0.9f, {}, 1e-6, 1e-5},
      {"softsign", [](double x) { return x / (1 + std::abs(x)); }, -5, 5},
      {"threshold", [](double x) { return x > 0.5 ? x : -2.0; }, -3, 3, {0.5, -2.0}},
      {"celu", [](double x) { return std::max(x, 0.0) + std::min(0.0, 1.5 * (std::exp(x / 1.5) - 1)); }, -4, 4,
       {1.5}, 1e-6, 1e-5},
      {"selu", [](double x) { return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (std::exp(x) - 1)); },
       -4, 4, {}, 1e-6, 1e-5},
  };
  return ops;
}

class Unary : public testing::TestWithParam<std::tuple<size_t, size_t, DType>> {};

TEST_P(Unary, MatchesReference) {
  const auto [op_index, n, dtype] = GetParam();
  const RefOp& op = ref_ops()[op_index];
  if (dtype == DType::F16 && !ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  SCOPED_TRACE(op.name + " n=" + std::to_string(n) + " " + dtype_name(dtype));
  Graph g(ctx());
  auto data = quantize(random_floats(n, op.lo, op.hi, uint32_t(op_index * 7919 + n)), dtype);
  TensorRef x = upload(g, {int64_t(n)}, data, dtype);
  ValueList args{x};
  args.insert(args.end(), op.extra.begin(), op.extra.end());
  TensorRef y = ops::call(g, "aten." + op.name + ".default", args).tensor();
  g.run();
  std::vector<double> ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = op.f(data[i]);
  if (dtype == DType::F16) {
    EXPECT_TRUE(all_close(download(g, y), ref, 2e-3, 2e-3));
  } else {
    EXPECT_TRUE(all_close(download(g, y), ref, op.atol, op.rtol));
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, Unary,
                         testing::Combine(testing::Range<size_t>(0, 33), testing::Values<size_t>(1, 5, 1023, 70001),
                                          testing::Values(DType::F32, DType::F16)));

}  // namespace

TEST(UnaryOps, InPlaceReturnsSameTensor) {
  Graph g(ctx());
  auto data = random_floats(1001, -3, 3, 5);
  TensorRef x = upload(g, {7, 11, 13}, data, DType::F32);
  Value r = ops::call(g, "aten.relu_.default", {x});
  EXPECT_EQ(r.tensor().id, x.id);
  g.run();
  std::vector<double> ref(data.size());
  for (size_t i = 0; i < data.size(); ++i) ref[i] = std::max(0.f, data[i]);
  EXPECT_TRUE(all_close(download(g, x), ref, 0, 0));
}

TEST(UnaryOps, ChainOfOpsInOneRun) {
  // sigmoid(relu(x)) recorded as two dispatches of one submission.
  Graph g(ctx());
  auto data = random_floats(4099, -3, 3, 6);
  TensorRef x = upload(g, {4099}, data, DType::F32);
  TensorRef r = ops::call(g, "aten.relu.default", {x}).tensor();
  TensorRef s = ops::call(g, "aten.sigmoid.default", {r}).tensor();
  g.run();
  std::vector<double> ref(data.size());
  for (size_t i = 0; i < data.size(); ++i) ref[i] = 1 / (1 + std::exp(-std::max(0.0, double(data[i]))));
  EXPECT_TRUE(all_close(download(g, s), ref, 1e-6, 2e-6));
}

TEST(UnaryOps, RejectsIntegerInput) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({4}, DType::I32, TensorKind::Input);
  try {
    ops::call(g, "aten.relu.default", {x});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("aten.relu.default"));
    EXPECT_THAT(e.what(), HasSubstr("int32"));
    EXPECT_THAT(e.what(), HasSubstr("float32, float16"));
  }
}

TEST(UnaryOps, RejectsBadGeluApproximation) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({4}, DType::F32, TensorKind::Input);
  EXPECT_THROW(ops::call(g, "aten.gelu.default", {x, std::string("erf")}), Error);
}

TEST(UnaryOps, RejectsNonTensorArgument) {
  Graph g(ctx());
  try {
    ops::call(g, "aten.sigmoid.default", {Value(3.0)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("must be a Tensor"));
    EXPECT_THAT(e.what(), HasSubstr("Double 3"));
  }
}

TEST(OpRegistry, UnknownOpIsNamed) {
  Graph g(ctx());
  try {
    ops::call(g, "aten.frobnicate.default", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown op 'aten.frobnicate.default'"));
  }
  try {
    ops::call(g, "aten.relu.out", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("aten.relu.default"));  // suggests the registered variant
  }
}

namespace {
bool is_nan_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return (u & 0x7fffffffu) > 0x7f800000u;
}
}  // namespace

// NaN is part of an op's meaning (ONNX Runtime and PyTorch keep it): WGSL's
// max / clamp / tanh of NaN gave 0, 0 and -1.
TEST(UnaryOps, NaNStaysNaN) {
  const float nan = std::nanf("");
  const std::vector<std::pair<std::string, ValueList>> cases = {
      {"relu", {}},          {"clamp", {-0.5, 1.5}}, {"clamp", {-0.5, None{}}}, {"hardsigmoid", {}},
      {"tanh", {}},          {"sinh", {}},           {"erf", {}},                {"gelu", {}},
      {"gelu", {std::string("tanh")}}, {"sigmoid", {}}, {"exp", {}}, {"abs", {}}};
  for (DType dt : {DType::F32, DType::F16}) {
    if (dt == DType::F16 && !ctx().features().shader_f16) continue;
    Graph g(ctx());
    TensorRef x = upload(g, {5}, {nan, 1.f, nan, -2.f, nan}, dt);
    std::vector<TensorRef> ys;
    for (const auto& [op, extra] : cases) {
      ValueList args{x};
      args.insert(args.end(), extra.begin(), extra.end());
      ys.push_back(ops::call(g, "aten." + op + ".default", args).tensor());
    }
    g.run();
    for (size_t k = 0; k < cases.size(); ++k) {
      const auto got = download(g, ys[k]);
      SCOPED_TRACE(cases[k].first + " " + dtype_name(dt));
      for (size_t i : {0u, 2u, 4u}) EXPECT_TRUE(is_nan_bits(got[i])) << i << ": " << got[i];
      EXPECT_FALSE(is_nan_bits(got[1]));
      EXPECT_FALSE(is_nan_bits(got[3]));
    }
  }
}

// tanh, sinh and erf keep their relative precision near 0 (tanh(1e-8) was
// off by 200%, erf(1e-8) was 0), and stay accurate where the series hands
// over to the far form.
TEST(UnaryOps, SmallArgumentsKeepRelativePrecision) {
  const std::vector<float> xs = {1e-8f, -1e-8f, 1e-20f, 3e-5f, -2e-3f, 0.1f, -0.3f, 0.49f, 0.5f, -0.51f, 0.9f, 2.f};
  const std::vector<std::pair<std::string, double (*)(double)>> fns = {
      {"tanh", [](double v) { return std::tanh(v); }},
      {"sinh", [](double v) { return std::sinh(v); }},
      {"erf", [](double v) { return std::erf(v); }}};
  Graph g(ctx());
  TensorRef x = upload(g, {int64_t(xs.size())}, xs, DType::F32);
  std::vector<TensorRef> ys;
  for (const auto& f : fns) ys.push_back(ops::call(g, "aten." + f.first + ".default", {x}).tensor());
  g.run();
  for (size_t k = 0; k < fns.size(); ++k) {
    const auto got = download(g, ys[k]);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double ref = fns[k].second(double(xs[i]));
      EXPECT_LE(std::abs(got[i] - ref), 1e-6 * std::abs(ref)) << fns[k].first << "(" << xs[i] << ") = " << got[i]
                                                               << ", want " << ref;
    }
  }
}

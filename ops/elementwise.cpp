// Unary elementwise ops. Each is one line of the table below: its ATen
// name, the WGSL expression of `x` (vec4<f32>), and how its parameters p0
// and p1 come from the op's arguments. One kernel (kernels/unary.wgsl) runs
// them all, vectorized, in f32 math for f32 and f16 storage, in place for the
// ATen `op_` variants.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

constexpr float kInf = 3.4028234e38f;  // WGSL has no infinity literal

struct UnaryOp {
  const char* name;  // ATen base name, e.g. "relu"
  const char* expr;
  // Reads p0, p1 from the arguments after the input tensor (index 1...).
  std::function<std::pair<float, float>(const Args&)> params = nullptr;
};

std::pair<float, float> no_params(const Args&) { return {0.f, 0.f}; }

const std::vector<UnaryOp>& unary_ops() {
  static const std::vector<UnaryOp> ops = {
      {"relu", "select(max(x, vec4<f32>(0.0)), x, isnan4(x))"},
      {"sigmoid", "1.0 / (1.0 + exp(-x))"},
      {"tanh", "tanh4(x)"},
      {"exp", "exp(x)"},
      {"log", "log(x)"},
      {"sqrt", "sqrt(x)"},
      {"rsqrt", "inverseSqrt(x)"},
      {"reciprocal", "1.0 / x"},
      {"neg", "-x"},
      {"abs", "abs(x)"},
      {"sign", "sign(x)"},
      {"floor", "floor(x)"},
      {"ceil", "ceil(x)"},
      {"round", "round(x)"},
      {"sin", "sin(x)"},
      {"cos", "cos(x)"},
      {"tan", "tan(x)"},
      // Through atan2: some drivers' asin/acos are off by 1e-4 near +-1.
      {"asin", "atan2(x, sqrt((1.0 - x) * (1.0 + x)))"},
      {"acos", "atan2(sqrt((1.0 - x) * (1.0 + x)), x)"},
      {"atan", "atan(x)"},
      {"sinh", "sinh4(x)"},
      {"cosh", "cosh(x)"},
      // Explicit forms: some drivers' asinh/acosh cancel badly (x < 0, x near 1).
      {"asinh", "sign(x) * log(abs(x) + sqrt(x * x + 1.0))"},
      {"acosh", "log(x + sqrt((x - 1.0) * (x + 1.0)))"},
      {"atanh", "atanh(x)"},
      {"softsign", "x / (1.0 + abs(x))"},
      {"erf", "erf4(x)"},
      {"silu", "x / (1.0 + exp(-x))"},
      {"softplus", "select(log(1.0 + exp(x)), x, x > vec4<f32>(20.0))"},
      {"hardswish", "x * clamp(x + 3.0, vec4<f32>(0.0), vec4<f32>(6.0)) / 6.0"},
      // hardsigmoid(x) = clamp(p0*x + p1, 0, 1): ATen's 1/6 and 1/2 by default
      // (ONNX HardSigmoid maps alpha, beta onto the same parameters).
      {"hardsigmoid", "select(clamp(p0 * x + p1, vec4<f32>(0.0), vec4<f32>(1.0)), x, isnan4(x))",
       [](const Args& a) {
         return std::pair<float, float>{float(a.scalar(1, "alpha", 1.0 / 6.0)), float(a.scalar(2, "beta", 0.5))};
       }},
      {"leaky_relu", "select(p0 * x, x, x >= vec4<f32>(0.0))",
       [](const Args& a) { return std::pair<float, float>{float(a.scalar(1, "negative_slope", 0.01)), 0.f}; }},
      {"elu", "select(p0 * (exp(x) - 1.0), x, x > vec4<f32>(0.0))",
       [](const Args& a) { return std::pair<float, float>{float(a.scalar(1, "alpha", 1.0)), 0.f}; }},
      // threshold(x, threshold, value): x where x > threshold, else value.
      {"threshold", "select(vec4<f32>(p1), x, x > vec4<f32>(p0))",
       [](const Args& a) {
         return std::pair<float, float>{float(a.scalar(1, "threshold", 0.0)), float(a.scalar(2, "value", 0.0))};
       }},
      {"celu", "max(x, vec4<f32>(0.0)) + min(vec4<f32>(0.0), p0 * (exp(x / p0) - 1.0))",
       [](const Args& a) {
         const double alpha = a.scalar(1, "alpha", 1.0);
         if (alpha == 0) a.fail("argument 'alpha' must not be 0");
         return std::pair<float, float>{float(alpha), 0.f};
       }},
      // selu with ONNX's alpha (p0) and gamma (p1); ATen's constants by default.
      {"selu", "p1 * select(p0 * (exp(x) - 1.0), x, x > vec4<f32>(0.0))",
       [](const Args& a) {
         return std::pair<float, float>{float(a.scalar(1, "alpha", 1.6732632423543772)),
                                        float(a.scalar(2, "scale", 1.0507009873554805))};
       }},
      {"clamp", "select(min(max(x, vec4<f32>(p0)), vec4<f32>(p1)), x, isnan4(x))",
       [](const Args& a) {
         const double lo = a.scalar(1, "min", -kInf), hi = a.scalar(2, "max", kInf);
         if (std::isnan(lo) || std::isnan(hi)) a.fail("min and max must not be NaN");
         return std::pair<float, float>{float(lo), float(hi)};
       }},
      // gelu(x, approximate='none'|'tanh'); p0 = 1 selects the tanh form.
      {"gelu",
       "select(gelu4(x),"
       " 0.5 * x * (1.0 + tanh4(0.7978845608028654 * (x + 0.044715 * x * x * x))), p0 > 0.5)",
       [](const Args& a) {
         const std::string approx = a.string(1, "approximate", "none");
         if (approx != "none" && approx != "tanh") {
           a.fail(fmt::format("argument 'approximate' is '{}'; accepted: 'none', 'tanh'", approx));
         }
         return std::pair<float, float>{approx == "tanh" ? 1.f : 0.f, 0.f};
       }},
  };
  return ops;
}


// A tensor over maxStorageBufferBindingSize is split into spans of whole
// vec4 groups (binding_spans), each bound by byte range and run as its own
// dispatch.
Value run_unary(const UnaryOp& u, bool inplace, std::string_view op, Graph& g, const ValueList& args) {
  Args a{op, args, g};
  TensorRef x = a.tensor(0, "self");
  a.require_float(x, "self");
  const TensorInfo xi = g.info(x);
  const auto [p0, p1] = u.params ? u.params(a) : no_params(a);
  const uint64_t esize = gpu_dtype_size(xi.dtype);
  Subs subs = float_subs(g, xi.dtype, op);
  subs.emplace_back("EXPR", u.expr);
  const gpu::Pipeline& p = kernel(g, "ops/kernels/unary.wgsl", subs, {}, inplace ? "main_inplace" : "main");
  const TensorRef y = inplace ? x : g.add_tensor(xi.shape, xi.dtype);
  const std::string what = fmt::format("{}: argument 'self' {} {}", op, dtype_name(xi.dtype), shape_str(xi.shape));
  for (const Span& s : binding_spans(g, uint64_t(xi.numel()), {esize}, 4, what)) {
    const uint64_t groups = (s.count + 3) / 4;
    auto bind = [&](TensorRef t) { return bind_bytes(g, t, s.start * esize, s.count * esize); };
    Binding params = g.uniform(UnaryParams{uint32_t(groups), p0, p1, 0});
    const gpu::Grid grid = grid_for(g, gpu::ceil_div(groups, 256));
    if (inplace) {
      g.add_dispatch(p, {bind(x), params}, grid, std::string(op), u.name);
    } else {
      g.add_dispatch(p, {bind(y), params, bind(x)}, grid, std::string(op), u.name);
    }
  }
  return y;
}

}  // namespace

// wgnn.round_to_f16(x): float32 x as a float32 -> float16 cast gives it,
// kept in float32 (lib/f16.wgsl cast_f16: to nearest even, overflow to
// infinity, NaN kept). The importer's Cast to float16 on adapters without
// shader-f16, where float16 values are stored as float32.
const UnaryOp& round_to_f16_op() {
  static const UnaryOp op{"round_to_f16", "cast_f16_4(x)"};
  return op;
}

void register_elementwise_ops(OpRegistry& r) {
  r.add("wgnn.round_to_f16.default", [](Graph& g, const ValueList& args) {
    Args a{"wgnn.round_to_f16.default", args, g};
    if (g.info(a.tensor(0, "self")).dtype != DType::F32) a.fail("argument 'self' must be float32");
    return run_unary(round_to_f16_op(), false, "wgnn.round_to_f16.default", g, args);
  });
  for (const UnaryOp& u : unary_ops()) {
    const std::string name = fmt::format("aten.{}.default", u.name);
    const std::string name_ = fmt::format("aten.{}_.default", u.name);
    r.add(name, [&u, name](Graph& g, const ValueList& args) { return run_unary(u, false, name, g, args); });
    r.add(name_, [&u, name_](Graph& g, const ValueList& args) { return run_unary(u, true, name_, g, args); });
  }
}

}  // namespace wgnn::ops

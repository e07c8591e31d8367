// aten.cumsum(self, dim, dtype=None) and its ONNX forms
// wgnn.cumsum.default / wgnn.cumprod.default(self, dim, exclusive=False,
// reverse=False): running sums / products along dim (kernels/cumsum.wgsl,
// one invocation per column). float32 and float16 accumulate in float32;
// int32 and int64 (stored as int32) in 32-bit integers.
#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/uniforms.h"
#include "ops/layout.h"
#include "ops/registry.h"

namespace wgnn::ops {
namespace {


Value scan(Graph& g, const ValueList& args, std::string_view op, bool product) {
  Args a{op, args, g};
  TensorRef x = a.tensor(0, "self");
  const TensorInfo& xi = g.info(x);
  const Shape in = xi.shape;
  const DType dt = xi.dtype;
  require_rank(in, a.op, "self");
  const int64_t rank = int64_t(in.size());
  const int64_t dim = normalize_axis(a.integer(1, "dim", 0), rank == 0 ? 1 : rank, a.op, "dim");
  const bool exclusive = a.boolean(2, "exclusive", false), reverse = a.boolean(3, "reverse", false);
  Subs subs;
  if (dt == DType::F32 || dt == DType::F16) {
    subs = float_subs(g, dt, a.op);
    subs.push_back({"A", "f32"});
  } else if (dt == DType::I32 || dt == DType::I64) {
    subs = {{"T", "i32"}, {"ENABLE", ""}, {"A", "i32"}};
  } else {
    a.fail(fmt::format("argument 'self' has dtype {}; accepted: float32, float16, int32, int64", dtype_name(dt)));
  }
  subs.push_back({"OP", product ? "*" : "+"});
  subs.push_back({"INIT", product ? "1" : "0"});
  if (xi.numel() > INT32_MAX) a.fail(fmt::format("argument 'self' {} has more than 2^31-1 elements", shape_str(in)));
  a.require_fits_binding(x, "self");
  const Shape src = in.empty() ? Shape{1} : in;
  TensorRef y = g.add_tensor(in, dt);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= src[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < src.size(); ++d) inner *= src[d];
  const int64_t n = src[size_t(dim)], cols = outer * inner;
  if (cols == 0 || n == 0) return y;
  CumsumParams p{};
  p.cols = uint32_t(cols), p.n = uint32_t(n), p.inner = uint32_t(inner);
  p.exclusive = exclusive ? 1u : 0u, p.reverse = reverse ? 1u : 0u;
  g.add_dispatch(kernel(g, "ops/kernels/cumsum.wgsl", subs), {Binding::of(y), g.uniform(p), Binding::of(x)},
                 grid_for(g, gpu::ceil_div(uint64_t(cols), 256)), std::string(a.op), product ? "cumprod" : "cumsum");
  return y;
}

}  // namespace

void register_cumsum_ops(OpRegistry& r) {
  // aten.cumsum(self, dim, *, dtype=None): the result keeps self's dtype.
  r.add("aten.cumsum.default", [](Graph& g, const ValueList& args) {
    Args a{"aten.cumsum.default", args, g};
    if (args.size() > 3) a.fail(fmt::format("takes at most 3 arguments (self, dim, dtype), got {}", args.size()));
    if (args.size() == 3 && !args[2].is_none()) a.fail("argument 'dtype' other than None is not supported");
    return scan(g, ValueList(args.begin(), args.begin() + std::min<size_t>(args.size(), 2)), a.op, false);
  });
  r.add("wgnn.cumsum.default", [](Graph& g, const ValueList& args) { return scan(g, args, "wgnn.cumsum.default", false); });
  r.add("wgnn.cumprod.default", [](Graph& g, const ValueList& args) { return scan(g, args, "wgnn.cumprod.default", true); });
}

}  // namespace wgnn::ops

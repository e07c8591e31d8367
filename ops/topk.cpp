// aten.topk(self, k, dim=-1, largest=True, sorted=True) -> (values, indices):
// the k largest (or smallest) values along dim, in order (largest first, or
// smallest first), ties by the lower index as ONNX Runtime breaks them;
// indices int64. Results are always sorted (ONNX leaves the order free
// when sorted is 0). Two dispatches (kernels/topk_select.wgsl,
// kernels/topk_sort.wgsl): one workgroup per row chooses the k kept
// elements (a radix select over order keys, so rows of any length), then one
// invocation per kept element ranks it among the k. float32, float16,
// int32, int64 (int64 values within int32, as wgnn stores them).
#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/uniforms.h"
#include "ops/layout.h"
#include "ops/registry.h"

namespace wgnn::ops {
namespace {


Value topk(Graph& g, const ValueList& args) {
  Args a{"aten.topk.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const int64_t k = a.integer(1, "k", -1);
  const TensorInfo& xi = g.info(x);
  const Shape in = xi.shape;
  const DType dt = xi.dtype;
  require_rank(in, a.op, "self");
  const int64_t rank = int64_t(in.size());
  const int64_t dim = normalize_axis(a.integer(2, "dim", -1), rank == 0 ? 1 : rank, a.op, "dim");
  const bool largest = a.boolean(3, "largest", true);
  (void)a.boolean(4, "sorted", true);
  if (dt != DType::F32 && dt != DType::F16 && dt != DType::I32 && dt != DType::I64) {
    a.fail(fmt::format("argument 'self' has dtype {}; accepted: float32, float16, int32, int64", dtype_name(dt)));
  }
  const Shape src = in.empty() ? Shape{1} : in;
  const int64_t n = src[size_t(dim)];
  if (k < 0 || k > n) {
    a.fail(fmt::format("argument 'k' is {}; accepted: 0 to {} (the size of dim {} of self {})", k, n, dim,
                       shape_str(in)));
  }
  if (xi.numel() > INT32_MAX) a.fail(fmt::format("argument 'self' {} has more than 2^31-1 elements", shape_str(in)));
  a.require_fits_binding(x, "self");
  Shape out = src;
  out[size_t(dim)] = k;
  if (in.empty()) out = {};
  TensorRef values = g.add_tensor(out, dt);
  TensorRef indices = g.add_tensor(out, DType::I64);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= src[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < src.size(); ++d) inner *= src[d];
  const int64_t rows = outer * inner;
  if (rows == 0 || k == 0) return ValueList{values, indices};
  const bool ints = dt == DType::I32 || dt == DType::I64;
  const Subs subs = ints ? Subs{{"T", "i32"}, {"ENABLE", ""}} : float_subs(g, dt, a.op);
  const gpu::Constants consts = {{"INTS", ints ? 1.0 : 0.0}};
  TensorRef sel = g.add_tensor({rows, k}, DType::I32);
  a.require_fits_binding(sel, "the kept positions");
  a.require_fits_binding(values, "the result");
  TopkParams p{};
  p.rows_or_count = uint32_t(rows), p.n = uint32_t(n), p.inner = uint32_t(inner), p.k = uint32_t(k);
  p.largest = largest ? 1u : 0u;
  g.add_dispatch(kernel(g, "ops/kernels/topk_select.wgsl", subs, consts),
                 {Binding::of(sel), g.uniform(p), Binding::of(x)}, grid_for(g, uint64_t(rows)),
                 std::string(a.op), "topk_select");
  TopkParams q = p;
  q.rows_or_count = uint32_t(rows * k);
  g.add_dispatch(kernel(g, "ops/kernels/topk_sort.wgsl", subs, consts),
                 {Binding::of(values), Binding::of(indices), g.uniform(q), Binding::of(x),
                  Binding::of(sel)},
                 grid_for(g, gpu::ceil_div(uint64_t(rows * k), 256)), std::string(a.op), "topk_sort");
  return ValueList{values, indices};
}

}  // namespace

void register_topk_ops(OpRegistry& r) { r.add("aten.topk.default", topk); }

}  // namespace wgnn::ops

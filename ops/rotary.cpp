// wgnn.rotary_half.default(x, cos, sin, half) -> out: rotary position
// embedding as transformers' Llama, Qwen2, Mistral, Phi-3 and Gemma write it,
//   out = x * cos + cat(-x[..., half:], x[..., :half]) * sin,
// over x's last dim of width 2 * half, with cos and sin broadcast to x's
// shape (cos [batch, 1, tokens, width] against q [batch, heads, tokens,
// width]). One dispatch where the written-out form takes seven (two slices, a
// negation, a concatenation, two products and a sum): passes/fuse_rotary
// finds that form. float32 or float16; cos and sin of x's dtype.
//
// wgnn.rotary_pairs.default(x, cos, sin) -> out: the interleaved form
// (Meta's and ExecuTorch's Llama, et_vk.apply_rotary_emb): each pair
// (x[2k], x[2k+1]) of the last dim rotated by angle k,
//   out[2k] = x[2k] cos[k] - x[2k+1] sin[k], out[2k+1] = x[2k+1] cos[k] + x[2k] sin[k],
// cos and sin broadcast to x's shape with its last dim halved (cos [tokens,
// 1, width / 2] against q [batch, tokens, heads, width]).
#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/layout.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

Value rotary(Graph& g, const ValueList& args, bool pairs) {
  const std::string op = pairs ? "wgnn.rotary_pairs.default" : "wgnn.rotary_half.default";
  Args a{op, args, g};
  const TensorRef x = a.tensor(0, "self"), cs = a.tensor(1, "cos"), sn = a.tensor(2, "sin");
  a.require_float(x, "self");
  const TensorInfo xi = g.info(x);
  const int64_t half = pairs ? (xi.shape.empty() ? -1 : xi.shape.back() / 2) : a.integer(3, "half", -1);
  if (xi.shape.empty() || half < 1 || xi.shape.back() != 2 * half) {
    a.fail(pairs ? fmt::format("argument 'self' {} must have an even last dim", shape_str(xi.shape))
                 : fmt::format("argument 'self' {} must have a last dim of 2 * half = {}", shape_str(xi.shape), 2 * half));
  }
  // The grid cos and sin are read over: x's shape, or its pairs'.
  Shape grid = xi.shape;
  if (pairs) grid.back() = half;
  if (int64_t(xi.shape.size()) > kMaxRank) a.fail(fmt::format("argument 'self' has rank above {}", kMaxRank));
  for (auto [t, name] : {std::pair{cs, "cos"}, std::pair{sn, "sin"}}) {
    const TensorInfo& ti = g.info(t);
    if (ti.dtype != xi.dtype) {
      a.fail(fmt::format("argument '{}' is {}; expected self's {}", name, dtype_name(ti.dtype), dtype_name(xi.dtype)));
    }
    if (ti.shape.size() > grid.size() || broadcast_shapes(ti.shape, grid, op) != grid) {
      a.fail(fmt::format("argument '{}' {} does not broadcast to {}", name, shape_str(ti.shape), shape_str(grid)));
    }
    a.require_fits_binding(t, name);
  }
  a.require_fits_binding(x, "self");
  if (xi.numel() > 0xFFFFFFFFll) a.fail("argument 'self' is too large for 32-bit indexing");
  const TensorRef y = g.add_tensor(xi.shape, xi.dtype);
  if (xi.numel() == 0) return y;
  const gpu::Pipeline& p = kernel(g, "ops/kernels/rotary_half.wgsl", float_subs(g, xi.dtype, op));
  Binding params = g.uniform(RotaryParams{uint32_t(xi.numel()), uint32_t(xi.shape.size()), uint32_t(half),
                                          uint32_t(pairs), pack(grid, op),
                                          pack(broadcast_strides(g.info(cs).shape, grid), op),
                                          pack(broadcast_strides(g.info(sn).shape, grid), op)});
  g.add_dispatch(p, {Binding::of(y), params, Binding::of(x), Binding::of(cs), Binding::of(sn)},
                 grid_for(g, gpu::ceil_div(uint64_t(xi.numel()), 256)), op, pairs ? "rotary_pairs" : "rotary_half");
  return y;
}

}  // namespace

void register_rotary_ops(OpRegistry& r) {
  r.add("wgnn.rotary_half.default", [](Graph& g, const ValueList& args) { return rotary(g, args, false); });
  r.add("wgnn.rotary_pairs.default", [](Graph& g, const ValueList& args) { return rotary(g, args, true); });
}

}  // namespace wgnn::ops

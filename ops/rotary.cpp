// wgnn.rotary_half.default(x, cos, sin, half) -> out: rotary position
// embedding as transformers' Llama, Qwen2, Mistral, Phi-3 and Gemma write it,
//   out = x * cos + cat(-x[..., half:], x[..., :half]) * sin,
// over x's last dim of width 2 * half, with cos and sin broadcast to x's
// shape (cos [batch, 1, tokens, width] against q [batch, heads, tokens,
// width]). One dispatch where the written-out form takes seven (two slices, a
// negation, a concatenation, two products and a sum): passes/fuse_rotary
// finds that form. float32 or float16; cos and sin of x's dtype.
#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/layout.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

Value rotary_half(Graph& g, const ValueList& args) {
  const std::string op = "wgnn.rotary_half.default";
  Args a{op, args, g};
  const TensorRef x = a.tensor(0, "self"), cs = a.tensor(1, "cos"), sn = a.tensor(2, "sin");
  const int64_t half = a.integer(3, "half", -1);
  a.require_float(x, "self");
  const TensorInfo xi = g.info(x);
  if (xi.shape.empty() || half < 1 || xi.shape.back() != 2 * half) {
    a.fail(fmt::format("argument 'self' {} must have a last dim of 2 * half = {}", shape_str(xi.shape), 2 * half));
  }
  if (int64_t(xi.shape.size()) > kMaxRank) a.fail(fmt::format("argument 'self' has rank above {}", kMaxRank));
  for (auto [t, name] : {std::pair{cs, "cos"}, std::pair{sn, "sin"}}) {
    const TensorInfo& ti = g.info(t);
    if (ti.dtype != xi.dtype) {
      a.fail(fmt::format("argument '{}' is {}; expected self's {}", name, dtype_name(ti.dtype), dtype_name(xi.dtype)));
    }
    if (ti.shape.size() > xi.shape.size() || broadcast_shapes(ti.shape, xi.shape, op) != xi.shape) {
      a.fail(fmt::format("argument '{}' {} does not broadcast to self's shape {}", name, shape_str(ti.shape),
                         shape_str(xi.shape)));
    }
    a.require_fits_binding(t, name);
  }
  a.require_fits_binding(x, "self");
  if (xi.numel() > 0xFFFFFFFFll) a.fail("argument 'self' is too large for 32-bit indexing");
  const TensorRef y = g.add_tensor(xi.shape, xi.dtype);
  if (xi.numel() == 0) return y;
  const gpu::Pipeline& p = kernel(g, "ops/kernels/rotary_half.wgsl", float_subs(g, xi.dtype, op));
  Binding params = g.uniform(RotaryParams{uint32_t(xi.numel()), uint32_t(xi.shape.size()), uint32_t(half), 0,
                                          pack(xi.shape, op), pack(broadcast_strides(g.info(cs).shape, xi.shape), op),
                                          pack(broadcast_strides(g.info(sn).shape, xi.shape), op)});
  g.add_dispatch(p, {Binding::of(y), params, Binding::of(x), Binding::of(cs), Binding::of(sn)},
                 grid_for(g, gpu::ceil_div(uint64_t(xi.numel()), 256)), op, "rotary_half");
  return y;
}

}  // namespace

void register_rotary_ops(OpRegistry& r) { r.add("wgnn.rotary_half.default", rotary_half); }

}  // namespace wgnn::ops

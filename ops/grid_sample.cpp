// aten.grid_sampler_2d(input, grid, interpolation_mode, padding_mode,
// align_corners) (ONNX GridSample, 4-D): input [N, C, H, W], grid
// [N, OH, OW, 2] of (x, y) in [-1, 1] -> [N, C, OH, OW].
// interpolation_mode 0 bilinear, 1 nearest, 2 bicubic; padding_mode 0
// zeros, 1 border, 2 reflection (ATen's codes). float32 and float16
// (kernels/grid_sample.wgsl, float32 arithmetic).
#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/uniforms.h"
#include "ops/registry.h"

namespace wgnn::ops {
namespace {


Value grid_sampler_2d(Graph& g, const ValueList& args) {
  Args a{"aten.grid_sampler_2d.default", args, g};
  TensorRef x = a.tensor(0, "input");
  TensorRef grid = a.tensor(1, "grid");
  const int64_t mode = a.integer(2, "interpolation_mode", 0);
  const int64_t pad = a.integer(3, "padding_mode", 0);
  const bool align = a.boolean(4, "align_corners", false);
  a.require_float(x, "input");
  a.require_float(grid, "grid");
  if (g.info(grid).dtype != g.info(x).dtype) {
    a.fail(fmt::format("argument 'grid' has dtype {} but input has {}", dtype_name(g.info(grid).dtype),
                       dtype_name(g.info(x).dtype)));
  }
  if (mode < 0 || mode > 2) a.fail(fmt::format("argument 'interpolation_mode' is {}; accepted: 0 bilinear, 1 nearest, 2 bicubic", mode));
  if (pad < 0 || pad > 2) a.fail(fmt::format("argument 'padding_mode' is {}; accepted: 0 zeros, 1 border, 2 reflection", pad));
  const Shape xs = g.info(x).shape, gs = g.info(grid).shape;
  if (xs.size() != 4 || gs.size() != 4 || gs[0] != xs[0] || gs[3] != 2) {
    a.fail(fmt::format("input {} and grid {}: accepted input [N, C, H, W] and grid [N, OH, OW, 2]", shape_str(xs),
                       shape_str(gs)));
  }
  a.require_fits_binding(x, "input");
  a.require_fits_binding(grid, "grid");
  const Shape out{xs[0], xs[1], gs[1], gs[2]};
  TensorRef y = g.add_tensor(out, g.info(x).dtype);
  a.require_fits_binding(y, "the result");
  const int64_t count = numel(out);
  if (count == 0) return y;
  if (count > INT32_MAX || xs[2] * xs[3] == 0) {
    a.fail(fmt::format("input {} and grid {}: the image must not be empty and the result at most 2^31-1 elements",
                       shape_str(xs), shape_str(gs)));
  }
  GridSampleParams p{uint32_t(count), uint32_t(xs[1]), uint32_t(xs[2]), uint32_t(xs[3]),
                     uint32_t(gs[1]),  uint32_t(gs[2]), align ? 1u : 0u, 0u};
  const uint32_t kmode = mode == 0 ? 0u : mode == 1 ? 1u : 2u;
  g.add_dispatch(kernel(g, "ops/kernels/grid_sample.wgsl", float_subs(g, g.info(x).dtype, a.op),
                        {{"MODE", double(kmode)}, {"PAD", double(pad)}}),
                 {Binding::of(y), g.uniform(p), Binding::of(x), Binding::of(grid)},
                 grid_for(g, gpu::ceil_div(uint64_t(count), 256)), std::string(a.op), "grid_sample");
  return y;
}

}  // namespace

void register_grid_sample_ops(OpRegistry& r) { r.add("aten.grid_sampler_2d.default", grid_sampler_2d); }

}  // namespace wgnn::ops

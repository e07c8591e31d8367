// aten.grid_sampler_2d(input, grid, interpolation_mode, padding_mode,
// align_corners) (ONNX GridSample, 4-D): input [N, C, H, W], grid
// [N, OH, OW, 2] of (x, y) in [-1, 1] -> [N, C, OH, OW].
// interpolation_mode 0 bilinear, 1 nearest, 2 bicubic; padding_mode 0
// zeros, 1 border, 2 reflection (ATen's codes). float32 and float16
// (kernels/grid_sample.wgsl, float32 arithmetic). And wgnn.roi_align (ONNX
// RoiAlign), below.
#include <fmt/format.h>

#include <optional>

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

// wgnn.roi_align.default(input, rois, batch_indices, output_height,
// output_width, sampling_ratio, spatial_scale, mode_max, half_pixel) (ONNX
// RoiAlign): input [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices
// [R] (int32 / int64) -> [R, C, output_height, output_width]
// (kernels/roi_align.wgsl). Batch indices outside [0, N) fail the run in
// checked mode.
Value roi_align(Graph& g, const ValueList& args) {
  Args a{"wgnn.roi_align.default", args, g};
  if (args.size() != 9) a.fail(fmt::format("takes 9 arguments, got {}", args.size()));
  TensorRef x = a.tensor(0, "input");
  TensorRef rois = a.tensor(1, "rois");
  TensorRef bi = a.tensor(2, "batch_indices");
  const int64_t oh = a.integer(3, "output_height", 1), ow = a.integer(4, "output_width", 1);
  const int64_t sampling = a.integer(5, "sampling_ratio", 0);
  const double scale = a.scalar(6, "spatial_scale", 1.0);
  const bool mode_max = a.boolean(7, "mode_max", false), half_pixel = a.boolean(8, "half_pixel", true);
  a.require_float(x, "input");
  if (g.info(rois).dtype != g.info(x).dtype) {
    a.fail(fmt::format("argument 'rois' has dtype {} but input has {}", dtype_name(g.info(rois).dtype),
                       dtype_name(g.info(x).dtype)));
  }
  const DType bd = g.info(bi).dtype;
  if (bd != DType::I32 && bd != DType::I64) a.fail(fmt::format("argument 'batch_indices' has dtype {}; accepted: int32, int64", dtype_name(bd)));
  const Shape xs = g.info(x).shape, rs = g.info(rois).shape, bs = g.info(bi).shape;
  if (xs.size() != 4 || rs.size() != 2 || rs[1] != 4 || bs != Shape{rs[0]}) {
    a.fail(fmt::format("input {}, rois {}, batch_indices {}: accepted input [N, C, H, W], rois [R, 4], batch_indices [R]",
                       shape_str(xs), shape_str(rs), shape_str(bs)));
  }
  if (oh <= 0 || ow <= 0 || sampling < 0) {
    a.fail(fmt::format("output size {}x{} must be positive and sampling_ratio {} at least 0", oh, ow, sampling));
  }
  a.require_fits_binding(x, "input");
  const Shape out{rs[0], xs[1], oh, ow};
  TensorRef y = g.add_tensor(out, g.info(x).dtype);
  a.require_fits_binding(y, "the result");
  const int64_t count = numel(out);
  if (count == 0) return y;
  if (count > INT32_MAX || xs[2] * xs[3] == 0) {
    a.fail(fmt::format("input {} and result {}: the image must not be empty and the result at most 2^31-1 elements",
                       shape_str(xs), shape_str(out)));
  }
  std::optional<Graph::Check> chk;
  if (g.checked() && g.info(bi).kind != TensorKind::Constant) {
    chk = g.add_check(fmt::format("{}: batch index {{}} is out of range (input {})", a.op, shape_str(xs)));
  }
  RoiAlignParams p{};
  p.count = uint32_t(count), p.C = uint32_t(xs[1]), p.H = uint32_t(xs[2]), p.W = uint32_t(xs[3]);
  p.OH = uint32_t(oh), p.OW = uint32_t(ow), p.N = uint32_t(xs[0]), p.sampling = uint32_t(sampling);
  p.scale = float(scale);
  if (chk) p.check_slot = chk->slot;
  Subs subs = float_subs(g, g.info(x).dtype, a.op);
  for (auto& s : check_subs(chk.has_value(), 5)) subs.push_back(std::move(s));
  std::vector<Binding> bind = {Binding::of(y), g.uniform(p), Binding::of(x), Binding::of(rois), Binding::of(bi)};
  if (chk) bind.push_back(Binding::of(chk->flags));
  g.add_dispatch(kernel(g, "ops/kernels/roi_align.wgsl", subs,
                        {{"MAX_MODE", mode_max ? 1.0 : 0.0}, {"HALF_PIXEL", half_pixel ? 1.0 : 0.0}}),
                 std::move(bind), grid_for(g, gpu::ceil_div(uint64_t(count), 256)), std::string(a.op), "roi_align");
  return y;
}

}  // namespace

void register_grid_sample_ops(OpRegistry& r) {
  r.add("aten.grid_sampler_2d.default", grid_sampler_2d);
  r.add("wgnn.roi_align.default", roi_align);
}

}  // namespace wgnn::ops

// The windows of window attention (Swin, DaViT), each one dispatch of
// kernels/window.wgsl where the exported graph has a pad, a view, a permute
// (a copy) and a view before the attention, and a view, a permute, a view,
// crops (a copy each) and the residual add after it
// (passes/fuse_window_partition.cpp makes these ops):
//
// wgnn.window_partition.default(input, window): input [B, H, W, C] in
// windows of window = [WH, WW], padded with zeros to whole windows:
// [B, NH, NW, WH, WW, C] with NH = ceil(H / WH), NW = ceil(W / WW).
//
// wgnn.window_reverse.default(windows, size, residual=None): windows
// [B, NH, NW, WH, WW, C] back to [B, H, W, C] for size = [H, W] (at most
// NH * WH by NW * WW: the padding cropped), plus residual where given (of
// shape [B, H, W, C] or [B, H * W, C], the result's shape then; float
// dtypes, added as the separate add would, in f32 then rounded).
//
// Float32 or float16 with C a multiple of 4 (the kernel moves four
// elements at a time); anything else is refused.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/helpers.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

void require_channels(const Args& a, TensorRef t, std::string_view name) {
  a.require_float(t, name);
  const int64_t c = a.g.info(t).shape.back();
  if (c % 4 != 0) {
    a.fail(fmt::format("argument '{}' has {} channels (its last dim); accepted: a multiple of 4", name, c));
  }
  a.require_fits_binding(t, name);
}

IntList pair(const Args& a, size_t i, std::string_view name) {
  const IntList v = a.int_list(i, name);
  if (v.size() != 2 || v[0] < 1 || v[1] < 1) {
    a.fail(fmt::format("argument '{}' is [{}]; accepted: two positive sizes", name, fmt::join(v, ", ")));
  }
  return v;
}

void record(const Args& a, TensorRef y, TensorRef x, TensorRef res, WindowParams p, bool reverse) {
  Graph& g = a.g;
  const DType dt = g.info(x).dtype;
  const uint64_t count = uint64_t(g.info(y).numel()) / 4;
  if (count > UINT32_MAX) a.fail(fmt::format("the result {} has more than 2^34 elements", shape_str(g.info(y).shape)));
  if (count == 0) return;
  p.count = uint32_t(count);
  p.has_res = res.id >= 0;
  const Binding r = res.id >= 0 ? Binding::of(res) : Binding::of(g.ctx().dummy_buffer());
  g.add_dispatch(kernel(g, "ops/kernels/window.wgsl", float_subs(g, dt, a.op), {{"REVERSE", reverse ? 1.0 : 0.0}}),
                 {Binding::of(y), g.uniform(p), Binding::of(x), r}, grid_for(g, gpu::ceil_div(count, 256)),
                 std::string(a.op),
                 fmt::format("window {} {}x{}{}", reverse ? "reverse" : "partition", p.wh, p.ww,
                             res.id >= 0 ? " residual" : ""));
}

Value window_partition(Graph& g, const ValueList& args) {
  Args a{"wgnn.window_partition.default", args, g};
  if (args.size() != 2) a.fail(fmt::format("takes 2 arguments (input, window), got {}", args.size()));
  const TensorRef x = a.tensor(0, "input");
  const Shape xs = g.info(x).shape;
  if (xs.size() != 4) a.fail(fmt::format("argument 'input' has shape {}; expected [B, H, W, C]", shape_str(xs)));
  require_channels(a, x, "input");
  const IntList win = pair(a, 1, "window");
  const int64_t nh = (xs[1] + win[0] - 1) / win[0], nw = (xs[2] + win[1] - 1) / win[1];
  const TensorRef y = g.add_tensor({xs[0], nh, nw, win[0], win[1], xs[3]}, g.info(x).dtype);
  WindowParams p{};
  p.h = uint32_t(xs[1]), p.w = uint32_t(xs[2]), p.c4 = uint32_t(xs[3] / 4);
  p.wh = uint32_t(win[0]), p.ww = uint32_t(win[1]), p.nh = uint32_t(nh), p.nw = uint32_t(nw);
  a.require_fits_binding(y, "result");
  record(a, y, x, TensorRef{-1}, p, false);
  return y;
}

Value window_reverse(Graph& g, const ValueList& args) {
  Args a{"wgnn.window_reverse.default", args, g};
  if (args.size() < 2 || args.size() > 3) {
    a.fail(fmt::format("takes 2 or 3 arguments (windows, size, residual=None), got {}", args.size()));
  }
  const TensorRef x = a.tensor(0, "windows");
  const Shape xs = g.info(x).shape;
  if (xs.size() != 6) {
    a.fail(fmt::format("argument 'windows' has shape {}; expected [B, NH, NW, WH, WW, C]", shape_str(xs)));
  }
  require_channels(a, x, "windows");
  const IntList size = pair(a, 1, "size");
  if (size[0] > xs[1] * xs[3] || size[1] > xs[2] * xs[4]) {
    a.fail(fmt::format("argument 'size' [{}, {}] is larger than the windows' {} x {}", size[0], size[1],
                       xs[1] * xs[3], xs[2] * xs[4]));
  }
  Shape out{xs[0], size[0], size[1], xs[5]};
  const TensorRef res = a.optional_tensor(2, "residual");
  if (res.id >= 0) {
    const TensorInfo& ri = g.info(res);
    const Shape rows{xs[0], size[0] * size[1], xs[5]};
    if (ri.dtype != g.info(x).dtype || (ri.shape != out && ri.shape != rows)) {
      a.fail(fmt::format("argument 'residual' is {} {}; expected {} {} or {}", dtype_name(ri.dtype),
                         shape_str(ri.shape), dtype_name(g.info(x).dtype), shape_str(out), shape_str(rows)));
    }
    a.require_fits_binding(res, "residual");
    out = ri.shape;
  }
  const TensorRef y = g.add_tensor(out, g.info(x).dtype);
  WindowParams p{};
  p.h = uint32_t(size[0]), p.w = uint32_t(size[1]), p.c4 = uint32_t(xs[5] / 4);
  p.wh = uint32_t(xs[3]), p.ww = uint32_t(xs[4]), p.nh = uint32_t(xs[1]), p.nw = uint32_t(xs[2]);
  a.require_fits_binding(y, "result");
  record(a, y, x, res, p, true);
  return y;
}

}  // namespace

void register_window_ops(OpRegistry& r) {
  r.add("wgnn.window_partition.default", window_partition);
  r.add("wgnn.window_reverse.default", window_reverse);
}

}  // namespace wgnn::ops

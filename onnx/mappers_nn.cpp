// Neural-network ONNX operators: normalizations (Layer, Batch, Instance, Group, LRN, MeanVariance), Conv and ConvTranspose, pooling, MatMul and Gemm, Resize and Upsample.
// Internal to onnx/: added to the op table by make_mappers() (onnx/mappers.cpp);
// the helpers they share are in onnx/mapper_util.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "onnx/host_ops.h"
#include "onnx/mapper_util.h"
#include "onnx/node_ctx.h"
#include "onnx/subgraph.h"
#include "onnx/tensor_proto.h"
#include "ops/layout.h"

namespace wgnn::onnx_import {

namespace {

// ---- convolution and pooling --------------------------------------------------

// The spatial dims of a Conv / pooling input (N, C, spatial...): 1 to 3.
size_t spatial_dims(NodeCtx& c) {
  const Shape& s = c.shape(0);
  if (s.size() < 3 || s.size() > 5) {
    c.unsupported(fmt::format("input {} has {} spatial dims; supported: 1 to 3 (rank 3 to 5)", shape_str(s),
                              s.size() < 2 ? 0 : s.size() - 2));
  }
  return s.size() - 2;
}

}  // namespace

std::vector<int64_t> spatial_attr(NodeCtx& c, const char* name, size_t d, int64_t def) {
  std::vector<int64_t> v = c.attr_ints(name);
  if (v.empty()) return std::vector<int64_t>(d, def);
  if (v.size() != d) c.fail(fmt::format("attribute '{}' has {} values; expected {}", name, v.size(), d));
  return v;
}

std::vector<int64_t> window_pads(NodeCtx& c, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                 const std::vector<int64_t>& dilations) {
  const size_t d = kernel.size();
  const Shape& s = c.shape(0);
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET" || auto_pad.empty()) {
    std::vector<int64_t> pads = c.attr_ints("pads");
    if (pads.empty()) return std::vector<int64_t>(2 * d, 0);
    if (pads.size() != 2 * d) c.fail(fmt::format("attribute 'pads' has {} values; expected {}", pads.size(), 2 * d));
    for (int64_t p : pads) {
      if (p < 0) c.fail(fmt::format("attribute 'pads' {} has a negative value", shape_str(pads)));
    }
    return pads;
  }
  if (auto_pad == "VALID") return std::vector<int64_t>(2 * d, 0);
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    c.fail(fmt::format("attribute 'auto_pad' is '{}'; accepted: NOTSET, SAME_UPPER, SAME_LOWER, VALID", auto_pad));
  }
  std::vector<int64_t> pads(2 * d, 0);
  for (size_t i = 0; i < d; ++i) {
    const int64_t in = s[2 + i], st = strides[i];
    const int64_t out = (in + st - 1) / st;
    const int64_t total = std::max<int64_t>(0, (out - 1) * st + (kernel[i] - 1) * dilations[i] + 1 - in);
    const int64_t small = total / 2, large = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : large;
    pads[d + i] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

namespace {

bool symmetric(const std::vector<int64_t>& pads) {
  const size_t d = pads.size() / 2;
  return std::equal(pads.begin(), pads.begin() + long(d), pads.begin() + long(d));
}

std::vector<int64_t> kernel_shape(NodeCtx& c, size_t d) {
  std::vector<int64_t> k = c.attr_ints("kernel_shape");
  if (k.size() != d) c.fail(fmt::format("attribute 'kernel_shape' has {} values; expected {}", k.size(), d));
  return k;
}

OpMapper conv_mapper(bool transposed) {
  OpMapper m;
  m.dtypes = kFloat;
  m.build = [transposed](NodeCtx& c) {
    const size_t d = spatial_dims(c);
    const Shape& xs = c.shape(0);
    const Shape& ws = c.shape(1);
    if (ws.size() != xs.size()) c.fail(fmt::format("weight {} and input {} differ in rank", shape_str(ws), shape_str(xs)));
    std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
    if (c.has_attr("kernel_shape") && c.attr_ints("kernel_shape") != kernel) {
      c.fail(fmt::format("attribute 'kernel_shape' {} does not match weight {}", shape_str(c.attr_ints("kernel_shape")),
                         shape_str(ws)));
    }
    const std::vector<int64_t> strides = spatial_attr(c, "strides", d, 1);
    const std::vector<int64_t> dilations = spatial_attr(c, "dilations", d, 1);
    const int64_t group = c.attr_int("group", 1);
    std::vector<int64_t> out_pad(d, 0), pads;
    if (!transposed) {
      pads = window_pads(c, kernel, strides, dilations);
    } else {
      out_pad = spatial_attr(c, "output_padding", d, 0);
      std::vector<int64_t> out_shape = c.attr_ints("output_shape");
      if (out_shape.size() == d + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
      if (!out_shape.empty() && out_shape.size() != d) {
        c.fail(fmt::format("attribute 'output_shape' has {} values; expected {}", out_shape.size(), d));
      }
      const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
      const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
      if (!out_shape.empty() || same) {
        // Pads that give this output size (ONNX's reference): total =
        // stride * (in - 1) + output_padding + kernel span - out, split in
        // half (floor); SAME_UPPER puts the larger half at the end.
        pads.assign(2 * d, 0);
        for (size_t i = 0; i < d; ++i) {
          const int64_t target = out_shape.empty() ? xs[2 + i] * strides[i] : out_shape[i];
          const int64_t total = strides[i] * (xs[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - target;
          const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor
          pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
          pads[d + i] = total - pads[i];
        }
      } else if (auto_pad == "NOTSET" || auto_pad.empty() || auto_pad == "VALID") {
        pads = auto_pad == "VALID" ? std::vector<int64_t>(2 * d, 0) : c.attr_ints("pads");
        if (pads.empty()) pads.assign(2 * d, 0);
        if (pads.size() != 2 * d) c.fail(fmt::format("attribute 'pads' has {} values; expected {}", pads.size(), 2 * d));
      } else {
        c.fail(fmt::format("attribute 'auto_pad' is '{}'; accepted: NOTSET, SAME_UPPER, SAME_LOWER, VALID", auto_pad));
      }
    }
    bool aten = symmetric(pads);
    for (size_t i = 0; i < d; ++i) {
      aten = aten && pads[i] >= 0 && (out_pad[i] == 0 || out_pad[i] < strides[i] || out_pad[i] < dilations[i]);
    }
    const IntList begin(pads.begin(), pads.begin() + long(d));
    Value r = c.call(aten ? "aten.convolution.default" : "wgnn.convolution_padded.default",
                     {c.tensor(0), c.tensor(1), c.tensor_or_none(2), IntList(strides), aten ? begin : IntList(pads),
                      IntList(dilations), transposed, IntList(out_pad), group});
    return one(c.out(r));
  };
  return m;
}

// The window attributes MaxPool and AveragePool share, with auto_pad
// resolved into explicit begin/end pads.
struct PoolWindow {
  size_t d;
  std::vector<int64_t> kernel, strides, dilations, pads;
  bool ceil_mode;
};

PoolWindow pool_window(NodeCtx& c) {
  PoolWindow w;
  w.d = spatial_dims(c);
  w.kernel = kernel_shape(c, w.d);
  w.strides = spatial_attr(c, "strides", w.d, 1);
  w.dilations = spatial_attr(c, "dilations", w.d, 1);
  w.pads = window_pads(c, w.kernel, w.strides, w.dilations);
  w.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  return w;
}

OpMapper max_pool_mapper() {
  OpMapper m;
  m.dtypes = {DType::F32, DType::F16, DType::U8, DType::I8};
  m.build = [](NodeCtx& c) {
    const PoolWindow w = pool_window(c);
    const size_t d = w.d;
    const std::vector<int64_t>&kernel = w.kernel, &strides = w.strides, &dilations = w.dilations, &pads = w.pads;
    const bool ceil_mode = w.ceil_mode;
    if (c.node.output_size() > 1 && !c.node.output(1).empty()) {
      const int64_t order = c.attr_int("storage_order", 0);
      if (order == 1 && d == 3) c.unsupported("column-major (storage_order 1) Indices of a 3-D MaxPool");
      Value r = c.call("wgnn.max_pool_padded_with_indices.default",
                       {c.tensor(0), IntList(kernel), IntList(strides), IntList(pads), IntList(dilations), ceil_mode,
                        order});
      std::vector<Slot> out;
      for (const Value& v : r.list()) out.push_back(c.out(v));
      return out;
    }
    // ATen's max_pool takes symmetric pads of at most half the effective kernel.
    bool aten = symmetric(pads);
    for (size_t i = 0; i < d; ++i) aten = aten && pads[i] <= ((kernel[i] - 1) * dilations[i] + 1) / 2;
    if (aten) {
      return one(c.out(c.call(fmt::format("aten.max_pool{}d.default", d),
                              {c.tensor(0), IntList(kernel), IntList(strides),
                               IntList(pads.begin(), pads.begin() + long(d)), IntList(dilations), ceil_mode})));
    }
    return one(c.out(c.call("wgnn.max_pool_padded.default", {c.tensor(0), IntList(kernel), IntList(strides),
                                                              IntList(pads), IntList(dilations), ceil_mode})));
  };
  return m;
}

OpMapper avg_pool_mapper() {
  OpMapper m;
  m.dtypes = kFloat;
  m.build = [](NodeCtx& c) {
    const PoolWindow w = pool_window(c);
    const size_t d = w.d;
    const std::vector<int64_t>&kernel = w.kernel, &strides = w.strides, &dilations = w.dilations, &pads = w.pads;
    const bool ceil_mode = w.ceil_mode;
    const bool count_include_pad = c.attr_int("count_include_pad", 0) != 0;
    // ATen's avg_pool: symmetric pads of at most half the kernel, no dilation.
    bool aten = symmetric(pads);
    for (size_t i = 0; i < d; ++i) aten = aten && dilations[i] == 1 && pads[i] <= kernel[i] / 2;
    if (aten) {
      ValueList args{c.tensor(0), IntList(kernel), IntList(strides), IntList(pads.begin(), pads.begin() + long(d)),
                     ceil_mode, count_include_pad};
      if (d > 1) args.emplace_back();  // divisor_override: None (a default Value)
      return one(c.out(c.call(fmt::format("aten.avg_pool{}d.default", d), args)));
    }
    return one(c.out(c.call("wgnn.avg_pool_padded.default", {c.tensor(0), IntList(kernel), IntList(strides),
                                                              IntList(pads), IntList(dilations), ceil_mode,
                                                              count_include_pad})));
  };
  return m;
}

// LpPool: (sum over the window of |x|^p)^(1 / p), the sum a depthwise
// convolution with ones over zero padding. ceil_mode's last window (not
// one that would start in the end padding) comes from more zero padding
// at the end.
OpMapper lp_pool_mapper() {
  OpMapper m;
  m.dtypes = kFloat;
  m.build = [](NodeCtx& c) {
    const PoolWindow w = pool_window(c);
    const size_t d = w.d;
    const Shape& xs = c.shape(0);
    const int64_t p = c.attr_int("p", 2);
    if (p <= 0) c.fail(fmt::format("p {} must be positive", p));
    std::vector<int64_t> pads = w.pads;
    for (size_t i = 0; i < d; ++i) {
      const int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1, in = xs[2 + i];
      const int64_t room = in + pads[i] + pads[d + i] - span;
      if (room < 0) c.fail(fmt::format("the window spans {} but the padded input only {}", span, room + span));
      int64_t out = room / w.strides[i] + 1;
      if (w.ceil_mode) {
        out = (room + w.strides[i] - 1) / w.strides[i] + 1;
        if ((out - 1) * w.strides[i] >= in + pads[i]) --out;
      }
      pads[d + i] = std::max(pads[d + i], (out - 1) * w.strides[i] + span - in - pads[i]);
    }
    const DType dt = c.dtype(0);
    TensorRef x = c.call("aten.abs.default", {c.tensor(0)}).tensor();
    auto power = [&](TensorRef t, double e) {
      return c.call("aten.pow.Tensor_Tensor", {t, c.constant(host::scalar_like(dt, e))}).tensor();
    };
    if (p == 2) x = c.call("aten.mul.Tensor", {x, x}).tensor();
    else if (p != 1) x = power(x, double(p));
    Shape ws{xs[1], 1};
    ws.insert(ws.end(), w.kernel.begin(), w.kernel.end());
    double taps = double(xs[1]);
    for (int64_t k : w.kernel) {
      if (k <= 0) c.fail(fmt::format("kernel size {} must be positive", k));
      taps *= double(k);
    }
    check_built_size(c, taps, 4, "the window of ones");
    HostTensor ones(DType::F32, ws);
    for (int64_t i = 0; i < ones.numel(); ++i) ones.as<float>()[i] = 1.f;
    TensorRef sum = c.call("wgnn.convolution_padded.default",
                           {x, float_table(c, ones), None{},
                            IntList(w.strides), IntList(pads), IntList(w.dilations), false,
                            IntList(std::vector<int64_t>(d, 0)), xs[1]})
                        .tensor();
    if (p == 1) return one(c.out(sum));
    if (p == 2) return one(c.out(c.call("aten.sqrt.default", {sum})));
    return one(c.out(power(sum, 1.0 / double(p))));
  };
  return m;
}

// DeformConv (opset 19, 2-D): each kernel tap reads the input at its
// position plus a learned offset, bilinearly with zeros outside (ONNX's
// reference: GridSample with align_corners), times the mask; then a
// grouped product with the weights. Built from wgnn ops: the sampling grid
// (offsets added to the taps' positions, normalized) on the GPU, one
// aten.grid_sampler_2d over [N * offset_group, C / offset_group, H, W]
// giving the columns [N, C, kH * kW, OH * OW], and a batched product.
std::vector<Slot> deform_conv(NodeCtx& c) {
  const Shape xs = c.shape(0), ws = c.shape(1), os = c.shape(2);
  if (xs.size() != 4) c.unsupported(fmt::format("X {}: only 2-D DeformConv ([N, C, H, W]) is supported", shape_str(xs)));
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t group = c.attr_int("group", 1), og = c.attr_int("offset_group", 1);
  if (ws.size() != 4 || group <= 0 || og <= 0 || ws[1] * group != C || ws[0] % group != 0 || C % og != 0) {
    c.fail(fmt::format("X {}, W {}, group {}, offset_group {}: W must be [OC, C / group, kH, kW], OC a multiple of "
                       "group, C of offset_group", shape_str(xs), shape_str(ws), group, og));
  }
  std::vector<int64_t> k = c.attr_ints("kernel_shape");
  if (k.empty()) k = {ws[2], ws[3]};
  if (k != std::vector<int64_t>{ws[2], ws[3]}) c.fail("kernel_shape differs from W's");
  const std::vector<int64_t> st = spatial_attr(c, "strides", 2, 1), dl = spatial_attr(c, "dilations", 2, 1);
  std::vector<int64_t> pads = c.attr_ints("pads");
  if (pads.empty()) pads.assign(4, 0);
  if (pads.size() != 4) c.fail(fmt::format("attribute 'pads' has {} values; expected 4", pads.size()));
  const int64_t K = k[0] * k[1], OC = ws[0];
  const int64_t OH = (H + pads[0] + pads[2] - ((k[0] - 1) * dl[0] + 1)) / st[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - ((k[1] - 1) * dl[1] + 1)) / st[1] + 1;
  if (os != Shape{N, og * K * 2, OH, OW}) {
    c.fail(fmt::format("offset {} must be [N, offset_group * kH * kW * 2, OH, OW] = [{}, {}, {}, {}]", shape_str(os), N,
                       og * K * 2, OH, OW));
  }
  if (H < 2 || W < 2) c.unsupported(fmt::format("an input of {}x{}: the sampling normalizes by H - 1 and W - 1", H, W));
  const DType dt = c.dtype(0);
  // The taps' positions: y = oh * sh - ph + ki * dh, x = ow * sw - pw + kj * dw,
  // then normalized to [-1, 1] (align_corners): p * 2 / (size - 1) - 1.
  HostTensor by(DType::F32, {1, K, 1, OH, OW}), bx(DType::F32, {1, K, 1, OH, OW});
  for (int64_t t = 0; t < K; ++t)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        by.as<float>()[(t * OH + i) * OW + j] = float(i * st[0] - pads[0] + (t / k[1]) * dl[0]);
        bx.as<float>()[(t * OH + i) * OW + j] = float(j * st[1] - pads[1] + (t % k[1]) * dl[1]);
      }
  auto scalar = [&](double v) { return c.constant(host::scalar_like(dt, v)); };
  TensorRef off = c.view(c.tensor(2), {N * og, K, 2, OH, OW});
  ValueList yx = c.call("aten.split_with_sizes.default", {off, IntList{1, 1}, int64_t(2)}).list();
  auto norm = [&](TensorRef o, const HostTensor& base, int64_t size) {
    TensorRef p = c.call("aten.add.Tensor", {o, float_table(c, base)}).tensor();
    p = c.call("aten.mul.Tensor", {p, scalar(2.0 / double(size - 1))}).tensor();
    return c.call("aten.sub.Tensor", {p, scalar(1.0)}).tensor();
  };
  TensorRef gy = norm(yx[0].tensor(), by, H), gx = norm(yx[1].tensor(), bx, W);
  TensorRef grid = c.call("aten.cat.default", {ValueList{gx, gy}, int64_t(2)}).tensor();  // [N*og, K, 2, OH, OW]
  grid = c.call("aten.permute.default", {grid, IntList{0, 1, 3, 4, 2}}).tensor();
  grid = c.view(grid, {N * og, K * OH, OW, 2});
  TensorRef xv = c.view(c.tensor(0), {N * og, C / og, H, W});
  TensorRef cols = c.call("aten.grid_sampler_2d.default", {xv, grid, int64_t(0), int64_t(0), true}).tensor();
  if (c.has(4)) {
    if (c.shape(4) != Shape{N, og * K, OH, OW}) {
      c.fail(fmt::format("mask {} must be [{}, {}, {}, {}]", shape_str(c.shape(4)), N, og * K, OH, OW));
    }
    TensorRef m = c.view(c.tensor(4), {N, og, 1, K, OH * OW});
    cols = c.call("aten.mul.Tensor", {c.view(cols, {N, og, C / og, K, OH * OW}), m}).tensor();
  }
  TensorRef colv = c.view(cols, {N, group, (C / group) * K, OH * OW});
  TensorRef wv = c.view(c.tensor(1), {group, OC / group, (C / group) * K});
  TensorRef y = c.call("aten.matmul.default", {wv, colv}).tensor();  // [N, group, OC / group, OH * OW]
  y = c.view(y, {N, OC, OH, OW});
  if (c.has(3)) {
    if (c.shape(3) != Shape{OC}) c.fail(fmt::format("B {} must be [{}]", shape_str(c.shape(3)), OC));
    y = c.call("aten.add.Tensor", {y, c.view(c.tensor(3), {1, OC, 1, 1})}).tensor();
  }
  return one(c.out(y));
}

// GlobalAveragePool / GlobalMaxPool over every spatial dim (any number of
// them): 2-D through aten.adaptive_avg_pool2d / aten.max_pool2d, others as
// a 1-D pool over the flattened spatial dims.
OpMapper global_pool_mapper(bool avg) {
  OpMapper m;
  m.dtypes = kFloat;
  m.build = [avg](NodeCtx& c) {
    const Shape& s = c.shape(0);
    if (s.size() < 3) c.fail(fmt::format("input {} has no spatial dims (rank < 3)", shape_str(s)));
    Shape out(s.begin(), s.begin() + 2);
    out.resize(s.size(), 1);
    if (s.size() == 4) {
      if (avg) return one(c.out(c.call("aten.adaptive_avg_pool2d.default", {c.tensor(0), IntList{1, 1}})));
      return one(c.out(c.call("aten.max_pool2d.default", {c.tensor(0), IntList{s[2], s[3]}})));
    }
    const int64_t width = numel(Shape(s.begin() + 2, s.end()));
    TensorRef flat = c.view(c.tensor(0), {s[0], s[1], width});
    Value r = avg ? c.call("aten.adaptive_avg_pool1d.default", {flat, IntList{1}})
                  : c.call("aten.max_pool1d.default", {flat, IntList{width}});
    return one(c.out(c.view(r.tensor(), out)));
  };
  return m;
}

std::vector<Slot> group_normalization(NodeCtx& c) {
  const Shape& s = c.shape(0);
  if (s.size() < 2) c.fail(fmt::format("X {} must be N x C x ...", shape_str(s)));
  if (!c.has_attr("num_groups")) c.fail("attribute num_groups is required");
  if (c.attr_int("stash_type", 1) != 1) c.unsupported("stash_type other than float");
  const int64_t N = s[0], C = s[1], G = c.attr_int("num_groups", 1);
  int64_t hw = 1;
  for (size_t d = 2; d < s.size(); ++d) hw *= s[d];
  const double eps = double(c.attr_float("epsilon", 1e-5f));
  const int64_t want = c.opset >= 21 ? C : G;
  for (size_t i : {size_t(1), size_t(2)}) {
    if (numel(c.shape(i)) != want || c.shape(i).size() != 1) {
      c.fail(fmt::format("{} has shape {}; opset {} expects [{}] (one per {})", i == 1 ? "scale" : "bias",
                         shape_str(c.shape(i)), c.opset, want, c.opset >= 21 ? "channel" : "group"));
    }
    if (c.dtype(i) != c.dtype(0)) c.fail("scale and bias must have X's dtype");
  }
  auto call = [&](Value w, Value b) {
    return c.call("aten.native_group_norm.default", {c.tensor(0), w, b, N, C, hw, G, eps}).list()[0].tensor();
  };
  if (want == C) return one(c.out(call(c.tensor(1), c.tensor(2))));
  if (G <= 0 || C % G != 0) c.fail(fmt::format("num_groups {} must divide C = {}", G, C));
  const int64_t cg = C / G;
  if (c.is_host(1) && c.is_host(2)) {
    auto per_channel = [&](size_t i) {
      const HostTensor& h = c.host(i, i == 1 ? "scale" : "bias");
      HostTensor t(h.dtype, {C});
      const size_t es = dtype_size(h.dtype);
      for (int64_t ch = 0; ch < C; ++ch) std::memcpy(t.data.data() + size_t(ch) * es, h.data.data() + size_t(ch / cg) * es, es);
      return c.constant(t, c.node.input(int(i)));
    };
    return one(c.out(call(per_channel(1), per_channel(2))));
  }
  TensorRef y = c.view(call(None{}, None{}), {N, G, cg * hw});
  y = c.call("aten.mul.Tensor", {y, c.view(c.tensor(1), {G, 1})}).tensor();
  y = c.call("aten.add.Tensor", {y, c.view(c.tensor(2), {G, 1})}).tensor();
  return one(c.out(c.view(y, s)));
}

// Resize (opsets 10 to 19) and Upsample (7, 9). Scales, sizes and roi must
// be known when the model loads. Resize-10 and Upsample use asymmetric
// coordinates, and for nearest the rule of those versions ('simple').
std::vector<Slot> resize(NodeCtx& c) {
  const Shape& in = c.shape(0);
  const size_t rank = in.size();
  const bool upsample = c.node.op_type() == "Upsample";
  const bool legacy = upsample || c.opset < 11;
  std::string mode = c.attr_string("mode", "nearest");
  std::vector<double> scales;
  IntList sizes;
  std::vector<double> roi;
  ValueList args;
  if (legacy) {
    if (mode == "bilinear") mode = "linear";
    if (mode != "nearest" && mode != "linear") c.unsupported("mode '" + mode + "' (accepted: nearest, linear)");
    if (upsample && c.opset < 9) {
      const auto* a = c.attr("scales");
      if (!a) c.fail("attribute scales is required");
      for (float f : a->floats()) scales.push_back(double(f));
    } else {
      const HostTensor& t = c.host(1, "scales");
      for (int64_t i = 0; i < t.numel(); ++i) scales.push_back(host::get(t, size_t(i)));
    }
    if (scales.size() != rank) c.fail(fmt::format("scales has {} values for X of rank {}", scales.size(), rank));
    return one(c.out(c.call("wgnn.resize.default", {c.tensor(0), None{}, ValueList(scales.begin(), scales.end()),
                                                     mode, std::string("asymmetric"), std::string("simple")})));
  }
  const std::string coord = c.attr_string("coordinate_transformation_mode", "half_pixel");
  std::vector<int64_t> axes = c.attr_ints("axes");
  if (axes.empty()) {
    for (size_t d = 0; d < rank; ++d) axes.push_back(int64_t(d));
  }
  for (int64_t& a : axes) a = ops::normalize_axis(a, int64_t(rank), "Resize", "axes");
  const bool by_sizes = c.has(3) && numel(c.shape(3)) > 0;
  if (by_sizes) {
    const std::vector<int64_t> v = c.host_ints(3, "sizes");
    if (v.size() != axes.size()) c.fail(fmt::format("sizes has {} values for {} axes", v.size(), axes.size()));
    sizes.assign(in.begin(), in.end());
    for (size_t i = 0; i < axes.size(); ++i) sizes[size_t(axes[i])] = v[i];
    const std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch") {
      if (policy != "not_larger" && policy != "not_smaller") c.fail("keep_aspect_ratio_policy '" + policy + "'");
      double scale = policy == "not_larger" ? INFINITY : 0.0;
      for (int64_t a : axes) {
        const double r = double(sizes[size_t(a)]) / double(in[size_t(a)]);
        scale = policy == "not_larger" ? std::min(scale, r) : std::max(scale, r);
      }
      scales.assign(rank, 1.0);
      for (int64_t a : axes) {
        scales[size_t(a)] = scale;
        sizes[size_t(a)] = int64_t(scale * double(in[size_t(a)]) + 0.5);
      }
    }
  } else {
    if (!c.has(2) || numel(c.shape(2)) == 0) c.fail("neither scales nor sizes is given");
    const HostTensor& t = c.host(2, "scales");
    if (size_t(t.numel()) != axes.size()) c.fail(fmt::format("scales has {} values for {} axes", t.numel(), axes.size()));
    scales.assign(rank, 1.0);
    for (size_t i = 0; i < axes.size(); ++i) scales[size_t(axes[i])] = host::get(t, i);
  }
  if (coord == "tf_crop_and_resize") {
    if (!c.has(1) || numel(c.shape(1)) == 0) c.fail("tf_crop_and_resize needs roi");
    const HostTensor& t = c.host(1, "roi");
    if (size_t(t.numel()) != 2 * axes.size()) c.fail(fmt::format("roi has {} values for {} axes", t.numel(), axes.size()));
    roi.assign(rank, 0.0);
    roi.resize(2 * rank, 1.0);
    for (size_t i = 0; i < axes.size(); ++i) {
      roi[size_t(axes[i])] = host::get(t, i);
      roi[rank + size_t(axes[i])] = host::get(t, axes.size() + i);
    }
  }
  auto list = [](const std::vector<double>& v) { return v.empty() ? Value(None{}) : Value(ValueList(v.begin(), v.end())); };
  return one(c.out(c.call("wgnn.resize.default",
                          {c.tensor(0), by_sizes ? Value(sizes) : Value(None{}), list(scales), mode, coord,
                           c.attr_string("nearest_mode", "round_prefer_floor"),
                           double(c.attr_float("cubic_coeff_a", -0.75f)), c.attr_int("exclude_outside", 0) != 0,
                           double(c.attr_float("extrapolation_value", 0.f)), list(roi),
                           c.attr_int("antialias", 0) != 0})));
}

// BatchNormalization with training_mode=1 (opset 14+; what torch's dynamo
// exporter writes for an instance norm): normalized with the batch's own
// per-channel statistics over every dim but 1, the population variance;
// the optional outputs 1 and 2 are the running statistics moved towards them,
// input * momentum + current * (1 - momentum).
std::vector<Slot> batch_norm_training(NodeCtx& c) {
  if (c.opset < 14) c.unsupported("training_mode before opset 14");
  const Shape& s = c.shape(0);
  if (s.size() < 2) c.fail(fmt::format("input {} needs a channel dim", shape_str(s)));
  IntList dims{0};
  for (int64_t d = 2; d < int64_t(s.size()); ++d) dims.push_back(d);
  const double momentum = double(c.attr_float("momentum", 0.9f));
  TensorRef x = c.tensor(0);
  TensorRef mean = c.call("aten.mean.dim", {x, dims, true}).tensor();
  TensorRef xc = c.call("aten.sub.Tensor", {x, mean}).tensor();
  TensorRef var = c.call("aten.mean.dim", {c.call("aten.mul.Tensor", {xc, xc}).tensor(), dims, true}).tensor();
  TensorRef mean_c = c.view(mean, {s[1]}), var_c = c.view(var, {s[1]});
  Value r = c.call("aten._native_batch_norm_legit_no_training.default",
                   {x, c.tensor(1), c.tensor(2), mean_c, var_c, momentum, double(c.attr_float("epsilon", 1e-5f))});
  std::vector<Slot> out{c.out(r.list()[0])};
  for (int i = 1; i < c.node.output_size() && i < 3; ++i) {
    if (c.node.output(i).empty()) {
      out.push_back(Slot{});
      continue;
    }
    // current + momentum * (running - current)
    TensorRef cur = i == 1 ? mean_c : var_c;
    TensorRef diff = c.call("aten.sub.Tensor", {c.tensor(size_t(i) + 2), cur}).tensor();
    out.push_back(c.out(c.call("aten.add.Tensor", {cur, diff, momentum})));
  }
  return out;
}

}  // namespace

void add_nn_mappers(Mappers& m) {
  // Normalization.
  m["LayerNormalization"] = {kFloat, [](NodeCtx& c) {
                               const Shape& s = c.shape(0);
                               const int64_t axis =
                                   ops::normalize_axis(c.attr_int("axis", -1), int64_t(s.size()), "LayerNormalization", "axis");
                               if (c.attr_int("stash_type", 1) != 1) c.unsupported("stash_type other than float");
                               Value r = c.call("aten.native_layer_norm.default",
                                                {c.tensor(0), IntList(s.begin() + axis, s.end()), c.tensor_or_none(1),
                                                 c.tensor_or_none(2), double(c.attr_float("epsilon", 1e-5f))});
                               std::vector<Slot> out;
                               for (const Value& v : r.list()) {
                                 TensorRef t = v.tensor();
                                 // Mean and InvStdDev are float32; float16 in fp16 mode when used.
                                 const int k = int(out.size());
                                 if (k > 0 && k < c.node.output_size() && !c.node.output(k).empty() &&
                                     c.gpu_dtype(c.g.info(t).dtype) != c.g.info(t).dtype)
                                   t = c.call("aten._to_copy.default", {t, aten_dtype_code(DType::F16)}).tensor();
                                 out.push_back(c.out(t));
                               }
                               return out;
                             }, nullptr};
  m["BatchNormalization"] = {kFloat, [](NodeCtx& c) {
                               if (c.attr_int("training_mode", 0)) return batch_norm_training(c);
                               // Opsets 1 to 6: is_test (default 0, training) must say inference;
                               // before 9, spatial=0 normalizes per element, not per channel.
                               if (c.opset < 7 && c.attr_int("is_test", 0) == 0) c.unsupported("training mode (is_test 0)");
                               if (c.opset < 9 && c.attr_int("spatial", 1) == 0) c.unsupported("spatial 0 (per-element statistics)");
                               if (c.node.output_size() > 1 && c.opset < 14) {
                                 for (int i = 1; i < c.node.output_size(); ++i)
                                   if (!c.node.output(i).empty()) c.unsupported("training outputs (only inference)");
                               }
                               // Constant parameters keep float32 in fp16 mode: the op
                               // folds them into a float32 scale and shift per channel.
                               const bool exact = c.is_host(1) && c.is_host(2) && c.is_host(3) && c.is_host(4);
                               auto param = [&](size_t i) { return exact ? c.tensor_exact(i) : c.tensor(i); };
                               Value r = c.call("aten._native_batch_norm_legit_no_training.default",
                                                {c.tensor(0), param(1), param(2), param(3), param(4),
                                                 double(c.attr_float("momentum", 0.9f)),
                                                 double(c.attr_float("epsilon", 1e-5f))});
                               return one(c.out(r.list()[0]));
                             }, nullptr};

  // Convolution and pooling.
  m["Conv"] = conv_mapper(false);
  m["ConvTranspose"] = conv_mapper(true);
  m["MaxPool"] = max_pool_mapper();
  m["AveragePool"] = avg_pool_mapper();
  m["LpPool"] = lp_pool_mapper();
  m["DeformConv"] = {kFloat, deform_conv, nullptr};
  // LpNormalization: x / ||x||_p along axis (p 1 or 2); a zero norm gives 0.
  m["LpNormalization"] = {kFloat, [](NodeCtx& c) {
                            const Shape& s = c.shape(0);
                            const int64_t axis = ops::normalize_axis(c.attr_int("axis", -1), int64_t(s.size()),
                                                                     "LpNormalization", "axis");
                            const int64_t p = c.attr_int("p", 2);
                            if (p != 1 && p != 2) c.fail(fmt::format("p {} (accepted: 1, 2)", p));
                            TensorRef x = c.tensor(0);
                            TensorRef a = p == 1 ? c.call("aten.abs.default", {x}).tensor()
                                                 : c.call("aten.mul.Tensor", {x, x}).tensor();
                            TensorRef n = c.call("aten.sum.dim_IntList", {a, IntList{axis}, true}).tensor();
                            if (p == 2) n = c.call("aten.sqrt.default", {n}).tensor();
                            TensorRef zero = c.constant(host::scalar_like(c.dtype(0), 0.0));
                            TensorRef y = c.call("aten.div.Tensor", {x, n}).tensor();
                            TensorRef none = c.call("aten.eq.Tensor", {n, zero}).tensor();
                            return one(c.out(c.call("aten.where.self", {none, zero, y})));
                          }, nullptr};
  // Mish: x * tanh(softplus(x)).
  m["Mish"] = {kFloat, [](NodeCtx& c) {
                 TensorRef x = c.tensor(0);
                 TensorRef t = c.call("aten.tanh.default", {c.call("aten.softplus.default", {x}).tensor()}).tensor();
                 return one(c.out(c.call("aten.mul.Tensor", {x, t})));
               }, nullptr};
  m["GlobalAveragePool"] = global_pool_mapper(true);
  m["GlobalMaxPool"] = global_pool_mapper(false);
  // Matrix products.
  m["MatMul"] = {kFloat, [](NodeCtx& c) {
                   return one(c.out(c.call("aten.matmul.default", {c.tensor(0), c.tensor(1)})));
                 }, nullptr};
  // Gemm (opsets 7 to 13 alike): C broadcasts to [M, N] and may be absent (11+).
  m["Gemm"] = {kFloat, [](NodeCtx& c) {
                 return one(c.out(c.call("wgnn.gemm.default",
                                         {c.tensor(0), c.tensor(1), c.tensor_or_none(2),
                                          double(c.attr_float("alpha", 1.f)), double(c.attr_float("beta", 1.f)),
                                          c.attr_int("transA", 0) != 0, c.attr_int("transB", 0) != 0})));
               }, nullptr};

  m["InstanceNormalization"] = {kFloat, [](NodeCtx& c) {
                                  return one(c.out(c.call("aten.instance_norm.default",
                                                          {c.tensor(0), c.tensor(1), c.tensor(2), None{}, None{}, true,
                                                           0.1, double(c.attr_float("epsilon", 1e-5f)), false})));
                                }, nullptr};
  m["GroupNormalization"] = {kFloat, group_normalization, nullptr};
  m["Resize"] = {kFloat, resize, nullptr};
  m["Upsample"] = {kFloat, resize, nullptr};

  // LRN: x / (bias + alpha / size * sum of x^2 over `size` channels around
  // c)^beta, the window floor((size - 1) / 2) channels before c and
  // ceil((size - 1) / 2) after; the sum as an average pool over [C, spatial]
  // counting the zero padding (alpha * that average).
  m["LRN"] = {kFloat, [](NodeCtx& c) {
                const Shape& s = c.shape(0);
                if (s.size() < 3) c.fail(fmt::format("input {} must be [N, C, D1, ...]", shape_str(s)));
                if (!c.has_attr("size")) c.fail("attribute 'size' is required");
                const int64_t size = c.attr_int("size", 1);
                if (size <= 0) c.fail(fmt::format("size {} must be positive", size));
                const double alpha = c.attr_float("alpha", 1e-4f), beta = c.attr_float("beta", 0.75f),
                             bias = c.attr_float("bias", 1.f);
                const DType dt = c.slot_dtype(0);
                int64_t spatial = 1;
                for (size_t d = 2; d < s.size(); ++d) spatial *= s[d];
                TensorRef x = c.tensor(0);
                TensorRef sq = c.view(c.call("aten.mul.Tensor", {x, x}).tensor(), {s[0], 1, s[1], spatial});
                const int64_t before = (size - 1) / 2, after = size - 1 - before;
                TensorRef avg = c.call("wgnn.avg_pool_padded.default", {sq, IntList{size, 1}, IntList{1, 1},
                                                                        IntList{before, 0, after, 0}, IntList{1, 1},
                                                                        false, true})
                                    .tensor();
                auto k = [&](double v) { return c.constant(host::scalar_like(dt, v)); };
                TensorRef scaled = c.call("aten.mul.Tensor", {avg, k(alpha)}).tensor();
                TensorRef base = c.call("aten.add.Tensor", {scaled, k(bias)}).tensor();
                TensorRef den = c.call("aten.pow.Tensor_Tensor", {base, k(beta)}).tensor();
                return one(c.out(c.call("aten.div.Tensor", {x, c.view(den, s)})));
              }, nullptr};
  // MeanVarianceNormalization as ONNX's function defines it: (x - E[x]) /
  // (sqrt(E[x^2] - E[x]^2) + 1e-9), the means over `axes` (default 0, 2, 3).
  m["MeanVarianceNormalization"] = {kFloat, [](NodeCtx& c) {
    const int64_t r = int64_t(c.shape(0).size());
    std::vector<int64_t> axes = c.has_attr("axes") ? c.attr_ints("axes") : std::vector<int64_t>{0, 2, 3};
    for (auto& a : axes) a = ops::normalize_axis(a, r, "MeanVarianceNormalization", "axes");
    const DType dt = c.slot_dtype(0);
    TensorRef x = c.tensor(0);
    auto mean = [&](TensorRef t) { return c.call("aten.mean.dim", {t, IntList(axes), true}).tensor(); };
    TensorRef m1 = mean(x);
    TensorRef m2 = mean(c.call("aten.mul.Tensor", {x, x}).tensor());
    TensorRef var = c.call("aten.sub.Tensor", {m2, c.call("aten.mul.Tensor", {m1, m1}).tensor()}).tensor();
    TensorRef sd = c.call("aten.add.Tensor", {c.call("aten.sqrt.default", {var}).tensor(),
                                              c.constant(host::scalar_like(dt, 1e-9))}).tensor();
    return one(c.out(c.call("aten.div.Tensor", {c.call("aten.sub.Tensor", {x, m1}).tensor(), sd})));
  }, nullptr};
}

}  // namespace wgnn::onnx_import

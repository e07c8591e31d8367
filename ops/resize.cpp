// Resizing: wgnn.resize (ONNX Resize, Upsample) and ATen's
// upsample_nearest2d, _upsample_nearest_exact2d and upsample_bilinear2d.
//
// Resampling is separable: along each resized dim, every output coordinate
// reads a few input coordinates ("taps") with weights. The taps depend only
// on the sizes and modes, so the host computes them once, in double, exactly
// as the ONNX reference (or ATen) does, and the kernel
// (kernels/resize.wgsl) only gathers and weighs: nearest is one tap per dim,
// linear two, cubic four (antialiased, shrinking: the filter stretched by
// 1 / scale, more taps). One dispatch resizes up to two dims; more dims, or
// two dims of more than 16 taps together, take more dispatches.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/uniforms.h"
#include "ops/registry.h"

namespace wgnn::ops {
namespace {

// The taps of one resized dim: `n` (index, weight) pairs per output
// coordinate; index -1 marks "outside the crop" (output = fill value).
struct Taps {
  int n = 1;
  std::vector<int32_t> idx;
  std::vector<float> w;
  // Summed as ONNX Runtime's CPU provider sums a bilinear sample: each of
  // the TH x TW terms (row weight * column weight) * x, added in row-major
  // order (kernels/resize.wgsl), rather than row by row.
  bool pairwise = false;
};

// ---- the ONNX reference (onnx/backend/test/case/node/resize.py)

struct ResizeModes {
  std::string mode = "nearest";                    // nearest | linear | cubic
  std::string coord = "half_pixel";                // coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";      // nearest_mode
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double fill = 0.0;                               // extrapolation_value
  bool antialias = false;                          // linear / cubic filters stretched by 1 / scale when shrinking
};

const char* kModes = "'nearest', 'linear', 'cubic'";
const char* kCoords = "'half_pixel', 'half_pixel_symmetric', 'pytorch_half_pixel', 'align_corners', 'asymmetric', "
                      "'tf_half_pixel_for_nn', 'tf_crop_and_resize'";
const char* kNearest = "'round_prefer_floor', 'round_prefer_ceil', 'floor', 'ceil', 'simple'";

// The antialiased filters (the reference's _linear_coeffs_antialias and
// _cubic_coeffs_antialias): the kernel stretched by 1 / min(scale, 1), its
// taps at scale * (i - ratio), normalized to sum 1.
std::vector<double> antialias_coeffs(const ResizeModes& m, double ratio, double scale) {
  scale = std::min(scale, 1.0);
  std::vector<double> co;
  if (m.mode == "linear") {
    const int64_t start = int64_t(std::floor(-1 / scale) + 1), n = 2 - 2 * start;
    for (int64_t i = start; i < start + n; ++i) co.push_back(std::clamp(1 - std::abs((double(i) - ratio) * scale), 0.0, 1.0));
  } else {
    const double A = m.cubic_a;
    const int64_t start = int64_t(std::floor(-2 / scale) + 1), end = 2 - start;
    for (int64_t i = start; i < end; ++i) {
      const double x = std::abs(scale * (double(i) - ratio)), x2 = x * x, x3 = x2 * x;
      co.push_back(x <= 1 ? (A + 2) * x3 - (A + 3) * x2 + 1 : x < 2 ? A * x3 - 5 * A * x2 + 8 * A * x - 4 * A : 0.0);
    }
  }
  double sum = 0;
  for (double v : co) sum += v;
  for (double& v : co) v /= sum;
  return co;
}

std::vector<double> coeffs_for(const ResizeModes& m, double ratio, bool grows, double scale) {
  if (m.antialias && m.mode != "nearest") return antialias_coeffs(m, ratio, scale);
  if (m.mode == "linear") return {1 - ratio, ratio};
  if (m.mode == "cubic") {
    const double A = m.cubic_a, r = ratio, s = 1 - ratio;
    return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
            ((A + 2) * s - (A + 3)) * s * s + 1, ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A};
  }
  if (ratio == 1.0) return {0, 1};  // x on an input coordinate
  const std::string& nm = m.nearest;
  bool up = false;
  if (nm == "round_prefer_floor") up = ratio > 0.5;
  else if (nm == "round_prefer_ceil") up = ratio >= 0.5;
  else if (nm == "floor") up = false;
  else if (nm == "ceil") up = true;
  else up = !grows;  // simple (Resize-10, Upsample): truncate when growing, ceil when shrinking
  return {up ? 0.0 : 1.0, up ? 1.0 : 0.0};
}

// One dim of the ONNX reference's interpolate_1d_with_x for every output
// coordinate. `scale` is the dim's scale (given, or out / in); roi its crop
// (start, end) for tf_crop_and_resize.
Taps onnx_taps(const ResizeModes& m, int64_t in, int64_t out, double scale, double roi0, double roi1) {
  const double out_w = scale * double(in);  // the reference's float "output_width"
  std::vector<std::vector<std::pair<int64_t, double>>> rows(static_cast<size_t>(out));
  size_t n_max = 1;
  for (int64_t xi = 0; xi < out; ++xi) {
    const double x = double(xi);
    double xo = 0;
    bool outside = false;
    const std::string& c = m.coord;
    if (c == "align_corners") {
      xo = out_w == 1 ? 0.0 : x * double(in - 1) / (out_w - 1);
    } else if (c == "asymmetric") {
      xo = x / scale;
    } else if (c == "tf_crop_and_resize") {
      xo = out_w == 1 ? (roi1 - roi0) * double(in - 1) / 2 : x * (roi1 - roi0) * double(in - 1) / (out_w - 1);
      xo += roi0 * double(in - 1);
      outside = xo < 0 || xo > double(in - 1);
    } else if (c == "pytorch_half_pixel") {
      xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    } else if (c == "tf_half_pixel_for_nn") {
      xo = (x + 0.5) / scale;
    } else if (c == "half_pixel_symmetric") {
      // The crop's centre on the output's: half_pixel shifted by what the
      // rounding of the output size took.
      const double offset = double(in) / 2 * (1 - double(out) / out_w);
      xo = offset + (x + 0.5) / scale - 0.5;
    } else {  // half_pixel
      xo = (x + 0.5) / scale - 0.5;
    }
    auto& row = rows[size_t(xi)];
    if (outside) {
      row.emplace_back(-1, 0.0);
      continue;
    }
    const double fl = std::floor(xo);
    const double ratio = xo == fl ? 1.0 : xo - fl;
    std::vector<double> co = coeffs_for(m, ratio, out >= in, scale);
    const int64_t n = int64_t(co.size());
    // The n nearest indices to xo in the input padded by ceil(n / 2) on each
    // side (edge values), ties to the lower index.
    const int64_t pad = (n + 1) / 2, len = in + 2 * pad;
    const double xp = xo + double(pad);
    int64_t lo = std::clamp<int64_t>(int64_t(std::ceil(xp - 0.5)), 0, len - 1), hi = lo;
    while (hi - lo + 1 < n) {
      const bool can_lo = lo > 0, can_hi = hi < len - 1;
      if (can_lo && (!can_hi || std::abs(xp - double(lo - 1)) <= std::abs(xp - double(hi + 1)))) --lo;
      else ++hi;
    }
    if (m.exclude_outside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t o = lo + k - pad;
        if (o < 0 || o >= in) co[size_t(k)] = 0;
        sum += co[size_t(k)];
      }
      for (double& v : co) v /= sum;
    }
    for (int64_t k = 0; k < n; ++k) {
      // Nearest picks one of its two neighbours: keep only that one.
      if (m.mode == "nearest" && co[size_t(k)] == 0) continue;
      row.emplace_back(std::clamp<int64_t>(lo + k - pad, 0, in - 1), co[size_t(k)]);
    }
    n_max = std::max(n_max, row.size());
  }
  Taps t;
  t.n = int(n_max);
  t.idx.assign(size_t(out) * n_max, 0);
  t.w.assign(size_t(out) * n_max, 0.f);
  for (size_t o = 0; o < rows.size(); ++o) {
    for (size_t k = 0; k < rows[o].size(); ++k) {
      t.idx[o * n_max + k] = int32_t(rows[o][k].first);
      t.w[o * n_max + k] = float(rows[o][k].second);
    }
  }
  return t;
}

// ---- ATen (aten/src/ATen/native/UpSample.h), float arithmetic as there.

float aten_scale(int64_t in, int64_t out, std::optional<double> sf) {
  if (sf && *sf > 0) return float(1.0 / *sf);
  return float(in) / float(out);
}

Taps aten_nearest_taps(int64_t in, int64_t out, std::optional<double> sf, bool exact) {
  Taps t;
  t.idx.resize(size_t(out));
  t.w.assign(size_t(out), 1.f);
  const float s = aten_scale(in, out, sf);
  for (int64_t o = 0; o < out; ++o) {
    int64_t src;
    if (exact) {
      src = std::min(int64_t(std::floor((float(o) + 0.5f) * s)), in - 1);
    } else if (out == in) {
      src = o;
    } else if (out == 2 * in) {
      src = o >> 1;
    } else {
      src = std::min(int64_t(std::floor(float(o) * s)), in - 1);
    }
    t.idx[size_t(o)] = int32_t(src);
  }
  return t;
}

Taps aten_linear_taps(int64_t in, int64_t out, std::optional<double> sf, bool align_corners) {
  Taps t;
  t.n = 2;
  t.idx.resize(size_t(out) * 2);
  t.w.resize(size_t(out) * 2);
  float s;
  if (align_corners) s = out > 1 ? float(in - 1) / float(out - 1) : 0.f;
  else s = aten_scale(in, out, sf);
  for (int64_t o = 0; o < out; ++o) {
    float src = align_corners ? s * float(o) : std::max(s * (float(o) + 0.5f) - 0.5f, 0.f);
    const int64_t i0 = int64_t(src);
    const int64_t step = i0 < in - 1 ? 1 : 0;
    const float l1 = src - float(i0);
    t.idx[size_t(o) * 2] = int32_t(i0);
    t.idx[size_t(o) * 2 + 1] = int32_t(i0 + step);
    t.w[size_t(o) * 2] = 1.f - l1;
    t.w[size_t(o) * 2 + 1] = l1;
  }
  return t;
}

// ---- recording

bool identity(const Taps& t, int64_t in, int64_t out) {
  if (in != out || t.n != 1) return false;
  for (int64_t o = 0; o < out; ++o) {
    if (t.idx[size_t(o)] != o || t.w[size_t(o)] != 1.f) return false;
  }
  return true;
}

using Params = ResizeParams;  // ops/uniforms.h

// The result of a resize must fit one storage binding (checked before the
// taps, whose tables grow with the output size).
void check_result_fits(const Args& a, DType dt, const Shape& out_shape) {
  const uint64_t limit = a.g.ctx().limits().max_storage_buffer_binding_size;
  const int64_t n = numel(out_shape);
  if (n > int64_t(UINT32_MAX) || uint64_t(n) * gpu_dtype_size(dt) > limit) {
    a.fail(fmt::format("the result {} {} is over this device's maxStorageBufferBindingSize of {} bytes",
                       dtype_name(dt), shape_str(out_shape), limit));
  }
}

// Resizes x to `out_shape` with per-dim taps (nullopt: the dim is kept).
TensorRef record(const Args& a, TensorRef x, const Shape& out_shape, std::vector<std::optional<Taps>> taps,
                 double fill, const std::string& label) {
  Graph& g = a.g;
  const DType dt = g.info(x).dtype;
  Shape cur = g.info(x).shape;
  check_result_fits(a, dt, out_shape);
  if (numel(out_shape) == 0) return g.add_tensor(out_shape, dt);
  std::vector<size_t> dims;
  for (size_t d = 0; d < cur.size(); ++d) {
    if (taps[d] && !identity(*taps[d], cur[d], out_shape[d])) dims.push_back(d);
  }
  TensorRef t = x;
  const Shape target = out_shape.empty() ? Shape{1} : out_shape;
  if (dims.empty()) {
    // Same size, same coordinates: still a new tensor (a copy), never an
    // alias of the input. A 0-d input is copied as [1].
    if (cur.empty()) {
      t = g.add_view(x, {1});
      cur = {1};
    }
    const size_t d = cur.size() - 1;
    Taps same;
    for (int64_t i = 0; i < cur[d]; ++i) {
      same.idx.push_back(int32_t(i));
      same.w.push_back(1.f);
    }
    taps.resize(cur.size());
    taps[d] = same;
    dims.push_back(d);
  }
  // Innermost dims first, two per dispatch.
  while (!dims.empty()) {
    const size_t d2 = dims.back();
    dims.pop_back();
    std::optional<size_t> d1;
    // Two dims in one dispatch read TH * TW taps an output: where that
    // passes 16 (antialiased shrinking), one dim a dispatch reads TH + TW.
    if (!dims.empty() && taps[dims.back()]->n * taps[d2]->n <= 16) {
      d1 = dims.back();
      dims.pop_back();
    }
    const Taps one{1, {0}, {1.f}};
    const Taps& th = d1 ? *taps[*d1] : one;
    const Taps& tw = *taps[d2];
    int64_t Q = 1, R = 1;
    const size_t h_end = d1 ? *d1 : d2;
    for (size_t d = h_end + (d1 ? 1 : 0); d < d2; ++d) Q *= cur[d];
    for (size_t d = d2 + 1; d < cur.size(); ++d) R *= cur[d];
    Shape next = cur;
    if (d1) next[*d1] = target[*d1];
    next[d2] = target[d2];
    const int64_t IH = d1 ? cur[*d1] : 1, OH = d1 ? next[*d1] : 1;
    // Taps as (index, weight bits) pairs.
    std::vector<int32_t> table;
    for (const Taps* tp : {&th, &tw}) {
      for (size_t k = 0; k < tp->idx.size(); ++k) {
        int32_t bits;
        std::memcpy(&bits, &tp->w[k], 4);
        table.push_back(tp->idx[k]);
        table.push_back(bits);
      }
    }
    TensorRef tt = g.add_constant({int64_t(table.size())}, DType::I32, table.data(), "resize taps");
    TensorRef y = g.add_tensor(next, dt);
    Params p{};
    p.count = uint32_t(numel(next));
    p.R = uint32_t(R);
    p.OW = uint32_t(next[d2]);
    p.Q = uint32_t(Q);
    p.OH = uint32_t(OH);
    p.IW = uint32_t(cur[d2]);
    p.IH = uint32_t(IH);
    p.TH = uint32_t(th.n);
    p.TW = uint32_t(tw.n);
    p.w_base = uint32_t(th.idx.size());
    p.fill = float(fill);
    p.pairwise = (!d1 || th.pairwise) && tw.pairwise ? 1u : 0u;
    const gpu::Pipeline& pl = kernel(g, "ops/kernels/resize.wgsl", float_subs(g, dt, a.op));
    g.add_dispatch(pl, {Binding::of(y), g.uniform(p), Binding::of(t), Binding::of(tt)},
                   grid_for(g, gpu::ceil_div(p.count, 256)), std::string(a.op),
                   fmt::format("{} {}x{} taps", label, th.n, tw.n));
    t = y;
    cur = next;
  }
  return cur == out_shape ? t : g.add_view(t, out_shape);
}

void require_input(const Args& a, TensorRef x) {
  a.require_float(x, "input");
  a.require_fits_binding(x, "input");
  if (a.g.info(x).numel() > int64_t(UINT32_MAX)) a.fail("input too large for 32-bit indexing");
}

std::optional<std::vector<double>> double_list(const Args& a, size_t i, std::string_view name) {
  if (i >= a.args.size() || a.args[i].is_none()) return std::nullopt;
  const Value& v = a.args[i];
  std::vector<double> out;
  if (v.is_list()) {
    for (const Value& e : v.list()) {
      if (e.is_double()) out.push_back(std::get<double>(e.v));
      else if (e.is_int()) out.push_back(double(std::get<int64_t>(e.v)));
      else a.fail(fmt::format("argument '{}' must be a list of Doubles, got an element {}", name, e.describe()));
    }
    return out;
  }
  if (v.is_int_list()) {
    for (int64_t e : std::get<IntList>(v.v)) out.push_back(double(e));
    return out;
  }
  a.fail(fmt::format("argument '{}' must be a list of Doubles (or None), got {}", name, v.describe()));
}

std::optional<IntList> int_list_or_none(const Args& a, size_t i, std::string_view name) {
  if (i >= a.args.size() || a.args[i].is_none()) return std::nullopt;
  return a.int_list(i, name);
}

void require_choice(const Args& a, std::string_view name, const std::string& v, std::string_view accepted) {
  if (accepted.find("'" + v + "'") == std::string_view::npos) {
    a.fail(fmt::format("argument '{}' is '{}'; accepted: {}", name, v, accepted));
  }
}

// wgnn.resize.default(input, sizes=None, scales=None, mode='nearest',
//     coordinate_transformation_mode='half_pixel',
//     nearest_mode='round_prefer_floor', cubic_coeff_a=-0.75,
//     exclude_outside=False, extrapolation_value=0.0, roi=None, antialias=False)
// Linear taps computed as ONNX Runtime's CPU provider computes them, in
// float32: the source coordinate from a float scale (out / in as floats
// where sizes are given), clamped to [0, in - 1]; the two neighbours
// floor(x) and floor(x) + 1 (clamped) weighted |x - x2| and |x - x1|, or
// 0.5 each where they coincide. Mathematically the reference's taps; bit
// for bit ONNX Runtime's, which a quantized model needs: its
// DynamicQuantizeLinear after a Resize rounds values to 8 bits, and a
// result one ulp off flips a rounding tie, which the integer convolutions
// after it carry on (ISNet's uint8 matte moved by 0.05). nullopt for the
// modes this does not cover (the reference's taps are used).
// `fscale` is ONNX Runtime's float scale. align_corners only where
// `out_is_scaled_in` (sizes given, or in * scale is out exactly): the
// reference divides by the unrounded in * scale - 1 otherwise.
std::optional<Taps> ort_linear_taps(const ResizeModes& m, int64_t in, int64_t out, float fscale,
                                    bool out_is_scaled_in) {
  const std::string& c = m.coord;
  if (m.mode != "linear" || m.antialias ||
      (c != "half_pixel" && c != "pytorch_half_pixel" && c != "asymmetric" && c != "align_corners") ||
      (c == "align_corners" && !out_is_scaled_in)) {
    return std::nullopt;
  }
  Taps t;
  t.n = 2;
  t.pairwise = true;
  for (int64_t o = 0; o < out; ++o) {
    const float xr = float(o);
    float x;
    if (c == "align_corners") x = out == 1 ? 0.f : xr * float(in - 1) / float(out - 1);
    else if (c == "asymmetric") x = xr / fscale;
    else if (c == "pytorch_half_pixel") x = out > 1 ? (xr + 0.5f) / fscale - 0.5f : 0.f;
    else x = (xr + 0.5f) / fscale - 0.5f;
    x = std::max(0.f, std::min(x, float(in - 1)));
    const int64_t x1 = std::min(int64_t(x), in - 1), x2 = std::min(x1 + 1, in - 1);
    float d1 = std::fabs(x - float(x1)), d2 = std::fabs(x - float(x2));
    if (x1 == x2) d1 = d2 = 0.5f;
    t.idx.push_back(int32_t(x1));
    t.w.push_back(d2);
    t.idx.push_back(int32_t(x2));
    t.w.push_back(d1);
  }
  return t;
}

// ONNX Resize on any rank: `sizes` (ints) and/or `scales` (doubles) have one
// entry per dim; without sizes the result is floor(in * scale), without
// scales the scale is out / in. `roi` (2 * rank doubles: starts, then ends)
// is read by tf_crop_and_resize only. nearest_mode 'simple' is the rule of
// Resize-10 and Upsample: truncate where a dim grows, ceil where it shrinks.
// antialias (Resize-18): linear and cubic filters stretched by 1 / scale
// where a dim shrinks (more taps per output); nearest ignores it.
Value resize(Graph& g, const ValueList& args) {
  Args a{"wgnn.resize.default", args, g};
  if (args.size() > 11) a.fail(fmt::format("takes at most 11 arguments, got {}", args.size()));
  TensorRef x = a.tensor(0, "input");
  require_input(a, x);
  const Shape& in = g.info(x).shape;
  const size_t rank = in.size();
  const auto sizes = int_list_or_none(a, 1, "sizes");
  const auto scales = double_list(a, 2, "scales");
  ResizeModes m;
  m.mode = a.string(3, "mode", m.mode);
  m.coord = a.string(4, "coordinate_transformation_mode", m.coord);
  m.nearest = a.string(5, "nearest_mode", m.nearest);
  m.cubic_a = a.scalar(6, "cubic_coeff_a", m.cubic_a);
  m.exclude_outside = a.boolean(7, "exclude_outside", false);
  m.fill = a.scalar(8, "extrapolation_value", 0.0);
  const auto roi = double_list(a, 9, "roi");
  m.antialias = a.boolean(10, "antialias", false);
  require_choice(a, "mode", m.mode, kModes);
  require_choice(a, "coordinate_transformation_mode", m.coord, kCoords);
  require_choice(a, "nearest_mode", m.nearest, kNearest);
  if (!sizes && !scales) a.fail("give 'sizes' or 'scales' (or both)");
  if (sizes && sizes->size() != rank) {
    a.fail(fmt::format("'sizes' has {} values for an input of rank {} ({})", sizes->size(), rank, shape_str(in)));
  }
  if (scales && scales->size() != rank) {
    a.fail(fmt::format("'scales' has {} values for an input of rank {} ({})", scales->size(), rank, shape_str(in)));
  }
  if (m.coord == "tf_crop_and_resize" && (!roi || roi->size() != 2 * rank)) {
    a.fail(fmt::format("tf_crop_and_resize needs 'roi' with {} values (starts, then ends)", 2 * rank));
  }
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (scales && !((*scales)[d] > 0) ) a.fail(fmt::format("scale {} of dim {} must be positive", (*scales)[d], d));
    if (!sizes && !((*scales)[d] * double(in[d]) < 0x1p62)) {
      a.fail(fmt::format("scale {} of dim {} gives a size over 2^62", (*scales)[d], d));
    }
    out[d] = sizes ? (*sizes)[d] : int64_t(std::floor((*scales)[d] * double(in[d])));
    if (out[d] < 0) a.fail(fmt::format("size {} of dim {} is negative", out[d], d));
    if (in[d] == 0 && out[d] > 0) a.fail(fmt::format("dim {} is empty and cannot grow to {}", d, out[d]));
  }
  // The result must fit the device before any per-dim table is built.
  check_result_fits(a, a.g.info(x).dtype, out);
  std::vector<std::optional<Taps>> taps(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 0 || in[d] == 0) continue;
    const double scale = scales ? (*scales)[d] : double(out[d]) / double(in[d]);
    // ONNX Runtime's float scale: the given one, or out / in in floats.
    taps[d] = ort_linear_taps(m, in[d], out[d], scales ? float((*scales)[d]) : float(out[d]) / float(in[d]),
                              sizes || (*scales)[d] * double(in[d]) == double(out[d]));
    if (!taps[d]) taps[d] = onnx_taps(m, in[d], out[d], scale, roi ? (*roi)[d] : 0.0, roi ? (*roi)[d + rank] : 1.0);
  }
  return record(a, x, out, std::move(taps), m.fill, "resize " + m.mode);
}

// The output size of ATen's 2-D upsampling ops: output_size, or
// floor(in * scale_factors).
Shape aten_out_shape(const Args& a, const Shape& in, const std::optional<IntList>& size,
                     const std::optional<std::vector<double>>& sf) {
  if (in.size() != 4) a.fail(fmt::format("argument 'input' has shape {}; expected N x C x H x W", shape_str(in)));
  if (size.has_value() == sf.has_value()) a.fail("give exactly one of 'output_size' and 'scale_factors'");
  if (size && size->size() != 2) a.fail(fmt::format("'output_size' must have 2 values, got {}", size->size()));
  if (sf && sf->size() != 2) a.fail(fmt::format("'scale_factors' must have 2 values, got {}", sf->size()));
  Shape out = in;
  for (size_t i = 0; i < 2; ++i) {
    if (sf && !((*sf)[i] > 0)) a.fail(fmt::format("scale factor {} must be positive", (*sf)[i]));
    if (sf && !(double(in[2 + i]) * (*sf)[i] < 0x1p62)) {
      a.fail(fmt::format("scale factor {} gives a size over 2^62", (*sf)[i]));
    }
    out[2 + i] = size ? (*size)[i] : int64_t(std::floor(double(in[2 + i]) * (*sf)[i]));
    if (out[2 + i] <= 0) a.fail(fmt::format("output size {} must be positive", shape_str(out)));
  }
  check_result_fits(a, a.g.info(a.tensor(0, "input")).dtype, out);
  return out;
}

// aten.upsample_nearest2d.vec(input, output_size?, scale_factors?) and
// aten._upsample_nearest_exact2d.vec (same arguments).
Value upsample_nearest(Graph& g, const ValueList& args, const char* op, bool exact) {
  Args a{op, args, g};
  if (args.size() > 3) a.fail(fmt::format("takes at most 3 arguments, got {}", args.size()));
  TensorRef x = a.tensor(0, "input");
  require_input(a, x);
  const Shape& in = g.info(x).shape;
  const auto size = int_list_or_none(a, 1, "output_size");
  const auto sf = double_list(a, 2, "scale_factors");
  const Shape out = aten_out_shape(a, in, size, sf);
  std::vector<std::optional<Taps>> taps(4);
  for (size_t i = 0; i < 2; ++i) {
    taps[2 + i] = aten_nearest_taps(in[2 + i], out[2 + i], sf ? std::optional<double>((*sf)[i]) : std::nullopt, exact);
  }
  return record(a, x, out, std::move(taps), 0.0, exact ? "nearest_exact" : "nearest");
}

// aten.upsample_bilinear2d.vec(input, output_size?, align_corners, scale_factors?)
Value upsample_bilinear(Graph& g, const ValueList& args) {
  Args a{"aten.upsample_bilinear2d.vec", args, g};
  if (args.size() > 4) a.fail(fmt::format("takes at most 4 arguments, got {}", args.size()));
  TensorRef x = a.tensor(0, "input");
  require_input(a, x);
  const Shape& in = g.info(x).shape;
  const auto size = int_list_or_none(a, 1, "output_size");
  const Value& ac = a.at(2, "align_corners");
  if (!ac.is_bool()) a.fail(fmt::format("argument 'align_corners' must be a Bool, got {}", ac.describe()));
  const bool align = std::get<bool>(ac.v);
  const auto sf = double_list(a, 3, "scale_factors");
  const Shape out = aten_out_shape(a, in, size, sf);
  std::vector<std::optional<Taps>> taps(4);
  for (size_t i = 0; i < 2; ++i) {
    taps[2 + i] = aten_linear_taps(in[2 + i], out[2 + i], sf ? std::optional<double>((*sf)[i]) : std::nullopt, align);
  }
  return record(a, x, out, std::move(taps), 0.0, "bilinear");
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  r.add("wgnn.resize.default", resize);
  r.add("aten.upsample_nearest2d.vec", [](Graph& g, const ValueList& args) {
    return upsample_nearest(g, args, "aten.upsample_nearest2d.vec", false);
  });
  r.add("aten._upsample_nearest_exact2d.vec", [](Graph& g, const ValueList& args) {
    return upsample_nearest(g, args, "aten._upsample_nearest_exact2d.vec", true);
  });
  r.add("aten.upsample_bilinear2d.vec", upsample_bilinear);
}

}  // namespace wgnn::ops

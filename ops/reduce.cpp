// Reductions over a list of dims (sum, mean, amax, amin, prod), argmax /
// argmin and softmax / log_softmax over one dim, with ATen's names and
// arguments. argmax / argmin (kernels/argmax.wgsl) walk the dim with one
// thread per output.
//
// Reductions: float32 and float16 accumulate in f32; int32, int64 (stored as
// int32), bool, uint8 and int8 in i32 (integer sums wrap at 32 bits). As in
// ATen, sum and prod of an integer or bool tensor give int64 and mean takes
// floats only; a `dtype` argument picks the result's dtype for sum, mean
// and prod (float32 or float16, and for integer inputs int32 or int64). The input is never
// permuted: its dims are coalesced (size-1 dims dropped, neighbours of the
// same kind merged), and then either
//   - the reduced dims are the innermost: a group of LANES threads per
//     output reads its contiguous row (coalesced) and combines in workgroup
//     memory (kernels/reduce.wgsl, INNER), or
//   - reduced dims sit anywhere: each output decodes its kept and reduced
//     offsets from shapes and strides, adjacent threads take adjacent
//     outputs, and LANES threads per output split long reductions.
// Few outputs of many elements (e.g. reducing everything) take two passes:
// one partial result per segment into an f32 / i32 intermediate, then a
// reduction of the partials, so the first pass fills the device.
//
// Softmax: the last axis uses kernels/softmax.wgsl (threads per row, vec4
// chunks where the width is a multiple of 4, max
// subtracted, the row kept in registers when it is short enough); any other
// axis kernels/softmax_strided.wgsl (a thread per column).
#include <algorithm>
#include <cstdlib>
#include <array>
#include <climits>
#include <optional>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/helpers.h"
#include "ops/layout.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

constexpr int64_t kMaxElements = INT32_MAX;

enum ReduceOp : uint32_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

bool is_float(DType d) { return d == DType::F32 || d == DType::F16; }

uint32_t pow2_floor(uint64_t v) {
  uint32_t p = 1;
  while (uint64_t(p) * 2 <= v) p *= 2;
  return p;
}

// `splits`: the op cuts an input over the binding limit (reduce()).
void check_input(const Args& a, TensorRef t, bool splits = false) {
  const TensorInfo& ti = a.g.info(t);
  require_rank(ti.shape, a.op, "self");
  if (!splits) a.require_fits_binding(t, "self");
  if (ti.numel() > kMaxElements) {
    a.fail(fmt::format("argument 'self' {} has {} elements; at most {} are supported (32-bit offsets)",
                       shape_str(ti.shape), ti.numel(), kMaxElements));
  }
}

// An optional `dtype` argument (a c10::ScalarType code, as ExecuTorch
// passes it): None -> `def`; else float32 (6), float16 (5), int32 (3) or
// int64 (4), floats only when `float_only`. The result is converted from the
// accumulator (f32 or i32) when it is written, so integer inputs may give
// any of them, but float inputs give floats only (ATen would truncate each
// element before summing, not the sum).
DType dtype_arg(const Args& a, size_t i, DType def, bool float_only) {
  if (i >= a.args.size() || a.args[i].is_none()) return def;
  const Value& v = a.args[i];
  if (v.is_int()) {
    switch (std::get<int64_t>(v.v)) {
      case 6: return DType::F32;
      case 5: return DType::F16;
      case 3:
        if (!float_only) return DType::I32;
        break;
      case 4:
        if (!float_only) return DType::I64;
        break;
      default: break;
    }
  }
  a.fail(fmt::format("argument 'dtype' is {}; accepted: None or the ScalarType code of float32 (6), float16 (5){}",
                     v.describe(), float_only ? "" : ", int32 (3), int64 (4)"));
}

// The reduced dims from a `dim` argument: None, an Int or an IntList; None
// and the empty list reduce every dim.
std::vector<bool> reduced_dims(const Args& a, size_t i, size_t rank) {
  std::vector<bool> red(rank, false);
  IntList dims;
  if (i < a.args.size() && !a.args[i].is_none()) dims = a.int_list(i, "dim");
  if (dims.empty()) {
    red.assign(rank, true);
    return red;
  }
  std::vector<bool> seen(std::max<size_t>(rank, 1), false);
  for (int64_t d : dims) {
    const auto k = size_t(normalize_axis(d, int64_t(rank), a.op, "dim"));
    if (seen[k]) {
      a.fail(fmt::format("argument 'dim' is [{}]; dim {} appears more than once", fmt::join(dims, ", "), k));
    }
    seen[k] = true;
    if (k < rank) red[k] = true;
  }
  return red;
}

static_assert(sizeof(ReduceParams) == 160);

// WGSL storage type a reduction reads or writes for `d` (bool and the
// integer dtypes are all read as i32: 0/1 and sign-extended values).
const char* reduce_type(DType d) { return is_float(d) ? wgsl_type(d) : "i32"; }

// Records the reduction of tensor `x` (shape `in`) over the dims `red`
// into `y` (rows of the kept dims, contiguous). `scale` multiplies the
// result (mean), if set. Few long reductions are split: a first pass writes
// one partial result per segment of the reduced range into an f32 / i32
// intermediate, and a second pass reduces the partials.
//
// `xb` / `yb`, where given, bind a part of x and y (a split over the
// binding limit, see reduce()): `in` is then the shape of that part.
void record_reduce(const Args& a, TensorRef x, const Shape& in, const std::vector<bool>& red, ReduceOp op,
                   std::optional<float> scale, TensorRef y, std::string_view label, bool may_split = true,
                   std::optional<Binding> xb = std::nullopt, std::optional<Binding> yb = std::nullopt) {
  Graph& g = a.g;
  const DType dtype = g.info(x).dtype;
  int64_t rows = 1, count = 1;
  for (size_t d = 0; d < in.size(); ++d) (red[d] ? count : rows) *= in[d];
  if (rows == 0) return;

  // Coalesce: drop size-1 dims, merge neighbours of the same kind.
  struct Group {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Group> groups;
  if (count > 0) {
    const Shape strides = contiguous_strides(in);
    for (size_t d = 0; d < in.size(); ++d) {
      if (in[d] == 1) continue;
      if (!groups.empty() && groups.back().reduced == red[d]) {
        groups.back().size *= in[d];
        groups.back().stride = strides[d];
      } else {
        groups.push_back({in[d], strides[d], red[d]});
      }
    }
  }
  // Contiguous rows of `count` (also: nothing to reduce, or count 0).
  const bool inner = groups.empty() || !groups.back().reduced ? count <= 1 : groups.size() <= 2;
  ReduceParams p{};
  p.rows = uint32_t(rows);
  p.count = uint32_t(count);
  uint32_t lanes = 1;
  int64_t segs = 1;
  if (inner) {
    lanes = std::min<uint32_t>(256, pow2_floor(uint64_t(std::max<int64_t>(count / 4, 1))));
    // Rows get a workgroup each; split long rows until ~512 workgroups run,
    // keeping >= 2048 elements per segment.
    if (may_split && rows < 512 && count >= 16384) {
      segs = std::min<int64_t>(int64_t(gpu::ceil_div(512, uint64_t(rows))), int64_t(gpu::ceil_div(uint64_t(count), 2048)));
    }
  } else {
    for (const Group& gr : groups) {
      uint32_t& rank = gr.reduced ? p.red_rank : p.kept_rank;
      (gr.reduced ? p.red_shape : p.kept_shape)[rank] = uint32_t(gr.size);
      (gr.reduced ? p.red_stride : p.kept_stride)[rank] = uint32_t(gr.stride);
      ++rank;
    }
    // Enough threads to fill the device, at least 8 elements per lane; then
    // split what still leaves more than 64 elements per lane.
    while (lanes < 256 && rows * lanes < 65536 && int64_t(lanes) * 8 <= count) lanes *= 2;
    if (may_split && rows * lanes < 65536 && count > int64_t(lanes) * 64) {
      segs = std::min<int64_t>(int64_t(gpu::ceil_div(65536, uint64_t(rows * lanes))),
                               int64_t(gpu::ceil_div(uint64_t(count), uint64_t(lanes) * 64)));
    }
  }
  const int64_t seg_len = segs > 1 ? int64_t(gpu::ceil_div(uint64_t(count), uint64_t(segs))) : count;
  if (segs > 1) segs = int64_t(gpu::ceil_div(uint64_t(count), uint64_t(seg_len)));  // no empty segment
  p.segs = uint32_t(segs);
  p.seg_len = uint32_t(seg_len);
  p.scale = segs > 1 ? 1.f : scale.value_or(1.f);

  // Partials: [rows, segs] for rows (a second inner pass), [segs, rows]
  // otherwise (a second strided pass; adjacent threads, adjacent outputs).
  const DType acc_dtype = is_float(dtype) ? DType::F32 : DType::I32;
  TensorRef dst = y;
  if (segs > 1) dst = g.add_tensor(inner ? Shape{rows, segs} : Shape{segs, rows}, acc_dtype);
  const DType dst_dtype = g.info(dst).dtype;
  Subs subs = {{"T", reduce_type(dtype)},
               {"A", is_float(dtype) ? "f32" : "i32"},
               {"O", reduce_type(dst_dtype)},
               {"ENABLE", ""}};
  if (dtype == DType::F16 || dst_dtype == DType::F16) {
    (void)float_subs(g, DType::F16, a.op);  // throws without shader-f16
    subs.back().second = "enable f16;";
  }
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/reduce.wgsl", subs,
                                   {{"OP", double(op)},
                                    {"MEAN", segs == 1 && scale ? 1.0 : 0.0},
                                    {"INNER", inner ? 1.0 : 0.0},
                                    {"LANES", double(lanes)}});
  const uint64_t outs_per_group = 256 / lanes;
  g.add_dispatch(pl,
                 {segs > 1 || !yb ? Binding::of(dst) : *yb, g.uniform(p), xb ? *xb : Binding::of(x)},
                 grid_for(g, gpu::ceil_div(uint64_t(rows * segs), outs_per_group)), std::string(a.op),
                 fmt::format("{} {} lanes={}{}", label, inner ? "inner" : "strided", lanes,
                             segs > 1 ? fmt::format(" segs={}", segs) : ""));
  if (segs > 1) {
    record_reduce(a, dst, g.info(dst).shape, inner ? std::vector<bool>{false, true} : std::vector<bool>{true, false},
                  op, scale, y, label, false, std::nullopt, yb);
  }
}

Value reduce(const Args& a, TensorRef x, const std::vector<bool>& red, bool keepdim, ReduceOp op, bool mean,
             DType out_dtype, std::string_view label) {
  Graph& g = a.g;
  const Shape in = g.info(x).shape;
  Shape out;
  int64_t rows = 1, count = 1;
  for (size_t d = 0; d < in.size(); ++d) {
    if (red[d]) {
      count *= in[d];
      if (keepdim) out.push_back(1);
    } else {
      rows *= in[d];
      out.push_back(in[d]);
    }
  }
  if ((op == kMax || op == kMin) && count == 0 && rows > 0) {
    a.fail(fmt::format("self {} has size 0 in a reduced dim; {} of no elements is undefined (specify dims of "
                       "non-zero size)",
                       shape_str(in), label));
  }
  TensorRef y = g.add_tensor(out, out_dtype);
  // count 0: the scale is inf, so the mean is 0 * inf = NaN as in ATen.
  std::optional<float> scale;
  if (mean) scale = float(1.0 / double(count));
  if (g.info(x).gpu_bytes() <= binding_limit(g) || rows == 0 || count == 0) {
    record_reduce(a, x, in, red, op, scale, y, label);
    return y;
  }
  // Over the binding limit: spans of x's outermost dim of size > 1 (each a
  // contiguous block). Kept, each span reduces into its block of y; reduced,
  // each into a partial ([1, rows], f32 / i32), and the partials, joined,
  // are reduced once more.
  size_t d0 = 0;
  while (d0 < in.size() && in[d0] == 1) ++d0;
  const uint64_t es = gpu_dtype_size(g.info(x).dtype), unit = uint64_t(contiguous_strides(in)[d0]);
  Shape part = in;
  const std::string what = fmt::format("{}: argument 'self' {} {}", a.op, dtype_name(g.info(x).dtype), shape_str(in));
  if (!red[d0]) {
    const uint64_t out_es = gpu_dtype_size(out_dtype), out_unit = uint64_t(rows / in[d0]);
    for (const Span& s : binding_spans(g, uint64_t(in[d0]), {unit * es, out_unit * out_es}, 1, what)) {
      part[d0] = int64_t(s.count);
      record_reduce(a, x, part, red, op, scale, y, label, true, bind_bytes(g, x, s.start * unit * es, s.count * unit * es),
                    bind_bytes(g, y, s.start * out_unit * out_es, s.count * out_unit * out_es));
    }
    return y;
  }
  const DType acc = is_float(g.info(x).dtype) ? DType::F32 : DType::I32;
  ValueList partials;
  if (uint64_t(rows) * 4 > binding_limit(g)) {
    a.fail(fmt::format("argument 'self' {} {} is over this device's maxStorageBufferBindingSize of {} bytes, and so "
                       "is its result: only one of them is split ({})",
                       dtype_name(g.info(x).dtype), shape_str(in), binding_limit(g), binding_limit_advice(g.ctx())));
  }
  for (const Span& s : binding_spans(g, uint64_t(in[d0]), {unit * es}, 1, what)) {
    part[d0] = int64_t(s.count);
    const TensorRef p = g.add_tensor({1, rows}, acc);
    record_reduce(a, x, part, red, op, std::nullopt, p, label, true,
                  bind_bytes(g, x, s.start * unit * es, s.count * unit * es));
    partials.push_back(p);
  }
  const TensorRef joined = call(g, "aten.cat.default", {partials, int64_t(0)}).tensor();
  record_reduce(a, joined, g.info(joined).shape, {true, false}, op, scale, y, label);
  return y;
}

// sum and prod: integer and bool inputs give int64, as in ATen.
DType sum_dtype(DType d) { return is_float(d) ? d : DType::I64; }

// aten.sum.dim_IntList(self, dim, keepdim=False, dtype=None)
Value sum_dim(Graph& g, const ValueList& args) {
  Args a{"aten.sum.dim_IntList", args, g};
  TensorRef x = a.tensor(0, "self");
  check_input(a, x, true);
  const auto red = reduced_dims(a, 1, g.info(x).shape.size());
  const bool keepdim = a.boolean(2, "keepdim", false);
  const DType out = dtype_arg(a, 3, sum_dtype(g.info(x).dtype), is_float(g.info(x).dtype));
  return reduce(a, x, red, keepdim, kSum, false, out, "sum");
}

// aten.mean.dim(self, dim, keepdim=False, dtype=None): float32 and float16.
Value mean_dim(Graph& g, const ValueList& args) {
  Args a{"aten.mean.dim", args, g};
  TensorRef x = a.tensor(0, "self");
  a.require_float(x, "self");
  check_input(a, x, true);
  const auto red = reduced_dims(a, 1, g.info(x).shape.size());
  const bool keepdim = a.boolean(2, "keepdim", false);
  const DType out = dtype_arg(a, 3, g.info(x).dtype, true);
  return reduce(a, x, red, keepdim, kSum, true, out, "mean");
}

// aten.amax / aten.amin (self, dim=[], keepdim=False)
Value amax_amin(Graph& g, const ValueList& args, bool max) {
  Args a{max ? "aten.amax.default" : "aten.amin.default", args, g};
  TensorRef x = a.tensor(0, "self");
  check_input(a, x, true);
  const auto red = reduced_dims(a, 1, g.info(x).shape.size());
  const bool keepdim = a.boolean(2, "keepdim", false);
  return reduce(a, x, red, keepdim, max ? kMax : kMin, false, g.info(x).dtype, max ? "amax" : "amin");
}

// aten.prod.dim_int(self, dim, keepdim=False, dtype=None)
Value prod_dim(Graph& g, const ValueList& args) {
  Args a{"aten.prod.dim_int", args, g};
  TensorRef x = a.tensor(0, "self");
  check_input(a, x, true);
  const Value& dv = a.at(1, "dim");
  if (!dv.is_int()) a.fail(fmt::format("argument 'dim' must be an Int, got {}", dv.describe()));
  const auto red = reduced_dims(a, 1, g.info(x).shape.size());
  const bool keepdim = a.boolean(2, "keepdim", false);
  const DType out = dtype_arg(a, 3, sum_dtype(g.info(x).dtype), is_float(g.info(x).dtype));
  return reduce(a, x, red, keepdim, kProd, false, out, "prod");
}


// aten.argmax / aten.argmin (self, dim=None, keepdim=False): int64 indices of
// the first extreme along dim (every element, flattened, when dim is None);
// float32, float16, int32 and int64 inputs. `select_last` (ONNX's
// select_last_index) takes the last of equal extremes instead.
Value argmax_argmin(Graph& g, const ValueList& args, bool max) {
  Args a{max ? "aten.argmax.default" : "aten.argmin.default", args, g};
  TensorRef x = a.tensor(0, "self");
  check_input(a, x);
  const DType dt = g.info(x).dtype;
  if (dt != DType::F32 && dt != DType::F16 && dt != DType::I32 && dt != DType::I64) {
    a.fail(fmt::format("argument 'self' has dtype {}; accepted: float32, float16, int32, int64", dtype_name(dt)));
  }
  const Shape in = g.info(x).shape;
  const bool keepdim = a.boolean(2, "keepdim", false);
  const bool last = a.boolean(3, "select_last", false);
  const bool flat = args.size() < 2 || args[1].is_none();
  int64_t outer = 1, n = 1, inner = 1;
  Shape out;
  if (flat) {
    n = numel(in);
    out = keepdim ? Shape(in.size(), 1) : Shape{};
  } else {
    const int64_t d = in.empty() ? normalize_axis(a.integer(1, "dim", 0), 1, a.op, "dim")
                                 : normalize_axis(a.integer(1, "dim", 0), int64_t(in.size()), a.op, "dim");
    for (size_t k = 0; k < in.size(); ++k) {
      if (int64_t(k) < d) outer *= in[k];
      else if (int64_t(k) > d) inner *= in[k];
      else n = in[k];
      if (int64_t(k) != d) out.push_back(in[k]);
      else if (keepdim) out.push_back(1);
    }
  }
  if (n == 0) a.fail(fmt::format("argument 'self' {} has no elements along the reduced dim", shape_str(in)));
  TensorRef y = g.add_tensor(out, DType::I64);
  ArgParams p{uint32_t(outer * inner), uint32_t(n), uint32_t(inner), 0};
  if (p.count == 0) return y;
  const bool fl = is_float(dt);
  Subs subs = fl ? float_subs(g, dt, a.op) : Subs{{"T", "i32"}, {"ENABLE", ""}};
  subs.push_back({"C", fl ? "f32" : "i32"});
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/argmax.wgsl", subs,
                                   {{"MAX", max ? 1.0 : 0.0}, {"LAST", last ? 1.0 : 0.0}, {"FLOAT", fl ? 1.0 : 0.0}});
  g.add_dispatch(pl, {Binding::of(y), g.uniform(p), Binding::of(x)},
                 grid_for(g, gpu::ceil_div(uint64_t(p.count), 256)), std::string(a.op), max ? "argmax" : "argmin");
  return y;
}


// aten._softmax / aten._log_softmax (self, dim, half_to_float): float32 and
// float16; half_to_float (float16 input only) gives a float32 result.
Value softmax(Graph& g, const ValueList& args, bool log) {
  Args a{log ? "aten._log_softmax.default" : "aten._softmax.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const int64_t dim = a.integer(1, "dim", -1);
  const bool half_to_float = a.boolean(2, "half_to_float", false);
  a.require_float(x, "self");
  check_input(a, x, true);
  const Shape in = g.info(x).shape;
  const DType dtype = g.info(x).dtype;
  if (half_to_float && dtype != DType::F16) {
    a.fail(fmt::format("argument 'half_to_float' is True but self is {}; accepted: False, or True with a float16 "
                       "self",
                       dtype_name(dtype)));
  }
  const size_t d = size_t(normalize_axis(dim, int64_t(in.size()), a.op, "dim"));
  int64_t outer = 1, n = 1, inner = 1;
  for (size_t k = 0; k < in.size(); ++k) (k < d ? outer : k == d ? n : inner) *= in[k];
  const DType out_dtype = half_to_float ? DType::F32 : dtype;
  TensorRef y = g.add_tensor(in, out_dtype);
  if (outer * n * inner == 0) return y;
  // The last axis as vec4 where its width is a multiple of 4 (every row
  // then starts on a vector).
  const bool vec4 = inner == 1 && n % 4 == 0;
  Subs subs = vector_subs(g, dtype, vec4, a.op);
  subs.emplace_back("O", wgsl_type(out_dtype));
  subs.emplace_back("OV", vec4 ? fmt::format("vec4<{}>", wgsl_type(out_dtype)) : std::string(wgsl_type(out_dtype)));
  subs.emplace_back("HMAX", vec4 ? "max_nan(max_nan(v.x, v.y), max_nan(v.z, v.w))" : "v");
  const std::string op(a.op);
  // Over the binding limit: spans of the outer dims (each a block of
  // n * inner elements of x and y), one dispatch each.
  const uint64_t block = uint64_t(n * inner), in_es = gpu_dtype_size(dtype), out_es = gpu_dtype_size(out_dtype);
  const std::vector<Span> spans =
      binding_spans(g, uint64_t(outer), {block * in_es, block * out_es}, 1,
                    fmt::format("{}: argument 'self' {} {}", op, dtype_name(dtype), shape_str(in)));
  for (const Span& s : spans) {
    const Binding yb = bind_bytes(g, y, s.start * block * out_es, s.count * block * out_es);
    const Binding xb = bind_bytes(g, x, s.start * block * in_es, s.count * block * in_es);
    if (inner == 1) {
      // WGNN_SOFTMAX_TPR=N (a power of two up to 256; tuning) caps the
      // threads per row.
      const uint32_t tpr_cap = [&] {
        const char* e = g.ctx().settings().get("WGNN_SOFTMAX_TPR");
        if (!e || !*e) return 256u;
        char* end = nullptr;
        const unsigned long v = std::strtoul(e, &end, 10);
        if (*end || v == 0 || v > 256 || (v & (v - 1))) {
          throw Error(fmt::format("WGNN_SOFTMAX_TPR='{}': expected a power of two from 1 to 256", e));
        }
        return uint32_t(v);
      }();
      const int64_t nv = vec4 ? n / 4 : n;  // the row's chunks
      const uint32_t tpr = std::min<uint32_t>(tpr_cap, pow2_floor(uint64_t(std::max<int64_t>(nv / 4, 1))));
      const uint64_t chunks = gpu::ceil_div(uint64_t(nv), tpr);
      const bool cached = chunks <= 16;
      const gpu::Pipeline& pl = kernel(g, "ops/kernels/softmax.wgsl", subs,
                                       {{"TPR", double(tpr)},
                                        {"CHUNKS", double(cached ? chunks : 1)},
                                        {"CACHED", cached ? 1.0 : 0.0},
                                        {"LOG", log ? 1.0 : 0.0}});
      Binding params = g.uniform(SoftmaxParams{uint32_t(s.count), uint32_t(nv), 0, 0});
      g.add_dispatch(pl, {yb, params, xb}, grid_for(g, gpu::ceil_div(s.count, 256 / tpr)), op,
                     fmt::format("softmax{} tpr={}{}", vec4 ? " vec4" : "", tpr,
                                 cached ? fmt::format(" cached{}", chunks) : ""));
    } else {
      const gpu::Pipeline& pl =
          kernel(g, "ops/kernels/softmax_strided.wgsl", subs, {{"LOG", log ? 1.0 : 0.0}});
      const uint64_t columns = s.count * uint64_t(inner);
      Binding params = g.uniform(SoftmaxStridedParams{uint32_t(columns), uint32_t(n), uint32_t(inner), 0});
      g.add_dispatch(pl, {yb, params, xb}, grid_for(g, gpu::ceil_div(columns, 256)), op,
                     "softmax strided");
    }
  }
  return y;
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  r.add("aten.sum.dim_IntList", sum_dim);
  r.add("aten.mean.dim", mean_dim);
  r.add("aten.amax.default", [](Graph& g, const ValueList& args) { return amax_amin(g, args, true); });
  r.add("aten.amin.default", [](Graph& g, const ValueList& args) { return amax_amin(g, args, false); });
  r.add("aten.prod.dim_int", prod_dim);
  r.add("aten.argmax.default", [](Graph& g, const ValueList& args) { return argmax_argmin(g, args, true); });
  r.add("aten.argmin.default", [](Graph& g, const ValueList& args) { return argmax_argmin(g, args, false); });
  r.add("aten._softmax.default", [](Graph& g, const ValueList& args) { return softmax(g, args, false); });
  r.add("aten._log_softmax.default", [](Graph& g, const ValueList& args) { return softmax(g, args, true); });
}

}  // namespace wgnn::ops

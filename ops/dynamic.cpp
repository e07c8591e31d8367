// Ops whose result size depends on the data, each in two parts: one
// computes the size on the GPU (a one-element int32 tensor, which the
// caller reads back: the importer through its probe plans, onnx/subgraph.h),
// the other writes exactly that many results, the size given as `found`.
//
//   wgnn.nonzero_count.default(self) -> int32 [1]
//   wgnn.nonzero.default(self, found) -> int64 [rank, found]
//     the coordinates of the nonzero elements in row-major order (ONNX
//     NonZero's layout); self of a 32-bit dtype (floats compared as floats:
//     -0.0 is zero, NaN is not). kernels/nonzero.wgsl.
//   wgnn.unique_first.default(self) -> int32 [rows]
//     self [outer, rows, inner]: 1 where slice self[:, r, :] equals no
//     earlier slice (kernels/unique_first.wgsl); wgnn.nonzero_count of it
//     is the number of unique slices.
//   wgnn.unique.default(self, first, found, sorted) -> [y, indices, inverse, counts]
//     y [outer, found, inner], the unique slices (in order of first
//     occurrence, or ascending when sorted), indices [found] their first
//     occurrences, inverse [rows] each slice's place in y, counts [found]
//     (int64). self float32, float16, int32 or int64. kernels/unique.wgsl.
//   wgnn.nms_select.default(boxes, scores, thresholds, max_out, has_score_threshold, center_point_box)
//       -> [selected, counts]
//     boxes float32 [batches, n, 4] (n at most 65536), scores float32 [batches, classes, n],
//     thresholds float32 [2] (iou, score): the greedy selection of ONNX
//     NonMaxSuppression per batch and class (kernels/nms.wgsl); selected
//     int32 [batches * classes, max_out], counts int32 [batches * classes].
//   wgnn.sum_count.default(counts) -> int32 [1]: the sum of int32 counts.
//   wgnn.nms.default(selected, counts, found, classes) -> int64 [found, 3]
//     rows [batch, class, box] (kernels/nms_write.wgsl).
// Unique's kernels do one slice per invocation, NonMaxSuppression's one
// (batch, class) per workgroup: quadratic in the number of slices or boxes
// (these ops sit at the ends of detection and tokenizer graphs, on hundreds
// to a few thousands of elements; larger inputs are refused).
#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

constexpr int64_t kMaxDynamic = int64_t(1) << 30;  // elements, slices or boxes (32-bit offsets)

bool is_32bit(DType d) { return d != DType::F16; }

int64_t found_arg(const Args& a, size_t i, int64_t most) {
  const int64_t found = a.integer(i, "found", -1);
  if (found < 0 || found > most) {
    a.fail(fmt::format("argument 'found' is {}; it must be in [0, {}] (the size read back)", found, most));
  }
  return found;
}

// The nonzero kernel's phase 1: out[0] = the sum of counts[0, n).
TensorRef sum_counts(Graph& g, const Args& a, TensorRef counts, uint64_t n) {
  TensorRef total = g.add_tensor({1}, DType::I32);
  NonzeroParams p{0, uint32_t(n), 0, 0};
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/nonzero.wgsl", {}, {{"PHASE", 1.0}});
  g.add_dispatch(pl,
                 {Binding::of(total), Binding::of(counts), g.uniform(p), optional_input(g, Value()),
                  optional_input(g, Value())},
                 gpu::Grid{1, 1, 1}, std::string(a.op), "sum_counts");
  return total;
}

Value nonzero_count(Graph& g, const ValueList& args) {
  Args a{"wgnn.nonzero_count.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const TensorInfo& xi = g.info(x);
  if (!is_32bit(xi.dtype)) a.fail("argument 'self' is float16; cast it to float32 first");
  a.require_fits_binding(x, "self");
  const int64_t count = xi.numel();
  if (count > kMaxDynamic) a.fail(fmt::format("argument 'self' has {} elements; at most {}", count, kMaxDynamic));
  if (count == 0) {
    const int32_t zero = 0;
    return g.add_constant({1}, DType::I32, &zero, "nonzero_count_empty");
  }
  const uint64_t blocks = gpu::ceil_div(uint64_t(count), 256);
  TensorRef counts = g.add_tensor({int64_t(blocks)}, DType::I32);
  TensorRef unused = g.add_tensor({1}, DType::I32);  // binding 0, which phase 0 does not write
  NonzeroParams p{uint32_t(count), uint32_t(blocks), 0, 0};
  const bool is_float = xi.dtype == DType::F32;
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/nonzero.wgsl", {}, {{"PHASE", 0.0}, {"IS_FLOAT", is_float ? 1.0 : 0.0}});
  g.add_dispatch(pl,
                 {Binding::of(unused), Binding::of(counts), g.uniform(p), Binding::of(x),
                  optional_input(g, Value())},
                 grid_for(g, blocks), std::string(a.op), "nonzero_blocks");
  return sum_counts(g, a, counts, blocks);
}

Value nonzero(Graph& g, const ValueList& args) {
  Args a{"wgnn.nonzero.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const TensorInfo xi = g.info(x);
  if (!is_32bit(xi.dtype)) a.fail("argument 'self' is float16; cast it to float32 first");
  a.require_fits_binding(x, "self");
  const int64_t count = xi.numel();
  if (count > kMaxDynamic) a.fail(fmt::format("argument 'self' has {} elements; at most {}", count, kMaxDynamic));
  const int64_t found = found_arg(a, 1, count);
  const int64_t rank = int64_t(xi.shape.size());
  TensorRef y = g.add_tensor({rank, found}, DType::I64);
  if (found == 0 || rank == 0) return y;
  std::vector<int32_t> dims(xi.shape.begin(), xi.shape.end());
  TensorRef dims_t = g.add_constant({rank}, DType::I32, dims.data(), "nonzero_dims");
  const uint64_t blocks = gpu::ceil_div(uint64_t(count), 256);
  TensorRef counts = g.add_tensor({int64_t(blocks)}, DType::I32);
  NonzeroParams p{uint32_t(count), uint32_t(blocks), uint32_t(found), uint32_t(rank)};
  const double is_float = xi.dtype == DType::F32 ? 1.0 : 0.0;
  const gpu::Pipeline& p0 = kernel(g, "ops/kernels/nonzero.wgsl", {}, {{"PHASE", 0.0}, {"IS_FLOAT", is_float}});
  g.add_dispatch(p0,
                 {Binding::of(y), Binding::of(counts), g.uniform(p), Binding::of(x), Binding::of(dims_t)},
                 grid_for(g, blocks), std::string(a.op), "nonzero_blocks");
  const gpu::Pipeline& p2 = kernel(g, "ops/kernels/nonzero.wgsl", {}, {{"PHASE", 2.0}, {"IS_FLOAT", is_float}});
  g.add_dispatch(p2,
                 {Binding::of(y), Binding::of(counts), g.uniform(p), Binding::of(x), Binding::of(dims_t)},
                 grid_for(g, blocks), std::string(a.op), "nonzero_write");
  return y;
}

Subs unique_subs(Graph& g, DType d, std::string_view op) {
  if (d == DType::F32 || d == DType::F16) return float_subs(g, d, op);
  return {{"T", "i32"}, {"ENABLE", ""}};
}

void check_unique_input(const Args& a, TensorRef x) {
  const TensorInfo& xi = a.g.info(x);
  if (xi.shape.size() != 3) a.fail(fmt::format("argument 'self' {} must be [outer, rows, inner]", shape_str(xi.shape)));
  if (xi.dtype != DType::F32 && xi.dtype != DType::F16 && xi.dtype != DType::I32 && xi.dtype != DType::I64) {
    a.fail(fmt::format("argument 'self' has dtype {}; accepted: float32, float16, int32, int64", dtype_name(xi.dtype)));
  }
  if (xi.numel() > kMaxDynamic) a.fail(fmt::format("argument 'self' has {} elements; at most {}", xi.numel(), kMaxDynamic));
  // The kernels compare every slice with every other: refuse what would run for minutes.
  const double work = double(xi.shape[1]) * double(xi.shape[1]) * double(xi.shape[0]) * double(xi.shape[2]);
  if (work > double(int64_t(1) << 36)) {
    a.fail(fmt::format("argument 'self' {}: {} slices of {} elements; the kernels compare every pair of slices, "
                       "at most 2^36 element comparisons",
                       shape_str(xi.shape), xi.shape[1], xi.shape[0] * xi.shape[2]));
  }
  a.require_fits_binding(x, "self");
}

Value unique_first(Graph& g, const ValueList& args) {
  Args a{"wgnn.unique_first.default", args, g};
  TensorRef x = a.tensor(0, "self");
  check_unique_input(a, x);
  const Shape s = g.info(x).shape;
  TensorRef first = g.add_tensor({s[1]}, DType::I32);
  if (numel(s) == 0) {
    if (s[1] == 0) return first;
    a.fail(fmt::format("argument 'self' {}: slices of no elements", shape_str(s)));
  }
  UniqueParams p{uint32_t(s[0]), uint32_t(s[1]), uint32_t(s[2]), 0, 0, 0, 0, 0};
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/unique_first.wgsl", unique_subs(g, g.info(x).dtype, a.op));
  g.add_dispatch(pl, {Binding::of(first), g.uniform(p), Binding::of(x)},
                 gpu::Grid{uint32_t(gpu::ceil_div(uint64_t(s[1]), 64)), 1, 1}, std::string(a.op), "unique_first");
  return first;
}

Value unique(Graph& g, const ValueList& args) {
  Args a{"wgnn.unique.default", args, g};
  TensorRef x = a.tensor(0, "self");
  check_unique_input(a, x);
  TensorRef first = a.tensor(1, "first");
  const Shape s = g.info(x).shape;
  if (g.info(first).shape != Shape{s[1]} || g.info(first).dtype != DType::I32) {
    a.fail(fmt::format("argument 'first' must be int32 [{}] (wgnn.unique_first of self)", s[1]));
  }
  const int64_t found = found_arg(a, 2, s[1]);
  const bool sorted = a.boolean(3, "sorted", true);
  if (s[1] > 65535 * 64) a.fail(fmt::format("argument 'self' {}: at most {} slices", shape_str(s), 65535 * 64));
  TensorRef y = g.add_tensor({s[0], found, s[2]}, g.info(x).dtype);
  TensorRef idx = g.add_tensor({found}, DType::I64);
  TensorRef inv = g.add_tensor({s[1]}, DType::I64);
  TensorRef cnt = g.add_tensor({found}, DType::I64);
  ValueList out{y, idx, inv, cnt};
  if (found == 0) return out;
  UniqueParams p{uint32_t(s[0]), uint32_t(s[1]), uint32_t(s[2]), uint32_t(found), sorted ? 1u : 0u, 0, 0, 0};
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/unique.wgsl", unique_subs(g, g.info(x).dtype, a.op));
  g.add_dispatch(pl,
                 {Binding::of(y), Binding::of(idx), Binding::of(inv), Binding::of(cnt), g.uniform(p),
                  Binding::of(x), Binding::of(first)},
                 gpu::Grid{uint32_t(gpu::ceil_div(uint64_t(s[1]), 64)), 1, 1}, std::string(a.op), "unique");
  return out;
}

Value nms_select(Graph& g, const ValueList& args) {
  Args a{"wgnn.nms_select.default", args, g};
  TensorRef boxes = a.tensor(0, "boxes"), scores = a.tensor(1, "scores"), thr = a.tensor(2, "thresholds");
  const Shape bs = g.info(boxes).shape, ss = g.info(scores).shape;
  for (TensorRef t : {boxes, scores, thr}) {
    if (g.info(t).dtype != DType::F32) a.fail("boxes, scores and thresholds must be float32");
  }
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1]) {
    a.fail(fmt::format("boxes {} must be [batches, n, 4] and scores {} [batches, classes, n]", shape_str(bs),
                       shape_str(ss)));
  }
  if (g.info(thr).numel() != 2) a.fail("argument 'thresholds' must hold 2 values (iou, score)");
  const int64_t max_out = a.integer(3, "max_out", 0);
  const bool has_score = a.boolean(4, "has_score_threshold", false);
  const int64_t center = a.integer(5, "center_point_box", 0);
  const int64_t pairs = ss[0] * ss[1];
  if (max_out < 1 || max_out > bs[1]) a.fail(fmt::format("argument 'max_out' is {}; accepted: 1 to n = {}", max_out, bs[1]));
  if (center != 0 && center != 1) a.fail(fmt::format("argument 'center_point_box' is {}; accepted: 0 or 1", center));
  // Each (batch, class) is one workgroup scanning its n boxes per candidate taken.
  if (pairs < 1 || pairs * max_out > kMaxDynamic || bs[1] > 65536 || pairs > 65535 * 64) {
    a.fail(fmt::format("boxes {} and scores {}: too many to select from", shape_str(bs), shape_str(ss)));
  }
  a.require_fits_binding(boxes, "boxes");
  a.require_fits_binding(scores, "scores");
  TensorRef sel = g.add_tensor({pairs, max_out}, DType::I32);
  TensorRef counts = g.add_tensor({pairs}, DType::I32);
  NmsParams p{uint32_t(ss[0]), uint32_t(ss[1]), uint32_t(bs[1]), uint32_t(max_out), 0.f, 0.f,
              has_score ? 1u : 0u, uint32_t(center), 0, 0, 0, 0};
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/nms.wgsl");
  g.add_dispatch(pl,
                 {Binding::of(sel), Binding::of(counts), g.uniform(p), Binding::of(boxes),
                  Binding::of(scores), Binding::of(thr)},
                 grid_for(g, uint64_t(pairs)), std::string(a.op), "nms_select");
  return ValueList{sel, counts};
}

Value sum_count(Graph& g, const ValueList& args) {
  Args a{"wgnn.sum_count.default", args, g};
  TensorRef counts = a.tensor(0, "counts");
  if (g.info(counts).dtype != DType::I32 || g.info(counts).shape.size() != 1 || g.info(counts).numel() < 1) {
    a.fail("argument 'counts' must be a non-empty int32 vector");
  }
  return sum_counts(g, a, counts, uint64_t(g.info(counts).numel()));
}

Value nms(Graph& g, const ValueList& args) {
  Args a{"wgnn.nms.default", args, g};
  TensorRef sel = a.tensor(0, "selected"), counts = a.tensor(1, "counts");
  const Shape ss = g.info(sel).shape;
  if (ss.size() != 2 || g.info(counts).shape != Shape{ss[0]}) {
    a.fail("arguments 'selected' [pairs, max_out] and 'counts' [pairs] come from wgnn.nms_select");
  }
  const int64_t found = found_arg(a, 2, ss[0] * ss[1]);
  const int64_t classes = a.integer(3, "classes", 0);
  if (classes < 1 || ss[0] % classes != 0) a.fail(fmt::format("argument 'classes' is {}", classes));
  TensorRef y = g.add_tensor({found, 3}, DType::I64);
  if (found == 0) return y;
  NmsParams p{uint32_t(ss[0] / classes), uint32_t(classes), 0, uint32_t(ss[1]), 0.f, 0.f, 0, 0, uint32_t(found),
              0, 0, 0};
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/nms_write.wgsl");
  g.add_dispatch(pl, {Binding::of(y), g.uniform(p), Binding::of(sel), Binding::of(counts)},
                 gpu::Grid{uint32_t(gpu::ceil_div(uint64_t(ss[0]), 64)), 1, 1}, std::string(a.op), "nms_write");
  return y;
}

}  // namespace

void register_dynamic_ops(OpRegistry& r) {
  r.add("wgnn.nonzero_count.default", nonzero_count);
  r.add("wgnn.nonzero.default", nonzero);
  r.add("wgnn.unique_first.default", unique_first);
  r.add("wgnn.unique.default", unique);
  r.add("wgnn.nms_select.default", nms_select);
  r.add("wgnn.sum_count.default", sum_count);
  r.add("wgnn.nms.default", nms);
}

}  // namespace wgnn::ops

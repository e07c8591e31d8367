// Indexed reads and writes by index tuples and along an axis, beyond
// ops/movement.cpp's index_select and gather:
//
//   wgnn.gather_nd.default(self, index, batch_dims=0)          ONNX GatherND
//   wgnn.scatter_nd.default(self, index, src, reduce="none")   ONNX ScatterND
//   aten.scatter.src(self, dim, index, src)                    ONNX ScatterElements
//   aten.scatter_reduce.two(self, dim, index, src, reduce, include_self=True)
//
// index is int32 or int64 (stored as int32); negative indices count from
// the end. A constant index is checked here, on the host; others on the
// GPU in the graph's checked mode (Graph::add_check), else clamped
// (gather_nd) or dropped (the scatters). scatter_reduce's reduce is "sum",
// "prod", "amax" or "amin" (include_self True only); scatter_nd's is
// "none", "add", "mul", "max" or "min". float32, float16, int32, int64;
// bool, uint8 and int8 without a reduction. A scatter copies self, then one
// invocation per element of src combines it into the copy
// (kernels/scatter.wgsl: compare-and-swap on 32-bit words, so duplicate
// indices combine; with "none" a duplicate's winner is unspecified, as
// ONNX says).
#include <fmt/format.h>

#include <optional>

#include "ops/helpers.h"
#include "ops/uniforms.h"
#include "ops/layout.h"
#include "ops/registry.h"

namespace wgnn::ops {
namespace {

constexpr int64_t kMaxElements = INT32_MAX;


void require_index(const Args& a, TensorRef index) {
  const DType dt = a.g.info(index).dtype;
  if (dt != DType::I32 && dt != DType::I64) {
    a.fail(fmt::format("argument 'index' has dtype {}; accepted: int32, int64", dtype_name(dt)));
  }
  a.require_fits_binding(index, "index");
}

void require_small(const Args& a, TensorRef t, std::string_view name) {
  const TensorInfo& ti = a.g.info(t);
  require_rank(ti.shape, a.op, name);
  if (ti.numel() > kMaxElements) {
    a.fail(fmt::format("argument '{}' {} has {} elements; at most {} are supported (32-bit offsets)", name,
                       shape_str(ti.shape), ti.numel(), kMaxElements));
  }
  a.require_fits_binding(t, name);
}

// The values of a constant index (else nullopt).
std::optional<std::vector<int64_t>> constant_index(const Args& a, TensorRef index) {
  const TensorInfo& ti = a.g.info(index);
  if (ti.kind != TensorKind::Constant) return std::nullopt;
  if (ti.dtype == DType::I64) return a.g.read<int64_t>(index);
  const auto v32 = a.g.read<int32_t>(index);
  return std::vector<int64_t>(v32.begin(), v32.end());
}

void check_value(const Args& a, int64_t v, size_t at, int64_t size, size_t d) {
  if (v < -size || v >= size) {
    a.fail(fmt::format("argument 'index' holds {} at flat position {}; accepted: indices in [{}, {}) for dim {} of "
                       "size {}",
                       v, at, -size, size, d, size));
  }
}

// The run-time check for a computed index (nullopt for a constant or
// unchecked graph).
std::optional<Graph::Check> run_check(const Args& a, TensorRef index, std::string_view what) {
  if (!a.g.checked() || a.g.info(index).kind == TensorKind::Constant) return std::nullopt;
  return a.g.add_check(fmt::format("{}: index {{}} is out of range ({})", a.op, what));
}

Subs element_subs(Graph& g, DType dtype, std::string_view op) {
  if (dtype == DType::F16) return float_subs(g, dtype, op);
  return {{"T", "u32"}, {"ENABLE", ""}};
}

Value gather_nd(Graph& g, const ValueList& args) {
  Args a{"wgnn.gather_nd.default", args, g};
  TensorRef x = a.tensor(0, "self");
  TensorRef index = a.tensor(1, "index");
  const int64_t b = a.integer(2, "batch_dims", 0);
  require_small(a, x, "self");
  require_index(a, index);
  const Shape ds = g.info(x).shape, is = g.info(index).shape;
  const int64_t r = int64_t(ds.size()), qr = int64_t(is.size());
  if (qr < 1 || r < 1) a.fail(fmt::format("self {} and index {} must have rank 1 or more", shape_str(ds), shape_str(is)));
  if (b < 0 || b >= std::min(r, qr)) {
    a.fail(fmt::format("argument 'batch_dims' is {}; accepted: 0 to {} (less than both ranks)", b, std::min(r, qr) - 1));
  }
  for (int64_t k = 0; k < b; ++k) {
    if (ds[size_t(k)] != is[size_t(k)]) {
      a.fail(fmt::format("self {} and index {} differ in batch dim {}", shape_str(ds), shape_str(is), k));
    }
  }
  const int64_t q = is.back();
  if (q < 1 || q > r - b) {
    a.fail(fmt::format("index {}: its last dim {} must be 1 to {} (the rank of self {} less batch_dims {})",
                       shape_str(is), q, r - b, shape_str(ds), b));
  }
  Shape out(is.begin(), is.end() - 1);
  out.insert(out.end(), ds.begin() + b + q, ds.end());
  TensorRef y = g.add_tensor(out, g.info(x).dtype);
  const int64_t count = numel(out);
  if (count == 0) return y;
  int64_t batch = 1, tuples = 1, slice = 1;
  for (int64_t k = 0; k < b; ++k) batch *= ds[size_t(k)];
  for (int64_t k = 0; k + 1 < qr; ++k) tuples *= is[size_t(k)];
  for (int64_t k = b + q; k < r; ++k) slice *= ds[size_t(k)];
  const Shape inner(ds.begin() + b, ds.end());
  const Shape strides = contiguous_strides(inner);
  GatherNdParams p{};
  p.count = uint32_t(count);
  p.q = uint32_t(q);
  p.slice = uint32_t(slice);
  p.per_batch = uint32_t(tuples / batch);
  p.batch_stride = uint32_t(numel(inner));
  for (int64_t j = 0; j < q; ++j) {
    p.dims[size_t(j)] = uint32_t(inner[size_t(j)]);
    p.strides[size_t(j)] = uint32_t(strides[size_t(j)]);
    if (inner[size_t(j)] == 0) a.fail(fmt::format("dim {} of self {} is 0: every index is out of range", b + j, shape_str(ds)));
  }
  if (auto v = constant_index(a, index)) {
    for (size_t i = 0; i < v->size(); ++i) check_value(a, (*v)[i], i, inner[i % size_t(q)], size_t(b) + i % size_t(q));
  }
  auto chk = run_check(a, index, fmt::format("self {}, batch_dims {}", shape_str(ds), b));
  if (chk) p.check_slot = chk->slot;
  Subs subs = element_subs(g, g.info(x).dtype, a.op);
  for (auto& s : check_subs(chk.has_value(), 4)) subs.push_back(std::move(s));
  a.require_fits_binding(y, "the result");
  std::vector<Binding> bind = {Binding::of(y), g.uniform(p), Binding::of(x), Binding::of(index)};
  if (chk) bind.push_back(Binding::of(chk->flags));
  g.add_dispatch(kernel(g, "ops/kernels/gather_nd.wgsl", subs), std::move(bind),
                 grid_for(g, gpu::ceil_div(uint64_t(count), 256)), std::string(a.op), "gather_nd");
  return y;
}

// kernels/scatter.wgsl's KIND; bool, uint8 and int8 (stored as 32 bits)
// take no reduction.
uint32_t kind_of(const Args& a, DType dt, uint32_t reduce) {
  switch (dt) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::I32:
    case DType::I64: return 2;
    case DType::Bool:
    case DType::U8:
    case DType::I8:
      if (reduce == 0) return 2;
      a.fail(fmt::format("argument 'self' has dtype {}; a reduction takes float32, float16, int32, int64",
                         dtype_name(dt)));
    default:
      a.fail(fmt::format("argument 'self' has dtype {}", dtype_name(dt)));
  }
}

// Copies self and records the scatter of src into the copy.
TensorRef record_scatter(const Args& a, TensorRef x, TensorRef index, TensorRef src, ScatterParams p, bool elements,
                         uint32_t reduce, const std::string& what) {
  Graph& g = a.g;
  const Shape ds = g.info(x).shape;
  // A copy of its own (an identity permute would be a view of self).
  TensorRef y = call(g, "aten._to_copy.default", {x}).tensor();
  if (p.count == 0) return y;
  const Shape strides = contiguous_strides(ds);
  for (size_t d = 0; d < ds.size(); ++d) {
    p.dims[d] = uint32_t(ds[d]);
    p.strides[d] = uint32_t(strides[d]);
  }
  auto chk = run_check(a, index, what);
  if (chk) p.check_slot = chk->slot;
  Subs subs = check_subs(chk.has_value(), 4);
  const uint32_t kind = kind_of(a, g.info(x).dtype, reduce);
  std::vector<Binding> bind = {Binding::of(y), g.uniform(p), Binding::of(index), Binding::of(src)};
  if (chk) bind.push_back(Binding::of(chk->flags));
  g.add_dispatch(kernel(g, "ops/kernels/scatter.wgsl", subs,
                        {{"REDUCE", double(reduce)}, {"ELEMENTS", elements ? 1.0 : 0.0}, {"KIND", double(kind)}}),
                 std::move(bind), grid_for(g, gpu::ceil_div(uint64_t(p.count), 256)), std::string(a.op),
                 elements ? "scatter_elements" : "scatter_nd");
  return y;
}

void require_same_dtype(const Args& a, TensorRef x, TensorRef src) {
  if (a.g.info(x).dtype != a.g.info(src).dtype) {
    a.fail(fmt::format("argument 'src' has dtype {} but self has {}", dtype_name(a.g.info(src).dtype),
                       dtype_name(a.g.info(x).dtype)));
  }
}

Value scatter_nd(Graph& g, const ValueList& args) {
  Args a{"wgnn.scatter_nd.default", args, g};
  TensorRef x = a.tensor(0, "self");
  TensorRef index = a.tensor(1, "index");
  TensorRef src = a.tensor(2, "src");
  const std::string reduce = a.string(3, "reduce", "none");
  require_small(a, x, "self");
  require_small(a, src, "src");
  require_index(a, index);
  require_same_dtype(a, x, src);
  const std::vector<std::string> names = {"none", "add", "mul", "max", "min"};
  const auto it = std::find(names.begin(), names.end(), reduce);
  if (it == names.end()) a.fail(fmt::format("argument 'reduce' is '{}'; accepted: none, add, mul, max, min", reduce));
  const Shape ds = g.info(x).shape, is = g.info(index).shape, us = g.info(src).shape;
  const int64_t r = int64_t(ds.size());
  if (is.empty() || r < 1) a.fail(fmt::format("self {} and index {} must have rank 1 or more", shape_str(ds), shape_str(is)));
  const int64_t q = is.back();
  if (q < 1 || q > r) a.fail(fmt::format("index {}: its last dim must be 1 to {} (the rank of self {})", shape_str(is), r, shape_str(ds)));
  Shape want(is.begin(), is.end() - 1);
  want.insert(want.end(), ds.begin() + q, ds.end());
  if (us != want) {
    a.fail(fmt::format("argument 'src' {} must be {} (index {} without its last dim, then self {} after its first "
                       "{} dims)",
                       shape_str(us), shape_str(want), shape_str(is), shape_str(ds), q));
  }
  for (int64_t j = 0; j < q; ++j) {
    if (ds[size_t(j)] == 0 && numel(us) > 0) a.fail(fmt::format("dim {} of self {} is 0: every index is out of range", j, shape_str(ds)));
  }
  if (auto v = constant_index(a, index)) {
    for (size_t i = 0; i < v->size(); ++i) check_value(a, (*v)[i], i, ds[i % size_t(q)], i % size_t(q));
  }
  int64_t slice = 1;
  for (int64_t k = q; k < r; ++k) slice *= ds[size_t(k)];
  ScatterParams p{};
  p.count = uint32_t(numel(us));
  p.q = uint32_t(q);
  p.slice = uint32_t(std::max<int64_t>(slice, 1));
  return record_scatter(a, x, index, src, p, false, uint32_t(it - names.begin()),
                        fmt::format("self {}, index {}", shape_str(ds), shape_str(is)));
}

// aten.scatter.src (reduce none) and aten.scatter_reduce.two.
Value scatter_elements(Graph& g, const ValueList& args, bool with_reduce) {
  Args a{with_reduce ? "aten.scatter_reduce.two" : "aten.scatter.src", args, g};
  TensorRef x = a.tensor(0, "self");
  const int64_t dim = a.integer(1, "dim", 0);
  TensorRef index = a.tensor(2, "index");
  TensorRef src = a.tensor(3, "src");
  uint32_t reduce = 0;
  if (with_reduce) {
    const std::string rs = a.string(4, "reduce", "sum");
    const std::vector<std::string> names = {"", "sum", "prod", "amax", "amin"};
    const auto it = std::find(names.begin() + 1, names.end(), rs);
    if (it == names.end()) a.fail(fmt::format("argument 'reduce' is '{}'; accepted: sum, prod, amax, amin", rs));
    reduce = uint32_t(it - names.begin());
    if (!a.boolean(5, "include_self", true)) a.fail("argument 'include_self' False is not supported (only True)");
  }
  require_small(a, x, "self");
  require_small(a, src, "src");
  require_index(a, index);
  require_same_dtype(a, x, src);
  const Shape ds = g.info(x).shape, is = g.info(index).shape, us = g.info(src).shape;
  const int64_t r = int64_t(ds.size());
  if (r < 1) a.fail(fmt::format("argument 'self' {} must have rank 1 or more", shape_str(ds)));
  const size_t d = size_t(normalize_axis(dim, r, a.op, "dim"));
  bool ok = is.size() == ds.size() && us.size() == ds.size();
  for (size_t k = 0; ok && k < is.size(); ++k) ok = is[k] <= us[k] && (k == d || is[k] <= ds[k]);
  if (!ok) {
    a.fail(fmt::format("argument 'index' {} must have the rank of self {} and src {}, with sizes no larger than src's "
                       "and (outside dim {}) self's",
                       shape_str(is), shape_str(ds), shape_str(us), d));
  }
  if (ds[d] == 0 && numel(is) > 0) a.fail(fmt::format("dim {} of self {} is 0: every index is out of range", d, shape_str(ds)));
  if (auto v = constant_index(a, index)) {
    for (size_t i = 0; i < v->size(); ++i) check_value(a, (*v)[i], i, ds[d], d);
  }
  // src larger than index: only its leading block of index's shape is read.
  TensorRef s = src;
  for (size_t k = 0; k < us.size(); ++k) {
    if (us[k] != is[k]) s = call(g, "aten.slice.Tensor", {s, int64_t(k), int64_t(0), is[k], int64_t(1)}).tensor();
  }
  ScatterParams p{};
  p.count = uint32_t(numel(is));
  p.q = uint32_t(r);
  p.slice = uint32_t(d);
  for (size_t k = 0; k < is.size(); ++k) p.ushape[k] = uint32_t(is[k]);
  return record_scatter(a, x, index, s, p, true, reduce,
                        fmt::format("accepted [{}, {}) for dim {} of size {}", -ds[d], ds[d], d, ds[d]));
}

}  // namespace

void register_scatter_ops(OpRegistry& r) {
  r.add("wgnn.gather_nd.default", gather_nd);
  r.add("wgnn.scatter_nd.default", scatter_nd);
  r.add("aten.scatter.src", [](Graph& g, const ValueList& args) { return scatter_elements(g, args, false); });
  r.add("aten.scatter_reduce.two", [](Graph& g, const ValueList& args) { return scatter_elements(g, args, true); });
}

}  // namespace wgnn::ops

// Data-movement ops with ATen's names and arguments: permute, cat,
// split_with_sizes, slice, index_select, gather, expand, repeat, pad, triu and tril.
// Every output is a new contiguous tensor, except a permute that moves only
// size-1 dims: that is a view of its input.
//
// Two kernels do all of it. kernels/copy.wgsl is a strided copy over an
// iteration shape of rank <= 8 (affine source offsets with signed strides,
// or per-dimension wrap / pad transforms); kernels/index.wgsl reads through
// an index tensor along one dimension (kernels/trilu.wgsl, for triu and tril,
// zeroes outside a band of the last two dims). They move elements bit for bit in
// their storage type: u32 for every 32-bit GPU dtype (float32, int32, int64
// stored as int32, bool / uint8 / int8 stored as 32 bits) and f16 for
// float16. float16 is moved as array<f16>, one 2-byte element per
// invocation, so it needs the shader-f16 feature like every other float16
// op (the error says so); moving packed u32 pairs would need read-modify-
// write at the seams of cat and is not worth it while float16 compute needs
// the feature anyway.
//
// Before recording, a copy is simplified: size-1 dims are dropped and
// neighbouring dims that are contiguous in both source and destination are
// merged (an identity permute becomes a flat copy). Zero-size results
// record no dispatch.
#include <algorithm>
#include <cstdlib>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "graph/half.h"
#include "ops/helpers.h"
#include "ops/layout.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

// WGNN_NO_VIEWS=1: slices and permutes always copy and concatenations copy
// every input (for measuring what the views save).
bool views_enabled(const Settings& settings) {
  const char* e = settings.get("WGNN_NO_VIEWS");
  return !e || !*e || std::string_view(e) == "0";
}


// Offsets are computed in 32 bits on the GPU.
constexpr int64_t kMaxElements = INT32_MAX;

std::string list_str(const IntList& l) { return fmt::format("[{}]", fmt::join(l, ", ")); }

// {{T}} for kernels that move elements of `dtype` bit for bit.
Subs element_subs(Graph& g, DType dtype, std::string_view op) {
  if (dtype == DType::F16) return float_subs(g, dtype, op);
  return {{"T", "u32"}, {"ENABLE", ""}};
}

void check_input(const Args& a, TensorRef t, std::string_view name) {
  const TensorInfo& ti = a.g.info(t);
  require_rank(ti.shape, a.op, name);
  if (ti.numel() > kMaxElements) {
    a.fail(fmt::format("argument '{}' {} has {} elements; at most {} are supported (32-bit offsets)", name,
                       shape_str(ti.shape), ti.numel(), kMaxElements));
  }
}

// Adds the op's result after checking its rank and size.
TensorRef add_output(const Args& a, const Shape& shape, DType dtype) {
  if (shape.size() > size_t(kMaxRank)) {
    a.fail(fmt::format("the result would have rank {} ({}); at most {} is supported", shape.size(),
                       shape_str(shape), kMaxRank));
  }
  // The element count, saturated at kMaxElements + 1 (requested sizes may be
  // huge: numel could overflow).
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) {
      n = 0;
      break;
    }
  }
  for (size_t i = 0; n != 0 && i < shape.size(); ++i) n = shape[i] > kMaxElements / n ? kMaxElements + 1 : n * shape[i];
  if (n > kMaxElements) {
    a.fail(fmt::format("the result {} would have more than {} elements; at most {} are supported (32-bit offsets)",
                       shape_str(shape), kMaxElements, kMaxElements));
  }
  // Over maxStorageBufferBindingSize is fine (the copies split), over
  // maxBufferSize is not (one buffer per tensor).
  const uint64_t bytes = uint64_t(n) * gpu_dtype_size(dtype);
  const uint64_t limit = a.g.ctx().limits().max_buffer_size;
  if (bytes > limit) {
    a.fail(fmt::format("the result {} {} would be {} bytes, over this device's maxBufferSize of {} bytes (a tensor "
                       "is one buffer)",
                       dtype_name(dtype), shape_str(shape), bytes, limit));
  }
  return a.g.add_tensor(shape, dtype);
}

bool arg_is_none(const Args& a, size_t i) { return i >= a.args.size() || a.args[i].is_none(); }

// ---------------------------------------------------------------------------
// The strided copy (kernels/copy.wgsl).

enum CopyMode : uint32_t {
  kAffine = 0,
  kWrap = 1,
  kPadConstant = 2,
  kPadReflect = 3,
  kPadReplicate = 4,
  kPadCircular = 5,
};

// For each coordinate c of `shape`: dst offset dst_base + sum c*dst_stride;
// source coordinate c (affine), c % in_dim (wrap) or c - lo with the pad
// rule (pad modes); src offset src_base + sum coord*src_stride.
struct CopyPlan {
  CopyMode mode = kAffine;
  Shape shape, dst_stride, src_stride, lo, in_dim;
  int64_t dst_base = 0, src_base = 0;
};

// A plan over `shape` writing a contiguous result and reading with
// `src_stride` (lo 0, in_dim = shape: every dim plain).
CopyPlan plain_plan(const Shape& shape, const Shape& src_stride, int64_t src_base = 0) {
  CopyPlan p;
  p.shape = shape;
  p.dst_stride = contiguous_strides(shape);
  p.src_stride = src_stride;
  p.lo.assign(shape.size(), 0);
  p.in_dim = shape;
  p.src_base = src_base;
  return p;
}

// Drops size-1 plain dims and merges neighbouring plain dims that are
// contiguous in both source and destination.
void simplify(CopyPlan& p) {
  CopyPlan q;
  q.mode = p.mode;
  q.dst_base = p.dst_base;
  q.src_base = p.src_base;
  auto plain = [&](size_t d) { return p.lo[d] == 0 && p.in_dim[d] == p.shape[d]; };
  std::vector<bool> q_plain;
  for (size_t d = 0; d < p.shape.size(); ++d) {
    if (p.shape[d] == 1 && plain(d)) continue;
    if (!q.shape.empty() && plain(d) && q_plain.back() && q.dst_stride.back() == p.dst_stride[d] * p.shape[d] &&
        q.src_stride.back() == p.src_stride[d] * p.shape[d]) {
      q.shape.back() *= p.shape[d];
      q.in_dim.back() = q.shape.back();
      q.dst_stride.back() = p.dst_stride[d];
      q.src_stride.back() = p.src_stride[d];
      continue;
    }
    q.shape.push_back(p.shape[d]);
    q.dst_stride.push_back(p.dst_stride[d]);
    q.src_stride.push_back(p.src_stride[d]);
    q.lo.push_back(p.lo[d]);
    q.in_dim.push_back(p.in_dim[d]);
    q_plain.push_back(plain(d));
  }
  p = std::move(q);
}

static_assert(sizeof(CopyParams) == 176);

uint32_t bits32(int64_t v) { return uint32_t(int32_t(v)); }

// Offsets of a plan's elements, [lo, hi], in its source (a dim's source
// coordinate spans [0, shape) when plain, [0, in_dim) otherwise) or in its
// destination.
std::pair<int64_t, int64_t> src_extent(const CopyPlan& p) {
  int64_t lo = p.src_base, hi = p.src_base;
  for (size_t d = 0; d < p.shape.size(); ++d) {
    const bool plain = p.lo[d] == 0 && p.in_dim[d] == p.shape[d];
    const int64_t span = ((plain ? p.shape[d] : p.in_dim[d]) - 1) * p.src_stride[d];
    lo += std::min<int64_t>(span, 0);
    hi += std::max<int64_t>(span, 0);
  }
  return {lo, hi};
}
std::pair<int64_t, int64_t> dst_extent(const CopyPlan& p) {
  int64_t hi = p.dst_base;
  for (size_t d = 0; d < p.shape.size(); ++d) hi += (p.shape[d] - 1) * p.dst_stride[d];
  return {p.dst_base, hi};
}

// The part of plan `p` at coordinates [start, start + len) of dim d. A
// pad-mode dim shifts its pad start; a wrap-mode dim may only be cut where
// it is plain (the caller checks).
CopyPlan sub_plan(const CopyPlan& p, size_t d, int64_t start, int64_t len) {
  CopyPlan q = p;
  q.shape[d] = len;
  q.dst_base += start * p.dst_stride[d];
  const bool plain = p.lo[d] == 0 && p.in_dim[d] == p.shape[d];
  if (plain) {
    q.src_base += start * p.src_stride[d];
    q.in_dim[d] = len;
  } else {
    q.lo[d] = p.lo[d] - start;  // pad modes: source coordinate c - lo stays the same
  }
  return q;
}

// The plan's dims all plain (every source coordinate is the iteration's).
bool all_plain(const CopyPlan& p) {
  for (size_t d = 0; d < p.shape.size(); ++d) {
    if (p.lo[d] != 0 || p.in_dim[d] != p.shape[d]) return false;
  }
  return true;
}

// A copy plan as kernels/transpose.wgsl takes it, or nullopt: an affine
// plan whose destination is contiguous along its last dim L while a dim J of
// at least 16 (besides L, also at least 16) has source stride 1. J moves to
// the second-to-last place (the order of an affine plan's dims is free).
std::optional<CopyPlan> transpose_plan(const CopyPlan& p) {
  const size_t r = p.shape.size();
  if (p.mode != kAffine || r < 2 || !all_plain(p) || p.dst_stride[r - 1] != 1 || p.src_stride[r - 1] == 1 ||
      p.shape[r - 1] < 16) {
    return std::nullopt;
  }
  for (size_t d = 0; d < r; ++d) {
    if (p.src_stride[d] < 0) return std::nullopt;
  }
  for (size_t j = 0; j + 1 < r; ++j) {
    if (p.src_stride[j] != 1 || p.shape[j] < 16) continue;
    CopyPlan q = p;
    auto move = [&](Shape& v) {
      const int64_t x = v[j];
      v.erase(v.begin() + int64_t(j));
      v.insert(v.end() - 1, x);
    };
    move(q.shape), move(q.dst_stride), move(q.src_stride), move(q.lo), move(q.in_dim);
    return q;
  }
  return std::nullopt;
}

// The plan in units of `v` elements (one vec4<u32>: 4 of 32 bits or 8 of
// float16), or nullopt: a plan contiguous along its last dim on both sides,
// that dim plain (the wrap and pad transforms of the other dims act on
// coordinates and stay as they are), whose last dim, strides and bases are
// whole vectors. A constant pad's fill binding holds a vector of the value
// (pad() makes it so).
std::optional<CopyPlan> vector_plan(const CopyPlan& p, uint64_t es) {
  const size_t r = p.shape.size();
  const int64_t v = es == 4 ? 4 : es == 2 ? 8 : 0;
  if (v == 0 || r < 1 || p.lo[r - 1] != 0 || p.in_dim[r - 1] != p.shape[r - 1] || p.dst_stride[r - 1] != 1 ||
      p.src_stride[r - 1] != 1 || p.shape[r - 1] % v || p.src_base % v || p.dst_base % v) {
    return std::nullopt;
  }
  for (size_t d = 0; d + 1 < r; ++d) {
    if (p.src_stride[d] % v || p.dst_stride[d] % v) return std::nullopt;
  }
  CopyPlan q = p;
  q.shape[r - 1] /= v;
  q.in_dim[r - 1] = q.shape[r - 1];
  for (size_t d = 0; d + 1 < r; ++d) q.src_stride[d] /= v, q.dst_stride[d] /= v;
  q.src_base /= v;
  q.dst_base /= v;
  return q;
}

CopyParams copy_params(const CopyPlan& p) {
  CopyParams cp{};
  cp.count = uint32_t(numel(p.shape));
  cp.rank = uint32_t(p.shape.size());
  cp.dst_base = uint32_t(p.dst_base);
  cp.src_base = uint32_t(p.src_base);
  for (size_t d = 0; d < p.shape.size(); ++d) {
    cp.shape[d] = uint32_t(p.shape[d]);
    cp.dst_stride[d] = uint32_t(p.dst_stride[d]);
    cp.src_stride[d] = bits32(p.src_stride[d]);
    cp.lo[d] = bits32(p.lo[d]);
    cp.in_dim[d] = uint32_t(p.in_dim[d]);
  }
  return cp;
}

// WGNN_COPY_KERNEL=element: every copy on kernels/copy.wgsl's one element
// per invocation (tests, A/B measurements), not the tiled transpose or the
// vector copy.
bool element_copies_only(const Settings& settings) {
  const char* e = settings.get("WGNN_COPY_KERNEL");
  if (!e || !*e) return false;
  if (std::string_view(e) == "element") return true;
  throw Error(fmt::format("WGNN_COPY_KERNEL='{}': expected 'element' (or unset)", e));
}

// One dispatch of the copy; src and dst bound from their aligned extents
// (whole when they fit, else byte ranges) with the bases moved to match.
// A transpose runs tiled (kernels/transpose.wgsl), a copy along contiguous
// runs of whole vec4<u32> copies vectors (kernels/copy.wgsl with {{T}} a
// vector), the rest one element per invocation.
void record_copy_part(const Args& a, TensorRef dst, TensorRef src, const CopyPlan& p, const Binding& fill,
                      std::string_view label) {
  Graph& g = a.g;
  const uint64_t es = gpu_dtype_size(g.info(dst).dtype), align = binding_alignment(g);
  const auto [slo, shi] = src_extent(p);
  const auto [dlo, dhi] = dst_extent(p);
  // A tensor that fits is bound whole (offset 0), as when nothing splits.
  const uint64_t limit = binding_limit(g);
  const uint64_t s0 = g.info(src).gpu_bytes() <= limit ? 0 : uint64_t(slo) * es / align * align;
  const uint64_t d0 = g.info(dst).gpu_bytes() <= limit ? 0 : uint64_t(dlo) * es / align * align;
  const Binding dst_b =
      g.info(dst).gpu_bytes() <= limit ? Binding::of(dst) : bind_bytes(g, dst, d0, uint64_t(dhi + 1) * es - d0);
  const Binding src_b =
      g.info(src).gpu_bytes() <= limit ? Binding::of(src) : bind_bytes(g, src, s0, uint64_t(shi + 1) * es - s0);
  CopyPlan q = p;
  q.dst_base -= int64_t(d0 / es);
  q.src_base -= int64_t(s0 / es);
  const bool element_only = element_copies_only(a.g.ctx().settings());
  if (auto t = element_only ? std::nullopt : transpose_plan(q)) {
    const size_t r = t->shape.size();
    const uint64_t outer = uint64_t(numel(t->shape) / (t->shape[r - 2] * t->shape[r - 1]));
    const uint64_t groups = outer * gpu::ceil_div(uint64_t(t->shape[r - 2]), 32) *
                            gpu::ceil_div(uint64_t(t->shape[r - 1]), 32);
    g.add_dispatch(kernel(g, "ops/kernels/transpose.wgsl", element_subs(g, g.info(dst).dtype, a.op)),
                   {dst_b, g.uniform(copy_params(*t)), src_b}, grid_for(g, groups), std::string(a.op),
                   std::string(label) + " tiled");
    return;
  }
  Subs subs = element_subs(g, g.info(dst).dtype, a.op);
  std::string what(label);
  if (auto v = element_only ? std::nullopt : vector_plan(q, es)) {
    q = *v;
    subs = {{"T", "vec4<u32>"}, {"ENABLE", ""}};
    what += " vec4";
  }
  const CopyParams cp = copy_params(q);
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/copy.wgsl", subs, {{"MODE", double(q.mode)}});
  g.add_dispatch(pl, {dst_b, g.uniform(cp), src_b, fill}, grid_for(g, gpu::ceil_div(uint64_t(cp.count), 256)),
                 std::string(a.op), what);
}

// Records plan `p`, cut into parts where its source or destination is over
// maxStorageBufferBindingSize: runs of the dim that spans the most of the
// side over the limit, each the longest whose bytes on that side fit, cut
// again (along other dims) while the other side is over.
void record_copy_split(const Args& a, TensorRef dst, TensorRef src, const CopyPlan& p, const Binding& fill,
                       std::string_view label) {
  Graph& g = a.g;
  const uint64_t es = gpu_dtype_size(g.info(dst).dtype), align = binding_alignment(g), limit = binding_limit(g);
  auto side_fits = [&](const CopyPlan& q, bool src_side) {
    const auto [lo, hi] = src_side ? src_extent(q) : dst_extent(q);
    return uint64_t(hi + 1) * es - uint64_t(lo) * es / align * align <= limit;
  };
  auto fits = [&](const CopyPlan& q) { return side_fits(q, true) && side_fits(q, false); };
  if (fits(p)) return record_copy_part(a, dst, src, p, fill, label);
  // Cut the dim that spans the most of the side over the limit (source
  // first): a transpose is cut into blocks, not into its rows.
  const bool src_side = !side_fits(p, true);
  size_t d = p.shape.size();
  int64_t widest = 0;
  for (size_t k = 0; k < p.shape.size(); ++k) {
    const bool plain = p.lo[k] == 0 && p.in_dim[k] == p.shape[k];
    if (p.shape[k] <= 1 || (!plain && p.mode == kWrap)) continue;  // not cuttable
    // Cutting a padded dim narrows the destination, not the source (all of in_dim is read).
    const int64_t span = src_side ? (plain ? (p.shape[k] - 1) * std::abs(p.src_stride[k]) : 0)
                                  : (p.shape[k] - 1) * p.dst_stride[k];
    if (span > widest) {
      widest = span;
      d = k;
    }
  }
  if (d == p.shape.size()) {
    const TensorInfo &si = g.info(src), &di = g.info(dst);
    a.fail(fmt::format("{} from {} {} into {} {}: cannot cut the copy into parts within this device's "
                       "maxStorageBufferBindingSize of {} bytes ({})",
                       label, dtype_name(si.dtype), shape_str(si.shape), dtype_name(di.dtype), shape_str(di.shape),
                       limit, binding_limit_advice(g.ctx())));
  }
  // The longest run from the start for which that side fits (extents grow
  // with the run).
  int64_t lo = 0, hi = p.shape[d];
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (side_fits(sub_plan(p, d, 0, mid), src_side)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int64_t run = std::max<int64_t>(lo, 1);
  for (int64_t start = 0; start < p.shape[d]; start += run) {
    // A run that does not fit (the other side over, alignment slack, or
    // one coordinate too large) is cut again.
    const CopyPlan q = sub_plan(p, d, start, std::min(run, p.shape[d] - start));
    if (fits(q)) {
      record_copy_part(a, dst, src, q, fill, label);
    } else {
      record_copy_split(a, dst, src, q, fill, label);
    }
  }
}

void record_copy(const Args& a, TensorRef dst, TensorRef src, CopyPlan p, const Binding& fill,
                 std::string_view label) {
  const int64_t count = numel(p.shape);
  if (count == 0) return;
  simplify(p);
  record_copy_split(a, dst, src, p, fill, label);
}

Binding no_fill(Graph& g) { return Binding::of(g.ctx().dummy_buffer()); }

// ---------------------------------------------------------------------------

// aten.permute(self, dims)
Value permute(Graph& g, const ValueList& args) {
  Args a{"aten.permute.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const IntList dims = a.int_list(1, "dims");
  check_input(a, x, "self");
  const Shape in = g.info(x).shape;
  const DType dtype = g.info(x).dtype;
  const int64_t rank = int64_t(in.size());
  auto bad = [&] {
    a.fail(fmt::format("argument 'dims' is {}; accepted: a permutation of the {} dims of self {} (negative dims "
                       "count from the end)",
                       list_str(dims), rank, shape_str(in)));
  };
  if (int64_t(dims.size()) != rank) bad();
  std::vector<bool> seen(in.size(), false);
  Shape out(in.size()), src_stride(in.size());
  const Shape strides = contiguous_strides(in);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < -rank || dims[i] >= rank) bad();
    const size_t d = size_t(dims[i] < 0 ? dims[i] + rank : dims[i]);
    if (seen[d]) bad();
    seen[d] = true;
    out[i] = in[d];
    src_stride[i] = strides[d];
  }
  // Moving only size-1 dims (a decoder step's [B, 1, H, D] -> [B, H, 1, D])
  // keeps every element where it is: the result is a view, no copy.
  int64_t last = -1;
  bool in_place = true;
  for (size_t i = 0; i < dims.size() && in_place; ++i) {
    const int64_t d = dims[i] < 0 ? dims[i] + rank : dims[i];
    if (in[size_t(d)] == 1) continue;
    in_place = d > last;
    last = d;
  }
  if (in_place && out.size() <= size_t(kMaxRank) && views_enabled(g.ctx().settings())) return g.add_view(x, out);
  TensorRef y = add_output(a, out, dtype);
  record_copy(a, y, x, plain_plan(out, src_stride), no_fill(g), "permute");
  return y;
}

// Every input of a concatenation copied by one dispatch (kernels/cat.wgsl):
// two to four inputs, none empty, rows of dim a whole number of 32-bit
// words, every tensor bound whole. False, and nothing recorded, otherwise.
bool cat_in_one_dispatch(const Args& a, TensorRef y, const std::vector<TensorRef>& ts, size_t d) {
  Graph& g = a.g;
  if (ts.size() < 2 || ts.size() > 4 || element_copies_only(g.ctx().settings())) return false;
  const TensorInfo& yi = g.info(y);
  const uint64_t es = gpu_dtype_size(yi.dtype), limit = binding_limit(g);
  uint64_t inner_bytes = es;
  for (size_t k = d + 1; k < yi.shape.size(); ++k) inner_bytes *= uint64_t(yi.shape[k]);
  if (inner_bytes % 4 != 0 || yi.gpu_bytes() > limit || yi.gpu_bytes() / 4 >= (uint64_t(1) << 32)) return false;
  for (TensorRef t : ts)
    if (g.info(t).numel() == 0 || g.info(t).gpu_bytes() > limit) return false;
  uint64_t inner = inner_bytes / 4;
  const bool vec4 = inner % 4 == 0;
  if (vec4) inner /= 4;
  CatParams p{};
  p.inner = uint32_t(inner);
  p.dim = uint32_t(yi.shape[d]);
  p.inputs = uint32_t(ts.size());
  p.count = uint32_t(yi.gpu_bytes() / (vec4 ? 16 : 4));
  uint32_t start[4] = {0, 0, 0, 0}, rows[4] = {0, 0, 0, 0};
  for (size_t k = 0; k < ts.size(); ++k) {
    start[k] = k == 0 ? 0 : start[k - 1] + rows[k - 1];
    rows[k] = uint32_t(g.info(ts[k]).shape[d]);
  }
  p.start0 = start[0], p.start1 = start[1], p.start2 = start[2], p.start3 = start[3];
  p.rows0 = rows[0], p.rows1 = rows[1], p.rows2 = rows[2], p.rows3 = rows[3];
  std::vector<Binding> b{Binding::of(y), g.uniform(p)};
  for (size_t k = 0; k < 4; ++k) b.push_back(Binding::of(ts[k < ts.size() ? k : 0]));
  const gpu::Pipeline& pl =
      kernel(g, "ops/kernels/cat.wgsl", {{"T", vec4 ? "vec4<u32>" : "u32"}, {"ENABLE", ""}});
  g.add_dispatch(pl, std::move(b), grid_for(g, gpu::ceil_div(uint64_t(p.count), 256)), std::string(a.op),
                 fmt::format("cat {} inputs{}", ts.size(), vec4 ? " vec4" : ""));
  return true;
}

// aten.cat(tensors, dim=0). Legacy 1-D empty tensors ([0]) are skipped as
// in ATen; other inputs must agree in rank, dtype and every size but dim's.
Value cat(Graph& g, const ValueList& args) {
  Args a{"aten.cat.default", args, g};
  const Value& tv = a.at(0, "tensors");
  if (!tv.is_list()) a.fail(fmt::format("argument 'tensors' must be a ValueList of Tensors, got {}", tv.describe()));
  const ValueList& list = tv.list();
  if (list.empty()) a.fail("argument 'tensors' is an empty list; accepted: one or more tensors");
  std::vector<TensorRef> ts;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_tensor()) {
      a.fail(fmt::format("argument 'tensors' element {} must be a Tensor, got {}", i, list[i].describe()));
    }
    ts.push_back(list[i].tensor());
    check_input(a, ts.back(), fmt::format("tensors[{}]", i));
  }
  const int64_t dim_arg = a.integer(1, "dim", 0);
  const DType dtype = g.info(ts[0]).dtype;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (g.info(ts[i]).dtype != dtype) {
      a.fail(fmt::format("tensors[{}] has dtype {} but tensors[0] has {}; all inputs must have the same dtype", i,
                         dtype_name(g.info(ts[i]).dtype), dtype_name(dtype)));
    }
  }
  auto skipped = [&](size_t i) { return g.info(ts[i]).shape == Shape{0}; };
  size_t ref = ts.size();
  for (size_t i = 0; i < ts.size() && ref == ts.size(); ++i) {
    if (!skipped(i)) ref = i;
  }
  if (ref == ts.size()) return add_output(a, {0}, dtype);  // every input is a legacy empty tensor
  const Shape ref_shape = g.info(ts[ref]).shape;
  if (ref_shape.empty()) a.fail(fmt::format("tensors[{}] is zero-dimensional and cannot be concatenated", ref));
  const int64_t rank = int64_t(ref_shape.size());
  const size_t d = size_t(normalize_axis(dim_arg, rank, a.op, "dim"));
  Shape out = ref_shape;
  out[d] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (skipped(i)) continue;
    const Shape& s = g.info(ts[i]).shape;
    bool ok = s.size() == ref_shape.size();
    for (size_t k = 0; ok && k < s.size(); ++k) ok = k == d || s[k] == ref_shape[k];
    if (!ok) {
      a.fail(fmt::format("tensors[{}] has shape {} but tensors[{}] has {}; they must match except in dim {}", i,
                         shape_str(s), ref, shape_str(ref_shape), d));
    }
    out[d] += s[d];
  }
  // One input with elements, the others empty along dim (a slice past a
  // dim's end makes them: Phi-3's rotary pass-through where the rotary
  // takes the whole head), or a single input: the result is that input, a
  // view of it, no copy.
  if (views_enabled(g.ctx().settings())) {
    size_t only = ts.size(), with_elements = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
      if (g.info(ts[i]).numel() > 0) only = i, ++with_elements;
    }
    if (with_elements == 1 && g.info(ts[only]).shape == out) return g.add_view(ts[only], out);
  }
  TensorRef y = add_output(a, out, dtype);
  const Shape out_stride = contiguous_strides(out);
  // Where the dims before `d` are all 1, each input is one contiguous block
  // of the result: an intermediate input is placed there instead of copied
  // (Graph::alias_into: what computed it writes the result's block).
  int64_t outer = 1;
  for (size_t k = 0; k < d; ++k) outer *= out[k];
  // An input whose storage another input shares (the same tensor twice, as
  // in rotary's cat([freqs, freqs]), or a view of it) is copied: placed, it
  // would be part of y, and the other's copy would read y while writing it.
  const bool place = outer == 1 && views_enabled(g.ctx().settings());
  auto shares_storage = [&](size_t i) {
    const int r = g.storage_root(ts[i]).id;
    for (size_t j = 0; j < ts.size(); ++j)
      if (j != i && !skipped(j) && g.storage_root(ts[j]).id == r) return true;
    return false;
  };
  std::vector<size_t> copied;  // the inputs not placed, each with its first row of dim
  std::vector<int64_t> starts;
  int64_t offset = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (skipped(i)) continue;
    const Shape s = g.info(ts[i]).shape;
    if (place && !shares_storage(i)) {
      // Placed or copied is a choice of the plan's structure (Graph::choose):
      // a size whose offsets are aligned where the plan's first size's were
      // not copies as that size did.
      const uint64_t at = uint64_t(offset * out_stride[d]) * gpu_dtype_size(dtype);
      const Graph::Choice c = g.choose("cat.place", g.can_alias_into(ts[i], y, at));
      const bool placed = c.value && g.alias_into(ts[i], y, at);
      g.made(c, placed);
      if (placed) {
        offset += s[d];
        continue;
      }
    }
    copied.push_back(i);
    starts.push_back(offset);
    offset += s[d];
  }
  if (copied.size() == ts.size() && cat_in_one_dispatch(a, y, ts, d)) return y;
  for (size_t k = 0; k < copied.size(); ++k) {
    const Shape s = g.info(ts[copied[k]]).shape;
    CopyPlan p = plain_plan(s, contiguous_strides(s));
    p.dst_stride = out_stride;
    p.dst_base = starts[k] * out_stride[d];
    record_copy(a, y, ts[copied[k]], p, no_fill(g), "cat");
  }
  return y;
}

// aten.split_with_sizes(self, split_sizes, dim=0) -> list of tensors
Value split_with_sizes(Graph& g, const ValueList& args) {
  Args a{"aten.split_with_sizes.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const IntList sizes = a.int_list(1, "split_sizes");
  check_input(a, x, "self");
  const Shape in = g.info(x).shape;
  const DType dtype = g.info(x).dtype;
  if (in.empty()) a.fail("argument 'self' is zero-dimensional; accepted: a tensor with at least one dim");
  const size_t d = size_t(normalize_axis(a.integer(2, "dim", 0), int64_t(in.size()), a.op, "dim"));
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || s > in[d]) {
      a.fail(fmt::format("argument 'split_sizes' is {}; accepted: sizes >= 0 that sum to {} (dim {} of self {})",
                         list_str(sizes), in[d], d, shape_str(in)));
    }
    total += s;
  }
  if (total != in[d] || sizes.empty()) {
    a.fail(fmt::format("argument 'split_sizes' is {} (sum {}); accepted: sizes >= 0 that sum to {} (dim {} of self {})",
                       list_str(sizes), total, in[d], d, shape_str(in)));
  }
  const Shape strides = contiguous_strides(in);
  // Parts that are contiguous blocks of self (the dims before `d` all 1:
  // DaViT's q, k and v split from one permuted tensor) are views of their
  // block where the alignment allows, as slice's.
  int64_t outer = 1;
  for (size_t k = 0; k < d; ++k) outer *= in[k];
  ValueList outs;
  int64_t start = 0;
  for (int64_t s : sizes) {
    Shape out = in;
    out[d] = s;
    if (outer == 1 && s > 0 && views_enabled(g.ctx().settings())) {
      const TensorRef v = g.add_part_view(x, out, uint64_t(start * strides[d]) * gpu_dtype_size(dtype));
      if (v.id >= 0) {
        outs.push_back(v);
        start += s;
        continue;
      }
    }
    TensorRef y = add_output(a, out, dtype);
    record_copy(a, y, x, plain_plan(out, strides, start * strides[d]), no_fill(g), "split");
    outs.push_back(y);
    start += s;
  }
  return outs;
}

// aten.slice.Tensor(self, dim=0, start=None, end=None, step=1), with Python
// clamping of start and end, and (as ONNX Slice) negative steps too: then
// start defaults to the last element, end to before the first, start
// clamps to [0, size-1] and end to [-1, size-1].
Value slice(Graph& g, const ValueList& args) {
  Args a{"aten.slice.Tensor", args, g};
  TensorRef x = a.tensor(0, "self");
  check_input(a, x, "self");
  const Shape in = g.info(x).shape;
  const DType dtype = g.info(x).dtype;
  if (in.empty()) a.fail("argument 'self' is zero-dimensional; accepted: a tensor with at least one dim");
  const size_t d = size_t(normalize_axis(a.integer(1, "dim", 0), int64_t(in.size()), a.op, "dim"));
  const int64_t step = a.integer(4, "step", 1);
  if (step == 0) a.fail("argument 'step' is 0; accepted: any non-zero Int");
  const int64_t size = in[d];
  int64_t start = a.integer(2, "start", step > 0 ? 0 : INT64_MAX);
  int64_t end = a.integer(3, "end", step > 0 ? INT64_MAX : INT64_MIN);
  if (start < 0) start += size;
  if (end < 0) end += size;
  int64_t len = 0;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, size);
    end = std::clamp<int64_t>(end, 0, size);
    if (end > start) len = 1 + (end - start - 1) / step;
  } else if (size > 0) {
    start = std::clamp<int64_t>(start, 0, size - 1);
    end = std::clamp<int64_t>(end, -1, size - 1);
    // -step overflows for INT64_MIN; any step beyond the size takes one element.
    const int64_t neg = step < -size ? size + 1 : -step;
    if (start > end) len = 1 + (start - end - 1) / neg;
  }
  Shape out = in;
  out[d] = len;
  // The whole dim in order (DaViT's x[:, :H, :W] after a window partition
  // that needed no padding): the input itself.
  if (step == 1 && start == 0 && len == size) return g.add_view(x, out);
  Shape strides = contiguous_strides(in);
  const int64_t base = len > 0 ? start * strides[d] : 0;
  // A slice that is one contiguous block of the input (the dims before `d`
  // all 1, step 1) is a view of that block where the alignment allows.
  int64_t outer = 1;
  for (size_t k = 0; k < d; ++k) outer *= in[k];
  if (outer == 1 && (step == 1 || len == 1) && len > 0 && views_enabled(g.ctx().settings())) {
    const TensorRef v = g.add_part_view(x, out, uint64_t(base) * gpu_dtype_size(dtype));
    if (v.id >= 0) return v;
  }
  strides[d] = len > 1 ? strides[d] * step : 0;  // |step| < size when two or more elements are taken
  TensorRef y = add_output(a, out, dtype);
  record_copy(a, y, x, plain_plan(out, strides, base), no_fill(g), "slice");
  return y;
}

// ---------------------------------------------------------------------------
// Indexed reads (kernels/index.wgsl).


void check_index_tensor(const Args& a, TensorRef index) {
  const DType dt = a.g.info(index).dtype;
  if (dt != DType::I32 && dt != DType::I64) {
    a.fail(fmt::format("argument 'index' has dtype {}; accepted: int32, int64", dtype_name(dt)));
  }
  check_input(a, index, "index");
}

// A constant index is checked here, on the host; others on the GPU, in the
// graph's checked mode (record_index), else clamped.
void check_constant_index(const Args& a, TensorRef index, int64_t size, size_t d) {
  const TensorInfo& ti = a.g.info(index);
  if (ti.kind != TensorKind::Constant || ti.numel() == 0) return;
  std::vector<int64_t> v;
  if (ti.dtype == DType::I64) {
    v = a.g.read<int64_t>(index);
  } else {
    const auto v32 = a.g.read<int32_t>(index);
    v.assign(v32.begin(), v32.end());
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < -size || v[i] >= size) {
      a.fail(fmt::format("argument 'index' holds {} at flat position {}; accepted: indices in [{}, {}) for dim {} "
                         "of size {}",
                         v[i], i, -size, size, d, size));
    }
  }
}

void record_index(const Args& a, TensorRef dst, TensorRef src, TensorRef index, const Shape& out_shape,
                  const Shape& src_shape, size_t d, bool elements, std::string_view label) {
  const int64_t count = numel(out_shape);
  if (count == 0) return;
  IndexParams p{};
  p.count = uint32_t(count);
  p.rank = uint32_t(out_shape.size());
  p.dim = uint32_t(d);
  p.dim_size = uint32_t(src_shape[d]);
  const Shape strides = contiguous_strides(src_shape);
  for (size_t k = 0; k < out_shape.size(); ++k) {
    p.shape[k] = uint32_t(out_shape[k]);
    p.src_stride[k] = uint32_t(strides[k]);
  }
  Graph& g = a.g;
  const int64_t size = src_shape[d];
  const bool check = g.checked() && g.info(index).kind != TensorKind::Constant;
  std::optional<Graph::Check> chk;
  if (check) {
    chk = g.add_check(fmt::format("{}: index {{}} is out of range: accepted [{}, {}) for dim {} of size {}", a.op,
                                  -size, size, d, size));
    p.check_slot = chk->slot;
  }
  Subs subs = element_subs(g, g.info(dst).dtype, a.op);
  for (auto& s : check_subs(check, 4)) subs.push_back(std::move(s));
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/index.wgsl", subs, {{"ELEMENTS", elements ? 1.0 : 0.0}});
  // A table over the binding limit is split by rows of dim (when the dims
  // before it are 1, so rows are contiguous), a result over it by flat
  // ranges: one dispatch per pair of parts.
  const uint64_t es = gpu_dtype_size(g.info(dst).dtype);
  const TensorInfo& si = g.info(src);
  a.require_fits_binding(index, "index");
  const std::string what = fmt::format("{}: argument 'self' {} {}", a.op, dtype_name(si.dtype), shape_str(si.shape));
  int64_t outer = 1;
  for (size_t k = 0; k < d; ++k) outer *= src_shape[k];
  if (outer != 1 && si.gpu_bytes() > binding_limit(g)) {
    a.fail(fmt::format("argument 'self' {} {} is {} bytes, over this device's maxStorageBufferBindingSize of {} "
                       "bytes; a table is split only by rows of its outermost dims (dim {} is not; {})",
                       dtype_name(si.dtype), shape_str(si.shape), si.gpu_bytes(), binding_limit(g), d,
                       binding_limit_advice(g.ctx())));
  }
  const uint64_t row_bytes = uint64_t(strides[d]) * es;
  const std::vector<Span> rows = binding_spans(g, uint64_t(src_shape[d]), {row_bytes}, 1, what);
  const std::vector<Span> outs = binding_spans(g, uint64_t(count), {es}, 1, fmt::format("{}: the result", a.op));
  for (const Span& r : rows) {
    for (const Span& o : outs) {
      IndexParams q = p;
      q.count = uint32_t(o.count);
      q.first = uint32_t(o.start);
      q.row_lo = uint32_t(r.start);
      q.row_hi = uint32_t(r.start + r.count);
      std::vector<Binding> bind = {
          bind_bytes(g, dst, o.start * es, o.count * es), g.uniform(q),
          rows.size() == 1 ? Binding::of(src) : bind_bytes(g, src, r.start * row_bytes, r.count * row_bytes),
          Binding::of(index)};
      if (chk) bind.push_back(Binding::of(chk->flags));
      g.add_dispatch(pl, std::move(bind), grid_for(g, gpu::ceil_div(o.count, 256)), std::string(a.op),
                     std::string(label));
    }
  }
}

// aten.index_select(self, dim, index): index 0-D or 1-D, int32 or int64;
// negative indices count from the end (ONNX Gather).
Value index_select(Graph& g, const ValueList& args) {
  Args a{"aten.index_select.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const int64_t dim = a.integer(1, "dim", 0);
  TensorRef index = a.tensor(2, "index");
  check_input(a, x, "self");
  check_index_tensor(a, index);
  const Shape in = g.info(x).shape;
  const DType dtype = g.info(x).dtype;
  const Shape ishape = g.info(index).shape;
  const int64_t n = numel(ishape);
  if (ishape.size() > 1) {
    a.fail(fmt::format("argument 'index' has shape {}; accepted: a 0-D or 1-D tensor", shape_str(ishape)));
  }
  const size_t d = size_t(normalize_axis(dim, int64_t(in.size()), a.op, "dim"));
  if (in.empty() && n != 1) {
    a.fail(fmt::format("argument 'index' has {} elements; indexing a zero-dimensional self takes exactly 1", n));
  }
  // A zero-dimensional self is read as shape [1] and gives a zero-dimensional result.
  const Shape src = in.empty() ? Shape{1} : in;
  Shape out = src;
  out[d] = n;
  if (src[d] == 0 && n > 0) {
    a.fail(fmt::format("argument 'index' has {} elements but dim {} of self {} has size 0: every index is out of "
                       "range",
                       n, d, shape_str(in)));
  }
  check_constant_index(a, index, src[d], d);
  TensorRef y = add_output(a, in.empty() ? Shape{} : out, dtype);
  record_index(a, y, x, index, out, src, d, false, "index_select");
  return y;
}

// aten.gather(self, dim, index, sparse_grad=False) (ONNX GatherElements):
// index has self's rank and sizes <= self's outside dim; negative indices
// count from the end.
Value gather(Graph& g, const ValueList& args) {
  Args a{"aten.gather.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const int64_t dim = a.integer(1, "dim", 0);
  TensorRef index = a.tensor(2, "index");
  (void)a.boolean(3, "sparse_grad", false);
  check_input(a, x, "self");
  check_index_tensor(a, index);
  const Shape in = g.info(x).shape;
  const DType dtype = g.info(x).dtype;
  const Shape ishape = g.info(index).shape;
  const size_t d = size_t(normalize_axis(dim, int64_t(in.size()), a.op, "dim"));
  const Shape src = in.empty() ? Shape{1} : in;
  const Shape idx = ishape.empty() ? Shape{1} : ishape;
  bool ok = idx.size() == src.size();
  for (size_t k = 0; ok && k < idx.size(); ++k) ok = k == d || idx[k] <= src[k];
  if (!ok) {
    a.fail(fmt::format("argument 'index' has shape {}; accepted: the rank of self {} ({}) and sizes no larger than "
                       "self's outside dim {}",
                       shape_str(ishape), shape_str(in), in.size(), d));
  }
  if (src[d] == 0 && numel(idx) > 0) {
    a.fail(fmt::format("argument 'index' is not empty but dim {} of self {} has size 0: every index is out of range",
                       d, shape_str(in)));
  }
  check_constant_index(a, index, src[d], d);
  TensorRef y = add_output(a, ishape, dtype);
  record_index(a, y, x, index, idx, src, d, true, "gather");
  return y;
}

// ---------------------------------------------------------------------------

// aten.expand(self, size, implicit=False): numpy broadcasting of self to
// `size`; -1 keeps a dim; new leading dims must be given (>= 0).
Value expand(Graph& g, const ValueList& args) {
  Args a{"aten.expand.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const IntList size = a.int_list(1, "size");
  (void)a.boolean(2, "implicit", false);
  check_input(a, x, "self");
  const Shape in = g.info(x).shape;
  const DType dtype = g.info(x).dtype;
  if (size.size() < in.size()) {
    a.fail(fmt::format("argument 'size' is {} with {} dims; accepted: at least the {} dims of self {}", list_str(size),
                       size.size(), in.size(), shape_str(in)));
  }
  const size_t lead = size.size() - in.size();
  const Shape strides = contiguous_strides(in);
  Shape out(size.size()), src_stride(size.size(), 0);
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      if (size[i] < 0) {
        a.fail(fmt::format("argument 'size' is {}; new leading dim {} must be >= 0 (-1 keeps an existing dim only)",
                           list_str(size), i));
      }
      out[i] = size[i];
      continue;
    }
    const size_t j = i - lead;
    if (size[i] == -1 || size[i] == in[j]) {
      out[i] = in[j];
      src_stride[i] = strides[j];
    } else if (in[j] == 1 && size[i] >= 0) {
      out[i] = size[i];
    } else {
      a.fail(fmt::format("argument 'size' is {}; dim {} asks for {} but self {} has {} there (accepted: -1, {}, or "
                         "any size >= 0 where self has 1)",
                         list_str(size), i, size[i], shape_str(in), in[j], in[j]));
    }
  }
  TensorRef y = add_output(a, out, dtype);
  record_copy(a, y, x, plain_plan(out, src_stride), no_fill(g), "expand");
  return y;
}

// aten.repeat(self, repeats) (ONNX Tile): repeats has at least self's rank;
// extra leading entries add dims.
Value repeat(Graph& g, const ValueList& args) {
  Args a{"aten.repeat.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const IntList reps = a.int_list(1, "repeats");
  check_input(a, x, "self");
  const Shape in = g.info(x).shape;
  const DType dtype = g.info(x).dtype;
  if (reps.size() < in.size()) {
    a.fail(fmt::format("argument 'repeats' is {} with {} entries; accepted: at least the {} dims of self {}",
                       list_str(reps), reps.size(), in.size(), shape_str(in)));
  }
  Shape src(reps.size() - in.size(), 1);
  src.insert(src.end(), in.begin(), in.end());
  Shape out(reps.size());
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) a.fail(fmt::format("argument 'repeats' is {}; accepted: counts >= 0", list_str(reps)));
    out[i] = src[i] > 0 && reps[i] > kMaxElements ? kMaxElements + 1 : src[i] * reps[i];  // add_output rejects
  }
  TensorRef y = add_output(a, out, dtype);
  CopyPlan p = plain_plan(out, contiguous_strides(src));
  p.mode = kWrap;
  p.in_dim = src;
  record_copy(a, y, x, p, no_fill(g), "repeat");
  return y;
}

// The pad value as one element of `dtype` in host layout.
std::vector<uint8_t> fill_value(const Args& a, DType dtype, double v) {
  std::vector<uint8_t> out(dtype_size(dtype));
  auto int_in = [&](double lo, double hi) {
    if (!(v >= lo && v <= hi)) {
      a.fail(fmt::format("argument 'value' is {}; a {} tensor takes values in [{}, {}]", v, dtype_name(dtype), lo, hi));
    }
    return int64_t(v);
  };
  switch (dtype) {
    case DType::F32: {
      const float f = float(v);
      std::memcpy(out.data(), &f, 4);
      break;
    }
    case DType::F16: {
      const uint16_t h = float_to_half(float(v));
      std::memcpy(out.data(), &h, 2);
      break;
    }
    case DType::I32: {
      const auto i = int32_t(int_in(INT32_MIN, INT32_MAX));
      std::memcpy(out.data(), &i, 4);
      break;
    }
    case DType::I64: {
      const int64_t i = int_in(INT32_MIN, INT32_MAX);  // stored as int32 on the GPU
      std::memcpy(out.data(), &i, 8);
      break;
    }
    case DType::Bool: out[0] = v != 0; break;
    case DType::U8: out[0] = uint8_t(int_in(0, 255)); break;
    case DType::I8: out[0] = uint8_t(int8_t(int_in(-128, 127))); break;
  }
  return out;
}

// aten.pad(self, pad, mode='constant', value=None): pad lists (before,
// after) pairs from the last dim backwards; negative pads crop. Modes
// 'constant', 'reflect', 'replicate' and 'circular', for any number of dims.
Value pad(Graph& g, const ValueList& args) {
  Args a{"aten.pad.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const IntList pads = a.int_list(1, "pad");
  const std::string mode = a.string(2, "mode", "constant");
  check_input(a, x, "self");
  const Shape in = g.info(x).shape;
  const DType dtype = g.info(x).dtype;
  CopyMode cm = kPadConstant;
  if (mode == "reflect") cm = kPadReflect;
  else if (mode == "replicate") cm = kPadReplicate;
  else if (mode == "circular") cm = kPadCircular;
  else if (mode != "constant") {
    a.fail(fmt::format("argument 'mode' is '{}'; accepted: 'constant', 'reflect', 'replicate', 'circular'", mode));
  }
  double value = 0;
  if (!arg_is_none(a, 3)) {
    value = a.scalar(3, "value", 0.0);
    if (cm != kPadConstant && value != 0) {
      a.fail(fmt::format("argument 'value' is {}; mode '{}' takes no value (accepted: None)", value, mode));
    }
  }
  if (pads.size() % 2 != 0 || pads.size() / 2 > in.size()) {
    a.fail(fmt::format("argument 'pad' is {}; accepted: an even number of entries, at most 2 per dim of self {} "
                       "(before and after, last dim first)",
                       list_str(pads), shape_str(in)));
  }
  Shape out = in, lo(in.size(), 0);
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const size_t d = in.size() - 1 - k;
    const int64_t before = pads[2 * k], after = pads[2 * k + 1];
    if (before < -kMaxElements || before > kMaxElements || after < -kMaxElements || after > kMaxElements) {
      a.fail(fmt::format("argument 'pad' is {}; accepted: pads of at most {} in magnitude", list_str(pads),
                         kMaxElements));
    }
    out[d] = in[d] + before + after;
    lo[d] = before;
    if (out[d] < 0) {
      a.fail(fmt::format("argument 'pad' is {}: dim {} of self {} padded by ({}, {}) would have negative size {}",
                         list_str(pads), d, shape_str(in), before, after, out[d]));
    }
    const bool grows = before > 0 || after > 0;
    if (cm == kPadReflect && grows && (before >= in[d] || after >= in[d])) {
      a.fail(fmt::format("argument 'pad' is {}: mode 'reflect' needs pads smaller than the dim, got ({}, {}) for dim "
                         "{} of size {}",
                         list_str(pads), before, after, d, in[d]));
    }
    if (cm == kPadCircular && (before > in[d] || after > in[d])) {
      a.fail(fmt::format("argument 'pad' is {}: mode 'circular' needs pads no larger than the dim, got ({}, {}) for "
                         "dim {} of size {}",
                         list_str(pads), before, after, d, in[d]));
    }
    if (cm != kPadConstant && in[d] == 0 && out[d] > 0) {
      a.fail(fmt::format("argument 'pad' is {}: mode '{}' cannot pad dim {} of size 0", list_str(pads), mode, d));
    }
  }
  // No pad in any dim (DaViT pads its maps to whole windows, by zero where
  // they divide): the input itself.
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return g.add_view(x, out);
  TensorRef y = add_output(a, out, dtype);
  Binding fill = no_fill(g);
  if (cm == kPadConstant) {
    // Eight copies of the value: one vec4<u32> of it for the vector copy
    // (4 of 32 bits or 8 float16); the element copy reads the first.
    const std::vector<uint8_t> v = fill_value(a, dtype, value);
    std::vector<uint8_t> v8;
    for (int i = 0; i < 8; ++i) v8.insert(v8.end(), v.begin(), v.end());
    fill = Binding::of(g.add_constant({8}, dtype, v8.data(), "pad value"));
  }
  CopyPlan p = plain_plan(out, contiguous_strides(in));
  p.mode = cm;
  p.lo = lo;
  p.in_dim = in;
  record_copy(a, y, x, p, fill, "pad");
  return y;
}


// aten.triu(self, diagonal=0) / aten.tril(self, diagonal=0) (ONNX Trilu):
// self of rank >= 2, any dtype; the last two dims are the matrices.
Value trilu(Graph& g, const ValueList& args, bool upper) {
  Args a{upper ? "aten.triu.default" : "aten.tril.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const int64_t diagonal = a.integer(1, "diagonal", 0);
  check_input(a, x, "self");
  a.require_fits_binding(x, "self");  // not split
  const Shape in = g.info(x).shape;
  if (in.size() < 2) {
    a.fail(fmt::format("argument 'self' has shape {}; accepted: rank 2 or more (the last two dims are the matrices)",
                       shape_str(in)));
  }
  TensorRef y = add_output(a, in, g.info(x).dtype);
  const int64_t count = numel(in);
  if (count == 0) return y;
  const int64_t rows = in[in.size() - 2], cols = in[in.size() - 1];
  TriluParams p{uint32_t(count), uint32_t(rows), uint32_t(cols),
                int32_t(std::clamp<int64_t>(diagonal, -rows, cols))};
  const gpu::Pipeline& pl =
      kernel(g, "ops/kernels/trilu.wgsl", element_subs(g, g.info(y).dtype, a.op), {{"UPPER", upper ? 1.0 : 0.0}});
  g.add_dispatch(pl, {Binding::of(y), g.uniform(p), Binding::of(x)},
                 grid_for(g, gpu::ceil_div(uint64_t(count), 256)), std::string(a.op), upper ? "triu" : "tril");
  return y;
}

}  // namespace

// aten.view.default(self, size): the same storage under another shape of
// as many elements (one size may be -1: what the others leave). No copy
// and no dispatch: the result is a view of self (Graph::add_view).
Value view(Graph& g, const ValueList& args) {
  Args a{"aten.view.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const IntList size = a.int_list(1, "size");
  const Shape& in = g.info(x).shape;
  Shape out(size.begin(), size.end());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1 && infer < 0) {
      infer = int(i);
    } else if (out[i] < 0) {
      a.fail(fmt::format("argument 'size' is {}; accepted: sizes of at least 0, and at most one -1", list_str(size)));
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel(in) % known != 0) {
      a.fail(fmt::format("argument 'size' {} does not fit the {} elements of self {}", list_str(size), numel(in),
                         shape_str(in)));
    }
    out[size_t(infer)] = numel(in) / known;
  }
  if (numel(out) != numel(in)) {
    a.fail(fmt::format("argument 'size' {} has {} elements; self {} has {}", list_str(size), numel(out),
                       shape_str(in), numel(in)));
  }
  return g.add_view(x, out);
}

void register_movement_ops(OpRegistry& r) {
  r.add("aten.view.default", view);
  r.add("aten.triu.default", [](Graph& g, const ValueList& args) { return trilu(g, args, true); });
  r.add("aten.tril.default", [](Graph& g, const ValueList& args) { return trilu(g, args, false); });
  r.add("aten.permute.default", permute);
  r.add("aten.cat.default", cat);
  r.add("aten.split_with_sizes.default", split_with_sizes);
  r.add("aten.slice.Tensor", slice);
  r.add("aten.index_select.default", index_select);
  r.add("aten.gather.default", gather);
  r.add("aten.expand.default", expand);
  r.add("aten.repeat.default", repeat);
  r.add("aten.pad.default", pad);
}

}  // namespace wgnn::ops

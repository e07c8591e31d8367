// ONNX operators whose result size depends on the data: NonZero, Compress,
// Unique and NonMaxSuppression (ops/dynamic.cpp). The size is computed on
// the GPU and read back through the session's probe plans
// (Builder::read_size, onnx/subgraph.h): the plan up to the size becomes a
// probe, the session runs it, reads the size and builds the plan that
// writes exactly that many results. `--verbose` counts the sizes read back.
// Where the inputs are known on the host, the fold computes the same
// definition on the host.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "onnx/host_ops.h"
#include "onnx/mappers_dynamic.h"
#include "onnx/subgraph.h"
#include "ops/layout.h"

namespace wgnn::onnx_import {
namespace {



Builder& builder_of(NodeCtx& c) {
  if (!c.builder) c.fail("a result size computed on the GPU needs the importer's builder");
  return *c.builder;
}

// A 32-bit GPU copy of input i (float16 widened to float32).
TensorRef wide(NodeCtx& c, size_t i) {
  TensorRef t = c.tensor(i);
  if (c.g.info(t).dtype == DType::F16) t = c.call("aten._to_copy.default", {t, int64_t(6)}).tensor();
  return t;
}

// ---- Host definitions (the folds) ------------------------------------------

HostTensor nonzero_host(const HostTensor& x) {
  const Shape s = x.shape.empty() ? Shape{1} : x.shape;
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.get_double(size_t(i)) != 0.0 || std::isnan(x.get_double(size_t(i)))) hits.push_back(i);
  const int64_t r = int64_t(s.size()), k = int64_t(hits.size());
  HostTensor y(DType::I64, {r, k});
  for (int64_t j = 0; j < k; ++j) {
    int64_t rest = hits[size_t(j)];
    for (int64_t d = r - 1; d >= 0; --d) {
      y.as<int64_t>()[d * k + j] = rest % s[size_t(d)];
      rest /= s[size_t(d)];
    }
  }
  return y;
}

struct CompressPlan {
  int64_t axis = 0, dim = 0;
  bool flat = false;
};

CompressPlan compress_plan(NodeCtx& c) {
  CompressPlan p;
  const Shape& s = c.shape(0);
  const Shape& cs = c.shape(1);
  if (cs.size() != 1) c.fail(fmt::format("condition {} must be 1-D", shape_str(cs)));
  p.flat = !c.has_attr("axis");
  p.axis = p.flat ? 0 : ops::normalize_axis(c.attr_int("axis", 0), int64_t(s.size()), "Compress", "axis");
  p.dim = p.flat ? numel(s) : s[size_t(p.axis)];
  if (cs[0] > p.dim) {
    c.fail(fmt::format("condition has {} values; the input has {} along the axis", cs[0], p.dim));
  }
  return p;
}

Shape compress_shape(NodeCtx& c, const CompressPlan& p, int64_t k) {
  if (p.flat) return {k};
  Shape s = c.shape(0);
  s[size_t(p.axis)] = k;
  return s;
}

// Unique's slices: x as [outer, rows, inner].
struct UniqueLayout {
  int64_t outer = 1, rows = 0, inner = 1, axis = -1;
};

UniqueLayout unique_layout(NodeCtx& c) {
  const Shape& s = c.shape(0);
  UniqueLayout l;
  if (!c.has_attr("axis")) {
    l.rows = numel(s);
    return l;
  }
  l.axis = ops::normalize_axis(c.attr_int("axis", 0), int64_t(s.size()), "Unique", "axis");
  for (int64_t d = 0; d < l.axis; ++d) l.outer *= s[size_t(d)];
  l.rows = s[size_t(l.axis)];
  for (size_t d = size_t(l.axis) + 1; d < s.size(); ++d) l.inner *= s[d];
  return l;
}

Shape unique_shape(NodeCtx& c, const UniqueLayout& l, int64_t k) {
  if (l.axis < 0) return {k};
  Shape s = c.shape(0);
  s[size_t(l.axis)] = k;
  return s;
}

std::vector<HostTensor> unique_host(NodeCtx& c) {
  const HostTensor& x = c.host(0, "X");
  const UniqueLayout l = unique_layout(c);
  const bool sorted = c.attr_int("sorted", 1) != 0;
  auto at = [&](int64_t o, int64_t r, int64_t q) { return x.get_double(size_t((o * l.rows + r) * l.inner + q)); };
  auto cmp = [&](int64_t r, int64_t s) {
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t q = 0; q < l.inner; ++q) {
        const double a = at(o, r, q), b = at(o, s, q);
        if (a < b) return -1;
        if (a > b) return 1;
      }
    return 0;
  };
  std::vector<int64_t> firsts, rep(size_t(l.rows));
  for (int64_t r = 0; r < l.rows; ++r) {
    rep[size_t(r)] = r;
    for (int64_t f : firsts)
      if (cmp(r, f) == 0) {
        rep[size_t(r)] = f;
        break;
      }
    if (rep[size_t(r)] == r) firsts.push_back(r);
  }
  std::vector<int64_t> order = firsts;
  if (sorted) std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  const int64_t k = int64_t(order.size());
  HostTensor y(x.dtype, unique_shape(c, l, k)), idx(DType::I64, {k}), inv(DType::I64, {l.rows}),
      cnt(DType::I64, {k});
  const size_t es = x.nbytes() / size_t(std::max<int64_t>(x.numel(), 1));
  for (int64_t u = 0; u < k; ++u) {
    const int64_t r = order[size_t(u)];
    idx.as<int64_t>()[u] = r;
    cnt.as<int64_t>()[u] = 0;
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t q = 0; q < l.inner; ++q)
        std::memcpy(y.data.data() + size_t((o * k + u) * l.inner + q) * es,
                    x.data.data() + size_t((o * l.rows + r) * l.inner + q) * es, es);
  }
  for (int64_t r = 0; r < l.rows; ++r) {
    const int64_t u = std::find(order.begin(), order.end(), rep[size_t(r)]) - order.begin();
    inv.as<int64_t>()[r] = u;
    ++cnt.as<int64_t>()[u];
  }
  std::vector<HostTensor> out;
  out.push_back(std::move(y));
  out.push_back(std::move(idx));
  out.push_back(std::move(inv));
  out.push_back(std::move(cnt));
  return out;
}

// NonMaxSuppression's optional scalar input i, as a float; def when absent or empty.
double nms_scalar(NodeCtx& c, size_t i, const char* what, double def) {
  if (!c.has(i) || numel(c.shape(i)) == 0) return def;
  return host::get(c.host(i, what), 0);
}

bool nms_suppresses(const float* b1, const float* b2, bool center, float iou) {
  float x1a, x1b, y1a, y1b, x2a, x2b, y2a, y2b;
  if (center) {
    x1a = b1[0] - b1[2] / 2, x1b = b1[0] + b1[2] / 2, y1a = b1[1] - b1[3] / 2, y1b = b1[1] + b1[3] / 2;
    x2a = b2[0] - b2[2] / 2, x2b = b2[0] + b2[2] / 2, y2a = b2[1] - b2[3] / 2, y2b = b2[1] + b2[3] / 2;
  } else {
    x1a = std::min(b1[1], b1[3]), x1b = std::max(b1[1], b1[3]), y1a = std::min(b1[0], b1[2]),
    y1b = std::max(b1[0], b1[2]);
    x2a = std::min(b2[1], b2[3]), x2b = std::max(b2[1], b2[3]), y2a = std::min(b2[0], b2[2]),
    y2b = std::max(b2[0], b2[2]);
  }
  const float ix0 = std::max(x1a, x2a), ix1 = std::min(x1b, x2b);
  if (ix1 <= ix0) return false;
  const float iy0 = std::max(y1a, y2a), iy1 = std::min(y1b, y2b);
  if (iy1 <= iy0) return false;
  const float inter = (ix1 - ix0) * (iy1 - iy0);
  const float a1 = (x1b - x1a) * (y1b - y1a), a2 = (x2b - x2a) * (y2b - y2a);
  const float uni = a1 + a2 - inter;
  if (inter <= 0 || a1 <= 0 || a2 <= 0 || uni <= 0) return false;
  return inter / uni > iou;
}

void check_nms_shapes(NodeCtx& c) {
  const Shape& bs = c.shape(0);
  const Shape& ss = c.shape(1);
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1]) {
    c.fail(fmt::format("boxes {} must be [batches, boxes, 4] and scores {} [batches, classes, boxes]",
                       shape_str(bs), shape_str(ss)));
  }
}

HostTensor nms_host(NodeCtx& c) {
  check_nms_shapes(c);
  const HostTensor boxes = host::cast(c.host(0, "boxes"), DType::F32);
  const HostTensor scores = host::cast(c.host(1, "scores"), DType::F32);
  const int64_t max_out = std::max<int64_t>(int64_t(nms_scalar(c, 2, "max_output_boxes_per_class", 0)), 0);
  const float iou = float(nms_scalar(c, 3, "iou_threshold", 0));
  const bool has_score = c.has(4) && numel(c.shape(4)) > 0;
  const float score_thr = float(nms_scalar(c, 4, "score_threshold", 0));
  const bool center = c.attr_int("center_point_box", 0) != 0;
  const int64_t nb = c.shape(1)[0], nc = c.shape(1)[1], n = c.shape(1)[2];
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t k = 0; k < nc; ++k) {
      const float* s = scores.as<float>() + (b * nc + k) * n;
      std::vector<int64_t> cand;
      for (int64_t j = 0; j < n; ++j)
        if (!has_score || s[j] > score_thr) cand.push_back(j);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t p, int64_t q) { return s[p] > s[q]; });
      std::vector<int64_t> kept;
      for (int64_t j : cand) {
        if (int64_t(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t t : kept)
          if (nms_suppresses(boxes.as<float>() + (b * n + j) * 4, boxes.as<float>() + (b * n + t) * 4, center, iou)) {
            keep = false;
            break;
          }
        if (keep) {
          kept.push_back(j);
          rows.insert(rows.end(), {b, k, j});
        }
      }
    }
  HostTensor y(DType::I64, {int64_t(rows.size() / 3), 3});
  std::copy(rows.begin(), rows.end(), y.as<int64_t>());
  return y;
}

// A scalar input known on the host, else read back from the GPU (an
// integer: NonMaxSuppression's max_output_boxes_per_class).
int64_t host_or_read(NodeCtx& c, size_t i, const char* what) {
  if (c.is_host(i)) return host::get_int(c.host(i, what), 0);
  if (c.builder) {
    if (const HostTensor* v = c.builder->host_value(c.node.input(int(i)))) return host::get_int(*v, 0);
  }
  TensorRef t = c.tensor(i);
  if (host::is_float(c.g.info(t).dtype)) c.unsupported(fmt::format("{} must be an integer", what));
  return builder_of(c).read_size(t, node_label(c) + " " + what);
}

// A float32 GPU tensor of one value: input i, or `def` when absent.
TensorRef threshold(NodeCtx& c, size_t i, double def) {
  if (!c.has(i) || numel(c.shape(i)) == 0 || c.is_host(i)) {
    HostTensor t(DType::F32, {1});
    t.as<float>()[0] = float(c.has(i) && numel(c.shape(i)) ? host::get(c.host(i, "threshold"), 0) : def);
    return plan_constant(c.mut_graph(), c.trace, t.shape, t.dtype, t.data.data(), "nms_threshold");
  }
  TensorRef t = c.tensor(i);
  if (c.g.info(t).dtype != DType::F32) t = c.call("aten._to_copy.default", {t, int64_t(6)}).tensor();
  return c.view(t, {1});
}

}  // namespace

void add_dynamic_mappers(std::map<std::string, OpMapper>& m) {
  // NonZero: [rank, count] int64 coordinates (a scalar counts as [1]).
  m["NonZero"] = {{}, [](NodeCtx& c) {
                    TensorRef x = wide(c, 0);
                    if (c.shape(0).empty()) x = c.view(x, {1});
                    const int64_t rank = std::max<int64_t>(int64_t(c.shape(0).size()), 1);
                    TensorRef n = c.call("wgnn.nonzero_count.default", {x}).tensor();
                    const int64_t k = builder_of(c).read_size(n, node_label(c) + " count");
                    if (k == 0) return one(Slot::of_host(HostTensor(DType::I64, {rank, 0})));
                    return one(c.out(c.call("wgnn.nonzero.default", {x, k})));
                  },
                  [](NodeCtx& c) {
                    std::vector<HostTensor> v;
                    v.push_back(nonzero_host(c.host(0, "X")));
                    return v;
                  }};
  // Compress: the slices along `axis` (of the flattened input without one)
  // whose condition is true; a shorter condition drops the slices past it.
  m["Compress"] = {{}, [](NodeCtx& c) {
                     const CompressPlan p = compress_plan(c);
                     const HostTensor* known = c.is_host(1) ? &c.host(1, "condition")
                                               : c.builder ? c.builder->host_value(c.node.input(1))
                                                           : nullptr;
                     TensorRef idx{-1};
                     int64_t k = 0;
                     if (known) {
                       // A condition known on the host: its indices are a constant, no read-back.
                       std::vector<int64_t> keep;
                       for (int64_t i = 0; i < known->numel(); ++i)
                         if (known->get_double(size_t(i)) != 0.0) keep.push_back(i);
                       k = int64_t(keep.size());
                       if (k > 0) idx = c.constant(host::from_ints(keep), "compress_indices");
                     } else {
                       TensorRef cond = wide(c, 1);
                       TensorRef n = c.call("wgnn.nonzero_count.default", {cond}).tensor();
                       k = builder_of(c).read_size(n, node_label(c) + " count");
                       if (k > 0) idx = c.call("wgnn.nonzero.default", {cond, k}).tensor();
                     }
                     if (k == 0) return one(Slot::of_host(HostTensor(c.slot_dtype(0), compress_shape(c, p, 0))));
                     TensorRef x = c.tensor(0);
                     if (p.flat) x = c.view(x, {p.dim});
                     TensorRef y =
                         c.call("aten.index_select.default", {x, p.axis, c.view(idx, {k})}).tensor();
                     return one(c.out(c.view(y, compress_shape(c, p, k))));
                   },
                   [](NodeCtx& c) {
                     const CompressPlan p = compress_plan(c);
                     const HostTensor& cond = c.host(1, "condition");
                     std::vector<int64_t> keep;
                     for (int64_t i = 0; i < cond.numel(); ++i)
                       if (cond.get_double(size_t(i)) != 0.0) keep.push_back(i);
                     HostTensor x = c.host(0, "input");
                     if (p.flat) x = host::reshape(x, {p.dim});
                     std::vector<HostTensor> v;
                     v.push_back(host::gather(x, host::from_ints(keep), p.axis));
                     return v;
                   }};
  // Unique: the unique values (or slices along `axis`), sorted or in order
  // of first occurrence, with indices, inverse_indices and counts.
  m["Unique"] = {{DType::F32, DType::F16, DType::I32, DType::I64}, [](NodeCtx& c) {
                   const UniqueLayout l = unique_layout(c);
                   const bool sorted = c.attr_int("sorted", 1) != 0;
                   TensorRef x = c.view(c.tensor(0), {l.outer, l.rows, l.inner});
                   std::vector<Slot> out;
                   if (l.rows == 0) {
                     out.push_back(Slot::of_host(HostTensor(c.slot_dtype(0), unique_shape(c, l, 0))));
                     for (int k = 0; k < 3; ++k) out.push_back(Slot::of_host(HostTensor(DType::I64, {0})));
                     return out;
                   }
                   TensorRef first = c.call("wgnn.unique_first.default", {x}).tensor();
                   TensorRef n = c.call("wgnn.nonzero_count.default", {first}).tensor();
                   const int64_t k = builder_of(c).read_size(n, node_label(c) + " count");
                   const ValueList r = c.call("wgnn.unique.default", {x, first, k, sorted}).list();
                   out.push_back(c.out(c.view(r[0].tensor(), unique_shape(c, l, k))));
                   for (int j = 1; j < 4; ++j) out.push_back(c.out(r[size_t(j)]));
                   return out;
                 },
                 unique_host};
  // NonMaxSuppression: [selected, 3] rows (batch, class, box).
  m["NonMaxSuppression"] = {{}, [](NodeCtx& c) {
                              check_nms_shapes(c);
                              const int64_t n = c.shape(0)[1], classes = c.shape(1)[1];
                              const int64_t center = c.attr_int("center_point_box", 0);
                              if (center != 0 && center != 1) c.fail(fmt::format("center_point_box {} (0 or 1)", center));
                              int64_t max_out = 0;
                              if (c.has(2) && numel(c.shape(2)) > 0) max_out = host_or_read(c, 2, "max_output_boxes_per_class");
                              max_out = std::min(std::max<int64_t>(max_out, 0), n);
                              if (max_out == 0 || classes == 0 || c.shape(0)[0] == 0) {
                                return one(Slot::of_host(HostTensor(DType::I64, {0, 3})));
                              }
                              TensorRef boxes = wide(c, 0), scores = wide(c, 1);
                              TensorRef thr = c.call("aten.cat.default",
                                                     {ValueList{threshold(c, 3, 0.0), threshold(c, 4, 0.0)}, int64_t(0)})
                                                  .tensor();
                              const bool has_score = c.has(4) && numel(c.shape(4)) > 0;
                              const ValueList r = c.call("wgnn.nms_select.default",
                                                         {boxes, scores, thr, max_out, has_score, center}).list();
                              TensorRef total = c.call("wgnn.sum_count.default", {r[1]}).tensor();
                              const int64_t k = builder_of(c).read_size(total, node_label(c) + " count");
                              if (k == 0) return one(Slot::of_host(HostTensor(DType::I64, {0, 3})));
                              return one(c.out(c.call("wgnn.nms.default", {r[0], r[1], k, classes})));
                            },
                            [](NodeCtx& c) {
                              std::vector<HostTensor> v;
                              v.push_back(nms_host(c));
                              return v;
                            }};
}

}  // namespace wgnn::onnx_import

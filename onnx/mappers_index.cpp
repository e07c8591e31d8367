// ONNX's indexing and scan operators -> wgnn ops: TopK (aten.topk,
// ops/topk.cpp), GatherND, ScatterND, ScatterElements and Scatter
// (ops/scatter.cpp), CumSum (ops/cumsum.cpp), GridSample
// (aten.grid_sampler_2d, ops/grid_sample.cpp), BitShift (uint8,
// ops/binary.cpp), and two built from other ops: ReverseSequence (a
// gather along the time axis of indices computed on the GPU) and Einsum
// (sums, permutes and batched matrix products), and MaxUnpool (a scatter
// into zeros). Each as ONNX defines it at
// every opset wgnn reads (7 to 28); arguments that became inputs (TopK's
// k, CumSum's axis) are read on the host, as constants or values folded
// from shapes and constants.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>

#include "onnx/host_ops.h"
#include "onnx/mapper_util.h"
#include "onnx/mappers_index.h"
#include "ops/layout.h"

namespace wgnn::onnx_import {
namespace {

// A scalar or one-value integer input read on the host.
int64_t host_scalar(NodeCtx& c, size_t i, const char* what) {
  const std::vector<int64_t> v = c.host_ints(i, what);
  if (v.size() != 1) c.fail(fmt::format("input '{}' has {} values; it must hold one", what, v.size()));
  return v[0];
}

std::vector<Slot> topk(NodeCtx& c) {
  const int64_t k = c.opset < 10 ? c.attr_int("k", -1) : host_scalar(c, 1, "K");
  if (c.opset < 10 && !c.has_attr("k")) c.fail("attribute 'k' is missing");
  const bool largest = c.opset < 11 || c.attr_int("largest", 1) != 0;
  const bool sorted = c.opset < 11 || c.attr_int("sorted", 1) != 0;
  Value r = c.call("aten.topk.default", {c.tensor(0), k, c.attr_int("axis", -1), largest, sorted});
  std::vector<Slot> out;
  for (const Value& v : r.list()) out.push_back(c.out(v));
  return out;
}

// ONNX's reduction names -> scatter_reduce's.
std::string aten_reduce(NodeCtx& c, const std::string& r) {
  if (r == "add") return "sum";
  if (r == "mul") return "prod";
  if (r == "max") return "amax";
  if (r == "min") return "amin";
  c.fail(fmt::format("reduction '{}' (accepted: none, add, mul, max, min)", r));
}

const std::vector<DType> kScatter = {DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool, DType::U8, DType::I8};

// The scatters' reduction; bool, uint8 and int8 data take none.
std::string scatter_reduction(NodeCtx& c) {
  const std::string r = c.opset < 16 ? "none" : c.attr_string("reduction", "none");
  const DType d = c.dtype(0);
  if (r != "none" && (d == DType::Bool || d == DType::U8 || d == DType::I8)) {
    c.unsupported(fmt::format("reduction '{}' on {} data (supported: float32, float16, int32, int64)", r,
                              dtype_name(d)));
  }
  return r;
}

std::vector<Slot> scatter_elements(NodeCtx& c) {
  const int64_t axis = c.attr_int("axis", 0);
  const std::string r = scatter_reduction(c);
  if (r == "none") return one(c.out(c.call("aten.scatter.src", {c.tensor(0), axis, c.tensor(1), c.tensor(2)})));
  return one(c.out(
      c.call("aten.scatter_reduce.two", {c.tensor(0), axis, c.tensor(1), c.tensor(2), aten_reduce(c, r), true})));
}

std::vector<Slot> grid_sample(NodeCtx& c) {
  if (c.shape(0).size() != 4) {
    c.unsupported(fmt::format("input of rank {} (only 4-D input [N, C, H, W] is supported)", c.shape(0).size()));
  }
  const std::string mode = c.attr_string("mode", c.opset < 20 ? "bilinear" : "linear");
  const std::string pad = c.attr_string("padding_mode", "zeros");
  int64_t m = -1, p = -1;
  if (mode == "bilinear" || mode == "linear") m = 0;
  if (mode == "nearest") m = 1;
  if (mode == "bicubic" || mode == "cubic") m = 2;
  if (pad == "zeros") p = 0;
  if (pad == "border") p = 1;
  if (pad == "reflection") p = 2;
  if (m < 0) c.fail(fmt::format("mode '{}' (accepted: bilinear / linear, nearest, bicubic / cubic)", mode));
  if (p < 0) c.fail(fmt::format("padding_mode '{}' (accepted: zeros, border, reflection)", pad));
  return one(c.out(c.call("aten.grid_sampler_2d.default",
                          {c.tensor(0), c.tensor(1), m, p, c.attr_int("align_corners", 0) != 0})));
}

// ReverseSequence: y[t, b] = x[lens[b] - 1 - t, b] for t < lens[b], else
// x[t, b] (time and batch axes 0 and 1 either way round): a gather along
// the time axis with indices where(t < lens, lens - 1 - t, t) computed on
// the GPU; a length over the time axis is an index out of range (the
// gather's check).
std::vector<Slot> reverse_sequence(NodeCtx& c) {
  const Shape& s = c.shape(0);
  const int64_t ta = c.attr_int("time_axis", 0), ba = c.attr_int("batch_axis", 1);
  if (s.size() < 2 || !((ta == 0 && ba == 1) || (ta == 1 && ba == 0))) {
    c.fail(fmt::format("time_axis {} and batch_axis {} over input {}: accepted 0 and 1 (either way round) of an "
                       "input of rank 2 or more",
                       ta, ba, shape_str(s)));
  }
  const int64_t T = s[size_t(ta)], B = s[size_t(ba)];
  if (c.shape(1) != Shape{B}) c.fail(fmt::format("sequence_lens {} must be [{}]", shape_str(c.shape(1)), B));
  Shape along_t(s.size(), 1), along_b(s.size(), 1);
  along_t[size_t(ta)] = T;
  along_b[size_t(ba)] = B;
  HostTensor t(DType::I64, along_t), t1(DType::I64, along_t);
  for (int64_t i = 0; i < T; ++i) t.as<int64_t>()[i] = i, t1.as<int64_t>()[i] = i + 1;
  TensorRef lens = c.tensor(1);
  if (c.g.info(lens).dtype != DType::I64) lens = c.call("aten._to_copy.default", {lens, int64_t(4)}).tensor();
  lens = c.view(lens, along_b);
  TensorRef tt = c.constant(t);
  TensorRef inside = c.call("aten.lt.Tensor", {tt, lens}).tensor();
  TensorRef rev = c.call("aten.sub.Tensor", {lens, c.constant(t1)}).tensor();
  TensorRef idx = c.call("aten.where.self", {inside, rev, tt}).tensor();
  idx = c.call("aten.expand.default", {idx, IntList(s.begin(), s.end())}).tensor();
  return one(c.out(c.call("aten.gather.default", {c.tensor(0), ta, idx})));
}

// MaxUnpool: zeros of MaxPool's input shape (per spatial dim (in - 1) *
// stride - pad_begin - pad_end + kernel) with y.flat[I] = X (I holds
// MaxPool's flat indices over that whole tensor): a scatter along the flat
// view.
std::vector<Slot> max_unpool(NodeCtx& c) {
  const Shape& xs = c.shape(0);
  if (xs.size() < 3) c.fail(fmt::format("X {} must be [N, C, spatial...]", shape_str(xs)));
  if (c.shape(1) != xs) c.fail(fmt::format("I {} must have X's shape {}", shape_str(c.shape(1)), shape_str(xs)));
  const size_t d = xs.size() - 2;
  const std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.size() != d) c.fail(fmt::format("kernel_shape has {} values; X has {} spatial dims", kernel.size(), d));
  const std::vector<int64_t> strides = spatial_attr(c, "strides", d, 1);
  std::vector<int64_t> pads = c.attr_ints("pads");
  if (pads.empty()) pads.assign(2 * d, 0);
  if (pads.size() != 2 * d) c.fail(fmt::format("pads has {} values; {} expected", pads.size(), 2 * d));
  // The scatter fills the shape MaxPool's input had; a larger output_shape
  // holds it at its beginning, zeros after (as ONNX's reference writes it).
  Shape inferred{xs[0], xs[1]};
  for (size_t i = 0; i < d; ++i) inferred.push_back((xs[i + 2] - 1) * strides[i] - pads[i] - pads[i + d] + kernel[i]);
  for (int64_t v : inferred) {
    if (v < 0) c.fail(fmt::format("the unpooled shape {} has a negative dim", shape_str(inferred)));
  }
  Shape out = inferred;
  if (c.has(2)) {
    out = c.host_ints(2, "output_shape");
    bool ok = out.size() == xs.size();
    for (size_t i = 0; ok && i < out.size(); ++i) ok = out[i] >= inferred[i] && (i >= 2 || out[i] == inferred[i]);
    if (!ok) {
      c.fail(fmt::format("output_shape {} must be at least the unpooled shape {}, with X's first two dims",
                         shape_str(out), shape_str(inferred)));
    }
  }
  HostTensor zeros(c.dtype(0), {numel(inferred)});
  TensorRef y = c.call("aten.scatter.src", {c.constant(zeros), int64_t(0), c.view(c.tensor(1), {numel(xs)}),
                                            c.view(c.tensor(0), {numel(xs)})})
                    .tensor();
  y = c.view(y, inferred);
  if (out == inferred) return one(c.out(y));
  IntList pad;  // ATen order: the last dim first, (begin, end) each
  for (size_t i = out.size(); i > 2; --i) pad.insert(pad.end(), {0, out[i - 1] - inferred[i - 1]});
  return one(c.out(c.call("aten.pad.default", {y, pad, std::string("constant"), 0.0})));
}

// ---- Einsum ------------------------------------------------------------------

// An operand: a contiguous tensor and one label per dim.
struct Labeled {
  TensorRef t;
  std::string labels;
};

Shape dims_of(NodeCtx& c, const Labeled& x) { return c.g.info(x.t).shape; }

// x with its dims in the order `want` (a permutation of its labels).
Labeled permuted(NodeCtx& c, const Labeled& x, const std::string& want) {
  if (want == x.labels) return x;
  IntList perm;
  for (char l : want) perm.push_back(int64_t(x.labels.find(l)));
  return {c.call("aten.permute.default", {x.t, perm}).tensor(), want};
}

// x summed over every label not in `keep`.
Labeled summed(NodeCtx& c, const Labeled& x, const std::set<char>& keep) {
  IntList dims;
  std::string rest;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (keep.count(x.labels[i])) {
      rest += x.labels[i];
    } else {
      dims.push_back(int64_t(i));
    }
  }
  if (dims.empty()) return x;
  return {c.call("aten.sum.dim_IntList", {x.t, dims, false}).tensor(), rest};
}

// a and b contracted, keeping the labels in `keep` (the result's and those
// later operands need): batch labels (in both, kept), contracted ones (in
// both, not kept), a's and b's own; one batched matrix product
// [batch, M, K] @ [batch, K, N].
Labeled contract(NodeCtx& c, Labeled a, Labeled b, const std::set<char>& keep) {
  std::set<char> keep_a = keep, keep_b = keep;
  keep_a.insert(b.labels.begin(), b.labels.end());
  keep_b.insert(a.labels.begin(), a.labels.end());
  a = summed(c, a, keep_a);
  b = summed(c, b, keep_b);
  std::string batch, sum, own_a, own_b;
  for (char l : a.labels) {
    if (b.labels.find(l) == std::string::npos) {
      own_a += l;
    } else {
      (keep.count(l) ? batch : sum) += l;
    }
  }
  for (char l : b.labels)
    if (a.labels.find(l) == std::string::npos) own_b += l;
  std::map<char, int64_t> sizes;
  const Shape sa = dims_of(c, a), sb = dims_of(c, b);
  for (size_t i = 0; i < sa.size(); ++i) sizes[a.labels[i]] = sa[i];
  for (size_t i = 0; i < sb.size(); ++i) sizes[b.labels[i]] = sb[i];
  auto size = [&](char l) { return sizes.at(l); };
  auto prod = [&](const std::string& ls) {
    int64_t p = 1;
    for (char l : ls) p *= size(l);
    return p;
  };
  a = permuted(c, a, batch + own_a + sum);
  b = permuted(c, b, batch + sum + own_b);
  const int64_t nb = prod(batch), m = prod(own_a), k = prod(sum), n = prod(own_b);
  TensorRef y = c.call("aten.matmul.default", {c.view(a.t, {nb, m, k}), c.view(b.t, {nb, k, n})}).tensor();
  Shape out;
  for (char l : batch + own_a + own_b) out.push_back(size(l));
  return {c.view(y, out), batch + own_a + own_b};
}

std::vector<Slot> einsum(NodeCtx& c) {
  std::string eq;
  for (char ch : c.attr_string("equation", "")) {
    if (ch != ' ') eq += ch;
  }
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  {
    const std::string lhs = eq.substr(0, arrow);
    size_t from = 0;
    for (size_t at; (at = lhs.find(',', from)) != std::string::npos; from = at + 1) terms.push_back(lhs.substr(from, at - from));
    terms.push_back(lhs.substr(from));
  }
  if (terms.size() != c.inputs()) {
    c.fail(fmt::format("equation '{}' names {} operands but the node has {} inputs", eq, terms.size(), c.inputs()));
  }
  // "..." becomes one placeholder label per broadcast dim, right-aligned
  // across operands (labels 'A'-'Z' are ONNX's own: placeholders are
  // characters 1 to 31).
  size_t ell = 0;
  auto letters = [](const std::string& t) {
    size_t n = 0;
    for (char ch : t) n += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
    return n;
  };
  for (size_t i = 0; i < terms.size(); ++i) {
    if (terms[i].find("...") != std::string::npos) {
      const size_t r = c.shape(i).size(), l = letters(terms[i]);
      if (r < l) c.fail(fmt::format("operand {} has rank {} but '{}' names {} dims", i, r, terms[i], l));
      ell = std::max(ell, r - l);
    }
  }
  if (ell > 31) c.unsupported("more than 31 dims under '...'");
  auto expand = [&](const std::string& t, size_t e) {
    std::string out;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.compare(i, 3, "...") == 0) {
        for (size_t k = ell - e; k < ell; ++k) out += char(1 + k);
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(t[i]))) {
        out += t[i];
      } else {
        c.fail(fmt::format("equation '{}': unexpected '{}'", eq, t[i]));
      }
    }
    return out;
  };
  std::vector<Labeled> ops;
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Shape& s = c.shape(i);
    const size_t e = terms[i].find("...") != std::string::npos ? s.size() - letters(terms[i]) : 0;
    Labeled x{c.tensor(i), expand(terms[i], e)};
    if (x.labels.size() != s.size()) {
      c.fail(fmt::format("operand {} {} has rank {} but '{}' names {} dims", i, shape_str(s), s.size(), terms[i],
                         x.labels.size()));
    }
    for (size_t d = 0; d < s.size(); ++d) {
      const char l = x.labels[d];
      if (x.labels.find(l) != d) {
        c.unsupported(fmt::format("equation '{}': a label repeated within an operand (a diagonal)", eq));
      }
      auto [it, fresh] = size.emplace(l, s[d]);
      if (!fresh && it->second != s[d]) {
        c.unsupported(fmt::format("equation '{}': a label of sizes {} and {} (broadcasting)", eq, it->second, s[d]));
      }
    }
    ops.push_back(x);
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = expand(eq.substr(arrow + 2), ell);
    for (size_t i = 0; i < out.size(); ++i) {
      if (!size.count(out[i])) c.fail(fmt::format("equation '{}': output label '{}' is in no operand", eq, out[i]));
      if (out.find(out[i]) != i) c.unsupported(fmt::format("equation '{}': a label repeated in the output", eq));
    }
  } else {
    for (size_t k = 0; k < ell; ++k) out += char(1 + k);
    std::map<char, int> count;
    for (const Labeled& x : ops)
      for (char l : x.labels) ++count[l];
    for (auto [l, n] : count)
      if (n == 1 && std::isalpha(static_cast<unsigned char>(l))) out += l;
  }
  const std::set<char> keep_out(out.begin(), out.end());
  Labeled acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    std::set<char> keep = keep_out;
    for (size_t j = i + 1; j < ops.size(); ++j) keep.insert(ops[j].labels.begin(), ops[j].labels.end());
    acc = contract(c, acc, ops[i], keep);
  }
  acc = permuted(c, summed(c, acc, keep_out), out);
  Shape os;
  for (char l : out) os.push_back(size[l]);
  return one(c.out(c.view(acc.t, os)));
}

}  // namespace

void add_index_mappers(std::map<std::string, OpMapper>& m) {
  m["TopK"] = {kNumeric, topk, nullptr};
  m["GatherND"] = {{}, [](NodeCtx& c) {
                     return one(c.out(c.call("wgnn.gather_nd.default",
                                             {c.tensor(0), c.tensor(1), c.opset < 12 ? 0 : c.attr_int("batch_dims", 0)})));
                   }, nullptr};
  m["ScatterND"] = {kScatter, [](NodeCtx& c) {
                      const std::string r = scatter_reduction(c);
                      return one(c.out(c.call("wgnn.scatter_nd.default", {c.tensor(0), c.tensor(1), c.tensor(2), r})));
                    }, nullptr};
  m["ScatterElements"] = {kScatter, scatter_elements, nullptr};
  m["Scatter"] = {kScatter, scatter_elements, nullptr};
  m["CumSum"] = {kNumeric, [](NodeCtx& c) {
                   return one(c.out(c.call("wgnn.cumsum.default",
                                           {c.tensor(0), host_scalar(c, 1, "axis"), c.attr_int("exclusive", 0) != 0,
                                            c.attr_int("reverse", 0) != 0})));
                 }, nullptr};
  // CumProd (opset 26): CumSum's form, with products.
  m["CumProd"] = {kNumeric, [](NodeCtx& c) {
                    return one(c.out(c.call("wgnn.cumprod.default",
                                            {c.tensor(0), host_scalar(c, 1, "axis"), c.attr_int("exclusive", 0) != 0,
                                             c.attr_int("reverse", 0) != 0})));
                  }, nullptr};
  // TensorScatter (opset 24): the cache with update written along axis
  // from write_indices[b] (0 when absent) on, modulo the cache's length in
  // circular mode; in linear mode a write past the end is an index out of
  // range (aten.scatter's check).
  m["TensorScatter"] = {{}, [](NodeCtx& c) {
                          const Shape& cs = c.shape(0);
                          const Shape& us = c.shape(1);
                          const int64_t r = int64_t(cs.size());
                          if (r < 2) c.fail(fmt::format("past_cache {} needs a batch and a sequence dim", shape_str(cs)));
                          const int64_t axis = ops::normalize_axis(c.attr_int("axis", -2), r, "TensorScatter", "axis");
                          if (axis == 0) c.fail("axis is the batch dim (0); it must be another");
                          const std::string mode = c.attr_string("mode", "linear");
                          if (mode != "linear" && mode != "circular") c.fail(fmt::format("mode '{}' (accepted: linear, circular)", mode));
                          if (us.size() != cs.size()) c.fail(fmt::format("update {} and past_cache {} differ in rank", shape_str(us), shape_str(cs)));
                          for (int64_t d = 0; d < r; ++d) {
                            if (d != axis && us[size_t(d)] != cs[size_t(d)]) {
                              c.fail(fmt::format("update {} and past_cache {} differ outside axis {}", shape_str(us), shape_str(cs), axis));
                            }
                          }
                          const int64_t B = cs[0], n = us[size_t(axis)], len = cs[size_t(axis)];
                          if (n > len) c.fail(fmt::format("update holds {} positions, the cache {}", n, len));
                          // Index = write_indices[b] + position along axis, shaped as update.
                          Shape ps(size_t(r), 1);
                          ps[size_t(axis)] = n;
                          HostTensor pos(DType::I64, ps);
                          for (int64_t i = 0; i < n; ++i) pos.as<int64_t>()[i] = i;
                          TensorRef idx = c.constant(pos);
                          if (c.has(2)) {
                            if (c.shape(2) != Shape{B}) c.fail(fmt::format("write_indices {} must be [{}]", shape_str(c.shape(2)), B));
                            Shape bs(size_t(r), 1);
                            bs[0] = B;
                            TensorRef wi = c.view(c.tensor(2), bs);
                            if (c.dtype(2) != DType::I64) wi = c.call("aten._to_copy.default", {wi, aten_dtype_code(DType::I64)}).tensor();
                            idx = c.call("aten.add.Tensor", {wi, idx}).tensor();
                          }
                          if (mode == "circular") {
                            idx = c.call("aten.remainder.Tensor", {idx, c.constant(host::scalar_like(DType::I64, double(len)))}).tensor();
                          }
                          idx = c.call("aten.expand.default", {idx, IntList(us.begin(), us.end())}).tensor();
                          return one(c.out(c.call("aten.scatter.src", {c.tensor(0), axis, idx, c.tensor(1)})));
                        }, nullptr};
  // AffineGrid (opset 20): theta [N, 2, 3] or [N, 3, 4] times the
  // normalized coordinates (x, y[, z], 1) of every output pixel (pixel
  // centres, or corners with align_corners), a constant built on the host:
  // the grid [N, (D,) H, W, 2 or 3] that GridSample reads.
  m["AffineGrid"] = {kFloat, [](NodeCtx& c) {
                       const std::vector<int64_t> size = c.host_ints(1, "size");
                       const Shape& ts = c.shape(0);
                       const bool two = size.size() == 4;
                       if (size.size() != 4 && size.size() != 5) c.fail("size must be [N, C, H, W] or [N, C, D, H, W]");
                       const int64_t k = two ? 2 : 3;
                       if (ts != Shape{size[0], k, k + 1}) {
                         c.fail(fmt::format("theta {} must be [{}, {}, {}]", shape_str(ts), size[0], k, k + 1));
                       }
                       const bool corners = c.attr_int("align_corners", 0) != 0;
                       const std::vector<int64_t> dims(size.begin() + 2, size.end());  // (D,) H, W
                       double cells = double(size[0]);
                       for (int64_t d : dims) {
                         if (d <= 0) c.fail(fmt::format("size {} must be positive", d));
                         cells *= double(d);
                       }
                       check_built_size(c, cells * double(k + 1), 4, "the grid");
                       int64_t P = 1;
                       for (int64_t d : dims) P *= d;
                       auto coord = [&](int64_t i, int64_t n) {
                         if (corners) return n == 1 ? -1.0 : -1.0 + double(i) * 2.0 / double(n - 1);
                         return -1.0 + 1.0 / double(n) + double(i) * 2.0 / double(n);
                       };
                       HostTensor base(DType::F32, {k + 1, P});  // rows x, y(, z), 1
                       for (int64_t p = 0; p < P; ++p) {
                         int64_t rest = p;
                         std::vector<int64_t> at(dims.size());
                         for (size_t d = dims.size(); d-- > 0;) {
                           at[d] = rest % dims[d];
                           rest /= dims[d];
                         }
                         // x runs along the last dim, y the one before, z the first.
                         for (int64_t j = 0; j < k; ++j) {
                           const size_t d = dims.size() - 1 - size_t(j);
                           base.as<float>()[j * P + p] = float(coord(at[d], dims[d]));
                         }
                         base.as<float>()[k * P + p] = 1.f;
                       }
                       TensorRef b = float_table(c, base);
                       TensorRef g = c.call("aten.matmul.default", {c.tensor(0), b}).tensor();  // [N, k, P]
                       g = c.call("aten.permute.default", {g, IntList{0, 2, 1}}).tensor();
                       Shape out{size[0]};
                       out.insert(out.end(), dims.begin(), dims.end());
                       out.push_back(k);
                       return one(c.out(c.view(g, out)));
                     }, nullptr};
  // Col2Im (opset 18): the blocks of input [N, C * prod(block), L] summed
  // back into the image [N, C, ...image_shape]: a sum-scatter into the
  // zero-padded image (indices built on the host), then the padding sliced
  // off.
  m["Col2Im"] = {kFloat, [](NodeCtx& c) {
                   const std::vector<int64_t> image = c.host_ints(1, "image_shape");
                   const std::vector<int64_t> block = c.host_ints(2, "block_shape");
                   const size_t sd = image.size();
                   if (sd == 0 || block.size() != sd) c.fail("image_shape and block_shape must have one value per spatial dim");
                   auto attr = [&](const char* name, int64_t def, size_t n) {
                     std::vector<int64_t> v = c.attr_ints(name);
                     if (v.empty()) v.assign(n, def);
                     if (v.size() != n) c.fail(fmt::format("attribute '{}' has {} values; expected {}", name, v.size(), n));
                     return v;
                   };
                   const std::vector<int64_t> dil = attr("dilations", 1, sd), str = attr("strides", 1, sd), pads = attr("pads", 0, 2 * sd);
                   const Shape& xs = c.shape(0);
                   if (xs.size() != 3) c.fail(fmt::format("input {} must be [N, C * prod(block_shape), L]", shape_str(xs)));
                   int64_t K = 1, L = 1, P = 1;
                   std::vector<int64_t> padded(sd), blocks(sd);
                   for (size_t d = 0; d < sd; ++d) {
                     if (image[d] <= 0 || block[d] <= 0 || dil[d] <= 0 || str[d] <= 0) c.fail("sizes, dilations and strides must be positive");
                     K *= block[d];
                     padded[d] = image[d] + pads[d] + pads[sd + d];
                     const int64_t span = dil[d] * (block[d] - 1) + 1;
                     if (padded[d] < span) c.fail(fmt::format("block span {} exceeds the padded image {} in dim {}", span, padded[d], d));
                     blocks[d] = (padded[d] - span) / str[d] + 1;
                     L *= blocks[d];
                     P *= padded[d];
                   }
                   if (xs[1] % K != 0) c.fail(fmt::format("input dim 1 ({}) is not a multiple of prod(block_shape) = {}", xs[1], K));
                   if (xs[2] != L) c.fail(fmt::format("input has L = {} blocks; the image and attributes give {}", xs[2], L));
                   const int64_t N = xs[0], C = xs[1] / K;
                   check_built_size(c, double(N) * double(C) * double(P), 4, "the padded image");
                   HostTensor idx(DType::I64, {1, 1, K * L});
                   for (int64_t k = 0; k < K; ++k) {
                     for (int64_t l = 0; l < L; ++l) {
                       int64_t kr = k, lr = l, at = 0, stride = 1;
                       for (size_t d = sd; d-- > 0;) {
                         const int64_t kd = kr % block[d], ld = lr % blocks[d];
                         kr /= block[d], lr /= blocks[d];
                         at += (ld * str[d] + kd * dil[d]) * stride;
                         stride *= padded[d];
                       }
                       idx.as<int64_t>()[k * L + l] = at;
                     }
                   }
                   TensorRef src = c.view(c.tensor(0), {N, C, K * L});
                   TensorRef ix = c.call("aten.expand.default", {c.constant(idx), IntList{N, C, K * L}}).tensor();
                   HostTensor zeros(c.slot_dtype(0), {N, C, P});
                   std::memset(zeros.data.data(), 0, zeros.nbytes());
                   TensorRef y = c.call("aten.scatter_reduce.two", {c.constant(zeros), int64_t(2), ix, src, std::string("sum"), true}).tensor();
                   Shape ps{N, C};
                   ps.insert(ps.end(), padded.begin(), padded.end());
                   y = c.view(y, ps);
                   for (size_t d = 0; d < sd; ++d) {
                     if (padded[d] != image[d]) {
                       y = c.call("aten.slice.Tensor", {y, int64_t(2 + d), pads[d], pads[d] + image[d], int64_t(1)}).tensor();
                     }
                   }
                   return one(c.out(y));
                 }, nullptr};
  // RoiAlign (opsets 10 and 16; 10 has no coordinate_transformation_mode
  // and works as 16's output_half_pixel).
  m["RoiAlign"] = {kFloat, [](NodeCtx& c) {
                     const std::string mode = c.attr_string("mode", "avg");
                     if (mode != "avg" && mode != "max") c.fail(fmt::format("mode '{}' (accepted: avg, max)", mode));
                     const std::string coord =
                         c.opset >= 16 ? c.attr_string("coordinate_transformation_mode", "half_pixel") : "output_half_pixel";
                     if (coord != "half_pixel" && coord != "output_half_pixel") {
                       c.fail(fmt::format("coordinate_transformation_mode '{}' (accepted: half_pixel, output_half_pixel)", coord));
                     }
                     return one(c.out(c.call("wgnn.roi_align.default",
                                             {c.tensor(0), c.tensor(1), c.tensor(2), c.attr_int("output_height", 1),
                                              c.attr_int("output_width", 1), c.attr_int("sampling_ratio", 0),
                                              double(c.attr_float("spatial_scale", 1.f)), mode == "max",
                                              coord == "half_pixel"})));
                   }, nullptr};
  m["GridSample"] = {kFloat, grid_sample, nullptr};
  m["ReverseSequence"] = {{}, reverse_sequence, nullptr};
  m["Einsum"] = {kFloat, einsum, nullptr};
  m["MaxUnpool"] = {kFloat, max_unpool, nullptr};
  // uint8; int8 and int32 from opset 28 (int64 is held as int32 on the
  // GPU, where its shifts would lose the high bits: refused).
  m["BitShift"] = {{DType::U8, DType::I8, DType::I32}, [](NodeCtx& c) {
                     if (c.dtype(0) != DType::U8 && c.opset < 28) {
                       c.unsupported(fmt::format("{} shifts (before opset 28 BitShift takes unsigned integers)", dtype_name(c.dtype(0))));
                     }
                     const std::string d = c.attr_string("direction", "");
                     if (d != "LEFT" && d != "RIGHT") c.fail(fmt::format("direction '{}' (accepted: LEFT, RIGHT)", d));
                     const char* op = d == "LEFT" ? "aten.bitwise_left_shift.Tensor" : "aten.bitwise_right_shift.Tensor";
                     return one(c.out(c.call(op, {c.tensor(0), c.tensor(1)})));
                   }, nullptr};
}

}  // namespace wgnn::onnx_import

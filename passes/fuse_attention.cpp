// Attention written out -> wgnn.attention.default, one dispatch:
//
//   softmax(matmul(q, kT) [* c or / c] [+ mask], dim = -1) @ v
//   [then a permute, and a view merging the heads]
//
// as exporters write it (torch.onnx.export, and torch.export through an
// ExecuTorch program once sink_views has turned its bmm of views into a
// matmul). q and kT may each carry a scalar factor (exported
// scaled_dot_product_attention multiplies both by sqrt(scale)). q, kT and v
// are traced back through the views that cut them from the tensors they
// come from (aten.view, permute, split_with_sizes, slice with a positive
// step, expand), and the attention reads those tensors in place through
// strides: the packed q/k/v projection, k stored untransposed, grouped K/V
// heads expanded with a stride of 0. A following permute (and view) is the
// result's layout (out_view), so the heads merge as they are written.
//
// Every value inside the chain must be read by the next node of the chain
// alone and not be a model output; the views are taken along where nothing
// else reads them. The shapes must be known (inputs', constants' and
// seen_shape). The fused node keeps the chain, which a plan lowers instead
// where the op refuses it (dtypes, ...).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <set>

#include "ops/attention.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

constexpr int64_t kMaxHeadDim = 128;

struct View {
  int64_t offset = 0;
  std::vector<int64_t> size, stride;
};

View contiguous(const Shape& shape) {
  View v;
  v.size.assign(shape.begin(), shape.end());
  v.stride.assign(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) v.stride[d - 1] = v.stride[d] * std::max<int64_t>(shape[d], 1);
  return v;
}

// `v` reshaped to `shape` without moving elements (view_strides); false
// when the reshape would need a copy.
bool reshape(View& v, const Shape& shape) {
  if (numel(Shape(v.size.begin(), v.size.end())) != numel(shape)) return false;
  if (numel(shape) == 0 || v.size.empty()) {
    const View c = contiguous(shape);
    v.size = c.size, v.stride = c.stride;
    return true;
  }
  const std::optional<Shape> stride =
      view_strides(Shape(v.size.begin(), v.size.end()), Shape(v.stride.begin(), v.stride.end()), shape);
  if (!stride) return false;
  v.size.assign(shape.begin(), shape.end());
  v.stride.assign(stride->begin(), stride->end());
  return true;
}

bool int_arg(const Value& v, int64_t& out) {
  if (!v.is_int()) return false;
  out = std::get<int64_t>(v.v);
  return true;
}

// The view node n applied to `v` (the view of n's input), given n's result
// shape `out`; false for anything but a view this pass follows.
bool apply_view(const ir::Node& n, size_t output, View& v, const Shape& out) {
  const int64_t rank = int64_t(v.size.size());
  auto dim_of = [&](const Value& a, int64_t& d) {
    if (!int_arg(a, d)) return false;
    if (d < 0) d += rank;
    return d >= 0 && d < rank;
  };
  if (n.op == "aten.view.default") return reshape(v, out);
  if (n.op == "aten.permute.default") {
    if (n.args.size() != 2 || !n.args[1].is_int_list()) return false;
    const IntList& perm = std::get<IntList>(n.args[1].v);
    if (int64_t(perm.size()) != rank) return false;
    View r = v;
    std::vector<bool> seen(size_t(rank), false);
    for (size_t d = 0; d < perm.size(); ++d) {
      int64_t p = perm[d] < 0 ? perm[d] + rank : perm[d];
      if (p < 0 || p >= rank || seen[size_t(p)]) return false;
      seen[size_t(p)] = true;
      r.size[d] = v.size[size_t(p)];
      r.stride[d] = v.stride[size_t(p)];
    }
    v = r;
    return true;
  }
  if (n.op == "aten.split_with_sizes.default") {
    if (n.args.size() < 2 || !n.args[1].is_int_list()) return false;
    int64_t d = 0;
    if (n.args.size() > 2 && !dim_of(n.args[2], d)) return false;
    const IntList& sizes = std::get<IntList>(n.args[1].v);
    if (output >= sizes.size()) return false;
    int64_t start = 0;
    for (size_t k = 0; k < output; ++k) start += sizes[k];
    v.offset += start * v.stride[size_t(d)];
    v.size[size_t(d)] = sizes[output];
    return Shape(v.size.begin(), v.size.end()) == out;
  }
  if (n.op == "aten.slice.Tensor") {
    int64_t d = 0, start = 0, step = 1;
    if (n.args.size() > 1 && !dim_of(n.args[1], d)) return false;
    if (n.args.size() > 2 && !n.args[2].is_none() && !int_arg(n.args[2], start)) return false;
    if (n.args.size() > 4 && !int_arg(n.args[4], step)) return false;
    if (step < 1 || size_t(rank) != out.size()) return false;
    const int64_t size = v.size[size_t(d)];
    if (start < 0) start += size;
    start = std::clamp<int64_t>(start, 0, size);
    v.offset += start * v.stride[size_t(d)];
    v.stride[size_t(d)] *= step;
    v.size[size_t(d)] = out[size_t(d)];
    return true;
  }
  if (n.op == "aten.expand.default") {
    if (int64_t(out.size()) < rank) return false;
    const size_t lead = out.size() - size_t(rank);
    View r;
    r.offset = v.offset;
    for (size_t d = 0; d < out.size(); ++d) {
      if (d < lead) {
        r.size.push_back(out[d]);
        r.stride.push_back(0);
        continue;
      }
      const int64_t s = v.size[d - lead];
      if (s != out[d] && s != 1) return false;
      r.size.push_back(out[d]);
      r.stride.push_back(s == out[d] ? v.stride[d - lead] : 0);
    }
    v = r;
    return true;
  }
  return false;
}

bool is_view_op(const std::string& op) {
  return op == "aten.view.default" || op == "aten.permute.default" || op == "aten.split_with_sizes.default" ||
         op == "aten.slice.Tensor" || op == "aten.expand.default";
}

// Step n (a view node, its output `output` of shape `out`, its input of
// shape `in`) applied to `v`. `v` may have its own leading dims, finer than
// `in`'s (grouped K/V heads: [B, KVH, G] where `in` merged them into
// [B, H]): its last two dims are `in`'s, and its leading dims, flattened,
// enumerate the same rows as `in`'s. Steps that only regroup the leading
// dims keep `v` as it is; a permute that keeps them swaps `v`'s last two.
bool follow(const ir::Node& n, size_t output, View& v, const Shape& in, const Shape& out) {
  if (v.size.size() == in.size()) {
    View w = v;
    if (apply_view(n, output, w, out)) {
      v = w;
      return true;
    }
  }
  const size_t rt = in.size(), rv = v.size.size();
  if (rt < 2 || rv < 2 || out.size() < 2) return false;
  if (n.op == "aten.view.default") {
    return out[out.size() - 2] == in[rt - 2] && out[out.size() - 1] == in[rt - 1] && numel(out) == numel(in);
  }
  if (n.op == "aten.permute.default" && n.args.size() == 2 && n.args[1].is_int_list()) {
    const IntList& perm = std::get<IntList>(n.args[1].v);
    if (perm.size() != rt) return false;
    for (size_t d = 0; d + 2 < rt; ++d) {
      if (perm[d] != int64_t(d) && perm[d] != int64_t(d) - int64_t(rt)) return false;
    }
    const int64_t a = perm[rt - 2] < 0 ? perm[rt - 2] + int64_t(rt) : perm[rt - 2];
    if (a == int64_t(rt) - 1) {
      std::swap(v.size[rv - 1], v.size[rv - 2]);
      std::swap(v.stride[rv - 1], v.stride[rv - 2]);
    } else if (a != int64_t(rt) - 2) {
      return false;
    }
    return true;
  }
  return false;
}

// From `t` back through view nodes to the tensor they start from: that
// tensor, and t as a view of it (with leading dims of its own, see
// follow()). The view nodes passed go into `views`.
TensorRef trace(const ir::Graph& g, TensorRef t, View& v, std::vector<int>& views) {
  std::vector<std::pair<int, TensorRef>> steps;  // node, its output, from t back
  TensorRef base = t;
  for (int guard = 0; guard < 64; ++guard) {
    const int p = g.producer(base);
    if (p < 0) break;
    const ir::Node& n = g.nodes()[size_t(p)];
    if (n.dead || !n.unfused.empty() || !is_view_op(n.op) || n.args.empty() || !n.args[0].is_tensor()) break;
    steps.emplace_back(p, base);
    base = n.args[0].tensor();
  }
  for (;;) {
    const std::optional<Shape> bs = g.known_shape(base);
    if (!bs) return TensorRef{-1};
    v = contiguous(*bs);
    Shape in = *bs;
    bool ok = true;
    size_t k = steps.size();
    for (; k-- > 0;) {
      const ir::Node& n = g.nodes()[size_t(steps[k].first)];
      const TensorRef o = steps[k].second;
      const std::optional<Shape> os = g.known_shape(o);
      size_t output = 0;
      while (output < n.outputs.size() && n.outputs[output] != o) ++output;
      if (!os || !follow(n, output, v, in, *os)) {
        ok = false;
        break;
      }
      in = *os;
    }
    if (ok) {
      for (const auto& s : steps) views.push_back(s.first);
      return base;
    }
    // A view it cannot follow: start from that view's result instead.
    base = steps[k].second;
    steps.resize(k);
  }
}

// The leading dims of every list (their products equal) split into one
// sequence of dims that refines each (1s dropped): [1, 4] and [1, 2, 2]
// -> [2, 2]; nullopt where none does ([2, 3] and [3, 2]).
std::optional<std::vector<int64_t>> common_refinement(const std::vector<std::vector<int64_t>>& leads) {
  std::set<int64_t> cuts;
  for (const auto& lead : leads) {
    int64_t p = 1;
    for (int64_t d : lead) {
      if (d == 1) continue;
      p *= d;
      cuts.insert(p);
    }
  }
  std::vector<int64_t> c;
  int64_t prev = 1;
  for (int64_t p : cuts) {
    if (p % prev != 0) return std::nullopt;
    c.push_back(p / prev);
    prev = p;
  }
  return c;
}

// v's leading dims (all but its last two) regrouped as `lead`, without
// moving elements; false where strides do not allow it.
bool regroup(View& v, const std::vector<int64_t>& lead) {
  const size_t r = v.size.size();
  if (r < 2) return false;
  View head;
  head.size.assign(v.size.begin(), v.size.end() - 2);
  head.stride.assign(v.stride.begin(), v.stride.end() - 2);
  if (!reshape(head, Shape(lead.begin(), lead.end()))) return false;
  head.size.insert(head.size.end(), v.size.end() - 2, v.size.end());
  head.stride.insert(head.stride.end(), v.stride.end() - 2, v.stride.end());
  head.offset = v.offset;
  v = head;
  return true;
}

std::vector<int64_t> view_arg(const View& v) {
  std::vector<int64_t> a{v.offset};
  a.insert(a.end(), v.size.begin(), v.size.end());
  a.insert(a.end(), v.stride.begin(), v.stride.end());
  return a;
}

// A node of `op` with one result that node `user` alone reads; else null.
const ir::Node* only_for(const ir::Graph& g, TensorRef v, int user, int& at) {
  at = g.producer(v);
  if (at < 0 || sole_user(g, v) != user) return nullptr;
  const ir::Node& n = g.nodes()[size_t(at)];
  if (n.dead || !n.unfused.empty() || n.outputs.size() != 1) return nullptr;
  return &n;
}

// x * c (c a one-element constant, either side): x and c.
bool scalar_factor(const ir::Graph& g, const ir::Node& n, TensorRef& x, double& c) {
  if (n.op != "aten.mul.Tensor" || n.args.size() != 2 || !n.args[0].is_tensor() || !n.args[1].is_tensor()) return false;
  const std::optional<double> a = scalar_value(g, n.args[0].tensor()), b = scalar_value(g, n.args[1].tensor());
  if (a.has_value() == b.has_value()) return false;
  x = a ? n.args[1].tensor() : n.args[0].tensor();
  c = a ? *a : *b;
  const std::optional<Shape> xs = g.known_shape(x), ys = g.known_shape(n.outputs[0]);
  return xs && ys && *xs == *ys && std::isfinite(c);
}

class FuseAttention final : public Pass {
 public:
  const char* name() const override { return "fuse_attention"; }
  size_t apply(ir::Graph& g, const PassContext& pc) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (fuse(g, int(i), pc)) ++fused;
    }
    return fused;
  }

 private:
  static bool fuse(ir::Graph& g, int sm, const PassContext& pc) {
    const ir::Node& soft = g.nodes()[size_t(sm)];
    if (soft.dead || soft.op != "aten._softmax.default" || !soft.unfused.empty() || soft.outputs.size() != 1 ||
        soft.args.size() < 2 || !soft.args[0].is_tensor()) {
      return false;
    }
    if (soft.args.size() > 2 && !(soft.args[2].is_bool() && !std::get<bool>(soft.args[2].v))) return false;
    const std::optional<Shape> scores_shape = g.known_shape(soft.args[0].tensor());
    if (!scores_shape) return false;
    const int64_t rank = int64_t(scores_shape->size());
    int64_t dim = 0;
    if (!int_arg(soft.args[1], dim) || (dim != -1 && dim != rank - 1) || rank < 2 || rank > 4) return false;

    std::vector<int> chain = {sm};
    double scale = 1.0;
    TensorRef mask{-1};
    std::vector<TensorRef> conds;  // masked_fill's conditions (-inf where true)
    TensorRef cur = soft.args[0].tensor();
    int p = -1;
    const ir::Node* n = only_for(g, cur, sm, p);
    // Back from the softmax to the product: masks (an added tensor, or
    // -inf where a condition holds), then scalar factors, with views that
    // only regroup leading dims anywhere between.
    bool scaled = false;
    for (;;) {
      if (!n) return false;
      if (n->op == "aten.where.self" && !scaled && n->args.size() == 3 && n->args[0].is_tensor() &&
          n->args[1].is_tensor() && n->args[2].is_tensor()) {
        const std::optional<double> fill = scalar_value(g, n->args[1].tensor());
        const TensorRef c = n->args[0].tensor(), x = n->args[2].tensor();
        if (!fill || !std::isinf(*fill) || *fill > 0 || c == x || !g.known_shape(c)) return false;
        conds.push_back(c);
        chain.push_back(p);
        cur = x;
      } else if (is_plain_add(*n) && !scaled && mask.id < 0) {
        bool found = false;
        for (size_t k = 0; k < 2 && !found; ++k) {
          const TensorRef in = n->args[k].tensor(), other = n->args[1 - k].tensor();
          int q = -1;
          const ir::Node* m = only_for(g, in, p, q);
          if (!m || in == other) continue;
          if (m->op != "aten.matmul.default" && m->op != "aten.bmm.default" && m->op != "aten.mul.Tensor" &&
              m->op != "aten.div.Tensor" && m->op != "aten.view.default" && m->op != "aten.where.self") {
            continue;
          }
          mask = other;
          cur = in;
          found = true;
        }
        if (!found) return false;
        chain.push_back(p);
      } else if (n->op == "aten.mul.Tensor") {
        TensorRef x;
        double c = 1;
        if (!scalar_factor(g, *n, x, c)) return false;
        scale *= c;
        scaled = true;
        chain.push_back(p);
        cur = x;
      } else if (n->op == "aten.div.Tensor" && n->args.size() == 2 && n->args[0].is_tensor() &&
                 n->args[1].is_tensor()) {
        const std::optional<double> c = scalar_value(g, n->args[1].tensor());
        if (!c || *c == 0 || scalar_value(g, n->args[0].tensor())) return false;
        scale /= *c;
        scaled = true;
        chain.push_back(p);
        cur = n->args[0].tensor();
      } else if (n->op == "aten.view.default" && n->args.size() == 2 && n->args[0].is_tensor()) {
        // Leading dims regrouped ([1, 1, H, L, S] seen as [1, H, L, S]).
        const std::optional<Shape> in = g.known_shape(n->args[0].tensor()), out = g.known_shape(n->outputs[0]);
        if (!in || !out || in->size() < 2 || out->size() < 2 || numel(*in) != numel(*out) ||
            (*in)[in->size() - 1] != (*out)[out->size() - 1] || (*in)[in->size() - 2] != (*out)[out->size() - 2]) {
          return false;
        }
        chain.push_back(p);
        cur = n->args[0].tensor();
      } else if (n->op == "aten.matmul.default" || n->op == "aten.bmm.default") {
        break;
      } else {
        return false;
      }
      n = only_for(g, cur, p, p);
    }
    if (n->args.size() != 2 || !n->args[0].is_tensor() || !n->args[1].is_tensor()) return false;
    const int mm1 = p;
    chain.push_back(mm1);
    // q and kT, each through an optional scalar factor.
    TensorRef operand[2] = {n->args[0].tensor(), n->args[1].tensor()};
    if (operand[0] == operand[1]) return false;
    for (TensorRef& x : operand) {
      int f = -1;
      const ir::Node* m = only_for(g, x, mm1, f);
      TensorRef y;
      double c = 1;
      if (m && scalar_factor(g, *m, y, c)) {
        scale *= c;
        chain.push_back(f);
        x = y;
      }
    }
    // The second product: the probabilities times v.
    const TensorRef probs = soft.outputs[0];
    const int mm2 = sole_user(g, probs);
    if (mm2 < 0) return false;
    const ir::Node& pv = g.nodes()[size_t(mm2)];
    if ((pv.op != "aten.matmul.default" && pv.op != "aten.bmm.default") || !pv.unfused.empty() ||
        pv.args.size() != 2 || !pv.args[0].is_tensor() || pv.args[0].tensor() != probs || !pv.args[1].is_tensor() ||
        pv.args[1].tensor() == probs || pv.outputs.size() != 1) {
      return false;
    }
    chain.push_back(mm2);

    std::vector<int> views;
    View view[3];
    const TensorRef base[3] = {trace(g, operand[0], view[0], views), trace(g, operand[1], view[1], views),
                               trace(g, pv.args[1].tensor(), view[2], views)};
    for (const TensorRef& b : base) {
      if (b.id < 0) return false;
    }
    for (const View& v : view) {
      if (v.size.size() < 2) return false;
    }
    // kT [.., D, S] read as k [.., S, D].
    {
      const size_t r = view[1].size.size();
      std::swap(view[1].size[r - 1], view[1].size[r - 2]);
      std::swap(view[1].stride[r - 1], view[1].stride[r - 2]);
    }
    auto last = [](const View& v, size_t i) { return v.size[v.size.size() - 2 + i]; };
    const int64_t L = last(view[0], 0), D = last(view[0], 1), S = last(view[1], 0), Dv = last(view[2], 1);
    if (last(view[1], 1) != D || last(view[2], 0) != S) return false;
    if (D < 1 || Dv < 1 || D > kMaxHeadDim || Dv > kMaxHeadDim || L < 1 || S < 1) return false;
    const size_t r1 = size_t(rank - 1), r2 = size_t(rank - 2);
    if ((*scores_shape)[r2] != L || (*scores_shape)[r1] != S) return false;
    // The scores' leading dims (the mask's and the result's); q, k and v
    // may group theirs otherwise (grouped K/V heads: k [B, KVH, G] with G
    // read at a stride of 0, q [B, H]).
    const std::vector<int64_t> lead_s(scores_shape->begin(), scores_shape->end() - 2);
    const int64_t bh = std::accumulate(lead_s.begin(), lead_s.end(), int64_t(1), std::multiplies<>());
    std::vector<std::vector<int64_t>> leads = {lead_s};
    for (const View& v : view) {
      std::vector<int64_t> lead(v.size.begin(), v.size.end() - 2);
      if (std::accumulate(lead.begin(), lead.end(), int64_t(1), std::multiplies<>()) != bh) return false;
      leads.push_back(std::move(lead));
    }
    std::optional<std::vector<int64_t>> lead_c = common_refinement(leads);
    if (!lead_c) return false;
    // Over more keys than the one-dispatch kernel takes, wgnn.attention
    // runs two products and a softmax on the regular GEMM kernel, reading
    // q, k and v in place. In float16, where the chain's own products may
    // run on tensor cores, such attention stays a chain (for the other
    // passes to fuse) unless the op's tensor-core kernel takes it (any
    // number of keys). (H200, Whisper-base encoder, 1500 keys:
    // docs/BENCHMARKS.md.)
    if (g.known_dtype(base[0]) == DType::F16) {
      const int64_t max_keys = pc.device ? ops::attention_max_keys(pc.device->settings()) : 1024;
      if (S > max_keys && !(pc.device && ops::attention_on_tensor_cores(*pc.device, bh, L, D, Dv))) return false;
    }

    // The mask broadcast to the scores [.., L, S].
    const Shape& scores = *scores_shape;
    // The mask's shape: the added tensor's and the conditions' broadcast.
    std::optional<Shape> ms;
    auto broadcast = [](const Shape& x, const Shape& y) -> std::optional<Shape> {
      Shape r(std::max(x.size(), y.size()), 1);
      for (size_t d = 0; d < r.size(); ++d) {
        const int64_t a = d < r.size() - x.size() ? 1 : x[d - (r.size() - x.size())];
        const int64_t b = d < r.size() - y.size() ? 1 : y[d - (r.size() - y.size())];
        if (a != b && a != 1 && b != 1) return std::nullopt;
        r[d] = a == 1 ? b : a;
      }
      return r;
    };
    std::vector<Shape> cond_shapes;
    for (TensorRef c : conds) {
      cond_shapes.push_back(*g.known_shape(c));
      ms = ms ? broadcast(*ms, cond_shapes.back()) : cond_shapes.back();
      if (!ms) return false;
    }
    if (mask.id >= 0) {
      const std::optional<Shape> added = g.known_shape(mask);
      if (!added) return false;
      ms = ms ? broadcast(*ms, *added) : added;
      if (!ms) return false;
    }
    View mview;
    if (ms) {
      if (int64_t(ms->size()) > rank) return false;
      mview = contiguous(*ms);
      while (int64_t(mview.size.size()) < rank) {
        mview.size.insert(mview.size.begin(), 1);
        mview.stride.insert(mview.stride.begin(), 0);
      }
      for (size_t d = 0; d < size_t(rank); ++d) {
        if (mview.size[d] == scores[d]) continue;
        if (mview.size[d] != 1) return false;
        mview.stride[d] = 0;
        mview.size[d] = scores[d];
      }
    }

    // The result O [.., L, Dv], laid out as a following permute (and view)
    // put it.
    std::vector<int64_t> o_size = lead_s;
    o_size.push_back(L);
    o_size.push_back(Dv);
    View out = contiguous(Shape(o_size.begin(), o_size.end()));
    Shape out_shape(o_size.begin(), o_size.end());
    if (g.known_shape(pv.outputs[0]) != out_shape) return false;
    TensorRef result = pv.outputs[0];
    int at = mm2;
    const int t = sole_user(g, result);
    if (t >= 0 && g.nodes()[size_t(t)].op == "aten.permute.default" && g.nodes()[size_t(t)].unfused.empty()) {
      const ir::Node& pn = g.nodes()[size_t(t)];
      View tv = out;
      const std::optional<Shape> ts = g.known_shape(pn.outputs[0]);
      if (ts && apply_view(pn, 0, tv, *ts)) {
        // The permuted tensor is written contiguously: O's dims take the
        // strides of their places in it.
        const View tc = contiguous(*ts);
        const IntList& perm = std::get<IntList>(pn.args[1].v);
        for (size_t d = 0; d < size_t(rank); ++d) {
          const int64_t q = perm[d] < 0 ? perm[d] + rank : perm[d];
          out.stride[size_t(q)] = tc.stride[d];
        }
        out_shape = *ts;
        result = pn.outputs[0];
        at = t;
        chain.push_back(t);
        const int r = sole_user(g, result);
        if (r >= 0 && g.nodes()[size_t(r)].op == "aten.view.default" && g.nodes()[size_t(r)].unfused.empty()) {
          const std::optional<Shape> rs = g.known_shape(g.nodes()[size_t(r)].outputs[0]);
          if (rs && numel(*rs) == numel(out_shape)) {
            out_shape = *rs;
            result = g.nodes()[size_t(r)].outputs[0];
            at = r;
            chain.push_back(r);
          }
        }
      }
    }
    // Every view with the same leading dims, at most two of them (the op's
    // B and H): the refinement, adjacent dims merged where every view's
    // strides allow, and 1s before.
    std::vector<View*> all = {&view[0], &view[1], &view[2], &out};
    if (ms) all.push_back(&mview);
    auto regroup_all = [&](const std::vector<int64_t>& lead) {
      std::vector<View> tried;
      for (View* v : all) {
        tried.push_back(*v);
        if (!regroup(tried.back(), lead)) return false;
      }
      for (size_t k = 0; k < all.size(); ++k) *all[k] = tried[k];
      return true;
    };
    if (!regroup_all(*lead_c)) return false;
    while (lead_c->size() > 2) {
      bool merged = false;
      for (size_t k = 0; k + 1 < lead_c->size() && !merged; ++k) {
        std::vector<int64_t> m = *lead_c;
        m[k] *= m[k + 1];
        m.erase(m.begin() + long(k) + 1);
        if (regroup_all(m)) {
          *lead_c = m;
          merged = true;
        }
      }
      if (!merged) return false;
    }
    while (lead_c->size() < 2) lead_c->insert(lead_c->begin(), 1);
    if (!regroup_all(*lead_c)) return false;

    // The view nodes go along where nothing outside the chain reads them.
    std::set<int> taken(chain.begin(), chain.end());
    std::sort(views.begin(), views.end());
    views.erase(std::unique(views.begin(), views.end()), views.end());
    for (bool more = true; more;) {
      more = false;
      for (int v : views) {
        if (taken.count(v)) continue;
        const ir::Node& vn = g.nodes()[size_t(v)];
        bool owned = true;
        for (TensorRef o : vn.outputs) {
          if (g.is_output(o)) owned = false;
          for (int u : g.users(o)) owned = owned && taken.count(u);
        }
        if (owned) {
          taken.insert(v);
          more = true;
        }
      }
    }
    // Every node of the chain comes after what the fused node reads and
    // no later than `at`, where the fused node goes.
    for (int c : taken) {
      if (c > at) return false;
    }
    for (const TensorRef& b : base) {
      if (g.producer(b) >= at) return false;
    }
    if (mask.id >= 0 && g.producer(mask) >= at) return false;

    // masked_fill's conditions as an additive mask (-inf where true, 0
    // elsewhere), summed with the added one: nodes put before the fused one.
    std::vector<ir::Node> made;
    TensorRef full_mask = mask;
    if (!conds.empty()) {
      HostTensor ninf(DType::F32, {}), zero(DType::F32, {});
      ninf.as<float>()[0] = -std::numeric_limits<float>::infinity();
      zero.as<float>()[0] = 0.f;
      const TensorRef tn = g.constant(std::move(ninf), "masked_fill -inf"), tz = g.constant(std::move(zero), "0");
      std::optional<Shape> sum_shape = mask.id >= 0 ? g.known_shape(mask) : std::nullopt;
      for (size_t k = 0; k < conds.size(); ++k) {
        ir::Node w;
        w.op = "aten.where.self";
        w.args = {conds[k], tn, tz};
        w.outputs = {g.new_result()};
        w.label = "fuse_attention";
        w.origin = soft.origin;
        g.set_seen_shape(w.outputs[0], cond_shapes[k]);
        g.set_seen_dtype(w.outputs[0], DType::F32);
        const TensorRef wt = w.outputs[0];
        made.push_back(std::move(w));
        if (full_mask.id < 0) {
          full_mask = wt;
          sum_shape = cond_shapes[k];
          continue;
        }
        ir::Node add;
        add.op = "aten.add.Tensor";
        add.args = {full_mask, wt};
        add.outputs = {g.new_result()};
        add.label = "fuse_attention";
        add.origin = soft.origin;
        sum_shape = broadcast(*sum_shape, cond_shapes[k]);
        g.set_seen_shape(add.outputs[0], *sum_shape);
        full_mask = add.outputs[0];
        made.push_back(std::move(add));
      }
    }

    ir::Node f;
    f.op = "wgnn.attention.default";
    const Value mask_arg = full_mask.id >= 0 ? Value(full_mask) : Value(None{});
    const IntList mv = full_mask.id >= 0 ? IntList{mview.offset, mview.stride[0], mview.stride[1], mview.stride[2],
                                                   mview.stride[3]}
                                         : IntList{};
    f.args = {base[0], base[1], base[2], mask_arg, scale, view_arg(view[0]), view_arg(view[1]), view_arg(view[2]),
              mv, IntList(out_shape.begin(), out_shape.end()),
              IntList{out.offset, out.stride[0], out.stride[1], out.stride[2], out.stride[3]}};
    f.outputs = {result};
    f.label = "fuse_attention";
    f.origin = soft.origin;
    for (int c : taken) {
      ir::Node u = g.nodes()[size_t(c)];
      f.unfused.push_back(std::move(u));
    }
    for (int c : taken) {
      if (c != at) g.nodes()[size_t(c)].dead = true;
    }
    g.replace_node(at, std::move(f));
    for (ir::Node& m : made) g.insert_node(at++, std::move(m));
    return true;
  }

};

}  // namespace

std::unique_ptr<Pass> fuse_attention() { return std::make_unique<FuseAttention>(); }

}  // namespace wgnn::passes

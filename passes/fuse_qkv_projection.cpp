// Attention whose q, k and v are products of one input with constant
// weights given as float32, stored as float32 or float16 (transformers' q_proj, k_proj, v_proj: three Linear
// layers over the same hidden states), each result read by the attention
// alone -> one product with the weights side by side ([K, Nq + Nk + Nv], or
// stacked when stored transposed) and the biases joined (zeros for a product
// without one), the attention reading q, k and v as column blocks of its
// result through its views. One product of 1500 x 1536 x 512 in place of
// three of 1500 x 512 x 512 fills a large GPU better (Whisper's encoder),
// as ONNX Runtime's attention fusion packs q, k and v weights. Products
// are wgnn.matmul_add (no activation, no residual, alpha alike),
// aten.matmul or aten.linear; the views must move along whole rows of each result or
// stay inside a row. Where q is not such a product of the same input (a
// decoder's cross-attention: q from its own states, k and v from the
// encoder's), k and v alone become one product the same way (BART's
// 128 x 1536 x 768 in place of two of 128 x 768 x 768).
#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>

#include "passes/passes.h"

namespace wgnn::passes {
namespace {

struct Product {
  int node = -1;
  TensorRef a, b;
  std::shared_ptr<const HostTensor> w;     // b's values, float32
  std::shared_ptr<const HostTensor> bias;  // or null
  std::string w_memo, bias_memo;           // memo_of b and of the bias ("none"), or empty
  double alpha = 1;
  bool trans_b = false;
  int64_t n = 0;  // columns of the result
};

// A product node's arguments, where it is one this pass takes.
std::optional<Product> product_of(const ir::Graph& g, int p) {
  const ir::Node& n = g.nodes()[size_t(p)];
  Product r;
  r.node = p;
  if (n.outputs.size() != 1 || n.args.size() < 2 || !n.args[0].is_tensor() || !n.args[1].is_tensor()) {
    return std::nullopt;
  }
  r.a = n.args[0].tensor();
  r.b = n.args[1].tensor();
  if (n.op == "wgnn.matmul_add.default") {
    if (n.args.size() > 10) return std::nullopt;
    const Value& bias = arg_or(n, 2, Value(None{}));
    const Value& alpha = arg_or(n, 3, Value(1.0));
    const Value& act = arg_or(n, 4, Value(std::string("none")));
    const Value& ta = arg_or(n, 5, Value(false));
    const Value& tb = arg_or(n, 6, Value(false));
    const Value& residual = arg_or(n, 9, Value(None{}));
    if (!std::holds_alternative<std::string>(act.v) || std::get<std::string>(act.v) != "none" || !ta.is_bool() || std::get<bool>(ta.v) ||
        !tb.is_bool() || !residual.is_none() || !(alpha.is_double() || alpha.is_int())) {
      return std::nullopt;
    }
    r.alpha = alpha.is_double() ? std::get<double>(alpha.v) : double(std::get<int64_t>(alpha.v));
    r.trans_b = std::get<bool>(tb.v);
    if (!bias.is_none()) {
      if (!bias.is_tensor() || !(r.bias = f32_values(g, bias.tensor()))) return std::nullopt;
    }
  } else if (n.op == "aten.linear.default") {
    // torch's Linear (ExecuTorch programs): weights [N, K], an optional bias.
    if (n.args.size() > 3) return std::nullopt;
    r.trans_b = true;
    const Value& bias = arg_or(n, 2, Value(None{}));
    if (!bias.is_none()) {
      if (!bias.is_tensor() || !(r.bias = f32_values(g, bias.tensor()))) return std::nullopt;
    }
  } else if (n.op != "aten.matmul.default" || n.args.size() != 2) {
    return std::nullopt;
  }
  if (g.is_constant(r.a) || !(r.w = f32_values(g, r.b)) || r.w->shape.size() != 2) return std::nullopt;
  r.n = r.trans_b ? r.w->shape[0] : r.w->shape[1];
  if (r.bias && r.bias->numel() != 1 && r.bias->numel() != r.n) return std::nullopt;
  if (r.bias) {
    for (size_t d = 0; d + 1 < r.bias->shape.size(); ++d)
      if (r.bias->shape[d] != 1) return std::nullopt;
  }
  r.w_memo = memo_of(g, n.args[1]);
  r.bias_memo = n.op == "aten.matmul.default" ? std::string("none") : memo_of(g, arg_or(n, 2, Value(None{})));
  return r;
}

// One product of ps's common input with their weights side by side
// (stacked when stored [N, K]) and their biases joined (zeros for a product
// without one), the result's columns theirs in order.
ir::Node joined(ir::Graph& g, const std::vector<Product>& ps, const std::string& what, const char* label) {
  const HostTensor& w0 = *ps[0].w;
  const int64_t K = ps[0].trans_b ? w0.shape[1] : w0.shape[0];
  const DType stored = g.value(ps[0].b).dtype;
  const bool trans_b = ps[0].trans_b;
  int64_t total = 0;
  bool any_bias = false, memoized = true;
  std::string w_memos, bias_memos;
  for (const Product& p : ps) {
    total += p.n;
    any_bias = any_bias || p.bias;
    memoized = memoized && !p.w_memo.empty() && !p.bias_memo.empty();
    w_memos += (w_memos.empty() ? "" : ", ") + p.w_memo;
    bias_memos += (bias_memos.empty() ? "" : ", ") + p.bias_memo;
  }
  const Shape w_shape = trans_b ? Shape{total, K} : Shape{K, total};
  // The weights side by side and the biases joined, made when a plan
  // uploads them: the sources are the model's, so every plan of a Session
  // finds the first one's by its memo (a plan per length of a decoder would
  // otherwise join and hash every layer's weights again).
  auto make_w = [ps, K, total, trans_b, stored](HostTensor& w) -> const HostTensor& {
    w = HostTensor(DType::F32, trans_b ? Shape{total, K} : Shape{K, total});
    int64_t c0 = 0;
    for (const Product& p : ps) {
      const float* src = p.w->as<float>();
      for (int64_t r = 0; r < (trans_b ? p.n : K); ++r) {
        for (int64_t c = 0; c < (trans_b ? K : p.n); ++c) {
          if (trans_b) w.as<float>()[(c0 + r) * K + c] = src[r * K + c];
          else w.as<float>()[r * total + c0 + c] = src[r * p.n + c];
        }
      }
      c0 += p.n;
    }
    if (stored == DType::F16) w = to_f16_saturated(w);
    return w;
  };
  auto make_bias = [ps, total, stored](HostTensor& bias) -> const HostTensor& {
    bias = HostTensor(DType::F32, {total});
    int64_t c0 = 0;
    for (const Product& p : ps) {
      for (int64_t c = 0; c < p.n; ++c) {
        bias.as<float>()[c0 + c] = p.bias ? p.bias->as<float>()[p.bias->numel() == 1 ? 0 : c] : 0.f;
      }
      c0 += p.n;
    }
    if (stored == DType::F16) bias = to_f16_saturated(bias);
    return bias;
  };
  TensorRef w_ref, bias_ref;
  if (memoized) {
    const std::string tail = fmt::format("; {}; {})", trans_b ? "stacked" : "side by side", dtype_name(stored));
    w_ref = g.made_constant(stored, w_shape, "joined(" + w_memos + tail, make_w, what + "_weight");
    if (any_bias) bias_ref = g.made_constant(stored, {total}, "joined_bias(" + bias_memos + tail, make_bias, what + "_bias");
  } else {
    HostTensor w, bias;
    make_w(w);
    w_ref = g.constant(std::move(w), what + "_weight");
    if (any_bias) {
      make_bias(bias);
      bias_ref = g.constant(std::move(bias), what + "_bias");
    }
  }
  const TensorRef y = g.new_result();
  if (const std::optional<Shape> as = g.known_shape(ps[0].a)) {
    Shape ys = *as;
    ys.back() = total;
    g.set_seen_shape(y, ys);
  }
  if (const std::optional<DType> d = g.known_dtype(g.nodes()[size_t(ps[0].node)].outputs[0])) g.set_seen_dtype(y, *d);
  ir::Node prod;
  prod.op = "wgnn.matmul_add.default";
  prod.args = {ps[0].a, w_ref, any_bias ? Value(bias_ref) : Value(None{}), ps[0].alpha, std::string("none"), false,
               trans_b};
  prod.outputs = {y};
  prod.label = label;
  prod.origin = g.nodes()[size_t(ps[0].node)].origin;
  return prod;
}

// Whether the products can be one: the same input, alpha, layout, K and
// storage dtype (the bias's too).
bool joinable(const ir::Graph& g, const std::vector<Product>& ps) {
  const Product& p0 = ps[0];
  const int64_t K = p0.trans_b ? p0.w->shape[1] : p0.w->shape[0];
  const DType stored = g.value(p0.b).dtype;
  for (const Product& p : ps) {
    const int64_t pk = p.trans_b ? p.w->shape[1] : p.w->shape[0];
    if (p.a != p0.a || p.alpha != p0.alpha || p.trans_b != p0.trans_b || pk != K || g.value(p.b).dtype != stored) {
      return false;
    }
    const ir::Node& pn = g.nodes()[size_t(p.node)];
    if (pn.op == "wgnn.matmul_add.default" && pn.args.size() > 2 && pn.args[2].is_tensor() &&
        g.value(pn.args[2].tensor()).dtype != stored) {
      return false;
    }
  }
  return true;
}

// A view [offset, n0..n3, s0..s3] of a [.., W] result as a view of the
// [.., total] result whose columns [c0, c0 + W) it becomes: each dim moves
// along rows (a stride that is a multiple of W) or inside a row.
std::optional<IntList> remap(const Value& v, int64_t W, int64_t total, int64_t c0) {
  if (!v.is_int_list()) return std::nullopt;
  const IntList& o = std::get<IntList>(v.v);
  if (o.size() != 9 || o[0] < 0) return std::nullopt;
  IntList r(9);
  int64_t reach = o[0] % W;
  for (size_t d = 0; d < 4; ++d) {
    const int64_t n = o[1 + d], s = o[5 + d];
    r[1 + d] = n;
    if (n <= 1) {
      r[5 + d] = 0;
    } else if (s % W == 0) {
      r[5 + d] = s / W * total;
    } else {
      r[5 + d] = s;
      reach += (n - 1) * s;
    }
  }
  if (reach >= W) return std::nullopt;
  r[0] = o[0] / W * total + c0 + o[0] % W;
  return r;
}

class FuseQkvProjection final : public Pass {
 public:
  const char* name() const override { return "fuse_qkv_projection"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& at = g.nodes()[i];
      if (at.dead || at.op != "wgnn.attention.default" || at.args.size() != 11) continue;
      std::vector<std::optional<Product>> found(3);
      for (size_t k = 0; k < 3; ++k) {
        if (!at.args[k].is_tensor()) break;
        const TensorRef x = at.args[k].tensor();
        size_t uses = 0;
        for (const Value& v : at.args) uses += v.is_tensor() && v.tensor() == x;
        const int p = g.producer(x);
        if (p >= 0 && uses == 1 && sole_user(g, x) == int(i)) found[k] = product_of(g, p);
      }
      // Whether the products of args[idx] can be one: the same input,
      // alpha, layout, K and storage dtype.
      const auto can_join = [&](const std::vector<size_t>& idx) {
        std::vector<Product> ps;
        for (size_t k : idx) {
          if (!found[k]) return false;
          ps.push_back(*found[k]);
        }
        return joinable(g, ps);
      };
      std::vector<size_t> idx = {0, 1, 2};
      if (!can_join(idx)) idx = {1, 2};
      if (!can_join(idx)) continue;
      std::vector<Product> ps;
      for (size_t k : idx) ps.push_back(*found[k]);
      bool ok = true;
      int64_t total = 0;
      for (const Product& p : ps) total += p.n;
      // The attention's views of the joined ones, remapped.
      ir::Node n = at;
      int64_t c0 = 0;
      for (size_t j = 0; j < idx.size() && ok; ++j) {
        const std::optional<IntList> r = remap(at.args[5 + idx[j]], ps[j].n, total, c0);
        if (!r) ok = false;
        else n.args[5 + idx[j]] = *r;
        c0 += ps[j].n;
      }
      if (!ok) continue;
      const std::string what = idx.size() == 3 ? "qkv" : "kv";
      ir::Node prod = joined(g, ps, what, name());
      const TensorRef y = prod.outputs[0];
      for (size_t k : idx) n.args[k] = y;
      // The chain the attention keeps (fuse_attention's, for a plan whose
      // dtypes or sizes the op refuses) read the separate products: it
      // takes their columns of the joined one.
      if (!n.unfused.empty()) {
        std::vector<ir::Node> cut;
        int64_t c = 0;
        for (const Product& p : ps) {
          ir::Node s;
          s.op = "aten.slice.Tensor";
          s.args = {y, int64_t(-1), c, c + p.n, int64_t(1)};
          s.outputs = {g.nodes()[size_t(p.node)].outputs[0]};
          s.label = name();
          s.origin = g.nodes()[size_t(p.node)].origin;
          cut.push_back(std::move(s));
          c += p.n;
        }
        n.unfused.insert(n.unfused.begin(), cut.begin(), cut.end());
      }
      int first = ps[0].node;
      for (const Product& p : ps) first = std::min(first, p.node);
      for (const Product& p : ps) g.nodes()[size_t(p.node)].dead = true;
      g.replace_node(first, std::move(prod));
      g.replace_node(int(i), std::move(n));
      ++fused;
    }
    return fused;
  }
};

// Products of one input row (a decoder's step: [1, 1, K]) with constant
// weights, whatever reads them (q, k and v before rotary positions) -> one
// product with the weights side by side, each result a slice of its
// columns: with one row a contiguous slice, a view that records nothing,
// so three dispatches become one. Products with an activation or a
// residual in their epilogue are left alone; more rows would make the
// slices copies.
class FuseRowProducts final : public Pass {
 public:
  const char* name() const override { return "fuse_row_products"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    std::map<int, std::vector<Product>> by_input;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& n = g.nodes()[i];
      if (n.dead || n.outputs.size() != 1) continue;
      std::optional<Product> p = product_of(g, int(i));
      if (!p) continue;
      const int64_t K = p->trans_b ? p->w->shape[1] : p->w->shape[0];
      const std::optional<Shape> as = g.known_shape(p->a), ys = g.known_shape(n.outputs[0]);
      if (!as || !ys || numel(*as) != K || ys->empty() || ys->back() != p->n) continue;
      by_input[p->a.id].push_back(*p);
    }
    size_t fused = 0;
    for (auto& [a, found] : by_input) {
      // The products joinable with the first.
      std::vector<Product> ps;
      for (const Product& p : found) {
        std::vector<Product> trial = ps;
        trial.push_back(p);
        if (joinable(g, trial)) ps = std::move(trial);
      }
      if (ps.size() < 2) continue;
      ir::Node prod = joined(g, ps, "joined", name());
      const TensorRef y = prod.outputs[0];
      int first = ps[0].node;
      int64_t c = 0;
      for (const Product& p : ps) {
        first = std::min(first, p.node);
        ir::Node s;
        s.op = "aten.slice.Tensor";
        s.args = {y, int64_t(-1), c, c + p.n, int64_t(1)};
        s.outputs = g.nodes()[size_t(p.node)].outputs;
        s.label = name();
        s.origin = g.nodes()[size_t(p.node)].origin;
        g.replace_node(p.node, std::move(s));
        c += p.n;
      }
      g.insert_node(first, std::move(prod));
      // The nodes after `first` moved one place down.
      for (auto& [b, other] : by_input) {
        for (Product& p : other) {
          if (p.node >= first) ++p.node;
        }
      }
      ++fused;
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_qkv_projection() { return std::make_unique<FuseQkvProjection>(); }
std::unique_ptr<Pass> fuse_row_products() { return std::make_unique<FuseRowProducts>(); }

}  // namespace wgnn::passes

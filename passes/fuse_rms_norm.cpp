// RMS normalization as exporters write it (transformers' LlamaRMSNorm and
// its kin, the ONNX importer's SimplifiedLayerNormalization) -> one
// aten.rms_norm.default:
//   ms = mean(x * x | pow(x, 2), trailing dims, keepdim)
//   y  = x / sqrt(ms + eps)                      or
//   y  = x * (1 / sqrt(ms + eps))                (reciprocal, or a div of 1)
//   y  = x * rsqrt(ms + eps)
//   out = y * w  or  w * y                       (optional: w of the
//                                                 normalized dims' shape;
//                                                 views of y to its own
//                                                 shape between, as a
//                                                 no-op Cast imports)
// in any operand order of the products and the sum. Every value inside the
// chain is read by the next node alone; eps and the constants 1 and 2 are
// float scalars (the model's values). The normalized shape is x's trailing
// dims where x's shape is known, else the weight's shape. The fused node takes the last node's place and keeps
// the chain, lowered where the op refuses (another dtype, a weight of
// another shape). fuse_add_layer_norm may then take a residual add into it.
#include <algorithm>
#include <cmath>
#include <optional>

#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FuseRmsNorm final : public Pass {
 public:
  const char* name() const override { return "fuse_rms_norm"; }

  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (match(g, int(i))) ++fused;
    }
    return fused;
  }

 private:
  static bool tensor_arg(const ir::Node& n, size_t k) { return k < n.args.size() && n.args[k].is_tensor(); }
  // A plain two-tensor product or sum; `v` one operand, the other returned.
  static std::optional<TensorRef> other_operand(const ir::Node& n, TensorRef v) {
    if (n.args.size() < 2 || !tensor_arg(n, 0) || !tensor_arg(n, 1)) return std::nullopt;
    if (n.op == "aten.add.Tensor" && !is_plain_add(n)) return std::nullopt;
    if (n.op == "aten.mul.Tensor" && n.args.size() != 2) return std::nullopt;
    if (n.args[0].tensor() == v) return n.args[1].tensor();
    if (n.args[1].tensor() == v) return n.args[0].tensor();
    return std::nullopt;
  }
  static bool is_scalar(const ir::Graph& g, TensorRef v, double want) {
    const std::optional<double> s = scalar_value(g, v);
    return s && *s == want;
  }

  bool match(ir::Graph& g, int mean_at) const {
    const ir::Node* mean = live_node(g, mean_at, "aten.mean.dim");
    if (!mean || mean->args.size() != 3 || !tensor_arg(*mean, 0) || !mean->args[1].is_int_list() ||
        !(mean->args[2].is_bool() && std::get<bool>(mean->args[2].v))) {
      return false;
    }
    std::vector<int> chain;  // node indices, in order
    // The square: x * x or pow(x, 2).
    const TensorRef sq = mean->args[0].tensor();
    const int sq_at = g.producer(sq);
    if (sq_at < 0 || sole_user(g, sq) != mean_at) return false;
    TensorRef x{-1};
    if (const ir::Node* m = live_node(g, sq_at, "aten.mul.Tensor");
        m && m->args.size() == 2 && tensor_arg(*m, 0) && tensor_arg(*m, 1) && m->args[0].tensor() == m->args[1].tensor()) {
      x = m->args[0].tensor();
    } else if (const ir::Node* p = live_node(g, sq_at, "aten.pow.Tensor_Tensor");
               p && p->args.size() == 2 && tensor_arg(*p, 0) && tensor_arg(*p, 1) && is_scalar(g, p->args[1].tensor(), 2)) {
      x = p->args[0].tensor();
    } else if (const ir::Node* ps = live_node(g, sq_at, "aten.pow.Tensor_Scalar");
               ps && ps->args.size() == 2 && tensor_arg(*ps, 0) && is_number(ps->args[1], 2.0)) {
      x = ps->args[0].tensor();
    } else {
      return false;
    }
    chain.push_back(sq_at);
    chain.push_back(mean_at);
    // The normalized dims: the trailing ones (negative where x's rank is
    // not known).
    const std::optional<Shape> xs = g.known_shape(x);
    const int64_t r = xs ? int64_t(xs->size()) : 0;
    std::vector<int64_t> dims = std::get<IntList>(mean->args[1].v);
    for (int64_t& d : dims) {
      if (d >= 0 && !xs) return false;
      d = d < 0 ? d + r : d;
    }
    std::sort(dims.begin(), dims.end());
    if (dims.empty() || (xs && int64_t(dims.size()) > r)) return false;
    for (size_t k = 0; k < dims.size(); ++k) {
      if (dims[k] != r - int64_t(dims.size()) + int64_t(k)) return false;
    }
    const size_t k_dims = dims.size();
    // + eps.
    const TensorRef ms = mean->outputs[0];
    const int add_at = sole_user(g, ms);
    const ir::Node* add = live_node(g, add_at, "aten.add.Tensor");
    if (!add) return false;
    const std::optional<TensorRef> eps_t = other_operand(*add, ms);
    if (!eps_t) return false;
    const std::optional<double> eps = scalar_value(g, *eps_t);
    if (!eps || !(*eps >= 0) || !std::isfinite(*eps)) return false;
    chain.push_back(add_at);
    // 1 / sqrt, as a division of x or a product with its reciprocal.
    const TensorRef t = add->outputs[0];
    const int s_at = sole_user(g, t);
    TensorRef y{-1}, inv{-1};
    if (const ir::Node* rs = live_node(g, s_at, "aten.rsqrt.default")) {
      chain.push_back(s_at);
      inv = rs->outputs[0];
    } else if (const ir::Node* sq_root = live_node(g, s_at, "aten.sqrt.default")) {
      chain.push_back(s_at);
      const TensorRef root = sq_root->outputs[0];
      const int u_at = sole_user(g, root);
      if (const ir::Node* rec = live_node(g, u_at, "aten.reciprocal.default")) {
        chain.push_back(u_at);
        inv = rec->outputs[0];
      } else if (const ir::Node* div = live_node(g, u_at, "aten.div.Tensor");
                 div && div->args.size() == 2 && tensor_arg(*div, 0) && tensor_arg(*div, 1) &&
                 div->args[1].tensor() == root) {
        chain.push_back(u_at);
        if (div->args[0].tensor() == x) {
          y = div->outputs[0];
        } else if (is_scalar(g, div->args[0].tensor(), 1.0)) {
          inv = div->outputs[0];
        } else {
          return false;
        }
      } else {
        return false;
      }
    } else {
      return false;
    }
    if (y.id < 0) {
      const int m_at = sole_user(g, inv);
      const ir::Node* m = live_node(g, m_at, "aten.mul.Tensor");
      if (!m) return false;
      const std::optional<TensorRef> o = other_operand(*m, inv);
      if (!o || *o != x) return false;
      chain.push_back(m_at);
      y = m->outputs[0];
    }
    // Times a weight of the normalized dims' shape. The normalized shape:
    // x's trailing dims, else the weight's.
    Value weight = None{};
    TensorRef out = y;
    std::optional<Shape> normalized;
    if (xs) normalized = Shape(xs->end() - long(k_dims), xs->end());
    // Views to y's own shape on the way (a Cast to the dtype it has, which
    // transformers' RMS norms write before the weight: hidden.to(dtype))
    // are stepped over.
    int w_at = sole_user(g, y);
    TensorRef yv = y;
    std::vector<int> same_views;
    const std::optional<Shape> ys = g.known_shape(y);
    for (const ir::Node* v = live_node(g, w_at, "aten.view.default");
         v && ys && v->args.size() == 2 && v->args[1].is_int_list() && std::get<IntList>(v->args[1].v) == *ys;
         v = live_node(g, w_at, "aten.view.default")) {
      same_views.push_back(w_at);
      yv = v->outputs[0];
      w_at = sole_user(g, yv);
    }
    if (const ir::Node* m = live_node(g, w_at, "aten.mul.Tensor")) {
      const std::optional<TensorRef> w = other_operand(*m, yv);
      const std::optional<Shape> ws = w ? g.known_shape(*w) : std::nullopt;
      const int w_made = w ? g.producer(*w) : -1;
      if (w && ws && ws->size() == k_dims && (!normalized || *ws == *normalized) && w_made < chain.back()) {
        chain.insert(chain.end(), same_views.begin(), same_views.end());
        chain.push_back(w_at);
        weight = *w;
        out = m->outputs[0];
        normalized = *ws;
      }
    }
    if (!normalized) return false;
    // x must exist where the fused node goes (the last node's place): it
    // does, the chain reads it. The fused node.
    ir::Node n;
    n.op = "aten.rms_norm.default";
    n.args = {x, IntList(normalized->begin(), normalized->end()), weight, *eps};
    n.outputs = {out};
    const ir::Node& last = g.nodes()[size_t(chain.back())];
    n.label = last.label.empty() ? name() : last.label;
    n.origin = last.origin;
    for (int k : chain) n.unfused.push_back(g.nodes()[size_t(k)]);
    for (size_t k = 0; k + 1 < chain.size(); ++k) g.nodes()[size_t(chain[k])].dead = true;
    g.replace_node(chain.back(), std::move(n));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_rms_norm() { return std::make_unique<FuseRmsNorm>(); }

}  // namespace wgnn::passes

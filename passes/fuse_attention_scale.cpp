// A constant scalar factor on attention's q or k, read by the attention
// alone: wgnn.attention(q * c, k, v, mask, scale, ...) ->
// wgnn.attention(q, k, v, mask, scale * c, ...) (the same for k), as the
// scores are linear in each. Whisper's and BART's attention (transformers)
// scale q_proj's output before the head split, so the factor sits between
// the product and the views the attention reads; without it the product's
// result goes to the attention directly (and may share one product with k
// and v: fuse_qkv_projection). The views stay: an elementwise product by
// one value keeps q's element order.
#include <cmath>

#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FuseAttentionScale final : public Pass {
 public:
  const char* name() const override { return "fuse_attention_scale"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (g.nodes()[i].dead || g.nodes()[i].op != "wgnn.attention.default" || g.nodes()[i].args.size() != 11) {
        continue;
      }
      for (size_t k = 0; k < 2; ++k) {  // q, k
        ir::Node& at = g.nodes()[i];
        if (!at.args[k].is_tensor() || !(at.args[4].is_double() || at.args[4].is_int())) continue;
        const TensorRef x = at.args[k].tensor();
        size_t uses = 0;
        for (const Value& v : at.args) uses += v.is_tensor() && v.tensor() == x;
        const int p = g.producer(x);
        if (p < 0 || uses != 1 || sole_user(g, x) != int(i)) continue;
        const ir::Node& mul = g.nodes()[size_t(p)];
        if (mul.op != "aten.mul.Tensor" || mul.args.size() != 2 || !mul.args[0].is_tensor() ||
            !mul.args[1].is_tensor() || mul.outputs.size() != 1) {
          continue;
        }
        const TensorRef a = mul.args[0].tensor(), b = mul.args[1].tensor();
        const std::optional<double> ca = scalar_value(g, a), cb = scalar_value(g, b);
        if (ca.has_value() == cb.has_value()) continue;  // one factor, one tensor
        const double c = ca ? *ca : *cb;
        const TensorRef t = ca ? b : a;
        // The factor broadcasts to no more elements than t has, and t keeps
        // the dtype of the product (q, k and v share one).
        const std::optional<Shape> ts = g.known_shape(t), xs = g.known_shape(x);
        if (!ts || !xs || numel(*ts) != numel(*xs) || !std::isfinite(c)) continue;
        if (g.value(t).kind != ir::ValueKind::Result && g.value(t).dtype != g.value(x).dtype) continue;
        const double scale = at.args[4].is_double() ? std::get<double>(at.args[4].v)
                                                    : double(std::get<int64_t>(at.args[4].v));
        ir::Node n = at;
        n.args[k] = t;
        n.args[4] = scale * c;
        // The chain as it was, for a plan whose dtypes the op rejects
        // (with its own chain, where fuse_attention made it).
        n.unfused = {mul, at};
        if (n.label.empty()) n.label = name();
        g.nodes()[size_t(p)].dead = true;
        g.replace_node(int(i), std::move(n));
        ++fused;
      }
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_attention_scale() { return std::make_unique<FuseAttentionScale>(); }

}  // namespace wgnn::passes

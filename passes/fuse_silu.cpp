// SiLU as exporters write it (transformers' nn.SiLU / F.silu traced:
// x * sigmoid(x), the product in either order) -> one aten.silu.default,
// where the sigmoid is read by the product alone. fuse_silu_mul then makes
// SwiGLU's silu(x @ gate) * (x @ up) one wgnn.silu_mul; a SiLU left alone
// fuse_matmul_activation may move into its product's epilogue.
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FuseSilu final : public Pass {
 public:
  const char* name() const override { return "fuse_silu"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& m = g.nodes()[i];
      if (m.dead || m.op != "aten.mul.Tensor" || m.args.size() != 2 || m.outputs.size() != 1 || !m.args[0].is_tensor() ||
          !m.args[1].is_tensor() || !m.unfused.empty()) {
        continue;
      }
      for (int side = 0; side < 2; ++side) {
        const TensorRef s = m.args[size_t(side)].tensor(), x = m.args[size_t(1 - side)].tensor();
        const int p = g.producer(s);
        if (p < 0 || sole_user(g, s) != int(i)) continue;
        const ir::Node& sig = g.nodes()[size_t(p)];
        if (sig.dead || sig.op != "aten.sigmoid.default" || sig.args.size() != 1 || !sig.args[0].is_tensor() ||
            sig.args[0].tensor() != x || !sig.unfused.empty()) {
          continue;
        }
        ir::Node n;
        n.op = "aten.silu.default";
        n.args = {x};
        n.outputs = m.outputs;
        n.label = m.label.empty() ? name() : m.label;
        n.origin = m.origin;
        n.unfused = {sig, m};
        g.nodes()[size_t(p)].dead = true;
        g.replace_node(int(i), std::move(n));
        ++fused;
        break;
      }
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_silu() { return std::make_unique<FuseSilu>(); }

}  // namespace wgnn::passes

// SwiGLU's gate: silu(a) * b (the product in either order), the SiLU read
// by the product alone -> wgnn.silu_mul.default(a, b), one elementwise
// dispatch. Where a and b are the gate and up products of one input row (a
// decoder's step), fuse_row_products then makes them one product whose
// column blocks this reads: the gate, the up product and the multiply in
// two dispatches instead of three. With more rows, the two products and
// this are three dispatches, as the gate product with the SiLU in its
// epilogue, the up product and the multiply were.
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FuseSiluMul final : public Pass {
 public:
  const char* name() const override { return "fuse_silu_mul"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& m = g.nodes()[i];
      if (m.dead || m.op != "aten.mul.Tensor" || m.args.size() != 2 || m.outputs.size() != 1 || !m.args[0].is_tensor() ||
          !m.args[1].is_tensor() || !m.unfused.empty()) {
        continue;
      }
      for (int side = 0; side < 2; ++side) {
        const TensorRef s = m.args[size_t(side)].tensor(), b = m.args[size_t(1 - side)].tensor();
        const int p = g.producer(s);
        if (p < 0 || s == b || sole_user(g, s) != int(i)) continue;
        const ir::Node& silu = g.nodes()[size_t(p)];
        if (silu.dead || silu.op != "aten.silu.default" || silu.args.size() != 1 || !silu.args[0].is_tensor() ||
            silu.outputs.size() != 1) {
          continue;
        }
        // The same shape on both sides (SwiGLU's): no broadcast to plan.
        const std::optional<Shape> as = g.known_shape(silu.args[0].tensor()), bs = g.known_shape(b);
        if (!as || !bs || *as != *bs) continue;
        ir::Node n;
        n.op = "wgnn.silu_mul.default";
        n.args = {silu.args[0], b};
        n.outputs = m.outputs;
        n.label = m.label.empty() ? name() : m.label;
        n.origin = m.origin;
        n.unfused = {silu, m};
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

std::unique_ptr<Pass> fuse_silu_mul() { return std::make_unique<FuseSiluMul>(); }

}  // namespace wgnn::passes

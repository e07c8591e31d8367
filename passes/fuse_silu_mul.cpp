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

// A step's silu_mul over the gate and up products made one
// (fuse_row_products): wgnn.silu_mul(slice(p, -1, 0, F), slice(p, -1, F, 2 F))
// with p = wgnn.matmul_add(x, w [K, 2 F], bias) read by the two slices
// alone -> wgnn.matmul_silu_mul(x, w, bias): the product's epilogue takes
// the gate, one dispatch instead of two. Keeps the chain, which a plan of
// more than 8 rows lowers (the op takes a decoder's step only).
class FuseMatmulSiluMul final : public Pass {
 public:
  const char* name() const override { return "fuse_matmul_silu_mul"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      // (fuse_silu_mul's node, with the chain it replaced.)
      const ir::Node* m = &g.nodes()[i];
      if (m->dead || m->op != "wgnn.silu_mul.default" || m->outputs.size() != 1 || m->args.size() != 2 ||
          !m->args[0].is_tensor() || !m->args[1].is_tensor()) {
        continue;
      }
      const int ga = g.producer(m->args[0].tensor()), ua = g.producer(m->args[1].tensor());
      const ir::Node* gs = live_node(g, ga, "aten.slice.Tensor");
      const ir::Node* us = live_node(g, ua, "aten.slice.Tensor");
      if (!gs || !us || gs->args.size() != 5 || us->args.size() != 5 || !gs->args[0].is_tensor() ||
          !us->args[0].is_tensor() || gs->args[0].tensor() != us->args[0].tensor()) {
        continue;
      }
      const TensorRef p = gs->args[0].tensor();
      const int pi = g.producer(p);
      const ir::Node* prod = live_node(g, pi, "wgnn.matmul_add.default");
      if (!prod || prod->args.size() != 7 || !prod->args[0].is_tensor() || !prod->args[1].is_tensor() ||
          !is_number(prod->args[3], 1) || !std::holds_alternative<std::string>(prod->args[4].v) ||
          std::get<std::string>(prod->args[4].v) != "none" || !prod->args[5].is_bool() || !prod->args[6].is_bool() ||
          std::get<bool>(prod->args[5].v) || std::get<bool>(prod->args[6].v)) {
        continue;
      }
      const std::vector<int> users = g.users(p);
      if (g.is_output(p) || users.size() != 2 || !((users[0] == ga && users[1] == ua) || (users[0] == ua && users[1] == ga))) {
        continue;
      }
      const std::optional<Shape> ws = g.known_shape(prod->args[1].tensor()), xs = g.known_shape(prod->args[0].tensor());
      if (!ws || !xs || ws->size() != 2 || (*ws)[1] % 2 != 0 || xs->empty() || xs->back() != (*ws)[0]) continue;
      const int64_t F = (*ws)[1] / 2;
      auto slice_is = [&](const ir::Node& s, int64_t lo, int64_t hi) {
        return (is_number(s.args[1], -1) || is_number(s.args[1], double(xs->size() - 1))) && is_number(s.args[2], double(lo)) &&
               is_number(s.args[3], double(hi)) && is_number(s.args[4], 1);
      };
      if (!slice_is(*gs, 0, F) || !slice_is(*us, F, 2 * F)) continue;
      if (numel(*xs) / xs->back() > 8) continue;  // the op takes a decoder's step
      const Value bias = prod->args[2];
      if (!bias.is_none()) {
        const std::optional<Shape> bs = bias.is_tensor() ? g.known_shape(bias.tensor()) : std::nullopt;
        if (!bs || *bs != Shape{2 * F}) continue;
      }
      ir::Node n;
      n.op = "wgnn.matmul_silu_mul.default";
      n.args = {prod->args[0], prod->args[1], bias};
      n.outputs = m->outputs;
      n.label = name();
      n.origin = m->origin;
      n.unfused = {*prod, *gs, *us, *m};
      g.nodes()[size_t(pi)].dead = true;
      g.nodes()[size_t(ga)].dead = true;
      g.nodes()[size_t(ua)].dead = true;
      g.replace_node(int(i), std::move(n));
      ++fused;
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_silu_mul() { return std::make_unique<FuseSiluMul>(); }
std::unique_ptr<Pass> fuse_matmul_silu_mul() { return std::make_unique<FuseMatmulSiluMul>(); }

}  // namespace wgnn::passes

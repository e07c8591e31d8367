// A matrix product whose result only an add reads, with another value of
// the sum's shape -> one wgnn.matmul_add.default adding that value last in
// its epilogue (a transformer's residual, x + fc2(h), where no layer norm
// takes the add: fuse_add_layer_norm runs first):
//   aten.add(p, r) or aten.add(r, p), alpha 1, p = linear / matmul / mm /
//   wgnn.matmul_add without a residual -> matmul_add(..., residual r)
// Applies where the IR knows the shapes of p, r and the sum, all equal (no
// broadcast). The op adds the residual in its epilogue on the regular
// kernel, and by a separate add elsewhere.
#include "passes/matmul_args.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FuseMatmulResidual final : public Pass {
 public:
  const char* name() const override { return "fuse_matmul_residual"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& add = g.nodes()[i];
      if (add.dead || !is_plain_add(add) || add.outputs.size() != 1) continue;
      const auto sum_shape = g.known_shape(add.outputs[0]);
      if (!sum_shape || sum_shape->size() < 2) continue;
      for (size_t k = 0; k < 2; ++k) {
        const TensorRef p = add.args[k].tensor(), r = add.args[1 - k].tensor();
        if (p == r) continue;
        const int ip = g.producer(p);
        if (ip < 0 || sole_user(g, p) != int(i) || g.nodes()[size_t(ip)].outputs.size() != 1) continue;
        const ir::Node& prod = g.nodes()[size_t(ip)];
        auto args = as_matmul_add(prod, false);
        if (!args) continue;
        const auto ps = g.known_shape(p), rs = g.known_shape(r);
        if (!ps || !rs || *ps != *sum_shape || *rs != *sum_shape) continue;
        args->push_back(r);
        ir::Node n;
        n.op = "wgnn.matmul_add.default";
        n.args = std::move(*args);
        n.outputs = add.outputs;
        n.label = prod.label.empty() ? name() : prod.label;
        n.origin = prod.origin;
        n.unfused = {prod, add};
        g.nodes()[size_t(ip)].dead = true;
        g.replace_node(int(i), std::move(n));
        ++fused;
        break;
      }
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_matmul_residual() { return std::make_unique<FuseMatmulResidual>(); }

}  // namespace wgnn::passes

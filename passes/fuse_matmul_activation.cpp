// A matrix product whose result only an activation reads -> one
// wgnn.matmul_add.default with the activation in its epilogue:
//   aten.linear(x, w, b?)   -> matmul_add(x, w, b, 1, act, False, True)
//   aten.matmul / aten.mm   -> matmul_add(x, y, None, 1, act)
//   wgnn.matmul_add (no act) -> the same with act
// followed by aten.relu, aten.clamp (finite bounds), aten.gelu (both
// forms) or aten.silu. matmul_add takes operands of at least 2-D: a plan whose shapes
// are not (a 1-D linear input, a vector weight) runs the chain unfused.
#include "passes/activation_of.h"
#include "passes/matmul_args.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

constexpr const char* kOp = "wgnn.matmul_add.default";

class FuseMatmulActivation final : public Pass {
 public:
  const char* name() const override { return "fuse_matmul_activation"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const auto site = activation_site(g, i, true);
      if (!site) continue;
      const ir::Node& act_node = g.nodes()[i];
      const ActivationSpec& act = site->act;
      const int p = site->producer;
      if (g.nodes()[size_t(p)].outputs.size() != 1) continue;
      const ir::Node& prod = g.nodes()[size_t(p)];
      auto args = as_matmul_add(prod, true);
      if (!args) continue;
      ops::NamedArgs(kOp, *args).set_activation(act);
      ir::Node n;
      n.op = kOp;
      n.args = std::move(*args);
      n.outputs = act_node.outputs;
      n.label = prod.label.empty() ? name() : prod.label;
      n.origin = prod.origin;
      n.unfused = {prod, act_node};
      g.nodes()[size_t(p)].dead = true;
      g.replace_node(int(i), std::move(n));
      ++fused;
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_matmul_activation() { return std::make_unique<FuseMatmulActivation>(); }

}  // namespace wgnn::passes

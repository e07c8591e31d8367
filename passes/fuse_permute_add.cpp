// A sum one of whose operands is a permute read by the sum alone (ConvNeXt's
// residual add after its MLP's result goes back to channels first):
//   p = aten.permute(y, dims);  z = aten.add(x, p) or aten.add(p, x), alpha 1
// -> z = wgnn.add_permuted(x, y, dims), which reads y through its strides in
// the permuted order: one copy of y fewer, and one dispatch. Applies where
// the IR knows the shapes and p has the sum's shape (x may broadcast).
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FusePermuteAdd final : public Pass {
 public:
  const char* name() const override { return "fuse_permute_add"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& add = g.nodes()[i];
      if (add.dead || !is_plain_add(add) || add.outputs.size() != 1) continue;
      const auto zs = g.known_shape(add.outputs[0]);
      if (!zs) continue;
      for (size_t k = 0; k < 2; ++k) {
        const TensorRef p = add.args[k].tensor(), x = add.args[1 - k].tensor();
        if (p == x) continue;
        const int ip = g.producer(p);
        if (ip < 0 || sole_user(g, p) != int(i)) continue;
        const ir::Node& perm = g.nodes()[size_t(ip)];
        if (perm.op != "aten.permute.default" || perm.args.size() != 2 || !perm.args[0].is_tensor() ||
            !perm.args[1].is_int_list() || perm.outputs.size() != 1) {
          continue;
        }
        const auto ps = g.known_shape(p);
        if (!ps || *ps != *zs) continue;
        ir::Node n;
        n.op = "wgnn.add_permuted.default";
        n.args = {x, perm.args[0], perm.args[1]};
        n.outputs = add.outputs;
        n.origin = add.origin;
        n.label = add.label.empty() ? name() : add.label;
        n.unfused = {perm, add};
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

std::unique_ptr<Pass> fuse_permute_add() { return std::make_unique<FusePermuteAdd>(); }

}  // namespace wgnn::passes

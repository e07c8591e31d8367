// Dead code: nodes whose results no live node reads and the model does not
// return. Nodes that write an argument in place (ir::mutates) are kept.
#include <unordered_set>

#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class DeadCode final : public Pass {
 public:
  const char* name() const override { return "dead_code"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    std::unordered_set<int> needed;
    for (TensorRef o : g.outputs()) needed.insert(o.id);
    size_t removed = 0;
    auto& nodes = g.nodes();
    for (size_t i = nodes.size(); i-- > 0;) {
      ir::Node& n = nodes[i];
      if (n.dead) continue;
      bool live = ir::mutates(n.op);
      for (TensorRef o : n.outputs) live = live || needed.count(o.id);
      if (!live) {
        n.dead = true;
        ++removed;
        continue;
      }
      for (TensorRef t : ir::tensor_args(n.args)) needed.insert(t.id);
      for (const ir::Node& u : n.unfused) {
        for (TensorRef t : ir::tensor_args(u.args)) needed.insert(t.id);
      }
    }
    return removed;
  }
};

}  // namespace

std::unique_ptr<Pass> dead_code() { return std::make_unique<DeadCode>(); }

}  // namespace wgnn::passes

// A linear layer or wgnn.matmul_add whose result only a wgnn.add_layer_norm reads (a
// transformer's output projection or second feed-forward product, then the
// residual add and the norm) -> wgnn.matmul_add_layer_norm.default. Where
// the product is split along K (few rows: a decoder's 32 tokens, DeiT-T's
// 197), the norm adds the parts as it loads its rows and the sum pass goes
// (ops/norm.cpp); elsewhere the op records the two as before. Products with
// a factor, an activation, a transposed left operand or a residual of
// their own stay as they are.
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

// A linear layer (aten.linear: weight [N, K], read transposed) or a
// wgnn.matmul_add with no factor, activation, transposed left operand or
// residual.
bool plain_product(const ir::Node& mm) {
  if (mm.op == "aten.linear.default") return mm.outputs.size() == 1 && mm.args.size() >= 2 && mm.args.size() <= 3;
  if (mm.op != "wgnn.matmul_add.default" || mm.outputs.size() != 1 || mm.args.size() < 2 || mm.args.size() > 10)
    return false;
  const Value none = None{};
  const Value alpha = arg_or(mm, 3, Value(1.0));
  const Value act = arg_or(mm, 4, Value(std::string("none")));
  const Value trans_self = arg_or(mm, 5, Value(false));
  return is_number(alpha, 1.0) && std::holds_alternative<std::string>(act.v) &&
         std::get<std::string>(act.v) == "none" && trans_self.is_bool() && !std::get<bool>(trans_self.v) &&
         arg_or(mm, 9, none).is_none();
}

class FuseMatmulLayerNorm final : public Pass {
 public:
  const char* name() const override { return "fuse_matmul_layer_norm"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& ln = g.nodes()[i];
      if (ln.dead || ln.op != "wgnn.add_layer_norm.default" || ln.outputs.size() != 4 || ln.args.size() != 6) continue;
      if (!ln.args[0].is_tensor() || !ln.args[1].is_tensor()) continue;
      for (size_t k : {0, 1}) {
        const TensorRef y = ln.args[k].tensor();
        const int p = g.producer(y);
        if (p < 0 || sole_user(g, y) != int(i) || !plain_product(g.nodes()[size_t(p)])) continue;
        const ir::Node& mm = g.nodes()[size_t(p)];
        const Value none = None{};
        ir::Node f;
        f.op = "wgnn.matmul_add_layer_norm.default";
        f.args = {mm.args[0],
                  mm.args[1],
                  arg_or(mm, 2, none),
                  Value(1.0),
                  Value(std::string("none")),
                  Value(false),
                  mm.op == "aten.linear.default" ? Value(true) : arg_or(mm, 6, Value(false)),
                  Value(0.0),
                  Value(0.0),
                  ln.args[1 - k],
                  ln.args[2],
                  ln.args[3],
                  ln.args[4],
                  ln.args[5]};
        f.outputs = ln.outputs;
        f.label = ln.label.empty() ? name() : ln.label;
        f.origin = ln.origin;
        f.unfused = {mm, ln};
        g.nodes()[size_t(p)].dead = true;
        g.replace_node(int(i), std::move(f));
        ++fused;
        break;
      }
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_matmul_layer_norm() { return std::make_unique<FuseMatmulLayerNorm>(); }

}  // namespace wgnn::passes

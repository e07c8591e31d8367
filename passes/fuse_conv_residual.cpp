// A convolution whose result only an add reads, with another value (a
// residual block's sum) -> one wgnn.convolution_padded.default adding that
// value in its epilogue (its `residual`, before the activation that
// fuse_conv_activation may fuse after it):
//   aten.add.Tensor(conv, r) or aten.add.Tensor(r, conv), alpha 1,
// conv an aten.convolution (not transposed) or a wgnn.convolution_padded
// with no activation and no residual. The op adds a residual of another
// shape than its result's (broadcasting) by a separate add.
#include "ops/schema.h"
#include "passes/conv_args.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FuseConvResidual final : public Pass {
 public:
  const char* name() const override { return "fuse_conv_residual"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& add = g.nodes()[i];
      if (add.dead || !is_plain_add(add)) continue;
      for (int k = 0; k < 2; ++k) {
        const TensorRef c = add.args[size_t(k)].tensor(), r = add.args[size_t(1 - k)].tensor();
        const int p = g.producer(c);
        if (c.id == r.id || p < 0 || sole_user(g, c) != int(i) || g.nodes()[size_t(p)].outputs.size() != 1) continue;
        const ir::Node& conv = g.nodes()[size_t(p)];
        auto args = as_padded(g, conv);
        if (!args) continue;
        ops::NamedArgs named("wgnn.convolution_padded.default", *args);
        if (!named.get("residual").is_none()) continue;
        // An epilogue argument given as None takes its default.
        for (const char* k : {"act", "lo", "hi", "affine_rounded"}) named.default_if_none(k);
        named.set("residual", r);
        ir::Node n;
        n.op = "wgnn.convolution_padded.default";
        n.args = std::move(*args);
        n.outputs = add.outputs;
        n.label = conv.label.empty() ? name() : conv.label;
        n.origin = conv.origin;
        n.unfused = {conv, add};
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

std::unique_ptr<Pass> fuse_conv_residual() { return std::make_unique<FuseConvResidual>(); }

}  // namespace wgnn::passes

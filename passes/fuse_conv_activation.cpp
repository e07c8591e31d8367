// A convolution whose result only an activation reads -> one
// wgnn.convolution_padded.default applying it in its epilogue:
// aten.convolution (not transposed) or wgnn.convolution_padded with no
// activation, followed by aten.relu, aten.clamp (finite bounds) or
// aten.gelu (either form: the Whisper encoder's 1-D convolutions).
// aten.convolution's symmetric padding becomes the begin and end pads.
#include "passes/activation_of.h"
#include "passes/conv_args.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

constexpr const char* kOp = "wgnn.convolution_padded.default";

class FuseConvActivation final : public Pass {
 public:
  const char* name() const override { return "fuse_conv_activation"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const auto site = activation_site(g, i);
      if (!site) continue;
      const ir::Node& act_node = g.nodes()[i];
      const ActivationSpec& act = site->act;
      const int p = site->producer;
      if (g.nodes()[size_t(p)].outputs.size() != 1) continue;
      const ir::Node& conv = g.nodes()[size_t(p)];
      auto args = as_padded(g, conv);
      if (!args) continue;
      ops::NamedArgs(kOp, *args).set_activation(act);
      ir::Node n;
      n.op = kOp;
      n.args = std::move(*args);
      n.outputs = act_node.outputs;
      n.label = conv.label.empty() ? name() : conv.label;
      n.origin = conv.origin;
      n.unfused = {conv, act_node};
      g.nodes()[size_t(p)].dead = true;
      g.replace_node(int(i), std::move(n));
      ++fused;
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_conv_activation() { return std::make_unique<FuseConvActivation>(); }

}  // namespace wgnn::passes

// An inference norm whose result only an activation reads -> the norm
// applying it as it stores its result (wgnn.batch_norm_activation,
// wgnn.instance_norm_activation): aten._native_batch_norm_legit_no_training
// (its two statistics unread) or aten.instance_norm, then aten.relu,
// aten.clamp (finite bounds) or aten.gelu. An activation of a concatenation
// whose every part is such a norm, read by the concatenation alone, goes
// into each of them and the concatenation takes the activation's place:
// MODNet's IBNorm (batch norm on half of the channels, instance norm on the
// other half, concatenated, then ReLU) runs as two norms and no ReLU.
#include "passes/activation_of.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

// Node `p` as the fused norm applying `act`, or nullopt when it is not a
// norm this pass takes. Arguments the node leaves out take ATen's defaults.
std::optional<ir::Node> fused_norm(const ir::Graph& g, int p, const ActivationSpec& act) {
  if (p < 0) return std::nullopt;
  const ir::Node& n = g.nodes()[size_t(p)];
  ir::Node f;
  if (n.op == "aten._native_batch_norm_legit_no_training.default") {
    if (n.args.size() < 5 || n.args.size() > 7 || n.outputs.size() != 3) return std::nullopt;
    for (size_t k : {1, 2}) {
      if (!g.users(n.outputs[k]).empty() || g.is_output(n.outputs[k])) return std::nullopt;
    }
    f.op = "wgnn.batch_norm_activation.default";
    f.args = n.args;
  } else if (n.op == "aten.instance_norm.default") {
    if (n.args.size() != 9 || n.outputs.size() != 1) return std::nullopt;
    f.op = "wgnn.instance_norm_activation.default";
    f.args = n.args;
  } else {
    return std::nullopt;
  }
  ops::NamedArgs named(f.op, f.args);
  named.set_activation(act);
  if (f.op == "wgnn.batch_norm_activation.default") {
    for (const char* k : {"momentum", "eps"}) named.default_if_none(k);  // ATen's defaults
  }
  f.outputs = {n.outputs[0]};
  f.label = n.label;
  f.origin = n.origin;
  return f;
}

class FuseNormActivation final : public Pass {
 public:
  const char* name() const override { return "fuse_norm_activation"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const auto site = activation_site(g, i);
      if (!site) continue;
      const ir::Node& act_node = g.nodes()[i];
      const ActivationSpec* act = &site->act;
      const int p = site->producer;
      if (auto f = fused_norm(g, p, *act)) {  // norm -> activation
        f->outputs = act_node.outputs;
        f->unfused = {g.nodes()[size_t(p)], act_node};
        g.nodes()[size_t(p)].dead = true;
        g.replace_node(int(i), std::move(*f));
        ++fused;
        continue;
      }
      // cat(norm, norm, ...) -> activation
      const ir::Node& cat = g.nodes()[size_t(p)];
      if (cat.op != "aten.cat.default" || cat.outputs.size() != 1 || cat.args.empty() || !cat.args[0].is_list()) {
        continue;
      }
      std::vector<std::pair<int, ir::Node>> parts;
      for (const Value& v : cat.args[0].list()) {
        if (!v.is_tensor() || sole_user(g, v.tensor()) != p) break;
        const int q = g.producer(v.tensor());
        auto f = fused_norm(g, q, *act);
        if (!f || g.nodes()[size_t(q)].outputs[0] != v.tensor()) break;
        parts.emplace_back(q, std::move(*f));
      }
      if (parts.empty() || parts.size() != cat.args[0].list().size()) continue;
      // Each part: its norm then the activation, as it was (the fallback
      // when a plan does not take the fused op).
      const ir::Node act_copy = act_node;
      ir::Node joined = cat;
      joined.outputs = act_copy.outputs;
      joined.unfused.clear();
      g.nodes()[size_t(p)].dead = true;
      g.replace_node(int(i), std::move(joined));
      for (auto& [q, f] : parts) {
        ir::Node norm = g.nodes()[size_t(q)];
        ir::Node part_act = act_copy;
        const TensorRef mid = g.new_result();
        norm.outputs[0] = mid;
        part_act.args[0] = mid;
        part_act.outputs = {f.outputs[0]};
        f.unfused = {std::move(norm), std::move(part_act)};
        g.replace_node(q, std::move(f));
      }
      ++fused;
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_norm_activation() { return std::make_unique<FuseNormActivation>(); }

}  // namespace wgnn::passes

// aten.add.Tensor(a, b) whose sum an aten.native_layer_norm normalizes (the
// residual add before a transformer's norm; others may read the sum too)
// -> wgnn.add_layer_norm.default, which writes the norm's three results and
// the sum in one dispatch; likewise an aten.rms_norm -> wgnn.add_rms_norm
// (out and sum). The fused node takes the add's place, so the
// norm's weight and bias must be known there. The op takes a and b of one
// shape and dtype: an operand with the sum's elements in another shape is
// viewed in the sum's; a plan where they broadcast runs the two nodes.
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FuseAddLayerNorm final : public Pass {
 public:
  const char* name() const override { return "fuse_add_layer_norm"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& ln = g.nodes()[i];
      const bool rms = ln.op == "aten.rms_norm.default";
      if (ln.dead || !(ln.op == "aten.native_layer_norm.default" || rms) || ln.outputs.size() != (rms ? 1u : 3u)) {
        continue;
      }
      if (ln.args.size() < 2 || ln.args.size() > (rms ? 4u : 5u) || !ln.args[0].is_tensor()) continue;
      const TensorRef sum = ln.args[0].tensor();
      const int p = g.producer(sum);
      if (p < 0) continue;
      const ir::Node& add = g.nodes()[size_t(p)];
      if (!is_plain_add(add)) continue;
      // The norm reads its own sum once, and its weight and bias exist at the add.
      bool ready = true;
      int reads = 0;
      for (size_t k = 0; k < ln.args.size(); ++k) {
        for (TensorRef t : ir::tensor_args({ln.args[k]})) {
          if (t == sum) {
            ready = ready && k == 0;
            ++reads;
          } else {
            const int q = g.producer(t);
            ready = ready && q < p;
          }
        }
      }
      if (!ready || reads != 1) continue;
      const ir::Node add_node = add, ln_node = ln;  // copies: a node may go in before them
      int at = p;
      // An operand of the sum's elements in another shape ([T, C] beside
      // [1, T, C]: a linear layer's result before its view back) is seen
      // in the sum's shape: a view, which records nothing.
      Value operand[2] = {add_node.args[0], add_node.args[1]};
      const std::optional<Shape> ss = g.known_shape(sum);
      for (Value& v : operand) {
        const std::optional<Shape> vs = g.known_shape(v.tensor());
        if (!ss || !vs || *vs == *ss || numel(*vs) != numel(*ss) || vs->empty() || ss->empty() ||
            vs->back() != ss->back()) {
          continue;
        }
        ir::Node view;
        view.op = "aten.view.default";
        view.args = {v, IntList(ss->begin(), ss->end())};
        view.outputs = {g.new_result()};
        view.label = name();
        view.origin = add_node.origin;
        g.set_seen_shape(view.outputs[0], *ss);
        if (const std::optional<DType> d = g.known_dtype(v.tensor())) g.set_seen_dtype(view.outputs[0], *d);
        v = view.outputs[0];
        g.insert_node(at++, std::move(view));
      }
      const Value none = None{};
      ir::Node n;
      if (rms) {
        n.op = "wgnn.add_rms_norm.default";
        n.args = {operand[0], operand[1], ln_node.args[1], arg_or(ln_node, 2, none), arg_or(ln_node, 3, none)};
        n.outputs = {ln_node.outputs[0], sum};
      } else {
        n.op = "wgnn.add_layer_norm.default";
        n.args = {operand[0], operand[1], ln_node.args[1], arg_or(ln_node, 2, none), arg_or(ln_node, 3, none),
                  arg_or(ln_node, 4, Value(1e-5))};
        n.outputs = {ln_node.outputs[0], ln_node.outputs[1], ln_node.outputs[2], sum};
      }
      n.label = ln_node.label.empty() ? name() : ln_node.label;
      n.origin = ln_node.origin;
      n.unfused = {add_node, ln_node};
      g.nodes()[i + size_t(at - p)].dead = true;
      g.replace_node(at, std::move(n));
      i += size_t(at - p);
      ++fused;
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_add_layer_norm() { return std::make_unique<FuseAddLayerNorm>(); }

}  // namespace wgnn::passes

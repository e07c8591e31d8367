// A convolution whose result only an activation reads -> one
// wgnn.convolution_padded.default applying it in its epilogue:
// aten.convolution (not transposed) or wgnn.convolution_padded with no
// activation, followed by aten.relu or aten.clamp (finite bounds).
// aten.convolution's symmetric padding becomes the begin and end pads.
#include "passes/activation_of.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

// The spatial dims of a convolution: its weight's rank - 2, where the IR
// knows the weight's shape (a constant or an input).
int spatial_dims(const ir::Graph& g, const Value& w) {
  if (!w.is_tensor()) return -1;
  const ir::ValueInfo& v = g.value(w.tensor());
  if (v.kind == ir::ValueKind::Result || v.shape.size() < 3) return -1;
  return int(v.shape.size()) - 2;
}

// aten.convolution's list argument i (one value, d values, or None: def
// for each) as d values; nullopt when it is something else.
std::optional<IntList> spatial_list(const ir::Node& n, size_t i, int d, int64_t def) {
  if (i >= n.args.size() || n.args[i].is_none()) return IntList(size_t(d), def);
  if (!n.args[i].is_int_list()) return std::nullopt;
  const IntList& v = std::get<IntList>(n.args[i].v);
  if (v.size() == 1) return IntList(size_t(d), v[0]);
  if (v.size() != size_t(d)) return std::nullopt;
  return v;
}

std::optional<ValueList> as_padded(const ir::Graph& g, const ir::Node& c) {
  const Value none = None{};
  if (c.op == "wgnn.convolution_padded.default") {
    if (c.args.size() < 2 || c.args.size() > 14) return std::nullopt;
    const Value& act = arg_or(c, 9, Value(std::string("none")));
    if (!std::holds_alternative<std::string>(act.v) || std::get<std::string>(act.v) != "none") return std::nullopt;
    const Value& tr = arg_or(c, 6, Value(false));
    if (!tr.is_bool() || std::get<bool>(tr.v)) return std::nullopt;
    ValueList a = c.args;
    a.resize(std::max<size_t>(a.size(), 12));
    for (size_t i = c.args.size(); i < 12; ++i) a[i] = none;
    if (a[10].is_none()) a[10] = 0.0;
    if (a[11].is_none()) a[11] = 0.0;
    if (a[6].is_none()) a[6] = false;
    if (a[8].is_none()) a[8] = int64_t(1);
    return a;
  }
  if (c.op != "aten.convolution.default" || c.args.size() < 2 || c.args.size() > 9) return std::nullopt;
  const Value& tr = arg_or(c, 6, Value(false));
  if (!tr.is_bool() || std::get<bool>(tr.v)) return std::nullopt;
  const int d = spatial_dims(g, c.args[1]);
  if (d < 1) return std::nullopt;
  const auto stride = spatial_list(c, 3, d, 1), pad = spatial_list(c, 4, d, 0), dil = spatial_list(c, 5, d, 1),
             out_pad = spatial_list(c, 7, d, 0);
  if (!stride || !pad || !dil || !out_pad) return std::nullopt;
  IntList pads = *pad;
  pads.insert(pads.end(), pad->begin(), pad->end());
  const Value& groups = arg_or(c, 8, Value(int64_t(1)));
  return ValueList{c.args[0], c.args[1], arg_or(c, 2, none), *stride, pads, *dil, false, *out_pad,
                   groups.is_none() ? Value(int64_t(1)) : groups};
}

class FuseConvActivation final : public Pass {
 public:
  const char* name() const override { return "fuse_conv_activation"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& act_node = g.nodes()[i];
      if (act_node.dead) continue;
      const auto act = activation_of(act_node, false);
      if (!act) continue;
      const TensorRef x = act_node.args[0].tensor();
      const int p = g.producer(x);
      if (p < 0 || sole_user(g, x) != int(i) || g.nodes()[size_t(p)].outputs.size() != 1) continue;
      const ir::Node& conv = g.nodes()[size_t(p)];
      auto args = as_padded(g, conv);
      if (!args) continue;
      args->resize(std::max<size_t>(args->size(), 12));
      (*args)[9] = act->act;
      (*args)[10] = act->lo;
      (*args)[11] = act->hi;
      ir::Node n;
      n.op = "wgnn.convolution_padded.default";
      n.args = std::move(*args);
      n.outputs = act_node.outputs;
      n.label = conv.label.empty() ? name() : conv.label;
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

// The views torch.export writes around row-wise ops, moved out of the way
// of the fusions (ExecuTorch programs, pte/, and any IR written that way):
//   - an activation of a view: the activation first, then the view
//     (gelu(view(linear(x))) -> view(gelu(linear(x))): the product's
//     epilogue may then take it);
//   - a linear layer of a view that keeps the last dim (x [1, T, K] seen as
//     [T, K]): the layer on x, then the view;
//   - a bmm of two views that merge the same leading dims ([B, H, M, K] seen
//     as [B*H, M, K]): aten.matmul of the views' inputs, then the view (so
//     fuse_matmul_add reads a transposed operand in place and takes a scale
//     into alpha);
//   - a view of a view: one view; a view to its input's own shape: none.
// Each rewrite needs the shapes the IR knows (inputs', constants' and
// seen_shape), and a view read by the rewritten node alone; it runs to a
// fixed point. Views record no dispatch, so nothing here adds work.
#include <numeric>

#include "passes/activation_of.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

const ir::Node* view_node(const ir::Graph& g, TensorRef v) {
  const int p = g.producer(v);
  if (p < 0) return nullptr;
  const ir::Node& n = g.nodes()[size_t(p)];
  if (n.dead || n.op != "aten.view.default" || n.outputs.size() != 1 || n.args.size() != 2 || !n.args[0].is_tensor() ||
      !n.args[1].is_int_list() || !n.unfused.empty()) {
    return nullptr;
  }
  return &n;
}

// Every tensor argument of n but the first is computed before node `at`.
bool rest_before(const ir::Graph& g, const ir::Node& n, int at) {
  for (size_t i = 1; i < n.args.size(); ++i) {
    for (TensorRef t : ir::tensor_args({n.args[i]})) {
      if (g.producer(t) >= at) return false;
    }
  }
  return true;
}

class SinkViews final : public Pass {
 public:
  const char* name() const override { return "sink_views"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t total = 0;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < g.nodes().size(); ++i) {
        if (g.nodes()[i].dead) continue;
        if (collapse(g, int(i)) || sink_row_op(g, int(i)) || bmm(g, int(i))) {
          changed = true;
          ++total;
        }
      }
    }
    return total;
  }

 private:
  // view(view(x)) -> view(x); view(x) of x's own shape -> x.
  static bool collapse(ir::Graph& g, int i) {
    const ir::Node& n = g.nodes()[size_t(i)];
    if (n.op != "aten.view.default" || !view_node(g, n.outputs.at(0))) return false;
    const TensorRef x = n.args[0].tensor();
    const auto xs = g.known_shape(x);
    const IntList& to = std::get<IntList>(n.args[1].v);
    if (xs && Shape(to.begin(), to.end()) == *xs && !g.is_output(n.outputs[0])) {
      g.replace_uses(n.outputs[0], x);
      g.nodes()[size_t(i)].dead = true;
      return true;
    }
    if (const ir::Node* inner = view_node(g, x)) {
      g.nodes()[size_t(i)].args[0] = inner->args[0];
      return true;
    }
    return false;
  }

  // u(view(x)) -> view(u(x)), u an activation or a linear layer that keeps
  // x's last dim.
  static bool sink_row_op(ir::Graph& g, int i) {
    const ir::Node& u = g.nodes()[size_t(i)];
    if (u.outputs.size() != 1 || u.args.empty() || !u.args[0].is_tensor() || !u.unfused.empty()) return false;
    const bool linear = u.op == "aten.linear.default";
    if (!linear && !activation_of(u, true, true)) return false;
    const TensorRef v = u.args[0].tensor();
    const ir::Node* view = view_node(g, v);
    if (!view || sole_user(g, v) != i) return false;
    const int at = g.producer(v);
    const TensorRef x = view->args[0].tensor();
    const auto xs = g.known_shape(x), vs = g.known_shape(v), us = g.known_shape(u.outputs[0]);
    if (!xs || !vs || !us || xs->empty() || vs->empty()) return false;
    if (linear && xs->back() != vs->back()) return false;
    if (!rest_before(g, u, at)) return false;
    // The op's result on x: x's shape (an activation), or x's dims with
    // the layer's output features.
    Shape ys = *xs;
    if (linear) ys.back() = us->back();
    const TensorRef y = g.new_result();
    ir::Node moved = u;
    moved.args[0] = x;
    moved.outputs = {y};
    ir::Node back;
    back.op = "aten.view.default";
    back.args = {y, IntList(us->begin(), us->end())};
    back.outputs = u.outputs;
    back.label = "sink_views";
    back.origin = u.origin;
    g.replace_node(at, std::move(moved));
    g.set_seen_shape(y, ys);
    g.replace_node(i, std::move(back));
    return true;
  }

  // bmm(view(a, [B, M, K]), view(b, [B, K, N])) with a [d.., M, K], b
  // [d.., K, N], prod(d) = B -> view(matmul(a, b), [B, M, N]).
  static bool bmm(ir::Graph& g, int i) {
    const ir::Node& n = g.nodes()[size_t(i)];
    if (n.op != "aten.bmm.default" || n.args.size() != 2 || n.outputs.size() != 1 || !n.args[0].is_tensor() ||
        !n.args[1].is_tensor() || !n.unfused.empty()) {
      return false;
    }
    const ir::Node* va = view_node(g, n.args[0].tensor());
    const ir::Node* vb = view_node(g, n.args[1].tensor());
    if (!va || !vb) return false;
    const TensorRef a = va->args[0].tensor(), b = vb->args[0].tensor();
    const auto as = g.known_shape(a), bs = g.known_shape(b), os = g.known_shape(n.outputs[0]);
    const auto a3 = g.known_shape(n.args[0].tensor()), b3 = g.known_shape(n.args[1].tensor());
    if (!as || !bs || !os || !a3 || !b3 || as->size() < 3 || as->size() != bs->size()) return false;
    const size_t r = as->size();
    if (!std::equal(as->begin(), as->end() - 2, bs->begin())) return false;
    const int64_t batch = std::accumulate(as->begin(), as->end() - 2, int64_t(1), std::multiplies<>());
    if ((*a3)[0] != batch || (*a3)[1] != (*as)[r - 2] || (*a3)[2] != (*as)[r - 1] || (*b3)[1] != (*bs)[r - 2] ||
        (*b3)[2] != (*bs)[r - 1]) {
      return false;
    }
    const TensorRef y = g.new_result();
    Shape ys(as->begin(), as->end() - 1);
    ys.push_back((*bs)[r - 1]);
    ir::Node mm;
    mm.op = "aten.matmul.default";
    mm.args = {a, b};
    mm.outputs = {y};
    mm.label = n.label;
    mm.origin = n.origin;
    ir::Node back;
    back.op = "aten.view.default";
    back.args = {y, IntList(os->begin(), os->end())};
    back.outputs = n.outputs;
    back.label = "sink_views";
    back.origin = n.origin;
    g.replace_node(i, std::move(mm));
    g.set_seen_shape(y, ys);
    g.insert_node(i + 1, std::move(back));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> sink_views() { return std::make_unique<SinkViews>(); }

}  // namespace wgnn::passes

// The views torch.export writes around row-wise ops, moved out of the way
// of the fusions (ExecuTorch programs, pte/, and any IR written that way):
//   - an activation of a view: the activation first, then the view
//     (gelu(view(linear(x))) -> view(gelu(linear(x))): the product's
//     epilogue may then take it);
//   - a linear layer of a view that keeps the last dim (x [1, T, K] seen as
//     [T, K]): the layer on x, then the view;
//   - a bmm of two views that merge the same leading dims, but for leading
//     1s ([B, H, M, K] seen
//     as [B*H, M, K]): aten.matmul of the views' inputs, then the view (so
//     fuse_matmul_add reads a transposed operand in place and takes a scale
//     into alpha);
//   - a view of a view: one view; a view to its input's own shape: none;
//   - a slice of a whole dim (from 0 to its end or past it, step 1, as
//     Phi-3's rotary takes the whole head): none.
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
    if (whole_slice(g, n)) {
      g.replace_uses(n.outputs[0], n.args[0].tensor());
      g.nodes()[size_t(i)].dead = true;
      return true;
    }
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

  // aten.slice.Tensor(x, dim, start, end, step) taking all of x's dim,
  // where x's shape is known and the slice is no output.
  static bool whole_slice(const ir::Graph& g, const ir::Node& n) {
    if (n.op != "aten.slice.Tensor" || n.dead || n.outputs.size() != 1 || n.args.empty() || n.args.size() > 5 ||
        !n.args[0].is_tensor() || !n.unfused.empty() || g.is_output(n.outputs[0])) {
      return false;
    }
    const auto xs = g.known_shape(n.args[0].tensor());
    if (!xs || xs->empty()) return false;
    auto int_or = [&](size_t k, int64_t def) -> std::optional<int64_t> {
      if (k >= n.args.size() || n.args[k].is_none()) return def;
      if (!n.args[k].is_int()) return std::nullopt;
      return std::get<int64_t>(n.args[k].v);
    };
    const auto dim = int_or(1, 0), start = int_or(2, 0), end = int_or(3, INT64_MAX), step = int_or(4, 1);
    if (!dim || !start || !end || !step) return false;
    const int64_t rank = int64_t(xs->size());
    if (*dim < -rank || *dim >= rank) return false;
    const int64_t size = (*xs)[size_t(*dim < 0 ? *dim + rank : *dim)];
    return *step == 1 && (*start == 0 || *start <= -size) && *end >= size;
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
    if (const std::optional<DType> d = g.known_dtype(u.outputs[0])) g.set_seen_dtype(y, *d);
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
    if (!as || !bs || !os || !a3 || !b3 || as->size() < 3 || bs->size() < 3) return false;
    const size_t r = as->size(), rb = bs->size();
    // The leading dims alike but for leading 1s ([1, 2] and [1, 1, 2]:
    // probabilities and v cut from a packed projection): b is seen with
    // a's leading dims (one more view, which records nothing).
    auto strip = [](const Shape& s) {
      Shape lead(s.begin(), s.end() - 2);
      while (!lead.empty() && lead.front() == 1) lead.erase(lead.begin());
      return lead;
    };
    if (strip(*as) != strip(*bs)) return false;
    const bool same_lead = r == rb && std::equal(as->begin(), as->end() - 2, bs->begin());
    const int64_t batch = std::accumulate(as->begin(), as->end() - 2, int64_t(1), std::multiplies<>());
    if ((*a3)[0] != batch || (*a3)[1] != (*as)[r - 2] || (*a3)[2] != (*as)[r - 1] || (*b3)[1] != (*bs)[rb - 2] ||
        (*b3)[2] != (*bs)[rb - 1]) {
      return false;
    }
    const std::string label = n.label, origin = n.origin;
    const std::vector<TensorRef> outs = n.outputs;  // n moves when a node goes in before it
    TensorRef bb = b;
    if (!same_lead) {
      Shape s(as->begin(), as->end() - 2);
      s.push_back((*bs)[rb - 2]);
      s.push_back((*bs)[rb - 1]);
      bb = g.new_result();
      ir::Node v;
      v.op = "aten.view.default";
      v.args = {b, IntList(s.begin(), s.end())};
      v.outputs = {bb};
      v.label = "sink_views";
      v.origin = origin;
      g.insert_node(i, std::move(v));
      g.set_seen_shape(bb, s);
      if (const std::optional<DType> d = g.known_dtype(b)) g.set_seen_dtype(bb, *d);
      ++i;
    }
    const TensorRef y = g.new_result();
    Shape ys(as->begin(), as->end() - 1);
    ys.push_back((*bs)[rb - 1]);
    ir::Node mm;
    mm.op = "aten.matmul.default";
    mm.args = {a, bb};
    mm.outputs = {y};
    mm.label = label;
    mm.origin = origin;
    ir::Node back;
    back.op = "aten.view.default";
    back.args = {y, IntList(os->begin(), os->end())};
    back.outputs = outs;
    back.label = "sink_views";
    back.origin = origin;
    g.replace_node(i, std::move(mm));
    g.set_seen_shape(y, ys);
    if (const std::optional<DType> d = g.known_dtype(a)) g.set_seen_dtype(y, *d);
    g.insert_node(i + 1, std::move(back));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> sink_views() { return std::make_unique<SinkViews>(); }

}  // namespace wgnn::passes

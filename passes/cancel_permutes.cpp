// A permute of a permute, with views between them, whose composite leaves
// every element where it was:
//   a = aten.permute(x, d1);  b = aten.view(a, s) ...;  c = aten.permute(b, d2)
// -> c = aten.view(x, shape of c): two copies fewer. DaViT's stage ends
// turn its tokens [N, H*W, C] channels first ([N, C, H, W]) and at once
// back for the downsampling's channels-last layer norm ([N, H, W, C]).
// Applies where the IR knows the shapes; the first permute and the views
// stay for any other reader (dead_code removes them otherwise).
#include <optional>

#include "ops/layout.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

bool is_permute(const ir::Node& n) {
  return n.op == "aten.permute.default" && n.args.size() == 2 && n.args[0].is_tensor() && n.args[1].is_int_list() &&
         n.outputs.size() == 1;
}

bool is_view(const ir::Node& n) {
  return n.op == "aten.view.default" && n.args.size() == 2 && n.args[0].is_tensor() && n.outputs.size() == 1;
}

// `dims` as positions in a rank-r shape, or none where it is no permutation.
std::optional<std::vector<size_t>> permutation(const IntList& dims, size_t r) {
  if (dims.size() != r) return std::nullopt;
  std::vector<size_t> p(r);
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < r; ++i) {
    const int64_t d = dims[i] < 0 ? dims[i] + int64_t(r) : dims[i];
    if (d < 0 || d >= int64_t(r) || seen[size_t(d)]) return std::nullopt;
    seen[size_t(d)] = true;
    p[i] = size_t(d);
  }
  return p;
}

class CancelPermutes final : public Pass {
 public:
  const char* name() const override { return "cancel_permutes"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t cancelled = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& p2 = g.nodes()[i];
      if (p2.dead || !is_permute(p2)) continue;
      const auto cs = g.known_shape(p2.outputs[0]);
      if (!cs) continue;
      // Up through the views to the first permute.
      std::vector<TensorRef> views;  // the views' results, last first
      TensorRef t = p2.args[0].tensor();
      int at = g.producer(t);
      while (at >= 0 && is_view(g.nodes()[size_t(at)])) {
        views.push_back(t);
        t = g.nodes()[size_t(at)].args[0].tensor();
        at = g.producer(t);
      }
      if (at < 0 || !is_permute(g.nodes()[size_t(at)])) continue;
      const ir::Node& p1 = g.nodes()[size_t(at)];
      const TensorRef x = p1.args[0].tensor();
      const auto xs = g.known_shape(x), as = g.known_shape(t);
      if (!xs || !as) continue;
      const auto d1 = permutation(std::get<IntList>(p1.args[1].v), xs->size());
      if (!d1 || as->size() != xs->size()) continue;
      // a as a strided view of x, then each view, then the second permute.
      const Shape xst = ops::contiguous_strides(*xs);
      Shape size(xs->size()), stride(xs->size());
      for (size_t k = 0; k < d1->size(); ++k) size[k] = (*xs)[(*d1)[k]], stride[k] = xst[(*d1)[k]];
      if (size != *as) continue;
      bool ok = true;
      for (size_t v = views.size(); v-- > 0 && ok;) {
        const auto vs = g.known_shape(views[v]);
        const auto st = vs ? view_strides(size, stride, *vs) : std::nullopt;
        ok = st.has_value();
        if (ok) size = *vs, stride = *st;
      }
      if (!ok) continue;
      const auto d2 = permutation(std::get<IntList>(p2.args[1].v), size.size());
      if (!d2) continue;
      Shape out(size.size()), out_stride(size.size());
      for (size_t k = 0; k < d2->size(); ++k) out[k] = size[(*d2)[k]], out_stride[k] = stride[(*d2)[k]];
      if (out != *cs) continue;
      const Shape want = ops::contiguous_strides(out);
      for (size_t k = 0; k < out.size() && ok; ++k) ok = out[k] == 1 || out_stride[k] == want[k];
      if (!ok) continue;
      ir::Node n;
      n.op = "aten.view.default";
      n.args = {x, IntList(out.begin(), out.end())};
      n.outputs = p2.outputs;
      n.origin = p2.origin;
      n.label = p2.label.empty() ? name() : p2.label;
      // No fallback chain (unfused): it would keep the first permute alive.
      g.replace_node(int(i), std::move(n));
      ++cancelled;
    }
    return cancelled;
  }
};

}  // namespace

std::unique_ptr<Pass> cancel_permutes() { return std::make_unique<CancelPermutes>(); }

}  // namespace wgnn::passes

// A matrix product with what its GEMM epilogue and operand reads can take
// -> one wgnn.matmul_add.default(a, b, bias, alpha, 'none', trans_a, trans_b):
//   - an operand times a constant scalar (attention's q * scale), read by
//     the product alone: the scalar goes into alpha;
//   - an operand through a permute that swaps its last two dims and keeps
//     the others (k.transpose(-2, -1)), read by the product alone: read
//     transposed in place, no copy (a scalar factor before or after it
//     too: (k * scale).transpose(-1, -2));
//   - the product times or divided by a constant scalar: into alpha;
//   - then plus a constant bias along the last dim ([N], [1, .., N] or one
//     value), of a rank no larger than the product's: the epilogue's bias.
// At least one of these, from aten.matmul.default (both operands at least
// 2-D where the IR knows their shapes, not both constants). A GELU or
// another activation after it joins later (fuse_matmul_activation). Where a
// plan's dtypes do not allow the fused op, the chain runs as it was.
#include <algorithm>
#include <cmath>
#include <optional>

#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FuseMatmulAdd final : public Pass {
 public:
  const char* name() const override { return "fuse_matmul_add"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& mm = g.nodes()[i];
      if (mm.dead || mm.op != "aten.matmul.default" || mm.args.size() != 2 || !mm.args[0].is_tensor() ||
          !mm.args[1].is_tensor() || mm.outputs.size() != 1) {
        continue;
      }
      std::vector<int> chain;  // the nodes replaced, the product among them
      std::vector<std::pair<TensorRef, bool>> scales;  // constant, divides
      TensorRef operand[2] = {mm.args[0].tensor(), mm.args[1].tensor()};
      bool trans[2] = {false, false};
      // Each operand through at most one scalar factor and one swapping
      // permute, in either order (they commute: DaViT's channel attention
      // reads (k * scale) transposed), each node read by the next alone.
      for (int k = 0; k < 2; ++k) {
        int reader = int(i);
        bool scaled = false;
        for (;;) {
          const int p = g.producer(operand[k]);
          if (p < 0 || sole_user(g, operand[k]) != reader) break;
          const ir::Node& pn = g.nodes()[size_t(p)];
          if (!scaled && pn.op == "aten.mul.Tensor" && pn.args.size() == 2 && pn.args[0].is_tensor() &&
              pn.args[1].is_tensor()) {
            const TensorRef x = pn.args[0].tensor(), y = pn.args[1].tensor();
            if (scalar(g, x) == scalar(g, y)) break;
            scales.emplace_back(scalar(g, y) ? y : x, false);
            operand[k] = scalar(g, y) ? x : y;
            scaled = true;
          } else if (!trans[k] && pn.op == "aten.permute.default" && pn.args.size() == 2 && pn.args[0].is_tensor() &&
                     swaps_last_two(pn.args[1])) {
            operand[k] = pn.args[0].tensor();
            trans[k] = true;
          } else {
            break;
          }
          chain.push_back(p);
          reader = p;
        }
      }
      chain.push_back(int(i));
      TensorRef cur = mm.outputs[0];
      int last = int(i);
      if (const int n = sole_user(g, cur); n >= 0) {
        const ir::Node& s = g.nodes()[size_t(n)];
        if ((s.op == "aten.mul.Tensor" || s.op == "aten.div.Tensor") && s.args.size() == 2 && s.args[0].is_tensor() &&
            s.args[1].is_tensor()) {
          const bool div = s.op == "aten.div.Tensor";
          const TensorRef k = s.args[0].tensor() == cur ? s.args[1].tensor() : s.args[0].tensor();
          if ((!div || s.args[0].tensor() == cur) && k != cur && scalar(g, k)) {
            scales.emplace_back(k, div);
            chain.push_back(n);
            cur = s.outputs[0];
            last = n;
          }
        }
      }
      Value bias = None{};
      const std::optional<Shape> as = g.known_shape(operand[0]), bs = g.known_shape(operand[1]);
      if (!as || !bs || as->size() < 2 || bs->size() < 2) continue;
      if (g.is_constant(operand[0]) && g.is_constant(operand[1])) continue;
      const size_t rank = std::max(as->size(), bs->size());
      const int64_t N = trans[1] ? (*bs)[bs->size() - 2] : bs->back();  // b as stored
      if (const int n = sole_user(g, cur); n >= 0) {
        const ir::Node& s = g.nodes()[size_t(n)];
        if (s.op == "aten.add.Tensor" && s.args.size() == 2 && s.args[0].is_tensor() && s.args[1].is_tensor()) {
          const TensorRef k = s.args[0].tensor() == cur ? s.args[1].tensor() : s.args[0].tensor();
          if (k != cur && g.is_constant(k) && bias_fits(g, k, rank, N)) {
            bias = k;
            chain.push_back(n);
            last = n;
          }
        }
      }
      if (chain.size() < 2) continue;
      double alpha = 1;
      bool ok = true;
      for (const auto& [k, divides] : scales) {
        const std::optional<double> v = scalar_value(g, k);
        if (!v || g.model_values(k)->shape.size() > rank || !std::isfinite(*v) || *v == 0) ok = false;
        else alpha = divides ? alpha / *v : alpha * *v;
      }
      if (!ok) continue;
      std::sort(chain.begin(), chain.end());
      ir::Node n;
      n.op = "wgnn.matmul_add.default";
      n.args = {operand[0], operand[1], bias, alpha, std::string("none"), trans[0], trans[1]};
      n.outputs = g.nodes()[size_t(last)].outputs;
      n.label = mm.label.empty() ? name() : mm.label;
      n.origin = mm.origin;
      for (int k : chain) n.unfused.push_back(g.nodes()[size_t(k)]);
      for (int k : chain) g.nodes()[size_t(k)].dead = true;
      g.replace_node(last, std::move(n));
      ++fused;
    }
    return fused;
  }

 private:
  // A constant of one float value (its model values known).
  static bool scalar(const ir::Graph& g, TensorRef v) { return scalar_value(g, v).has_value(); }
  // A permutation that swaps the last two of at least two dims and keeps
  // the others in place.
  static bool swaps_last_two(const Value& dims) {
    if (!dims.is_int_list()) return false;
    const IntList& p = std::get<IntList>(dims.v);
    const int64_t r = int64_t(p.size());
    if (r < 2) return false;
    for (int64_t d = 0; d < r; ++d) {
      int64_t v = p[size_t(d)];
      if (v < 0) v += r;
      const int64_t want = d == r - 2 ? r - 1 : d == r - 1 ? r - 2 : d;
      if (v != want) return false;
    }
    return true;
  }
  // A constant bias along the product's last dim: every dim 1 but the last,
  // which is 1 or N; its rank at most the product's.
  static bool bias_fits(const ir::Graph& g, TensorRef k, size_t rank, int64_t N) {
    const std::optional<Shape> s = g.known_shape(k);
    if (!s || s->size() > rank) return false;
    for (size_t d = 0; d < s->size(); ++d) {
      const int64_t n = (*s)[d];
      if (n != 1 && !(d + 1 == s->size() && n == N)) return false;
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_matmul_add() { return std::make_unique<FuseMatmulAdd>(); }

}  // namespace wgnn::passes

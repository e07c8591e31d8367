// Rotary position embedding as transformers writes it (Llama's
// apply_rotary_pos_emb: q * cos + rotate_half(q) * sin) -> one
// wgnn.rotary_half.default:
//   x1 = slice(x, last, 0, h)        x2 = slice(x, last, h, end)
//   r  = cat((neg(x2), x1), last)
//   out = x * cos + r * sin          (the products and the sum in any order)
// where the slices, the negation, the concatenation and the two products are
// each read by the next node alone (x may have other readers). The dims must
// be x's last (negative, or counted from x's known rank). The fused node
// takes the sum's place and keeps the chain, lowered where the op refuses (x's
// last dim not 2h: a partial rotary; cos or sin of another dtype or a shape
// that does not broadcast to x's).
#include <algorithm>
#include <optional>

#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FuseRotary final : public Pass {
 public:
  const char* name() const override { return "fuse_rotary"; }

  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (match(g, int(i))) ++fused;
    }
    return fused;
  }

 private:
  static const ir::Node* product(const ir::Graph& g, int i) {
    const ir::Node* m = live_node(g, i, "aten.mul.Tensor");
    if (!m || m->args.size() != 2 || !m->args[0].is_tensor() || !m->args[1].is_tensor()) return nullptr;
    return m;
  }
  static std::optional<int64_t> as_int(const Value& v) {
    if (!v.is_int()) return std::nullopt;
    return std::get<int64_t>(v.v);
  }
  // Whether `dim` names the last dim of a value of rank `rank` (0: unknown).
  static bool last_dim(int64_t dim, int64_t rank) { return dim == -1 || (rank > 0 && dim == rank - 1); }

  bool match(ir::Graph& g, int add_at) const {
    const ir::Node* add = live_node(g, add_at, "aten.add.Tensor");
    if (!add || !is_plain_add(*add)) return false;
    // Which product is r * sin: the one whose operand a concatenation of a
    // negated slice and a slice makes.
    for (int side = 0; side < 2; ++side) {
      const TensorRef pa = add->args[size_t(side)].tensor(), pb = add->args[size_t(1 - side)].tensor();
      const int ma = g.producer(pa), mb = g.producer(pb);
      const ir::Node* mx = product(g, ma);  // x * cos
      const ir::Node* mr = product(g, mb);  // r * sin
      if (!mx || !mr || sole_user(g, pa) != add_at || sole_user(g, pb) != add_at) continue;
      for (int rs = 0; rs < 2; ++rs) {
        const TensorRef r = mr->args[size_t(rs)].tensor(), sin = mr->args[size_t(1 - rs)].tensor();
        const int cat_at = g.producer(r);
        const ir::Node* cat = live_node(g, cat_at, "aten.cat.default");
        if (!cat || sole_user(g, r) != mb || cat->args.size() != 2 || !cat->args[0].is_list()) continue;
        const ValueList& parts = std::get<ValueList>(cat->args[0].v);
        const std::optional<int64_t> cat_dim = as_int(cat->args[1]);
        if (parts.size() != 2 || !parts[0].is_tensor() || !parts[1].is_tensor() || !cat_dim) continue;
        const int neg_at = g.producer(parts[0].tensor());
        const ir::Node* neg = live_node(g, neg_at, "aten.neg.default");
        if (!neg || neg->args.size() != 1 || !neg->args[0].is_tensor() || sole_user(g, parts[0].tensor()) != cat_at) {
          continue;
        }
        const TensorRef x2 = neg->args[0].tensor(), x1 = parts[1].tensor();
        const int s2_at = g.producer(x2), s1_at = g.producer(x1);
        const ir::Node* s2 = live_node(g, s2_at, "aten.slice.Tensor");
        const ir::Node* s1 = live_node(g, s1_at, "aten.slice.Tensor");
        if (!s1 || !s2 || s1->args.size() != 5 || s2->args.size() != 5 || !s1->args[0].is_tensor() ||
            !s2->args[0].is_tensor() || sole_user(g, x2) != neg_at || sole_user(g, x1) != cat_at) {
          continue;
        }
        const TensorRef x = s1->args[0].tensor();
        if (s2->args[0].tensor() != x) continue;
        const std::optional<int64_t> d1 = as_int(s1->args[1]), b1 = as_int(s1->args[2]), e1 = as_int(s1->args[3]),
                                     st1 = as_int(s1->args[4]), d2 = as_int(s2->args[1]), b2 = as_int(s2->args[2]),
                                     e2 = as_int(s2->args[3]), st2 = as_int(s2->args[4]);
        if (!d1 || !b1 || !e1 || !st1 || !d2 || !b2 || !e2 || !st2) continue;
        const int64_t h = *e1;
        if (*b1 != 0 || *st1 != 1 || *st2 != 1 || h < 1 || *b2 != h || *e2 < 2 * h) continue;
        const std::optional<Shape> xs = g.known_shape(x);
        const int64_t rank = xs ? int64_t(xs->size()) : 0;
        if (!last_dim(*d1, rank) || !last_dim(*d2, rank) || !last_dim(*cat_dim, rank)) continue;
        // x * cos, x on either side.
        TensorRef cos{-1};
        if (mx->args[0].tensor() == x) cos = mx->args[1].tensor();
        else if (mx->args[1].tensor() == x) cos = mx->args[0].tensor();
        if (cos.id < 0) continue;
        // The fused node in the sum's place: x, cos and sin exist there.
        std::vector<int> chain{ma, s1_at, s2_at, neg_at, cat_at, mb, add_at};
        std::sort(chain.begin(), chain.end());
        ir::Node n;
        n.op = "wgnn.rotary_half.default";
        n.args = {x, cos, sin, h};
        n.outputs = {add->outputs[0]};
        n.label = add->label.empty() ? name() : add->label;
        n.origin = add->origin;
        for (int k : chain) n.unfused.push_back(g.nodes()[size_t(k)]);
        for (int k : chain) {
          if (k != add_at) g.nodes()[size_t(k)].dead = true;
        }
        g.replace_node(add_at, std::move(n));
        return true;
      }
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_rotary() { return std::make_unique<FuseRotary>(); }

}  // namespace wgnn::passes

// q's and k's rotary positions in one dispatch, where a decoder step (one
// token) takes q and k from adjacent column blocks of one product (after
// fuse_row_products):
//   q = rotary_half(permute(view(slice(p, -1, a, b), [B, 1, Hq, D]), [0, 2, 1, 3]), cos, sin, h)
//   k = rotary_half(permute(view(slice(p, -1, b, c), [B, 1, Hk, D]), [0, 2, 1, 3]), cos, sin, h)
// -> r = rotary_half(permute(view(slice(p, -1, a, c), [B, 1, Hq + Hk, D]), [0, 2, 1, 3]), cos, sin, h)
//    q = slice(r, 1, 0, Hq), k = slice(r, 1, Hq, Hq + Hk)
// With one token, every head takes the same cos and sin row, so the joined
// heads compute what the two did; q and k are views of r's head blocks.
// The joined node keeps no chain: it is made only where the op takes it
// for certain (one row of cos and sin, of x's dtype, D = 2 half).
// One sequence only: with a batch, a head block of r is not contiguous.
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

// A rotary input as a step's head block: p's columns [lo, hi) as [B, 1, H, D].
struct HeadBlock {
  TensorRef p{-1};
  int64_t lo = 0, hi = 0;
  Shape heads;   // [B, 1, H, D]
  Shape sliced;  // p's shape with hi - lo columns
};

std::optional<HeadBlock> head_block(const ir::Graph& g, TensorRef x) {
  const int pi = g.producer(x);
  const ir::Node* perm = live_node(g, pi, "aten.permute.default");
  if (!perm || perm->args.size() != 2 || !perm->args[0].is_tensor() || !perm->args[1].is_int_list() ||
      std::get<IntList>(perm->args[1].v) != IntList{0, 2, 1, 3}) {
    return std::nullopt;
  }
  const ir::Node* view = live_node(g, g.producer(perm->args[0].tensor()), "aten.view.default");
  if (!view || view->args.size() != 2 || !view->args[0].is_tensor()) return std::nullopt;
  const ir::Node* slice = live_node(g, g.producer(view->args[0].tensor()), "aten.slice.Tensor");
  if (!slice || slice->args.size() != 5 || !slice->args[0].is_tensor() || !is_number(slice->args[4], 1) ||
      !slice->args[2].is_int() || !slice->args[3].is_int()) {
    return std::nullopt;
  }
  // p's shape from the slice's (a product a pass made may not record one).
  const std::optional<Shape> ss = g.known_shape(slice->outputs[0]), vs = g.known_shape(view->outputs[0]);
  if (!ss || !vs || ss->empty() || vs->size() != 4 || (*vs)[1] != 1) return std::nullopt;
  const int64_t rank = int64_t(ss->size());
  int64_t dim = slice->args[1].is_int() ? std::get<int64_t>(slice->args[1].v) : 0;
  if (dim < 0) dim += rank;
  if (dim != rank - 1) return std::nullopt;
  HeadBlock b;
  b.p = slice->args[0].tensor();
  b.lo = std::get<int64_t>(slice->args[2].v);
  b.hi = std::get<int64_t>(slice->args[3].v);
  b.heads = *vs;
  b.sliced = *ss;
  if (b.lo < 0 || b.hi - b.lo != ss->back() || (b.hi - b.lo) != (*vs)[2] * (*vs)[3]) return std::nullopt;
  return b;
}

// A live rotary_half node (fused by fuse_rotary, so with the chain it
// replaced); null for anything else.
const ir::Node* rotary(const ir::Graph& g, int i) {
  if (i < 0) return nullptr;
  const ir::Node& n = g.nodes()[size_t(i)];
  if (n.dead || n.op != "wgnn.rotary_half.default" || n.outputs.size() != 1 || n.args.size() != 4 ||
      !n.args[0].is_tensor() || !n.args[1].is_tensor() || !n.args[2].is_tensor() || !n.args[3].is_int()) {
    return nullptr;
  }
  return &n;
}

// Whether the joined rotary over [1, H, 1, D] is one the op takes for
// certain (it keeps no chain to fall back on): D = 2 half, cos and sin of
// x's dtype, each one row of D that broadcasts over every head.
bool joinable(const ir::Graph& g, const ir::Node& q, int64_t D) {
  if (std::get<int64_t>(q.args[3].v) * 2 != D) return false;
  const std::optional<DType> xd = g.known_dtype(q.outputs[0]);
  for (size_t a : {size_t(1), size_t(2)}) {
    const TensorRef t = q.args[a].tensor();
    const std::optional<Shape> s = g.known_shape(t);
    const std::optional<DType> d = g.known_dtype(t);
    if (!s || !d || !xd || *d != *xd || s->empty() || s->size() > 4 || numel(*s) != D || s->back() != D) return false;
  }
  return true;
}

class JoinRotary final : public Pass {
 public:
  const char* name() const override { return "join_rotary"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t joined = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node* q = rotary(g, int(i));
      if (!q) continue;
      const std::optional<HeadBlock> qb = head_block(g, q->args[0].tensor());
      if (!qb || !joinable(g, *q, qb->heads[3])) continue;
      for (size_t j = i + 1; j < g.nodes().size(); ++j) {
        const ir::Node* k = rotary(g, int(j));
        if (!k) continue;
        // The same cos, sin and half.
        bool same = true;
        for (size_t a = 1; a < 4 && same; ++a) {
          same = k->args[a].is_tensor() ? q->args[a].is_tensor() && k->args[a].tensor() == q->args[a].tensor()
                                        : k->args[a].is_int() && q->args[a].is_int() &&
                                              std::get<int64_t>(k->args[a].v) == std::get<int64_t>(q->args[a].v);
        }
        if (!same) continue;
        const std::optional<HeadBlock> kb = head_block(g, k->args[0].tensor());
        if (!kb || kb->p != qb->p || kb->lo != qb->hi || qb->heads[0] != 1 || kb->heads[0] != 1 ||
            kb->heads[3] != qb->heads[3]) {
          continue;
        }
        join(g, int(i), int(j), *qb, *kb);
        ++joined;
        break;
      }
    }
    return joined;
  }

 private:
  static void join(ir::Graph& g, int qi, int ki, const HeadBlock& qb, const HeadBlock& kb) {
    const ir::Node q = g.nodes()[size_t(qi)];
    const ir::Node k = g.nodes()[size_t(ki)];
    const int64_t B = qb.heads[0], Hq = qb.heads[2], Hk = kb.heads[2], D = qb.heads[3];
    const std::optional<DType> dt = g.known_dtype(q.outputs[0]);
    auto node = [&](std::string op, ValueList args, const Shape& shape) {
      ir::Node n;
      n.op = std::move(op);
      n.args = std::move(args);
      n.outputs = {g.new_result()};
      n.label = "join_rotary";
      n.origin = q.origin;
      g.set_seen_shape(n.outputs[0], shape);
      if (dt) g.set_seen_dtype(n.outputs[0], *dt);
      return n;
    };
    const int64_t cols = kb.hi - qb.lo;
    Shape sliced = qb.sliced;
    sliced.back() = cols;
    ir::Node s = node("aten.slice.Tensor", {qb.p, int64_t(-1), qb.lo, kb.hi, int64_t(1)}, sliced);
    ir::Node v = node("aten.view.default", {s.outputs[0], IntList{B, 1, Hq + Hk, D}}, {B, 1, Hq + Hk, D});
    ir::Node p = node("aten.permute.default", {v.outputs[0], IntList{0, 2, 1, 3}}, {B, Hq + Hk, 1, D});
    ir::Node r = node("wgnn.rotary_half.default", {p.outputs[0], q.args[1], q.args[2], q.args[3]}, {B, Hq + Hk, 1, D});
    ir::Node qs = node("aten.slice.Tensor", {r.outputs[0], int64_t(1), int64_t(0), Hq, int64_t(1)}, {B, Hq, 1, D});
    ir::Node ks = node("aten.slice.Tensor", {r.outputs[0], int64_t(1), Hq, Hq + Hk, int64_t(1)}, {B, Hk, 1, D});
    qs.outputs = q.outputs;
    ks.outputs = k.outputs;
    // At q's place: k's readers come after k, which comes after q.
    g.nodes()[size_t(ki)].dead = true;
    g.replace_node(qi, std::move(ks));
    g.insert_node(qi, std::move(qs));
    g.insert_node(qi, std::move(r));
    g.insert_node(qi, std::move(p));
    g.insert_node(qi, std::move(v));
    g.insert_node(qi, std::move(s));
  }
};

}  // namespace

std::unique_ptr<Pass> join_rotary() { return std::make_unique<JoinRotary>(); }

}  // namespace wgnn::passes

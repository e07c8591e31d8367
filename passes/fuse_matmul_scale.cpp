// A product's result scaled per output column by a constant, directly or
// through a permute (ConvNeXt's layer scale: gamma [C, 1, 1] times the
// second MLP product's [N, H, W, C] result permuted to [N, C, H, W]):
//   y = wgnn.matmul_add(x, w, b, alpha, 'none', ..);  [p = aten.permute(y, perm)]
//   z = aten.mul(g, p or y)  (either order)
// -> y' = wgnn.matmul_add(x, w * g, b * g, alpha, 'none', ..);  z = [aten.permute(y', perm)]
// The scale goes into the constant weight's columns (its rows when stored
// transposed) and the bias, computed in float32 on the host and stored as
// the weight is stored (float16: rounded once, where the chain rounded the
// product and then the scaled value). One elementwise pass over the result
// fewer. Applies where g is a float constant that varies along the
// product's last dim alone (N values, or one), the product has no
// activation or residual, the values between are read by this chain alone
// and the IR knows the shapes (no broadcast enlarges the product).
#include <memory>
#include <optional>

#include "graph/host_tensor.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

// The permutation of an aten.permute node, normalised (negative dims
// counted from the end); nullopt where it is not one of `rank` dims.
std::optional<IntList> permutation(const ir::Node& n, size_t rank) {
  if (n.op != "aten.permute.default" || n.args.size() != 2 || !n.args[0].is_tensor() || !n.args[1].is_int_list() ||
      n.outputs.size() != 1) {
    return std::nullopt;
  }
  IntList d = std::get<IntList>(n.args[1].v);
  if (d.size() != rank) return std::nullopt;
  std::vector<bool> seen(rank, false);
  for (int64_t& v : d) {
    if (v < 0) v += int64_t(rank);
    if (v < 0 || v >= int64_t(rank) || seen[size_t(v)]) return std::nullopt;
    seen[size_t(v)] = true;
  }
  return d;
}

class FuseMatmulScale final : public Pass {
 public:
  const char* name() const override { return "fuse_matmul_scale"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& mul = g.nodes()[i];
      if (mul.dead || mul.op != "aten.mul.Tensor" || mul.args.size() != 2 || !mul.args[0].is_tensor() ||
          !mul.args[1].is_tensor() || mul.outputs.size() != 1) {
        continue;
      }
      for (size_t k = 0; k < 2; ++k) {
        const TensorRef gc = mul.args[k].tensor(), t = mul.args[1 - k].tensor(), z = mul.outputs[0];
        if (!g.is_constant(gc) || g.is_constant(t)) continue;
        const auto zs = g.known_shape(z), ts = g.known_shape(t);
        if (!zs || !ts || *zs != *ts || zs->empty()) continue;
        const size_t rank = zs->size();
        // Through a permute, or the product's result itself.
        int ip = g.producer(t);
        if (ip < 0 || sole_user(g, t) != int(i)) continue;
        std::optional<IntList> perm;
        TensorRef y = t;
        if (g.nodes()[size_t(ip)].op == "aten.permute.default") {
          perm = permutation(g.nodes()[size_t(ip)], rank);
          if (!perm) continue;
          y = g.nodes()[size_t(ip)].args[0].tensor();
          ip = g.producer(y);
          if (ip < 0 || sole_user(g, y) != g.producer(t)) continue;
        }
        const ir::Node& prod = g.nodes()[size_t(ip)];
        if (prod.op != "wgnn.matmul_add.default" || prod.outputs.size() != 1 || prod.args.size() < 2 ||
            prod.args.size() > 10 || !prod.args[1].is_tensor()) {
          continue;
        }
        const Value& bias = arg_or(prod, 2, Value(None{}));
        const Value& act = arg_or(prod, 4, Value(std::string("none")));
        const Value& tb = arg_or(prod, 6, Value(false));
        const Value& residual = arg_or(prod, 9, Value(None{}));
        if (!std::holds_alternative<std::string>(act.v) || std::get<std::string>(act.v) != "none" || !tb.is_bool() ||
            !residual.is_none() || !(bias.is_none() || bias.is_tensor())) {
          continue;
        }
        const bool trans_b = std::get<bool>(tb.v);
        const TensorRef wv = prod.args[1].tensor();
        const std::shared_ptr<const HostTensor> w = f32_values(g, wv);
        const std::shared_ptr<const HostTensor> scale = f32_values(g, gc);
        if (!w || !scale || w->shape.size() != 2 || g.value(gc).dtype != g.value(wv).dtype) continue;
        const int64_t N = trans_b ? w->shape[0] : w->shape[1];
        const auto ys = g.known_shape(y);
        if (!ys || ys->size() != rank || ys->back() != N) continue;
        // The dim of z that is the product's last, and the scale's shape
        // against z (right-aligned): 1 everywhere else, N or 1 there.
        size_t axis = rank - 1;
        if (perm) {
          for (size_t d = 0; d < rank; ++d)
            if ((*perm)[d] == int64_t(rank) - 1) axis = d;
        }
        const Shape& gs = scale->shape;
        if (gs.size() > rank) continue;
        bool along = true;
        for (size_t d = 0; d < rank; ++d) {
          const int64_t size = d + gs.size() >= rank ? gs[d + gs.size() - rank] : 1;
          along = along && (size == 1 || (d == axis && size == N));
        }
        if (!along) continue;
        std::shared_ptr<const HostTensor> b;
        if (bias.is_tensor()) {
          b = f32_values(g, bias.tensor());
          if (!b || (b->numel() != 1 && b->numel() != N) || g.value(bias.tensor()).dtype != g.value(wv).dtype) continue;
          bool last = true;  // a [N] or [1, .., N] bias, as fuse_matmul_add takes
          for (size_t d = 0; d + 1 < b->shape.size(); ++d) last = last && b->shape[d] == 1;
          if (!last) continue;
        }
        const float* sv = scale->as<float>();
        auto s_at = [&](int64_t n) { return sv[scale->numel() == 1 ? 0 : n]; };
        HostTensor ws(DType::F32, w->shape), bs(DType::F32, {N}), gflat(DType::F32, {N});
        const float* src = w->as<float>();
        for (int64_t r = 0; r < w->shape[0]; ++r)
          for (int64_t c = 0; c < w->shape[1]; ++c)
            ws.as<float>()[r * w->shape[1] + c] = src[r * w->shape[1] + c] * s_at(trans_b ? r : c);
        for (int64_t n = 0; n < N; ++n) {
          bs.as<float>()[n] = b ? b->as<float>()[b->numel() == 1 ? 0 : n] * s_at(n) : 0.f;
          gflat.as<float>()[n] = s_at(n);
        }
        const bool f16 = g.value(wv).dtype == DType::F16;
        if (f16) {
          ws = to_f16_saturated(ws);
          bs = to_f16_saturated(bs);
          gflat = to_f16_saturated(gflat);
        }
        // The new product writes y'; where a plan takes the chain instead
        // (the op refused its dtypes), the old product and a multiply by
        // the scale laid along its last dim make y'.
        const TensorRef y2 = g.new_result();
        g.set_seen_shape(y2, *ys);
        ir::Node before = prod;
        before.unfused.clear();
        ir::Node scaled;
        scaled.op = "aten.mul.Tensor";
        scaled.args = {y, g.constant(std::move(gflat), "layer_scale")};
        scaled.outputs = {y2};
        ir::Node n = prod;
        n.args[1] = g.constant(std::move(ws), "scaled_weight");
        if (n.args.size() < 3) n.args.resize(3, Value(None{}));
        n.args[2] = b ? Value(g.constant(std::move(bs), "scaled_bias")) : Value(None{});
        n.outputs = {y2};
        n.unfused = {before, scaled};
        if (n.label.empty()) n.label = name();
        g.nodes()[i].dead = true;
        g.replace_node(ip, std::move(n));
        g.replace_uses(y, y2);
        g.replace_uses(z, t == y ? y2 : t);
        ++fused;
        break;
      }
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_matmul_scale() { return std::make_unique<FuseMatmulScale>(); }

}  // namespace wgnn::passes

// Dequantized constant weights (the QDQ form of quantize_static, an
// ExecuTorch program's dequantize nodes): quantized_decomposed.dequantize_
// per_tensor / per_channel and wgnn.dequantize_blocked of constants.
//
//   - fuse_matmul_dequant: aten.matmul(a, dequantize(w)) with w 8-bit
//     [K, N] (one scale and zero point, or one per column or per row; not
//     blocked), the dequantized weights read by the product alone ->
//     wgnn.matmul_dequant.default: one dispatch that reads the weights as
//     stored, four to a word (made once a Session, named after w), and
//     dequantizes them as it stages its tiles. No float copy of the
//     weights, four times their size, is made.
//   - fold_dequantize: every other dequantize of constants becomes a
//     constant made when a plan first uploads it, on the host with the
//     kernel's arithmetic (ops::dequantize_on_host), once a Session where
//     its inputs are the model's initializers. Not a fusion: it runs with
//     fusion off too.
#include <fmt/format.h>

#include "gpu/error.h"
#include "ops/quantized.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

bool is_dequantize(const std::string& op) {
  return op == "quantized_decomposed.dequantize_per_tensor.tensor" ||
         op == "quantized_decomposed.dequantize_per_channel.default" || op == "wgnn.dequantize_blocked.default";
}

// A constant argument, seen through views of it (the importer views a
// per-tensor scale as a 0-d tensor): its model values and its memo ("" for
// a constant whose values are data of this IR alone).
struct Source {
  std::shared_ptr<const HostTensor> values;
  std::string memo;
};
std::optional<Source> constant_source(const ir::Graph& g, const Value& v) {
  if (!v.is_tensor()) return std::nullopt;
  TensorRef t = v.tensor();
  for (int hops = 0; hops < 4 && !g.is_constant(t); ++hops) {
    const int p = g.producer(t);
    const ir::Node* n = p >= 0 ? &g.nodes()[size_t(p)] : nullptr;
    if (!n || n->op != "aten.view.default" || n->args.empty() || !n->args[0].is_tensor()) return std::nullopt;
    t = n->args[0].tensor();
  }
  if (!g.is_constant(t)) return std::nullopt;
  const ir::ValueInfo& vi = g.value(t);
  Source s;
  s.values = vi.data ? vi.data : vi.source;
  s.memo = vi.data ? std::string() : vi.memo;
  if (!s.values) return std::nullopt;
  return s;
}

// A dequantize node's arguments by name.
struct Dequantize {
  Source x, scale;
  std::optional<Source> zero_point;
  int64_t axis = 0, block = 0;
  DType out = DType::F32;
  bool per_tensor = false;
};
std::optional<Dequantize> read_dequantize(const ir::Graph& g, const ir::Node& n) {
  const bool blocked = n.op == "wgnn.dequantize_blocked.default";
  const bool per_tensor = n.op == "quantized_decomposed.dequantize_per_tensor.tensor";
  const size_t params = per_tensor ? 3 : blocked ? 5 : 4;  // where lo, hi, dtype start
  if (n.args.size() != params + 4 || n.outputs.size() != 1) return std::nullopt;
  Dequantize d;
  const auto x = constant_source(g, n.args[0]), s = constant_source(g, n.args[1]);
  if (!x || !s) return std::nullopt;
  d.x = *x;
  d.scale = *s;
  if (!n.args[2].is_none()) {
    d.zero_point = constant_source(g, n.args[2]);
    if (!d.zero_point) return std::nullopt;
  }
  d.per_tensor = per_tensor;
  if (!per_tensor) {
    if (!n.args[3].is_int()) return std::nullopt;
    d.axis = std::get<int64_t>(n.args[3].v);
    if (blocked) {
      if (!n.args[4].is_int()) return std::nullopt;
      d.block = std::get<int64_t>(n.args[4].v);
    }
  }
  const Value& code = n.args[params + 3];
  if (!code.is_int() || (std::get<int64_t>(code.v) != 5 && std::get<int64_t>(code.v) != 6)) return std::nullopt;
  d.out = std::get<int64_t>(code.v) == 5 ? DType::F16 : DType::F32;  // ATen ScalarType
  const int64_t r = int64_t(d.x.values->shape.size());
  if (d.axis < 0) d.axis += r;
  return d;
}

class FuseMatmulDequant final : public Pass {
 public:
  const char* name() const override { return "fuse_matmul_dequant"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node* m = live_node(g, int(i), "aten.matmul.default");
      if (!m || m->args.size() != 2 || !m->args[0].is_tensor() || !m->args[1].is_tensor()) continue;
      const TensorRef a = m->args[0].tensor(), b = m->args[1].tensor();
      const int p = g.producer(b);
      if (p < 0 || sole_user(g, b) != int(i)) continue;
      const ir::Node& dq = g.nodes()[size_t(p)];
      if (dq.dead || !dq.unfused.empty() || dq.op == "wgnn.dequantize_blocked.default" || !is_dequantize(dq.op)) continue;
      const std::optional<Dequantize> d = read_dequantize(g, dq);
      if (!d) continue;
      const HostTensor& w = *d->x.values;
      if ((w.dtype != DType::U8 && w.dtype != DType::I8) || w.shape.size() != 2) continue;
      const int64_t K = w.shape[0], N = w.shape[1], ns = d->scale.values->numel();
      int64_t mode = 0;
      if (d->per_tensor && ns == 1) {
        mode = 0;
      } else if (!d->per_tensor && d->axis == 1 && ns == N) {
        mode = 1;
      } else if (!d->per_tensor && d->axis == 0 && ns == K) {
        mode = 2;
      } else {
        continue;
      }
      if (d->zero_point && (d->zero_point->values->numel() != ns || d->zero_point->values->dtype != w.dtype)) continue;
      // The product's a: float, its shape known (this plan's), ending in K.
      const std::optional<Shape> as = g.known_shape(a), ys = g.known_shape(m->outputs[0]);
      const std::optional<DType> ad = g.known_dtype(a);
      if (!as || !ys || as->empty() || as->back() != K || K == 0 || N == 0 || !ad ||
          (*ad != DType::F32 && *ad != DType::F16)) {
        continue;
      }
      const int64_t M = numel(*as) / K;
      std::shared_ptr<const HostTensor> wv = d->x.values;
      // w four to a word: made once a Session where w is an initializer.
      auto pack = [wv](HostTensor& scratch) -> const HostTensor& {
        const int64_t k = wv->shape[0], n = wv->shape[1], nw = (n + 3) / 4;
        scratch = HostTensor(DType::I32, {k, nw});
        uint32_t* pw = scratch.as<uint32_t>();
        const uint8_t* src = wv->data.data();
        for (int64_t r = 0; r < k; ++r)
          for (int64_t c = 0; c < n; ++c) pw[r * nw + c / 4] |= uint32_t(src[r * n + c]) << (8 * (c % 4));
        return scratch;
      };
      const Shape packed_shape{K, (N + 3) / 4};
      TensorRef packed;
      if (!d->x.memo.empty()) {
        packed = g.made_constant(DType::I32, packed_shape, d->x.memo + ":8-bit four to a word", pack, "packed weights");
      } else {
        HostTensor scratch;
        packed = g.constant(pack(scratch), "packed weights");
      }
      Value zp = None{};
      if (d->zero_point) {
        std::shared_ptr<const HostTensor> zv = d->zero_point->values;
        auto widen = [zv](HostTensor& scratch) -> const HostTensor& {
          scratch = HostTensor(DType::I32, {zv->numel()});
          for (int64_t k = 0; k < zv->numel(); ++k) scratch.as<int32_t>()[k] = int32_t(zv->get_int(size_t(k)));
          return scratch;
        };
        if (!d->zero_point->memo.empty()) {
          zp = g.made_constant(DType::I32, {ns}, d->zero_point->memo + ":int32", widen, "zero points (int32)");
        } else {
          HostTensor scratch;
          zp = g.constant(widen(scratch), "zero points (int32)");
        }
      }
      const std::string origin = m->origin, label = m->label.empty() ? name() : m->label;
      const std::vector<TensorRef> outs = m->outputs;
      auto view = [&](Value of, const Shape& to, DType dt) {
        ir::Node v;
        v.op = "aten.view.default";
        v.args = {std::move(of), IntList(to.begin(), to.end())};
        v.outputs = {g.new_result()};
        v.label = name();
        v.origin = origin;
        g.set_seen_shape(v.outputs[0], to);
        g.set_seen_dtype(v.outputs[0], dt);
        return v;
      };
      const DType sd = g.known_dtype(dq.args[1].tensor()).value_or(d->scale.values->dtype);
      ir::Node va = view(a, {M, K}, *ad), vs = view(dq.args[1], {ns}, sd);
      ir::Node f;
      f.op = "wgnn.matmul_dequant.default";
      f.args = {va.outputs[0], packed, vs.outputs[0], zp, N, w.dtype == DType::I8, mode};
      f.outputs = {g.new_result()};
      f.label = label;
      f.origin = origin;
      g.set_seen_shape(f.outputs[0], {M, N});
      g.set_seen_dtype(f.outputs[0], *ad);
      ir::Node vy = view(f.outputs[0], *ys, *ad);
      vy.outputs = outs;
      g.nodes()[size_t(p)].dead = true;
      g.replace_node(int(i), std::move(vy));
      g.insert_node(int(i), std::move(f));
      g.insert_node(int(i), std::move(vs));
      g.insert_node(int(i), std::move(va));
      i += 3;
      ++fused;
    }
    return fused;
  }
};

class FoldDequantize final : public Pass {
 public:
  const char* name() const override { return "fold_dequantize"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t folded = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& n = g.nodes()[i];
      if (n.dead || !n.unfused.empty() || !is_dequantize(n.op) || g.is_output(n.outputs.at(0))) continue;
      const std::optional<Dequantize> d = read_dequantize(g, n);
      if (!d) continue;
      std::shared_ptr<const HostTensor> x = d->x.values, s = d->scale.values,
                                        z = d->zero_point ? d->zero_point->values : nullptr;
      const int64_t axis = d->per_tensor ? 0 : d->axis, block = d->block;
      const DType out = d->out;
      auto make = [x, s, z, axis, block, out](HostTensor& scratch) -> const HostTensor& {
        scratch = ops::dequantize_on_host(*x, *s, z.get(), axis, block, out);
        return scratch;
      };
      const bool memoized = !d->x.memo.empty() && !d->scale.memo.empty() && (!d->zero_point || !d->zero_point->memo.empty());
      TensorRef c;
      if (memoized) {
        const std::string memo = fmt::format("dequantize({}, {}, {}, axis {}, block {}) as {}", d->x.memo, d->scale.memo,
                                             d->zero_point ? d->zero_point->memo : "no zero point", axis, block,
                                             dtype_name(out));
        c = g.made_constant(out, x->shape, memo, make, fmt::format("dequantized_{}", n.outputs[0].id));
      } else {
        HostTensor scratch;
        try {
          c = g.constant(make(scratch), fmt::format("dequantized_{}", n.outputs[0].id));
        } catch (const Error&) {
          continue;  // the node's own op names the fault when the plan records it
        }
      }
      const TensorRef o = n.outputs[0];
      g.nodes()[i].dead = true;
      g.replace_uses(o, c);
      ++folded;
    }
    return folded;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_matmul_dequant() { return std::make_unique<FuseMatmulDequant>(); }
std::unique_ptr<Pass> fold_dequantize() { return std::make_unique<FoldDequantize>(); }

}  // namespace wgnn::passes

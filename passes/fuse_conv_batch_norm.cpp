// A convolution with constant float32 weights (and bias), whose result only
// an inference batch norm with constant parameters reads
// (aten._native_batch_norm_legit_no_training, its two statistics unread)
// -> the convolution alone, the normalization folded into new weights and
// bias on the host in double precision, as ONNX Runtime's
// Conv+BatchNormalization fusion does:
//   s = gamma / sqrt(var + eps);  w' = w * s[co];  b' = (b - mean) * s + beta.
// Transposed convolutions (weights [Cin, Cout/groups, ...]) are left alone.
#include <cmath>

#include "passes/passes.h"

namespace wgnn::passes {
namespace {

// A float32 constant of shape [c] (or None when allowed: nullptr).
const HostTensor* channel_constant(const ir::Graph& g, const Value& v, int64_t c, bool none_ok, bool& ok) {
  if (v.is_none()) {
    ok = ok && none_ok;
    return nullptr;
  }
  if (!v.is_tensor() || !g.has_data(v.tensor())) {
    ok = false;
    return nullptr;
  }
  const HostTensor& t = *g.value(v.tensor()).data;
  ok = ok && t.dtype == DType::F32 && t.shape == Shape{c};
  return &t;
}

bool is_conv(const ir::Node& n) {
  if (n.op == "aten.convolution.default") {
    if (n.args.size() < 2 || n.args.size() > 9) return false;
  } else if (n.op == "wgnn.convolution_padded.default") {
    if (n.args.size() < 2 || n.args.size() > 9) return false;  // no activation or affine given
  } else {
    return false;
  }
  return n.args.size() <= 6 || (n.args[6].is_bool() && !std::get<bool>(n.args[6].v));
}

class FuseConvBatchNorm final : public Pass {
 public:
  const char* name() const override { return "fuse_conv_batch_norm"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& bn = g.nodes()[i];
      if (bn.dead || bn.op != "aten._native_batch_norm_legit_no_training.default") continue;
      if (bn.args.size() < 5 || bn.args.size() > 7 || !bn.args[0].is_tensor() || bn.outputs.size() != 3) continue;
      if (!g.users(bn.outputs[1]).empty() || !g.users(bn.outputs[2]).empty() || g.is_output(bn.outputs[1]) ||
          g.is_output(bn.outputs[2])) {
        continue;
      }
      const TensorRef x = bn.args[0].tensor();
      const int p = g.producer(x);
      if (p < 0 || sole_user(g, x) != int(i)) continue;
      const ir::Node& conv = g.nodes()[size_t(p)];
      if (!is_conv(conv) || !conv.args[1].is_tensor() || !g.has_data(conv.args[1].tensor())) continue;
      const HostTensor& w = *g.value(conv.args[1].tensor()).data;
      if (w.dtype != DType::F32 || w.shape.size() < 3 || w.shape[0] < 1) continue;
      const int64_t co = w.shape[0];
      const Value eps_v = arg_or(bn, 6, Value(1e-5));
      if (!eps_v.is_double() && !eps_v.is_int()) continue;
      const double eps = eps_v.is_double() ? std::get<double>(eps_v.v) : double(std::get<int64_t>(eps_v.v));
      bool ok = true;
      const HostTensor* bias = channel_constant(g, arg_or(conv, 2, Value(None{})), co, true, ok);
      const HostTensor* gamma = channel_constant(g, bn.args[1], co, true, ok);
      const HostTensor* beta = channel_constant(g, bn.args[2], co, true, ok);
      const HostTensor* mean = channel_constant(g, bn.args[3], co, false, ok);
      const HostTensor* var = channel_constant(g, bn.args[4], co, false, ok);
      if (!ok) continue;
      HostTensor nw(DType::F32, w.shape), nb(DType::F32, {co});
      const int64_t per = w.numel() / co;
      for (int64_t c = 0; c < co; ++c) {
        const double s = (gamma ? double(gamma->as<float>()[c]) : 1.0) / std::sqrt(double(var->as<float>()[c]) + eps);
        for (int64_t k = 0; k < per; ++k) nw.as<float>()[c * per + k] = float(double(w.as<float>()[c * per + k]) * s);
        const double b = bias ? double(bias->as<float>()[c]) : 0.0;
        nb.as<float>()[c] = float((b - double(mean->as<float>()[c])) * s + (beta ? double(beta->as<float>()[c]) : 0.0));
      }
      ir::Node n = conv;
      n.args.resize(std::max<size_t>(n.args.size(), 3));
      n.args[1] = g.constant(std::move(nw), g.value(conv.args[1].tensor()).name + "_bn_folded");
      n.args[2] = g.constant(std::move(nb), "bn_folded_bias");
      n.outputs = {bn.outputs[0]};
      n.unfused.clear();
      g.nodes()[size_t(p)].dead = true;
      g.replace_node(int(i), std::move(n));
      ++fused;
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_conv_batch_norm() { return std::make_unique<FuseConvBatchNorm>(); }

}  // namespace wgnn::passes

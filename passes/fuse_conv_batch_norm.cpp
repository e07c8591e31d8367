// A convolution with constant float32 weights (and bias), whose result only
// an inference batch norm with constant parameters reads
// (aten._native_batch_norm_legit_no_training, its two statistics unread)
// -> the convolution alone:
//   - weights stored as float32: the normalization folded into new weights
//     and bias on the host in double precision, as ONNX Runtime's
//     Conv+BatchNormalization fusion does:
//       s = gamma / sqrt(var + eps);  w' = w * s[co];  b' = (b - mean) * s + beta;
//     where the weights are a model's initializers (made constants, kept by
//     the Session), the folded weights are one made constant named by them,
//     so a later plan (another input shape) neither folds nor hashes them
//     again;
//   - weights stored as float16 (float16 mode): the weights unchanged (they
//     would be rounded to float16 after scaling: the zoo's MODNet mini
//     drifted from 7e-4 to 1e-2 of an f16-rounded reference with the
//     folding) and the normalization as a float32 scale and shift per
//     output channel, computed in double, that wgnn.convolution_padded's
//     epilogue applies to its result rounded to float16 (affine and
//     affine_rounded: the unfused values in one dispatch). (Without the
//     rounding, on the f32 accumulator, the zoo's MODNet mini was as close
//     to float32 ONNX Runtime on average but its instance norms amplified
//     the changed roundings past the float16-emulated check's tolerance.)
// fuse_conv_residual and fuse_conv_activation then take a residual add and
// an activation after it into the same epilogue. Transposed convolutions
// (weights [Cin, Cout/groups, ...]) are left alone.
#include <fmt/format.h>

#include <cmath>

#include "passes/conv_args.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

// A float32 per-channel constant's values, shape [c] (or None when
// allowed: null, ok kept).
std::shared_ptr<const HostTensor> channel_values(const ir::Graph& g, const Value& v, int64_t c, bool none_ok,
                                                 bool& ok) {
  if (v.is_none()) {
    ok = ok && none_ok;
    return nullptr;
  }
  std::shared_ptr<const HostTensor> t = v.is_tensor() ? f32_values(g, v.tensor()) : nullptr;
  ok = ok && t && t->shape == Shape{c};
  return t;
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
      if (!is_conv(conv) || !conv.args[1].is_tensor() || !g.is_constant(conv.args[1].tensor())) continue;
      const TensorRef wt = conv.args[1].tensor();
      const ir::ValueInfo& wi = g.value(wt);
      // The weights as the model gives them (float32), kept alive by the IR
      // or, for a made constant, by the Session that made it.
      const std::shared_ptr<const HostTensor> w = wi.data ? wi.data : wi.source;
      if (!w || w->dtype != DType::F32 || w->shape.size() < 3 || w->shape[0] < 1) continue;
      if (wi.dtype != DType::F32 && wi.dtype != DType::F16) continue;
      const int64_t co = w->shape[0];
      const Value eps_v = arg_or(bn, 6, Value(1e-5));
      if (!eps_v.is_double() && !eps_v.is_int()) continue;
      const double eps = eps_v.is_double() ? std::get<double>(eps_v.v) : double(std::get<int64_t>(eps_v.v));
      bool ok = true;
      const Value bias_v = arg_or(conv, 2, Value(None{}));
      const auto bias = channel_values(g, bias_v, co, true, ok);
      const auto gamma = channel_values(g, bn.args[1], co, true, ok);
      const auto beta = channel_values(g, bn.args[2], co, true, ok);
      const auto mean = channel_values(g, bn.args[3], co, false, ok);
      const auto var = channel_values(g, bn.args[4], co, false, ok);
      if (!ok) continue;
      std::vector<double> scale(static_cast<size_t>(co)), shift(static_cast<size_t>(co));
      for (int64_t c = 0; c < co; ++c) {
        const size_t k = size_t(c);
        scale[k] = (gamma ? double(gamma->as<float>()[c]) : 1.0) / std::sqrt(double(var->as<float>()[c]) + eps);
        shift[k] = (beta ? double(beta->as<float>()[c]) : 0.0) - double(mean->as<float>()[c]) * scale[k];
        if (!std::isfinite(scale[k]) || !std::isfinite(shift[k])) ok = false;
      }
      if (!ok) continue;
      ir::Node n = conv;
      if (wi.dtype == DType::F16) {
        // The convolution as it is, the normalization in its epilogue.
        std::optional<ValueList> args = as_padded(g, conv);
        if (!args) continue;
        ValueList& a = *args;
        a.resize(std::max<size_t>(a.size(), 14), Value(None{}));
        if (a[9].is_none()) a[9] = std::string("none");
        if (a[10].is_none()) a[10] = 0.0;
        if (a[11].is_none()) a[11] = 0.0;
        HostTensor aff(DType::F32, {2, co});
        for (int64_t c = 0; c < co; ++c) {
          aff.as<float>()[c] = float(scale[size_t(c)]);
          aff.as<float>()[co + c] = float(shift[size_t(c)]);
        }
        a[12] = g.constant(std::move(aff), wi.name + ":bn_affine");
        a[13] = true;
        n.op = "wgnn.convolution_padded.default";
        n.args = std::move(a);
      } else {
        HostTensor nb(DType::F32, {co});
        for (int64_t c = 0; c < co; ++c) {
          const double b = bias ? double(bias->as<float>()[c]) : 0.0;
          nb.as<float>()[c] = float(b * scale[size_t(c)] + shift[size_t(c)]);
        }
        // Each weight times its channel's scale in double, rounded once.
        const int64_t per = w->numel() / co;
        auto fold = [w, co, per, scale](HostTensor& out) {
          out.dtype = DType::F32;
          out.shape = w->shape;
          out.data.clear();  // no move of the old bytes when it grows
          out.data.resize(size_t(w->numel()) * 4);
          const float* wv = w->as<float>();
          float* wo = out.as<float>();
          for (int64_t o = 0; o < co; ++o) {
            const size_t base = size_t(o * per);
            const double s = scale[size_t(o)];
            for (size_t k = 0; k < size_t(per); ++k) wo[base + k] = float(double(wv[base + k]) * s);
          }
        };
        const std::string memos[] = {memo_of(g, conv.args[1]), memo_of(g, bias_v), memo_of(g, bn.args[1]),
                                     memo_of(g, bn.args[2]), memo_of(g, bn.args[3]), memo_of(g, bn.args[4])};
        bool made = true;
        for (const std::string& m : memos) made = made && !m.empty();
        n.args.resize(std::max<size_t>(n.args.size(), 3));
        if (made) {
          const std::string memo = fmt::format("bn_folded({}, {}, {}, {}, {}, {}, {:a})", memos[0], memos[1], memos[2],
                                               memos[3], memos[4], memos[5], eps);
          n.args[1] = g.made_constant(
              DType::F32, w->shape, memo,
              [fold](HostTensor& scratch) -> const HostTensor& {
                fold(scratch);
                return scratch;
              },
              wi.name + ":bn_folded");
        } else {
          HostTensor nw;
          fold(nw);
          n.args[1] = g.constant(std::move(nw), wi.name + ":bn_folded");
        }
        n.args[2] = g.constant(std::move(nb), wi.name + ":bn_folded_bias");
      }
      n.outputs = {bn.outputs[0]};
      n.unfused = {conv, bn};
      n.label = name();
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

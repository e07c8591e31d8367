// ONNX RNN, GRU and LSTM (opsets 7 and 14) -> one matrix product for the
// input projection of every time step and direction (x W^T + Wb), then
// wgnn.recurrent (ops/recurrent.cpp) for the steps. Every direction,
// activation (with activation_alpha / activation_beta), optional input
// (sequence_lens, initial_h, initial_c, P), clip, layout, GRU's
// linear_before_reset and LSTM's input_forget.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "onnx/host_ops.h"
#include "onnx/mappers_control.h"
#include "onnx/node_ctx.h"

namespace wgnn::onnx_import {
namespace {

struct Activation {
  int code;
  int alphas, betas;  // how many of activation_alpha / activation_beta it takes (0 or 1)
  double alpha, beta;  // the defaults (those of the ONNX operators of the same name)
};

// kernels/recurrent.wgsl's codes.
Activation activation(NodeCtx& c, std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  if (name == "relu") return {0, 0, 0, 0, 0};
  if (name == "tanh") return {1, 0, 0, 0, 0};
  if (name == "sigmoid") return {2, 0, 0, 0, 0};
  if (name == "affine") return {3, 1, 1, 1.0, 0.0};
  if (name == "leakyrelu") return {4, 1, 0, 0.01, 0};
  if (name == "thresholdedrelu") return {5, 1, 0, 1.0, 0};
  if (name == "scaledtanh") return {6, 1, 1, 1.0, 1.0};
  if (name == "hardsigmoid") return {7, 1, 1, 0.2, 0.5};
  if (name == "elu") return {8, 1, 0, 1.0, 0};
  if (name == "softsign") return {9, 0, 0, 0, 0};
  if (name == "softplus") return {10, 0, 0, 0, 0};
  c.unsupported(fmt::format("activation '{}' (accepted: Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
                            "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)",
                            name));
}

std::vector<Slot> recurrent(NodeCtx& c, const std::string& kind) {
  const int64_t G = kind == "rnn" ? 1 : kind == "gru" ? 3 : 4;
  const std::string direction = c.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    c.fail(fmt::format("direction '{}'; accepted: forward, reverse, bidirectional", direction));
  }
  const int64_t D = direction == "bidirectional" ? 2 : 1;
  const bool batch_first = c.attr_int("layout", 0) == 1;
  const Shape& xs = c.shape(0);
  const Shape& ws = c.shape(1);
  const Shape& rs = c.shape(2);
  if (xs.size() != 3) c.fail(fmt::format("X has shape {}; expected rank 3", shape_str(xs)));
  const int64_t T = batch_first ? xs[1] : xs[0], B = batch_first ? xs[0] : xs[1], I = xs[2];
  if (ws.size() != 3 || ws[0] != D || ws[1] % G != 0 || ws[2] != I) {
    c.fail(fmt::format("W has shape {}; expected [{}, {}*hidden_size, {}]", shape_str(ws), D, G, I));
  }
  const int64_t H = ws[1] / G;
  if (c.has_attr("hidden_size") && c.attr_int("hidden_size", 0) != H) {
    c.fail(fmt::format("hidden_size is {} but W has shape {}", c.attr_int("hidden_size", 0), shape_str(ws)));
  }
  if (rs != Shape{D, G * H, H}) c.fail(fmt::format("R has shape {}; expected [{}, {}, {}]", shape_str(rs), D, G * H, H));
  if (T == 0 || B == 0) c.unsupported(fmt::format("an empty sequence or batch (X {})", shape_str(xs)));

  // Activations: the defaults, or the list (one set per direction).
  std::vector<std::string> names;
  if (const auto* a = c.attr("activations")) {
    for (const auto& s : a->strings()) names.push_back(s);
  }
  const size_t per_dir = kind == "lstm" ? 3 : kind == "gru" ? 2 : 1;
  if (names.empty()) {
    const std::vector<std::string> def = kind == "lstm"  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                         : kind == "gru" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                         : std::vector<std::string>{"Tanh"};
    for (int64_t d = 0; d < D; ++d) names.insert(names.end(), def.begin(), def.end());
  }
  if (names.size() != per_dir * size_t(D)) {
    c.fail(fmt::format("activations lists {} functions; {} takes {} per direction ({} directions)", names.size(),
                       c.node.op_type(), per_dir, D));
  }
  // activation_alpha / activation_beta are consumed, in order, by the
  // functions that take them; a function past the end of the list takes its
  // operator's default.
  std::vector<float> alphas, betas;
  if (const auto* a = c.attr("activation_alpha")) alphas.assign(a->floats().begin(), a->floats().end());
  if (const auto* a = c.attr("activation_beta")) betas.assign(a->floats().begin(), a->floats().end());
  size_t na = 0, nb = 0;
  IntList acts(size_t(3 * D), 1);
  ValueList alpha(size_t(3 * D), Value(0.0)), beta(size_t(3 * D), Value(0.0));
  for (int64_t d = 0; d < D; ++d) {
    for (size_t k = 0; k < per_dir; ++k) {
      const Activation f = activation(c, names[size_t(d) * per_dir + k]);
      const size_t at = size_t(3 * d) + k;
      acts[at] = f.code;
      double av = f.alpha, bv = f.beta;
      if (f.alphas && na < alphas.size()) av = alphas[na++];
      if (f.betas && nb < betas.size()) bv = betas[nb++];
      alpha[at] = av;
      beta[at] = bv;
    }
  }

  // x W^T + Wb for every step: [T*B, I] x [D*G*H, I]^T.
  TensorRef x = c.tensor(0);
  if (batch_first) x = c.call("aten.permute.default", {x, IntList{1, 0, 2}}).tensor();
  x = c.view(x, {T * B, I});
  const TensorRef w = c.view(c.tensor(1), {D * G * H, I});
  Value wb = None{}, rb = None{};
  if (c.has(3)) {
    const Shape& bs = c.shape(3);
    if (bs != Shape{D, 2 * G * H}) c.fail(fmt::format("B has shape {}; expected [{}, {}]", shape_str(bs), D, 2 * G * H));
    if (c.is_host(3)) {
      const HostTensor& b = c.host(3, "B");
      const HostTensor b3 = host::reshape(b, {D, 2, G * H});
      wb = c.constant(host::reshape(host::slice(b3, {0}, {1}, {1}, {}), {D * G * H}), c.node.input(3) + ".Wb");
      rb = c.constant(host::reshape(host::slice(b3, {1}, {2}, {1}, {}), {D, G * H}), c.node.input(3) + ".Rb");
    } else {
      const TensorRef b3 = c.view(c.tensor(3), {D, 2, G * H});
      wb = c.view(c.call("aten.slice.Tensor", {b3, int64_t(1), int64_t(0), int64_t(1), int64_t(1)}).tensor(), {D * G * H});
      rb = c.view(c.call("aten.slice.Tensor", {b3, int64_t(1), int64_t(1), int64_t(2), int64_t(1)}).tensor(), {D, G * H});
    }
  }
  const TensorRef proj = c.view(c.call("aten.linear.default", {x, w, wb}).tensor(), {T, B, D * G * H});

  Value seq = None{};
  if (c.has(4)) {
    if (c.shape(4) != Shape{B}) c.fail(fmt::format("sequence_lens has shape {}; expected [{}]", shape_str(c.shape(4)), B));
    if (c.is_host(4)) {
      for (int64_t v : c.host_ints(4, "sequence_lens")) {
        if (v < 0 || v > T) c.fail(fmt::format("sequence_lens holds {}; each must lie in [0, {}]", v, T));
      }
      seq = c.constant(host::cast(c.host(4, "sequence_lens"), DType::I32), c.node.input(4));
    } else {
      // Values beyond [0, T] are clamped by the kernel.
      TensorRef s = c.tensor(4);
      if (c.g.info(s).dtype != DType::I32) s = c.call("aten._to_copy.default", {s, int64_t(3)}).tensor();
      seq = s;
    }
  }
  auto state_in = [&](size_t i, const char* what) -> Value {
    if (!c.has(i)) return None{};
    const Shape want = batch_first ? Shape{B, D, H} : Shape{D, B, H};
    if (c.shape(i) != want) c.fail(fmt::format("{} has shape {}; expected {}", what, shape_str(c.shape(i)), shape_str(want)));
    TensorRef t = c.tensor(i);
    if (batch_first) t = c.call("aten.permute.default", {t, IntList{1, 0, 2}}).tensor();
    return t;
  };
  const Value h0 = state_in(5, "initial_h");
  const Value c0 = kind == "lstm" ? state_in(6, "initial_c") : Value(None{});
  Value p = None{};
  if (kind == "lstm" && c.has(7)) {
    if (c.shape(7) != Shape{D, 3 * H}) c.fail(fmt::format("P has shape {}; expected [{}, {}]", shape_str(c.shape(7)), D, 3 * H));
    p = c.tensor(7);
  }
  IntList rev;
  for (int64_t d = 0; d < D; ++d) rev.push_back(direction == "reverse" || d == 1 ? 1 : 0);
  const Value clip = c.has_attr("clip") ? Value(double(c.attr_float("clip", 0))) : Value(None{});
  const bool lbr = kind == "gru" && c.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = kind == "lstm" && c.attr_int("input_forget", 0) != 0;
  Value r = c.call("wgnn.recurrent.default", {std::string(kind), proj, c.tensor(2), rb, seq, h0, c0, p, acts, alpha, beta,
                                              rev, clip, lbr, input_forget, std::string("auto")});
  const ValueList& outs = r.list();
  std::vector<Slot> result;
  TensorRef y = outs[0].tensor();  // [T, D, B, H]
  if (batch_first) y = c.call("aten.permute.default", {y, IntList{2, 0, 1, 3}}).tensor();
  result.push_back(c.out(y));
  for (size_t k = 1; k < outs.size(); ++k) {
    TensorRef s = outs[k].tensor();  // [D, B, H]
    if (batch_first) s = c.call("aten.permute.default", {s, IntList{1, 0, 2}}).tensor();
    result.push_back(c.out(s));
  }
  return result;
}

}  // namespace

void add_rnn_mappers(std::map<std::string, OpMapper>& m) {
  const std::vector<DType> floats = {DType::F32, DType::F16};
  m["RNN"] = {floats, [](NodeCtx& c) { return recurrent(c, "rnn"); }, nullptr};
  m["GRU"] = {floats, [](NodeCtx& c) { return recurrent(c, "gru"); }, nullptr};
  m["LSTM"] = {floats, [](NodeCtx& c) { return recurrent(c, "lstm"); }, nullptr};
}

}  // namespace wgnn::onnx_import

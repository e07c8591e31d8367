#pragma once
// Internal to passes/: an activation node as an epilogue applies it
// (ops::ActivationSpec, the one list of ops/epilogue.h: relu, clamp with
// finite bounds, gelu, gelu_tanh, silu), written into a fused node's
// arguments by name (ops::NamedArgs::set_activation).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "ops/epilogue.h"
#include "ops/schema.h"
#include "passes/passes.h"

namespace wgnn::passes {

using ops::Activation;
using ops::ActivationSpec;

// The activation node `n` is, when an epilogue with one of `accepted` can
// apply it instead (clamp: each bound a finite number, or absent: the float
// range's end; in order); else nullopt.
inline std::optional<ActivationSpec> activation_of(const ir::Node& n, bool gelu_ok, bool silu_ok = false) {
  auto number = [&](size_t i) -> std::optional<double> {
    if (i >= n.args.size()) return std::nullopt;
    const Value& v = n.args[i];
    if (v.is_double()) return std::get<double>(v.v);
    if (v.is_int()) return double(std::get<int64_t>(v.v));
    return std::nullopt;
  };
  if (n.args.empty() || !n.args[0].is_tensor()) return std::nullopt;
  if (n.op == "aten.relu.default" && n.args.size() == 1) return ActivationSpec{Activation::Relu};
  if (n.op == "aten.clamp.default" && n.args.size() == 3) {
    // An absent bound (None: ONNX's Clip with one bound) is the float
    // range's end, as the epilogue's clamp is in f32.
    constexpr double kMax = 3.4028234663852886e38;
    const auto lo = n.args[1].is_none() ? std::optional<double>(-kMax) : number(1);
    const auto hi = n.args[2].is_none() ? std::optional<double>(kMax) : number(2);
    if (!lo || !hi || !std::isfinite(*lo) || !std::isfinite(*hi) || *lo > *hi) return std::nullopt;
    if (n.args[1].is_none() && n.args[2].is_none()) return std::nullopt;
    return ActivationSpec{Activation::Clamp, std::max(*lo, -kMax), std::min(*hi, kMax)};
  }
  if (silu_ok && n.op == "aten.silu.default" && n.args.size() == 1) return ActivationSpec{Activation::Silu};
  if (gelu_ok && n.op == "aten.gelu.default" && n.args.size() <= 2) {
    std::string approx = "none";
    if (n.args.size() == 2) {
      if (!std::holds_alternative<std::string>(n.args[1].v)) return std::nullopt;
      approx = std::get<std::string>(n.args[1].v);
    }
    if (approx == "none") return ActivationSpec{Activation::Gelu};
    if (approx == "tanh") return ActivationSpec{Activation::GeluTanh};
  }
  return std::nullopt;
}

// Node i as an activation an epilogue can take, with the live node that
// produces its input and that only it reads: where the fusion passes
// (fuse_conv_activation, fuse_matmul_activation, fuse_norm_activation)
// start. nullopt for anything else.
struct ActivationSite {
  ActivationSpec act;
  int producer = -1;
};
// `silu_ok`: where the epilogue takes SiLU (the products' only).
inline std::optional<ActivationSite> activation_site(const ir::Graph& g, size_t i, bool silu_ok = false) {
  const ir::Node& n = g.nodes()[i];
  if (n.dead) return std::nullopt;
  auto act = activation_of(n, true, silu_ok);
  if (!act) return std::nullopt;
  const TensorRef x = n.args[0].tensor();
  const int p = g.producer(x);
  if (p < 0 || sole_user(g, x) != int(i)) return std::nullopt;
  return ActivationSite{std::move(*act), p};
}

}  // namespace wgnn::passes

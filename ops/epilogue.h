#pragma once
// The epilogue of the convolution and matrix-product kernels, the tensor-core
// ones included: what each result goes through before it is stored, in this
// order: alpha * result + beta * bias, then a per-channel affine (scale,
// shift: an inference batch norm folded in), then a residual (a tensor of
// the result's shape added: convolutions; the tensor-core ones add it in a
// dispatch after theirs), then one activation. One
// numbering of the activations for every kernel: the codes of
// ops/kernels/lib/activation.wgsl.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "gpu/context.h"

namespace wgnn::ops {

struct Args;

enum class Activation : uint32_t { None = 0, Relu = 1, Clamp = 2, Gelu = 3, GeluTanh = 4, Silu = 5 };

struct ActivationSpec {
  Activation act = Activation::None;
  double lo = 0, hi = 0;  // Clamp's bounds
  bool none() const { return act == Activation::None; }
  uint32_t code() const { return uint32_t(act); }
};

// The name an op argument gives it: "none", "relu", "clamp", "gelu",
// "gelu_tanh", "silu".
std::string_view activation_name(Activation a);
// The activation an op's string argument names, among those the op accepts;
// anything else fails naming the argument and the accepted names.
Activation parse_activation(const Args& a, std::string_view value, std::initializer_list<Activation> accepted);
// The override constants of lib/activation.wgsl (ACT, LO, HI).
gpu::Constants activation_constants(const ActivationSpec& s);
// " relu", " clamp", ... for kernel labels ("" for none).
std::string activation_label(Activation a);

}  // namespace wgnn::ops

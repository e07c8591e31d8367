#include "ops/epilogue.h"

#include <fmt/format.h>

#include "ops/helpers.h"

namespace wgnn::ops {

std::string_view activation_name(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::Relu: return "relu";
    case Activation::Clamp: return "clamp";
    case Activation::Gelu: return "gelu";
    case Activation::GeluTanh: return "gelu_tanh";
    case Activation::Silu: return "silu";
  }
  return "?";
}

Activation parse_activation(const Args& a, std::string_view value, std::initializer_list<Activation> accepted) {
  std::string names;
  for (Activation x : accepted) {
    if (activation_name(x) == value) return x;
    names += fmt::format("{}'{}'", names.empty() ? "" : ", ", activation_name(x));
  }
  a.fail(fmt::format("argument 'act' is '{}'; accepted: {}", value, names));
}

gpu::Constants activation_constants(const ActivationSpec& s) {
  return {{"ACT", double(s.code())}, {"LO", s.lo}, {"HI", s.hi}};
}

std::string activation_label(Activation a) {
  if (a == Activation::None) return "";
  std::string s = " " + std::string(activation_name(a));
  for (char& c : s) c = c == '_' ? '-' : c;
  return s;
}

}  // namespace wgnn::ops

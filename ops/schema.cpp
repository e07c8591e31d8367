#include "ops/schema.h"

#include <fmt/format.h>

#include "gpu/error.h"

namespace wgnn::ops {

namespace {

ArgSchema req(std::string name) { return ArgSchema{std::move(name), true, Value(None{})}; }
ArgSchema opt(std::string name, Value def) { return ArgSchema{std::move(name), false, std::move(def)}; }

// The epilogue's activation, last in every op that takes one.
void add_activation(std::vector<ArgSchema>& args) {
  args.push_back(opt("act", std::string("none")));
  args.push_back(opt("lo", 0.0));
  args.push_back(opt("hi", 0.0));
}

std::vector<OpSchema> make() {
  std::vector<OpSchema> v;
  {
    // ops/conv.cpp: aten.convolution's arguments, begin and end pads, then
    // the epilogue (act, lo, hi, affine, affine_rounded, residual).
    OpSchema s{"wgnn.convolution_padded.default",
               {req("input"), req("weight"), req("bias"), req("stride"), req("padding"), req("dilation"),
                req("transposed"), req("output_padding"), req("groups")}};
    add_activation(s.args);
    s.args.push_back(opt("affine", None{}));
    s.args.push_back(opt("affine_rounded", false));
    s.args.push_back(opt("residual", None{}));
    v.push_back(std::move(s));
  }
  {
    // ops/matmul.cpp
    OpSchema s{"wgnn.matmul_add.default",
               {req("self"), req("other"), opt("bias", None{}), opt("alpha", 1.0), opt("act", std::string("none")),
                opt("trans_self", false), opt("trans_other", false), opt("lo", 0.0), opt("hi", 0.0),
                opt("residual", None{})}};
    v.push_back(std::move(s));
  }
  {
    // ops/norm.cpp: aten._native_batch_norm_legit_no_training's, then the activation.
    OpSchema s{"wgnn.batch_norm_activation.default",
               {req("input"), req("weight"), req("bias"), req("running_mean"), req("running_var"),
                opt("momentum", 0.1), opt("eps", 1e-5)}};
    add_activation(s.args);
    v.push_back(std::move(s));
  }
  {
    // ops/norm.cpp: aten.instance_norm's, then the activation.
    OpSchema s{"wgnn.instance_norm_activation.default",
               {req("input"), req("weight"), req("bias"), req("running_mean"), req("running_var"),
                req("use_input_stats"), req("momentum"), req("eps"), req("cudnn_enabled")}};
    add_activation(s.args);
    v.push_back(std::move(s));
  }
  return v;
}

}  // namespace

size_t OpSchema::index(std::string_view name) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == name) return i;
  std::string names;
  for (const ArgSchema& a : args) names += (names.empty() ? "" : ", ") + a.name;
  throw Error(fmt::format("{} has no argument '{}' (its arguments: {})", op, name, names));
}

const std::vector<OpSchema>& schemas() {
  static const std::vector<OpSchema> all = make();
  return all;
}

const OpSchema* find_schema(std::string_view op) {
  for (const OpSchema& s : schemas())
    if (s.op == op) return &s;
  return nullptr;
}

const OpSchema& schema(std::string_view op) {
  if (const OpSchema* s = find_schema(op)) return *s;
  throw Error(fmt::format("no schema is declared for {} (ops/schema.cpp)", op));
}

NamedArgs::NamedArgs(std::string_view op, ValueList& args) : s_(schema(op)), args_(args) {
  if (args_.size() > s_.args.size()) {
    throw Error(fmt::format("{} takes at most {} arguments; the node has {}", s_.op, s_.args.size(), args_.size()));
  }
}

const Value& NamedArgs::get(std::string_view name) const {
  const size_t i = s_.index(name);
  return i < args_.size() ? args_[i] : s_.args[i].def;
}

void NamedArgs::set(std::string_view name, Value v) {
  const size_t i = s_.index(name);
  for (size_t k = args_.size(); k < i; ++k) {
    if (s_.args[k].required) {
      throw Error(fmt::format("{}: setting '{}' past required argument '{}', which the node leaves out", s_.op, name,
                              s_.args[k].name));
    }
    args_.push_back(s_.args[k].def);
  }
  if (i < args_.size()) {
    args_[i] = std::move(v);
  } else {
    args_.push_back(std::move(v));
  }
}

void NamedArgs::default_if_none(std::string_view name) {
  if (get(name).is_none()) set(name, s_.args[s_.index(name)].def);
}

void NamedArgs::set_activation(const ActivationSpec& a) {
  set("act", std::string(activation_name(a.act)));
  set("lo", a.lo);
  set("hi", a.hi);
}

ActivationSpec NamedArgs::activation() const {
  ActivationSpec a;
  const Value& act = get("act");
  if (act.is_none()) return a;
  if (!std::holds_alternative<std::string>(act.v)) throw Error(fmt::format("{}: argument 'act' is {}", s_.op, act.describe()));
  const std::string& name = std::get<std::string>(act.v);
  for (Activation x : {Activation::None, Activation::Relu, Activation::Clamp, Activation::Gelu, Activation::GeluTanh,
                       Activation::Silu}) {
    if (activation_name(x) == name) a.act = x;
  }
  if (activation_name(a.act) != name) throw Error(fmt::format("{}: argument 'act' is '{}', no activation", s_.op, name));
  auto number = [&](const char* n) {
    const Value& v = get(n);
    return v.is_double() ? std::get<double>(v.v) : v.is_int() ? double(std::get<int64_t>(v.v)) : 0.0;
  };
  a.lo = number("lo"), a.hi = number("hi");
  return a;
}

}  // namespace wgnn::ops

#pragma once
// Internal to passes/: a convolution node's arguments in the form of
// wgnn.convolution_padded.default (ops/conv.cpp), for the passes that fuse
// into its epilogue (fuse_conv_activation.cpp, fuse_conv_residual.cpp).
#include <optional>

#include "ir/graph.h"
#include "passes/passes.h"

namespace wgnn::passes {

// The spatial dims of a convolution: its weight's rank - 2, where the IR
// knows the weight's shape (a constant or an input).
inline int spatial_dims(const ir::Graph& g, const Value& w) {
  if (!w.is_tensor()) return -1;
  const ir::ValueInfo& v = g.value(w.tensor());
  if (v.kind == ir::ValueKind::Result || v.shape.size() < 3) return -1;
  return int(v.shape.size()) - 2;
}

// aten.convolution's list argument i (one value, d values, or None: def
// for each) as d values; nullopt when it is something else.
inline std::optional<IntList> spatial_list(const ir::Node& n, size_t i, int d, int64_t def) {
  if (i >= n.args.size() || n.args[i].is_none()) return IntList(size_t(d), def);
  if (!n.args[i].is_int_list()) return std::nullopt;
  const IntList& v = std::get<IntList>(n.args[i].v);
  if (v.size() == 1) return IntList(size_t(d), v[0]);
  if (v.size() != size_t(d)) return std::nullopt;
  return v;
}

// A convolution node with no activation as wgnn.convolution_padded's
// arguments (at least 12: through lo and hi), or nullopt (another op, a
// transposed convolution, an activation already applied).
inline std::optional<ValueList> as_padded(const ir::Graph& g, const ir::Node& c) {
  const Value none = None{};
  if (c.op == "wgnn.convolution_padded.default") {
    if (c.args.size() < 2 || c.args.size() > 15) return std::nullopt;
    const Value& act = arg_or(c, 9, Value(std::string("none")));
    if (!std::holds_alternative<std::string>(act.v) || std::get<std::string>(act.v) != "none") return std::nullopt;
    const Value& tr = arg_or(c, 6, Value(false));
    if (!tr.is_bool() || std::get<bool>(tr.v)) return std::nullopt;
    ValueList a = c.args;
    a.resize(std::max<size_t>(a.size(), 12));
    for (size_t i = c.args.size(); i < 12; ++i) a[i] = none;
    if (a[10].is_none()) a[10] = 0.0;
    if (a[11].is_none()) a[11] = 0.0;
    if (a[6].is_none()) a[6] = false;
    if (a[8].is_none()) a[8] = int64_t(1);
    return a;
  }
  if (c.op != "aten.convolution.default" || c.args.size() < 2 || c.args.size() > 9) return std::nullopt;
  const Value& tr = arg_or(c, 6, Value(false));
  if (!tr.is_bool() || std::get<bool>(tr.v)) return std::nullopt;
  const int d = spatial_dims(g, c.args[1]);
  if (d < 1) return std::nullopt;
  const auto stride = spatial_list(c, 3, d, 1), pad = spatial_list(c, 4, d, 0), dil = spatial_list(c, 5, d, 1),
             out_pad = spatial_list(c, 7, d, 0);
  if (!stride || !pad || !dil || !out_pad) return std::nullopt;
  IntList pads = *pad;
  pads.insert(pads.end(), pad->begin(), pad->end());
  const Value& groups = arg_or(c, 8, Value(int64_t(1)));
  return ValueList{c.args[0], c.args[1], arg_or(c, 2, none), *stride, pads, *dil, false, *out_pad,
                   groups.is_none() ? Value(int64_t(1)) : groups};
}

}  // namespace wgnn::passes

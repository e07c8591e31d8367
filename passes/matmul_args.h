#pragma once
// Internal to passes/: a matrix product node's arguments in the form of
// wgnn.matmul_add.default (ops/matmul.cpp), for the passes that fuse into
// its epilogue (fuse_matmul_activation.cpp, fuse_matmul_residual.cpp).
#include <optional>
#include <string>

#include "ir/graph.h"
#include "passes/passes.h"

namespace wgnn::passes {

// aten.linear(x, w, b?) -> matmul_add(x, w, b, 1, 'none', False, True);
// aten.matmul / aten.mm -> matmul_add(x, y, None, 1, 'none'); a
// wgnn.matmul_add without a residual as it is, with its defaults filled in
// (9 arguments: through lo and hi). With `plain`, only a product with no
// activation. nullopt for anything else.
inline std::optional<ValueList> as_matmul_add(const ir::Node& p, bool plain) {
  const Value none = None{};
  const ValueList defaults{none, none, none, 1.0, std::string("none"), false, false, 0.0, 0.0};
  ValueList a;
  if (p.op == "aten.linear.default" && p.args.size() >= 2 && p.args.size() <= 3) {
    a = {p.args[0], p.args[1], arg_or(p, 2, none), 1.0, std::string("none"), false, true};
  } else if ((p.op == "aten.matmul.default" || p.op == "aten.mm.default") && p.args.size() == 2) {
    a = {p.args[0], p.args[1]};
  } else if (p.op == "wgnn.matmul_add.default" && p.args.size() >= 2 && p.args.size() <= 9) {
    a = p.args;
    const Value& act = arg_or(p, 4, Value(std::string("none")));
    if (!act.is_none() && !std::holds_alternative<std::string>(act.v)) return std::nullopt;
    if (plain && !act.is_none() && std::get<std::string>(act.v) != "none") return std::nullopt;
  } else {
    return std::nullopt;
  }
  while (a.size() < defaults.size()) a.push_back(defaults[a.size()]);
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].is_none() && !defaults[i].is_none()) a[i] = defaults[i];
  }
  return a;
}

}  // namespace wgnn::passes

#include "ops/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace wgnn::ops {

// Declared here rather than in registry.h, whose every includer would
// rebuild: ops/topk.cpp, ops/scatter.cpp, ops/cumsum.cpp, ops/grid_sample.cpp,
// ops/window.cpp.
void register_topk_ops(OpRegistry& r);
void register_window_ops(OpRegistry& r);
void register_scatter_ops(OpRegistry& r);
void register_cumsum_ops(OpRegistry& r);
void register_grid_sample_ops(OpRegistry& r);
void register_rotary_ops(OpRegistry& r);
void register_kv_present_ops(OpRegistry& r);

OpRegistry& OpRegistry::global() {
  static OpRegistry* r = [] {
    auto* reg = new OpRegistry();
    register_elementwise_ops(*reg);
    register_norm_ops(*reg);
    register_binary_ops(*reg);
    register_movement_ops(*reg);
    register_reduce_ops(*reg);
    register_conv_ops(*reg);
    register_matmul_ops(*reg);
    register_resize_ops(*reg);
    register_attention_ops(*reg);
    register_rotary_ops(*reg);
    register_kv_present_ops(*reg);
    register_quantized_ops(*reg);
    register_recurrent_ops(*reg);
    register_sample_ops(*reg);
    register_topk_ops(*reg);
    register_scatter_ops(*reg);
    register_cumsum_ops(*reg);
    register_grid_sample_ops(*reg);
    register_window_ops(*reg);
    register_spectral_ops(*reg);
    register_dynamic_ops(*reg);
    return reg;
  }();
  return *r;
}

void OpRegistry::add(std::string name, OpFn fn) {
  if (ops_.count(name)) throw Error(fmt::format("op '{}' registered twice", name));
  ops_.emplace(std::move(name), std::move(fn));
}

bool OpRegistry::has(std::string_view name) const { return ops_.find(name) != ops_.end(); }

const OpFn& OpRegistry::get(std::string_view name) const {
  auto it = ops_.find(name);
  if (it != ops_.end()) return it->second;
  // Suggest registered ops that share the base name ("aten.relu" of "aten.relu.out").
  std::string base(name.substr(0, name.rfind('.')));
  std::vector<std::string> near;
  for (const auto& [k, v] : ops_) {
    if (!base.empty() && k.rfind(base, 0) == 0) near.push_back(k);
  }
  throw Unsupported(fmt::format("unknown op '{}'{}", name,
                          near.empty() ? std::string(" (see `wgnn ops` for the supported ones)")
                                       : fmt::format("; registered with that name: {}", fmt::join(near, ", "))));
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : ops_) out.push_back(k);
  return out;
}

Value call(Graph& g, std::string_view name, const ValueList& args) { return OpRegistry::global().get(name)(g, args); }

}  // namespace wgnn::ops

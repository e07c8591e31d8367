#pragma once
// The operator registry: ATen-style names ("aten.relu.default") mapped to
// functions that validate their arguments, add output tensors to the graph
// and record dispatches. Ops never call WebGPU directly.
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"

namespace wgnn::ops {

using OpFn = std::function<Value(Graph&, const ValueList&)>;

class OpRegistry {
 public:
  static OpRegistry& global();
  void add(std::string name, OpFn fn);
  bool has(std::string_view name) const;
  // Throws wgnn::Error naming the op (and similar registered names).
  const OpFn& get(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, OpFn, std::less<>> ops_;
};

// Calls the op `name` on `args` in `g`.
Value call(Graph& g, std::string_view name, const ValueList& args);

// Registration, one function per op family (called once by global()).
void register_elementwise_ops(OpRegistry& r);
void register_norm_ops(OpRegistry& r);
void register_binary_ops(OpRegistry& r);
void register_movement_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_conv_ops(OpRegistry& r);
void register_matmul_ops(OpRegistry& r);
void register_resize_ops(OpRegistry& r);
void register_attention_ops(OpRegistry& r);
void register_quantized_ops(OpRegistry& r);
void register_recurrent_ops(OpRegistry& r);  // ops/recurrent.cpp
void register_sample_ops(OpRegistry& r);     // ops/sample.cpp
void register_spectral_ops(OpRegistry& r);   // ops/spectral.cpp
void register_dynamic_ops(OpRegistry& r);    // ops/dynamic.cpp

}  // namespace wgnn::ops

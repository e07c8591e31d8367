#pragma once
// Rewrites of the model IR (ir/graph.h), one pass per file, as ONNX
// Runtime's graph transformers: each finds its pattern in the ATen
// vocabulary and replaces it, whoever built the IR (the ONNX importer or a
// caller of the C++ API). A fused node keeps the chain it replaced
// (ir::Node::unfused), which a plan lowers instead where the shapes or
// dtypes of that plan do not allow the fused op.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace wgnn::gpu {
class Context;
}

namespace wgnn::passes {

struct PassContext {
  // The device constant folding evaluates on (the ops' own kernels: one
  // definition of each op's semantics); null: no folding.
  gpu::Context* ctx = nullptr;
  // Constant folding makes no constant larger than this (bytes).
  uint64_t max_folded_bytes = uint64_t(64) << 20;
  // The device the plan is for, where a fusion's worth depends on its
  // kernels (fuse_attention); null: as for a device without tensor cores.
  const gpu::Context* device = nullptr;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual const char* name() const = 0;
  // Rewrites `g`; returns how many rewrites it made (0: unchanged).
  virtual size_t apply(ir::Graph& g, const PassContext& pc) const = 0;
};

// The passes, each in its own file.
std::unique_ptr<Pass> dead_code();             // dead_code.cpp
std::unique_ptr<Pass> fold_constants();        // fold_constants.cpp
std::unique_ptr<Pass> fuse_gelu();             // fuse_gelu.cpp
std::unique_ptr<Pass> fuse_rms_norm();         // fuse_rms_norm.cpp
std::unique_ptr<Pass> fuse_rotary();           // fuse_rotary.cpp
std::unique_ptr<Pass> sink_views();            // sink_views.cpp
std::unique_ptr<Pass> fuse_attention();        // fuse_attention.cpp
std::unique_ptr<Pass> fuse_silu();             // fuse_silu.cpp
std::unique_ptr<Pass> fuse_silu_mul();         // fuse_silu_mul.cpp
std::unique_ptr<Pass> fuse_matmul_add();       // fuse_matmul_add.cpp
std::unique_ptr<Pass> fuse_conv_batch_norm();  // fuse_conv_batch_norm.cpp
std::unique_ptr<Pass> fuse_conv_residual();    // fuse_conv_residual.cpp
std::unique_ptr<Pass> fuse_conv_activation();  // fuse_conv_activation.cpp
std::unique_ptr<Pass> fuse_matmul_activation();  // fuse_matmul_activation.cpp
std::unique_ptr<Pass> fuse_add_layer_norm();   // fuse_add_layer_norm.cpp
std::unique_ptr<Pass> fuse_conv_channels_last();  // fuse_conv_channels_last.cpp
std::unique_ptr<Pass> fuse_matmul_residual();  // fuse_matmul_residual.cpp
std::unique_ptr<Pass> fuse_attention_scale();  // fuse_attention_scale.cpp
std::unique_ptr<Pass> fuse_qkv_projection();   // fuse_qkv_projection.cpp
std::unique_ptr<Pass> fuse_row_products();     // fuse_qkv_projection.cpp
std::unique_ptr<Pass> join_rotary();           // join_rotary.cpp
std::unique_ptr<Pass> fuse_matmul_silu_mul();  // fuse_silu_mul.cpp
std::unique_ptr<Pass> fuse_matmul_scale();     // fuse_matmul_scale.cpp
std::unique_ptr<Pass> fuse_permute_add();      // fuse_permute_add.cpp
std::unique_ptr<Pass> fuse_norm_activation();  // fuse_norm_activation.cpp
std::unique_ptr<Pass> fuse_matmul_layer_norm();  // fuse_matmul_layer_norm.cpp
std::unique_ptr<Pass> channels_last_blocks();    // channels_last_blocks.cpp
std::unique_ptr<Pass> fuse_window_partition();   // fuse_window_partition.cpp
std::unique_ptr<Pass> cancel_permutes();         // cancel_permutes.cpp
std::unique_ptr<Pass> fuse_matmul_dequant();     // fuse_matmul_dequant.cpp
std::unique_ptr<Pass> fold_dequantize();         // fuse_matmul_dequant.cpp
std::unique_ptr<Pass> common_subexpressions();   // common_subexpressions.cpp

struct OptimizeOptions {
  PassContext context;
  // Fusion passes on (a Session sets it from SessionOptions::fusion and the
  // setting WGNN_NO_FUSION).
  bool fusion = true;
  // Passes to leave out, by name, comma-separated (the setting
  // WGNN_DISABLE_PASSES: A/B measurements, narrowing down a fault), as
  // ONNX Runtime's disabled_optimizers. An unknown name is an Error.
  std::string disabled;
};

struct Report {
  std::vector<std::pair<std::string, size_t>> applied;  // pass, rewrites (those that made any)
  size_t count(const std::string& pass) const;
  std::string summary() const;  // "fuse_matmul_activation 2, dead_code 1"
};

// The default pipeline, in order: a product of dequantized constant
// weights as one op, and the other dequantized constants folded (both
// before constant folding), constant folding (when pc.ctx is set),
// a depthwise convolution between channel permutes, window attention's
// partition and reverse (with their pad, crop and residual add), GELU chains, scalar
// factors on attention's q or k, attention as exporters write it (after
// torch.export's views are moved out of the way) as one op, RMS norms, rotary positions and SiLU
// written out, matmul + scales / transposed operands /
// bias, attention's q, k and v products as one, a per-column constant
// scale after a product, a step's products of one row as one (then q's and
// k's rotary positions as one, SwiGLU's gate in the product's epilogue), conv + batch
// norm, conv + residual add, conv + activation, matmul + activation, batch
// or instance norm (or a concatenation of them) + activation, add +
// layer or RMS norm, matmul + residual add, an add of a permute, a channels-first
// stream of channels-last blocks run channels last (then matmul + residual
// add again), dead code; the graph compacted at the end.
Report optimize(ir::Graph& g, const OptimizeOptions& options = {});

// Shared by the fusion passes: the single live node that reads `v` when
// it is read by exactly one node, once, and is not a model output; else -1.
int sole_user(const ir::Graph& g, TensorRef v);
// The value of a one-element float32 / float16 constant as the model gives
// it (ir::Graph::model_values: its data, or a made constant's source);
// nullopt for anything else.
std::optional<double> scalar_value(const ir::Graph& g, TensorRef v);
// A constant's float32 values: the model's where it is stored as float32 or
// as float16 made from them, or a float16 constant folded on the host
// widened; null for anything else (optimize.cpp says more).
std::shared_ptr<const HostTensor> f32_values(const ir::Graph& g, TensorRef v);
// The memo naming a constant in the plans' store (a made constant: a
// model's initializer, or one a pass made from such), "none" for None, or
// empty: a constant made from memoized ones can be memoized too, so that a
// later plan neither makes nor hashes it again.
std::string memo_of(const ir::Graph& g, const Value& v);
// The strides of a strided view of shape `size`, `stride` read as shape
// `to` without moving an element (how torch's view() decides), or none
// where that needs a copy (and for no elements or no dims).
std::optional<Shape> view_strides(const Shape& size, const Shape& stride, const Shape& to);
// An argument, or `def` when the node has fewer; a copy, so that a
// temporary default may be bound to a reference (`const Value& v =
// arg_or(n, 3, Value(1.0))`) without dangling.
Value arg_or(const ir::Node& n, size_t i, const Value& def);
// Node i when it is a live, unfused node of `op` with one result; else null.
const ir::Node* live_node(const ir::Graph& g, int i, const char* op);
// An int or double argument equal to x.
bool is_number(const Value& v, double x);
// aten.add.Tensor of two tensors with alpha 1 (given or left out): a plain sum.
bool is_plain_add(const ir::Node& n);

}  // namespace wgnn::passes

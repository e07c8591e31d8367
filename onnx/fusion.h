#pragma once
// Internal to onnx/: chains of ONNX nodes that the importer records as one
// op (fewer dispatches), found on the graph's structure before it is built.
// The fusions that the IR expresses are passes over the IR instead
// (passes/: GELU chains; a MatMul's scalar factors, transposed operands
// and bias; a convolution's residual add and activation; a product's
// activation (a GELU after a MatMul); an add before a layer norm), which
// apply to every model, imported or built through the C++ API; these are
// the chains not yet moved there.
//
//   - Conv (constant float32 weights and bias) followed by an inference
//     BatchNormalization with constant parameters, the Conv's result read by
//     it alone -> one Conv: in float32 mode with the normalization folded
//     into its weights and bias on the host (w * gamma / sqrt(var + eps),
//     (b - mean) * that + beta), as ONNX Runtime's Conv+BatchNormalization
//     fusion does; in float16 mode with the weights unchanged and the
//     normalization as a float32 scale and shift per output channel
//     (computed in double) applied in the convolution's epilogue to its
//     result rounded to float16 (wgnn.convolution_padded's affine and
//     affine_rounded: the unfused values);
//   - such a Conv + BatchNormalization whose result (or its sum with
//     another value, a residual) only a Relu or a Clip with constant bounds
//     reads -> the residual and the activation in the convolution's
//     epilogue;
//   - attention: MatMul(q, k^T), optionally times or divided by a constant
//     scalar, optionally plus a mask, Softmax over the last dim, MatMul with
//     v, optionally then a Transpose and a Reshape (the heads merged back);
//     q and k^T may each carry a scalar factor (exported
//     scaled_dot_product_attention multiplies both by sqrt(scale)) ->
//     wgnn.attention.default, one dispatch. q, k^T and v are traced back
//     through Transpose / Reshape / Split / Squeeze / Unsqueeze nodes to the
//     tensors they were cut from, and the attention reads those in place
//     through strides (the packed q/k/v projection, k stored untransposed);
//     those view nodes are still built, and their copies, now unread, are
//     dropped with the graph's other dead dispatches;
//   - DequantizeLinear of constant 8-bit weights [K, N] (one scale and zero
//     point, or one per column or row; not blocked) read by a MatMul alone
//     as its B -> wgnn.matmul_dequant.default: the product reads the 8-bit
//     weights, four to a word, and dequantizes them as it goes (the QDQ
//     form of quantize_static; unfused, the weights would be dequantized
//     on the host into a float copy four times their size).
//
// A chain is fused only when every value inside it is used by the next node
// of the chain alone and is not a graph output. What depends on values
// (constants within tolerance, dtypes, shapes) is checked when the graph is
// built (try_fusion); a chain that fails a check is built node by node, as
// unfused. WGNN_NO_FUSION=1 in the environment (or SessionOptions::fusion
// false) turns fusion off.
#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "onnx/node_ctx.h"

namespace wgnn::onnx_import {

struct Fusion {
  enum class Kind { ConvBn, Attention, DqMatMul } kind = Kind::Attention;
  std::vector<int> nodes;  // the chain's nodes, ascending; the last one produces the result
  int anchor = -1;         // the node errors name
  std::string x;           // ConvBn: the Conv's input; Attention: q's source (below); DqMatMul: the MatMul's A
  std::string w;           // ConvBn: the weights; Attention: k^T's source
  // Attention: scalars multiplying q or k^T or the scores, or dividing the
  // scores (true), folded into its scale.
  std::vector<std::pair<std::string, bool>> scales;
  std::string bias;        // ConvBn: the Conv's bias
  std::vector<std::string> bn;  // ConvBn: scale, B, mean, var
  std::vector<std::string> dq;  // DqMatMul: the DequantizeLinear's x, scale and zero point ("": none)
  int act_node = -1;            // ConvBn: the Relu or Clip node applied in the epilogue
  // ConvBn: the other operand of an Add of the batch norm's result, added
  // in the epilogue before the activation ("": none).
  std::string residual;
  // Attention: `x`, `w` and `v` are the values q, k^T and v were cut from,
  // and views[0..2] the view nodes from there to the products' operands
  // (forward order, with the output each step passes on); `scales` the
  // scalar factors; `mask` the added mask ("": none).
  struct ViewStep {
    int node = -1;
    std::string out;
  };
  std::vector<ViewStep> views[3];
  std::string v, mask;
  int out_transpose = -1, out_reshape = -1;
};

// The chains of `g` (nodes topologically sorted) that may be fused, no node
// in two of them. The constants a chain needs must be initializers,
// Constant nodes' outputs or Identity nodes' of those.
std::vector<Fusion> plan_fusions(const onnx::GraphProto& g);

// Whether fusion is on: not when WGNN_NO_FUSION is set to anything but "" or "0".
bool fusion_enabled(const Settings& settings);

// Builds the fused op when the values allow it (the constants match, float
// dtypes, shapes the fused op gives the same result for), returning the
// result for the chain's last node; nullopt: build the nodes one by one.
std::optional<Slot> try_fusion(const Fusion& f, Graph& g, IrTrace* trace, const onnx::GraphProto& graph, int opset, const Storage& storage,
                               std::map<std::string, Slot>& values);

}  // namespace wgnn::onnx_import

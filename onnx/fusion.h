#pragma once
// Internal to onnx/: the one chain of ONNX nodes the importer still records
// as one op, found on the graph's structure before it is built. Every
// other fusion is a pass over the IR (passes/: attention, convolution +
// batch norm, GELU chains, products' epilogues, ...), which applies to
// every front end's model.
//
//   - DequantizeLinear of constant 8-bit weights [K, N] (one scale and zero
//     point, or one per column or row; not blocked) read by a MatMul alone
//     as its B -> wgnn.matmul_dequant.default: the product reads the 8-bit
//     weights, four to a word, and dequantizes them as it goes (the QDQ
//     form of quantize_static; unfused, the weights would be dequantized
//     on the host into a float copy four times their size). It stays here
//     because the importer folds a DequantizeLinear of constants on the
//     host, so the IR never sees one.
//
// The chain is fused only when the dequantized weights are read by the
// MatMul alone and are not a graph output. What depends on values (dtypes,
// shapes) is checked when the graph is built (try_fusion); a chain that
// fails a check is built node by node. WGNN_NO_FUSION=1 in the environment
// (or SessionOptions::fusion false) turns fusion off, here and in the IR
// passes.
#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "onnx/node_ctx.h"

namespace wgnn::onnx_import {

struct Fusion {
  enum class Kind { DqMatMul } kind = Kind::DqMatMul;
  std::vector<int> nodes;  // the chain's nodes, ascending; the last one produces the result
  int anchor = -1;         // the node errors name
  std::string x;           // the MatMul's A
  std::vector<std::string> dq;  // the DequantizeLinear's x, scale and zero point ("": none)
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

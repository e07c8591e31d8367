#pragma once
// Models of ONNX opsets 1 to 6 (before numpy broadcasting, opset 7). The
// mappers implement each operator's opset-7-and-later definition, and read
// the few older forms they know (onnx/mappers.cpp: the binary operators'
// `broadcast` / `axis`, BatchNormalization's `is_test`, Dropout's
// `is_test`, Pad's `paddings`, Reshape's `shape` attribute, Concat's default
// axis, Split's `split` input). An operator is accepted at an older opset
// only when its definition there is one of those: the list in
// old_opsets.cpp says from which opset on, for each operator.
#include <string>
#include <vector>

namespace onnx {
class GraphProto;
}  // namespace onnx

namespace wgnn::onnx_import {

// The nodes of `g` (subgraphs included) whose operator wgnn does not take
// at opset `opset` (< 7), one line each; empty when all are taken.
std::vector<std::string> old_opset_problems(const onnx::GraphProto& g, int opset);

}  // namespace wgnn::onnx_import

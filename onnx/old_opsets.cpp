#include "onnx/old_opsets.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <map>

#include "onnx/schema_check.h"

namespace wgnn::onnx_import {
namespace {

// Operator -> the first opset from which its definition is what wgnn's
// mapper reads (the older forms listed in old_opsets.h included). Cast 1
// names its target type as a string; Tile 1 takes `tiles` and `axis`.
// Min, Max, Sum and Mean 1 to 7 take equal shapes only, which numpy
// broadcasting computes alike. Operators not listed are refused below
// opset 7.
const std::map<std::string, int>& first_opset() {
  static const std::map<std::string, int> m = {
      {"Abs", 1}, {"Add", 1}, {"And", 1}, {"ArgMax", 1}, {"ArgMin", 1}, {"AveragePool", 1},
      {"BatchNormalization", 1}, {"Cast", 6}, {"Ceil", 1}, {"Clip", 1}, {"Concat", 1}, {"Constant", 1},
      {"Conv", 1}, {"ConvTranspose", 1}, {"DepthToSpace", 1}, {"Div", 1}, {"Dropout", 1}, {"Elu", 1}, {"Equal", 1}, {"Exp", 1},
      {"Flatten", 1}, {"Floor", 1}, {"Gather", 1}, {"Gemm", 1}, {"GlobalAveragePool", 1}, {"GlobalMaxPool", 1},
      {"Greater", 1}, {"HardSigmoid", 1}, {"Hardmax", 1}, {"Identity", 1}, {"InstanceNormalization", 1}, {"LRN", 1}, {"LeakyRelu", 1},
      {"Less", 1}, {"Log", 1}, {"LogSoftmax", 1}, {"MatMul", 1}, {"Max", 1}, {"MaxPool", 1}, {"Mean", 1},
      {"Min", 1}, {"Mul", 1}, {"Neg", 1}, {"Not", 1}, {"Or", 1}, {"PRelu", 1}, {"Pad", 1}, {"Pow", 1},
      {"Reciprocal", 1}, {"ReduceL1", 1}, {"ReduceL2", 1}, {"ReduceLogSum", 1}, {"ReduceLogSumExp", 1},
      {"ReduceMax", 1}, {"ReduceMean", 1}, {"ReduceMin", 1}, {"ReduceProd", 1}, {"ReduceSum", 1},
      {"ReduceSumSquare", 1}, {"Relu", 1}, {"Reshape", 1}, {"Selu", 1}, {"Shape", 1}, {"Sigmoid", 1},
      {"Size", 1}, {"Slice", 1}, {"Softmax", 1}, {"Softplus", 1}, {"Softsign", 1}, {"SpaceToDepth", 1}, {"Split", 1}, {"Sqrt", 1},
      {"Squeeze", 1}, {"Sub", 1}, {"Sum", 1}, {"Tanh", 1}, {"Tile", 6}, {"Transpose", 1}, {"Unsqueeze", 1},
      {"Xor", 1},
  };
  return m;
}

void walk(const onnx::GraphProto& g, int opset, std::vector<std::string>& out) {
  const auto& first = first_opset();
  for (const auto& n : g.node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;  // other domains: reported by the importer
    auto it = first.find(n.op_type());
    if (it == first.end()) {
      out.push_back(fmt::format("node '{}' ({}, opset {}): operator not supported before opset 7", node_name(n),
                                n.op_type(), opset));
    } else if (opset < it->second) {
      out.push_back(fmt::format("node '{}' ({}, opset {}): supported from opset {} (its older form differs)",
                                node_name(n), n.op_type(), opset, it->second));
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) walk(a.g(), opset, out);
      for (const auto& sub : a.graphs()) walk(sub, opset, out);
    }
  }
}

}  // namespace

std::vector<std::string> old_opset_problems(const onnx::GraphProto& g, int opset) {
  std::vector<std::string> out;
  if (opset < 7) walk(g, opset, out);
  return out;
}

}  // namespace wgnn::onnx_import

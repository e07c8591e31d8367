// A model's local functions (ModelProto.functions: exporters write a
// module or a custom op as one) inlined into its graph when it loads, so
// that everything after sees plain nodes.
// Internal to onnx/.
#pragma once

namespace onnx {
class ModelProto;
}

namespace wgnn::onnx_import {

// Replaces every call of a local function (a node whose domain, op_type and
// overload name one) in the main graph and in the subgraphs of If, Loop and
// Scan by the function's nodes: formal inputs and outputs become the
// call's values, the body's own values and node names get a prefix unique
// to the call, attributes referring to the caller's (ref_attr_name) take
// its value or the function's default. Calls inside functions inline too;
// a chain deeper than 64 calls (recursion), or more than a million nodes
// made, is an Error. Unsupported: a
// function whose body holds subgraphs, or that imports another ONNX opset
// than the model's. Then the model's function list is cleared.
void inline_local_functions(onnx::ModelProto& model, int opset);

}  // namespace wgnn::onnx_import

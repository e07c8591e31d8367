#pragma once
// The ONNX rules a model must follow before anything runs, checked at load
// time (onnx/session.cpp, check_model), each an Error naming the node, the
// value or the attribute, what it is and what is required:
//
// - check_graph_rules: single assignment. Initializer and graph input names
//   are unique; no node writes a graph input or an initializer; no value is
//   written by two nodes (or twice by one); the graph has outputs, none of
//   them named "".
// - check_node_schemas: every node of the default domain against its
//   operator's schema in libonnx (onnx::OpSchemaRegistry) for the model's
//   opset: input and output counts, required inputs not left empty,
//   attribute names and types, required attributes.
//
// libonnx (Debian's 1.12) knows opsets up to 17. For a later opset, schemas
// may have changed, so only the types of attributes that the newest known
// schema declares are checked (an attribute's type does not change between
// versions); counts, unknown and required attributes are not. An operator
// libonnx does not know, and other domains, are not checked here (the
// importer reports unsupported operators itself).
#include <string>

namespace onnx {
class GraphProto;
class NodeProto;
}  // namespace onnx

namespace wgnn::onnx_import {

// A node's name for messages: its name, else its first output's.
std::string node_name(const onnx::NodeProto& n);

void check_graph_rules(const onnx::GraphProto& g);
void check_node_schemas(const onnx::GraphProto& g, int opset);

// The newest default-domain opset whose schemas libonnx has.
int schema_max_opset();

}  // namespace wgnn::onnx_import

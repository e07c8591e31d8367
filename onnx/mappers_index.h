#pragma once
// Internal to onnx/: the mappers of the indexing and scan operators (TopK,
// GatherND, ScatterND, ScatterElements, Scatter, CumSum, Einsum, ...:
// onnx/mappers_index.cpp), added to the op table by make_mappers() in
// onnx/mappers.cpp.
#include <map>
#include <string>

#include "onnx/node_ctx.h"

namespace wgnn::onnx_import {

void add_index_mappers(std::map<std::string, OpMapper>& m);

}  // namespace wgnn::onnx_import

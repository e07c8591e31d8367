#pragma once
// Internal to onnx/: the quantized operators' mappers (onnx/mappers_quant.cpp),
// added to the op table by make_mappers() in onnx/mappers.cpp.
#include <map>
#include <string>

#include "onnx/node_ctx.h"

namespace wgnn::onnx_import {

void add_quant_mappers(std::map<std::string, OpMapper>& m);

}  // namespace wgnn::onnx_import

#pragma once
// Internal to onnx/: the mappers of control flow (If, Loop, Scan:
// onnx/mappers_control.cpp) and of recurrent layers (RNN, GRU, LSTM:
// onnx/mappers_rnn.cpp), added to the op table by make_mappers() in
// onnx/mappers.cpp.
#include <map>
#include <string>

#include "onnx/node_ctx.h"

namespace wgnn::onnx_import {

void add_control_mappers(std::map<std::string, OpMapper>& m);
void add_rnn_mappers(std::map<std::string, OpMapper>& m);

}  // namespace wgnn::onnx_import

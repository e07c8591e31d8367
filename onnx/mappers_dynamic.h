#pragma once
// Internal to onnx/: the mappers of the operators whose result size depends
// on the data (NonZero, Compress, Unique, NonMaxSuppression:
// onnx/mappers_dynamic.cpp) and of the audio front-end operators (DFT,
// STFT, the window functions, MelWeightMatrix: onnx/mappers_signal.cpp),
// added to the op table by make_mappers() in onnx/mappers.cpp.
#include <map>
#include <string>

#include "onnx/node_ctx.h"

namespace wgnn::onnx_import {

void add_dynamic_mappers(std::map<std::string, OpMapper>& m);
void add_signal_mappers(std::map<std::string, OpMapper>& m);

}  // namespace wgnn::onnx_import

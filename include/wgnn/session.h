#pragma once
// An ONNX model on the GPU: wgnn::Session (onnx_import::Session), its options
// and the descriptions of its inputs and outputs.
#include "onnx/session.h"

namespace wgnn {
using Session = onnx_import::Session;
using SessionOptions = onnx_import::SessionOptions;
using ValueInfo = onnx_import::ValueInfo;
}  // namespace wgnn

#pragma once
// An ONNX model on the GPU: wgnn::Session (onnx_import::Session), its options
// and the descriptions of its inputs and outputs; Feeds and Fetches for runs
// whose inputs or outputs stay on the GPU (DeviceTensor, IO binding).
#include "onnx/session.h"

namespace wgnn {
using Session = onnx_import::Session;
using SessionOptions = onnx_import::SessionOptions;
using ValueInfo = onnx_import::ValueInfo;
using Feeds = onnx_import::Feeds;
using HostInput = onnx_import::HostInput;
using Fetches = onnx_import::Fetches;
}  // namespace wgnn

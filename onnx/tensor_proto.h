#pragma once
// ONNX TensorProto <-> HostTensor, and ONNX element types <-> DType.
#include <string>

#include "graph/host_tensor.h"

namespace onnx {
class TensorProto;
}

namespace wgnn::onnx_import {

// DType of an ONNX element type; throws Error naming `what` and the type for
// those wgnn does not hold (string, double, bfloat16, complex, ...).
DType dtype_from_onnx(int elem_type, const std::string& what);
const char* onnx_type_name(int elem_type);
int onnx_from_dtype(DType d);

// The tensor's data, from raw_data, the typed fields, or external data
// (location relative to `base_dir`, offset and length as ONNX defines them).
HostTensor from_tensor_proto(const onnx::TensorProto& t, const std::string& base_dir);

}  // namespace wgnn::onnx_import

#pragma once
// ONNX TensorProto <-> HostTensor, and ONNX element types <-> DType.
#include <string>
#include <string_view>

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
// int4 / uint4 (ONNX TensorProto.DataType 22 / 21): from_tensor_proto
// unpacks such initializers to int8 / uint8, one value a byte.
bool is_4bit(int elem_type);
// The same where the tensor's raw_data was taken out of the proto before
// parsing (onnx/model_bytes.h): `raw`, when given, stands for it.
HostTensor from_tensor_proto(const onnx::TensorProto& t, const std::string& base_dir, const std::string_view* raw);

}  // namespace wgnn::onnx_import

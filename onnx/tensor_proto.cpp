#include "onnx/tensor_proto.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "gpu/error.h"
#include "graph/half.h"

namespace wgnn::onnx_import {

const char* onnx_type_name(int t) {
  static const char* names[] = {"undefined", "float",  "uint8",     "int8",      "uint16",   "int16",
                                "int32",     "int64",  "string",    "bool",      "float16",  "double",
                                "uint32",    "uint64", "complex64", "complex128", "bfloat16"};
  return t >= 0 && t < int(sizeof(names) / sizeof(names[0])) ? names[t] : "unknown";
}

DType dtype_from_onnx(int t, const std::string& what) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::F32;
    case onnx::TensorProto::FLOAT16: return DType::F16;
    case onnx::TensorProto::INT32: return DType::I32;
    case onnx::TensorProto::INT64: return DType::I64;
    case onnx::TensorProto::BOOL: return DType::Bool;
    case onnx::TensorProto::UINT8: return DType::U8;
    case onnx::TensorProto::INT8: return DType::I8;
    default:
      throw Unsupported(fmt::format("{}: element type {} ({}) is not supported; accepted: float, float16, int32, int64, "
                              "bool, uint8, int8",
                              what, onnx_type_name(t), t));
  }
}

int onnx_from_dtype(DType d) {
  switch (d) {
    case DType::F32: return onnx::TensorProto::FLOAT;
    case DType::F16: return onnx::TensorProto::FLOAT16;
    case DType::I32: return onnx::TensorProto::INT32;
    case DType::I64: return onnx::TensorProto::INT64;
    case DType::Bool: return onnx::TensorProto::BOOL;
    case DType::U8: return onnx::TensorProto::UINT8;
    case DType::I8: return onnx::TensorProto::INT8;
  }
  return 0;
}

namespace {

std::string read_external(const onnx::TensorProto& t, const std::string& base_dir, size_t want) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::stoll(kv.value());
    else if (kv.key() == "length") length = std::stoll(kv.value());
  }
  if (location.empty()) throw Error(fmt::format("tensor '{}': external data without a location", t.name()));
  namespace fs = std::filesystem;
  const fs::path p = fs::path(location).is_absolute() ? fs::path(location) : fs::path(base_dir) / location;
  // ONNX requires the location to stay inside the model's folder.
  const auto rel = fs::weakly_canonical(p).lexically_relative(fs::weakly_canonical(base_dir));
  if (rel.empty() || *rel.begin() == "..") {
    throw Error(fmt::format("tensor '{}': external data location '{}' lies outside the model's folder", t.name(),
                            location));
  }
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(fmt::format("tensor '{}': cannot open external data file '{}'", t.name(), p.string()));
  in.seekg(0, std::ios::end);
  const int64_t file_size = in.tellg();
  if (length < 0) length = file_size - offset;
  if (offset < 0 || offset + length > file_size || size_t(length) != want) {
    throw Error(fmt::format("tensor '{}': external data (offset {}, length {}) does not match the file '{}' of {} "
                            "bytes and the {} bytes the tensor needs",
                            t.name(), offset, length, p.string(), file_size, want));
  }
  std::string data(size_t(length), '\0');
  in.seekg(offset);
  in.read(data.data(), length);
  if (!in) throw Error(fmt::format("tensor '{}': reading external data failed", t.name()));
  return data;
}

template <typename Field>
void require_count(const onnx::TensorProto& t, const Field& f, int64_t n, const char* field) {
  if (int64_t(f.size()) != n) {
    throw Error(fmt::format("tensor '{}': {} holds {} values, the shape needs {}", t.name(), field, f.size(), n));
  }
}

}  // namespace

HostTensor from_tensor_proto(const onnx::TensorProto& t, const std::string& base_dir) {
  const std::string what = fmt::format("tensor '{}'", t.name());
  const DType dtype = dtype_from_onnx(t.data_type(), what);
  Shape shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape) {
    if (d < 0) throw Error(fmt::format("{}: negative dimension in {}", what, shape_str(shape)));
  }
  HostTensor out(dtype, shape);
  const int64_t n = out.numel();
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    const std::string data = read_external(t, base_dir, out.nbytes());
    if (!data.empty()) std::memcpy(out.data.data(), data.data(), data.size());
    return out;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != out.nbytes()) {
      throw Error(fmt::format("{}: raw_data has {} bytes; shape {} of {} needs {}", what, t.raw_data().size(),
                              shape_str(shape), dtype_name(dtype), out.nbytes()));
    }
    if (out.nbytes()) std::memcpy(out.data.data(), t.raw_data().data(), out.nbytes());
    return out;
  }
  switch (dtype) {
    case DType::F32:
      require_count(t, t.float_data(), n, "float_data");
      for (int64_t i = 0; i < n; ++i) out.as<float>()[i] = t.float_data(int(i));
      break;
    case DType::I64:
      require_count(t, t.int64_data(), n, "int64_data");
      for (int64_t i = 0; i < n; ++i) out.as<int64_t>()[i] = t.int64_data(int(i));
      break;
    case DType::I32:
      require_count(t, t.int32_data(), n, "int32_data");
      for (int64_t i = 0; i < n; ++i) out.as<int32_t>()[i] = t.int32_data(int(i));
      break;
    case DType::F16:  // bit patterns in int32_data
      require_count(t, t.int32_data(), n, "int32_data");
      for (int64_t i = 0; i < n; ++i) out.as<uint16_t>()[i] = uint16_t(t.int32_data(int(i)));
      break;
    case DType::Bool:
    case DType::U8:
      require_count(t, t.int32_data(), n, "int32_data");
      for (int64_t i = 0; i < n; ++i) out.as<uint8_t>()[i] = uint8_t(t.int32_data(int(i)));
      break;
    case DType::I8:
      require_count(t, t.int32_data(), n, "int32_data");
      for (int64_t i = 0; i < n; ++i) out.as<int8_t>()[i] = int8_t(t.int32_data(int(i)));
      break;
  }
  return out;
}

}  // namespace wgnn::onnx_import

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
                                "uint32",    "uint64", "complex64", "complex128", "bfloat16",
                                // The 8-, 6-, 4- and 2-bit types of later ONNX (TensorProto.DataType).
                                "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
                                "float4e2m1", "float8e8m0", "uint2", "int2", "float6e2m3", "float6e3m2"};
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

// A non-negative decimal number of an external_data entry.
int64_t external_number(const onnx::TensorProto& t, const std::string& key, const std::string& value) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || v < 0) {
    throw Error(fmt::format("tensor '{}': external data {} '{}' is not a non-negative integer", t.name(), key, value));
  }
  return v;
}

std::string read_external(const onnx::TensorProto& t, const std::string& base_dir, size_t want) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = external_number(t, kv.key(), kv.value());
    else if (kv.key() == "length") length = external_number(t, kv.key(), kv.value());
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
  // Only a regular file: a FIFO would block the load forever, a device or a
  // folder is no tensor data.
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (ec || !fs::exists(st)) {
    throw Error(fmt::format("tensor '{}': cannot open external data file '{}': no such file", t.name(), p.string()));
  }
  if (!fs::is_regular_file(st)) {
    throw Error(fmt::format("tensor '{}': external data location '{}' is not a regular file", t.name(), location));
  }
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(fmt::format("tensor '{}': cannot open external data file '{}'", t.name(), p.string()));
  in.seekg(0, std::ios::end);
  const int64_t file_size = in.tellg();
  if (length < 0) length = file_size - offset;
  if (offset > file_size || length < 0 || length > file_size - offset || uint64_t(length) != want) {
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

}  // namespace

HostTensor from_tensor_proto(const onnx::TensorProto& t, const std::string& base_dir) {
  return from_tensor_proto(t, base_dir, nullptr);
}

// TensorProto.DataType values newer than the ONNX the project builds against.
constexpr int kUint4 = 21, kInt4 = 22;

bool is_4bit(int elem_type) { return elem_type == kInt4 || elem_type == kUint4; }

namespace {

// int4 / uint4: two values a byte, the first in the low nibble (an odd
// count leaves the last high nibble unused); int32_data holds one such
// byte an entry. Unpacked to int8 (sign-extended) / uint8.
HostTensor unpack_4bit(const onnx::TensorProto& t, const std::string& base_dir, const std::string_view* raw,
                       const std::string& what) {
  const bool sign = t.data_type() == kInt4;
  const DType dtype = sign ? DType::I8 : DType::U8;
  Shape shape(t.dims().begin(), t.dims().end());
  const uint64_t n = checked_nbytes(shape, 1, what);
  const uint64_t packed = (n + 1) / 2;
  std::string ext;
  std::string_view bytes;
  std::vector<uint8_t> from_ints;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    ext = read_external(t, base_dir, packed);
    bytes = ext;
  } else if (raw || t.has_raw_data()) {
    bytes = raw ? *raw : std::string_view(t.raw_data());
  } else {
    for (int32_t v : t.int32_data()) from_ints.push_back(uint8_t(v));
    bytes = std::string_view(reinterpret_cast<const char*>(from_ints.data()), from_ints.size());
  }
  if (bytes.size() != packed) {
    throw Error(fmt::format("{}: holds {} bytes of packed 4-bit values; shape {} needs {}", what, bytes.size(),
                            shape_str(shape), packed));
  }
  HostTensor out(dtype, std::move(shape));
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t nib = (uint8_t(bytes[i / 2]) >> (4 * (i % 2))) & 0x0f;
    out.data[i] = sign ? uint8_t(int8_t(nib << 4) >> 4) : nib;
  }
  return out;
}

}  // namespace

HostTensor from_tensor_proto(const onnx::TensorProto& t, const std::string& base_dir, const std::string_view* raw) {
  const std::string what = fmt::format("tensor '{}'", t.name());
  if (is_4bit(t.data_type())) return unpack_4bit(t, base_dir, raw, what);
  const DType dtype = dtype_from_onnx(t.data_type(), what);
  Shape shape(t.dims().begin(), t.dims().end());
  // Sizes are checked against the data present before anything is allocated.
  const uint64_t nbytes = checked_nbytes(shape, dtype_size(dtype), what);
  const int64_t n = int64_t(nbytes / dtype_size(dtype));
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    const std::string data = read_external(t, base_dir, nbytes);
    return HostTensor(dtype, std::move(shape), data.data());  // its size checked by read_external
  }
  if (raw || t.has_raw_data()) {
    const std::string_view bytes = raw ? *raw : std::string_view(t.raw_data());
    if (bytes.size() != nbytes) {
      throw Error(fmt::format("{}: raw_data has {} bytes; shape {} of {} needs {}", what, bytes.size(),
                              shape_str(shape), dtype_name(dtype), nbytes));
    }
    return HostTensor(dtype, std::move(shape), bytes.data());
  }
  const int64_t have = dtype == DType::F32 ? t.float_data_size() : dtype == DType::I64 ? t.int64_data_size() : t.int32_data_size();
  const char* field = dtype == DType::F32 ? "float_data" : dtype == DType::I64 ? "int64_data" : "int32_data";
  if (have != n) throw Error(fmt::format("{}: {} holds {} values, the shape {} needs {}", what, field, have, shape_str(shape), n));
  HostTensor out(dtype, shape);
  switch (dtype) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) out.as<float>()[i] = t.float_data(int(i));
      break;
    case DType::I64:
      for (int64_t i = 0; i < n; ++i) out.as<int64_t>()[i] = t.int64_data(int(i));
      break;
    case DType::I32:
      for (int64_t i = 0; i < n; ++i) out.as<int32_t>()[i] = t.int32_data(int(i));
      break;
    case DType::F16:  // bit patterns in int32_data
      for (int64_t i = 0; i < n; ++i) out.as<uint16_t>()[i] = uint16_t(t.int32_data(int(i)));
      break;
    case DType::Bool:
    case DType::U8:
      for (int64_t i = 0; i < n; ++i) out.as<uint8_t>()[i] = uint8_t(t.int32_data(int(i)));
      break;
    case DType::I8:
      for (int64_t i = 0; i < n; ++i) out.as<int8_t>()[i] = int8_t(t.int32_data(int(i)));
      break;
  }
  return out;
}

}  // namespace wgnn::onnx_import

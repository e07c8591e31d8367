#include "graph/tensor.h"

#include <climits>

#include "gpu/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace wgnn {

size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::Bool: return 1;
    case DType::U8: return 1;
    case DType::I8: return 1;
  }
  return 0;
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::Bool: return "bool";
    case DType::U8: return "uint8";
    case DType::I8: return "int8";
  }
  return "?";
}

size_t gpu_dtype_size(DType d) { return d == DType::F16 ? 2 : 4; }

const char* wgsl_type(DType d) {
  switch (d) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::I32:
    case DType::I64:
    case DType::I8: return "i32";
    case DType::Bool:
    case DType::U8: return "u32";
  }
  return "?";
}

std::vector<uint8_t> to_gpu_layout(DType d, const void* host, size_t count, const std::string& what) {
  std::vector<uint8_t> out(count * gpu_dtype_size(d));
  if (d == DType::F32 || d == DType::F16 || d == DType::I32) {
    if (count) std::memcpy(out.data(), host, out.size());
    return out;
  }
  auto* o32 = reinterpret_cast<int32_t*>(out.data());
  switch (d) {
    case DType::I64: {
      const auto* in = static_cast<const int64_t*>(host);
      for (size_t i = 0; i < count; ++i) {
        if (in[i] < INT32_MIN || in[i] > INT32_MAX) {
          throw Error(fmt::format("{}: int64 value {} at index {} is outside the int32 range that GPU storage "
                                  "holds (int64 tensors are stored as int32 on the GPU)",
                                  what, in[i], i));
        }
        o32[i] = int32_t(in[i]);
      }
      break;
    }
    case DType::Bool:
    case DType::U8: {
      const auto* in = static_cast<const uint8_t*>(host);
      for (size_t i = 0; i < count; ++i) o32[i] = d == DType::Bool ? (in[i] != 0) : in[i];
      break;
    }
    case DType::I8: {
      const auto* in = static_cast<const int8_t*>(host);
      for (size_t i = 0; i < count; ++i) o32[i] = in[i];
      break;
    }
    default: break;
  }
  return out;
}

void from_gpu_layout(DType d, const void* gpu, size_t count, void* host) {
  if (d == DType::F32 || d == DType::F16 || d == DType::I32) {
    if (count) std::memcpy(host, gpu, count * gpu_dtype_size(d));
    return;
  }
  const auto* in = static_cast<const int32_t*>(gpu);
  for (size_t i = 0; i < count; ++i) {
    switch (d) {
      case DType::I64: static_cast<int64_t*>(host)[i] = in[i]; break;
      case DType::Bool: static_cast<uint8_t*>(host)[i] = in[i] != 0; break;
      case DType::U8: static_cast<uint8_t*>(host)[i] = uint8_t(in[i]); break;
      case DType::I8: static_cast<int8_t*>(host)[i] = int8_t(in[i]); break;
      default: break;
    }
  }
}

uint64_t checked_nbytes(const Shape& s, size_t element_size, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw Error(fmt::format("{}: negative dimension in shape {}", what, shape_str(s)));
    if (d != 0 && n > INT64_MAX / d) throw Error(fmt::format("{}: shape {} has more elements than int64 counts", what, shape_str(s)));
    n *= d;
  }
  if (n > 0 && uint64_t(n) > UINT64_MAX / element_size) {
    throw Error(fmt::format("{}: shape {} is too large to hold in memory", what, shape_str(s)));
  }
  return uint64_t(n) * element_size;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (__builtin_mul_overflow(n, d, &n)) {
      throw Error(fmt::format("shape {} has more elements than int64 counts", shape_str(s)));
    }
  }
  return n;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::string Value::describe() const {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, None>) return "None";
        else if constexpr (std::is_same_v<T, TensorRef>) return "Tensor";
        else if constexpr (std::is_same_v<T, int64_t>) return fmt::format("Int {}", x);
        else if constexpr (std::is_same_v<T, double>) return fmt::format("Double {}", x);
        else if constexpr (std::is_same_v<T, bool>) return fmt::format("Bool {}", x);
        else if constexpr (std::is_same_v<T, IntList>) return fmt::format("IntList [{}]", fmt::join(x, ", "));
        else if constexpr (std::is_same_v<T, ValueList>) return fmt::format("ValueList of {}", x.size());
        else return fmt::format("String '{}'", x);
      },
      v);
}

}  // namespace wgnn

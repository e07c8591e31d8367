#include "graph/tensor.h"

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

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
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

#pragma once
// Tensors and values as ops receive them (ExecuTorch style): a tensor is an id
// into its Graph, which knows its shape, dtype and storage.
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

namespace wgnn {

enum class DType { F32, F16, I32, I64, Bool, U8, I8 };

// Bytes per element on the host (as in ONNX, numpy and ATen).
size_t dtype_size(DType d);
const char* dtype_name(DType d);

// Bytes per element in GPU storage. WGSL has 32-bit integers only and no
// 8-bit loads, so every non-float dtype is stored as 32 bits: int64 is
// narrowed to int32 (host values are checked on upload: a value outside the
// int32 range is an error, never silently truncated), bool and uint8 as u32,
// int8 as i32. float16 is 2 bytes, float32 4.
size_t gpu_dtype_size(DType d);
// The WGSL scalar type that stores `d` ("f32", "f16", "i32", "u32").
const char* wgsl_type(DType d);

// Host bytes -> GPU layout, and back. Throws Error (naming `what`) for an
// int64 value outside the int32 range.
std::vector<uint8_t> to_gpu_layout(DType d, const void* host, size_t count, const std::string& what);
void from_gpu_layout(DType d, const void* gpu, size_t count, void* host);

using Shape = std::vector<int64_t>;
// The product of the dims; throws Error if it overflows int64 (shapes may
// come from a model's data).
int64_t numel(const Shape& s);
// numel(s) * element_size for a shape read from a file: throws Error
// (naming `what`) for a negative dimension or a count that overflows int64.
// Call it before allocating anything of that size.
uint64_t checked_nbytes(const Shape& s, size_t element_size, const std::string& what);
std::string shape_str(const Shape& s);

// A tensor value: the id of a tensor in a Graph.
struct TensorRef {
  int id = -1;
  bool operator==(const TensorRef& o) const { return id == o.id; }
};

struct None {
  bool operator==(const None&) const { return true; }
};

struct Value;
using ValueList = std::vector<Value>;
using IntList = std::vector<int64_t>;

// An argument or result of an op: None, a tensor, an int, a double, a bool, a
// list of ints, or a list of values (multi-output ops return one).
struct Value {
  std::variant<None, TensorRef, int64_t, double, bool, IntList, ValueList, std::string> v;

  Value() = default;
  Value(None n) : v(n) {}
  Value(TensorRef t) : v(t) {}
  Value(int64_t i) : v(i) {}
  Value(int i) : v(int64_t(i)) {}
  Value(double d) : v(d) {}
  Value(bool b) : v(b) {}
  Value(IntList l) : v(std::move(l)) {}
  Value(ValueList l) : v(std::move(l)) {}
  Value(std::string s) : v(std::move(s)) {}

  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_tensor() const { return std::holds_alternative<TensorRef>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }
  bool is_double() const { return std::holds_alternative<double>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int_list() const { return std::holds_alternative<IntList>(v); }
  bool is_list() const { return std::holds_alternative<ValueList>(v); }
  TensorRef tensor() const { return std::get<TensorRef>(v); }
  const ValueList& list() const { return std::get<ValueList>(v); }
  // A short description for error messages ("Tensor", "Int 3", "None", ...).
  std::string describe() const;
};

}  // namespace wgnn

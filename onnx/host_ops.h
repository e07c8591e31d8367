#pragma once
// Host evaluation of small tensors for constant folding (shape arithmetic:
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains, Range,
// ConstantOfShape, Cast of constants, ...). Integers compute in int64,
// floats in double.
#include <string>

#include "graph/host_tensor.h"

namespace wgnn::onnx_import::host {

bool is_float(DType d);
double get(const HostTensor& t, size_t i);
int64_t get_int(const HostTensor& t, size_t i);
void set(HostTensor& t, size_t i, double v);  // converts to t's dtype
void set_int(HostTensor& t, size_t i, int64_t v);

HostTensor from_ints(const std::vector<int64_t>& v, DType dtype = DType::I64);
std::vector<int64_t> to_ints(const HostTensor& t);
HostTensor scalar_like(DType d, double v);

// Elementwise with numpy broadcasting. `op` is an ONNX op type: Add, Sub,
// Mul, Div, Pow, Min, Max, Mod, Equal, Less, LessOrEqual, Greater,
// GreaterOrEqual, And, Or, Xor.
HostTensor binary(const std::string& op, const HostTensor& a, const HostTensor& b, int fmod = 0);
// Neg, Abs, Not, Sqrt, Floor, Ceil, Reciprocal, Exp, Log, Relu, Sign.
HostTensor unary(const std::string& op, const HostTensor& a);
HostTensor where(const HostTensor& c, const HostTensor& a, const HostTensor& b);
HostTensor cast(const HostTensor& a, DType to);
HostTensor reshape(HostTensor a, const Shape& shape);
HostTensor gather(const HostTensor& data, const HostTensor& indices, int64_t axis);
HostTensor concat(const std::vector<const HostTensor*>& parts, int64_t axis);
HostTensor slice(const HostTensor& a, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                 const std::vector<int64_t>& axes, const std::vector<int64_t>& steps);
HostTensor expand(const HostTensor& a, const Shape& shape);
HostTensor transpose(const HostTensor& a, const std::vector<int64_t>& perm);
HostTensor reduce(const std::string& op, const HostTensor& a, std::vector<int64_t> axes, bool keepdims);
// Trilu: keeps element (r, c) of each trailing matrix when c - r >= k
// (upper) or c - r <= k (lower), zeroes the others.
HostTensor trilu(const HostTensor& a, int64_t k, bool upper);

}  // namespace wgnn::onnx_import::host

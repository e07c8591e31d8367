#pragma once
// Shapes, strides and broadcasting for ops over tensors of rank up to
// kMaxRank, and their packing into uniforms (WGSL: array<vec4<u32>, 2>).
#include <array>
#include <cstdint>
#include <string_view>

#include "graph/tensor.h"

namespace wgnn::ops {

inline constexpr int kMaxRank = 8;

// Eight u32 values, laid out as WGSL's array<vec4<u32>, 2> in a uniform
// (a shape or strides of rank <= 8; the kernel reads value i at [i / 4][i % 4]).
struct alignas(16) Dims : std::array<uint32_t, kMaxRank> {};

// Row-major strides of a contiguous tensor.
Shape contiguous_strides(const Shape& shape);

// numpy / ONNX multidirectional broadcasting of two shapes; throws an Error
// naming `op` and both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);

// Strides for reading a tensor of shape `in` at the indices of `out` (which
// `in` broadcasts to): right-aligned, 0 where `in` has size 1 or no dim.
// Returned with `out.size()` entries.
Shape broadcast_strides(const Shape& in, const Shape& out);

// Packs up to kMaxRank values (left-aligned, rest 0); throws if longer, or
// if a value does not fit u32.
Dims pack(const Shape& values, std::string_view op);

// An axis in [-rank, rank) made non-negative; throws naming op and argument.
int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view op, std::string_view name = "dim");

// Throws unless rank <= kMaxRank.
void require_rank(const Shape& shape, std::string_view op, std::string_view name);

}  // namespace wgnn::ops

#pragma once
// Internal to onnx/: what the op families' mappers share (defined in
// onnx/mappers.cpp): dtype lists, mapper builders for unary, binary,
// reduction and view ops, and the shape rules several families use. Each
// family is one file, onnx/mappers_<family>.cpp, with an add_<family>_mappers
// that make_mappers() calls.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "onnx/node_ctx.h"

namespace wgnn::onnx_import {

using Mappers = std::map<std::string, OpMapper>;
inline const std::vector<DType> kFloat = {DType::F32, DType::F16};
inline const std::vector<DType> kNumeric = {DType::F32, DType::F16, DType::I32, DType::I64};
inline const std::vector<DType> kBool = {DType::Bool};

// The families (onnx/mappers_elementwise.cpp, _nn, _shape, _reduce).
void add_elementwise_mappers(Mappers& m);
void add_nn_mappers(Mappers& m);
void add_shape_mappers(Mappers& m);
void add_reduce_mappers(Mappers& m);
void add_transformer_mappers(Mappers& m);  // onnx/mappers_transformer.cpp
void add_ort_contrib_mappers(Mappers& m);  // onnx/mappers_ort_contrib.cpp

std::vector<HostTensor> one_host(HostTensor t);
// A float32 table built on the host (a mask, a grid, a window of ones) as a
// constant of input 0's float dtype in the model (then stored as the
// session stores that dtype).
TensorRef float_table(NodeCtx& c, const HostTensor& f32);
// A table or constant an op builds on the host from attributes (Col2Im's
// zero image, AffineGrid's grid, LpPool's ones): an error when it would
// not fit one GPU buffer, before it is allocated.
void check_built_size(NodeCtx& c, double elements, size_t element_bytes, const char* what);
// The ATen ScalarType code of a dtype (aten._to_copy's argument).
int64_t aten_dtype_code(DType d);
// x as `to` (a view when it already is).
TensorRef cast_to(NodeCtx& c, TensorRef x, DType to);
// Output shape of Reshape (0 copies the input dim unless allowzero, -1 infers).
Shape reshape_target(const NodeCtx& c, const Shape& in, const std::vector<int64_t>& spec, bool allowzero);
// A view op whose result shape `shape_of` gives; folds on the host.
OpMapper view_op(std::function<Shape(NodeCtx&)> shape_of);
// The axes of Squeeze / Unsqueeze / Reduce*: input `input` from
// `since_opset` on, the attribute before.
std::vector<int64_t> axes_of(NodeCtx& c, size_t input, int since_opset);
Shape squeeze_shape(NodeCtx& c);
Shape unsqueeze_shape(NodeCtx& c);
Shape flatten_shape(NodeCtx& c);
// An elementwise op of one input, as the ATen op `aten`.
OpMapper unary(const std::string& aten, std::vector<DType> dtypes = kFloat);
// Opsets 1 to 6: B's shape lined up with A's from `axis` (empty: numpy's rule).
Shape legacy_broadcast_shape(NodeCtx& c);
// Binary elementwise ops; variadic ones (Sum, Min, Max, Mean) chain.
OpMapper binary(const std::string& onnx_op, const std::string& aten, std::vector<DType> dtypes);
std::vector<int64_t> reduce_axes(NodeCtx& c, bool axes_input);
// A Reduce* op: axes an input from opset `axes_input_since`, an attribute before.
OpMapper reduce(const std::string& onnx_op, const std::string& aten, int axes_input_since, std::vector<DType> dtypes);

}  // namespace wgnn::onnx_import

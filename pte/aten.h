#pragma once
// How each op of an ExecuTorch program becomes IR nodes (pte/aten.cpp):
// by its functional ATen name (aten.view_copy.default, aten.add.Tensor,
// et_vk.conv_with_clamp.default), with its arguments in schema order as
// IR values and its results' dtypes and shapes as the program declares
// them.
#include <map>
#include <string>
#include <vector>

#include "graph/tensor.h"
#include "ir/graph.h"

namespace wgnn::pte {

// A tensor's dtype and shape as the program declares it.
struct Meta {
  DType dtype = DType::F32;
  Shape shape;
};

struct OpCall {
  ir::Graph& ir;
  std::string op;                      // the functional name
  ValueList args;                      // in schema order; tensors are IR values
  std::vector<Meta> outs;              // the results the program declares
  const std::map<int, Meta>& meta;     // every IR tensor's, by id
  std::string where;                   // "delegate 0, op 3 (aten.add.Tensor)"

  TensorRef tensor(size_t i) const;
  const Meta& meta_of(TensorRef t) const;
  int64_t integer(size_t i) const;
  double scalar(size_t i) const;
  bool is_none(size_t i) const { return i >= args.size() || args[i].is_none(); }
  // A 0-d (or given-shape) constant of this dtype holding v.
  TensorRef constant(DType dtype, const Shape& shape, double v) const;
  [[noreturn]] void fail(const std::string& msg) const;
};

// Makes the IR nodes of one op call; returns one IR tensor per declared
// result (outs), in order.
using Translate = std::vector<TensorRef> (*)(OpCall&);

// The translation of a functional op name; null where there is none.
Translate find_translation(const std::string& op);
std::vector<std::string> translated_ops();

// ExecuTorch's ScalarType code (scalar_type.fbs) of a dtype, as
// aten._to_copy takes it.
int64_t scalar_type_code(DType d);

}  // namespace wgnn::pte

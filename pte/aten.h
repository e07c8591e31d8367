#pragma once
// How each op of an ExecuTorch program becomes IR nodes (pte/aten.cpp):
// by its functional ATen name (aten.view_copy.default, aten.add.Tensor,
// et_vk.conv_with_clamp.default), with its arguments in schema order as
// IR values and its results' dtypes and shapes as the program declares
// them.
#include <map>
#include <optional>
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
  // Whether outs' shapes are the results'. A dynamic program read at other
  // sizes than its bounds (pte/program.cpp) knows them where the inputs
  // have their declared shapes or the op has a rule (result_shapes); a
  // translation reads them through out_shape(), which refuses otherwise.
  bool out_shapes_known = true;

  TensorRef tensor(size_t i) const;
  const Shape& out_shape(size_t i = 0) const;
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

// The results' shapes from the arguments' (c.meta), for the ops whose
// translation reads them (views without an op of wgnn, factories, copies),
// where the op has a rule; nullopt otherwise. A dynamic program read at
// sizes below its bounds needs them (pte/program.cpp).
std::optional<std::vector<Shape>> result_shapes(const OpCall& c);

// The arguments an op writes in place (ExecuTorch's llama
// sdpa_with_kv_cache writes its key and value caches): the translation
// returns their new values after the declared results, in this order
// (and after them what the front end may reuse: sdpa_with_kv_cache's mask).
std::vector<size_t> mutated_args(const std::string& op);

// The translation of a functional op name; null where there is none.
Translate find_translation(const std::string& op);
std::vector<std::string> translated_ops();

// ExecuTorch's ScalarType code (scalar_type.fbs) of a dtype, as
// aten._to_copy takes it.
int64_t scalar_type_code(DType d);

}  // namespace wgnn::pte

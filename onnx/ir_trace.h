#pragma once
// Internal to onnx/: the importer writes a plan's model as IR (ir/graph.h)
// instead of recording GPU work directly. The mappers run as always, on a
// graph that only follows shapes (Graph::set_meta): each op they call
// validates its arguments and adds its results there, which gives the
// mappers the shapes their decisions read, and the call becomes an IR node.
// Passes (passes/) then rewrite the IR, and ir::lower records it on the
// plan's Graph: the same op calls, in the same order, with the same
// arguments.
//
// Every tensor the mappers see is a tensor of the meta graph; the trace
// knows the IR value behind each (inputs, constants, views, results). A
// meta tensor made outside the trace has none, and using it is an Error
// naming it (no GPU work may bypass the IR).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/host_tensor.h"
#include "ir/graph.h"

namespace wgnn::onnx_import {

class IrTrace {
 public:
  // `meta`: the graph the mappers see (set_meta(true), kept by the caller).
  explicit IrTrace(Graph& meta);

  ir::Graph& ir() { return ir_; }
  Graph& meta() { return meta_; }

  // A model input: a meta tensor (TensorKind::Input) and its IR input of
  // the same name, dtype and (fixed) shape.
  TensorRef input(const Shape& shape, DType dtype, const std::string& name);
  // An op call: on the meta graph (for its results' shapes), and as an IR
  // node whose origin is the meta graph's current one (the ONNX node).
  Value call(const std::string& op, const ValueList& args);
  // A view of t (aten.view.default).
  TensorRef view(TensorRef t, const Shape& shape);
  // A constant of these bytes (copied).
  TensorRef constant(const Shape& shape, DType dtype, const void* data, const std::string& name);
  // A constant made when a plan uploads it (ir::Graph::made_constant):
  // `make` must not refer to anything that dies before the plans do.
  // `source`: the values before the conversion, when they outlive the
  // plans (an initializer), for passes to read.
  TensorRef made_constant(const Shape& shape, DType dtype, std::string memo,
                          std::function<const HostTensor&(HostTensor&)> make, const std::string& name,
                          const HostTensor* source = nullptr);
  // The IR value behind a meta tensor; an Error if there is none.
  TensorRef to_ir(TensorRef meta) const;
  // A value the model returns (an input returned as it is goes through a view).
  void output(TensorRef meta, const std::string& name);

 private:
  Value args_to_ir(const Value& v) const;
  void bind(TensorRef meta, TensorRef ir);

  Graph& meta_;
  ir::Graph ir_;
  std::vector<int> ir_of_;  // meta tensor id -> IR value id (-1: none)
};

}  // namespace wgnn::onnx_import

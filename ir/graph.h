#pragma once
// The model IR: a graph of op calls in the ATen vocabulary of ops/ (the
// names and argument lists OpRegistry takes), made once per model and
// rewritten by passes/ before it is planned (ir/program.h).
//
// A value is a graph input (its dims sizes or symbols), a constant (host
// data, shared), or an output of a node. A node is one op call: the op's
// name and its arguments as ops take them (wgnn::Value: tensors, ints,
// doubles, bools, int lists, strings, nested lists), where each TensorRef
// names a value of this IR. Nodes are in an order that computes every value
// before its uses. Shapes of node outputs are not stored: a plan evaluates
// them, with the inputs' symbols bound, when it lowers the nodes onto a
// wgnn::Graph (the ops are the one definition of each op's shapes).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/host_tensor.h"
#include "graph/tensor.h"

namespace wgnn::ir {

// One dim of an input's shape: a size, or a symbol that every plan binds to
// a size (the same symbol: the same size everywhere).
struct Dim {
  int64_t size = -1;
  std::string symbol;
  Dim(int64_t s) : size(s) {}  // NOLINT: a size reads as a Dim
  Dim(int s) : size(s) {}      // NOLINT
  Dim(std::string sym) : symbol(std::move(sym)) {}  // NOLINT
  Dim(const char* sym) : symbol(sym) {}             // NOLINT
  bool symbolic() const { return !symbol.empty(); }
  std::string str() const { return symbolic() ? symbol : std::to_string(size); }
};
using SymShape = std::vector<Dim>;
std::string sym_shape_str(const SymShape& s);

enum class ValueKind { Input, Constant, Result };

struct ValueInfo {
  ValueKind kind = ValueKind::Result;
  std::string name;
  DType dtype = DType::F32;                // inputs and constants
  SymShape shape;                          // inputs and constants
  std::shared_ptr<const HostTensor> data;  // constants (null for a made one)
  // A constant made when a plan first uploads it (Graph::made_constant):
  // `make` fills the scratch it is given or returns data it keeps alive,
  // and `memo` names the result in the plans' ConstantStore, so that a
  // later plan neither makes nor hashes it again.
  std::string memo;
  std::function<const HostTensor&(HostTensor&)> make;
  // A made constant's values as the model gives them, before the
  // conversion `make` applies (an initializer's float32 values where the
  // plan stores float16): what passes read, e.g. a GELU chain's scalars.
  std::shared_ptr<const HostTensor> source;
  // A result's shape where the IR was made for one set of input shapes
  // (the ONNX importer's, one per plan): passes may check shapes with it.
  // Absent in an IR with symbolic dims.
  std::optional<Shape> seen_shape;
  std::optional<DType> seen_dtype;  // the same, for its dtype
  int node = -1;                           // results: the producing node
  int index = 0;                           //   and which of its outputs
};

struct Node {
  std::string op;  // an OpRegistry name, e.g. "aten.linear.default"
  ValueList args;
  std::vector<TensorRef> outputs;
  std::string label;  // the caller's name for it, or the pass that made it
  // What run-time checks and errors of its dispatches name (the ONNX
  // node it came from: "node 'conv1' (Conv)"); empty: from op and label.
  std::string origin;
  // A node a pass made from a chain: the chain as it was, lowered instead
  // when a plan's shapes or dtypes do not allow the fused op (the op
  // rejects them before recording anything). Their intermediate values
  // are Results of this IR that no live node produces.
  std::vector<Node> unfused;
  bool dead = false;  // removed by a pass; dropped by compact()
};

class Graph {
 public:
  TensorRef input(std::string name, DType dtype, SymShape shape);
  TensorRef constant(HostTensor t, std::string name = {});
  TensorRef constant(std::shared_ptr<const HostTensor> t, std::string name = {});
  // A constant of this dtype and shape whose values are made when a plan
  // uploads it (a converted initializer: converted once per store, not
  // per plan). Passes that read constants' values leave it alone.
  TensorRef made_constant(DType dtype, const Shape& shape, std::string memo,
                          std::function<const HostTensor&(HostTensor&)> make, std::string name = {},
                          std::shared_ptr<const HostTensor> source = {});
  // An op call with one result, or with `outputs` results (an op that
  // returns a list, e.g. aten.native_layer_norm.default: out, mean, rstd).
  TensorRef call(std::string op, ValueList args, std::string label = {});
  std::vector<TensorRef> call_multi(std::string op, ValueList args, size_t outputs, std::string label = {});
  // A value the model returns, under `name` (default "output<i>").
  void output(TensorRef v, std::string name = {});

  const ValueInfo& value(TensorRef v) const;
  size_t value_count() const { return values_.size(); }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<TensorRef>& inputs() const { return inputs_; }
  // An IR that dies before its plans do (the ONNX importer writes one per
  // plan): its constants (but made ones) are found in the plans'
  // ConstantStore by their bytes, hashed, not by the address of their
  // data, which a later IR may reuse. Default false: a Program keeps its
  // IR, and a plan finds its constants again without hashing them.
  void set_transient(bool on) { transient_ = on; }
  bool transient() const { return transient_; }
  const std::vector<TensorRef>& outputs() const { return outputs_; }
  const std::vector<std::string>& output_names() const { return output_names_; }

  // Records a result's shape (ValueInfo::seen_shape).
  void set_seen_shape(TensorRef v, Shape s) { values_.at(size_t(v.id)).seen_shape = std::move(s); }
  // Records a result's dtype (ValueInfo::seen_dtype).
  void set_seen_dtype(TensorRef v, DType d) { values_.at(size_t(v.id)).seen_dtype = d; }
  // A new Result value with no producer yet (a pass's intermediate).
  TensorRef new_result();
  // Puts `n` in place of node `at` (its outputs' producer set to it).
  void replace_node(int at, Node n);
  // Puts `n` before node `at` (at == nodes().size(): last); the nodes from
  // `at` on move one place down, and their outputs' producers with them.
  void insert_node(int at, Node n);
  // The live node that produces v, or -1 (inputs, constants, or a value
  // only an unfused chain makes).
  int producer(TensorRef v) const;
  bool is_constant(TensorRef v) const { return value(v).kind == ValueKind::Constant; }
  // A constant whose values are on the host now (not a made one).
  bool has_data(TensorRef v) const { return is_constant(v) && value(v).data != nullptr; }
  // A constant's values as the model gives them: its data, or a made
  // constant's source; null for anything else.
  const HostTensor* model_values(TensorRef v) const;
  // A value's shape where the IR knows it: an input's or constant's fixed
  // dims, or a result's seen_shape; nullopt otherwise (a symbolic dim).
  std::optional<Shape> known_shape(TensorRef v) const;
  // A value's dtype where the IR knows it: an input's or constant's, or a
  // result's seen_dtype.
  std::optional<DType> known_dtype(TensorRef v) const;
  // The live nodes whose arguments name v (a node once per argument that
  // names it), and whether the model returns it.
  std::vector<int> users(TensorRef v) const;
  bool is_output(TensorRef v) const;
  // Every use of `from` (live nodes' arguments, the model's outputs) becomes `to`.
  void replace_uses(TensorRef from, TensorRef to);
  // Drops dead nodes, keeping the order.
  void compact();
  size_t live_nodes() const;
  // One line per live node: "%3 = aten.gelu.default(%2, 'none')".
  std::string dump() const;

 private:
  TensorRef add_value(ValueInfo v);
  std::vector<ValueInfo> values_;
  std::vector<Node> nodes_;
  std::vector<TensorRef> inputs_, outputs_;
  std::vector<std::string> output_names_;
  bool transient_ = false;
};

// The IR values a node's arguments name, in order (lists searched too).
std::vector<TensorRef> tensor_args(const ValueList& args);
// Whether an op writes an argument in place (ATen's trailing underscore:
// aten.relu_.default): passes never move or drop such a node.
bool mutates(const std::string& op);

}  // namespace wgnn::ir

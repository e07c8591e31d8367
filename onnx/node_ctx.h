#pragma once
// Internal to onnx/: what a node mapper sees while the importer builds the
// graph, and the per-op table (onnx/mappers.cpp).
#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gpu/error.h"
#include "graph/graph.h"
#include "graph/host_tensor.h"
#include "ops/registry.h"

namespace wgnn::onnx_import {

class Builder;  // onnx/subgraph.h
class IrTrace;  // onnx/ir_trace.h

// A value of the ONNX graph while importing: known on the host (a constant,
// or folded from constants and shapes), or a tensor of the GPU graph.
struct Slot {
  bool host = false;
  // When host: the value, owned, or (an initializer) the Session's own copy,
  // or (deferred) made at the first read.
  const HostTensor& value() const {
    if (deferred_) {
      if (!deferred_->made) deferred_->value = deferred_->fold(), deferred_->made = true;
      return deferred_->value;
    }
    return ext_ ? *ext_ : own_;
  }
  // A Session's initializer (of_stored): its address is stable for the
  // Session's life.
  bool stored() const { return ext_ != nullptr; }
  TensorRef ref{-1};      // GPU tensor (for host values: once uploaded)
  // A graph input whose value the session has: ops that need host data
  // (a Reshape's shape, a Range's limit) may read it; the graph is then
  // specialized on that value (see Session).
  const HostTensor* input_value = nullptr;
  std::string input_name;
  DType dtype = DType::F32;
  Shape shape;

  static Slot of_host(HostTensor t) {
    Slot s;
    s.host = true;
    s.dtype = t.dtype;
    s.shape = t.shape;
    s.own_ = std::move(t);
    return s;
  }
  // A host value that outlives the build (a Session's initializer): not copied.
  static Slot of_stored(const HostTensor& t) {
    Slot s;
    s.host = true;
    s.dtype = t.dtype;
    s.shape = t.shape;
    s.ext_ = &t;
    return s;
  }
  // A host value made only where it is read (OpMapper::defer): on the host
  // by `fold` at the first value(); as a GPU tensor by `build`, which
  // records the node into the graph and trace it is given (NodeCtx::tensor)
  // and returns the result, or TensorRef{-1} for the value folded and
  // uploaded instead.
  struct Deferred {
    std::function<HostTensor()> fold;
    std::function<TensorRef(Graph&, IrTrace*)> build;
    HostTensor value;
    bool made = false;
  };
  static Slot of_deferred(DType dtype, Shape shape, std::function<HostTensor()> fold,
                          std::function<TensorRef(Graph&, IrTrace*)> build) {
    Slot s;
    s.host = true;
    s.dtype = dtype;
    s.shape = std::move(shape);
    s.deferred_ = std::make_shared<Deferred>();
    s.deferred_->fold = std::move(fold);
    s.deferred_->build = std::move(build);
    return s;
  }
  const Deferred* deferred() const { return deferred_.get(); }
  static Slot of_tensor(const Graph& g, TensorRef r) {
    Slot s;
    s.ref = r;
    s.dtype = g.info(r).dtype;
    s.shape = g.info(r).shape;
    return s;
  }

 private:
  HostTensor own_;
  const HostTensor* ext_ = nullptr;
  std::shared_ptr<Deferred> deferred_;  // shared by the slot's copies: made once
};

// How the model's float values are stored on the GPU: the importer's one
// rule of precision. Host values always keep the model's dtype (shape
// arithmetic folds in full precision) and are converted when uploaded.
struct Storage {
  // The session's float16 mode (SessionOptions::fp16): float32 values live
  // on the GPU as float16.
  bool fp16 = false;
  // The adapter lacks shader-f16: float16 values live on the GPU as float32
  // (widened when uploaded, narrowed when read back); a Cast to float16
  // rounds to float16's precision (wgnn.round_to_f16), so results stay
  // within a float16 device's tolerance.
  bool widen_f16 = false;
  DType gpu(DType d) const {
    if (fp16 && d == DType::F32) return DType::F16;
    if (widen_f16 && d == DType::F16) return DType::F32;
    return d;
  }
};

class NodeCtx {
 public:
  NodeCtx(Graph& graph, const onnx::NodeProto& n, int op_set, std::vector<Slot*> inputs,
          std::set<std::string>* value_inputs = nullptr, Storage storage_rule = {})
      : g(graph), node(n), opset(op_set), storage(storage_rule), graph_(graph), in_(std::move(inputs)),
        value_inputs_(value_inputs) {}

  // The graph being built, for its tensors' shapes and dtypes: work is
  // added through call(), view(), tensor() and constant(), which follow
  // `trace`.
  const Graph& g;
  const onnx::NodeProto& node;
  int opset;
  Storage storage;
  // The build this node is part of (onnx/subgraph.h): subgraphs, values
  // folded on the host through their producers, read-backs. May be null.
  Builder* builder = nullptr;
  // Where the importer writes the model as IR (onnx/ir_trace.h): op calls,
  // views and constants go there, and `g` only follows shapes. Null: they
  // are recorded on `g` directly.
  IrTrace* trace = nullptr;
  // The dtype a value of dtype d has on the GPU (Storage::gpu): float16 for
  // float32 in fp16 mode, float32 for float16 without shader-f16.
  DType gpu_dtype(DType d) const { return storage.gpu(d); }

  std::string where() const;  // "node 'name' (OpType)"
  [[noreturn]] void fail(const std::string& msg) const;
  [[noreturn]] void unsupported(const std::string& msg) const;

  size_t inputs() const { return in_.size(); }
  bool has(size_t i) const { return i < in_.size() && in_[i] != nullptr; }
  bool is_host(size_t i) const { return has(i) && in_[i]->host; }
  const Shape& shape(size_t i) const;
  // The input's dtype as GPU work sees it (gpu_dtype: float16 for a float32
  // value in fp16 mode); the host value itself (host()) keeps its own dtype.
  DType dtype(size_t i) const;
  // The input's dtype in the model where it is known: a host value's own
  // dtype; a GPU tensor's dtype (which for a widened float16 value is float32).
  DType slot_dtype(size_t i) const;
  // The input as a GPU tensor (a host value is uploaded once, as a constant;
  // float32 as float16 in fp16 mode, see to_f16_saturated).
  TensorRef tensor(size_t i);
  // The input as a GPU tensor of its own dtype: a float32 host value stays
  // float32 even in fp16 mode (for parameters an op folds in float32, e.g.
  // batch norm's running mean, whose float16 rounding a small variance
  // amplifies); a GPU tensor as tensor(i). Not cached: a second upload.
  TensorRef tensor_exact(size_t i);
  // A host tensor uploaded as a constant of this graph (float32 as float16
  // in fp16 mode, like tensor()).
  TensorRef constant(const HostTensor& t, const std::string& name = "");
  // A host slot as a constant: constant(), except that a Session's
  // initializer is found again in the Session's ConstantStore by its
  // address and conversion, so a later plan neither converts nor hashes it.
  TensorRef slot_constant(const Slot& s, const std::string& name);
  // The input's value on the host; Unsupported if it is only known on the GPU.
  const HostTensor& host(size_t i, const char* what) const;
  std::vector<int64_t> host_ints(size_t i, const char* what) const;
  // The input's slot itself (control flow passes values on unchanged).
  const Slot& slot(size_t i) const;
  Value tensor_or_none(size_t i) { return has(i) ? Value(tensor(i)) : Value(None{}); }

  bool has_attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t def) const;
  float attr_float(const std::string& name, float def) const;
  std::string attr_string(const std::string& name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& name) const;
  const onnx::AttributeProto* attr(const std::string& name) const;

  // Calls a wgnn op; errors are re-thrown with this node's name.
  Value call(const std::string& op, const ValueList& args);
  Slot out(TensorRef r) { return Slot::of_tensor(g, r); }
  Slot out(const Value& v) { return Slot::of_tensor(g, v.tensor()); }
  TensorRef view(TensorRef t, const Shape& shape);
  // The graph itself, for plan_constant() and plan_made_constant().
  Graph& mut_graph() { return graph_; }

 private:
  Graph& graph_;
  std::vector<Slot*> in_;
  std::set<std::string>* value_inputs_;
};

struct OpMapper {
  // Dtypes accepted for the first input (empty: any). Others are Unsupported.
  std::vector<DType> dtypes;
  // Builds GPU work (or host values) for the node.
  std::function<std::vector<Slot>(NodeCtx&)> build;
  // Evaluates the node on the host when every input is a host value (shape
  // arithmetic); absent for ops that always run on the GPU.
  std::function<std::vector<HostTensor>(NodeCtx&)> fold;
  // Called instead of fold where the importer writes IR: results that are
  // made only where they are read (Slot::of_deferred). A DequantizeLinear
  // of constant weights: folded on the host where a host value is read (a
  // Transpose folded in turn), else a node of the IR, which passes fuse
  // into the product reading it or fold once a Session
  // (passes/fuse_matmul_dequant.cpp).
  std::function<std::vector<Slot>(NodeCtx&)> defer;
};

const std::map<std::string, OpMapper>& op_mappers();
// A node's key in op_mappers(): its op_type in the ONNX domain ("" or
// "ai.onnx"), else "domain.op_type" (com.microsoft.MatMulNBits).
// A mapper's one result.
std::vector<Slot> one(Slot s);
// "Op 'name'" of the node (its first output when it has no name), for messages.
std::string node_label(NodeCtx& c);
std::string mapper_key(const onnx::NodeProto& n);
// A constant of the plan (these bytes, as they are), and one made when the
// plan uploads it, named by `memo` in the plans' ConstantStore (`make`
// must outlive the build: it may run after it, when the IR is lowered).
// Through `trace` where there is one, else on `g`.
TensorRef plan_constant(Graph& g, IrTrace* trace, const Shape& shape, DType dtype, const void* data,
                        const std::string& name);
TensorRef plan_made_constant(Graph& g, IrTrace* trace, const Shape& shape, DType dtype, const std::string& memo,
                             std::function<const HostTensor&(HostTensor&)> make, const std::string& name,
                             const HostTensor* source = nullptr);
// The node's mapper, or null when wgnn lacks it.
const OpMapper* find_mapper(const onnx::NodeProto& n);

// Shared by the mapper files (mappers.cpp, mappers_quant.cpp).
// An attribute of one value per spatial dim, `def` for each when absent.
std::vector<int64_t> spatial_attr(NodeCtx& c, const char* name, size_t d, int64_t def);
// Begin and end pads (ONNX order: begins, then ends) of a window over input
// 0 (Conv, ConvInteger, QLinearConv, MaxPool, AveragePool) from `pads` or
// `auto_pad`. SAME_UPPER / SAME_LOWER pad so that out = ceil(in / stride);
// an odd total puts the extra pad at the end (UPPER) or the beginning (LOWER).
std::vector<int64_t> window_pads(NodeCtx& c, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                 const std::vector<int64_t>& dilations);

}  // namespace wgnn::onnx_import

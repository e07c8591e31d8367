#pragma once
// Internal to onnx/: building a graph's nodes into a plan, for the main
// graph (onnx/session.cpp) and for the subgraphs of If, Loop and Scan
// (onnx/mappers_control.cpp), which see the values of the graphs around them.
//
// Control flow is resolved while the plan is built: an If takes one branch,
// a Loop and a Scan are unrolled. A condition (or trip count) known on the
// host (a constant, a value folded from constants and shapes, a graph input,
// or folded on the host from those: host_value) decides at plan time; the
// plan is then specialized on the graph inputs it read. A condition computed
// from GPU data is read back (read_scalar): the first time, the plan built
// so far becomes a probe that computes the value (Session runs it and reads
// the value back), and the build starts again knowing it; later runs run the
// probe first and pick the plan built for the value read.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "onnx/node_ctx.h"

namespace wgnn::onnx_import {

// The values visible while a graph is built: its own, then those of the
// graphs around it.
struct Scope {
  std::map<std::string, Slot>* values = nullptr;
  Scope* outer = nullptr;
  const onnx::GraphProto* graph = nullptr;  // whose nodes produce `values` (host_value follows them)
  // The slot named `name` here or further out, and the scope holding it.
  Slot* find(const std::string& name, Scope** where = nullptr);
};

// Thrown by read_scalar for a value not read back yet: `key` names it among
// the plan's decisions, `value` is the GPU tensor to read (a tensor of the
// graph being built, which Session turns into a probe).
struct NeedsReadback {
  std::string key;
  TensorRef value;
};

// Names a graph's nodes read from the graphs around it (inside subgraphs,
// at any depth): implicit inputs of the node holding them.
void outer_reads(const onnx::NodeProto& n, std::set<std::string>& out);

class Builder {
 public:
  Builder(Graph& g, int opset, Storage storage, std::set<std::string>* value_inputs,
          const std::map<std::string, int64_t>* decisions)
      : g_(g), opset_(opset), storage_(storage), value_inputs_(value_inputs), decisions_(decisions) {}

  // Builds (or folds on the host) node `n` in `scope`, its outputs stored
  // there. `needed`: the outputs someone reads (nullptr: all).
  void build_node(const onnx::NodeProto& n, Scope& scope, const std::set<std::string>* needed);

  // Builds `body` with its inputs bound to `inputs`, in a scope inside the
  // node's; returns its outputs in order. Outputs listed in `fold` are
  // folded on the host where host_value can (a Loop's condition).
  std::vector<Slot> build(const onnx::GraphProto& body, std::vector<Slot> inputs, const std::string& instance,
                          const std::set<size_t>& fold = {});

  // The value named `name` (seen from the node being built) on the host: a
  // host value, a graph input's value (integers or bools of a few values:
  // the plan is then specialized on it), or folded on the host from those
  // through the nodes that produced it (each small: at most kFoldElements).
  // nullptr where that is not possible.
  const HostTensor* host_value(const std::string& name);

  // A scalar computed on the GPU, read back (see the top of this file).
  // `what` names it in summaries; keys are unique within a plan.
  int64_t read_scalar(TensorRef value, const std::string& what);
  // The size of a result that depends on the data (NonZero's count, ...),
  // computed on the GPU: read back as read_scalar does, counted apart from
  // control flow's decisions (sizes_read_back).
  int64_t read_size(TensorRef value, const std::string& what);

  // Where the nodes' work goes as IR (onnx/ir_trace.h); null: recorded on
  // the graph directly.
  IrTrace* trace = nullptr;
  int folded = 0, mapped = 0;
  // When set: host time of build_node by op type, in ms (a node with
  // subgraphs counts theirs too).
  std::map<std::string, double>* op_ms = nullptr;
  int plan_time_decisions = 0, readback_decisions = 0, unrolled_iterations = 0;
  int sizes_read_back = 0;

 private:
  const HostTensor* fold_in(const std::string& name, Scope* scope, std::set<std::string>& inputs_read, int depth);

  Graph& g_;
  int opset_;
  Storage storage_;
  std::set<std::string>* value_inputs_;
  const std::map<std::string, int64_t>* decisions_;
  Scope* current_ = nullptr;
  std::string path_;  // the subgraph instances around the node being built
  // Values folded by host_value, per scope's values (a name may be reused inside).
  std::map<std::pair<const void*, std::string>, HostTensor> folded_values_;
  std::vector<std::unique_ptr<std::map<std::string, Slot>>> scopes_;  // subgraph values, kept for the build
};

}  // namespace wgnn::onnx_import

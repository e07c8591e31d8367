#pragma once
// An IR graph made runnable: a graph per set of input shapes, each the IR's
// nodes lowered onto a wgnn::Graph by calling their ops (ops::call), with
// the model's constants uploaded once into a ConstantStore that every graph
// shares. A new shape binds the inputs' symbols, lowers again (the ops
// compute the sizes, uniforms, grids and memory plan) and reuses the
// uploaded constants and the compiled pipelines. The graphs are kept as
// onnx::Session keeps its own (graph/plan_cache.h): graphs of one structure
// are one plan's sizes, every graph takes its buffers from one storage,
// sizes of one size class replay their first size's structural choices,
// and plans and sizes are evicted least recently used first.
//
// The IR is taken as it is: passes::optimize (passes/passes.h) rewrites it
// first where fusion is wanted.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/constant_store.h"
#include "graph/graph.h"
#include "graph/plan_cache.h"
#include "ir/graph.h"

namespace wgnn::ir {

struct ProgramOptions {
  int max_plans = 8;        // as SessionOptions::max_plans
  int max_plan_sizes = 64;  // as SessionOptions::max_plan_sizes
  bool size_classes = true;  // as SessionOptions::size_classes
  bool checked = true;  // Graph::set_checked
};

// What a plan did with a node a pass fused: how many ran fused, and how
// many fell back to their unfused chain (the plan's shapes or dtypes did
// not allow the fused op), with the op's reason.
struct LoweringStats {
  size_t nodes = 0;
  size_t fused = 0;
  std::vector<std::string> fallbacks;
  // Host time of the op calls (recording), in ms, by node label (the op
  // where a node has none): the ONNX importer labels each node with its
  // ONNX op type.
  std::map<std::string, double> ms_by_label;
};

// Lowers `ir` onto `g` with these input shapes (one per ir.inputs(), in
// order; checked against the declared dims and symbols): the inputs become
// Input tensors, the constants Constant tensors (through g's ConstantStore
// when it has one), the model's outputs are marked. Returns the graph
// tensors of the model's inputs and outputs.
struct Lowered {
  std::vector<TensorRef> inputs, outputs;
  LoweringStats stats;
};
Lowered lower(const Graph& ir, wgnn::Graph& g, const std::vector<Shape>& input_shapes);

// The input shapes checked against the IR's declared ones: the rank, each
// fixed size, and one size per symbol. Returns the symbols' sizes.
std::map<std::string, int64_t> bind_symbols(const Graph& ir, const std::vector<Shape>& input_shapes);

// An IR lowered node by node while it grows: for a front end that needs
// each result's shape as it imports (the .pte front end at a dynamic
// program's concrete sizes lowers onto a meta graph, pte/program.cpp).
class Lowerer {
 public:
  Lowerer(const Graph& ir, wgnn::Graph& g);
  ~Lowerer();
  Lowerer(const Lowerer&) = delete;
  Lowerer& operator=(const Lowerer&) = delete;
  // An IR input, as a graph input of this shape.
  TensorRef input(TensorRef v, const Shape& shape);
  // Lowers the nodes added to the IR since the last call.
  void lower_new();
  // The graph tensor of an IR value (a constant is added on first use).
  TensorRef tensor(TensorRef v);
  // An argument with its IR tensors as graph tensors.
  Value arg(const Value& a);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Program {
 public:
  Program(gpu::Context& ctx, Graph ir, ProgramOptions options = {});
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const Graph& ir() const { return ir_; }
  // Runs the model: one host tensor per input, in ir().inputs() order, each
  // of the input's dtype; returns the outputs in ir().outputs() order.
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs);

  // The plan for these input shapes (made if needed): for inspection.
  wgnn::Graph& plan(const std::vector<Shape>& input_shapes);
  const LoweringStats& last_lowering() const { return last_stats_; }
  // Plans (structures) kept, the sets of input shapes they serve, the
  // buffers they share (graph/plan_cache.h).
  int plans() const;
  int plan_sizes() const;
  uint64_t plan_buffer_bytes() const;
  int builds() const { return builds_; }
  int evictions() const;
  const ConstantStore& constants() const { return *constants_; }

 private:
  struct Plan;
  Plan& plan_for(const std::vector<Shape>& shapes);

  gpu::Context& ctx_;
  Graph ir_;
  ProgramOptions options_;
  std::unique_ptr<ConstantStore> constants_;  // before cache_: plans release into it
  PlanCache<Plan> cache_;
  LoweringStats last_stats_;
  int builds_ = 0;
};

}  // namespace wgnn::ir

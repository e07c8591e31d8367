// Constant folding: a node whose every tensor argument is a constant is
// run once, on the device, by its own op (the one definition of what it
// computes, the same kernel a plan would record), and its results become
// constants. Not folded: nodes that write an argument in place, nodes whose
// result the model returns, results over PassContext::max_folded_bytes,
// and nodes the op refuses (left for the plan, whose error then names them).
#include <fmt/format.h>

#include <mutex>

#include "graph/graph.h"
#include "ops/registry.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

class FoldConstants final : public Pass {
 public:
  const char* name() const override { return "fold_constants"; }
  size_t apply(ir::Graph& g, const PassContext& pc) const override {
    if (!pc.ctx) return 0;
    size_t folded = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& n = g.nodes()[i];
      if (n.dead || ir::mutates(n.op) || !n.unfused.empty()) continue;
      bool all_constant = true, returned = false;
      for (TensorRef t : ir::tensor_args(n.args)) all_constant = all_constant && g.has_data(t);
      for (TensorRef o : n.outputs) returned = returned || g.is_output(o);
      if (!all_constant || returned) continue;
      std::vector<HostTensor> results;
      if (!evaluate(g, n, pc, results)) continue;
      const std::vector<TensorRef> outs = n.outputs;
      g.nodes()[i].dead = true;
      for (size_t k = 0; k < outs.size(); ++k) {
        g.replace_uses(outs[k], g.constant(std::move(results[k]), fmt::format("folded_{}", outs[k].id)));
      }
      ++folded;
    }
    return folded;
  }

 private:
  static Value arg(const ir::Graph& ir, Graph& g, const Value& a) {
    if (a.is_tensor()) {
      const HostTensor& t = *ir.value(a.tensor()).data;
      return g.add_constant(t.shape, t.dtype, t.data.data());
    }
    if (a.is_list()) {
      ValueList l;
      for (const Value& e : a.list()) l.push_back(arg(ir, g, e));
      return l;
    }
    return a;
  }

  static bool evaluate(const ir::Graph& ir, const ir::Node& n, const PassContext& pc, std::vector<HostTensor>& out) {
    const std::unique_lock<std::mutex> turn = pc.ctx->exclusive();
    Graph g(*pc.ctx);
    std::vector<TensorRef> results;
    try {
      ValueList args;
      for (const Value& a : n.args) args.push_back(arg(ir, g, a));
      const Value r = ops::call(g, n.op, args);
      if (n.outputs.size() == 1 && r.is_tensor()) {
        results.push_back(r.tensor());
      } else if (r.is_list() && r.list().size() >= n.outputs.size()) {
        for (size_t k = 0; k < n.outputs.size(); ++k) {
          if (!r.list()[k].is_tensor()) return false;
          results.push_back(r.list()[k].tensor());
        }
      } else {
        return false;
      }
    } catch (const gpu::GpuError&) {
      throw;
    } catch (const Error&) {
      return false;  // the plan meets the same refusal, with the node named
    }
    uint64_t bytes = 0;
    for (TensorRef r : results) bytes += g.info(r).nbytes();
    if (bytes > pc.max_folded_bytes) return false;
    for (TensorRef r : results) g.mark_output(r);
    std::vector<Graph::HostOut> host;
    for (TensorRef r : results) out.emplace_back(g.info(r).dtype, g.info(r).shape);
    for (size_t k = 0; k < results.size(); ++k) host.push_back({results[k], out[k].data.data(), out[k].nbytes()});
    g.run({}, host);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> fold_constants() { return std::make_unique<FoldConstants>(); }

}  // namespace wgnn::passes

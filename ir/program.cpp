#include "ir/program.h"

#include <fmt/format.h>

#include <chrono>
#include <mutex>

#include "gpu/error.h"
#include "ops/registry.h"

namespace wgnn::ir {

std::map<std::string, int64_t> bind_symbols(const Graph& ir, const std::vector<Shape>& shapes) {
  if (shapes.size() != ir.inputs().size()) {
    throw Error(fmt::format("the model has {} inputs; {} shapes were given", ir.inputs().size(), shapes.size()));
  }
  std::map<std::string, int64_t> sym;
  std::map<std::string, std::string> bound_by;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ValueInfo& in = ir.value(ir.inputs()[i]);
    const Shape& s = shapes[i];
    if (s.size() != in.shape.size()) {
      throw Error(fmt::format("input '{}' has shape {}; expected rank {} ({})", in.name, shape_str(s), in.shape.size(),
                              sym_shape_str(in.shape)));
    }
    for (size_t d = 0; d < s.size(); ++d) {
      const Dim& want = in.shape[d];
      if (s[d] < 0) throw Error(fmt::format("input '{}' has shape {}: a negative dim", in.name, shape_str(s)));
      if (!want.symbolic()) {
        if (s[d] != want.size) {
          throw Error(fmt::format("input '{}' has shape {}; expected {} (dim {} is {})", in.name, shape_str(s),
                                  sym_shape_str(in.shape), d, want.size));
        }
        continue;
      }
      auto [it, fresh] = sym.emplace(want.symbol, s[d]);
      if (!fresh && it->second != s[d]) {
        throw Error(fmt::format("input '{}' has shape {}: dim {} ('{}') is {}, but {} gave '{}' = {}", in.name,
                                shape_str(s), d, want.symbol, s[d], bound_by[want.symbol], want.symbol, it->second));
      }
      if (fresh) bound_by[want.symbol] = fmt::format("input '{}'", in.name);
    }
  }
  return sym;
}

namespace {

struct Lowering {
  const Graph& ir;
  wgnn::Graph& g;
  std::vector<TensorRef> map;  // IR value id -> graph tensor
  LoweringStats stats;

  TensorRef tensor(TensorRef v) {
    if (map.size() < ir.value_count()) map.resize(ir.value_count());  // an IR that grows (Lowerer)
    if (map[size_t(v.id)].id >= 0) return map[size_t(v.id)];
    const ValueInfo& vi = ir.value(v);
    if (vi.kind != ValueKind::Constant) {
      throw Error(fmt::format("ir: %{} is used before a node computes it", v.id));
    }
    if (!vi.make && ir.transient()) {
      const HostTensor& t = *vi.data;
      const TensorRef r = g.add_constant(t.shape, t.dtype, t.data.data(), vi.name);
      map[size_t(v.id)] = r;
      return r;
    }
    if (vi.make) {
      const TensorRef r = g.add_memo_constant(vi.memo, vi.make, vi.name);
      map[size_t(v.id)] = r;
      return r;
    }
    // Named by the shared host data's address: the Program keeps it alive,
    // so a later plan finds the upload without hashing the bytes again.
    std::shared_ptr<const HostTensor> data = vi.data;
    const TensorRef r = g.add_memo_constant(fmt::format("ir-constant:{}", static_cast<const void*>(data.get())),
                                            [data](HostTensor&) -> const HostTensor& { return *data; }, vi.name);
    map[size_t(v.id)] = r;
    return r;
  }

  Value arg(const Value& a) {
    if (a.is_tensor()) return tensor(a.tensor());
    if (a.is_list()) {
      ValueList l;
      for (const Value& e : a.list()) l.push_back(arg(e));
      return l;
    }
    return a;
  }

  void node(const Node& n) {
    ValueList args;
    for (const Value& a : n.args) args.push_back(arg(a));
    g.set_origin(!n.origin.empty() ? n.origin
                 : n.label.empty() ? n.op
                                   : fmt::format("node '{}' ({})", n.label, n.op));
    const auto t0 = std::chrono::steady_clock::now();
    const Value r = ops::call(g, n.op, args);
    if (map.size() < ir.value_count()) map.resize(ir.value_count());
    stats.ms_by_label[n.label.empty() ? n.op : n.label] +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (n.outputs.size() == 1 && r.is_tensor()) {
      map[size_t(n.outputs[0].id)] = r.tensor();
    } else {
      if (!r.is_list() || r.list().size() < n.outputs.size()) {
        throw Error(fmt::format("ir: {} returned {}; the IR node takes {} results", n.op, r.describe(),
                                n.outputs.size()));
      }
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        if (!r.list()[i].is_tensor()) {
          throw Error(fmt::format("ir: result {} of {} is {}, not a tensor", i, n.op, r.list()[i].describe()));
        }
        map[size_t(n.outputs[i].id)] = r.list()[i].tensor();
      }
    }
    ++stats.nodes;
  }

  // A fused node, or its chain when the op refuses the plan's values. The
  // op checks its arguments before it records anything; a refusal after
  // the graph changed is not a fallback but an error.
  void fused(const Node& n) {
    const size_t dispatches = g.dispatches().size();
    try {
      node(n);
      ++stats.fused;
      return;
    } catch (const gpu::GpuError&) {
      throw;
    } catch (const HostOutOfMemory&) {
      throw;
    } catch (const Error& e) {
      // Tensors it added without work (views, uploaded arguments) are
      // left unused; recorded work would be a half-built op.
      if (g.dispatches().size() != dispatches) throw;
      stats.fallbacks.push_back(fmt::format("{}: {}", n.label.empty() ? n.op : n.label, e.what()));
    }
    // A node of the chain may be a fused node itself (fuse_matmul_layer_norm
    // keeps the add + layer norm it took), with its own fallback.
    for (const Node& u : n.unfused) {
      if (u.unfused.empty()) {
        node(u);
      } else {
        fused(u);
      }
    }
  }
};

}  // namespace

Lowered lower(const Graph& ir, wgnn::Graph& g, const std::vector<Shape>& input_shapes) {
  bind_symbols(ir, input_shapes);
  Lowering l{ir, g, std::vector<TensorRef>(ir.value_count()), {}};
  Lowered out;
  for (size_t i = 0; i < ir.inputs().size(); ++i) {
    const ValueInfo& in = ir.value(ir.inputs()[i]);
    const TensorRef r = g.add_tensor(input_shapes[i], in.dtype, TensorKind::Input, in.name);
    l.map[size_t(ir.inputs()[i].id)] = r;
    out.inputs.push_back(r);
  }
  for (const Node& n : ir.nodes()) {
    if (n.dead) continue;
    if (n.unfused.empty()) {
      l.node(n);
    } else {
      l.fused(n);
    }
  }
  g.set_origin({});
  for (size_t i = 0; i < ir.outputs().size(); ++i) {
    const TensorRef v = ir.outputs()[i];
    const ValueInfo& vi = ir.value(v);
    if (vi.kind != ValueKind::Result) {
      throw Error(fmt::format("ir: output '{}' is {} '{}', not computed by a node", ir.output_names()[i],
                              vi.kind == ValueKind::Input ? "the input" : "the constant", vi.name));
    }
    const TensorRef r = l.tensor(v);
    g.mark_output(r);
    out.outputs.push_back(r);
  }
  out.stats = std::move(l.stats);
  return out;
}

struct Lowerer::Impl {
  Lowering l;
  size_t next = 0;  // the first node not lowered
};

Lowerer::Lowerer(const Graph& ir, wgnn::Graph& g)
    : impl_(std::make_unique<Impl>(Impl{Lowering{ir, g, std::vector<TensorRef>(ir.value_count()), {}}, 0})) {}
Lowerer::~Lowerer() = default;

TensorRef Lowerer::input(TensorRef v, const Shape& shape) {
  Lowering& l = impl_->l;
  const ValueInfo& vi = l.ir.value(v);
  const TensorRef r = l.g.add_tensor(shape, vi.dtype, TensorKind::Input, vi.name);
  if (l.map.size() < l.ir.value_count()) l.map.resize(l.ir.value_count());
  l.map[size_t(v.id)] = r;
  return r;
}

void Lowerer::lower_new() {
  Lowering& l = impl_->l;
  const auto& nodes = l.ir.nodes();
  for (; impl_->next < nodes.size(); ++impl_->next) {
    const Node& n = nodes[impl_->next];
    if (n.dead) continue;
    if (n.unfused.empty()) {
      l.node(n);
    } else {
      l.fused(n);
    }
  }
}

TensorRef Lowerer::tensor(TensorRef v) { return impl_->l.tensor(v); }
Value Lowerer::arg(const Value& a) { return impl_->l.arg(a); }

struct Program::Plan {
  std::unique_ptr<wgnn::Graph> graph;
  Lowered lowered;
  uint64_t last_use = 0;
  bool is_probe() const { return false; }
};

namespace {
PlanCacheOptions cache_options(const ProgramOptions& o) {
  if (o.max_plans < 1) {
    throw Error(fmt::format("ProgramOptions::max_plans is {}: at least one plan must be kept", o.max_plans));
  }
  if (o.max_plan_sizes < 1) {
    throw Error(fmt::format("ProgramOptions::max_plan_sizes is {}: at least one size must be kept", o.max_plan_sizes));
  }
  PlanCacheOptions c;
  c.max_plans = o.max_plans;
  c.max_plan_sizes = o.max_plan_sizes;
  c.size_classes = o.size_classes;
  return c;
}
}  // namespace

Program::Program(gpu::Context& ctx, Graph ir, ProgramOptions options)
    : ctx_(ctx),
      ir_(std::move(ir)),
      options_(options),
      constants_(std::make_unique<ConstantStore>(ctx)),
      cache_(cache_options(options)) {
  if (ir_.outputs().empty()) throw Error("ir: the graph has no output");
}

Program::~Program() {
  const std::unique_lock<std::mutex> turn = ctx_.exclusive();
  cache_.clear();
  constants_.reset();
}

int Program::plans() const { return cache_.plans(); }
int Program::plan_sizes() const { return cache_.plan_sizes(); }
uint64_t Program::plan_buffer_bytes() const { return cache_.buffer_bytes(); }
int Program::evictions() const { return cache_.evictions(); }

Program::Plan& Program::plan_for(const std::vector<Shape>& shapes) {
  std::string key;
  for (const Shape& s : shapes) key += shape_str(s) + ";";
  if (Plan* found = cache_.find(key)) return *found;
  bind_symbols(ir_, shapes);
  auto p = std::make_unique<Plan>();
  p->graph = std::make_unique<wgnn::Graph>(ctx_);
  p->graph->set_constant_store(constants_.get());
  p->graph->set_checked(options_.checked);
  const std::string cls = size_class(shapes);
  if (auto replay = cache_.choices_of(cls)) p->graph->replay_choices(replay);
  p->lowered = lower(ir_, *p->graph, shapes);
  cache_.remember_choices(cls, *p->graph);
  cache_.join(*p->graph);
  cache_.make_room(*p);
  p->graph->prepare();
  cache_.touch(*p);
  last_stats_ = p->lowered.stats;
  ++builds_;
  return cache_.keep(key, std::move(p));
}

wgnn::Graph& Program::plan(const std::vector<Shape>& input_shapes) {
  const std::unique_lock<std::mutex> turn = ctx_.exclusive();
  return *plan_for(input_shapes).graph;
}

std::vector<HostTensor> Program::run(const std::vector<HostTensor>& inputs) {
  const std::unique_lock<std::mutex> turn = ctx_.exclusive();
  std::vector<Shape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    shapes.push_back(inputs[i].shape);
    if (i < ir_.inputs().size() && inputs[i].dtype != ir_.value(ir_.inputs()[i]).dtype) {
      const ValueInfo& in = ir_.value(ir_.inputs()[i]);
      throw Error(fmt::format("input '{}' is {}; the model takes {}", in.name, dtype_name(inputs[i].dtype),
                              dtype_name(in.dtype)));
    }
  }
  Plan& p = plan_for(shapes);
  wgnn::Graph& g = *p.graph;
  std::vector<wgnn::Graph::HostIn> in;
  for (size_t i = 0; i < inputs.size(); ++i) in.push_back({p.lowered.inputs[i], inputs[i].data.data(), inputs[i].nbytes()});
  std::vector<HostTensor> out;
  out.reserve(p.lowered.outputs.size());
  std::vector<wgnn::Graph::HostOut> host_out;
  for (TensorRef r : p.lowered.outputs) {
    const TensorInfo& ti = g.info(r);
    out.emplace_back(ti.dtype, ti.shape);
  }
  for (size_t i = 0; i < out.size(); ++i) host_out.push_back({p.lowered.outputs[i], out[i].data.data(), out[i].nbytes()});
  g.run(in, host_out);
  return out;
}

}  // namespace wgnn::ir

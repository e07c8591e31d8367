// ONNX If, Loop and Scan, resolved while the plan is built
// (onnx/subgraph.h): If builds the branch its condition picks, Loop and
// Scan build their body once per iteration (unrolled). Subgraphs read the
// values of the graphs around them. A condition or trip count known on the
// host decides at plan time; one computed on the GPU is read back first
// (Builder::read_scalar), and the plan is built for the value read.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "onnx/host_ops.h"
#include "onnx/mappers_control.h"
#include "onnx/node_ctx.h"
#include "onnx/subgraph.h"

namespace wgnn::onnx_import {
namespace {

// Iterations a Loop or Scan may unroll into one plan (each iteration's
// dispatches are recorded).
constexpr int64_t kMaxIterations = 1 << 16;

Builder& builder_of(NodeCtx& c) {
  if (!c.builder) c.fail("control flow needs the importer's builder");
  return *c.builder;
}

const onnx::GraphProto& graph_attr(NodeCtx& c, const char* name) {
  const auto* a = c.attr(name);
  if (!a || !a->has_g()) c.fail(fmt::format("attribute '{}' (a graph) is missing", name));
  return a->g();
}


// Input i as a scalar: on the host where it is known there (counted as a
// plan-time decision), else read back from the GPU.
int64_t scalar_input(NodeCtx& c, size_t i, const std::string& what) {
  Builder& b = builder_of(c);
  const Slot& s = c.slot(i);
  if (numel(s.shape) != 1) c.fail(fmt::format("{} has shape {}; expected one element", what, shape_str(s.shape)));
  const HostTensor* v = s.host ? &s.value() : b.host_value(c.node.input(int(i)));
  if (v) {
    ++b.plan_time_decisions;
    return host::is_float(v->dtype) ? int64_t(host::get(*v, 0)) : host::get_int(*v, 0);
  }
  return b.read_scalar(c.tensor(i), node_label(c) + " " + what);
}

int64_t scalar_slot(NodeCtx& c, const Slot& s, const std::string& what) {
  Builder& b = builder_of(c);
  if (numel(s.shape) != 1) c.fail(fmt::format("{} has shape {}; expected one element", what, shape_str(s.shape)));
  if (s.host) {
    ++b.plan_time_decisions;
    const HostTensor& v = s.value();
    return host::is_float(v.dtype) ? int64_t(host::get(v, 0)) : host::get_int(v, 0);
  }
  return b.read_scalar(s.ref, node_label(c) + " " + what);
}

// A result passed on: GPU values as a view (a tensor of this node's own),
// host values as they are.
Slot passed_on(NodeCtx& c, const Slot& s) {
  if (s.host) return s;
  return c.out(c.view(s.ref, s.shape));
}

HostTensor host_scalar(DType d, int64_t v) {
  HostTensor t(d, {});
  host::set_int(t, 0, v);
  return t;
}

// Slices stacked along a new axis `axis`: on the host when all are, else on
// the GPU (host slices uploaded).
Slot stack(NodeCtx& c, const std::vector<Slot>& parts, int64_t axis, const std::string& what) {
  const Shape& s0 = parts.front().shape;
  for (const Slot& p : parts) {
    if (p.shape != s0 || p.dtype != parts.front().dtype) {
      c.unsupported(fmt::format("{}: iterations give shapes {} and {} (dtypes {} and {}); stacking needs them equal", what,
                                shape_str(s0), shape_str(p.shape), dtype_name(parts.front().dtype), dtype_name(p.dtype)));
    }
  }
  const int64_t r = int64_t(s0.size()) + 1;
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) c.fail(fmt::format("{}: axis out of range for rank {}", what, r));
  Shape one = s0;
  one.insert(one.begin() + axis, 1);
  bool all_host = true;
  for (const Slot& p : parts) all_host &= p.host;
  if (all_host) {
    std::vector<HostTensor> held;
    held.reserve(parts.size());
    std::vector<const HostTensor*> ptrs;
    for (const Slot& p : parts) {
      held.push_back(host::reshape(p.value(), one));
      ptrs.push_back(&held.back());
    }
    return Slot::of_host(host::concat(ptrs, axis));
  }
  ValueList views;
  for (const Slot& p : parts) views.push_back(c.view(p.host ? c.constant(p.value()) : p.ref, one));
  if (views.size() == 1) return c.out(c.view(views[0].tensor(), one));
  return c.out(c.call("aten.cat.default", {views, axis}));
}

// Element `index` of `s` along `axis`, that axis dropped.
Slot take(NodeCtx& c, const Slot& s, int64_t axis, int64_t index) {
  if (axis < 0 || axis >= int64_t(s.shape.size()) || index < 0 || index >= s.shape[size_t(axis)]) {
    c.fail(fmt::format("a scanned value of shape {} has no element {} along axis {}", shape_str(s.shape), index, axis));
  }
  Shape out = s.shape;
  out.erase(out.begin() + axis);
  if (s.host) {
    return Slot::of_host(host::reshape(host::slice(s.value(), {index}, {index + 1}, {axis}, {}), out));
  }
  const TensorRef t = c.call("aten.slice.Tensor", {s.ref, axis, index, index + 1, int64_t(1)}).tensor();
  return c.out(c.view(t, out));
}

std::vector<Slot> if_op(NodeCtx& c) {
  Builder& b = builder_of(c);
  const bool cond = scalar_input(c, 0, "condition") != 0;
  const char* which = cond ? "then_branch" : "else_branch";
  const onnx::GraphProto& branch = graph_attr(c, which);
  std::vector<Slot> outs = b.build(branch, {}, node_label(c) + " " + which);
  if (int(outs.size()) != c.node.output_size()) {
    c.fail(fmt::format("{} has {} outputs; the node has {}", which, outs.size(), c.node.output_size()));
  }
  std::vector<Slot> result;
  for (const Slot& s : outs) result.push_back(passed_on(c, s));
  return result;
}

std::vector<Slot> loop_op(NodeCtx& c) {
  Builder& b = builder_of(c);
  const onnx::GraphProto& body = graph_attr(c, "body");
  const size_t n_carried = c.inputs() >= 2 ? c.inputs() - 2 : 0;
  if (body.input_size() != int(n_carried) + 2) {
    c.fail(fmt::format("the body takes {} inputs; expected {} (iteration, condition, {} carried)", body.input_size(),
                       n_carried + 2, n_carried));
  }
  const int n_scan = body.output_size() - 1 - int(n_carried);
  if (n_scan < 0 || c.node.output_size() != int(n_carried) + n_scan) {
    c.fail(fmt::format("the body has {} outputs and the node {}; expected 1 + {} carried + scan outputs",
                       body.output_size(), c.node.output_size(), n_carried));
  }
  std::optional<int64_t> max_trips;
  if (c.has(0)) max_trips = scalar_input(c, 0, "trip count M");
  const bool has_cond = c.has(1);
  bool cond = has_cond ? scalar_input(c, 1, "condition") != 0 : true;
  std::vector<Slot> carried;
  for (size_t k = 0; k < n_carried; ++k) carried.push_back(c.slot(k + 2));
  std::vector<std::vector<Slot>> scans(static_cast<size_t>(n_scan));
  int64_t i = 0;
  for (; (!max_trips || i < *max_trips) && cond; ++i) {
    if (i >= kMaxIterations) {
      c.unsupported(fmt::format("the loop runs more than {} iterations; wgnn unrolls loops into the plan", kMaxIterations));
    }
    std::vector<Slot> in;
    in.push_back(Slot::of_host(host_scalar(DType::I64, i)));
    in.push_back(Slot::of_host(host_scalar(DType::Bool, 1)));
    for (const Slot& s : carried) in.push_back(s);
    std::vector<Slot> outs = b.build(body, std::move(in), fmt::format("{} #{}", node_label(c), i), {0});
    ++b.unrolled_iterations;
    if (has_cond) cond = scalar_slot(c, outs[0], fmt::format("condition after iteration {}", i)) != 0;
    for (size_t k = 0; k < n_carried; ++k) carried[k] = std::move(outs[1 + k]);
    for (int k = 0; k < n_scan; ++k) scans[size_t(k)].push_back(std::move(outs[1 + n_carried + size_t(k)]));
  }
  std::vector<Slot> result;
  for (const Slot& s : carried) result.push_back(passed_on(c, s));
  for (int k = 0; k < n_scan; ++k) {
    if (i == 0) c.unsupported("a loop with scan outputs that runs no iteration (their shapes are unknown)");
    result.push_back(stack(c, scans[size_t(k)], 0, fmt::format("scan output {}", k)));
  }
  return result;
}

// Scan over `states` and `inputs` (no batch axis): the body once per element
// along each input's axis.
std::vector<Slot> scan_once(NodeCtx& c, const onnx::GraphProto& body, std::vector<Slot> states,
                            const std::vector<Slot>& inputs, const std::vector<int64_t>& in_axes,
                            const std::vector<int64_t>& in_dirs, const std::vector<int64_t>& out_axes,
                            const std::vector<int64_t>& out_dirs, const std::string& label) {
  Builder& b = builder_of(c);
  const size_t n = states.size(), m = inputs.size();
  int64_t T = -1;
  for (size_t k = 0; k < m; ++k) {
    if (in_axes[k] < 0 || in_axes[k] >= int64_t(inputs[k].shape.size())) c.fail("scan_input_axes out of range");
    const int64_t len = inputs[k].shape[size_t(in_axes[k])];
    if (T >= 0 && len != T) c.fail(fmt::format("scan inputs have lengths {} and {} along their axes", T, len));
    T = len;
  }
  const int n_out = body.output_size() - int(n);
  if (n_out < 0) c.fail("the body has fewer outputs than states");
  std::vector<std::vector<Slot>> scans(static_cast<size_t>(n_out));
  for (int64_t t = 0; t < T; ++t) {
    if (t >= kMaxIterations) c.unsupported(fmt::format("a scan over more than {} elements", kMaxIterations));
    std::vector<Slot> in = states;
    for (size_t k = 0; k < m; ++k) in.push_back(take(c, inputs[k], in_axes[k], in_dirs[k] ? T - 1 - t : t));
    std::vector<Slot> outs = b.build(body, std::move(in), fmt::format("{} #{}", label, t));
    ++b.unrolled_iterations;
    for (size_t k = 0; k < n; ++k) states[k] = std::move(outs[k]);
    for (int k = 0; k < n_out; ++k) scans[size_t(k)].push_back(std::move(outs[n + size_t(k)]));
  }
  std::vector<Slot> result = std::move(states);
  for (int k = 0; k < n_out; ++k) {
    if (T <= 0) c.unsupported("a scan over no element with scan outputs (their shapes are unknown)");
    auto& parts = scans[size_t(k)];
    if (out_dirs[size_t(k)]) std::reverse(parts.begin(), parts.end());
    result.push_back(stack(c, parts, out_axes[size_t(k)], fmt::format("scan output {}", k)));
  }
  return result;
}

std::vector<Slot> scan_op(NodeCtx& c) {
  const onnx::GraphProto& body = graph_attr(c, "body");
  const int64_t m = c.attr_int("num_scan_inputs", -1);
  const bool batched = c.opset < 9;  // Scan 8: a batch axis 0 and sequence_lens first
  const size_t first = batched ? 1 : 0;
  if (m < 1 || size_t(m) > c.inputs() - first) c.fail(fmt::format("num_scan_inputs is {}", m));
  const size_t n = c.inputs() - first - size_t(m);
  const int n_out = body.output_size() - int(n);
  auto list = [&](const char* name, size_t count, bool axis, const std::vector<Slot>* of) {
    std::vector<int64_t> v = c.attr_ints(name);
    if (v.empty()) v.assign(count, 0);
    if (v.size() != count) c.fail(fmt::format("attribute '{}' has {} entries; expected {}", name, v.size(), count));
    if (axis && of) {
      for (size_t k = 0; k < count; ++k) {
        const int64_t r = int64_t((*of)[k].shape.size());
        if (v[k] < 0) v[k] += r;
        if (v[k] < 0 || v[k] >= r) c.fail(fmt::format("attribute '{}'[{}] out of range", name, k));
      }
    }
    return v;
  };
  std::vector<Slot> states, inputs;
  for (size_t k = 0; k < n; ++k) states.push_back(c.slot(first + k));
  for (size_t k = 0; k < size_t(m); ++k) inputs.push_back(c.slot(first + n + k));
  const std::string label = node_label(c);
  if (!batched) {
    const auto in_axes = list("scan_input_axes", size_t(m), true, &inputs);
    const auto in_dirs = list("scan_input_directions", size_t(m), false, nullptr);
    std::vector<int64_t> out_axes = c.attr_ints("scan_output_axes");
    if (out_axes.empty()) out_axes.assign(size_t(std::max(n_out, 0)), 0);
    const auto out_dirs = list("scan_output_directions", size_t(std::max(n_out, 0)), false, nullptr);
    std::vector<Slot> r = scan_once(c, body, states, inputs, in_axes, in_dirs, out_axes, out_dirs, label);
    std::vector<Slot> result;
    for (const Slot& s : r) result.push_back(passed_on(c, s));
    return result;
  }
  // Scan 8: each batch row on its own, the results stacked along axis 0.
  const auto dirs = list("directions", size_t(m), false, nullptr);
  for (const Slot& s : inputs) {
    if (s.shape.size() < 2) c.fail(fmt::format("a scan input has shape {}; Scan 8 takes [batch, sequence, ...]", shape_str(s.shape)));
  }
  const int64_t B = inputs.front().shape[0];
  if (B * inputs.front().shape[1] > kMaxIterations) {
    c.unsupported(fmt::format("a scan of {} rows of {} elements: more than {} iterations", B, inputs.front().shape[1],
                              kMaxIterations));
  }
  if (c.has(0)) {
    const HostTensor* lens = c.slot(0).host ? &c.slot(0).value() : builder_of(c).host_value(c.node.input(0));
    if (!lens) c.unsupported("sequence_lens computed on the GPU");
    for (int64_t v : host::to_ints(*lens)) {
      if (v != inputs.front().shape[1]) c.unsupported("sequence_lens shorter than the scan inputs");
    }
  }
  std::vector<std::vector<Slot>> rows;
  for (int64_t bi = 0; bi < B; ++bi) {
    std::vector<Slot> st, in;
    for (const Slot& s : states) st.push_back(take(c, s, 0, bi));
    for (const Slot& s : inputs) in.push_back(take(c, s, 0, bi));
    rows.push_back(scan_once(c, body, st, in, std::vector<int64_t>(size_t(m), 0), dirs,
                             std::vector<int64_t>(size_t(std::max(n_out, 0)), 0),
                             std::vector<int64_t>(size_t(std::max(n_out, 0)), 0), fmt::format("{} row {}", label, bi)));
  }
  std::vector<Slot> result;
  for (size_t k = 0; k < rows.front().size(); ++k) {
    std::vector<Slot> parts;
    for (auto& r : rows) parts.push_back(r[k]);
    result.push_back(stack(c, parts, 0, fmt::format("output {}", k)));
  }
  return result;
}

}  // namespace

void add_control_mappers(std::map<std::string, OpMapper>& m) {
  m["If"] = {{}, if_op, nullptr};
  m["Loop"] = {{}, loop_op, nullptr};
  m["Scan"] = {{}, scan_op, nullptr};
}

}  // namespace wgnn::onnx_import

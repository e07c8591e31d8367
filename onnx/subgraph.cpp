#include "onnx/subgraph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "gpu/error.h"
#include "onnx/host_ops.h"
#include "onnx/schema_check.h"
#include "onnx/tensor_proto.h"

namespace wgnn::onnx_import {
namespace {

// host_value folds values of at most this many elements, through at most
// kFoldDepth producers: shape-like data, never a model's activations.
constexpr int64_t kFoldElements = 4096;
constexpr int kFoldDepth = 64;
constexpr int64_t kInputElements = 64;

void graph_reads(const onnx::GraphProto& sub, std::set<std::string>& out) {
  std::set<std::string> local;
  for (const auto& in : sub.input()) local.insert(in.name());
  for (const auto& init : sub.initializer()) local.insert(init.name());
  for (const auto& n : sub.node()) {
    std::set<std::string> reads(n.input().begin(), n.input().end());
    outer_reads(n, reads);
    for (const auto& r : reads)
      if (!r.empty() && !local.count(r)) out.insert(r);
    for (const auto& o : n.output()) local.insert(o);
  }
  for (const auto& o : sub.output())
    if (!local.count(o.name())) out.insert(o.name());
}

}  // namespace

Slot* Scope::find(const std::string& name, Scope** where) {
  for (Scope* s = this; s; s = s->outer) {
    auto it = s->values->find(name);
    if (it != s->values->end()) {
      if (where) *where = s;
      return &it->second;
    }
  }
  return nullptr;
}

void outer_reads(const onnx::NodeProto& n, std::set<std::string>& out) {
  for (const auto& a : n.attribute()) {
    if (a.has_g()) graph_reads(a.g(), out);
    for (const auto& sub : a.graphs()) graph_reads(sub, out);
  }
}

void Builder::build_node(const onnx::NodeProto& n, Scope& scope, const std::set<std::string>* needed) {
  struct Timed {
    std::map<std::string, double>* into;
    const std::string& op;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    ~Timed() {
      if (into) (*into)[op] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  } timed{op_ms, n.op_type()};
  std::vector<Slot*> in;
  bool all_host = true;
  for (const auto& name : n.input()) {
    if (name.empty()) {
      in.push_back(nullptr);
      continue;
    }
    Slot* s = scope.find(name);
    if (!s) {
      throw Error(fmt::format("node '{}' ({}): input '{}' is produced by no earlier node, initializer or graph input",
                              node_name(n), n.op_type(), name));
    }
    all_host &= s->host;
    in.push_back(s);
  }
  const OpMapper* found = find_mapper(n);
  if (!found) throw Unsupported(fmt::format("node '{}' ({}): operator not supported", node_name(n), mapper_key(n)));
  const OpMapper& m = *found;
  NodeCtx c(g_, n, opset_, in, value_inputs_, storage_);
  c.builder = this;
  c.trace = trace;
  Scope* const outer_current = current_;
  current_ = &scope;
  struct Restore {
    Scope*& cur;
    Scope* was;
    ~Restore() { cur = was; }
  } restore{current_, outer_current};
  g_.set_origin(c.where());  // names the node in run-time check errors
  const bool fold = all_host && m.fold;
  if (!fold && !m.dtypes.empty() && c.has(0) &&
      std::find(m.dtypes.begin(), m.dtypes.end(), c.dtype(0)) == m.dtypes.end()) {
    std::vector<std::string> names;
    for (DType d : m.dtypes) names.emplace_back(dtype_name(d));
    c.unsupported(fmt::format("input dtype {} is not supported; accepted: {}", dtype_name(c.dtype(0)),
                              fmt::join(names, ", ")));
  }
  std::vector<Slot> outs;
  if (fold) {
    try {
      if (m.defer && trace) {
        outs = m.defer(c);
      } else {
        for (HostTensor& t : m.fold(c)) outs.push_back(Slot::of_host(std::move(t)));
      }
    } catch (const Unsupported&) {
      throw;
    } catch (const Error& e) {
      c.fail(e.what());
    }
    ++folded;
  } else {
    try {
      outs = m.build(c);
    } catch (const HostOutOfMemory&) {
      throw;
    } catch (const Unsupported&) {
      throw;
    } catch (const gpu::GpuError&) {
      throw;
    } catch (const Error& e) {
      // Name the node, unless the mapper did (NodeCtx::fail).
      if (std::string(e.what()).rfind(c.where(), 0) == 0) throw;
      c.fail(e.what());
    }
    ++mapped;
  }
  if (outs.size() < size_t(n.output_size())) {
    for (int k = int(outs.size()); k < n.output_size(); ++k) {
      if (!n.output(k).empty() && (!needed || needed->count(n.output(k))))
        c.unsupported(fmt::format("output {} is not produced", k));
    }
  }
  for (int k = 0; k < n.output_size() && size_t(k) < outs.size(); ++k) {
    if (!n.output(k).empty()) (*scope.values)[n.output(k)] = std::move(outs[size_t(k)]);
  }
}

std::vector<Slot> Builder::build(const onnx::GraphProto& body, std::vector<Slot> inputs, const std::string& instance,
                                 const std::set<size_t>& fold) {
  if (!current_) throw Error("a subgraph built outside a node");
  if (int(inputs.size()) != body.input_size()) {
    throw Error(fmt::format("{}: the subgraph takes {} inputs, given {}", instance, body.input_size(), inputs.size()));
  }
  scopes_.push_back(std::make_unique<std::map<std::string, Slot>>());
  Scope inner{scopes_.back().get(), current_, &body};
  for (int k = 0; k < body.input_size(); ++k) (*inner.values)[body.input(k).name()] = std::move(inputs[size_t(k)]);
  for (const auto& init : body.initializer()) {
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      throw Unsupported(fmt::format("{}: initializer '{}' of a subgraph keeps its data in an external file", instance,
                                    init.name()));
    }
    (*inner.values)[init.name()] = Slot::of_host(from_tensor_proto(init, ""));
  }
  const std::string outer_path = path_;
  path_ += instance + "/";
  Scope* const outer_current = current_;
  std::vector<Slot> outs;
  try {
    for (const auto& n : body.node()) build_node(n, inner, nullptr);
    for (int k = 0; k < body.output_size(); ++k) {
      const std::string& name = body.output(k).name();
      Slot* s = inner.find(name);
      if (!s) throw Error(fmt::format("{}: subgraph output '{}' is produced by nothing", instance, name));
      if (!s->host && fold.count(size_t(k))) {
        current_ = &inner;
        const HostTensor* v = host_value(name);
        current_ = outer_current;
        if (v) {
          outs.push_back(Slot::of_host(*v));
          continue;
        }
      }
      outs.push_back(*s);
    }
  } catch (...) {
    current_ = outer_current;
    path_ = outer_path;
    throw;
  }
  path_ = outer_path;
  return outs;
}

const HostTensor* Builder::host_value(const std::string& name) {
  if (!current_) return nullptr;
  std::set<std::string> inputs_read;
  const HostTensor* v = fold_in(name, current_, inputs_read, 0);
  // The plan depends on the graph inputs read only when the fold succeeded.
  if (v && value_inputs_) value_inputs_->insert(inputs_read.begin(), inputs_read.end());
  return v;
}

const HostTensor* Builder::fold_in(const std::string& name, Scope* scope, std::set<std::string>& inputs_read,
                                   int depth) {
  Scope* where = nullptr;
  Slot* s = scope->find(name, &where);
  if (!s) return nullptr;
  if (s->host) return &s->value();
  if (s->input_value) {
    // Graph inputs that configure the model (a sample rate, a flag, a
    // length: integers or bools, a few values) are read on the host, the
    // plan kept per value; data (floats, larger tensors) is not: a plan per
    // input value would be built on every run.
    if (host::is_float(s->input_value->dtype) || s->input_value->numel() > kInputElements) return nullptr;
    inputs_read.insert(s->input_name);
    return s->input_value;
  }
  if (depth >= kFoldDepth || numel(s->shape) > kFoldElements || !where->graph) return nullptr;
  const auto key = std::make_pair(static_cast<const void*>(where->values), name);
  if (auto it = folded_values_.find(key); it != folded_values_.end()) return &it->second;
  const onnx::NodeProto* producer = nullptr;
  int out_index = -1;
  for (const auto& n : where->graph->node()) {
    for (int k = 0; k < n.output_size(); ++k)
      if (n.output(k) == name) producer = &n, out_index = k;
  }
  if (!producer) return nullptr;
  const OpMapper* fm = find_mapper(*producer);
  if (!fm || !fm->fold) return nullptr;
  std::vector<Slot> held;
  held.reserve(size_t(producer->input_size()));
  std::vector<Slot*> in(size_t(producer->input_size()), nullptr);
  for (const auto& iname : producer->input()) {
    if (iname.empty()) continue;
    const HostTensor* v = fold_in(iname, where, inputs_read, depth + 1);
    if (!v) return nullptr;
    held.push_back(Slot::of_stored(*v));
  }
  for (size_t k = 0, h = 0; k < size_t(producer->input_size()); ++k)
    if (!producer->input(int(k)).empty()) in[k] = &held[h++];
  NodeCtx c(g_, *producer, opset_, in, nullptr, storage_);
  std::vector<HostTensor> outs;
  try {
    outs = fm->fold(c);
  } catch (const HostOutOfMemory&) {
    throw;
  } catch (const Error&) {
    return nullptr;  // the GPU build of the node stands; only this fold is given up
  }
  if (out_index >= int(outs.size())) return nullptr;
  for (int k = 0; k < int(outs.size()) && k < producer->output_size(); ++k) {
    folded_values_[std::make_pair(static_cast<const void*>(where->values), producer->output(k))] =
        std::move(outs[size_t(k)]);
  }
  return &folded_values_.at(key);
}

int64_t Builder::read_scalar(TensorRef value, const std::string& what) {
  const std::string key = path_ + what;
  if (numel(g_.info(value).shape) != 1) {
    throw Error(fmt::format("{}: the value has shape {}; expected one element", what, shape_str(g_.info(value).shape)));
  }
  if (decisions_) {
    if (auto it = decisions_->find(key); it != decisions_->end()) {
      ++readback_decisions;
      return it->second;
    }
  }
  throw NeedsReadback{key, value};
}

int64_t Builder::read_size(TensorRef value, const std::string& what) {
  const int decisions = readback_decisions;
  const int64_t v = read_scalar(value, what);
  readback_decisions = decisions;
  ++sizes_read_back;
  return v;
}

}  // namespace wgnn::onnx_import

#include "onnx/session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/onnx_pb.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include "gpu/buffer_batch.h"
#include "ir/program.h"
#include "onnx/functions.h"
#include "onnx/ir_trace.h"
#include "onnx/host_ops.h"
#include "onnx/model_bytes.h"
#include "onnx/node_ctx.h"
#include "onnx/old_opsets.h"
#include "onnx/schema_check.h"
#include "onnx/subgraph.h"
#include "onnx/tensor_proto.h"
#include "ops/subgroup_matmul.h"
#include "passes/passes.h"
#include "pte/program.h"
#include "graph/half.h"
#include "util/file.h"
#include "util/host_memory.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace wgnn::onnx_import {

struct Session::Built {
  std::unique_ptr<Graph> graph;
  std::map<std::string, TensorRef> inputs;
  std::vector<std::pair<std::string, Slot>> outputs;  // in model order
  // Without shader-f16: float16 inputs widened into these float32 copies
  // before upload, float16 outputs read into these and narrowed (by name).
  std::map<std::string, HostTensor> widened_in, widened_out;
  int folded = 0, mapped = 0;
  // The IR passes' fusions in this plan ("fuse_gelu 2, fuse_conv_residual 1"; empty: none, or recorded directly).
  std::string ir_fusions;
  // Fused IR nodes this plan lowered as their chains (the op refused the
  // plan's shapes or dtypes), each with the op's reason.
  std::vector<std::string> ir_fallbacks;
  bool through_ir = false;  // planned through the IR (else recorded directly)
  // Control flow (onnx/subgraph.h): conditions and trip counts decided at
  // plan time, and by a readback; Loop and Scan iterations unrolled.
  int plan_time_decisions = 0, readback_decisions = 0, unrolled = 0;
  int sizes_read_back = 0;  // result sizes that depend on the data, read back (Builder::read_size)
  // A probe: the graph up to a value computed on the GPU that control flow
  // needs (its one output), named by the decision's key.
  std::string probe;
  bool is_probe() const { return !probe.empty(); }
  uint64_t last_use = 0;  // the plan cache's clock at the last run (LRU eviction)
  // SessionOptions::tiered: this plan runs on the regular kernels while the
  // tensor-core plan for the same inputs waits here for its pipelines.
  std::unique_ptr<Built> tier_up;
  bool ran = false;  // a waited run has made its outputs once
};

namespace {

// The setting WGNN_NO_FUSION (anything but "" or "0") turns the IR's
// fusion passes off, as SessionOptions::fusion false does.
bool fusion_setting(const Settings& settings) {
  const char* e = settings.get("WGNN_NO_FUSION");
  return !e || !*e || std::string(e) == "0";
}

// A setting of whole milliseconds, 0 to `max` (`def` when unset or empty);
// anything else is an Error naming it.
int env_ms(const Settings& settings, const char* name, long max, int def) {
  const char* e = settings.get(name);
  if (!e || !*e) return def;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  if (*end != '\0' || v < 0 || v > max) throw Error(fmt::format("{}='{}': milliseconds, 0 to {}", name, e, max));
  return int(v);
}

// A 0/1 setting (`def` when unset or empty); anything else is an Error.
bool env_flag(const Settings& settings, const char* name, bool def) {
  const char* e = settings.get(name);
  if (!e || !*e) return def;
  const std::string v(e);
  if (v != "0" && v != "1") throw Error(fmt::format("{}='{}': 1 (on) or 0 (off)", name, v));
  return v == "1";
}

// Below 7: the operators onnx/old_opsets.h lists. Above 21, the operators
// whose meaning changed check the new attributes in their mappers (docs/
// CONFORMANCE.md, "Opsets 22 to 28").
constexpr int kMinOpset = 1, kMaxOpset = 28;
// Values read back for control flow in one run (each a probe run first).
constexpr size_t kMaxReadbacks = 4096;
// Probe plans kept (besides SessionOptions::max_plans plans).
constexpr size_t kMaxProbes = 256;

// Protobuf refuses messages over 2 GB; larger models keep weights as
// external data.
void parse_coded(google::protobuf::io::CodedInputStream& coded, onnx::ModelProto& model, const std::string& name) {
  coded.SetTotalBytesLimit(INT32_MAX);
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    throw Error(fmt::format("'{}' is not a valid ONNX model (protobuf parsing failed: truncated or not ONNX)", name));
  }
  if (!model.has_graph()) throw Error(fmt::format("'{}' has no graph: not an ONNX model", name));
}

ValueInfo value_info(const onnx::ValueInfoProto& v) {
  ValueInfo info;
  info.name = v.name();
  if (!v.type().has_tensor_type()) {
    throw Unsupported(fmt::format("graph value '{}' is not a tensor (sequences, maps and optionals are not supported)",
                                  v.name()));
  }
  const auto& tt = v.type().tensor_type();
  info.dtype = dtype_from_onnx(tt.elem_type(), fmt::format("graph value '{}'", v.name()));
  if (tt.has_shape()) {
    info.ranked = true;
    for (const auto& d : tt.shape().dim()) {
      info.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
      info.dim_names.push_back(d.has_dim_param() ? d.dim_param() : "");
    }
  }
  return info;
}

// The graph cache key: every input's shape, plus the bytes of the inputs
// whose values a graph was specialized on.
// Orders the nodes so every input is produced before it is used. ONNX asks
// for topological order, but converters do not always give it (ISNet's
// graph casts its input in a node listed last). Original order is kept where
// it is valid; an input produced by nothing, or a cycle, is an error.
void sort_topologically(onnx::GraphProto& g, const std::set<std::string>& available) {
  const int n = g.node_size();
  std::map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const auto& o : g.node(i).output())
      if (!o.empty()) producer[o] = i;
  std::vector<std::vector<int>> users(static_cast<size_t>(n));
  std::vector<int> pending(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    const auto& node = g.node(i);
    std::set<int> deps;
    std::set<std::string> reads(node.input().begin(), node.input().end());
    outer_reads(node, reads);  // values its subgraphs read
    for (const auto& in : reads) {
      if (in.empty() || available.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end()) {
        throw Error(fmt::format("node '{}' ({}): input '{}' is produced by no node, initializer or graph input "
                                "(the graph is malformed)",
                                node_name(node), node.op_type(), in));
      }
      if (it->second == i) {
        throw Error(fmt::format("node '{}' ({}): input '{}' is its own output (a cycle)", node_name(node),
                                node.op_type(), in));
      }
      deps.insert(it->second);
    }
    pending[size_t(i)] = int(deps.size());
    for (int d : deps) users[size_t(d)].push_back(i);
  }
  std::set<int> ready;
  for (int i = 0; i < n; ++i)
    if (pending[size_t(i)] == 0) ready.insert(i);
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int u : users[size_t(i)])
      if (--pending[size_t(u)] == 0) ready.insert(u);
  }
  if (int(order.size()) != n) throw Error("the graph has a cycle: its nodes cannot be ordered");
  bool sorted = true;
  for (int i = 0; i < n; ++i) sorted &= order[size_t(i)] == i;
  if (sorted) return;
  std::vector<onnx::NodeProto> nodes(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) nodes[size_t(i)].Swap(g.mutable_node(order[size_t(i)]));
  for (int i = 0; i < n; ++i) g.mutable_node(i)->Swap(&nodes[size_t(i)]);
}



// The nodes inside a node's subgraphs (If's branches, Loop's and Scan's
// bodies, at any depth) that wgnn lacks, counted by operator: what a model
// with control flow needs beyond the control flow itself.
void count_unsupported_inside(const onnx::NodeProto& n, const std::map<std::string, OpMapper>& mappers,
                              std::map<std::string, int>& count, int& nodes) {
  auto walk = [&](const onnx::GraphProto& sub) {
    for (const auto& inner : sub.node()) {
      ++nodes;
      if (!mappers.count(mapper_key(inner))) ++count[mapper_key(inner)];
      count_unsupported_inside(inner, mappers, count, nodes);
    }
  };
  for (const auto& a : n.attribute()) {
    if (a.has_g()) walk(a.g());
    for (const auto& sub : a.graphs()) walk(sub);
  }
}

// Everything but parsing: the opset, initializers, graph values, node
// order and the operators the outputs need.
void check_model(LoadedModel& m, const std::string& path, const SplitModel* split, std::string_view bytes) {
  int64_t opset = 0;
  for (const auto& op : m.proto->opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version();
  }
  if (opset == 0 && m.proto->opset_import_size() == 0) {
    throw Error(fmt::format("'{}' has no opset_import: the model does not say which opset it uses", path));
  }
  if (opset == 0) {
    // Only other domains are imported (ai.onnx.preview.training, ...): their
    // operators are what wgnn lacks, not a malformed file.
    std::vector<std::string> domains;
    for (const auto& op : m.proto->opset_import()) domains.push_back(fmt::format("'{}' {}", op.domain(), op.version()));
    throw Unsupported(fmt::format("'{}' imports no ONNX-domain opset, only {}: not supported", path,
                                  fmt::join(domains, ", ")));
  }
  if (opset < kMinOpset || opset > kMaxOpset) {
    throw Unsupported(fmt::format("'{}' uses ONNX opset {}; supported: {} to {}", path, opset, kMinOpset, kMaxOpset));
  }
  m.opset = int(opset);
  for (const auto& kv : m.proto->metadata_props()) m.metadata[kv.key()] = kv.value();
  inline_local_functions(*m.proto, m.opset);
  const auto& g = m.proto->graph();
  check_graph_rules(g);
  {
    // The weights in huge pages where large (kept for the session's life:
    // a fault per 2 MiB, not per 4 KiB, util/host_memory.h). Their bytes
    // come straight from the model's bytes where the split found them;
    // else from the proto, each dropped from it once converted (the
    // weights held once, not twice).
    util::MapLargeBlocks big;
    auto* inits = m.proto->mutable_graph()->mutable_initializer();
    if (split && split->raw.size() != size_t(inits->size())) {
      throw Error(fmt::format("'{}': {} initializers parsed, {} found in the bytes", path, inits->size(),
                              split->raw.size()));
    }
    for (int i = 0; i < inits->size(); ++i) {
      auto& init = (*inits)[i];
      if (split && split->raw[size_t(i)].present) {
        // Its bytes straight from the file, not through a string of protobuf's.
        const SplitModel::Raw& r = split->raw[size_t(i)];
        const std::string_view raw = bytes.substr(r.offset, r.size);
        m.initializers.emplace(init.name(), from_tensor_proto(init, m.dir, &raw));
        continue;
      }
      m.initializers.emplace(init.name(), from_tensor_proto(init, m.dir));
      if (init.has_raw_data()) std::string().swap(*init.mutable_raw_data());
    }
  }
  {
    // 4-bit initializers (held unpacked as int8 / uint8) may only be read by
    // DequantizeLinear, as x or x_zero_point: another op would take them for
    // 8-bit values (a QuantizeLinear with an int4 zero point would saturate
    // at 8 bits).
    std::set<std::string> four;
    for (const auto& init : g.initializer())
      if (is_4bit(init.data_type())) four.insert(init.name());
    for (const auto& n : g.node()) {
      for (int i = 0; i < n.input_size(); ++i) {
        if (!four.count(n.input(i))) continue;
        if (n.op_type() != "DequantizeLinear" || !(n.domain().empty() || n.domain() == "ai.onnx") || i == 1) {
          throw Unsupported(fmt::format("node '{}' ({}) reads the 4-bit initializer '{}' as its input {}; wgnn reads "
                                        "int4 and uint4 values only as DequantizeLinear's x and x_zero_point",
                                        node_name(n), n.op_type(), n.input(i), i));
        }
      }
    }
  }
  for (const auto& in : g.input()) {
    if (m.initializers.count(in.name())) continue;  // old-style models list weights as inputs
    m.inputs.push_back(value_info(in));
  }
  for (const auto& out : g.output()) m.outputs.push_back(value_info(out));
  {
    std::set<std::string> available;
    for (const auto& in : g.input()) available.insert(in.name());
    for (const auto& [name, t] : m.initializers) available.insert(name);
    sort_topologically(*m.proto->mutable_graph(), available);
  }
  check_node_schemas(g, m.opset);
  if (const auto old = old_opset_problems(g, m.opset); !old.empty()) {
    throw Unsupported(fmt::format("'{}' uses ONNX opset {} (before numpy broadcasting, opset 7); {} node{} not supported "
                                  "there:\n  {}",
                                  path, m.opset, old.size(), old.size() > 1 ? "s" : "", fmt::join(old, "\n  ")));
  }

  // Every node the outputs need must be supported: one error lists them all.
  std::set<std::string> needed;
  for (const auto& o : g.output()) needed.insert(o.name());
  std::vector<bool> live(size_t(g.node_size()), false);
  for (int i = g.node_size() - 1; i >= 0; --i) {
    const auto& n = g.node(i);
    bool used = false;
    for (const auto& o : n.output()) used |= needed.count(o) > 0;
    if (!used) continue;
    live[size_t(i)] = true;
    for (const auto& in : n.input()) needed.insert(in);
    outer_reads(n, needed);
  }
  std::vector<std::string> problems;
  int nested_unsupported = 0;
  int holders = 0;  // supported nodes listed for the unsupported nodes inside them
  const auto& mappers = op_mappers();
  std::set<std::string> produced;
  for (const auto& in : m.inputs) produced.insert(in.name);
  for (const auto& [name, t] : m.initializers) produced.insert(name);
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    const std::string where = fmt::format("node '{}' ({}, opset {})", node_name(n), n.op_type(), m.opset);
    for (const auto& o : n.output()) produced.insert(o);
    if (!live[size_t(i)]) continue;
    const bool other_domain = !n.domain().empty() && n.domain() != "ai.onnx";
    if (other_domain && !mappers.count(mapper_key(n))) {
      problems.push_back(fmt::format("{}: operator domain '{}' is not supported", where, n.domain()));
    } else if (!mappers.count(mapper_key(n))) {
      std::map<std::string, int> inside;
      int inner_nodes = 0;
      count_unsupported_inside(n, mappers, inside, inner_nodes);
      std::string also;
      if (inner_nodes > 0) {
        std::vector<std::string> parts;
        int total = 0;
        for (const auto& [op, k] : inside) {
          parts.push_back(k > 1 ? fmt::format("{} x{}", op, k) : op);
          total += k;
        }
        nested_unsupported += total;
        also = total ? fmt::format("; its subgraphs hold {} nodes, {} of them also unsupported: {}", inner_nodes, total,
                                   fmt::join(parts, ", "))
                     : fmt::format("; its subgraphs hold {} nodes, all of them supported", inner_nodes);
      }
      problems.push_back(fmt::format("{}: operator not supported{}", where, also));
    } else {
      // Control flow wgnn runs: the nodes inside its subgraphs must be supported too.
      std::map<std::string, int> inside;
      int inner_nodes = 0;
      count_unsupported_inside(n, mappers, inside, inner_nodes);
      if (!inside.empty()) {
        std::vector<std::string> parts;
        int total = 0;
        for (const auto& [op, k] : inside) {
          parts.push_back(k > 1 ? fmt::format("{} x{}", op, k) : op);
          total += k;
        }
        nested_unsupported += total;
        ++holders;
        problems.push_back(fmt::format("{}: its subgraphs hold {} nodes, {} of them unsupported: {}", where,
                                       inner_nodes, total, fmt::join(parts, ", ")));
      }
    }
  }
  for (const auto& o : g.output()) {
    if (!produced.count(o.name())) throw Error(fmt::format("graph output '{}' is produced by nothing", o.name()));
  }
  if (!problems.empty()) {
    const size_t total = problems.size() - size_t(holders) + size_t(nested_unsupported);
    throw Unsupported(fmt::format("'{}' has {} unsupported node{}{}:\n  {}", path, total, total > 1 ? "s" : "",
                                  nested_unsupported ? fmt::format(" ({} of them inside subgraphs)", nested_unsupported)
                                                     : std::string(),
                                  fmt::join(problems, "\n  ")));
  }
}

}  // namespace

LoadedModel::LoadedModel() = default;
LoadedModel::LoadedModel(LoadedModel&&) noexcept = default;
LoadedModel& LoadedModel::operator=(LoadedModel&&) noexcept = default;
LoadedModel::~LoadedModel() = default;

namespace {

// Parses a whole model's bytes: the message without its initializers' raw
// bytes (onnx/model_bytes.h), which are then read from `bytes`; or, where
// they are not in that plain form, the bytes as they are.
void parse_model_bytes(std::string_view bytes, LoadedModel& m, const std::string& name) {
  SplitModel split;
  const bool ok = bytes.size() <= size_t(INT32_MAX) && split_initializer_bytes(bytes, split);
  const std::string_view parsed = ok ? std::string_view(split.rest) : bytes;
  google::protobuf::io::CodedInputStream coded(reinterpret_cast<const uint8_t*>(parsed.data()),
                                               int(std::min<size_t>(parsed.size(), INT32_MAX)));
  parse_coded(coded, *m.proto, name);
  check_model(m, name, ok ? &split : nullptr, bytes);
}

}  // namespace

namespace {
// An ExecuTorch program as a LoadedModel: its IR, its inputs and outputs.
// `bytes`: the file, kept where the program has dynamic shapes (each new
// set of input sizes reads it again, pte::load_at_sizes).
LoadedModel from_pte(pte::Model p, const std::string& path, const std::string& name, std::string bytes) {
  LoadedModel m;
  m.proto = std::make_unique<onnx::ModelProto>();
  m.dir = path.empty() ? std::string() : std::filesystem::absolute(path).parent_path().string();
  m.format = "pte";
  for (const auto& t : p.inputs) {
    m.inputs.push_back({t.name, t.dtype, t.shape, std::vector<std::string>(t.shape.size()), true, t.max_shape});
  }
  for (const auto& t : p.outputs) {
    m.outputs.push_back({t.name, t.dtype, t.shape, std::vector<std::string>(t.shape.size()), true, t.max_shape});
  }
  m.ir = std::make_shared<const ir::Graph>(std::move(p.ir));
  for (auto& st : p.states) m.states.push_back({st.input, st.output, std::move(st.initial)});
  if (p.dynamic) {
    auto file = std::make_shared<const std::string>(std::move(bytes));
    m.ir_at = [file, name, method = p.method, n = p.inputs.size()](gpu::Context& ctx, const std::vector<Shape>& shapes) {
      // The IR's inputs: the method's, then its state (whose shapes are fixed).
      const std::vector<Shape> given(shapes.begin(), shapes.begin() + long(std::min(n, shapes.size())));
      ir::Graph g = pte::load_at_sizes(*file, name, method, given, ctx).ir;
      // It dies with its plan's recording: the plans' ConstantStore finds
      // its constants by their bytes, not by an address a later one reuses.
      g.set_transient(true);
      return std::make_shared<const ir::Graph>(std::move(g));
    };
  }
  return m;
}

// Whether an IR model has float16 inputs or constants.
bool widen_f16_dtype_in(const ir::Graph& g) {
  for (size_t i = 0; i < g.value_count(); ++i) {
    const auto& v = g.value(TensorRef{int(i)});
    if (v.kind != ir::ValueKind::Result && v.dtype == DType::F16) return true;
  }
  return false;
}

bool file_is_pte(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char head[8] = {};
  const size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  return pte::is_pte(std::string_view(head, n));
}
}  // namespace

LoadedModel load_model(const std::string& path) {
  if (file_is_pte(path)) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(fmt::format("cannot open '{}'", path));
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) throw Error(fmt::format("reading '{}' failed", path));
    pte::Model p = pte::load_from_bytes(bytes, path);
    return from_pte(std::move(p), path, path, std::move(bytes));
  }
  LoadedModel m;
  m.proto = std::make_unique<onnx::ModelProto>();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open model '{}'", path));
  m.dir = std::filesystem::absolute(path).parent_path().string();
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_size) > uint64_t(INT32_MAX)) {
    // Not a plain file (a pipe), or over protobuf's 2 GB: streamed, as
    // protobuf reads it (and refuses what is over its limit).
    try {
      google::protobuf::io::FileInputStream raw(fd);
      google::protobuf::io::CodedInputStream coded(&raw);
      parse_coded(coded, *m.proto, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    check_model(m, path, nullptr, {});
    return m;
  }
  // The whole file in memory (huge pages: one fault per 2 MiB), read once.
  util::HostBytes bytes;
  try {
    util::MapLargeBlocks big;
    bytes.resize(size_t(st.st_size));
    util::read_exact(fd, bytes.data(), bytes.size(), fmt::format("model '{}'", path));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  parse_model_bytes(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), m, path);
  return m;
}

namespace {
bool graph_uses_op(const onnx::GraphProto& g, const std::string& key) {
  for (const auto& n : g.node()) {
    if (mapper_key(n) == key) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && graph_uses_op(a.g(), key)) return true;
      for (const auto& sg : a.graphs()) {
        if (graph_uses_op(sg, key)) return true;
      }
    }
  }
  return false;
}

bool graph_reads(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) {
      if (in == name) return true;
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g() && graph_reads(a.g(), name)) return true;
      for (const auto& sg : a.graphs()) {
        if (graph_reads(sg, name)) return true;
      }
    }
  }
  return false;
}
}  // namespace

bool Session::uses_op(const std::string& key) const {
  if (ir_model_) {
    for (const auto& n : ir_model_->nodes()) {
      if (!n.dead && n.op == key) return true;
    }
    return false;
  }
  return graph_uses_op(model_->graph(), key);
}
bool Session::reads_input(const std::string& name) const {
  if (ir_model_) {
    for (size_t i = 0; i < ir_model_->inputs().size(); ++i) {
      const TensorRef in = ir_model_->inputs()[i];
      if (ir_model_->value(in).name == name) return !ir_model_->users(in).empty() || ir_model_->is_output(in);
    }
    return false;
  }
  return graph_reads(model_->graph(), name);
}

LoadedModel load_model_from_bytes(const std::string& bytes, const std::string& name, const std::string& dir) {
  if (pte::is_pte(bytes)) return from_pte(pte::load_from_bytes(bytes, name), {}, name, bytes);
  LoadedModel m;
  m.proto = std::make_unique<onnx::ModelProto>();
  m.dir = dir;
  parse_model_bytes(bytes, m, name);
  return m;
}

namespace {
// The plan cache of these options (probes kept apart, at most kMaxProbes).
PlanCacheOptions cache_options(const SessionOptions& o) {
  if (o.max_plans < 1) {
    throw Error(fmt::format("SessionOptions::max_plans is {}: at least one plan must be kept", o.max_plans));
  }
  if (o.max_plan_sizes < 1) {
    throw Error(fmt::format("SessionOptions::max_plan_sizes is {}: at least one size must be kept", o.max_plan_sizes));
  }
  PlanCacheOptions c;
  c.max_plans = o.max_plans;
  c.max_plan_sizes = o.max_plan_sizes;
  c.max_probes = kMaxProbes;
  c.size_classes = o.size_classes;
  return c;
}
}  // namespace

Session::Session(gpu::Context& ctx, const std::string& path, SessionOptions options)
    : Session(ctx, load_model(path), options) {}

Session::Session(gpu::Context& ctx, LoadedModel model, SessionOptions options)
    : ctx_(ctx),
      options_(options),
      model_(std::move(model.proto)),
      ir_model_(std::move(model.ir)),
      ir_at_(std::move(model.ir_at)),
      format_(std::move(model.format)),
      model_dir_(std::move(model.dir)),
      opset_(model.opset),
      inputs_(std::move(model.inputs)),
      outputs_(std::move(model.outputs)),
      initializers_(std::move(model.initializers)),
      cache_(cache_options(options)) {
  if (options_.fp16 && !ctx_.features().shader_f16) {
    throw Unsupported(fmt::format(
        "float16 mode needs the shader-f16 feature, which this adapter ({}{}) lacks; run without float16 mode "
        "(a model's own float16 values still run, stored as float32)",
        ctx_.adapter().name, ctx_.limits_mode() == "default" ? ", requested with WebGPU's default limits" : ""));
  }
  for (auto& st : model.states) {
    StateSlot slot{st.input, st.output, std::move(st.initial), {}, {}};
    slot.now = to_device(ctx_, slot.initial, slot.input);
    states_.push_back(std::move(slot));
  }
  if (ir_model_ && options_.fp16) {
    throw Unsupported(fmt::format("float16 mode is not supported for {} models yet; run them in their own dtypes",
                                  format_));
  }
  if (ir_model_ && widen_f16_dtype_in(*ir_model_) && !ctx_.features().shader_f16) {
    throw Unsupported(fmt::format("this {} model has float16 values and the adapter ({}) lacks shader-f16", format_,
                                  ctx_.adapter().name));
  }
  constants_ = std::make_unique<ConstantStore>(ctx_);
  tiered_ = options_.tiered;
  if (const char* e = ctx_.settings().get("WGNN_TIERED"); e && *e) {
    const std::string v(e);
    if (v != "0" && v != "1") {
      throw Error(fmt::format("WGNN_TIERED='{}': 1 runs a new plan first on the regular kernels while its "
                              "tensor-core pipelines compile, 0 does not",
                              v));
    }
    tiered_ = v == "1";
  }
  tiered_ = tiered_ && ops::tensor_cores_available(ctx_);
  ir_import_ = options_.ir_import;
  if (const char* e = ctx_.settings().get("WGNN_IR_IMPORT"); e && *e) {
    const std::string v(e);
    if (v != "0" && v != "1") {
      throw Error(fmt::format("WGNN_IR_IMPORT='{}': 1 imports the model's plans through the IR, 0 records them "
                              "directly",
                              v));
    }
    ir_import_ = v == "1";
  }
  tier_grace_ms_ = env_ms(ctx_.settings(), "WGNN_TIER_GRACE_MS", 60000, tier_grace_ms_);
  tier_disk_wait_ms_ = env_ms(ctx_.settings(), "WGNN_TIER_DISK_WAIT_MS", 600000, tier_disk_wait_ms_);
  widen_f16_ = !ctx_.features().shader_f16;
  for (const auto& [name, t] : initializers_) uses_f16_ |= t.dtype == DType::F16;
  for (const auto& v : inputs_) uses_f16_ |= v.dtype == DType::F16;
  for (const auto& v : outputs_) uses_f16_ |= v.dtype == DType::F16;
  if (!options_.outputs.empty()) {
    std::vector<ValueInfo> chosen;
    for (const auto& name : options_.outputs) {
      auto it = std::find_if(outputs_.begin(), outputs_.end(), [&](const ValueInfo& v) { return v.name == name; });
      if (it == outputs_.end()) {
        std::vector<std::string> names;
        for (const auto& v : outputs_) names.push_back(fmt::format("'{}'", v.name));
        throw Error(fmt::format("SessionOptions::outputs: '{}' is not an output of the model; its outputs: {}", name,
                                fmt::join(names, ", ")));
      }
      if (std::any_of(chosen.begin(), chosen.end(), [&](const ValueInfo& v) { return v.name == name; })) {
        throw Error(fmt::format("SessionOptions::outputs: '{}' is given twice", name));
      }
      chosen.push_back(*it);
    }
    outputs_ = std::move(chosen);
  }
  for (const auto& n : model_->graph().node()) {
    for (const auto& a : n.attribute()) {
      uses_f16_ |= a.name() == "to" && a.i() == 10;  // Cast to FLOAT16
      uses_f16_ |= a.has_t() && a.t().data_type() == 10;  // a float16 Constant
    }
  }
  if (ctx_.disk_cache_stats().enabled && env_flag(ctx_.settings(), "WGNN_PREFETCH_PIPELINES", true)) {
    pipeline_list_id_ = pipeline_list_id();
    disk_before_prefetch_ = ctx_.disk_cache_stats();
    std::vector<uint64_t> readback;
    prefetched_ = ctx_.prefetch_pipelines(pipeline_list_id_, &readback);
    if (!readback.empty() && ctx_.features().thread_safe && env_flag(ctx_.settings(), "WGNN_PREFETCH_READBACK", true)) {
      readback_batch_ =
          std::make_shared<gpu::BufferBatch>(ctx_, std::move(readback), gpu::kMapRead | gpu::kCopyDst, "readback");
    }
  }
}

std::string Session::pipeline_list_id() const {
  // The graph without its weights' values (nodes, subgraphs and Constant
  // nodes included; initializers by name, type and shape), and what else
  // decides the kernels: the options and the device's features.
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  std::string bytes;
  const auto add = [&](std::string_view v) {
    const uint64_t n = v.size();
    XXH3_64bits_update(&st, &n, sizeof n);
    XXH3_64bits_update(&st, v.data(), v.size());
  };
  const auto& graph = model_->graph();
  for (const auto& n : graph.node()) {
    n.SerializeToString(&bytes);
    add(bytes);
  }
  for (const auto& v : graph.input()) add(v.SerializeAsString());
  for (const auto& v : graph.output()) add(v.SerializeAsString());
  if (ir_model_) add(ir_model_->dump());
  for (const auto& [name, t] : initializers_) {
    add(fmt::format("{}:{}:{}", name, dtype_name(t.dtype), shape_str(t.shape)));
  }
  add(fmt::format("opset {} fp16 {} fusion {} checked {} tensor cores {}", opset_, options_.fp16, options_.fusion,
                  options_.checked, ops::tensor_cores_available(ctx_)));
  for (const auto& o : outputs_) add(o.name);
  return fmt::format("{:016x}", XXH3_64bits_digest(&st));
}

Session::~Session() {
  // Graph buffers are released under the Context's lock: another Session on
  // it may be running on another thread.
  const std::unique_lock<std::mutex> turn = ctx_.exclusive();
  last_ = nullptr;
  readback_batch_.reset();
  started_.clear();
  cache_.clear();  // a Graph with runs in flight waits for the GPU
  constants_.reset();
}

void Session::set_input_shape(const std::string& name, const Shape& shape) {
  auto it = std::find_if(inputs_.begin(), inputs_.end(), [&](const ValueInfo& v) { return v.name == name; });
  if (it == inputs_.end()) throw Error(fmt::format("set_input_shape: '{}' is not an input of this model", name));
  if (it->ranked && it->shape.size() != shape.size()) {
    throw Error(fmt::format("set_input_shape: input '{}' has rank {}; got shape {}", name, it->shape.size(),
                            shape_str(shape)));
  }
  for (size_t k = 0; k < it->max_shape.size(); ++k) {
    if (shape[k] > it->max_shape[k]) {
      throw Error(fmt::format("set_input_shape: input '{}' takes at most {}; got {}", name, shape_str(it->max_shape),
                              shape_str(shape)));
    }
  }
  it->shape = shape;
  it->dim_names.resize(shape.size());
  it->ranked = true;
}

int Session::plans() const { return cache_.plans(); }

int Session::plan_sizes() const { return cache_.plan_sizes(); }

uint64_t Session::plan_buffer_bytes() const { return cache_.buffer_bytes(); }

void Session::join_plan(Built& b) {
  // Every graph of the Session takes its buffers from one storage: they
  // run one at a time. A graph whose structure a kept one has is that
  // plan's other size (one layout of the storage). What an eviction frees
  // is each size's dispatches, bind groups, uniforms and the constants only
  // it holds; the buffers are the Session's. An evicted graph's deferred
  // check failures are read first, not lost with it.
  cache_.join(*b.graph);
  if (b.tier_up) cache_.join(*b.tier_up->graph);
  cache_.make_room(b, [&](Built& gone) {
    gone.graph->check_deferred();
    if (last_ == &gone) last_ = nullptr;
  });
}

Graph& Session::graph() {
  if (!last_) throw Error("Session::graph(): the session has not run yet");
  return *last_->graph;
}

Session::Built& Session::build_for(const Feeds& inputs, const std::map<std::string, int64_t>& decisions) {
  const std::string key = plan_key(inputs, decisions);
  if (Built* found = cache_.find(key)) {
    if (found->tier_up) try_tier_up(*found);
    return *found;
  }
  // A plan built before a later build found more inputs whose values it
  // reads is keyed without their values (it does not read them): found
  // by the inputs read by value then, and keyed again as the plans now are.
  for (auto set = earlier_value_inputs_.rbegin(); set != earlier_value_inputs_.rend(); ++set) {
    Built* found = cache_.rekey(plan_key(inputs, decisions, *set), key);
    if (!found) continue;
    cache_.touch(*found);
    if (found->tier_up) try_tier_up(*found);
    return *found;
  }
  const std::set<std::string> value_inputs_before = value_inputs_;
  const auto t0 = std::chrono::steady_clock::now();
  const auto ms_from = [](std::chrono::steady_clock::time_point a) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
  };
  last_phases_ = {};
  const uint64_t faults0 = util::minor_page_faults();
  const gpu::CreationStats created0 = ctx_.creation_stats();
  // The first build's pipelines were looked up in the disk cache when the
  // session asked for them at load: count from before that.
  const gpu::DiskCacheStats disk0 = builds_ == 0 && prefetched_ > 0 ? disk_before_prefetch_ : ctx_.disk_cache_stats();
  auto tp = std::chrono::steady_clock::now();
  std::unique_ptr<Built> b = record_plan(inputs, decisions, true);
  last_phases_.record_ms = ms_from(tp);
  if (tiered_ && b->probe.empty()) {
    // A warm pipeline cache makes the tensor-core plan's pipelines in a few
    // ms: wait the grace before recording the regular plan. Beyond it, the
    // disk cache says which it is: while every blob Dawn has looked up
    // since this build began was there, the pipelines come from the disk
    // (no compile), and the wait goes on, up to tier_disk_wait_ms_; the
    // first miss is a compile, and the regular plan is recorded at once.
    tp = std::chrono::steady_clock::now();
    const auto disk_end = tp + std::chrono::milliseconds(std::max(tier_grace_ms_, tier_disk_wait_ms_));
    const auto grace_end = tp + std::chrono::milliseconds(tier_grace_ms_);
    std::vector<const gpu::Pipeline*> pending = b->graph->pending_pipelines();
    while (!pending.empty()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= disk_end) break;
      if (disk0.enabled && tier_grace_ms_ > 0) {
        const gpu::DiskCacheStats d = ctx_.disk_cache_stats();
        if (d.misses > disk0.misses || d.corrupt > disk0.corrupt) break;         // compiling
        if (now >= grace_end && d.loads == disk0.loads) break;                   // nothing looked up yet
      } else if (now >= grace_end) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      pending = b->graph->pending_pipelines();
    }
    last_phases_.tier_wait_ms = ms_from(tp);
    // Only a tensor-core pipeline still compiling is worth a regular plan:
    // the rest the regular plan would wait for too (a float32 model on a
    // GPU with tensor cores was recorded twice for nothing, and its buffer
    // count depended on how fast its pipelines compiled).
    const bool tensor_cores_pending =
        std::any_of(pending.begin(), pending.end(), [](const gpu::Pipeline* p) { return p->tensor_cores(); });
    if (tensor_cores_pending) {
      std::unique_ptr<Built> regular;
      tp = std::chrono::steady_clock::now();
      try {
        regular = record_plan(inputs, decisions, false);
      } catch (const Error&) {
        // What the regular kernels refuse, the tensor-core plan does alone.
      }
      last_phases_.regular_record_ms = ms_from(tp);
      const std::vector<const gpu::Pipeline*> its = regular ? regular->graph->pipelines() : pending;
      const std::set<const gpu::Pipeline*> uses(its.begin(), its.end());
      // Only when the tensor-core plan waits for pipelines the regular one
      // does without (else it is the same wait).
      if (std::any_of(pending.begin(), pending.end(), [&](const gpu::Pipeline* p) { return !uses.count(p); })) {
        regular->tier_up = std::move(b);
        b = std::move(regular);
        ++tiered_plans_;
        if (options_.verbose) {
          fmt::print(stderr, "wgnn: a new plan runs first on the regular kernels while {} tensor-core pipeline{} compile\n",
                     pending.size(), pending.size() == 1 ? "" : "s");
        }
      }
    }
  }
  constants_->release_scratch();
  // Another size of a kept plan shares its buffers; the least recently used
  // plans (or sizes) go before the new one allocates: their intermediates
  // and the constants no other plan holds are freed first.
  join_plan(*b);
  tp = std::chrono::steady_clock::now();
  b->graph->prepare();
  last_phases_.prepare_ms = ms_from(tp);
  last_phases_.created = ctx_.creation_stats() - created0;
  last_phases_.page_faults = util::minor_page_faults() - faults0;
  if (!pipelines_remembered_ && !pipeline_list_id_.empty() && b->probe.empty()) {
    // The steady plan's pipelines (the tensor-core plan where this one is
    // its regular stand-in), for the next process to ask for at load.
    pipelines_remembered_ = true;
    // With the sizes of its readback buffers (every output on the GPU), for
    // the next process to make at load (gpu/buffer_batch.h).
    std::vector<uint64_t> readback;
    std::set<int> seen;
    for (const auto& [name, slot] : b->outputs) {
      if (slot.host || !seen.insert(slot.ref.id).second) continue;
      const uint64_t bytes = (b->graph->info(slot.ref).gpu_bytes() + 3) / 4 * 4;
      if (bytes > 0) readback.push_back(bytes);
    }
    ctx_.remember_pipelines(pipeline_list_id_, (b->tier_up ? *b->tier_up : *b).graph->pipelines(), readback);
  }
  if (readback_batch_ && b->probe.empty()) b->graph->offer_readback_buffers(readback_batch_);
  ++builds_;
  last_build_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  total_build_ms_ += last_build_ms_;
  cache_.touch(*b);
  // The key again: recording may have found inputs whose values the plan
  // reads (value_inputs_), which are part of it.
  if (value_inputs_ != value_inputs_before) earlier_value_inputs_.push_back(value_inputs_before);
  return cache_.keep(plan_key(inputs, decisions), std::move(b));
}

void Session::settle() {
  for (auto& [key, b] : cache_.entries()) {
    if (!b->tier_up) continue;
    // handle() waits for a pipeline still compiling (and throws its error
    // at prepare() below, once, as a poll would).
    for (const gpu::Pipeline* p : b->tier_up->graph->pending_pipelines()) {
      try {
        (void)p->handle();
      } catch (const Error&) {
      }
    }
    try_tier_up(*b);
  }
}

void Session::try_tier_up(Built& b) {
  // Not under a run in flight (start()), which reads this plan's buffers.
  if (std::any_of(started_.begin(), started_.end(), [&](const Started& s) { return s.built == &b; }) ||
      !b.tier_up->graph->pending_pipelines().empty()) {
    return;
  }
  b.graph->check_deferred();  // the failures of its runs not waited for are not lost with it
  std::unique_ptr<Built> next = std::move(b.tier_up);
  // Every pipeline is ready: nothing waits. A pipeline whose creation
  // failed throws here, once: the plan stays on the regular kernels.
  next->graph->prepare();
  next->last_use = b.last_use;
  b = std::move(*next);
  ++tier_ups_;
  if (options_.verbose) fmt::print(stderr, "wgnn: a plan switched to its tensor-core kernels\n");
}

std::unique_ptr<Session::Built> Session::record_plan(const Feeds& inputs, const std::map<std::string, int64_t>& decisions,
                                                     bool tensor_cores) {
  // A size class's later sizes replay the structural choices of its first
  // (SessionOptions::size_classes); a replay not followed to the end made
  // a structure of its own, and the class keeps its first choices.
  std::string cls;
  replaying_.reset();
  if (options_.size_classes) {
    cls = size_class(inputs, decisions, tensor_cores);
    replaying_ = cache_.choices_of(cls);
  }
  std::unique_ptr<Built> b = ir_model_      ? record_ir_plan(inputs, tensor_cores)
                             : ir_import_ ? record_plan_as(inputs, decisions, tensor_cores, true)
                                          : record_plan_as(inputs, decisions, tensor_cores, false);
  replaying_.reset();
  if (!cls.empty() && !b->is_probe()) cache_.remember_choices(cls, *b->graph);
  return b;
}

std::string Session::size_class(const Feeds& inputs, const std::map<std::string, int64_t>& decisions,
                                bool tensor_cores) const {
  // Inputs in name order by rank (and by value where a plan reads them),
  // the elements of all inputs by powers of 4, control flow's decisions.
  std::map<std::string, std::pair<const Shape*, const HostInput*>> all;
  for (const auto& [n, t] : inputs.host) all[n] = {&t.shape, &t};
  for (const auto& [n, t] : inputs.device) all[n] = {&t->shape, nullptr};
  std::string k = tensor_cores ? "tc;" : "regular;";
  double elements = 0;
  for (const auto& [n, st] : all) {
    k += fmt::format("{}:{};", n, st.first->size());
    elements += double(numel(*st.first));
    if (value_inputs_.count(n) && st.second) k.append(static_cast<const char*>(st.second->data), st.second->nbytes).push_back(';');
  }
  k += fmt::format("4^{}", power_of_4_class(elements));
  for (const auto& [what, v] : decisions) k += fmt::format("|{}={}", what, v);
  return k;
}

passes::Report Session::optimize_ir(ir::Graph& irg, bool tensor_cores, Built& b) const {
  passes::OptimizeOptions po;
  po.fusion = options_.fusion && fusion_setting(ctx_.settings());
  po.disabled = ctx_.settings().value("WGNN_DISABLE_PASSES");
  po.context.device = &ctx_;
  const char* dump = ctx_.settings().get("WGNN_DUMP_IR");
  const bool dump_ir = dump && *dump && std::string(dump) != "0" && tensor_cores;
  if (dump_ir) fmt::print(stderr, "wgnn: the plan's IR as imported:\n{}", irg.dump());
  const passes::Report report = passes::optimize(irg, po);
  if (dump_ir) fmt::print(stderr, "wgnn: after the passes ({}):\n{}", report.summary(), irg.dump());
  for (const auto& [pass, count] : report.applied) {
    if (pass.rfind("fuse_", 0) == 0) b.ir_fusions += fmt::format("{}{} {}", b.ir_fusions.empty() ? "" : ", ", pass, count);
  }
  return report;
}

std::unique_ptr<Session::Built> Session::record_ir_plan(const Feeds& inputs, bool tensor_cores) {
  auto b = std::make_unique<Built>();
  b->graph = std::make_unique<Graph>(ctx_);
  Graph& plan = *b->graph;
  plan.set_constant_store(constants_.get());
  if (replaying_) plan.replay_choices(replaying_);
  plan.set_checked(options_.checked);
  plan.set_tensor_cores(tensor_cores);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Shape> shapes;
  for (TensorRef in : ir_model_->inputs()) {
    const std::string& name = ir_model_->value(in).name;
    const auto h = inputs.host.find(name);
    shapes.push_back(h != inputs.host.end() ? h->second.shape : inputs.device.at(name)->shape);
  }
  // The passes rewrite a copy: every plan starts from the model as given
  // (read again at these sizes where the front end must).
  std::shared_ptr<const ir::Graph> model = ir_model_;
  if (ir_at_) {
    bool at_declared = true;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const auto& dims = ir_model_->value(ir_model_->inputs()[i]).shape;
      at_declared = at_declared && dims.size() == shapes[i].size();
      for (size_t k = 0; at_declared && k < dims.size(); ++k) {
        at_declared = !dims[k].symbolic() && dims[k].size == shapes[i][k];
      }
    }
    if (!at_declared) model = ir_at_(ctx_, shapes);
  }
  ir::Graph irg = *model;
  const passes::Report report = optimize_ir(irg, tensor_cores, *b);
  const auto t1 = std::chrono::steady_clock::now();
  const ir::Lowered low = ir::lower(irg, plan, shapes);
  const auto t2 = std::chrono::steady_clock::now();
  b->through_ir = true;
  b->ir_fallbacks = low.stats.fallbacks;
  b->mapped = int(irg.live_nodes());
  for (size_t i = 0; i < irg.inputs().size(); ++i) b->inputs[irg.value(irg.inputs()[i]).name] = low.inputs[i];
  std::vector<std::string> wanted;
  for (const auto& o : outputs_) wanted.push_back(o.name);
  for (const auto& st : states_) wanted.push_back(st.output);
  for (const auto& name : wanted) {
    const auto& names = irg.output_names();
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) throw Error(fmt::format("output '{}' is not an output of the model's IR", name));
    b->outputs.emplace_back(name, Slot::of_tensor(plan, low.outputs.at(size_t(it - names.begin()))));
  }
  if (tensor_cores) {
    last_phases_.through_ir = true;
    last_phases_.ir_nodes = irg.live_nodes();
    last_phases_.passes = report.summary();
    const auto ms = [](auto from, auto to) { return std::chrono::duration<double, std::milli>(to - from).count(); };
    std::map<std::string, double> by_op;
    for (const auto& [label, t] : low.stats.ms_by_label) by_op[label] += t;
    by_op["(IR passes)"] += ms(t0, t1);
    last_phases_.record_by_op.assign(by_op.begin(), by_op.end());
    std::sort(last_phases_.record_by_op.begin(), last_phases_.record_by_op.end(),
              [](const auto& x, const auto& y) { return x.second > y.second; });
    (void)t2;
  }
  plan.remove_dead_dispatches();
  return b;
}

std::unique_ptr<Session::Built> Session::record_plan_as(const Feeds& inputs,
                                                        const std::map<std::string, int64_t>& decisions,
                                                        bool tensor_cores, bool through_ir) {
  auto b = std::make_unique<Built>();
  b->graph = std::make_unique<Graph>(ctx_);
  Graph& plan = *b->graph;
  plan.set_constant_store(constants_.get());
  if (replaying_) plan.replay_choices(replaying_);
  plan.set_checked(options_.checked);
  plan.set_tensor_cores(tensor_cores);
  // Through the IR, the mappers see a graph that only follows shapes, and
  // their op calls, views and constants become the IR (onnx/ir_trace.h),
  // which the passes rewrite and ir::lower then records on the plan.
  std::unique_ptr<Graph> meta;
  std::unique_ptr<IrTrace> trace;
  if (through_ir) {
    meta = std::make_unique<Graph>(ctx_);
    meta->set_meta(true);
    meta->set_checked(options_.checked);
    meta->set_tensor_cores(tensor_cores);
    trace = std::make_unique<IrTrace>(*meta);
  }
  Graph& g = through_ir ? *meta : plan;
  auto call = [&](const std::string& op, const ValueList& args) {
    return trace ? trace->call(op, args) : ops::call(g, op, args);
  };
  std::map<std::string, Slot> values;
  for (const auto& [name, t] : initializers_) values[name] = Slot::of_stored(t);
  const Storage storage{options_.fp16, widen_f16_};
  // Host inputs given as views: copied here, for the ops that read an
  // input's values while they record (a build, not every run).
  std::map<std::string, HostTensor> copies;
  for (const auto& in : inputs_) {
    // A device input has no host value: an op that needs one refuses it.
    const auto h = inputs.host.find(in.name);
    const HostTensor* host = nullptr;
    if (h != inputs.host.end()) {
      host = h->second.tensor;
      if (!host) {
        host = &copies.emplace(in.name, HostTensor(h->second.dtype, h->second.shape, h->second.data)).first->second;
      }
    }
    const DeviceTensor* dev = host ? nullptr : inputs.device.at(in.name);
    const DType dtype = host ? host->dtype : dev->dtype;
    const Shape& shape = host ? host->shape : dev->shape;
    const bool widened = widen_f16_ && dtype == DType::F16;
    TensorRef r = trace ? trace->input(shape, widened ? DType::F32 : dtype, in.name)
                        : g.add_tensor(shape, widened ? DType::F32 : dtype, TensorKind::Input, in.name);
    if (widened && host) b->widened_in[in.name] = HostTensor(DType::F32, shape);
    b->inputs[in.name] = r;
    // fp16 mode: a float32 input is cast to float16 on the GPU (aten code 5).
    Slot slot = Slot::of_tensor(g, options_.fp16 && dtype == DType::F32
                                       ? call("aten._to_copy.default", {r, int64_t(5)}).tensor()
                                       : r);
    slot.input_value = host;
    slot.input_name = in.name;
    values[in.name] = slot;
  }
  std::set<std::string> needed;
  const auto& graph = model_->graph();
  for (const auto& o : graph.output()) needed.insert(o.name());
  std::vector<bool> live(size_t(graph.node_size()), false);
  for (int i = graph.node_size() - 1; i >= 0; --i) {
    const auto& n = graph.node(i);
    for (const auto& o : n.output()) live[size_t(i)] = live[size_t(i)] || needed.count(o);
    if (live[size_t(i)]) {
      for (const auto& in : n.input()) needed.insert(in);
      outer_reads(n, needed);
    }
  }
  Builder builder(g, opset_, storage, &value_inputs_, &decisions);
  builder.trace = trace.get();
  std::map<std::string, double> op_ms;
  if (tensor_cores) builder.op_ms = &op_ms;  // the plan a build records first
  Scope root{&values, nullptr, &graph};
  auto build_node = [&](int i) { builder.build_node(graph.node(i), root, &needed); };
  bool probe = false;
  try {
  for (int i = 0; i < graph.node_size(); ++i) {
    if (live[size_t(i)]) build_node(i);
  }
  } catch (const NeedsReadback& r) {
    // The plan so far becomes a probe computing the value (a stage of the
    // model that ends at a value read back); Session::run runs it, reads
    // the value and builds again knowing it. Through the IR, the probe's
    // IR is the nodes traced so far, with that value as its one output.
    probe = true;
    for (auto& [name, v] : values) v.input_value = nullptr;
    b->probe = r.key;
    if (trace) {
      trace->output(r.value, r.key);
    } else {
      g.mark_output(r.value);
    }
    b->outputs.emplace_back(r.key, Slot::of_tensor(g, r.value));
  }
  if (builder.op_ms) {
    last_phases_.record_by_op.assign(op_ms.begin(), op_ms.end());
    std::sort(last_phases_.record_by_op.begin(), last_phases_.record_by_op.end(),
              [](const auto& x, const auto& y) { return x.second > y.second; });
  }
  for (const auto& [name, t] : inputs.device) {
    if (value_inputs_.count(name)) {
      throw Error(fmt::format("input '{}' decides shapes or control flow (the plan reads its values on the host): "
                              "give it as a host tensor, not a device tensor",
                              name));
    }
  }
  b->folded += builder.folded;
  b->mapped += builder.mapped;
  if (!probe) {
  b->plan_time_decisions = builder.plan_time_decisions;
  b->readback_decisions = builder.readback_decisions;
  b->unrolled = builder.unrolled_iterations;
  b->sizes_read_back = builder.sizes_read_back;
  for (auto& [name, v] : values) v.input_value = nullptr;
  for (const auto& o : outputs_) {
    // A name the graph lists twice among its outputs is one value, read
    // back once; each listing is answered from it (two read-backs into one
    // host tensor freed the first's memory under the copy).
    if (std::any_of(b->outputs.begin(), b->outputs.end(), [&](const auto& p) { return p.first == o.name; })) continue;
    Slot& s = values.at(o.name);
    if (!s.host && options_.fp16 && o.dtype == DType::F32 && s.dtype == DType::F16) {
      // fp16 mode: a float32 output of the model is cast back (aten code 6).
      s = Slot::of_tensor(g, call("aten._to_copy.default", {s.ref, int64_t(6)}).tensor());
    }
    if (!s.host && widen_f16_ && o.dtype == DType::F16 && s.dtype == DType::F32) {
      b->widened_out[o.name] = HostTensor(DType::F32, s.shape);
    }
    if (!s.host) {
      if (trace) trace->output(s.ref, o.name);
      else g.mark_output(s.ref);
    }
    b->outputs.emplace_back(o.name, s);
  }
  }
  if (trace) {
    // The IR, rewritten by the passes, recorded on the plan: its inputs
    // and outputs take the places of the meta graph's.
    const auto t0 = std::chrono::steady_clock::now();
    ir::Graph& irg = trace->ir();
    const passes::Report report = optimize_ir(irg, tensor_cores, *b);
    b->through_ir = true;
    std::vector<Shape> shapes;
    for (TensorRef in : irg.inputs()) {
      std::vector<int64_t> s;
      for (const ir::Dim& d : irg.value(in).shape) s.push_back(d.size);
      shapes.push_back(std::move(s));
    }
    const auto t1 = std::chrono::steady_clock::now();
    const ir::Lowered low = ir::lower(irg, plan, shapes);
    const auto t2 = std::chrono::steady_clock::now();
    b->ir_fallbacks = low.stats.fallbacks;
    for (size_t i = 0; i < irg.inputs().size(); ++i) b->inputs[irg.value(irg.inputs()[i]).name] = low.inputs[i];
    size_t k = 0;
    for (auto& [name, s] : b->outputs) {
      if (s.host) continue;
      s = Slot::of_tensor(plan, low.outputs.at(k++));
    }
    if (tensor_cores) {
      last_phases_.through_ir = true;
      last_phases_.ir_nodes = irg.live_nodes();
      last_phases_.passes = report.summary();
      // Recording's host time by ONNX op type: the import (above) and the
      // lowering of each op's IR nodes (labelled with it); the passes and
      // the rest of the lowering apart.
      const auto ms = [](auto from, auto to) { return std::chrono::duration<double, std::milli>(to - from).count(); };
      std::map<std::string, double> by_op(last_phases_.record_by_op.begin(), last_phases_.record_by_op.end());
      double labelled = 0;
      for (const auto& [label, t] : low.stats.ms_by_label) {
        by_op[label] += t;
        labelled += t;
      }
      by_op["(IR passes)"] += ms(t0, t1);
      by_op["(IR lowering, besides the ops)"] += std::max(0.0, ms(t1, t2) - labelled);
      last_phases_.record_by_op.assign(by_op.begin(), by_op.end());
      std::sort(last_phases_.record_by_op.begin(), last_phases_.record_by_op.end(),
                [](const auto& x, const auto& y) { return x.second > y.second; });
    }
  }
  // Copies whose results nobody reads (a fused op read their source in
  // place, or a node's outputs are only inspected for their shapes).
  plan.remove_dead_dispatches();
  return b;
}

HostInput HostInput::view(DType dtype, Shape shape, const void* data, size_t nbytes, const std::string& name) {
  // HostTensor's own checks of the dims, without allocating anything.
  const int64_t n = numel(shape);
  for (int64_t d : shape) {
    if (d < 0) throw Error(fmt::format("input '{}': negative dim in shape {}", name, shape_str(shape)));
  }
  const size_t want = size_t(n) * dtype_size(dtype);
  if (nbytes != want) {
    throw Error(fmt::format("input '{}': {} bytes for a {} tensor of shape {}, which takes {}", name, nbytes,
                            dtype_name(dtype), shape_str(shape), want));
  }
  if (!data && nbytes) throw Error(fmt::format("input '{}': no data", name));
  HostInput in;
  in.dtype = dtype;
  in.shape = std::move(shape);
  in.data = data;
  in.nbytes = nbytes;
  in.is_view = true;
  return in;
}

std::string Session::plan_key(const Feeds& inputs, const std::map<std::string, int64_t>& decisions) const {
  return plan_key(inputs, decisions, value_inputs_);
}

std::string Session::plan_key(const Feeds& inputs, const std::map<std::string, int64_t>& decisions,
                              const std::set<std::string>& by_value) const {
  // Inputs in name order, each by dtype-independent shape; those some op
  // read on the host (by_value) also by value.
  std::map<std::string, std::pair<const Shape*, const HostInput*>> all;
  for (const auto& [n, t] : inputs.host) all[n] = {&t.shape, &t};
  for (const auto& [n, t] : inputs.device) all[n] = {&t->shape, nullptr};
  std::string k;
  for (const auto& [n, st] : all) {
    k += n + shape_str(*st.first) + ";";
    if (by_value.count(n)) {
      if (!st.second) {
        throw Error(fmt::format("input '{}' decides shapes or control flow (the plan reads its values on the host): "
                                "give it as a host tensor, not a device tensor",
                                n));
      }
      k.append(static_cast<const char*>(st.second->data), st.second->nbytes).push_back(';');
    }
  }
  for (const auto& [what, v] : decisions) k += fmt::format("|{}={}", what, v);
  return k;
}

std::map<std::string, HostTensor> Session::run(const std::map<std::string, HostTensor>& inputs) {
  std::map<std::string, HostTensor> out;
  run(inputs, out);
  return out;
}

void Session::all_outputs(Fetches& f) const {
  // Entries that are not outputs go; every output is returned.
  for (auto it = f.host.begin(); it != f.host.end();) {
    const bool is_output = std::any_of(outputs_.begin(), outputs_.end(),
                                       [&](const ValueInfo& o) { return o.name == it->first; });
    it = is_output ? std::next(it) : f.host.erase(it);
  }
  for (const auto& o : outputs_) f.host[o.name];
}

void Session::run(const std::map<std::string, HostTensor>& inputs, std::map<std::string, HostTensor>& out) {
  Feeds feeds;
  for (const auto& [name, t] : inputs) feeds.host[name] = &t;
  Fetches fetches;
  fetches.host = std::move(out);
  all_outputs(fetches);
  run(feeds, fetches);
  out = std::move(fetches.host);
}

void Session::check_feeds(const Feeds& inputs) const {
  auto is_input = [&](const std::string& name) {
    return std::any_of(inputs_.begin(), inputs_.end(), [&](const ValueInfo& v) { return v.name == name; });
  };

  for (const auto& [name, t] : inputs.host) {
    if (!is_input(name)) throw Error(fmt::format("'{}' is not an input of this model", name));
    if (!t.given()) throw Error(fmt::format("input '{}': no tensor given", name));
    if (inputs.device.count(name)) throw Error(fmt::format("input '{}' is given twice (host and device)", name));
  }
  for (const auto& [name, t] : inputs.device) {
    if (!is_input(name)) throw Error(fmt::format("'{}' is not an input of this model", name));
    if (!t || !t->valid()) throw Error(fmt::format("input '{}': the device tensor has no storage", name));
  }
  for (const auto& in : inputs_) {
    const auto h = inputs.host.find(in.name);
    const auto d = inputs.device.find(in.name);
    if (h == inputs.host.end() && d == inputs.device.end()) {
      throw Error(fmt::format("input '{}' was not given", in.name));
    }
    const DType dtype = h != inputs.host.end() ? h->second.dtype : d->second->dtype;
    const Shape& shape = h != inputs.host.end() ? h->second.shape : d->second->shape;
    if (dtype != in.dtype) {
      throw Error(fmt::format("input '{}' has dtype {}; the model declares {}", in.name, dtype_name(dtype),
                              dtype_name(in.dtype)));
    }
    if (!in.max_shape.empty()) {
      bool ok = shape.size() == in.max_shape.size();
      for (size_t k = 0; ok && k < shape.size(); ++k) ok = shape[k] <= in.max_shape[k];
      if (!ok) {
        throw Error(fmt::format("input '{}' has shape {}; the model takes at most {} (its dynamic-shape bound)",
                                in.name, shape_str(shape), shape_str(in.max_shape)));
      }
      continue;
    }
    bool ok = !in.ranked || shape.size() == in.shape.size();
    for (size_t k = 0; ok && k < in.shape.size(); ++k) ok = in.shape[k] < 0 || in.shape[k] == shape[k];
    if (!ok) {
      throw Error(fmt::format("input '{}' has shape {}; the model declares {} (-1: any size)", in.name,
                              shape_str(shape), shape_str(in.shape)));
    }
  }
}

void Session::check_fetches(Fetches& out) const {
  auto is_output = [&](const std::string& name) {
    return std::any_of(outputs_.begin(), outputs_.end(), [&](const ValueInfo& v) { return v.name == name; });
  };
  for (const auto& [name, t] : out.host) {
    if (!is_output(name)) throw Error(fmt::format("'{}' is not an output of this session", name));
    if (out.device.count(name)) throw Error(fmt::format("output '{}' is asked for twice (host and device)", name));
  }
  for (const auto& [name, t] : out.device) {
    if (!is_output(name)) throw Error(fmt::format("'{}' is not an output of this session", name));
  }
  if (out.host.empty() && out.device.empty()) {
    for (const auto& o : outputs_) out.host[o.name];
  }
}

void Session::build(const std::map<std::string, HostTensor>& inputs) {
  const std::unique_lock<std::mutex> turn = ctx_.exclusive();
  Feeds feeds;
  for (const auto& [name, t] : inputs) feeds.host[name] = &t;
  check_feeds(feeds);
  for (auto& st : states_) feeds.device[st.input] = &st.now;
  Built& b = build_for(feeds, {});
  last_ = &b;
  if (b.is_probe()) {
    throw Error("Session::build: this model's control flow reads a value computed on the GPU, so its plan depends "
                "on the data; run() builds it");
  }
}

void Session::run(const Feeds& inputs, Fetches& out) {
  // Sessions sharing a Context take turns (gpu/context.h, "Threading").
  const std::unique_lock<std::mutex> turn = ctx_.exclusive();
  if (!started_.empty()) {
    throw Error(fmt::format("Session::run: {} started run(s) not finished; finish() them first", started_.size()));
  }
  check_feeds(inputs);
  check_fetches(out);
  if (states_.empty()) {
    run_checked(inputs, out);
    return;
  }
  // The state: read from `now`, written to `next`, swapped once the run
  // has gone through (a run that fails leaves the state as it was).
  Feeds feeds = inputs;
  for (auto& st : states_) {
    feeds.device[st.input] = &st.now;
    out.device[st.output] = std::move(st.next);
  }
  try {
    run_checked(feeds, out);
  } catch (...) {
    for (auto& st : states_) {
      st.next = std::move(out.device[st.output]);
      out.device.erase(st.output);
    }
    throw;
  }
  for (auto& st : states_) {
    st.next = std::move(st.now);
    st.now = std::move(out.device.at(st.output));
    out.device.erase(st.output);
  }
}

void Session::reset_state() {
  const std::unique_lock<std::mutex> turn = ctx_.exclusive();
  if (!started_.empty()) throw Error("Session::reset_state: a started run is not finished");
  for (auto& st : states_) st.now = to_device(ctx_, st.initial, st.input);
}

void Session::run_checked(const Feeds& inputs, Fetches& out) {
  // Values control flow reads back from the GPU: each probe computes one,
  // and the plan is the one built for the values read (onnx/subgraph.h).
  std::map<std::string, int64_t> decisions;
  for (;;) {
    Built& b = build_for(inputs, decisions);
    if (b.probe.empty()) {
      last_ = &b;
      run_built(b, inputs, out);
      return;
    }
    if (decisions.size() > kMaxReadbacks) {
      throw Unsupported(fmt::format("control flow decided by more than {} values read back from the GPU in one run",
                                    kMaxReadbacks));
    }
    Fetches probe_out;
    probe_out.host[b.probe];
    run_built(b, inputs, probe_out);
    const HostTensor& v = probe_out.host.at(b.probe);
    decisions[b.probe] = host::is_float(v.dtype) ? int64_t(host::get(v, 0)) : host::get_int(v, 0);
  }
}

void Session::start(const std::map<std::string, HostTensor>& inputs) {
  const std::unique_lock<std::mutex> turn = ctx_.exclusive();
  if (!states_.empty()) {
    throw Unsupported("Session::start: a model with state (mutable buffers) runs one run at a time, with run()");
  }
  if (started_.size() >= Graph::kMaxInFlight) {
    throw Error(fmt::format("Session::start: {} runs started and not finished (at most {}); finish() one first",
                            started_.size(), Graph::kMaxInFlight));
  }
  Feeds feeds;
  for (const auto& [name, t] : inputs) feeds.host[name] = &t;
  check_feeds(feeds);
  Built* b = nullptr;
  if (!started_.empty()) {
    // Queued behind the run in flight: only on its plan (building another
    // could evict the plan whose outputs are still to be read).
    b = cache_.find(plan_key(feeds, {}));
    if (started_.back().built == nullptr || b != started_.back().built) {
      throw Error("Session::start: these inputs need another plan than the run in flight (other shapes, or control "
                  "flow); finish() it first");
    }
    // A tiered plan whose tensor-core pipelines are ready switches here
    // too: the runs in flight on it are read back first (finish() hands
    // what they gave). Else a pipelined loop, which always has a run in
    // flight (remove-bg's folder), would stay on the regular kernels.
    if (b->tier_up && b->tier_up->graph->pending_pipelines().empty()) {
      read_back_started(*b);
      try_tier_up(*b);
    }
  } else {
    Built& first = build_for(feeds, {});
    if (!first.probe.empty()) {
      // Control flow decided on the GPU: run now; finish() hands the result.
      Started s;
      all_outputs(s.result);
      run_checked(feeds, s.result);
      started_.push_back(std::move(s));
      return;
    }
    b = &first;
  }
  std::vector<Graph::HostIn> host_in;
  std::vector<Graph::DeviceIn> device_in;
  input_lists(*b, feeds, host_in, device_in);
  // The outputs finish() reads, in output_lists' order (every output).
  std::vector<TensorRef> refs;
  for (const auto& [name, slot] : b->outputs) {
    if (!slot.host) refs.push_back(slot.ref);
  }
  b->graph->submit(host_in, refs, device_in, {});
  drop_readback_batch();
  last_ = b;
  Started s;
  s.built = b;
  started_.push_back(std::move(s));
}

void Session::finish(std::map<std::string, HostTensor>& out) {
  const std::unique_lock<std::mutex> turn = ctx_.exclusive();
  if (started_.empty()) throw Error("Session::finish: no run was started");
  Started s = std::move(started_.front());
  started_.pop_front();
  if (s.built == nullptr) {
    if (s.error) std::rethrow_exception(s.error);
    out = std::move(s.result.host);
    return;
  }
  Built& b = *s.built;
  Fetches f;
  f.host = std::move(out);
  all_outputs(f);
  std::vector<Graph::HostOut> host_out;
  std::vector<Graph::DeviceOut> device_out;
  try {
    output_lists(b, f, host_out, device_out);
    b.graph->wait(host_out);
  } catch (...) {
    out = std::move(f.host);
    throw;
  }
  narrow_outputs(b, f);
  out = std::move(f.host);
}

void Session::read_back_started(Built& b) {
  for (Started& s : started_) {  // oldest first, as the graph waits
    if (s.built != &b) continue;
    s.built = nullptr;
    try {
      Fetches f;
      all_outputs(f);
      std::vector<Graph::HostOut> host_out;
      std::vector<Graph::DeviceOut> device_out;
      output_lists(b, f, host_out, device_out);
      b.graph->wait(host_out);
      narrow_outputs(b, f);
      s.result = std::move(f);
    } catch (...) {
      s.error = std::current_exception();  // thrown by its finish(), as it would have been
    }
  }
}

void Session::input_lists(Built& b, const Feeds& inputs, std::vector<Graph::HostIn>& host_in,
                          std::vector<Graph::DeviceIn>& device_in) {
  host_in.reserve(b.inputs.size());
  for (const auto& [name, ref] : b.inputs) {
    if (auto d = inputs.device.find(name); d != inputs.device.end()) {
      device_in.push_back({ref, d->second});
      continue;
    }
    const HostInput& t = inputs.host.at(name);
    if (auto w = b.widened_in.find(name); w != b.widened_in.end()) {
      const uint16_t* src = static_cast<const uint16_t*>(t.data);
      float* dst = w->second.as<float>();
      for (size_t i = 0, n = t.nbytes / 2; i < n; ++i) dst[i] = half_to_float(src[i]);
      host_in.push_back({ref, w->second.data.data(), w->second.data.size()});
      continue;
    }
    host_in.push_back({ref, t.data, t.nbytes});
  }
}

void Session::output_lists(Built& b, Fetches& out, std::vector<Graph::HostOut>& host_out,
                           std::vector<Graph::DeviceOut>& device_out, LaterOutputs* later) {
  Graph& g = *b.graph;
  host_out.reserve(b.outputs.size());
  for (const auto& [name, slot] : b.outputs) {
    const ValueInfo* declared = nullptr;
    for (const auto& o : outputs_) declared = o.name == name ? &o : declared;
    if (auto d = out.device.find(name); d != out.device.end()) {
      DeviceTensor& dt = d->second;
      if (slot.host) {  // computed on the host: uploaded
        dt = to_device(ctx_, slot.value(), name);
        continue;
      }
      dt.dtype = declared ? declared->dtype : g.info(slot.ref).dtype;
      device_out.push_back({slot.ref, &dt});
      continue;
    }
    auto h = out.host.find(name);
    if (h == out.host.end()) continue;  // not asked for
    if (slot.host) {
      h->second = slot.value();
      continue;
    }
    const TensorInfo& ti = g.info(slot.ref);
    if (auto w = b.widened_out.find(name); w != b.widened_out.end()) {
      host_out.push_back({slot.ref, w->second.data.data(), w->second.data.size()});
      continue;
    }
    HostTensor& t = h->second;
    if (t.dtype != ti.dtype || t.shape != ti.shape || t.data.size() != ti.nbytes()) {
      if (later) {  // made by make_outputs()
        later->emplace_back(host_out.size(), &t);
        host_out.push_back({slot.ref, nullptr, size_t(ti.nbytes())});
        continue;
      }
      t = HostTensor::uninitialized(ti.dtype, ti.shape);  // written whole by the run
    }
    host_out.push_back({slot.ref, t.data.data(), t.data.size()});
  }
}

void Session::make_outputs(Built& b, std::vector<Graph::HostOut>& host_out, const LaterOutputs& later) {
  for (const auto& [index, t] : later) {
    Graph::HostOut& o = host_out.at(index);
    const TensorInfo& ti = b.graph->info(o.tensor);
    *t = HostTensor::uninitialized(ti.dtype, ti.shape);  // written whole by the run
    o.data = t->data.data();
  }
}

void Session::narrow_outputs(Built& b, Fetches& out) {
  // Widened float16 outputs, narrowed as a float32 -> float16 cast would.
  for (const auto& [name, wide] : b.widened_out) {
    auto h = out.host.find(name);
    if (h == out.host.end()) continue;
    HostTensor& t = h->second;
    if (t.dtype != DType::F16 || t.shape != wide.shape) t = HostTensor::uninitialized(DType::F16, wide.shape);
    const float* src = wide.as<float>();
    uint16_t* dst = t.as<uint16_t>();
    for (size_t i = 0, n = size_t(wide.numel()); i < n; ++i) dst[i] = float_to_half(src[i]);
  }
}

void Session::check_deferred() {
  gpu::Recorder rec(ctx_);
  std::vector<const gpu::Buffer*> staging;
  std::vector<Graph*> graphs;
  for (auto& [key, b] : cache_.entries()) {
    if (const gpu::Buffer* s = b->graph->record_deferred(rec)) {
      staging.push_back(s);
      graphs.push_back(b->graph.get());
    }
  }
  if (staging.empty()) return;
  rec.submit();
  ctx_.map_for_read(staging);
  rec.finish_completed();
  std::string failed;
  for (Graph* g : graphs) {  // every one read (and unmapped) before throwing
    std::string f = g->read_deferred();
    if (failed.empty()) failed = std::move(f);
  }
  if (!failed.empty()) throw Error(failed);
}

void Session::drop_readback_batch() {
  // After the first run's submit, which took what it needed: the buffers
  // left (outputs not asked for) are freed, and the thread stops.
  if (!readback_batch_) return;
  readback_taken_ = readback_batch_->taken();
  readback_batch_.reset();
}

void Session::run_built(Built& b, const Feeds& inputs, Fetches& out) {
  // Inputs written (host) or copied on the GPU (device), the pass, and the
  // outputs copied out in one submit and at most one wait (Graph::run).
  std::vector<Graph::HostIn> host_in;
  std::vector<Graph::DeviceIn> device_in;
  input_lists(b, inputs, host_in, device_in);
  std::vector<Graph::HostOut> host_out;
  std::vector<Graph::DeviceOut> device_out;
  if (!out.wait) {  // as Graph::run takes it (its checks deferred)
    output_lists(b, out, host_out, device_out);
    b.graph->run(host_in, host_out, device_in, device_out, false);
    drop_readback_batch();
    narrow_outputs(b, out);
    return;
  }
  LaterOutputs later;
  output_lists(b, out, host_out, device_out, &later);
  // The host outputs not yet the right size are made while the GPU runs:
  // a new output's memory costs its page faults (ISNet's 124 MB: tens of
  // ms), which would otherwise come before the submit.
  std::vector<TensorRef> refs;
  for (const Graph::HostOut& o : host_out) refs.push_back(o.tensor);
  b.graph->submit(host_in, refs, device_in, device_out);
  drop_readback_batch();
  try {
    // A plan's first outputs find no memory of theirs that glibc could hand
    // back: huge pages from 2 MiB on (a fault per 2 MiB). Later runs' new
    // outputs keep glibc's reuse of the ones their caller freed.
    std::optional<util::MapLargeBlocks> first;
    if (!b.ran) first.emplace();
    make_outputs(b, host_out, later);
  } catch (...) {
    try {
      b.graph->wait({});  // the run in flight is done with (its outputs dropped), then the error
    } catch (const std::exception&) {
    }
    throw;
  }
  b.graph->wait(host_out);
  b.ran = true;
  narrow_outputs(b, out);
}

std::string Session::summary() const {
  if (!last_) return "not run yet";
  const Graph& g = *last_->graph;
  std::string ir_fused =
      last_->ir_fusions.empty() ? "" : fmt::format("; fused chains in the IR: {}", last_->ir_fusions);
  if (!last_->ir_fallbacks.empty()) {
    ir_fused += fmt::format("; {} fused node{} ran as the chain{} it replaced (the fused op refused this plan: {})",
                            last_->ir_fallbacks.size(), last_->ir_fallbacks.size() == 1 ? "" : "s",
                            last_->ir_fallbacks.size() == 1 ? "" : "s", fmt::join(last_->ir_fallbacks, "; "));
  }
  if (!last_->through_ir) {
    ir_fused += "; recorded directly (not through the IR: WGNN_IR_IMPORT=0 or SessionOptions::ir_import), "
                "without the IR passes' fusions";
  }
  const std::string storage =
      widen_f16_ && uses_f16_
          ? "; float16 values stored as float32 (the adapter lacks shader-f16: widened on upload, Casts to "
            "float16 round)"
          : "";
  const auto& cs = constants_->stats();
  const auto mib = [](uint64_t b) { return double(b) / double(1 << 20); };
  const std::string plans = fmt::format(
      "; {} plan{} kept for {} set{} of input shapes, their buffers {:.2f} MiB ({} built in {:.1f} ms, the last in "
      "{:.1f} ms{}); constants on the GPU {:.2f} MiB, uploaded once for all plans ({:.2f} MiB reused)",
      this->plans(), this->plans() == 1 ? "" : "s", plan_sizes(), plan_sizes() == 1 ? "" : "s",
      mib(plan_buffer_bytes()), builds_, total_build_ms_, last_build_ms_,
      evictions() ? fmt::format(", {} evicted", evictions()) : "", mib(cs.bytes), mib(cs.reused_bytes));
  std::string control;
  if (last_->plan_time_decisions || last_->readback_decisions || last_->unrolled) {
    const int probes = cache_.probes();
    control = fmt::format(
        "; control flow: {} condition{} or trip count{} known at plan time, {} decided by reading a GPU value back "
        "({} probe plan{} kept: each run computes those values first, then runs the plan built for them), {} loop "
        "iterations unrolled",
        last_->plan_time_decisions, last_->plan_time_decisions == 1 ? "" : "s",
        last_->plan_time_decisions == 1 ? "" : "s", last_->readback_decisions, probes, probes == 1 ? "" : "s",
        last_->unrolled);
  }
  if (last_->sizes_read_back) {
    control += fmt::format("; {} result size{} that depend{} on the data read back from the GPU (a probe plan "
                           "computes each first)",
                           last_->sizes_read_back, last_->sizes_read_back == 1 ? "" : "s",
                           last_->sizes_read_back == 1 ? "s" : "");
  }
  return fmt::format("{}{} nodes mapped to GPU work, {} folded on the host{}; {} dispatches; {}{}{}{}",
                     options_.fp16 ? "float16 mode: " : "", last_->mapped, last_->folded, ir_fused,
                     g.dispatches().size(), g.memory_summary(), plans, storage, control);
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> names;
  for (const auto& [name, mapper] : op_mappers()) names.push_back(name);
  return names;
}

}  // namespace wgnn::onnx_import

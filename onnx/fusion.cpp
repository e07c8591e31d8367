#include "onnx/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "onnx/host_ops.h"

namespace wgnn::onnx_import {
namespace {

// Where each value comes from and how often it is read.
struct Index {
  explicit Index(const onnx::GraphProto& graph) : g(graph) {
    for (const auto& init : g.initializer()) constants.insert(init.name());
    for (const auto& o : g.output()) outputs.insert(o.name());
    for (int i = 0; i < g.node_size(); ++i) {
      const auto& n = g.node(i);
      for (const auto& in : n.input()) {
        if (in.empty()) continue;
        ++uses[in];
      }
      for (const auto& o : n.output())
        if (!o.empty()) producer[o] = i;
      // Constant nodes, and Identity of a constant (exporters write one
      // where a weight is shared).
      if (plain(n) && n.output_size() == 1 &&
          (n.op_type() == "Constant" || (n.op_type() == "Identity" && n.input_size() == 1 && is_const(n.input(0)))))
        constants.insert(n.output(0));
    }
  }

  static bool plain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }
  const onnx::NodeProto& node(int i) const { return g.node(i); }
  bool is_const(const std::string& v) const { return constants.count(v) > 0; }
  int prod(const std::string& v) const {
    auto it = producer.find(v);
    return it == producer.end() ? -1 : it->second;
  }
  // Read by one node input alone, and not a graph output.
  bool single(const std::string& v) const {
    auto it = uses.find(v);
    return it != uses.end() && it->second == 1 && !outputs.count(v);
  }
  // Node i is `op` of the default domain with `inputs` inputs and one output.
  bool is(int i, const char* op, int inputs) const {
    if (i < 0) return false;
    const auto& n = node(i);
    return n.op_type() == op && plain(n) && n.input_size() == inputs && n.output_size() == 1 &&
           std::none_of(n.input().begin(), n.input().end(), [](const std::string& s) { return s.empty(); });
  }

  const onnx::GraphProto& g;
  std::map<std::string, int> producer, uses;
  std::set<std::string> outputs, constants;
};

// MatMul node mm whose B is a DequantizeLinear of constants read by it alone.
bool dq_matmul(const Index& ix, int mm, const std::set<int>& taken, Fusion& f) {
  if (!ix.is(mm, "MatMul", 2)) return false;
  const std::string& b = ix.node(mm).input(1);
  const int d = ix.prod(b);
  if (d < 0 || taken.count(d) || !ix.single(b)) return false;
  const auto& n = ix.node(d);
  if (n.op_type() != "DequantizeLinear" || !Index::plain(n) || n.output_size() != 1 || n.input_size() < 2 ||
      n.input_size() > 3)
    return false;
  for (const auto& in : n.input())
    if (!in.empty() && !ix.is_const(in)) return false;
  f.kind = Fusion::Kind::DqMatMul;
  f.nodes = {std::min(d, mm), std::max(d, mm)};
  f.anchor = mm;
  f.x = ix.node(mm).input(0);
  f.dq = {n.input(0), n.input(1), n.input_size() > 2 ? n.input(2) : std::string()};
  return true;
}

bool is_float(DType d) { return d == DType::F32 || d == DType::F16; }

int64_t attr_int(const onnx::NodeProto& n, const char* name, int64_t def) {
  for (const auto& at : n.attribute())
    if (at.name() == name) return at.i();
  return def;
}

}  // namespace

bool fusion_enabled(const Settings& settings) {
  const char* e = settings.get("WGNN_NO_FUSION");
  return !e || !*e || std::string(e) == "0";
}

std::vector<Fusion> plan_fusions(const onnx::GraphProto& g) {
  const Index ix(g);
  std::vector<Fusion> out;
  std::set<int> taken;
  for (int i = 0; i < g.node_size(); ++i) {
    Fusion f;
    if (!taken.count(i) && dq_matmul(ix, i, taken, f)) {
      taken.insert(f.nodes.begin(), f.nodes.end());
      out.push_back(std::move(f));
    }
  }
  std::sort(out.begin(), out.end(), [](const Fusion& a, const Fusion& b) { return a.nodes.back() < b.nodes.back(); });
  return out;
}

// DequantizeLinear (constant 8-bit x [K, N], scale and zero point per
// tensor, per column or per row, not blocked) then MatMul(a, that).
std::optional<Slot> try_fusion(const Fusion& f, Graph& g, IrTrace* trace, const onnx::GraphProto& graph, int opset,
                                  const Storage& storage, std::map<std::string, Slot>& values) {
  const onnx::NodeProto& dq = graph.node(f.nodes.front() == f.anchor ? f.nodes.back() : f.nodes.front());
  Slot& a = values.at(f.x);
  Slot& w = values.at(f.dq[0]);
  Slot& sc = values.at(f.dq[1]);
  Slot* zp = f.dq[2].empty() ? nullptr : &values.at(f.dq[2]);
  if (a.host || !is_float(a.dtype) || !w.host || !sc.host || (zp && !zp->host)) return std::nullopt;
  const HostTensor& wq = w.value();
  if ((wq.dtype != DType::U8 && wq.dtype != DType::I8) || wq.shape.size() != 2) return std::nullopt;
  if (!is_float(sc.value().dtype) || (zp && zp->value().dtype != wq.dtype)) return std::nullopt;
  if (attr_int(dq, "block_size", 0) != 0) return std::nullopt;
  const int64_t K = wq.shape[0], N = wq.shape[1], ns = sc.value().numel();
  if (a.shape.empty() || a.shape.back() != K || K == 0 || N == 0) return std::nullopt;
  int64_t axis = attr_int(dq, "axis", 1);
  if (axis < 0) axis += 2;
  int64_t mode = 0;
  if (sc.shape.size() == 0 || (sc.shape.size() == 1 && ns == 1)) {
    mode = 0;
  } else if (sc.shape.size() == 1 && axis == 1 && ns == N) {
    mode = 1;
  } else if (sc.shape.size() == 1 && axis == 0 && ns == K) {
    mode = 2;
  } else {
    return std::nullopt;
  }
  if (zp && zp->value().numel() != ns) return std::nullopt;
  Slot* in[3] = {&a, &sc, zp};
  NodeCtx c(g, graph.node(f.anchor), opset, {in[0], in[1], in[2]}, nullptr, storage);
  c.trace = trace;
  const int64_t nw = (N + 3) / 4;
  HostTensor packed(DType::I32, {K, nw});
  uint32_t* pw = packed.as<uint32_t>();
  const uint8_t* src = wq.data.data();
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) pw[k * nw + n / 4] |= uint32_t(src[k * N + n]) << (8 * (n % 4));
  Value zt = None{};
  if (zp) {
    HostTensor z(DType::I32, {ns});
    for (int64_t i = 0; i < ns; ++i) z.as<int32_t>()[i] = int32_t(host::get_int(zp->value(), size_t(i)));
    zt = c.constant(z, f.dq[2] + " (int32)");
  }
  const int64_t M = numel(a.shape) / K;
  TensorRef y = c.call("wgnn.matmul_dequant.default",
                       {c.view(c.tensor(0), {M, K}), c.constant(packed, f.dq[0] + " (packed)"),
                        c.view(c.tensor_exact(1), {ns}), zt, N, wq.dtype == DType::I8, mode})
                    .tensor();
  Shape out = a.shape;
  out.back() = N;
  return c.out(c.view(y, out));
}

}  // namespace wgnn::onnx_import

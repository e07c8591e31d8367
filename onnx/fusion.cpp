#include "onnx/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <set>

#include "onnx/host_ops.h"
#include "ops/attention.h"

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
        if (uses[in]++ == 0) consumer_of[in] = i;
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
  const std::string& out(int i) const { return g.node(i).output(0); }
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
  int consumer(const std::string& v) const { return consumer_of.at(v); }
  // Node i is `op` of the default domain with `inputs` inputs and one output.
  bool is(int i, const char* op, int inputs) const {
    if (i < 0) return false;
    const auto& n = node(i);
    return n.op_type() == op && plain(n) && n.input_size() == inputs && n.output_size() == 1 &&
           std::none_of(n.input().begin(), n.input().end(), [](const std::string& s) { return s.empty(); });
  }
  // Binary node i with one constant input: {the other input, the constant}.
  bool split_const(int i, std::string& value, std::string& k) const {
    const auto& n = node(i);
    const bool c0 = is_const(n.input(0)), c1 = is_const(n.input(1));
    if (c0 == c1) return false;
    value = c1 ? n.input(0) : n.input(1);
    k = c1 ? n.input(1) : n.input(0);
    return true;
  }

  const onnx::GraphProto& g;
  std::map<std::string, int> producer, uses, consumer_of;
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

// Conv node cv then an inference BatchNormalization reading its result
// alone; weights, bias and the normalization's parameters constants.
bool conv_bn(const Index& ix, int bn, const std::set<int>& taken, Fusion& f) {
  if (!ix.is(bn, "BatchNormalization", 5)) return false;
  for (const auto& at : ix.node(bn).attribute())
    if (at.name() == "training_mode" && at.i() != 0) return false;
  const std::string& y = ix.node(bn).input(0);
  const int cv = ix.prod(y);
  if (cv < 0 || taken.count(cv) || !ix.single(y)) return false;
  const auto& c = ix.node(cv);
  if (c.op_type() != "Conv" || !Index::plain(c) || c.output_size() != 1 || c.input_size() < 2) return false;
  if (!ix.is_const(c.input(1)) || (c.input_size() > 2 && !c.input(2).empty() && !ix.is_const(c.input(2)))) return false;
  for (int i = 1; i < 5; ++i)
    if (!ix.is_const(ix.node(bn).input(i))) return false;
  f.kind = Fusion::Kind::ConvBn;
  f.nodes = {cv, bn};
  f.anchor = cv;
  f.x = c.input(0);
  f.w = c.input(1);
  f.bias = c.input_size() > 2 ? c.input(2) : "";
  f.bn = {ix.node(bn).input(1), ix.node(bn).input(2), ix.node(bn).input(3), ix.node(bn).input(4)};
  return true;
}

// Nodes an attention operand may come through that only rearrange
// elements: the attention reads their source through strides instead.
bool is_view_op(const onnx::NodeProto& n) {
  if (!Index::plain(n) || n.input_size() < 1 || n.input(0).empty()) return false;
  const std::string& op = n.op_type();
  return op == "Transpose" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Split";
}

// From value `v` back through view nodes: the value they start from and the
// steps (forward order).
std::string view_chain(const Index& ix, std::string v, std::vector<Fusion::ViewStep>& steps,
                       const std::set<int>& taken) {
  steps.clear();
  for (int guard = 0; guard < 64; ++guard) {
    const int p = ix.prod(v);
    // A view node an earlier fusion took is inside that fusion: its input
    // may never exist (one attention's merged heads as the next one's q).
    if (p < 0 || taken.count(p) || !is_view_op(ix.node(p))) break;
    steps.push_back({p, v});
    v = ix.node(p).input(0);
  }
  std::reverse(steps.begin(), steps.end());
  return v;
}

// Operand `v` of an attention product, through an optional Mul by a scalar
// (the factor: a constant, or the input not produced by a view node).
std::string scaled_operand(const Index& ix, const std::string& v, const std::set<int>& taken, Fusion& f) {
  const int p = ix.prod(v);
  if (!ix.single(v) || taken.count(p) || !ix.is(p, "Mul", 2)) return v;
  const auto& n = ix.node(p);
  int scalar = -1;
  if (ix.is_const(n.input(0)) != ix.is_const(n.input(1))) {
    scalar = ix.is_const(n.input(0)) ? 0 : 1;
  } else {
    const int p0 = ix.prod(n.input(0)), p1 = ix.prod(n.input(1));
    const bool v0 = p0 >= 0 && is_view_op(ix.node(p0)), v1 = p1 >= 0 && is_view_op(ix.node(p1));
    if (v0 == v1) return v;
    scalar = v0 ? 1 : 0;
  }
  f.nodes.push_back(p);
  f.scales.emplace_back(n.input(scalar), false);
  return n.input(1 - scalar);
}

// Softmax node sm as the middle of attention (see fusion.h).
bool attention(const Index& ix, int sm, const std::set<int>& taken, Fusion& f) {
  if (!ix.is(sm, "Softmax", 1)) return false;
  f.kind = Fusion::Kind::Attention;
  f.nodes = {sm};
  f.anchor = sm;
  std::string cur = ix.node(sm).input(0);
  auto producer = [&](const std::string& v) { return ix.single(v) ? ix.prod(v) : -1; };
  int p = producer(cur);
  if (p >= 0 && !taken.count(p) && ix.is(p, "Add", 2)) {
    bool found = false;
    for (int k = 0; k < 2 && !found; ++k) {
      const std::string& in = ix.node(p).input(k);
      const int q = producer(in);
      if (q < 0 || taken.count(q) || !(ix.is(q, "MatMul", 2) || ix.is(q, "Mul", 2) || ix.is(q, "Div", 2))) continue;
      f.mask = ix.node(p).input(1 - k);
      cur = in;
      found = true;
    }
    if (!found) return false;
    f.nodes.push_back(p);
    p = producer(cur);
  }
  if (p >= 0 && !taken.count(p) && ix.is(p, "Mul", 2)) {
    std::string val, k;
    if (!ix.split_const(p, val, k)) return false;
    f.nodes.push_back(p);
    f.scales.emplace_back(k, false);
    cur = val;
    p = producer(cur);
  } else if (p >= 0 && !taken.count(p) && ix.is(p, "Div", 2) && !ix.is_const(ix.node(p).input(0)) &&
             ix.is_const(ix.node(p).input(1))) {
    f.nodes.push_back(p);
    f.scales.emplace_back(ix.node(p).input(1), true);
    cur = ix.node(p).input(0);
    p = producer(cur);
  }
  if (p < 0 || taken.count(p) || !ix.is(p, "MatMul", 2)) return false;
  const int mm1 = p;
  f.nodes.push_back(mm1);
  const std::string q = scaled_operand(ix, ix.node(mm1).input(0), taken, f);
  const std::string kt = scaled_operand(ix, ix.node(mm1).input(1), taken, f);
  f.x = view_chain(ix, q, f.views[0], taken);
  f.w = view_chain(ix, kt, f.views[1], taken);
  const std::string& probs = ix.out(sm);
  if (!ix.single(probs)) return false;
  const int mm2 = ix.consumer(probs);
  if (taken.count(mm2) || !ix.is(mm2, "MatMul", 2) || ix.node(mm2).input(0) != probs) return false;
  f.nodes.push_back(mm2);
  f.v = view_chain(ix, ix.node(mm2).input(1), f.views[2], taken);
  cur = ix.out(mm2);
  if (ix.single(cur) && ix.is(ix.consumer(cur), "Transpose", 1) && !taken.count(ix.consumer(cur))) {
    f.out_transpose = ix.consumer(cur);
    f.nodes.push_back(f.out_transpose);
    cur = ix.out(f.out_transpose);
    if (ix.single(cur) && ix.is(ix.consumer(cur), "Reshape", 2) && !taken.count(ix.consumer(cur))) {
      f.out_reshape = ix.consumer(cur);
      f.nodes.push_back(f.out_reshape);
    }
  }
  std::sort(f.nodes.begin(), f.nodes.end());
  return std::adjacent_find(f.nodes.begin(), f.nodes.end()) == f.nodes.end();
}

bool is_float(DType d) { return d == DType::F32 || d == DType::F16; }

// The activation of a Relu or Clip node for the convolution epilogue:
// "relu", or "clamp" with its bounds (inputs 1, 2 from opset 11, else the
// min / max attributes; an absent bound is the float range's end). False
// when a bound is not a known finite-or-infinite scalar.
bool activation(const onnx::NodeProto& n, std::map<std::string, Slot>& values, std::string& act, double& lo,
                double& hi) {
  if (n.op_type() == "Relu") {
    act = "relu";
    return true;
  }
  lo = -3.4028234663852886e38, hi = 3.4028234663852886e38;
  for (const auto& at : n.attribute()) {
    if (at.name() == "min") lo = at.f();
    if (at.name() == "max") hi = at.f();
  }
  for (int i = 1; i < n.input_size() && i < 3; ++i) {
    if (n.input(i).empty()) continue;
    const Slot& s = values.at(n.input(i));
    if (!s.host || s.value().numel() != 1 || !is_float(s.value().dtype)) return false;
    (i == 1 ? lo : hi) = host::get(s.value(), 0);
  }
  if (std::isnan(lo) || std::isnan(hi) || lo > hi) return false;
  lo = std::max(lo, -3.4028234663852886e38), hi = std::min(hi, 3.4028234663852886e38);
  act = "clamp";
  return true;
}

// The product of a chain's scalar factors (f.scales: host scalars of rank
// at most `rank`, finite and non-zero; a divisor counts as 1 / v), nullopt
// when one is not such a scalar.
std::optional<double> scales_product(const Fusion& f, std::map<std::string, Slot>& values, size_t rank) {
  double p = 1;
  for (const auto& [name, divides] : f.scales) {
    const Slot& s = values.at(name);
    if (!s.host || s.value().numel() != 1 || s.shape.size() > rank || !is_float(s.value().dtype)) return std::nullopt;
    const double v = host::get(s.value(), 0);
    if (!std::isfinite(v) || v == 0) return std::nullopt;
    p = divides ? p / v : p * v;
  }
  return p;
}

// A host scalar (one element, rank at most `rank`) near `want`.
TensorRef on_gpu(NodeCtx& c, Slot& s, const std::string& name) {
  if (s.ref.id < 0) s.ref = c.slot_constant(s, name);
  return s.ref;
}

// A strided view of a tensor: element offset, sizes, strides.
struct View {
  int64_t offset = 0;
  std::vector<int64_t> size, stride;
};

View contiguous(const Shape& shape) {
  View v;
  v.size.assign(shape.begin(), shape.end());
  v.stride.assign(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) v.stride[d - 1] = v.stride[d] * std::max<int64_t>(shape[d], 1);
  return v;
}

// The strides of `v` reshaped to `shape` without moving elements (how
// torch's view() decides), false when the reshape would need a copy.
bool reshape_view(View& v, const std::vector<int64_t>& shape) {
  int64_t n_old = 1, n_new = 1;
  for (int64_t d : v.size) n_old *= d;
  for (int64_t d : shape) n_new *= d;
  if (n_old != n_new) return false;
  std::vector<int64_t> stride(shape.size(), 1);
  if (n_old == 0 || v.size.empty()) {
    View c = contiguous(Shape(shape.begin(), shape.end()));
    v.size = shape, v.stride = c.stride;
    return true;
  }
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base = v.stride.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t td = int64_t(v.size.size()) - 1; td >= 0; --td) {
    tensor_numel *= v.size[size_t(td)];
    if (td == 0 || (v.size[size_t(td - 1)] != 1 && v.stride[size_t(td - 1)] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[size_t(view_d)] == 1)) {
        stride[size_t(view_d)] = view_numel * chunk_base;
        view_numel *= shape[size_t(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (td > 0) {
        chunk_base = v.stride[size_t(td - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return false;
  v.size = shape, v.stride = stride;
  return true;
}

// Host int64 values of input `i` of node n, false when not known on the host.
bool host_ints_of(const onnx::NodeProto& n, int i, std::map<std::string, Slot>& values, std::vector<int64_t>& out) {
  if (i >= n.input_size() || n.input(i).empty()) return false;
  const Slot& s = values.at(n.input(i));
  if (!s.host) return false;
  out.clear();
  for (size_t k = 0; k < size_t(s.value().numel()); ++k) out.push_back(int64_t(host::get(s.value(), k)));
  return true;
}

std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const char* name, bool& found) {
  found = false;
  for (const auto& at : n.attribute())
    if (at.name() == name) {
      found = true;
      return {at.ints().begin(), at.ints().end()};
    }
  return {};
}

int64_t attr_int(const onnx::NodeProto& n, const char* name, int64_t def) {
  for (const auto& at : n.attribute())
    if (at.name() == name) return at.i();
  return def;
}

// Replays view step `st` on `v`; false when it cannot be expressed as strides.
bool apply_view(View& v, const Fusion::ViewStep& st, const onnx::GraphProto& graph, int opset,
                std::map<std::string, Slot>& values) {
  const onnx::NodeProto& n = graph.node(st.node);
  const std::string& op = n.op_type();
  const int64_t rank = int64_t(v.size.size());
  auto axis_of = [&](int64_t a, int64_t r) { return a < 0 ? a + r : a; };
  if (op == "Transpose") {
    bool found = false;
    std::vector<int64_t> perm = attr_ints(n, "perm", found);
    if (!found)
      for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
    if (int64_t(perm.size()) != rank) return false;
    View o = v;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t from = perm[size_t(d)];
      if (from < 0 || from >= rank) return false;
      o.size[size_t(d)] = v.size[size_t(from)];
      o.stride[size_t(d)] = v.stride[size_t(from)];
    }
    v = o;
    return true;
  }
  if (op == "Reshape") {
    std::vector<int64_t> shape;
    if (!host_ints_of(n, 1, values, shape)) return false;
    const bool allowzero = attr_int(n, "allowzero", 0) != 0;
    int64_t known = 1, infer = -1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 0 && !allowzero) {
        if (d >= v.size.size()) return false;
        shape[d] = v.size[d];
      }
      if (shape[d] == -1) {
        if (infer >= 0) return false;
        infer = int64_t(d);
      } else if (shape[d] < 0) {
        return false;
      } else {
        known *= shape[d];
      }
    }
    if (infer >= 0) {
      int64_t total = 1;
      for (int64_t d : v.size) total *= d;
      if (known == 0 || total % known != 0) return false;
      shape[size_t(infer)] = total / known;
    }
    return reshape_view(v, shape);
  }
  if (op == "Squeeze" || op == "Unsqueeze") {
    std::vector<int64_t> axes;
    bool found = false;
    if (opset >= 13) {
      found = n.input_size() > 1 && !n.input(1).empty();
      if (found && !host_ints_of(n, 1, values, axes)) return false;
    } else {
      axes = attr_ints(n, "axes", found);
    }
    if (op == "Squeeze") {
      std::set<int64_t> drop;
      for (int64_t a : axes) drop.insert(axis_of(a, rank));
      View o;
      o.offset = v.offset;
      for (int64_t d = 0; d < rank; ++d) {
        const bool squeeze = found ? drop.count(d) > 0 : v.size[size_t(d)] == 1;
        if (squeeze && v.size[size_t(d)] != 1) return false;
        if (!squeeze) o.size.push_back(v.size[size_t(d)]), o.stride.push_back(v.stride[size_t(d)]);
      }
      v = o;
      return true;
    }
    if (!found) return false;
    const int64_t out_rank = rank + int64_t(axes.size());
    std::set<int64_t> add;
    for (int64_t a : axes) add.insert(axis_of(a, out_rank));
    if (int64_t(add.size()) != int64_t(axes.size())) return false;
    View o;
    o.offset = v.offset;
    size_t src = 0;
    for (int64_t d = 0; d < out_rank; ++d) {
      if (add.count(d)) {
        o.size.push_back(1), o.stride.push_back(0);
      } else {
        if (src >= v.size.size()) return false;
        o.size.push_back(v.size[src]), o.stride.push_back(v.stride[src]);
        ++src;
      }
    }
    if (src != v.size.size()) return false;
    v = o;
    return true;
  }
  if (op == "Split") {
    const int64_t axis = axis_of(attr_int(n, "axis", 0), rank);
    if (axis < 0 || axis >= rank) return false;
    int j = -1;
    for (int k = 0; k < n.output_size(); ++k)
      if (n.output(k) == st.out) j = k;
    if (j < 0) return false;
    std::vector<int64_t> sizes;
    bool found = false;
    if (opset >= 13 && n.input_size() > 1 && !n.input(1).empty()) {
      if (!host_ints_of(n, 1, values, sizes)) return false;
    } else if (opset < 13) {
      sizes = attr_ints(n, "split", found);
    }
    if (sizes.empty()) {
      // Equal parts (opset 18: num_outputs, the last one smaller).
      const int64_t parts = attr_int(n, "num_outputs", n.output_size());
      if (parts <= 0) return false;
      const int64_t len = v.size[size_t(axis)];
      const int64_t each = (len + parts - 1) / parts;
      for (int64_t k = 0; k < parts; ++k) sizes.push_back(std::max<int64_t>(0, std::min(each, len - k * each)));
    }
    if (size_t(j) >= sizes.size()) return false;
    int64_t start = 0, total = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (k < size_t(j)) start += sizes[k];
      total += sizes[k];
    }
    if (total != v.size[size_t(axis)]) return false;
    v.offset += start * v.stride[size_t(axis)];
    v.size[size_t(axis)] = sizes[size_t(j)];
    return true;
  }
  return false;
}

std::vector<int64_t> view_arg(const View& v) {
  std::vector<int64_t> a{v.offset};
  a.insert(a.end(), v.size.begin(), v.size.end());
  a.insert(a.end(), v.stride.begin(), v.stride.end());
  return a;
}

// Leading dims of size 1 up to rank 4 (stride 0).
bool to_rank4(View& v) {
  if (v.size.size() > 4 || v.size.size() < 2) return false;
  while (v.size.size() < 4) v.size.insert(v.size.begin(), 1), v.stride.insert(v.stride.begin(), 0);
  return true;
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
  auto commit = [&](Fusion& f) {
    if (std::any_of(f.nodes.begin(), f.nodes.end(), [&](int i) { return taken.count(i) > 0; })) return;
    taken.insert(f.nodes.begin(), f.nodes.end());
    out.push_back(std::move(f));
  };
  for (int i = 0; i < g.node_size(); ++i) {
    Fusion f;
    // Declined at build time, its nodes are built one by one, and the IR
    // passes fuse its products' scales, transposes and biases.
    if (!taken.count(i) && attention(ix, i, taken, f)) commit(f);
  }
  for (int i = 0; i < g.node_size(); ++i) {
    Fusion f;
    if (!taken.count(i) && dq_matmul(ix, i, taken, f)) commit(f);
  }
  for (int i = 0; i < g.node_size(); ++i) {
    Fusion f;
    if (!taken.count(i) && conv_bn(ix, i, taken, f)) commit(f);
  }
  // An Add of a Conv + BatchNormalization chain's result, read by it alone,
  // and another value (a residual block's sum): in the convolution's
  // epilogue, before a Relu or Clip the loop below may add. (A Conv's own
  // residual add and activation are IR passes: passes/fuse_conv_residual,
  // passes/fuse_conv_activation.)
  for (int r = 0; r < g.node_size(); ++r) {
    if (taken.count(r) || !ix.is(r, "Add", 2)) continue;
    const auto& n = g.node(r);
    for (int k = 0; k < 2; ++k) {
      const std::string& v = n.input(k);
      const std::string& other = n.input(1 - k);
      const int p = ix.prod(v);
      if (v == other || p < 0 || !ix.single(v)) continue;
      Fusion* chain = nullptr;
      for (auto& f : out)
        if (f.kind == Fusion::Kind::ConvBn && f.act_node < 0 && f.residual.empty() && f.nodes.back() == p) chain = &f;
      if (chain) {
        chain->residual = other;
        chain->nodes.push_back(r);
        taken.insert(r);
        break;
      }
    }
  }
  // A Relu or a Clip (constant bounds) reading a Conv + BatchNormalization
  // chain's result (or the chain's with its residual) alone: in the
  // convolution's epilogue.
  for (int r = 0; r < g.node_size(); ++r) {
    if (taken.count(r)) continue;
    const auto& n = g.node(r);
    const bool relu = ix.is(r, "Relu", 1);
    bool clip = Index::plain(n) && n.op_type() == "Clip" && n.output_size() == 1 && n.input_size() >= 1 &&
                n.input_size() <= 3 && !n.input(0).empty();
    for (int i = 1; clip && i < n.input_size(); ++i) clip = n.input(i).empty() || ix.is_const(n.input(i));
    if (!relu && !clip) continue;
    const std::string& v = n.input(0);
    const int p = ix.prod(v);
    if (p < 0 || !ix.single(v)) continue;
    Fusion* chain = nullptr;
    for (auto& f : out)
      if (f.kind == Fusion::Kind::ConvBn && f.act_node < 0 && f.nodes.back() == p) chain = &f;
    if (chain) {
      chain->act_node = r;
      chain->nodes.push_back(r);
      taken.insert(r);
    }
  }
  std::sort(out.begin(), out.end(), [](const Fusion& a, const Fusion& b) { return a.nodes.back() < b.nodes.back(); });
  return out;
}

namespace {

// The largest head dims (of q/k and of v) the fused attention takes.
constexpr int64_t kMaxHeadDim = 128;

std::optional<Slot> try_attention(const Fusion& f, Graph& g, IrTrace* trace, const onnx::GraphProto& graph, int opset, const Storage& storage,
                                  std::map<std::string, Slot>& values) {
  const onnx::NodeProto& sm = graph.node(f.anchor);
  for (const std::string* v : {&f.x, &f.w, &f.v})
    if (!values.count(*v)) return std::nullopt;  // not computed on its own (inside another fusion)
  Slot* base[3] = {&values.at(f.x), &values.at(f.w), &values.at(f.v)};
  View view[3];
  for (int k = 0; k < 3; ++k) {
    if (!is_float(base[k]->dtype)) return std::nullopt;
    view[k] = contiguous(base[k]->shape);
    for (const auto& st : f.views[k])
      if (!apply_view(view[k], st, graph, opset, values)) return std::nullopt;
    // The replayed view must give the shape the nodes gave.
    const std::string& operand = f.views[k].empty() ? (k == 0 ? f.x : k == 1 ? f.w : f.v) : f.views[k].back().out;
    const Shape& want = values.at(operand).shape;
    if (std::vector<int64_t>(want.begin(), want.end()) != view[k].size) return std::nullopt;
  }
  const size_t rank = view[0].size.size();
  if (rank < 2 || rank > 4 || view[1].size.size() != rank || view[2].size.size() != rank) return std::nullopt;
  for (size_t d = 0; d + 2 < rank; ++d)
    if (view[1].size[d] != view[0].size[d] || view[2].size[d] != view[0].size[d]) return std::nullopt;
  // k^T [.., D, S] read as k [.., S, D].
  std::swap(view[1].size[rank - 1], view[1].size[rank - 2]);
  std::swap(view[1].stride[rank - 1], view[1].stride[rank - 2]);
  const int64_t L = view[0].size[rank - 2], D = view[0].size[rank - 1], S = view[1].size[rank - 2];
  const int64_t Dv = view[2].size[rank - 1];
  if (view[1].size[rank - 1] != D || view[2].size[rank - 2] != S) return std::nullopt;
  if (D < 1 || Dv < 1 || D > kMaxHeadDim || Dv > kMaxHeadDim || L < 1 || S < 1) return std::nullopt;
  // Longer attention: over more keys than the one-dispatch kernel takes
  // (WGNN_ATTENTION_MAX_KEYS, default 1024), wgnn.attention runs two
  // products and a softmax, reading q, k and v where they are (no copies of
  // the head split and merge). That form runs on the regular GEMM kernel,
  // so in float16 mode, where the separate products may run on tensor
  // cores, longer attention stays unfused (H200, Whisper-base encoder, 1500
  // keys: docs/BENCHMARKS.md), unless the op's own tensor-core kernel takes
  // it (ops/subgroup_attention.h: any number of keys).
  const int64_t max_keys = ops::attention_max_keys(g.ctx().settings());
  int64_t axis = attr_int(sm, "axis", opset >= 13 ? -1 : 1);
  if (axis < 0) axis += int64_t(rank);
  if (axis != int64_t(rank) - 1) return std::nullopt;
  const std::optional<double> factor = scales_product(f, values, rank);
  if (!factor) return std::nullopt;
  const double scale = *factor;
  // The scores' shape [.., L, S]; the mask broadcasts to it.
  std::vector<int64_t> scores(view[0].size.begin(), view[0].size.end());
  scores[rank - 1] = S;
  Slot* mask = f.mask.empty() ? nullptr : &values.at(f.mask);
  View mview;
  if (mask) {
    if (!is_float(mask->dtype) || mask->shape.size() > rank) return std::nullopt;
    mview = contiguous(mask->shape);
    while (mview.size.size() < rank) mview.size.insert(mview.size.begin(), 1), mview.stride.insert(mview.stride.begin(), 0);
    for (size_t d = 0; d < rank; ++d) {
      if (mview.size[d] == scores[d]) continue;
      if (mview.size[d] != 1) return std::nullopt;
      mview.stride[d] = 0;
      mview.size[d] = scores[d];
    }
  }
  // The result O [.., L, Dv] as the following Transpose (and Reshape) lay it out.
  std::vector<int64_t> o_size(view[0].size.begin(), view[0].size.end());
  o_size[rank - 1] = Dv;
  View out = contiguous(Shape(o_size.begin(), o_size.end()));
  std::vector<int64_t> out_shape = o_size;
  if (f.out_transpose >= 0) {
    const onnx::NodeProto& t = graph.node(f.out_transpose);
    bool found = false;
    std::vector<int64_t> perm = attr_ints(t, "perm", found);
    if (!found)
      for (int64_t d = int64_t(rank) - 1; d >= 0; --d) perm.push_back(d);
    if (perm.size() != rank) return std::nullopt;
    std::vector<int64_t> tsize(rank);
    for (size_t d = 0; d < rank; ++d) {
      if (perm[d] < 0 || perm[d] >= int64_t(rank)) return std::nullopt;
      tsize[d] = o_size[size_t(perm[d])];
    }
    const View tc = contiguous(Shape(tsize.begin(), tsize.end()));
    for (size_t d = 0; d < rank; ++d) out.stride[size_t(perm[d])] = tc.stride[d];
    out_shape = tsize;
    if (f.out_reshape >= 0) {
      View r = tc;
      const Fusion::ViewStep st{f.out_reshape, graph.node(f.out_reshape).output(0)};
      if (!apply_view(r, st, graph, opset, values)) return std::nullopt;
      out_shape = r.size;
    }
  }
  for (View* v : {&view[0], &view[1], &view[2], &out})
    if (!to_rank4(*v)) return std::nullopt;
  if (mask && !to_rank4(mview)) return std::nullopt;
  std::vector<Slot*> in{base[0], base[1], base[2]};
  if (mask) in.push_back(mask);
  NodeCtx c(g, sm, opset, in, nullptr, storage);
  c.trace = trace;
  const DType dt = c.dtype(0);
  if (c.dtype(1) != dt || c.dtype(2) != dt) return std::nullopt;
  int64_t bh = 1;
  for (size_t d = 0; d + 2 < rank; ++d) bh *= view[0].size[d];
  if (S > max_keys && dt != DType::F32 && !ops::attention_on_tensor_cores(g.ctx(), bh, L, D, Dv)) return std::nullopt;
  const TensorRef tq = on_gpu(c, *base[0], f.x), tk = on_gpu(c, *base[1], f.w), tv = on_gpu(c, *base[2], f.v);
  Value tm = None{};
  std::vector<int64_t> mv;
  if (mask) {
    tm = on_gpu(c, *mask, f.mask);
    mv = {mview.offset, mview.stride[0], mview.stride[1], mview.stride[2], mview.stride[3]};
  }
  const std::vector<int64_t> ov{out.offset, out.stride[0], out.stride[1], out.stride[2], out.stride[3]};
  return c.out(c.call("wgnn.attention.default",
                      {tq, tk, tv, tm, scale, view_arg(view[0]), view_arg(view[1]), view_arg(view[2]), mv,
                       out_shape, ov}));
}

}  // namespace

// DequantizeLinear (constant 8-bit x [K, N], scale and zero point per
// tensor, per column or per row, not blocked) then MatMul(a, that).
std::optional<Slot> try_dq_matmul(const Fusion& f, Graph& g, IrTrace* trace, const onnx::GraphProto& graph, int opset,
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

std::optional<Slot> try_fusion(const Fusion& f, Graph& g, IrTrace* trace, const onnx::GraphProto& graph, int opset, const Storage& storage,
                               std::map<std::string, Slot>& values) {
  const onnx::NodeProto& anchor = graph.node(f.anchor);
  // A Conv chain's residual: a GPU tensor of the convolution input's dtype
  // (a value known on the host, or another dtype: the nodes one by one).
  auto residual_ok = [&]() {
    const Slot& r = values.at(f.residual);
    const Slot& x = values.at(anchor.input(0));
    return !r.host && !x.host && r.dtype == x.dtype;
  };
  if (f.kind == Fusion::Kind::Attention) return try_attention(f, g, trace, graph, opset, storage, values);
  if (f.kind == Fusion::Kind::DqMatMul) return try_dq_matmul(f, g, trace, graph, opset, storage, values);
  if (f.kind == Fusion::Kind::ConvBn) {
    Slot& x = values.at(f.x);
    const Slot& w = values.at(f.w);
    // Float32 mode: the normalization folded into the weights and bias.
    // Float16 mode: not into the weights (they would be rounded to float16
    // after scaling: the zoo's MODNet mini drifted from 7e-4 to 1e-2 of an
    // f16-rounded reference with the folding) but into a float32 scale and
    // shift per output channel that the convolution's epilogue applies to
    // its result rounded to float16 (affine_rounded): the unfused Conv and
    // BatchNormalization's values in one dispatch. (Without the rounding,
    // on the f32 accumulator, the zoo's MODNet mini was as close to float32
    // ONNX Runtime on average but its instance norms amplified the changed
    // roundings past the float16-emulated check's tolerance: 3.3e-3
    // against 2.8e-3.)
    if (x.host || !w.host || w.value().dtype != DType::F32 || w.shape.size() < 3) return std::nullopt;
    const int64_t cout = w.shape[0];
    if (cout <= 0) return std::nullopt;
    const HostTensor* p[4];
    for (int i = 0; i < 4; ++i) {
      const Slot& s = values.at(f.bn[size_t(i)]);
      if (!s.host || !is_float(s.value().dtype) || s.value().numel() != cout) return std::nullopt;
      p[i] = &s.value();
    }
    const HostTensor* bias = nullptr;
    if (!f.bias.empty()) {
      const Slot& s = values.at(f.bias);
      if (!s.host || !is_float(s.value().dtype) || s.value().numel() != cout) return std::nullopt;
      bias = &s.value();
    }
    const onnx::NodeProto& bn = graph.node(f.nodes.back());
    double eps = 1e-5;
    for (const auto& at : bn.attribute())
      if (at.name() == "epsilon") eps = at.f();
    if (storage.fp16) {
      std::vector<float> aff(size_t(2 * cout));
      for (int64_t o = 0; o < cout; ++o) {
        const size_t oi = size_t(o);
        const double scale = host::get(*p[0], oi) / std::sqrt(host::get(*p[3], oi) + eps);
        const double shift = host::get(*p[1], oi) - host::get(*p[2], oi) * scale;
        if (!std::isfinite(scale) || !std::isfinite(shift)) return std::nullopt;
        aff[oi] = float(scale);
        aff[size_t(cout) + oi] = float(shift);
      }
      std::string act;
      double lo = 0, hi = 0;
      if (f.act_node >= 0 && !activation(graph.node(f.act_node), values, act, lo, hi)) return std::nullopt;
      // The Conv as it is (weights and bias), the normalization after it.
      std::vector<Slot*> in;
      for (const auto& name : anchor.input()) in.push_back(name.empty() ? nullptr : &values.at(name));
      NodeCtx c(g, anchor, opset, in, nullptr, storage);
      c.trace = trace;
      if (!f.residual.empty()) {
        if (!residual_ok()) return std::nullopt;
        c.conv_residual = values.at(f.residual).ref;
      }
      c.conv_affine = plan_constant(g, trace, {2, cout}, DType::F32, aff.data(), f.w + ":bn_affine");
      c.conv_affine_rounded = true;
      if (!act.empty()) c.conv_act = act, c.conv_lo = lo, c.conv_hi = hi;
      std::vector<Slot> out = op_mappers().at("Conv").build(c);
      if (out.size() != 1) return std::nullopt;
      return out[0];
    }
    const int64_t per = w.value().numel() / cout;
    HostTensor b2(DType::F32, {cout});
    std::vector<double> scales(static_cast<size_t>(cout));
    for (int64_t o = 0; o < cout; ++o) {
      const size_t oi = size_t(o);
      const double scale = host::get(*p[0], oi) / std::sqrt(host::get(*p[3], oi) + eps);
      if (!std::isfinite(scale)) return std::nullopt;
      scales[oi] = scale;
      const double b0 = bias ? host::get(*bias, oi) : 0.0;
      b2.as<float>()[oi] = float((b0 - host::get(*p[2], oi)) * scale + host::get(*p[1], oi));
    }
    // Each weight times its channel's scale in double, rounded once: a
    // typed loop (element access by dtype took most of a float32 ResNet-50
    // build's host time). By value but the weights, which the Session keeps
    // where the fold is memoized (below): the IR's plans may fold when they
    // lower, after this build.
    const HostTensor* wt = &w.value();  // float32, checked above
    auto fold = [wt, cout, per, scales](HostTensor& out) {
      out.dtype = DType::F32;
      out.shape = wt->shape;
      out.data.clear();  // no move of the old bytes when it grows
      out.data.resize(size_t(wt->numel()) * 4);
      const float* wv = wt->as<float>();
      float* wo = out.as<float>();
      for (int64_t o = 0; o < cout; ++o) {
        const size_t base = size_t(o * per);
        const double scale = scales[size_t(o)];
        for (size_t k = 0; k < size_t(per); ++k) wo[base + k] = float(double(wv[base + k]) * scale);
      }
    };
    // Where the weights and the normalization are the Session's own
    // initializers, the folded weights are found again by them in the
    // constant store: a later plan (another input shape) neither folds nor
    // hashes them again, and the fold writes into the store's scratch.
    bool stored = w.stored() && (f.bias.empty() || values.at(f.bias).stored());
    for (int i = 0; i < 4; ++i) stored = stored && values.at(f.bn[size_t(i)]).stored();
    Slot ws;
    if (stored) {
      const std::string memo = fmt::format("bn_folded@{}:{}:{}:{}:{}:{}:{:a}", static_cast<const void*>(&w.value()),
                                           static_cast<const void*>(p[0]), static_cast<const void*>(p[1]),
                                           static_cast<const void*>(p[2]), static_cast<const void*>(p[3]),
                                           static_cast<const void*>(bias), eps);
      const TensorRef folded = plan_made_constant(
          g, trace, w.shape, DType::F32, memo,
          [fold](HostTensor& scratch) -> const HostTensor& {
            fold(scratch);
            return scratch;
          },
          f.w + ":bn_folded");
      ws = Slot::of_tensor(g, folded);
    } else {
      HostTensor w2;
      fold(w2);
      ws = Slot::of_host(std::move(w2));
    }
    Slot bs = Slot::of_host(std::move(b2));
    std::string act;
    double lo = 0, hi = 0;
    if (f.act_node >= 0 && !activation(graph.node(f.act_node), values, act, lo, hi)) return std::nullopt;
    // The Conv as built: the folded weights and bias as its inputs 1 and 2
    // (names for the uploaded constants; a Conv without bias gets one).
    onnx::NodeProto conv = anchor;
    conv.set_input(1, f.w + ":bn_folded");
    if (conv.input_size() > 2) conv.set_input(2, conv.input(1) + "_bias");
    else conv.add_input(conv.input(1) + "_bias");
    if (!f.residual.empty() && !residual_ok()) return std::nullopt;
    NodeCtx c(g, conv, opset, {&x, &ws, &bs}, nullptr, storage);
    c.trace = trace;
    if (!f.residual.empty()) c.conv_residual = values.at(f.residual).ref;
    if (!act.empty()) c.conv_act = act, c.conv_lo = lo, c.conv_hi = hi;
    std::vector<Slot> out = op_mappers().at("Conv").build(c);
    if (out.size() != 1) return std::nullopt;
    return out[0];
  }
  return std::nullopt;
}

}  // namespace wgnn::onnx_import

// ONNX operators -> wgnn ops. One entry per ONNX op type: the dtypes it
// accepts, how it builds GPU work (views cost nothing), and, for shape
// arithmetic, how it folds on the host when every input is known there.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "onnx/host_ops.h"
#include "onnx/mappers_control.h"
#include "onnx/mappers_dynamic.h"
#include "onnx/mappers_quant.h"
#include "onnx/mappers_index.h"
#include "onnx/node_ctx.h"
#include "onnx/subgraph.h"
#include "onnx/tensor_proto.h"
#include "ops/layout.h"

namespace wgnn::onnx_import {

// ---- NodeCtx --------------------------------------------------------------

std::string NodeCtx::where() const {
  return fmt::format("node '{}' ({}, opset {})", !node.name().empty() ? node.name() : node.output_size() > 0 ? node.output(0) : std::string("(unnamed)"), mapper_key(node),
                     opset);
}
void NodeCtx::fail(const std::string& msg) const { throw Error(where() + ": " + msg); }
void NodeCtx::unsupported(const std::string& msg) const { throw Unsupported(where() + ": " + msg); }

const Shape& NodeCtx::shape(size_t i) const {
  if (!has(i)) fail(fmt::format("input {} is missing", i));
  return in_[i]->shape;
}
DType NodeCtx::dtype(size_t i) const {
  if (!has(i)) fail(fmt::format("input {} is missing", i));
  return gpu_dtype(in_[i]->dtype);
}

TensorRef NodeCtx::tensor(size_t i) {
  if (!has(i)) fail(fmt::format("input {} is missing", i));
  Slot& s = *in_[i];
  if (s.ref.id < 0) s.ref = slot_constant(s, node.input(int(i)));
  return s.ref;
}

DType NodeCtx::slot_dtype(size_t i) const {
  if (!has(i)) fail(fmt::format("input {} is missing", i));
  return in_[i]->dtype;
}

TensorRef NodeCtx::tensor_exact(size_t i) {
  if (!is_host(i) || gpu_dtype(in_[i]->dtype) == in_[i]->dtype || !storage.fp16) return tensor(i);
  const HostTensor& t = in_[i]->value();
  return g.add_constant(t.shape, t.dtype, t.data.data(), node.input(int(i)));
}

TensorRef NodeCtx::slot_constant(const Slot& s, const std::string& name) {
  if (!s.stored()) return constant(s.value(), name);
  const HostTensor& t = s.value();
  const DType to = gpu_dtype(t.dtype);
  const char* conversion = to == t.dtype ? "as is" : storage.fp16 ? "f16 saturated" : "cast";
  const std::string memo = fmt::format("initializer@{}:{}:{}", static_cast<const void*>(&t), dtype_name(to), conversion);
  return g.add_memo_constant(
      memo,
      [&](HostTensor& scratch) -> const HostTensor& {
        if (to == t.dtype) return t;
        scratch = storage.fp16 ? to_f16_saturated(t) : host::cast(t, to);
        return scratch;
      },
      name);
}

TensorRef NodeCtx::constant(const HostTensor& t, const std::string& name) {
  if (gpu_dtype(t.dtype) != t.dtype) {
    const HostTensor h = storage.fp16 ? to_f16_saturated(t) : host::cast(t, gpu_dtype(t.dtype));
    return g.add_constant(h.shape, h.dtype, h.data.data(), name);
  }
  return g.add_constant(t.shape, t.dtype, t.data.data(), name);
}

const HostTensor& NodeCtx::host(size_t i, const char* what) const {
  if (!has(i)) fail(fmt::format("input {} ('{}') is missing", i, what));
  if (!in_[i]->host && in_[i]->input_value && value_inputs_) {
    value_inputs_->insert(in_[i]->input_name);
    return *in_[i]->input_value;
  }
  if (!in_[i]->host && builder) {
    if (const HostTensor* v = builder->host_value(node.input(int(i)))) return *v;
  }
  if (!in_[i]->host && !in_[i]->input_name.empty() && !in_[i]->input_value) {
    fail(fmt::format("input '{}' is the graph input '{}', given as a device tensor, but its values are needed on "
                     "the host (they decide shapes): give it as a host tensor",
                     what, in_[i]->input_name));
  }
  if (!in_[i]->host) {
    unsupported(fmt::format("input '{}' must be known when the model loads (a constant or computed from shapes); "
                            "here it is computed on the GPU",
                            what));
  }
  return in_[i]->value();
}

const Slot& NodeCtx::slot(size_t i) const {
  if (!has(i)) fail(fmt::format("input {} is missing", i));
  return *in_[i];
}

std::vector<int64_t> NodeCtx::host_ints(size_t i, const char* what) const { return host::to_ints(host(i, what)); }

const onnx::AttributeProto* NodeCtx::attr(const std::string& name) const {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
bool NodeCtx::has_attr(const std::string& name) const { return attr(name) != nullptr; }
int64_t NodeCtx::attr_int(const std::string& name, int64_t def) const {
  const auto* a = attr(name);
  return a ? a->i() : def;
}
float NodeCtx::attr_float(const std::string& name, float def) const {
  const auto* a = attr(name);
  return a ? a->f() : def;
}
std::string NodeCtx::attr_string(const std::string& name, const std::string& def) const {
  const auto* a = attr(name);
  return a ? a->s() : def;
}
std::vector<int64_t> NodeCtx::attr_ints(const std::string& name) const {
  const auto* a = attr(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

Value NodeCtx::call(const std::string& op, const ValueList& args) {
  try {
    return ops::call(g, op, args);
  } catch (const HostOutOfMemory&) {
    throw;  // its type tells callers what ran out; the message says while what
  } catch (const Unsupported& e) {
    throw Unsupported(where() + ": " + e.what());
  } catch (const Error& e) {
    throw Error(where() + ": " + e.what());
  }
}

TensorRef NodeCtx::view(TensorRef t, const Shape& shape) { return g.add_view(t, shape); }

// ---- helpers ----------------------------------------------------------------

namespace {

using Mappers = std::map<std::string, OpMapper>;
const std::vector<DType> kFloat = {DType::F32, DType::F16};
const std::vector<DType> kNumeric = {DType::F32, DType::F16, DType::I32, DType::I64};
const std::vector<DType> kBool = {DType::Bool};

std::vector<HostTensor> one_host(HostTensor t) {
  std::vector<HostTensor> v;
  v.push_back(std::move(t));
  return v;
}

// ONNX ScalarType (TensorProto.DataType) -> ATen ScalarType code.
int64_t aten_dtype_code(DType d) {
  switch (d) {
    case DType::U8: return 0;
    case DType::I8: return 1;
    case DType::I32: return 3;
    case DType::I64: return 4;
    case DType::F16: return 5;
    case DType::F32: return 6;
    case DType::Bool: return 11;
  }
  return -1;
}

// x (a GPU tensor) cast to the model's dtype `to`, stored as c.gpu_dtype(to).
// Without shader-f16 a float16 result is a float32 tensor holding values
// rounded to float16 (IEEE: to nearest even, overflow to infinity).
TensorRef cast_to(NodeCtx& c, TensorRef x, DType to) {
  const DType gpu_to = c.gpu_dtype(to);
  const DType from = c.g.info(x).dtype;
  TensorRef y = x;
  if (gpu_to != from) y = c.call("aten._to_copy.default", {x, aten_dtype_code(gpu_to)}).tensor();
  if (c.storage.widen_f16 && to == DType::F16) return c.call("wgnn.round_to_f16.default", {y}).tensor();
  return y == x ? c.view(x, c.g.info(x).shape) : y;
}

// Output shape of Reshape (0 copies the input dim unless allowzero, -1 infers).
Shape reshape_target(const NodeCtx& c, const Shape& in, const std::vector<int64_t>& spec, bool allowzero) {
  Shape out(spec.size());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] == -1) {
      if (infer >= 0) c.fail("shape has more than one -1");
      infer = int64_t(i);
      out[i] = 1;
    } else if (spec[i] == 0 && !allowzero) {
      if (i >= in.size()) c.fail(fmt::format("shape {} copies dim {} that input {} lacks", shape_str(spec), i,
                                             shape_str(in)));
      out[i] = in[i];
    } else if (spec[i] < 0) {
      c.fail(fmt::format("shape {} has a negative dim", shape_str(spec)));
    } else {
      out[i] = spec[i];
    }
    if (int64_t(i) != infer && __builtin_mul_overflow(known, out[i], &known)) {
      c.fail(fmt::format("shape {} has more elements than int64 counts", shape_str(spec)));
    }
  }
  const int64_t n = numel(in);
  if (infer >= 0) {
    if (known == 0 || n % known != 0) c.fail(fmt::format("cannot reshape {} to {}", shape_str(in), shape_str(spec)));
    out[size_t(infer)] = n / known;
  }
  if (numel(out) != n) c.fail(fmt::format("cannot reshape {} to {}", shape_str(in), shape_str(spec)));
  return out;
}

// A node that only changes the shape: a view on the GPU, a reshape on the host.
OpMapper view_op(std::function<Shape(NodeCtx&)> shape_of) {
  OpMapper m;
  m.build = [shape_of](NodeCtx& c) { return one(c.out(c.view(c.tensor(0), shape_of(c)))); };
  m.fold = [shape_of](NodeCtx& c) { return one_host(host::reshape(c.host(0, "data"), shape_of(c))); };
  return m;
}

std::vector<int64_t> axes_of(NodeCtx& c, size_t input, int since_opset) {
  if (c.opset >= since_opset) return c.has(input) ? c.host_ints(input, "axes") : std::vector<int64_t>{};
  return c.attr_ints("axes");
}

Shape squeeze_shape(NodeCtx& c) {
  const Shape& in = c.shape(0);
  std::vector<int64_t> axes = axes_of(c, 1, 13);
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t d = 0; d < in.size(); ++d) drop[d] = in[d] == 1;
  }
  for (int64_t a : axes) {
    const int64_t ax = ops::normalize_axis(a, int64_t(in.size()), "Squeeze", "axes");
    if (in[size_t(ax)] != 1) c.fail(fmt::format("cannot squeeze dim {} of size {}", ax, in[size_t(ax)]));
    drop[size_t(ax)] = true;
  }
  Shape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!drop[d]) out.push_back(in[d]);
  }
  return out;
}

Shape unsqueeze_shape(NodeCtx& c) {
  const Shape& in = c.shape(0);
  std::vector<int64_t> axes = axes_of(c, 1, 13);
  const int64_t r = int64_t(in.size() + axes.size());
  std::vector<bool> ins(size_t(r), false);
  for (int64_t a : axes) {
    const int64_t ax = ops::normalize_axis(a, r, "Unsqueeze", "axes");
    if (ins[size_t(ax)]) c.fail("repeated axis");
    ins[size_t(ax)] = true;
  }
  Shape out;
  size_t k = 0;
  for (int64_t d = 0; d < r; ++d) out.push_back(ins[size_t(d)] ? 1 : in[k++]);
  return out;
}

Shape flatten_shape(NodeCtx& c) {
  const Shape& in = c.shape(0);
  const int64_t r = int64_t(in.size());
  int64_t axis = c.attr_int("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) c.fail(fmt::format("axis {} out of range for rank {}", c.attr_int("axis", 1), r));
  int64_t a = 1, b = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? a : b) *= in[size_t(d)];
  return {a, b};
}

OpMapper unary(const std::string& aten, std::vector<DType> dtypes = kFloat) {
  OpMapper m;
  m.dtypes = std::move(dtypes);
  m.build = [aten](NodeCtx& c) { return one(c.out(c.call(aten, {c.tensor(0)}))); };
  return m;
}

// Opsets 1 to 6 (onnx/old_opsets.h): a binary op with broadcast=1 and an
// `axis` lines B up with A's dims from `axis` on (B [3, 4] against A
// [2, 3, 4, 5] at axis 1), not from the end as numpy does: B's shape with
// trailing 1s that make it numpy's. Empty when numpy's rule applies (no
// axis, broadcast=0, opset 7 and later).
Shape legacy_broadcast_shape(NodeCtx& c) {
  if (c.opset >= 7 || c.attr_int("broadcast", 0) == 0 || !c.has_attr("axis") || c.inputs() != 2) return {};
  const int64_t ra = int64_t(c.shape(0).size()), rb = int64_t(c.shape(1).size());
  int64_t axis = c.attr_int("axis", 0);
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra) {
    c.fail(fmt::format("B {} does not fit A {} from axis {}", shape_str(c.shape(1)), shape_str(c.shape(0)), c.attr_int("axis", 0)));
  }
  Shape s = c.shape(1);
  s.resize(size_t(ra - axis), 1);
  return s;
}

// Binary elementwise ops; variadic ones (Sum, Min, Max, Mean) chain.
OpMapper binary(const std::string& onnx_op, const std::string& aten, std::vector<DType> dtypes) {
  OpMapper m;
  m.dtypes = std::move(dtypes);
  m.build = [onnx_op, aten](NodeCtx& c) {
    const Shape legacy = legacy_broadcast_shape(c);
    std::string op = aten;
    ValueList extra;
    if (onnx_op == "Div" && !host::is_float(c.dtype(0))) {
      op = "aten.div.Tensor_mode";
      extra = {std::string("trunc")};
    }
    if (onnx_op == "Mod") op = c.attr_int("fmod", 0) ? "aten.fmod.Tensor" : "aten.remainder.Tensor";
    TensorRef acc = c.tensor(0);
    for (size_t i = 1; i < c.inputs(); ++i) {
      TensorRef rhs = c.tensor(i);
      if (!legacy.empty()) rhs = c.view(rhs, legacy);
      // Pow's exponent may have another type than its base.
      if (onnx_op == "Pow" && c.dtype(i) != c.dtype(0))
        rhs = c.call("aten._to_copy.default", {rhs, aten_dtype_code(c.dtype(0))}).tensor();
      ValueList args{acc, rhs};
      args.insert(args.end(), extra.begin(), extra.end());
      acc = c.call(op, args).tensor();
    }
    return one(c.out(acc));
  };
  m.fold = [onnx_op](NodeCtx& c) {
    const std::string op = onnx_op == "Sum" ? "Add" : onnx_op;
    HostTensor acc = c.host(0, "A");
    const Shape legacy = legacy_broadcast_shape(c);
    for (size_t i = 1; i < c.inputs(); ++i) {
      HostTensor b = c.host(i, "B");
      if (!legacy.empty()) b.shape = legacy;
      acc = host::binary(op, acc, b, int(c.attr_int("fmod", 0)));
    }
    return one_host(std::move(acc));
  };
  return m;
}

std::vector<int64_t> reduce_axes(NodeCtx& c, bool axes_input) {
  std::vector<int64_t> axes = axes_input ? (c.has(1) ? c.host_ints(1, "axes") : std::vector<int64_t>{})
                                         : c.attr_ints("axes");
  return axes;
}

OpMapper reduce(const std::string& onnx_op, const std::string& aten, int axes_input_since,
                std::vector<DType> dtypes) {
  OpMapper m;
  m.dtypes = std::move(dtypes);
  m.build = [onnx_op, aten, axes_input_since](NodeCtx& c) {
    std::vector<int64_t> axes = reduce_axes(c, c.opset >= axes_input_since);
    const bool keep = c.attr_int("keepdims", 1) != 0;
    if (axes.empty() && c.attr_int("noop_with_empty_axes", 0)) return one(c.out(c.view(c.tensor(0), c.shape(0))));
    if (axes.empty()) {
      for (size_t d = 0; d < c.shape(0).size(); ++d) axes.push_back(int64_t(d));
    }
    // The max (min) of no values is -inf (+inf) in ONNX (opset 18 on):
    // a constant of the result's shape, folded on the host (no input data
    // is read: there is none).
    if (onnx_op == "ReduceMax" || onnx_op == "ReduceMin") {
      const Shape& s = c.shape(0);
      bool empty = false;
      for (int64_t a : axes) empty = empty || s[size_t(ops::normalize_axis(a, int64_t(s.size()), onnx_op, "axes"))] == 0;
      if (empty) {
        if (c.dtype(0) != DType::F32) c.unsupported("a reduction over no values, other than of float32");
        return one(Slot::of_host(host::reduce(onnx_op, HostTensor(DType::F32, s), axes, keep)));
      }
    }
    if ((aten == "aten.sum.dim_IntList") && !host::is_float(c.dtype(0)))
      return one(c.out(c.call(aten, {c.tensor(0), IntList(axes), keep, aten_dtype_code(c.dtype(0))})));
    return one(c.out(c.call(aten, {c.tensor(0), IntList(axes), keep})));
  };
  m.fold = [onnx_op, axes_input_since](NodeCtx& c) {
    std::vector<int64_t> axes = reduce_axes(c, c.opset >= axes_input_since);
    if (axes.empty() && c.attr_int("noop_with_empty_axes", 0)) return one_host(c.host(0, "data"));
    return one_host(host::reduce(onnx_op, c.host(0, "data"), axes, c.attr_int("keepdims", 1) != 0));
  };
  return m;
}

// ---- convolution and pooling --------------------------------------------------

// The spatial dims of a Conv / pooling input (N, C, spatial...): 1 to 3.
size_t spatial_dims(NodeCtx& c) {
  const Shape& s = c.shape(0);
  if (s.size() < 3 || s.size() > 5) {
    c.unsupported(fmt::format("input {} has {} spatial dims; supported: 1 to 3 (rank 3 to 5)", shape_str(s),
                              s.size() < 2 ? 0 : s.size() - 2));
  }
  return s.size() - 2;
}

}  // namespace

std::vector<int64_t> spatial_attr(NodeCtx& c, const char* name, size_t d, int64_t def) {
  std::vector<int64_t> v = c.attr_ints(name);
  if (v.empty()) return std::vector<int64_t>(d, def);
  if (v.size() != d) c.fail(fmt::format("attribute '{}' has {} values; expected {}", name, v.size(), d));
  return v;
}

std::vector<int64_t> window_pads(NodeCtx& c, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                 const std::vector<int64_t>& dilations) {
  const size_t d = kernel.size();
  const Shape& s = c.shape(0);
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET" || auto_pad.empty()) {
    std::vector<int64_t> pads = c.attr_ints("pads");
    if (pads.empty()) return std::vector<int64_t>(2 * d, 0);
    if (pads.size() != 2 * d) c.fail(fmt::format("attribute 'pads' has {} values; expected {}", pads.size(), 2 * d));
    for (int64_t p : pads) {
      if (p < 0) c.fail(fmt::format("attribute 'pads' {} has a negative value", shape_str(pads)));
    }
    return pads;
  }
  if (auto_pad == "VALID") return std::vector<int64_t>(2 * d, 0);
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    c.fail(fmt::format("attribute 'auto_pad' is '{}'; accepted: NOTSET, SAME_UPPER, SAME_LOWER, VALID", auto_pad));
  }
  std::vector<int64_t> pads(2 * d, 0);
  for (size_t i = 0; i < d; ++i) {
    const int64_t in = s[2 + i], st = strides[i];
    const int64_t out = (in + st - 1) / st;
    const int64_t total = std::max<int64_t>(0, (out - 1) * st + (kernel[i] - 1) * dilations[i] + 1 - in);
    const int64_t small = total / 2, large = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : large;
    pads[d + i] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

namespace {

bool symmetric(const std::vector<int64_t>& pads) {
  const size_t d = pads.size() / 2;
  return std::equal(pads.begin(), pads.begin() + long(d), pads.begin() + long(d));
}

std::vector<int64_t> kernel_shape(NodeCtx& c, size_t d) {
  std::vector<int64_t> k = c.attr_ints("kernel_shape");
  if (k.size() != d) c.fail(fmt::format("attribute 'kernel_shape' has {} values; expected {}", k.size(), d));
  return k;
}

OpMapper conv_mapper(bool transposed) {
  OpMapper m;
  m.dtypes = kFloat;
  m.build = [transposed](NodeCtx& c) {
    const size_t d = spatial_dims(c);
    const Shape& xs = c.shape(0);
    const Shape& ws = c.shape(1);
    if (ws.size() != xs.size()) c.fail(fmt::format("weight {} and input {} differ in rank", shape_str(ws), shape_str(xs)));
    std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
    if (c.has_attr("kernel_shape") && c.attr_ints("kernel_shape") != kernel) {
      c.fail(fmt::format("attribute 'kernel_shape' {} does not match weight {}", shape_str(c.attr_ints("kernel_shape")),
                         shape_str(ws)));
    }
    const std::vector<int64_t> strides = spatial_attr(c, "strides", d, 1);
    const std::vector<int64_t> dilations = spatial_attr(c, "dilations", d, 1);
    const int64_t group = c.attr_int("group", 1);
    std::vector<int64_t> out_pad(d, 0), pads;
    if (!transposed) {
      pads = window_pads(c, kernel, strides, dilations);
    } else {
      out_pad = spatial_attr(c, "output_padding", d, 0);
      std::vector<int64_t> out_shape = c.attr_ints("output_shape");
      if (out_shape.size() == d + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
      if (!out_shape.empty() && out_shape.size() != d) {
        c.fail(fmt::format("attribute 'output_shape' has {} values; expected {}", out_shape.size(), d));
      }
      const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
      const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
      if (!out_shape.empty() || same) {
        // Pads that give this output size (ONNX's reference): total =
        // stride * (in - 1) + output_padding + kernel span - out, split in
        // half (floor); SAME_UPPER puts the larger half at the end.
        pads.assign(2 * d, 0);
        for (size_t i = 0; i < d; ++i) {
          const int64_t target = out_shape.empty() ? xs[2 + i] * strides[i] : out_shape[i];
          const int64_t total = strides[i] * (xs[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - target;
          const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor
          pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
          pads[d + i] = total - pads[i];
        }
      } else if (auto_pad == "NOTSET" || auto_pad.empty() || auto_pad == "VALID") {
        pads = auto_pad == "VALID" ? std::vector<int64_t>(2 * d, 0) : c.attr_ints("pads");
        if (pads.empty()) pads.assign(2 * d, 0);
        if (pads.size() != 2 * d) c.fail(fmt::format("attribute 'pads' has {} values; expected {}", pads.size(), 2 * d));
      } else {
        c.fail(fmt::format("attribute 'auto_pad' is '{}'; accepted: NOTSET, SAME_UPPER, SAME_LOWER, VALID", auto_pad));
      }
    }
    bool aten = symmetric(pads);
    for (size_t i = 0; i < d; ++i) {
      aten = aten && pads[i] >= 0 && (out_pad[i] == 0 || out_pad[i] < strides[i] || out_pad[i] < dilations[i]);
    }
    const IntList begin(pads.begin(), pads.begin() + long(d));
    if (c.conv_act != "none" || c.conv_affine.id >= 0) {  // fused activation / affine: the padded form takes them
      return one(c.out(c.call("wgnn.convolution_padded.default",
                              {c.tensor(0), c.tensor(1), c.tensor_or_none(2), IntList(strides), IntList(pads),
                               IntList(dilations), transposed, IntList(out_pad), group, c.conv_act, c.conv_lo,
                               c.conv_hi, c.conv_affine.id >= 0 ? Value(c.conv_affine) : Value(None{}),
                               c.conv_affine_rounded})));
    }
    Value r = c.call(aten ? "aten.convolution.default" : "wgnn.convolution_padded.default",
                     {c.tensor(0), c.tensor(1), c.tensor_or_none(2), IntList(strides), aten ? begin : IntList(pads),
                      IntList(dilations), transposed, IntList(out_pad), group});
    return one(c.out(r));
  };
  return m;
}

// The window attributes MaxPool and AveragePool share, with auto_pad
// resolved into explicit begin/end pads.
struct PoolWindow {
  size_t d;
  std::vector<int64_t> kernel, strides, dilations, pads;
  bool ceil_mode;
};

PoolWindow pool_window(NodeCtx& c) {
  PoolWindow w;
  w.d = spatial_dims(c);
  w.kernel = kernel_shape(c, w.d);
  w.strides = spatial_attr(c, "strides", w.d, 1);
  w.dilations = spatial_attr(c, "dilations", w.d, 1);
  w.pads = window_pads(c, w.kernel, w.strides, w.dilations);
  w.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  return w;
}

OpMapper max_pool_mapper() {
  OpMapper m;
  m.dtypes = {DType::F32, DType::F16, DType::U8, DType::I8};
  m.build = [](NodeCtx& c) {
    const PoolWindow w = pool_window(c);
    const size_t d = w.d;
    const std::vector<int64_t>&kernel = w.kernel, &strides = w.strides, &dilations = w.dilations, &pads = w.pads;
    const bool ceil_mode = w.ceil_mode;
    if (c.node.output_size() > 1 && !c.node.output(1).empty()) {
      const int64_t order = c.attr_int("storage_order", 0);
      if (order == 1 && d == 3) c.unsupported("column-major (storage_order 1) Indices of a 3-D MaxPool");
      Value r = c.call("wgnn.max_pool_padded_with_indices.default",
                       {c.tensor(0), IntList(kernel), IntList(strides), IntList(pads), IntList(dilations), ceil_mode,
                        order});
      std::vector<Slot> out;
      for (const Value& v : r.list()) out.push_back(c.out(v));
      return out;
    }
    // ATen's max_pool takes symmetric pads of at most half the effective kernel.
    bool aten = symmetric(pads);
    for (size_t i = 0; i < d; ++i) aten = aten && pads[i] <= ((kernel[i] - 1) * dilations[i] + 1) / 2;
    if (aten) {
      return one(c.out(c.call(fmt::format("aten.max_pool{}d.default", d),
                              {c.tensor(0), IntList(kernel), IntList(strides),
                               IntList(pads.begin(), pads.begin() + long(d)), IntList(dilations), ceil_mode})));
    }
    return one(c.out(c.call("wgnn.max_pool_padded.default", {c.tensor(0), IntList(kernel), IntList(strides),
                                                              IntList(pads), IntList(dilations), ceil_mode})));
  };
  return m;
}

OpMapper avg_pool_mapper() {
  OpMapper m;
  m.dtypes = kFloat;
  m.build = [](NodeCtx& c) {
    const PoolWindow w = pool_window(c);
    const size_t d = w.d;
    const std::vector<int64_t>&kernel = w.kernel, &strides = w.strides, &dilations = w.dilations, &pads = w.pads;
    const bool ceil_mode = w.ceil_mode;
    const bool count_include_pad = c.attr_int("count_include_pad", 0) != 0;
    // ATen's avg_pool: symmetric pads of at most half the kernel, no dilation.
    bool aten = symmetric(pads);
    for (size_t i = 0; i < d; ++i) aten = aten && dilations[i] == 1 && pads[i] <= kernel[i] / 2;
    if (aten) {
      ValueList args{c.tensor(0), IntList(kernel), IntList(strides), IntList(pads.begin(), pads.begin() + long(d)),
                     ceil_mode, count_include_pad};
      if (d > 1) args.push_back(None{});
      return one(c.out(c.call(fmt::format("aten.avg_pool{}d.default", d), args)));
    }
    return one(c.out(c.call("wgnn.avg_pool_padded.default", {c.tensor(0), IntList(kernel), IntList(strides),
                                                              IntList(pads), IntList(dilations), ceil_mode,
                                                              count_include_pad})));
  };
  return m;
}

// GlobalAveragePool / GlobalMaxPool over every spatial dim (any number of
// them): 2-D through aten.adaptive_avg_pool2d / aten.max_pool2d, others as
// a 1-D pool over the flattened spatial dims.
OpMapper global_pool_mapper(bool avg) {
  OpMapper m;
  m.dtypes = kFloat;
  m.build = [avg](NodeCtx& c) {
    const Shape& s = c.shape(0);
    if (s.size() < 3) c.fail(fmt::format("input {} has no spatial dims (rank < 3)", shape_str(s)));
    Shape out(s.begin(), s.begin() + 2);
    out.resize(s.size(), 1);
    if (s.size() == 4) {
      if (avg) return one(c.out(c.call("aten.adaptive_avg_pool2d.default", {c.tensor(0), IntList{1, 1}})));
      return one(c.out(c.call("aten.max_pool2d.default", {c.tensor(0), IntList{s[2], s[3]}})));
    }
    const int64_t width = numel(Shape(s.begin() + 2, s.end()));
    TensorRef flat = c.view(c.tensor(0), {s[0], s[1], width});
    Value r = avg ? c.call("aten.adaptive_avg_pool1d.default", {flat, IntList{1}})
                  : c.call("aten.max_pool1d.default", {flat, IntList{width}});
    return one(c.out(c.view(r.tensor(), out)));
  };
  return m;
}

OpMapper softmax(const std::string& aten) {
  OpMapper m;
  m.dtypes = kFloat;
  m.build = [aten](NodeCtx& c) {
    const Shape& s = c.shape(0);
    const int64_t r = int64_t(s.size());
    if (c.opset >= 13) {
      const int64_t axis = ops::normalize_axis(c.attr_int("axis", -1), r, c.node.op_type(), "axis");
      return one(c.out(c.call(aten, {c.tensor(0), axis, false})));
    }
    // Before opset 13: softmax over the input flattened to 2-D at `axis`.
    int64_t axis = c.attr_int("axis", 1);
    if (axis < 0) axis += r;
    int64_t a = 1, b = 1;
    for (int64_t d = 0; d < r; ++d) (d < axis ? a : b) *= s[size_t(d)];
    TensorRef flat = c.view(c.tensor(0), {a, b});
    TensorRef y = c.call(aten, {flat, int64_t(1), false}).tensor();
    return one(c.out(c.view(y, s)));
  };
  return m;
}

// ONNX PRelu: x where x >= 0, else slope * x, slope broadcasting to x (numpy
// rules). One value or one per channel (dim 1) is aten.prelu; other shapes
// compose where(x < 0, x * slope, x).
std::vector<Slot> prelu(NodeCtx& c) {
  const Shape& xs = c.shape(0);
  const Shape& ss = c.shape(1);
  if (c.dtype(1) != c.dtype(0)) c.fail("X and slope must have the same dtype");
  if (ss.size() > xs.size()) c.fail(fmt::format("slope {} has more dims than X {}", shape_str(ss), shape_str(xs)));
  // slope right-aligned to X: is it [C, 1, ..., 1] at dim 1?
  const size_t off = xs.size() - ss.size();
  bool per_channel = xs.size() >= 2;
  for (size_t d = 0; d < ss.size() && per_channel; ++d) {
    if (off + d != 1 && ss[d] != 1) per_channel = false;
    if (off + d == 1 && ss[d] != xs[1] && ss[d] != 1) per_channel = false;
  }
  TensorRef x = c.tensor(0);
  TensorRef slope = c.tensor(1);
  const int64_t n = numel(ss);
  if (n == 1) return one(c.out(c.call("aten.prelu.default", {x, c.view(slope, {1})})));
  // Opsets 1 to 6 (before numpy broadcasting): a 1-D slope of C values is one per channel.
  if (c.opset < 7 && ss.size() == 1 && xs.size() >= 2 && n == xs[1]) per_channel = true;
  if (per_channel && n == xs[1]) return one(c.out(c.call("aten.prelu.default", {x, c.view(slope, {n})})));
  HostTensor zero = host::scalar_like(c.dtype(0), 0.0);
  TensorRef z = c.constant(zero);
  TensorRef neg = c.call("aten.lt.Tensor", {x, z}).tensor();
  TensorRef scaled = c.call("aten.mul.Tensor", {x, slope}).tensor();
  if (c.g.info(scaled).shape != xs) c.fail(fmt::format("slope {} does not broadcast to X {}", shape_str(ss), shape_str(xs)));
  return one(c.out(c.call("aten.where.self", {neg, scaled, x})));
}

// GroupNormalization: opset 18 has one scale and bias per group, opset 21
// one per channel. Per-group constants are repeated per channel on the host;
// per-group tensors computed on the GPU scale the normalized groups.
std::vector<Slot> group_normalization(NodeCtx& c) {
  const Shape& s = c.shape(0);
  if (s.size() < 2) c.fail(fmt::format("X {} must be N x C x ...", shape_str(s)));
  if (!c.has_attr("num_groups")) c.fail("attribute num_groups is required");
  if (c.attr_int("stash_type", 1) != 1) c.unsupported("stash_type other than float");
  const int64_t N = s[0], C = s[1], G = c.attr_int("num_groups", 1);
  int64_t hw = 1;
  for (size_t d = 2; d < s.size(); ++d) hw *= s[d];
  const double eps = double(c.attr_float("epsilon", 1e-5f));
  const int64_t want = c.opset >= 21 ? C : G;
  for (size_t i : {size_t(1), size_t(2)}) {
    if (numel(c.shape(i)) != want || c.shape(i).size() != 1) {
      c.fail(fmt::format("{} has shape {}; opset {} expects [{}] (one per {})", i == 1 ? "scale" : "bias",
                         shape_str(c.shape(i)), c.opset, want, c.opset >= 21 ? "channel" : "group"));
    }
    if (c.dtype(i) != c.dtype(0)) c.fail("scale and bias must have X's dtype");
  }
  auto call = [&](Value w, Value b) {
    return c.call("aten.native_group_norm.default", {c.tensor(0), w, b, N, C, hw, G, eps}).list()[0].tensor();
  };
  if (want == C) return one(c.out(call(c.tensor(1), c.tensor(2))));
  if (G <= 0 || C % G != 0) c.fail(fmt::format("num_groups {} must divide C = {}", G, C));
  const int64_t cg = C / G;
  if (c.is_host(1) && c.is_host(2)) {
    auto per_channel = [&](size_t i) {
      const HostTensor& h = c.host(i, i == 1 ? "scale" : "bias");
      HostTensor t(h.dtype, {C});
      const size_t es = dtype_size(h.dtype);
      for (int64_t ch = 0; ch < C; ++ch) std::memcpy(t.data.data() + size_t(ch) * es, h.data.data() + size_t(ch / cg) * es, es);
      return c.constant(t, c.node.input(int(i)));
    };
    return one(c.out(call(per_channel(1), per_channel(2))));
  }
  TensorRef y = c.view(call(None{}, None{}), {N, G, cg * hw});
  y = c.call("aten.mul.Tensor", {y, c.view(c.tensor(1), {G, 1})}).tensor();
  y = c.call("aten.add.Tensor", {y, c.view(c.tensor(2), {G, 1})}).tensor();
  return one(c.out(c.view(y, s)));
}

// Resize (opsets 10 to 19) and Upsample (7, 9). Scales, sizes and roi must
// be known when the model loads. Resize-10 and Upsample use asymmetric
// coordinates, and for nearest the rule of those versions ('simple').
std::vector<Slot> resize(NodeCtx& c) {
  const Shape& in = c.shape(0);
  const size_t rank = in.size();
  const bool upsample = c.node.op_type() == "Upsample";
  const bool legacy = upsample || c.opset < 11;
  std::string mode = c.attr_string("mode", "nearest");
  std::vector<double> scales;
  IntList sizes;
  std::vector<double> roi;
  ValueList args;
  if (legacy) {
    if (mode == "bilinear") mode = "linear";
    if (mode != "nearest" && mode != "linear") c.unsupported("mode '" + mode + "' (accepted: nearest, linear)");
    if (upsample && c.opset < 9) {
      const auto* a = c.attr("scales");
      if (!a) c.fail("attribute scales is required");
      for (float f : a->floats()) scales.push_back(double(f));
    } else {
      const HostTensor& t = c.host(1, "scales");
      for (int64_t i = 0; i < t.numel(); ++i) scales.push_back(host::get(t, size_t(i)));
    }
    if (scales.size() != rank) c.fail(fmt::format("scales has {} values for X of rank {}", scales.size(), rank));
    return one(c.out(c.call("wgnn.resize.default", {c.tensor(0), None{}, ValueList(scales.begin(), scales.end()),
                                                     mode, std::string("asymmetric"), std::string("simple")})));
  }
  const std::string coord = c.attr_string("coordinate_transformation_mode", "half_pixel");
  if (c.attr_int("antialias", 0)) c.unsupported("antialias=1");
  if (coord == "half_pixel_symmetric") c.unsupported("coordinate_transformation_mode 'half_pixel_symmetric'");
  std::vector<int64_t> axes = c.attr_ints("axes");
  if (axes.empty()) {
    for (size_t d = 0; d < rank; ++d) axes.push_back(int64_t(d));
  }
  for (int64_t& a : axes) a = ops::normalize_axis(a, int64_t(rank), "Resize", "axes");
  const bool by_sizes = c.has(3) && numel(c.shape(3)) > 0;
  if (by_sizes) {
    const std::vector<int64_t> v = c.host_ints(3, "sizes");
    if (v.size() != axes.size()) c.fail(fmt::format("sizes has {} values for {} axes", v.size(), axes.size()));
    sizes.assign(in.begin(), in.end());
    for (size_t i = 0; i < axes.size(); ++i) sizes[size_t(axes[i])] = v[i];
    const std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch") {
      if (policy != "not_larger" && policy != "not_smaller") c.fail("keep_aspect_ratio_policy '" + policy + "'");
      double scale = policy == "not_larger" ? INFINITY : 0.0;
      for (int64_t a : axes) {
        const double r = double(sizes[size_t(a)]) / double(in[size_t(a)]);
        scale = policy == "not_larger" ? std::min(scale, r) : std::max(scale, r);
      }
      scales.assign(rank, 1.0);
      for (int64_t a : axes) {
        scales[size_t(a)] = scale;
        sizes[size_t(a)] = int64_t(scale * double(in[size_t(a)]) + 0.5);
      }
    }
  } else {
    if (!c.has(2) || numel(c.shape(2)) == 0) c.fail("neither scales nor sizes is given");
    const HostTensor& t = c.host(2, "scales");
    if (size_t(t.numel()) != axes.size()) c.fail(fmt::format("scales has {} values for {} axes", t.numel(), axes.size()));
    scales.assign(rank, 1.0);
    for (size_t i = 0; i < axes.size(); ++i) scales[size_t(axes[i])] = host::get(t, i);
  }
  if (coord == "tf_crop_and_resize") {
    if (!c.has(1) || numel(c.shape(1)) == 0) c.fail("tf_crop_and_resize needs roi");
    const HostTensor& t = c.host(1, "roi");
    if (size_t(t.numel()) != 2 * axes.size()) c.fail(fmt::format("roi has {} values for {} axes", t.numel(), axes.size()));
    roi.assign(rank, 0.0);
    roi.resize(2 * rank, 1.0);
    for (size_t i = 0; i < axes.size(); ++i) {
      roi[size_t(axes[i])] = host::get(t, i);
      roi[rank + size_t(axes[i])] = host::get(t, axes.size() + i);
    }
  }
  auto list = [](const std::vector<double>& v) { return v.empty() ? Value(None{}) : Value(ValueList(v.begin(), v.end())); };
  return one(c.out(c.call("wgnn.resize.default",
                          {c.tensor(0), by_sizes ? Value(sizes) : Value(None{}), list(scales), mode, coord,
                           c.attr_string("nearest_mode", "round_prefer_floor"),
                           double(c.attr_float("cubic_coeff_a", -0.75f)), c.attr_int("exclude_outside", 0) != 0,
                           double(c.attr_float("extrapolation_value", 0.f)), list(roi)})));
}

// BatchNormalization with training_mode=1 (opset 14+; what torch's dynamo
// exporter writes for an instance norm): normalized with the batch's own
// per-channel statistics over every dim but 1, the population variance;
// the optional outputs 1 and 2 are the running statistics moved towards them,
// input * momentum + current * (1 - momentum).
std::vector<Slot> batch_norm_training(NodeCtx& c) {
  if (c.opset < 14) c.unsupported("training_mode before opset 14");
  const Shape& s = c.shape(0);
  if (s.size() < 2) c.fail(fmt::format("input {} needs a channel dim", shape_str(s)));
  IntList dims{0};
  for (int64_t d = 2; d < int64_t(s.size()); ++d) dims.push_back(d);
  const double momentum = double(c.attr_float("momentum", 0.9f));
  TensorRef x = c.tensor(0);
  TensorRef mean = c.call("aten.mean.dim", {x, dims, true}).tensor();
  TensorRef xc = c.call("aten.sub.Tensor", {x, mean}).tensor();
  TensorRef var = c.call("aten.mean.dim", {c.call("aten.mul.Tensor", {xc, xc}).tensor(), dims, true}).tensor();
  TensorRef mean_c = c.view(mean, {s[1]}), var_c = c.view(var, {s[1]});
  Value r = c.call("aten._native_batch_norm_legit_no_training.default",
                   {x, c.tensor(1), c.tensor(2), mean_c, var_c, momentum, double(c.attr_float("epsilon", 1e-5f))});
  std::vector<Slot> out{c.out(r.list()[0])};
  for (int i = 1; i < c.node.output_size() && i < 3; ++i) {
    if (c.node.output(i).empty()) {
      out.push_back(Slot{});
      continue;
    }
    // current + momentum * (running - current)
    TensorRef cur = i == 1 ? mean_c : var_c;
    TensorRef diff = c.call("aten.sub.Tensor", {c.tensor(size_t(i) + 2), cur}).tensor();
    out.push_back(c.out(c.call("aten.add.Tensor", {cur, diff, momentum})));
  }
  return out;
}

// ---- the table ----------------------------------------------------------------

Mappers make_mappers() {
  Mappers m;
  // Unary math.
  for (auto [onnx_op, aten] : std::initializer_list<std::pair<const char*, const char*>>{
           {"Relu", "aten.relu.default"},       {"Sigmoid", "aten.sigmoid.default"}, {"Tanh", "aten.tanh.default"},
           {"Exp", "aten.exp.default"},         {"Log", "aten.log.default"},         {"Sqrt", "aten.sqrt.default"},
           {"Reciprocal", "aten.reciprocal.default"}, {"Floor", "aten.floor.default"}, {"Ceil", "aten.ceil.default"},
           {"Round", "aten.round.default"},     {"Sin", "aten.sin.default"},         {"Cos", "aten.cos.default"},
           {"Erf", "aten.erf.default"},         {"Softplus", "aten.softplus.default"},
           {"HardSwish", "aten.hardswish.default"}, {"Tan", "aten.tan.default"}, {"Asin", "aten.asin.default"},
           {"Acos", "aten.acos.default"},       {"Atan", "aten.atan.default"},       {"Sinh", "aten.sinh.default"},
           {"Cosh", "aten.cosh.default"},       {"Asinh", "aten.asinh.default"},     {"Acosh", "aten.acosh.default"},
           {"Atanh", "aten.atanh.default"},     {"Softsign", "aten.softsign.default"}}) {
    m[onnx_op] = unary(aten);
  }
  m["Neg"] = unary("aten.neg.default");
  m["Abs"] = unary("aten.abs.default");
  m["Sign"] = unary("aten.sign.default");
  for (const char* op : {"Neg", "Abs", "Sign", "Sqrt", "Floor", "Ceil", "Reciprocal", "Exp", "Log", "Relu"}) {
    m[op].fold = [op = std::string(op)](NodeCtx& c) { return one_host(host::unary(op, c.host(0, "X"))); };
  }
  m["LeakyRelu"] = {kFloat, [](NodeCtx& c) {
                      return one(c.out(c.call("aten.leaky_relu.default",
                                              {c.tensor(0), double(c.attr_float("alpha", 0.01f))})));
                    }, nullptr};
  m["Elu"] = {kFloat, [](NodeCtx& c) {
                return one(c.out(c.call("aten.elu.default", {c.tensor(0), double(c.attr_float("alpha", 1.f))})));
              }, nullptr};
  m["HardSigmoid"] = {kFloat, [](NodeCtx& c) {
                        return one(c.out(c.call("aten.hardsigmoid.default",
                                                {c.tensor(0), double(c.attr_float("alpha", 0.2f)),
                                                 double(c.attr_float("beta", 0.5f))})));
                      }, nullptr};
  m["ThresholdedRelu"] = {kFloat, [](NodeCtx& c) {
                            return one(c.out(c.call("aten.threshold.default",
                                                    {c.tensor(0), double(c.attr_float("alpha", 1.f)), 0.0})));
                          }, nullptr};
  m["Celu"] = {kFloat, [](NodeCtx& c) {
                 return one(c.out(c.call("aten.celu.default", {c.tensor(0), double(c.attr_float("alpha", 1.f))})));
               }, nullptr};
  m["Selu"] = {kFloat, [](NodeCtx& c) {
                 return one(c.out(c.call("aten.selu.default", {c.tensor(0), double(c.attr_float("alpha", 1.67326319217681884765625f)),
                                                              double(c.attr_float("gamma", 1.05070102214813232421875f))})));
               }, nullptr};
  m["Gelu"] = {kFloat, [](NodeCtx& c) {
                 return one(c.out(c.call("aten.gelu.default",
                                         {c.tensor(0), c.attr_string("approximate", "none")})));
               }, nullptr};
  m["Clip"] = {{}, [](NodeCtx& c) {
                 if (!host::is_float(c.dtype(0))) {
                   TensorRef t = c.tensor(0);
                   if (c.has(1)) t = c.call("aten.maximum.default", {t, c.tensor(1)}).tensor();
                   if (c.has(2)) t = c.call("aten.minimum.default", {t, c.tensor(2)}).tensor();
                   return one(c.out(c.has(1) || c.has(2) ? t : c.view(t, c.shape(0))));
                 }
                 std::optional<double> lo, hi;
                 if (c.opset < 11) {
                   lo = double(c.attr_float("min", -std::numeric_limits<float>::max()));
                   hi = double(c.attr_float("max", std::numeric_limits<float>::max()));
                 } else {
                   // A bound computed on the GPU (not foldable on the host) is a tensor operand.
                   auto known = [&](size_t i) -> const HostTensor* {
                     if (c.is_host(i)) return &c.host(i, "bound");
                     return c.builder ? c.builder->host_value(c.node.input(int(i))) : nullptr;
                   };
                   if ((c.has(1) && !known(1)) || (c.has(2) && !known(2))) {
                     TensorRef t = c.tensor(0);
                     if (c.has(1)) t = c.call("aten.maximum.default", {t, c.tensor(1)}).tensor();
                     if (c.has(2)) t = c.call("aten.minimum.default", {t, c.tensor(2)}).tensor();
                     return one(c.out(t));
                   }
                   if (c.has(1)) lo = host::get(*known(1), 0);
                   if (c.has(2)) hi = host::get(*known(2), 0);
                   if (!lo && !hi) return one(c.out(c.view(c.tensor(0), c.shape(0))));
                 }
                 return one(c.out(c.call("aten.clamp.default", {c.tensor(0), lo ? Value(*lo) : Value(None{}),
                                                               hi ? Value(*hi) : Value(None{})})));
               }, nullptr};

  // Normalization.
  m["LayerNormalization"] = {kFloat, [](NodeCtx& c) {
                               const Shape& s = c.shape(0);
                               const int64_t axis =
                                   ops::normalize_axis(c.attr_int("axis", -1), int64_t(s.size()), "LayerNormalization", "axis");
                               if (c.attr_int("stash_type", 1) != 1) c.unsupported("stash_type other than float");
                               Value r = c.call("aten.native_layer_norm.default",
                                                {c.tensor(0), IntList(s.begin() + axis, s.end()), c.tensor_or_none(1),
                                                 c.tensor_or_none(2), double(c.attr_float("epsilon", 1e-5f))});
                               std::vector<Slot> out;
                               for (const Value& v : r.list()) {
                                 TensorRef t = v.tensor();
                                 // Mean and InvStdDev are float32; float16 in fp16 mode when used.
                                 const int k = int(out.size());
                                 if (k > 0 && k < c.node.output_size() && !c.node.output(k).empty() &&
                                     c.gpu_dtype(c.g.info(t).dtype) != c.g.info(t).dtype)
                                   t = c.call("aten._to_copy.default", {t, aten_dtype_code(DType::F16)}).tensor();
                                 out.push_back(c.out(t));
                               }
                               return out;
                             }, nullptr};
  m["BatchNormalization"] = {kFloat, [](NodeCtx& c) {
                               if (c.attr_int("training_mode", 0)) return batch_norm_training(c);
                               // Opsets 1 to 6: is_test (default 0, training) must say inference;
                               // before 9, spatial=0 normalizes per element, not per channel.
                               if (c.opset < 7 && c.attr_int("is_test", 0) == 0) c.unsupported("training mode (is_test 0)");
                               if (c.opset < 9 && c.attr_int("spatial", 1) == 0) c.unsupported("spatial 0 (per-element statistics)");
                               if (c.node.output_size() > 1 && c.opset < 14) {
                                 for (int i = 1; i < c.node.output_size(); ++i)
                                   if (!c.node.output(i).empty()) c.unsupported("training outputs (only inference)");
                               }
                               // Constant parameters keep float32 in fp16 mode: the op
                               // folds them into a float32 scale and shift per channel.
                               const bool exact = c.is_host(1) && c.is_host(2) && c.is_host(3) && c.is_host(4);
                               auto param = [&](size_t i) { return exact ? c.tensor_exact(i) : c.tensor(i); };
                               Value r = c.call("aten._native_batch_norm_legit_no_training.default",
                                                {c.tensor(0), param(1), param(2), param(3), param(4),
                                                 double(c.attr_float("momentum", 0.9f)),
                                                 double(c.attr_float("epsilon", 1e-5f))});
                               return one(c.out(r.list()[0]));
                             }, nullptr};

  // Convolution and pooling.
  m["Conv"] = conv_mapper(false);
  m["ConvTranspose"] = conv_mapper(true);
  m["MaxPool"] = max_pool_mapper();
  m["AveragePool"] = avg_pool_mapper();
  m["GlobalAveragePool"] = global_pool_mapper(true);
  m["GlobalMaxPool"] = global_pool_mapper(false);
  // Matrix products.
  m["MatMul"] = {kFloat, [](NodeCtx& c) {
                   return one(c.out(c.call("aten.matmul.default", {c.tensor(0), c.tensor(1)})));
                 }, nullptr};
  // Gemm (opsets 7 to 13 alike): C broadcasts to [M, N] and may be absent (11+).
  m["Gemm"] = {kFloat, [](NodeCtx& c) {
                 return one(c.out(c.call("wgnn.gemm.default",
                                         {c.tensor(0), c.tensor(1), c.tensor_or_none(2),
                                          double(c.attr_float("alpha", 1.f)), double(c.attr_float("beta", 1.f)),
                                          c.attr_int("transA", 0) != 0, c.attr_int("transB", 0) != 0})));
               }, nullptr};

  m["InstanceNormalization"] = {kFloat, [](NodeCtx& c) {
                                  return one(c.out(c.call("aten.instance_norm.default",
                                                          {c.tensor(0), c.tensor(1), c.tensor(2), None{}, None{}, true,
                                                           0.1, double(c.attr_float("epsilon", 1e-5f)), false})));
                                }, nullptr};
  m["GroupNormalization"] = {kFloat, group_normalization, nullptr};
  m["PRelu"] = {kFloat, prelu, nullptr};
  m["Resize"] = {kFloat, resize, nullptr};
  m["Upsample"] = {kFloat, resize, nullptr};

  // Binary and variadic elementwise.
  // uint8 / int8 arithmetic wraps around (ops/binary.cpp), as ONNX Runtime's.
  const std::vector<DType> arith = {DType::F32, DType::F16, DType::I32, DType::I64, DType::U8, DType::I8};
  m["Add"] = binary("Add", "aten.add.Tensor", arith);
  m["Sub"] = binary("Sub", "aten.sub.Tensor", arith);
  m["Mul"] = binary("Mul", "aten.mul.Tensor", arith);
  m["Div"] = binary("Div", "aten.div.Tensor", arith);
  m["Pow"] = binary("Pow", "aten.pow.Tensor_Tensor", kNumeric);
  m["Mod"] = binary("Mod", "aten.remainder.Tensor", arith);
  m["Min"] = binary("Min", "aten.minimum.default", arith);
  m["Max"] = binary("Max", "aten.maximum.default", arith);
  m["Sum"] = binary("Sum", "aten.add.Tensor", kNumeric);
  m["Mean"] = {kFloat, [](NodeCtx& c) {
                 TensorRef acc = c.tensor(0);
                 for (size_t i = 1; i < c.inputs(); ++i) acc = c.call("aten.add.Tensor", {acc, c.tensor(i)}).tensor();
                 HostTensor k = host::scalar_like(c.dtype(0), 1.0 / double(c.inputs()));
                 TensorRef kt = c.constant(k);
                 return one(c.out(c.call("aten.mul.Tensor", {acc, kt})));
               }, nullptr};
  std::vector<DType> cmp = kNumeric;
  cmp.push_back(DType::Bool);
  m["Equal"] = binary("Equal", "aten.eq.Tensor", cmp);
  m["Less"] = binary("Less", "aten.lt.Tensor", kNumeric);
  m["LessOrEqual"] = binary("LessOrEqual", "aten.le.Tensor", kNumeric);
  m["Greater"] = binary("Greater", "aten.gt.Tensor", kNumeric);
  m["GreaterOrEqual"] = binary("GreaterOrEqual", "aten.ge.Tensor", kNumeric);
  m["And"] = binary("And", "aten.logical_and.default", kBool);
  m["Or"] = binary("Or", "aten.logical_or.default", kBool);
  m["Xor"] = binary("Xor", "aten.logical_xor.default", kBool);
  m["Not"] = unary("aten.logical_not.default", kBool);
  m["Not"].fold = [](NodeCtx& c) { return one_host(host::unary("Not", c.host(0, "X"))); };
  m["Where"] = {{}, [](NodeCtx& c) {
                  if (c.dtype(0) != DType::Bool) c.fail("condition must be bool");
                  return one(c.out(c.call("aten.where.self", {c.tensor(0), c.tensor(1), c.tensor(2)})));
                },
                [](NodeCtx& c) {
                  return one_host(host::where(c.host(0, "condition"), c.host(1, "X"), c.host(2, "Y")));
                }};
  m["Cast"] = {{}, [](NodeCtx& c) {
                 // fp16 mode: a Cast to float32 makes float16 (c.gpu_dtype).
                 const DType model_to = dtype_from_onnx(int(c.attr_int("to", 0)), c.where());
                 return one(c.out(cast_to(c, c.tensor(0), model_to)));
               },
               [](NodeCtx& c) {
                 return one_host(host::cast(c.host(0, "input"), dtype_from_onnx(int(c.attr_int("to", 0)), c.where())));
               }};

  m["CastLike"] = {{}, [](NodeCtx& c) {
                     // A widened float16 GPU tensor reads as float32 here, so only a
                     // host target says float16 (then the value is rounded to it).
                     return one(c.out(cast_to(c, c.tensor(0), c.slot_dtype(1))));
                   },
                   [](NodeCtx& c) {
                     return one_host(host::cast(c.host(0, "input"), c.host(1, "target_type").dtype));
                   }};

  // Shape-only ops: views on the GPU.
  m["Identity"] = view_op([](NodeCtx& c) { return c.shape(0); });
  m["Dropout"] = {{}, [](NodeCtx& c) {
                    if (c.has(2) && host::get_int(c.host(2, "training_mode"), 0)) c.unsupported("training_mode");
                    if (c.has_attr("is_test") == false && c.opset < 7 && c.attr_int("is_test", 0) == 0)
                      c.unsupported("training mode");
                    std::vector<Slot> out = one(c.out(c.view(c.tensor(0), c.shape(0))));
                    if (c.node.output_size() > 1 && !c.node.output(1).empty()) {
                      HostTensor mask(DType::Bool, c.shape(0));  // inference: every element kept
                      std::fill(mask.data.begin(), mask.data.end(), uint8_t(1));
                      out.push_back(Slot::of_host(std::move(mask)));
                    }
                    return out;
                  }, nullptr};
  m["Reshape"] = view_op([](NodeCtx& c) {
    return reshape_target(c, c.shape(0), c.opset >= 5 ? c.host_ints(1, "shape") : c.attr_ints("shape"),
                          c.attr_int("allowzero", 0) != 0);
  });
  m["Flatten"] = view_op(flatten_shape);
  m["Squeeze"] = view_op(squeeze_shape);
  m["Unsqueeze"] = view_op(unsqueeze_shape);

  // Values known from shapes alone: always on the host.
  m["Shape"] = {{}, [](NodeCtx& c) {
                  const Shape& s = c.shape(0);
                  int64_t r = int64_t(s.size()), b = c.attr_int("start", 0), e = c.attr_int("end", r);
                  b = std::clamp<int64_t>(b < 0 ? b + r : b, 0, r);
                  e = std::clamp<int64_t>(e < 0 ? e + r : e, 0, r);
                  return one(Slot::of_host(host::from_ints(std::vector<int64_t>(s.begin() + b, s.begin() + std::max(b, e)))));
                }, nullptr};
  m["Size"] = {{}, [](NodeCtx& c) {
                 HostTensor t(DType::I64, {});
                 t.as<int64_t>()[0] = numel(c.shape(0));
                 return one(Slot::of_host(std::move(t)));
               }, nullptr};
  m["Constant"] = {{}, [](NodeCtx& c) {
                     const auto& a = c.node.attribute(0);
                     if (a.name() == "value") return one(Slot::of_host(from_tensor_proto(a.t(), ".")));
                     if (a.name() == "value_float") return one(Slot::of_host(host::scalar_like(DType::F32, a.f())));
                     if (a.name() == "value_int") return one(Slot::of_host(host::scalar_like(DType::I64, double(a.i()))));
                     if (a.name() == "value_floats") {
                       HostTensor t(DType::F32, {a.floats_size()});
                       for (int i = 0; i < a.floats_size(); ++i) t.as<float>()[i] = a.floats(i);
                       return one(Slot::of_host(std::move(t)));
                     }
                     if (a.name() == "value_ints")
                       return one(Slot::of_host(host::from_ints({a.ints().begin(), a.ints().end()})));
                     c.unsupported("Constant attribute '" + a.name() + "'");
                   }, nullptr};
  m["ConstantOfShape"] = {{}, [](NodeCtx& c) {
                            const Shape s = c.host_ints(0, "input");
                            HostTensor v = c.has_attr("value") ? from_tensor_proto(c.attr("value")->t(), ".")
                                                               : host::scalar_like(DType::F32, 0.0);
                            HostTensor t(v.dtype, s);
                            const size_t es = dtype_size(v.dtype);
                            for (int64_t i = 0; i < t.numel(); ++i)
                              std::memcpy(t.data.data() + size_t(i) * es, v.data.data(), es);
                            return one(Slot::of_host(std::move(t)));
                          }, nullptr};
  m["Range"] = {{}, [](NodeCtx& c) {
                  const HostTensor& s = c.host(0, "start");
                  const double start = host::get(s, 0), limit = host::get(c.host(1, "limit"), 0),
                               delta = host::get(c.host(2, "delta"), 0);
                  if (delta == 0) c.fail("delta is 0");
                  const int64_t n = std::max<int64_t>(int64_t(std::ceil((limit - start) / delta)), 0);
                  HostTensor t(s.dtype, {n});
                  for (int64_t i = 0; i < n; ++i) host::set(t, size_t(i), start + double(i) * delta);
                  return one(Slot::of_host(std::move(t)));
                }, nullptr};

  // Data movement.
  m["IsNaN"] = {kFloat, [](NodeCtx& c) { return one(c.out(c.call("aten.isnan.default", {c.tensor(0)}))); }, nullptr};
  m["IsInf"] = {kFloat, [](NodeCtx& c) {
                  return one(c.out(c.call("wgnn.isinf.default", {c.tensor(0), c.attr_int("detect_positive", 1) != 0,
                                                                 c.attr_int("detect_negative", 1) != 0})));
                }, nullptr};
  // Shrink: x + bias below -lambd, x - bias above lambd, else 0.
  m["Shrink"] = {kFloat, [](NodeCtx& c) {
                   const double lambd = c.attr_float("lambd", 0.5f), bias = c.attr_float("bias", 0.f);
                   const DType dt = c.slot_dtype(0);
                   TensorRef x = c.tensor(0);
                   auto k = [&](double v) { return c.constant(host::scalar_like(dt, v)); };
                   TensorRef lo = c.call("aten.lt.Tensor", {x, k(-lambd)}).tensor();
                   TensorRef hi = c.call("aten.gt.Tensor", {x, k(lambd)}).tensor();
                   TensorRef plus = c.call("aten.add.Tensor", {x, k(bias)}).tensor();
                   TensorRef minus = c.call("aten.sub.Tensor", {x, k(bias)}).tensor();
                   TensorRef mid = c.call("aten.where.self", {hi, minus, k(0.0)}).tensor();
                   return one(c.out(c.call("aten.where.self", {lo, plus, mid})));
                 }, nullptr};
  // DepthToSpace (DCR or CRD) and SpaceToDepth on [N, C, H, W]: a view,
  // one permute, a view.
  m["DepthToSpace"] = {{}, [](NodeCtx& c) {
                         const Shape& s = c.shape(0);
                         const int64_t b = c.attr_int("blocksize", 0);
                         if (s.size() != 4) c.fail(fmt::format("input {} must be [N, C, H, W]", shape_str(s)));
                         if (b <= 0 || s[1] % (b * b) != 0) {
                           c.fail(fmt::format("blocksize {} must be positive and its square divide C = {}", b, s[1]));
                         }
                         const std::string mode = c.attr_string("mode", "DCR");
                         if (mode != "DCR" && mode != "CRD") c.fail(fmt::format("mode '{}' (accepted: DCR, CRD)", mode));
                         const int64_t N = s[0], C = s[1] / (b * b), H = s[2], W = s[3];
                         const bool dcr = mode == "DCR";
                         TensorRef v = c.view(c.tensor(0), dcr ? Shape{N, b, b, C, H, W} : Shape{N, C, b, b, H, W});
                         const IntList perm = dcr ? IntList{0, 3, 4, 1, 5, 2} : IntList{0, 1, 4, 2, 5, 3};
                         TensorRef t = c.call("aten.permute.default", {v, perm}).tensor();
                         return one(c.out(c.view(t, {N, C, H * b, W * b})));
                       }, nullptr};
  m["SpaceToDepth"] = {{}, [](NodeCtx& c) {
                         const Shape& s = c.shape(0);
                         const int64_t b = c.attr_int("blocksize", 0);
                         if (s.size() != 4) c.fail(fmt::format("input {} must be [N, C, H, W]", shape_str(s)));
                         if (b <= 0 || s[2] % b != 0 || s[3] % b != 0) {
                           c.fail(fmt::format("blocksize {} must be positive and divide H = {} and W = {}", b, s[2], s[3]));
                         }
                         const int64_t N = s[0], C = s[1], H = s[2] / b, W = s[3] / b;
                         TensorRef v = c.view(c.tensor(0), {N, C, H, b, W, b});
                         TensorRef t = c.call("aten.permute.default", {v, IntList{0, 3, 5, 1, 2, 4}}).tensor();
                         return one(c.out(c.view(t, {N, C * b * b, H, W})));
                       }, nullptr};
  m["Transpose"] = {{}, [](NodeCtx& c) {
                      std::vector<int64_t> perm = c.attr_ints("perm");
                      if (perm.empty())
                        for (int64_t d = int64_t(c.shape(0).size()) - 1; d >= 0; --d) perm.push_back(d);
                      return one(c.out(c.call("aten.permute.default", {c.tensor(0), IntList(perm)})));
                    },
                    [](NodeCtx& c) {
                      std::vector<int64_t> perm = c.attr_ints("perm");
                      if (perm.empty())
                        for (int64_t d = int64_t(c.shape(0).size()) - 1; d >= 0; --d) perm.push_back(d);
                      return one_host(host::transpose(c.host(0, "data"), perm));
                    }};
  m["Concat"] = {{}, [](NodeCtx& c) {
                   ValueList parts;
                   for (size_t i = 0; i < c.inputs(); ++i) parts.push_back(c.tensor(i));
                   // Opsets 1 to 3: axis may be absent, then 1.
                   return one(c.out(c.call("aten.cat.default", {parts, c.attr_int("axis", c.opset < 4 ? 1 : 0)})));
                 },
                 [](NodeCtx& c) {
                   std::vector<const HostTensor*> parts;
                   for (size_t i = 0; i < c.inputs(); ++i) parts.push_back(&c.host(i, "inputs"));
                   return one_host(host::concat(parts, c.attr_int("axis", c.opset < 4 ? 1 : 0)));
                 }};
  m["Split"] = {{}, [](NodeCtx& c) {
                  const Shape& s = c.shape(0);
                  const int64_t axis = ops::normalize_axis(c.attr_int("axis", 0), int64_t(s.size()), "Split", "axis");
                  // Opsets 13 and later (and 1, besides the attribute) take the sizes as an input.
                  std::vector<int64_t> sizes =
                      (c.opset >= 13 || c.opset < 2) && c.has(1) ? c.host_ints(1, "split")
                      : c.opset >= 13                              ? std::vector<int64_t>{}
                                                                   : c.attr_ints("split");
                  const int64_t dim = s[size_t(axis)];
                  if (sizes.empty()) {
                    const int64_t parts = c.has_attr("num_outputs") ? c.attr_int("num_outputs", 1) : c.node.output_size();
                    const int64_t each = (dim + parts - 1) / parts;
                    for (int64_t k = 0, left = dim; k < parts; ++k, left -= each) sizes.push_back(std::min(each, left));
                  }
                  Value r = c.call("aten.split_with_sizes.default", {c.tensor(0), IntList(sizes), axis});
                  std::vector<Slot> out;
                  for (const Value& v : r.list()) out.push_back(c.out(v));
                  return out;
                }, nullptr};
  m["Slice"] = {{}, [](NodeCtx& c) {
                  std::vector<int64_t> starts, ends, axes, steps;
                  if (c.opset < 10) {
                    starts = c.attr_ints("starts");
                    ends = c.attr_ints("ends");
                    axes = c.attr_ints("axes");
                  } else {
                    starts = c.host_ints(1, "starts");
                    ends = c.host_ints(2, "ends");
                    if (c.has(3)) axes = c.host_ints(3, "axes");
                    if (c.has(4)) steps = c.host_ints(4, "steps");
                  }
                  if (starts.size() != ends.size()) c.fail("starts and ends differ in length");
                  TensorRef t = c.tensor(0);
                  const int64_t r = int64_t(c.shape(0).size());
                  for (size_t k = 0; k < starts.size(); ++k) {
                    const int64_t ax = ops::normalize_axis(axes.empty() ? int64_t(k) : axes[k], r, "Slice", "axes");
                    t = c.call("aten.slice.Tensor", {t, ax, starts[k], ends[k], steps.empty() ? int64_t(1) : steps[k]})
                            .tensor();
                  }
                  return one(c.out(starts.empty() ? c.view(t, c.shape(0)) : t));
                },
                [](NodeCtx& c) {
                  if (c.opset < 10)
                    return one_host(host::slice(c.host(0, "data"), c.attr_ints("starts"), c.attr_ints("ends"),
                                                c.attr_ints("axes"), {}));
                  return one_host(host::slice(c.host(0, "data"), c.host_ints(1, "starts"), c.host_ints(2, "ends"),
                                              c.has(3) ? c.host_ints(3, "axes") : std::vector<int64_t>{},
                                              c.has(4) ? c.host_ints(4, "steps") : std::vector<int64_t>{}));
                }};
  m["Gather"] = {{}, [](NodeCtx& c) {
                   const Shape& s = c.shape(0);
                   const Shape& is = c.shape(1);
                   const int64_t axis = ops::normalize_axis(c.attr_int("axis", 0), int64_t(s.size()), "Gather", "axis");
                   TensorRef idx = c.view(c.tensor(1), {numel(is)});
                   TensorRef y = c.call("aten.index_select.default", {c.tensor(0), axis, idx}).tensor();
                   Shape out(s.begin(), s.begin() + axis);
                   out.insert(out.end(), is.begin(), is.end());
                   out.insert(out.end(), s.begin() + axis + 1, s.end());
                   return one(c.out(c.view(y, out)));
                 },
                 [](NodeCtx& c) {
                   return one_host(host::gather(c.host(0, "data"), c.host(1, "indices"), c.attr_int("axis", 0)));
                 }};
  m["GatherElements"] = {{}, [](NodeCtx& c) {
                           const int64_t axis = ops::normalize_axis(c.attr_int("axis", 0), int64_t(c.shape(0).size()),
                                                                    "GatherElements", "axis");
                           return one(c.out(c.call("aten.gather.default", {c.tensor(0), axis, c.tensor(1)})));
                         }, nullptr};
  m["Expand"] = {{}, [](NodeCtx& c) {
                   const Shape target = ops::broadcast_shapes(c.shape(0), c.host_ints(1, "shape"), "Expand");
                   return one(c.out(c.call("aten.expand.default", {c.tensor(0), IntList(target)})));
                 },
                 [](NodeCtx& c) { return one_host(host::expand(c.host(0, "input"), c.host_ints(1, "shape"))); }};
  m["Trilu"] = {{}, [](NodeCtx& c) {
                  const int64_t k = c.has(1) ? host::get_int(c.host(1, "k"), 0) : 0;
                  const char* op = c.attr_int("upper", 1) ? "aten.triu.default" : "aten.tril.default";
                  return one(c.out(c.call(op, {c.tensor(0), k})));
                },
                [](NodeCtx& c) {
                  return one_host(host::trilu(c.host(0, "input"), c.has(1) ? host::get_int(c.host(1, "k"), 0) : 0,
                                              c.attr_int("upper", 1) != 0));
                }};
  m["Tile"] = {{}, [](NodeCtx& c) {
                 return one(c.out(c.call("aten.repeat.default", {c.tensor(0), IntList(c.host_ints(1, "repeats"))})));
               }, nullptr};
  m["Pad"] = {{}, [](NodeCtx& c) {
                const Shape& s = c.shape(0);
                const int64_t r = int64_t(s.size());
                std::string mode = c.attr_string("mode", "constant");
                // Opset 1 names the attribute `paddings`, 2 to 10 `pads`.
                std::vector<int64_t> pads = c.opset >= 11 ? c.host_ints(1, "pads")
                                            : c.opset >= 2 ? c.attr_ints("pads") : c.attr_ints("paddings");
                double value = c.opset >= 11 ? (c.has(2) ? host::get(c.host(2, "constant_value"), 0) : 0.0)
                                             : double(c.attr_float("value", 0.f));
                std::vector<int64_t> axes;
                if (c.has(3)) axes = c.host_ints(3, "axes");
                if (axes.empty())
                  for (int64_t d = 0; d < r; ++d) axes.push_back(d);
                const size_t k = axes.size();
                if (pads.size() != 2 * k) c.fail(fmt::format("pads has {} values; expected {}", pads.size(), 2 * k));
                std::vector<int64_t> begin(size_t(r), 0), end(size_t(r), 0);
                for (size_t i = 0; i < k; ++i) {
                  const int64_t ax = ops::normalize_axis(axes[i], r, "Pad", "axes");
                  begin[size_t(ax)] = pads[i];
                  end[size_t(ax)] = pads[i + k];
                }
                IntList aten_pad;  // last dim first: (begin, end) pairs
                for (int64_t d = r - 1; d >= 0; --d) {
                  aten_pad.push_back(begin[size_t(d)]);
                  aten_pad.push_back(end[size_t(d)]);
                }
                if (mode == "edge") mode = "replicate";
                else if (mode == "wrap") mode = "circular";
                else if (mode != "constant" && mode != "reflect") c.unsupported("mode '" + mode + "'");
                return one(c.out(c.call("aten.pad.default", {c.tensor(0), aten_pad, mode, value})));
              }, nullptr};

  // Reductions and softmax.
  m["ReduceMean"] = reduce("ReduceMean", "aten.mean.dim", 18, kFloat);
  m["ReduceSum"] = reduce("ReduceSum", "aten.sum.dim_IntList", 13, kNumeric);
  m["ReduceMax"] = reduce("ReduceMax", "aten.amax.default", 18, kNumeric);
  m["ReduceMin"] = reduce("ReduceMin", "aten.amin.default", 18, kNumeric);
  // prod takes one dim at a time.
  m["ReduceProd"] = reduce("ReduceProd", "aten.prod.dim_int", 18, kNumeric);
  m["ReduceProd"].build = [](NodeCtx& c) {
    std::vector<int64_t> axes = reduce_axes(c, c.opset >= 18);
    const bool keep = c.attr_int("keepdims", 1) != 0;
    if (axes.empty() && c.attr_int("noop_with_empty_axes", 0)) return one(c.out(c.view(c.tensor(0), c.shape(0))));
    const int64_t r = int64_t(c.shape(0).size());
    if (axes.empty())
      for (int64_t d = 0; d < r; ++d) axes.push_back(d);
    for (auto& a : axes) a = ops::normalize_axis(a, r, "ReduceProd", "axes");
    std::sort(axes.rbegin(), axes.rend());  // innermost first keeps the other indices valid
    TensorRef t = c.tensor(0);
    const int64_t code = host::is_float(c.dtype(0)) ? -1 : aten_dtype_code(c.dtype(0));
    for (int64_t a : axes) {
      t = c.call("aten.prod.dim_int", {t, a, keep, code < 0 ? Value(None{}) : Value(code)}).tensor();
    }
    return one(c.out(t));
  };
  // Reductions composed of elementwise ops and a sum.
  auto composed = [](const std::string& kind) {
    OpMapper om;
    om.dtypes = kFloat;
    om.build = [kind](NodeCtx& c) {
      std::vector<int64_t> axes = reduce_axes(c, c.opset >= 18);
      const bool keep = c.attr_int("keepdims", 1) != 0;
      const int64_t r = int64_t(c.shape(0).size());
      if (axes.empty() && c.attr_int("noop_with_empty_axes", 0)) {
        TensorRef x = c.tensor(0);
        if (kind == "L1") x = c.call("aten.abs.default", {x}).tensor();
        else if (kind == "L2" || kind == "SumSquare") x = c.call("aten.mul.Tensor", {x, x}).tensor();
        if (kind == "L2") x = c.call("aten.sqrt.default", {x}).tensor();
        if (kind == "LogSum") x = c.call("aten.log.default", {x}).tensor();
        return one(c.out(x));
      }
      if (axes.empty())
        for (int64_t d = 0; d < r; ++d) axes.push_back(d);
      TensorRef x = c.tensor(0), mx;
      if (kind == "L1") x = c.call("aten.abs.default", {x}).tensor();
      if (kind == "L2" || kind == "SumSquare") x = c.call("aten.mul.Tensor", {x, x}).tensor();
      if (kind == "LogSumExp") {
        mx = c.call("aten.amax.default", {x, IntList(axes), true}).tensor();
        // An infinite maximum shifts by 0 instead (inf - inf is NaN): all
        // -inf gives log(0) = -inf, an inf gives inf, as ONNX Runtime.
        // (mx - mx == 0 holds for finite mx only; NaN stays NaN through exp.)
        TensorRef zero = c.constant(host::scalar_like(c.dtype(0), 0.0));
        TensorRef finite = c.call("aten.eq.Tensor", {c.call("aten.sub.Tensor", {mx, mx}).tensor(), zero}).tensor();
        mx = c.call("aten.where.self", {finite, mx, zero}).tensor();
        x = c.call("aten.exp.default", {c.call("aten.sub.Tensor", {x, mx}).tensor()}).tensor();
      }
      TensorRef y = c.call("aten.sum.dim_IntList", {x, IntList(axes), true}).tensor();
      if (kind == "L2") y = c.call("aten.sqrt.default", {y}).tensor();
      if (kind == "LogSum" || kind == "LogSumExp") y = c.call("aten.log.default", {y}).tensor();
      if (kind == "LogSumExp") y = c.call("aten.add.Tensor", {y, mx}).tensor();
      if (!keep) {
        Shape s;
        std::vector<bool> red(size_t(r), false);
        for (int64_t a : axes) red[size_t(ops::normalize_axis(a, r, "Reduce", "axes"))] = true;
        for (int64_t d = 0; d < r; ++d)
          if (!red[size_t(d)]) s.push_back(c.shape(0)[size_t(d)]);
        y = c.view(y, s);
      }
      return one(c.out(y));
    };
    return om;
  };
  m["ReduceL1"] = composed("L1");
  m["ReduceL2"] = composed("L2");
  m["ReduceSumSquare"] = composed("SumSquare");
  m["ReduceLogSum"] = composed("LogSum");
  m["ReduceLogSumExp"] = composed("LogSumExp");
  for (const bool max : {true, false}) {
    m[max ? "ArgMax" : "ArgMin"] = {{DType::F32, DType::F16, DType::I32, DType::I64}, [max](NodeCtx& c) {
                                      return one(c.out(c.call(max ? "aten.argmax.default" : "aten.argmin.default",
                                                              {c.tensor(0), c.attr_int("axis", 0),
                                                               c.attr_int("keepdims", 1) != 0,
                                                               c.attr_int("select_last_index", 0) != 0})));
                                    }, nullptr};
  }
  // LRN: x / (bias + alpha / size * sum of x^2 over `size` channels around
  // c)^beta, the window floor((size - 1) / 2) channels before c and
  // ceil((size - 1) / 2) after; the sum as an average pool over [C, spatial]
  // counting the zero padding (alpha * that average).
  m["LRN"] = {kFloat, [](NodeCtx& c) {
                const Shape& s = c.shape(0);
                if (s.size() < 3) c.fail(fmt::format("input {} must be [N, C, D1, ...]", shape_str(s)));
                if (!c.has_attr("size")) c.fail("attribute 'size' is required");
                const int64_t size = c.attr_int("size", 1);
                if (size <= 0) c.fail(fmt::format("size {} must be positive", size));
                const double alpha = c.attr_float("alpha", 1e-4f), beta = c.attr_float("beta", 0.75f),
                             bias = c.attr_float("bias", 1.f);
                const DType dt = c.slot_dtype(0);
                int64_t spatial = 1;
                for (size_t d = 2; d < s.size(); ++d) spatial *= s[d];
                TensorRef x = c.tensor(0);
                TensorRef sq = c.view(c.call("aten.mul.Tensor", {x, x}).tensor(), {s[0], 1, s[1], spatial});
                const int64_t before = (size - 1) / 2, after = size - 1 - before;
                TensorRef avg = c.call("wgnn.avg_pool_padded.default", {sq, IntList{size, 1}, IntList{1, 1},
                                                                        IntList{before, 0, after, 0}, IntList{1, 1},
                                                                        false, true})
                                    .tensor();
                auto k = [&](double v) { return c.constant(host::scalar_like(dt, v)); };
                TensorRef scaled = c.call("aten.mul.Tensor", {avg, k(alpha)}).tensor();
                TensorRef base = c.call("aten.add.Tensor", {scaled, k(bias)}).tensor();
                TensorRef den = c.call("aten.pow.Tensor_Tensor", {base, k(beta)}).tensor();
                return one(c.out(c.call("aten.div.Tensor", {x, c.view(den, s)})));
              }, nullptr};
  // MeanVarianceNormalization as ONNX's function defines it: (x - E[x]) /
  // (sqrt(E[x^2] - E[x]^2) + 1e-9), the means over `axes` (default 0, 2, 3).
  m["MeanVarianceNormalization"] = {kFloat, [](NodeCtx& c) {
    const int64_t r = int64_t(c.shape(0).size());
    std::vector<int64_t> axes = c.has_attr("axes") ? c.attr_ints("axes") : std::vector<int64_t>{0, 2, 3};
    for (auto& a : axes) a = ops::normalize_axis(a, r, "MeanVarianceNormalization", "axes");
    const DType dt = c.slot_dtype(0);
    TensorRef x = c.tensor(0);
    auto mean = [&](TensorRef t) { return c.call("aten.mean.dim", {t, IntList(axes), true}).tensor(); };
    TensorRef m1 = mean(x);
    TensorRef m2 = mean(c.call("aten.mul.Tensor", {x, x}).tensor());
    TensorRef var = c.call("aten.sub.Tensor", {m2, c.call("aten.mul.Tensor", {m1, m1}).tensor()}).tensor();
    TensorRef sd = c.call("aten.add.Tensor", {c.call("aten.sqrt.default", {var}).tensor(),
                                              c.constant(host::scalar_like(dt, 1e-9))}).tensor();
    return one(c.out(c.call("aten.div.Tensor", {c.call("aten.sub.Tensor", {x, m1}).tensor(), sd})));
  }, nullptr};
  // EyeLike: ones on diagonal k of a 2-D shape, known on the host.
  m["EyeLike"] = {{}, [](NodeCtx& c) {
                    const Shape& s = c.shape(0);
                    if (s.size() != 2) c.fail(fmt::format("input {} must be 2-D", shape_str(s)));
                    const DType dt = c.has_attr("dtype") ? dtype_from_onnx(int(c.attr_int("dtype", 1)), c.where()) : c.slot_dtype(0);
                    const int64_t k = c.attr_int("k", 0);
                    HostTensor y(dt, s);
                    for (int64_t i = 0; i < s[0]; ++i) {
                      const int64_t j = i + k;
                      if (j >= 0 && j < s[1]) host::set(y, size_t(i * s[1] + j), 1.0);
                    }
                    return one(Slot::of_host(std::move(y)));
                  }, nullptr};
  // OneHot: values[1] where an index (negative ones counted from depth)
  // equals the position along the new axis, else values[0]; indices
  // outside [-depth, depth) give values[0] everywhere. depth sets the
  // result's shape: it must be known on the host.
  m["OneHot"] = {{}, [](NodeCtx& c) {
                   const double depth_v = host::get(c.host(1, "depth"), 0);
                   const int64_t depth = int64_t(depth_v);
                   if (depth <= 0 || double(depth) != std::trunc(depth_v)) c.fail(fmt::format("depth {} must be a positive integer", depth_v));
                   const Shape& is = c.shape(0);
                   const int64_t r = int64_t(is.size()) + 1;
                   const int64_t axis = ops::normalize_axis(c.attr_int("axis", -1), r, "OneHot", "axis");
                   if (numel(c.shape(2)) != 2) c.fail(fmt::format("values {} must hold 2 values (off, on)", shape_str(c.shape(2))));
                   TensorRef idx = c.tensor(0);
                   if (c.dtype(0) != DType::I64 && c.dtype(0) != DType::I32) {
                     idx = c.call("aten._to_copy.default", {idx, aten_dtype_code(DType::I64)}).tensor();  // truncates floats
                   }
                   const DType it = c.g.info(idx).dtype;
                   // A negative index counts from depth.
                   TensorRef neg = c.call("aten.lt.Tensor", {idx, c.constant(host::scalar_like(it, 0))}).tensor();
                   TensorRef wrapped = c.call("aten.add.Tensor", {idx, c.constant(host::scalar_like(it, double(depth)))}).tensor();
                   idx = c.call("aten.where.self", {neg, wrapped, idx}).tensor();
                   Shape us = is;
                   us.insert(us.begin() + axis, 1);
                   HostTensor iota(it, {depth});
                   for (int64_t i = 0; i < depth; ++i) host::set(iota, size_t(i), double(i));
                   Shape along(size_t(r), 1);
                   along[size_t(axis)] = depth;
                   TensorRef eq = c.call("aten.eq.Tensor", {c.view(idx, us), c.view(c.constant(iota), along)}).tensor();
                   TensorRef v = c.view(c.tensor(2), {2});
                   TensorRef off = c.call("aten.slice.Tensor", {v, int64_t(0), int64_t(0), int64_t(1), int64_t(1)}).tensor();
                   TensorRef on = c.call("aten.slice.Tensor", {v, int64_t(0), int64_t(1), int64_t(2), int64_t(1)}).tensor();
                   return one(c.out(c.call("aten.where.self", {eq, on, off})));
                 }, nullptr};
  // Hardmax: 1 at the first maximum along the axis, else 0 (before opset
  // 13 along the input flattened to 2-D at the axis, as Softmax).
  m["Hardmax"] = {kFloat, [](NodeCtx& c) {
                    const Shape& s = c.shape(0);
                    const int64_t r = int64_t(s.size());
                    TensorRef x = c.tensor(0);
                    Shape work = s;
                    int64_t axis = 0;
                    if (c.opset < 13) {
                      const int64_t at = ops::normalize_axis(c.attr_int("axis", 1), r == 0 ? 1 : r, "Hardmax", "axis");
                      int64_t outer = 1, inner = 1;
                      for (int64_t d = 0; d < r; ++d) (d < at ? outer : inner) *= s[size_t(d)];
                      work = {outer, inner};
                      x = c.view(x, work);
                      axis = 1;
                    } else {
                      axis = ops::normalize_axis(c.attr_int("axis", -1), r, "Hardmax", "axis");
                    }
                    const int64_t n = work[size_t(axis)];
                    TensorRef idx = c.call("aten.argmax.default", {x, axis, true, false}).tensor();
                    HostTensor iota(DType::I64, {n});
                    for (int64_t i = 0; i < n; ++i) iota.as<int64_t>()[i] = i;
                    Shape along(work.size(), 1);
                    along[size_t(axis)] = n;
                    TensorRef eq = c.call("aten.eq.Tensor", {idx, c.view(c.constant(iota), along)}).tensor();
                    TensorRef y = c.call("aten._to_copy.default", {eq, aten_dtype_code(c.dtype(0))}).tensor();
                    return one(c.out(c.view(y, s)));
                  }, nullptr};
  m["Softmax"] = softmax("aten._softmax.default");
  m["LogSoftmax"] = softmax("aten._log_softmax.default");
  add_quant_mappers(m);
  add_control_mappers(m);
  add_rnn_mappers(m);
  add_index_mappers(m);
  add_dynamic_mappers(m);  // onnx/mappers_dynamic.cpp, onnx/mappers_signal.cpp
  add_signal_mappers(m);
  return m;
}

}  // namespace

const std::map<std::string, OpMapper>& op_mappers() {
  static const Mappers m = make_mappers();
  return m;
}

std::vector<Slot> one(Slot s) {
  std::vector<Slot> v;
  v.push_back(std::move(s));
  return v;
}

std::string node_label(NodeCtx& c) {
  return fmt::format("{} '{}'", c.node.op_type(),
                     !c.node.name().empty() ? c.node.name() : c.node.output_size() ? c.node.output(0) : "");
}

std::string mapper_key(const onnx::NodeProto& n) {
  if (n.domain().empty() || n.domain() == "ai.onnx") return n.op_type();
  return n.domain() + "." + n.op_type();
}

const OpMapper* find_mapper(const onnx::NodeProto& n) {
  const auto& m = op_mappers();
  auto it = m.find(mapper_key(n));
  return it == m.end() ? nullptr : &it->second;
}

}  // namespace wgnn::onnx_import

// ONNX operators -> wgnn ops: the op table and NodeCtx. One entry per ONNX op
// type: the dtypes it accepts, how it builds GPU work (views cost nothing),
// and, for shape arithmetic, how it folds on the host when every input is
// known there. The entries live by family in onnx/mappers_<family>.cpp
// (elementwise, nn, shape, reduce, index, dynamic, signal, quant, control,
// rnn); the helpers they share are here (onnx/mapper_util.h).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "onnx/host_ops.h"
#include "onnx/mapper_util.h"
#include "onnx/mappers_control.h"
#include "onnx/mappers_dynamic.h"
#include "onnx/mappers_quant.h"
#include "onnx/mappers_index.h"
#include "onnx/ir_trace.h"
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
  if (s.ref.id < 0 && s.deferred()) s.ref = s.deferred()->build(graph_, trace);
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
  return plan_constant(graph_, trace, t.shape, t.dtype, t.data.data(), node.input(int(i)));
}

TensorRef plan_constant(Graph& g, IrTrace* trace, const Shape& shape, DType dtype, const void* data,
                        const std::string& name) {
  if (trace) return trace->constant(shape, dtype, data, name);
  return g.add_constant(shape, dtype, data, name);
}

TensorRef plan_made_constant(Graph& g, IrTrace* trace, const Shape& shape, DType dtype, const std::string& memo,
                             std::function<const HostTensor&(HostTensor&)> make, const std::string& name,
                             const HostTensor* source) {
  if (trace) return trace->made_constant(shape, dtype, memo, std::move(make), name, source);
  return g.add_memo_constant(memo, make, name);
}

TensorRef NodeCtx::slot_constant(const Slot& s, const std::string& name) {
  if (!s.stored()) return constant(s.value(), name);
  const HostTensor& t = s.value();
  const DType to = gpu_dtype(t.dtype);
  const char* conversion = to == t.dtype ? "as is" : storage.fp16 ? "f16 saturated" : "cast";
  const std::string memo = fmt::format("initializer@{}:{}:{}", static_cast<const void*>(&t), dtype_name(to), conversion);
  // By value but the initializer, which the Session keeps: the IR's plans
  // make it when they lower, after this build.
  const HostTensor* tp = &t;
  const bool fp16 = storage.fp16;
  return plan_made_constant(
      graph_, trace, t.shape, to, memo,
      [tp, to, fp16](HostTensor& scratch) -> const HostTensor& {
        const HostTensor& init = *tp;
        if (to == init.dtype) return init;
        if (fp16 && init.dtype == DType::F32) {
          to_f16_saturated(init, scratch);  // into the store's scratch memory, not a new tensor
          return scratch;
        }
        scratch = fp16 ? to_f16_saturated(init) : host::cast(init, to);
        return scratch;
      },
      name, &t);
}

TensorRef NodeCtx::constant(const HostTensor& t, const std::string& name) {
  if (gpu_dtype(t.dtype) != t.dtype) {
    const HostTensor h = storage.fp16 ? to_f16_saturated(t) : host::cast(t, gpu_dtype(t.dtype));
    return plan_constant(graph_, trace, h.shape, h.dtype, h.data.data(), name);
  }
  return plan_constant(graph_, trace, t.shape, t.dtype, t.data.data(), name);
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
    return trace ? trace->call(op, args) : ops::call(graph_, op, args);
  } catch (const HostOutOfMemory&) {
    throw;  // its type tells callers what ran out; the message says while what
  } catch (const Unsupported& e) {
    throw Unsupported(where() + ": " + e.what());
  } catch (const Error& e) {
    throw Error(where() + ": " + e.what());
  }
}

TensorRef NodeCtx::view(TensorRef t, const Shape& shape) { return trace ? trace->view(t, shape) : graph_.add_view(t, shape); }

// ---- helpers the families share (onnx/mapper_util.h) -----------------------

std::vector<HostTensor> one_host(HostTensor t) {
  std::vector<HostTensor> v;
  v.push_back(std::move(t));
  return v;
}

TensorRef float_table(NodeCtx& c, const HostTensor& f32) {
  const DType model = c.slot_dtype(0);
  return c.constant(model == f32.dtype ? f32 : host::cast(f32, model));
}

void check_built_size(NodeCtx& c, double elements, size_t element_bytes, const char* what) {
  const double limit = double(c.mut_graph().ctx().limits().max_buffer_size);
  if (elements * double(element_bytes) > limit) {
    c.fail(fmt::format("{} would hold {:.4g} bytes, over this device's maxBufferSize of {:.4g}", what,
                       elements * double(element_bytes), limit));
  }
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

OpMapper unary(const std::string& aten, std::vector<DType> dtypes) {
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
      if (empty && c.dtype(0) == DType::Bool) {
        // any() of nothing is false, all() of nothing true.
        const HostTensor shaped = host::reduce(onnx_op, HostTensor(DType::F32, s), axes, keep);
        HostTensor r(DType::Bool, shaped.shape);
        std::fill(r.data.begin(), r.data.end(), uint8_t(onnx_op == "ReduceMin" ? 1 : 0));
        return one(Slot::of_host(std::move(r)));
      }
      if (empty) {
        if (c.dtype(0) != DType::F32) c.unsupported("a reduction over no values, other than of float32 and bool");
        return one(Slot::of_host(host::reduce(onnx_op, HostTensor(DType::F32, s), axes, keep)));
      }
    }
    if (c.dtype(0) == DType::Bool) {
      // ReduceMax / ReduceMin of bool (opset 20): any / all, as int32.
      TensorRef i = c.call("aten._to_copy.default", {c.tensor(0), aten_dtype_code(DType::I32)}).tensor();
      TensorRef r = c.call(aten, {i, IntList(axes), keep}).tensor();
      return one(c.out(c.call("aten.ne.Tensor", {r, c.constant(host::scalar_like(DType::I32, 0.0))})));
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

// ---- the table ----------------------------------------------------------------

namespace {

Mappers make_mappers() {
  Mappers m;
  add_elementwise_mappers(m);  // onnx/mappers_elementwise.cpp
  add_nn_mappers(m);           // onnx/mappers_nn.cpp
  add_shape_mappers(m);        // onnx/mappers_shape.cpp
  add_reduce_mappers(m);       // onnx/mappers_reduce.cpp
  add_transformer_mappers(m);  // onnx/mappers_transformer.cpp
  add_quant_mappers(m);
  add_control_mappers(m);
  add_rnn_mappers(m);
  add_index_mappers(m);
  add_dynamic_mappers(m);  // onnx/mappers_dynamic.cpp, onnx/mappers_signal.cpp
  add_signal_mappers(m);
  add_ort_contrib_mappers(m);  // onnx/mappers_ort_contrib.cpp
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

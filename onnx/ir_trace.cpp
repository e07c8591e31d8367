#include "onnx/ir_trace.h"

#include <fmt/format.h>

#include <cstring>

#include "gpu/error.h"
#include "ops/registry.h"

namespace wgnn::onnx_import {

IrTrace::IrTrace(Graph& meta) : meta_(meta) {
  if (!meta_.meta()) throw Error("IrTrace: the importer's graph must only follow shapes (Graph::set_meta)");
  ir_.set_transient(true);  // one IR per plan
}

void IrTrace::bind(TensorRef meta, TensorRef ir) {
  if (meta.id < 0) throw Error("IrTrace: a result without a tensor");
  if (size_t(meta.id) >= ir_of_.size()) ir_of_.resize(size_t(meta.id) + 1, -1);
  ir_of_[size_t(meta.id)] = ir.id;
}

TensorRef IrTrace::to_ir(TensorRef meta) const {
  if (meta.id < 0 || size_t(meta.id) >= ir_of_.size() || ir_of_[size_t(meta.id)] < 0) {
    const std::string name = meta.id >= 0 && size_t(meta.id) < meta_.tensor_count() ? meta_.info(meta).name : "?";
    throw Error(fmt::format("the importer used tensor '{}' (%{}), which is not in the model's IR: a mapper made it "
                            "outside the IR trace",
                            name, meta.id));
  }
  return TensorRef{ir_of_[size_t(meta.id)]};
}

Value IrTrace::args_to_ir(const Value& v) const {
  if (v.is_tensor()) return to_ir(v.tensor());
  if (v.is_list()) {
    ValueList l;
    l.reserve(v.list().size());
    for (const Value& e : v.list()) l.push_back(args_to_ir(e));
    return l;
  }
  return v;
}

TensorRef IrTrace::input(const Shape& shape, DType dtype, const std::string& name) {
  const TensorRef m = meta_.add_tensor(shape, dtype, TensorKind::Input, name);
  ir::SymShape s;
  for (int64_t d : shape) s.emplace_back(d);
  bind(m, ir_.input(name, dtype, std::move(s)));
  return m;
}

Value IrTrace::call(const std::string& op, const ValueList& args) {
  ValueList ir_args;
  ir_args.reserve(args.size());
  for (const Value& a : args) ir_args.push_back(args_to_ir(a));
  const Value r = ops::call(meta_, op, args);
  std::vector<TensorRef> outs;
  if (r.is_tensor()) {
    outs.push_back(r.tensor());
  } else if (r.is_list()) {
    for (const Value& e : r.list()) {
      if (!e.is_tensor()) throw Error(fmt::format("{} returned {}: the IR takes tensors only", op, r.describe()));
      outs.push_back(e.tensor());
    }
  } else {
    throw Error(fmt::format("{} returned {}: the IR takes tensors only", op, r.describe()));
  }
  const std::vector<TensorRef> ir_outs = ir_.call_multi(op, std::move(ir_args), outs.size());
  ir_.nodes().back().origin = meta_.origin();
  // Labelled with the ONNX op type ("node 'name' (Conv, opset 17)" ->
  // "Conv"): the lowering's host time by op groups under it
  // (Session::last_build_phases).
  const std::string& o = meta_.origin();
  const size_t open = o.rfind('(');
  if (open != std::string::npos) {
    const size_t end = o.find_first_of(",)", open);
    if (end != std::string::npos && end > open + 1) ir_.nodes().back().label = o.substr(open + 1, end - open - 1);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    bind(outs[i], ir_outs[i]);
    ir_.set_seen_shape(ir_outs[i], meta_.info(outs[i]).shape);
    ir_.set_seen_dtype(ir_outs[i], meta_.info(outs[i]).dtype);
  }
  return r;
}

TensorRef IrTrace::view(TensorRef t, const Shape& shape) {
  return call("aten.view.default", {t, IntList(shape.begin(), shape.end())}).tensor();
}

TensorRef IrTrace::constant(const Shape& shape, DType dtype, const void* data, const std::string& name) {
  const TensorRef m = meta_.add_constant(shape, dtype, data, name);
  HostTensor h(dtype, shape);
  if (h.nbytes()) std::memcpy(h.data.data(), data, h.nbytes());
  bind(m, ir_.constant(std::move(h), name));
  return m;
}

TensorRef IrTrace::made_constant(const Shape& shape, DType dtype, std::string memo,
                                 std::function<const HostTensor&(HostTensor&)> make, const std::string& name,
                                 const HostTensor* source) {
  const TensorRef m = meta_.add_tensor(shape, dtype, TensorKind::Constant, name);
  // Not owned: the caller keeps the source alive (a Session's initializer).
  std::shared_ptr<const HostTensor> src(std::shared_ptr<const HostTensor>(), source);
  bind(m, ir_.made_constant(dtype, shape, std::move(memo), std::move(make), name, std::move(src)));
  return m;
}

void IrTrace::output(TensorRef meta, const std::string& name) {
  TensorRef v = to_ir(meta);
  if (ir_.value(v).kind != ir::ValueKind::Result) {
    // A plan's outputs are computed; an input or constant returned as it is
    // is returned through a view of it.
    const Shape& s = meta_.info(meta).shape;
    v = ir_.call("aten.view.default", {v, IntList(s.begin(), s.end())});
  }
  ir_.output(v, name);
}

}  // namespace wgnn::onnx_import

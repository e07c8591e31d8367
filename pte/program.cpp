// Reading an ExecuTorch program into the IR (pte/program.h).
#include "pte/program.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu/error.h"
#include "graph/graph.h"
#include "graph/host_tensor.h"
#include "ir/program.h"
#include "pte/aten.h"
#include "pte/generated/program_generated.h"
#include "pte/generated/vulkan_schema_generated.h"

namespace wgnn::pte {

namespace et = executorch_flatbuffer;

bool is_pte(std::string_view head) { return head.size() >= 8 && head.substr(4, 4) == "ET12"; }

namespace {

uint64_t le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t le32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

// Element i of a vector of 8-byte scalars, read without assuming 8-byte
// alignment: the verifier checks a vector's start to 4 bytes only, so a
// changed file may place one at any multiple of 4.
template <class T>
T element(const flatbuffers::Vector<T>* v, size_t i) {
  T x;
  std::memcpy(&x, v->Data() + i * sizeof(T), sizeof(T));
  return x;
}

// A checked span of the file.
struct Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

std::optional<DType> et_dtype(et::ScalarType t) {
  switch (t) {
    case et::ScalarType::BYTE: return DType::U8;
    case et::ScalarType::CHAR: return DType::I8;
    case et::ScalarType::INT: return DType::I32;
    case et::ScalarType::LONG: return DType::I64;
    case et::ScalarType::HALF: return DType::F16;
    case et::ScalarType::FLOAT: return DType::F32;
    case et::ScalarType::BOOL: return DType::Bool;
    default: return std::nullopt;
  }
}

std::optional<DType> vk_dtype(vkgraph::VkDataType t) {
  switch (t) {
    case vkgraph::VkDataType::BOOL: return DType::Bool;
    case vkgraph::VkDataType::UINT8: return DType::U8;
    case vkgraph::VkDataType::INT8: return DType::I8;
    case vkgraph::VkDataType::INT32: return DType::I32;
    case vkgraph::VkDataType::FLOAT16: return DType::F16;
    case vkgraph::VkDataType::FLOAT32: return DType::F32;
    case vkgraph::VkDataType::INT64: return DType::I64;
    default: return std::nullopt;
  }
}

// Out-variant kernels whose functional op is not the one the overload's
// name gives (`X.out` -> `X.default`, `X.Y_out` -> `X.Y`).
const std::map<std::string, std::string>& functional_overloads() {
  static const std::map<std::string, std::string> m = {
      {"aten.add.out", "aten.add.Tensor"},         {"aten.sub.out", "aten.sub.Tensor"},
      {"aten.mul.out", "aten.mul.Tensor"},         {"aten.div.out", "aten.div.Tensor"},
      {"aten.div.out_mode", "aten.div.Tensor_mode"}, {"aten.mean.out", "aten.mean.dim"},
      {"aten.sum.IntList_out", "aten.sum.dim_IntList"}, {"aten.eq.Tensor_out", "aten.eq.Tensor"},
      {"aten.where.self_out", "aten.where.self"},   {"aten.pow.Tensor_Tensor_out", "aten.pow.Tensor_Tensor"},
      {"aten.pow.Tensor_Scalar_out", "aten.pow.Tensor_Scalar"}, {"aten.clamp.out", "aten.clamp.default"},
      {"aten.minimum.out", "aten.minimum.default"}, {"aten.maximum.out", "aten.maximum.default"},
      {"aten.bitwise_and.Tensor_out", "aten.bitwise_and.Tensor"},
      {"aten.bitwise_or.Tensor_out", "aten.bitwise_or.Tensor"},
      {"aten.max_pool2d_with_indices.out", "aten.max_pool2d_with_indices.default"},
      {"aten.native_layer_norm.out", "aten.native_layer_norm.default"},
      {"aten._native_batch_norm_legit_no_training.out", "aten._native_batch_norm_legit_no_training.default"},
      {"aten.native_group_norm.out", "aten.native_group_norm.default"},
      {"aten.split_with_sizes_copy.out", "aten.split_with_sizes_copy.default"},
      {"aten.split_copy.Tensor_out", "aten.split_copy.Tensor"},
      {"aten.index.Tensor_out", "aten.index.Tensor"},
      {"aten.arange.start_out", "aten.arange.start_step"},
  };
  return m;
}

// "aten::mean" + "out" -> "aten.mean.dim".
std::string functional_name(const std::string& name, const std::string& overload) {
  std::string n = name;
  if (auto p = n.find("::"); p != std::string::npos) n.replace(p, 2, ".");
  const std::string key = n + "." + overload;
  if (auto it = functional_overloads().find(key); it != functional_overloads().end()) return it->second;
  if (overload == "out") {
    for (const char* o : {".default", ".Tensor"}) {
      if (find_translation(n + o)) return n + o;
    }
    return n + ".default";
  }
  const std::string suffix = "_out";
  if (overload.size() > suffix.size() && overload.compare(overload.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return n + "." + overload.substr(0, overload.size() - suffix.size());
  }
  return key;
}

// The delegate's ops on sizes (SymInt values): sym_size.int(self, dim)
// and Python's int arithmetic on them, as its serializer names them.
std::optional<std::string> delegate_size_op(const std::string& op) {
  if (op == "sym_size.int" || op == "aten.sym_size.int") return "sym_size";
  for (const char* o : {"add", "sub", "mul", "floordiv", "mod"}) {
    if (op == o || op == std::string("operator.") + o || op == std::string("_operator.") + o) return std::string(o);
  }
  return std::nullopt;
}

bool plan_size_kernel(const std::string& name, const std::string& overload) {
  if (name == "aten::sym_size") return overload == "int";
  for (const char* o : {"add", "sub", "mul", "floordiv", "mod"}) {
    if (name == std::string("executorch_prim::") + o) return true;
  }
  return false;
}

class Importer {
 public:
  Importer(std::string_view file, std::string name) : file_(file), name_(std::move(name)) {}
  // At concrete input sizes (a dynamic program, pte/program.h): each
  // result's shape follows from its op, lowered as it is read onto a graph
  // that only follows shapes.
  Importer(std::string_view file, std::string name, const std::vector<Shape>& sizes, gpu::Context& ctx)
      : file_(file), name_(std::move(name)), sizes_(&sizes) {
    shapes_ = std::make_unique<wgnn::Graph>(ctx);
    shapes_->set_meta(true);
    lowerer_ = std::make_unique<ir::Lowerer>(ir_, *shapes_);
  }

  Model run(const std::string& method);

 private:
  [[noreturn]] void bad(const std::string& what) const {
    throw Error(fmt::format("'{}' is not a valid ExecuTorch program: {}", name_, what));
  }
  Bytes span(uint64_t offset, uint64_t size, const std::string& what) const {
    if (offset > file_.size() || size > file_.size() - offset) {
      bad(fmt::format("{} ({} bytes at offset {}) lies outside the file ({} bytes)", what, size, offset, file_.size()));
    }
    return {reinterpret_cast<const uint8_t*>(file_.data()) + offset, size};
  }
  Bytes segment(uint32_t index, const std::string& what) const;
  Bytes named_data(const std::string& key, const std::string& what) const;

  Meta tensor_meta(const et::Tensor& t, const std::string& what) const;
  Value evalue(int index);
  TensorRef tensor_of(int index, const std::string& what);
  void kernel_call(const et::KernelCall& k, int at);
  void delegate_call(const et::DelegateCall& d, int at);
  void record(const std::vector<TensorRef>& results, const std::vector<Meta>& outs, const std::string& where);
  // One op call as IR nodes: its translation, with the results' shapes
  // followed at concrete sizes. `sized`: an argument is a size computed
  // from a dynamic shape (a SymInt).
  std::vector<TensorRef> translate(const std::string& fn, ValueList in, std::vector<Meta> outs, bool sized,
                                   const std::string& where);
  // A size that ExecuTorch computes while it runs (aten::sym_size.int and
  // the executorch_prim arithmetic on sizes): computed here; false for
  // other kernels.
  bool size_kernel(const std::string& name, const std::string& overload, const std::vector<int>& args,
                   const std::string& where);
  // A mutable buffer (a KV cache): an IR input holding its value before the
  // run, its initial value from the program's mutable data or zeros.
  TensorRef state(int index, const et::Tensor& t, const Meta& m, const std::string& what);
  // aten::copy_(self, src, non_blocking): self takes src's values (a
  // mutable buffer's write-back, at the method's end).
  void copy_into(const std::vector<int>& args, const std::string& where);
  // A tensor's shape as the program declares it (its bound) and as it is.
  void note(TensorRef t, const Meta& declared, const Shape& shape);
  const Shape& shape_of(TensorRef t) const { return meta_.at(t.id).shape; }
  void check_ops();

  std::string_view file_;
  std::string name_;
  const et::Program* program_ = nullptr;
  const et::ExecutionPlan* plan_ = nullptr;
  uint64_t segment_base_ = 0;
  ir::Graph ir_;
  std::map<int, Meta> meta_;                 // IR tensor id -> declared dtype and shape
  std::vector<std::optional<Value>> values_;  // the plan's values, as IR values once known
  std::vector<bool> visiting_;                // evalue(): the values being read now
  Model model_;
  // At concrete sizes (sizes_ set): the input shapes, the graph that
  // follows shapes and the IR lowered onto it, each tensor's declared
  // shape where meta_ holds another, and the plan's values that are sizes
  // computed at run time.
  const std::vector<Shape>* sizes_ = nullptr;
  std::unique_ptr<wgnn::Graph> shapes_;
  std::unique_ptr<ir::Lowerer> lowerer_;
  std::map<int, Shape> declared_;
  std::set<int> sized_values_;
  std::set<int> copied_into_;            // values an aten::copy_ writes (mutable buffers)
  std::map<int, size_t> state_of_;       // plan value -> model_.states index
  std::vector<TensorRef> state_now_;     // each state's value so far (model_.states order)
  std::map<int, size_t> delegate_state_; // IR input of a delegate's state -> model_.states index
  bool dynamic_ = false;  // a tensor of the plan has a dynamic shape
};

Bytes Importer::segment(uint32_t index, const std::string& what) const {
  const auto* segs = program_->segments();
  if (!segs || index >= segs->size()) bad(fmt::format("{} names segment {}, which does not exist", what, index));
  const et::DataSegment* s = segs->Get(index);
  if (segment_base_ == 0) bad(fmt::format("{} is in a segment, but the file has no segment data", what));
  return span(segment_base_ + s->offset(), s->size(), fmt::format("segment {} ({})", index, what));
}

Bytes Importer::named_data(const std::string& key, const std::string& what) const {
  if (const auto* nd = program_->named_data()) {
    for (const auto* d : *nd) {
      if (d->key() && d->key()->str() == key) return segment(d->segment_index(), what);
    }
  }
  throw Unsupported(fmt::format("'{}': {} names data '{}', which the program does not hold (weights kept in a "
                                "separate .ptd file are not supported)",
                                name_, what, key));
}

Meta Importer::tensor_meta(const et::Tensor& t, const std::string& what) const {
  const auto dt = et_dtype(t.scalar_type());
  if (!dt) {
    throw Unsupported(fmt::format("'{}': {} has dtype {} (ExecuTorch ScalarType {}), which wgnn does not have", name_,
                                  what, et::EnumNameScalarType(t.scalar_type()), int(t.scalar_type())));
  }
  if (t.shape_dynamism() == et::TensorShapeDynamism::DYNAMIC_UNBOUND) {
    throw Unsupported(fmt::format("'{}': {} has a dynamic shape without a bound; wgnn runs programs exported with "
                                  "bounded dynamic shapes (torch.export.Dim with a max)",
                                  name_, what));
  }
  Meta m{*dt, {}};
  if (t.sizes()) {
    for (int32_t d : *t.sizes()) {
      if (d < 0) bad(fmt::format("{} has a negative size", what));
      m.shape.push_back(d);
    }
  }
  if (t.dim_order() && t.sizes() && t.dim_order()->size() != t.sizes()->size()) {
    bad(fmt::format("{} has {} sizes and a dim order of {}", what, t.sizes()->size(), t.dim_order()->size()));
  }
  return m;
}

// A plan value as an IR value: scalars and lists by value, tensors as the
// IR value computing them (constants made here, on first use).
Value Importer::evalue(int index) {
  if (index < 0 || size_t(index) >= values_.size()) bad(fmt::format("value index {} is out of range", index));
  if (values_[size_t(index)]) return *values_[size_t(index)];
  // A list that (through others) holds itself.
  if (visiting_.size() != values_.size()) visiting_.assign(values_.size(), false);
  if (visiting_[size_t(index)]) bad(fmt::format("value {} contains itself", index));
  visiting_[size_t(index)] = true;
  struct Done {
    std::vector<bool>& v;
    size_t i;
    ~Done() { v[i] = false; }
  } done{visiting_, size_t(index)};
  const et::EValue* ev = plan_->values()->Get(uint32_t(index));
  const std::string what = fmt::format("value {}", index);
  // A union with a type and no value verifies; it is read nowhere below.
  if (ev->val_type() != et::KernelTypes::NONE && !ev->val()) bad(fmt::format("{} has a type and no value", what));
  Value v;
  switch (ev->val_type()) {
    case et::KernelTypes::Null:
    case et::KernelTypes::NONE: v = Value(None{}); break;
    case et::KernelTypes::Int: v = Value(int64_t(ev->val_as_Int()->int_val())); break;
    case et::KernelTypes::Bool: v = Value(bool(ev->val_as_Bool()->bool_val())); break;
    case et::KernelTypes::Double: v = Value(ev->val_as_Double()->double_val()); break;
    case et::KernelTypes::String:
      v = Value(ev->val_as_String()->string_val() ? ev->val_as_String()->string_val()->str() : std::string());
      break;
    case et::KernelTypes::IntList: {
      // Items are indices of Int values.
      IntList l;
      if (const auto* items = ev->val_as_IntList()->items()) {
        for (size_t j = 0; j < items->size(); ++j) {
          const int64_t i = element(items, j);
          if (i < 0 || uint64_t(i) >= values_.size()) bad(fmt::format("{}: an IntList item names value {}", what, i));
          const Value e = evalue(int(i));
          if (!e.is_int()) bad(fmt::format("{}: an IntList item is {}", what, e.describe()));
          l.push_back(std::get<int64_t>(e.v));
        }
      }
      v = Value(std::move(l));
      break;
    }
    case et::KernelTypes::DoubleList: {
      ValueList l;
      if (const auto* items = ev->val_as_DoubleList()->items()) {
        for (size_t j = 0; j < items->size(); ++j) l.emplace_back(element(items, j));
      }
      v = Value(std::move(l));
      break;
    }
    case et::KernelTypes::BoolList: {
      ValueList l;
      if (const auto* items = ev->val_as_BoolList()->items()) {
        for (bool b : *items) l.emplace_back(b);
      }
      v = Value(std::move(l));
      break;
    }
    case et::KernelTypes::TensorList:
    case et::KernelTypes::OptionalTensorList: {
      const auto* items = ev->val_type() == et::KernelTypes::TensorList ? ev->val_as_TensorList()->items()
                                                                         : ev->val_as_OptionalTensorList()->items();
      ValueList l;
      if (items) {
        for (int32_t i : *items) {
          if (i < 0) {
            l.emplace_back(None{});
            continue;
          }
          l.emplace_back(evalue(i));
        }
      }
      v = Value(std::move(l));
      break;
    }
    case et::KernelTypes::Tensor: {
      const et::Tensor& t = *ev->val_as_Tensor();
      const Meta m = tensor_meta(t, what);
      if (t.allocation_info() && copied_into_.count(index)) {
        v = Value(state(index, t, m, what));
        break;
      }
      if (t.data_buffer_idx() == 0) {
        bad(fmt::format("{} (a tensor) is read before any instruction computes it", what));
      }
      if (t.allocation_info()) {
        bad(fmt::format("{} has an initial value and memory of its own, but no instruction writes it back (a "
                        "mutable buffer without its copy_)",
                        what));
      }
      if (t.extra_tensor_info() && t.extra_tensor_info()->location() == et::TensorDataLocation::EXTERNAL) {
        throw Unsupported(fmt::format("'{}': {} is kept in a separate .ptd file; not supported", name_, what));
      }
      const size_t nbytes = checked_nbytes(m.shape, dtype_size(m.dtype), what);
      Bytes data;
      const uint32_t idx = t.data_buffer_idx();
      if (program_->constant_buffer() && program_->constant_buffer()->size() > 0) {
        if (idx >= program_->constant_buffer()->size()) bad(fmt::format("{} names constant buffer {}", what, idx));
        const auto* storage = program_->constant_buffer()->Get(idx)->storage();
        if (!storage) bad(fmt::format("{}: constant buffer {} is empty", what, idx));
        data = {storage->data(), storage->size()};
      } else {
        const et::SubsegmentOffsets* cs = program_->constant_segment();
        if (!cs || !cs->offsets() || idx >= cs->offsets()->size()) {
          bad(fmt::format("{} names constant {}, which the constant segment does not list", what, idx));
        }
        const Bytes seg = segment(cs->segment_index(), "the constant segment");
        const uint64_t off = element(cs->offsets(), idx);
        if (off > seg.size || nbytes > seg.size - off) {
          bad(fmt::format("{} ({} bytes at offset {}) lies outside the constant segment ({} bytes)", what, nbytes, off,
                          seg.size));
        }
        data = {seg.data + off, seg.size - off};
      }
      if (data.size < nbytes) bad(fmt::format("{} needs {} bytes, its buffer holds {}", what, nbytes, data.size));
      const TensorRef r = ir_.constant(HostTensor(m.dtype, m.shape, data.data), fmt::format("constant_{}", index));
      meta_[r.id] = m;
      v = Value(r);
      break;
    }
  }
  values_[size_t(index)] = v;
  return v;
}

TensorRef Importer::tensor_of(int index, const std::string& what) {
  const Value v = evalue(index);
  if (!v.is_tensor()) bad(fmt::format("{} must be a tensor, value {} is {}", what, index, v.describe()));
  return v.tensor();
}

void Importer::record(const std::vector<TensorRef>& results, const std::vector<Meta>& outs, const std::string& where) {
  if (results.size() != outs.size()) {
    throw Error(fmt::format("{}: made {} results, the program declares {}", where, results.size(), outs.size()));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    auto it = meta_.find(results[i].id);
    if (it == meta_.end()) {
      meta_[results[i].id] = outs[i];
      ir_.set_seen_shape(results[i], outs[i].shape);
      ir_.set_seen_dtype(results[i], outs[i].dtype);
    }
  }
}

TensorRef Importer::state(int index, const et::Tensor& t, const Meta& m, const std::string& what) {
  if (t.shape_dynamism() != et::TensorShapeDynamism::STATIC) {
    throw Unsupported(fmt::format("'{}': {} is a mutable buffer with a dynamic shape; not supported", name_, what));
  }
  State st;
  st.input = fmt::format("state_{}", index);
  st.output = st.input + ".next";
  st.initial = HostTensor(m.dtype, m.shape);
  if (t.data_buffer_idx() > 0) {
    // The initial value, in the program's mutable data segment.
    const auto* mds = program_->mutable_data_segments();
    const uint64_t which = t.extra_tensor_info() ? t.extra_tensor_info()->mutable_data_segments_idx() : 0;
    if (!mds || which >= mds->size() || !mds->Get(uint32_t(which))->offsets() ||
        t.data_buffer_idx() >= mds->Get(uint32_t(which))->offsets()->size()) {
      bad(fmt::format("{}: its initial value ({}) is not in the mutable data segments", what, t.data_buffer_idx()));
    }
    const et::SubsegmentOffsets* so = mds->Get(uint32_t(which));
    const Bytes seg = segment(so->segment_index(), "the mutable data segment");
    const uint64_t off = element(so->offsets(), t.data_buffer_idx());
    const size_t nbytes = st.initial.nbytes();
    if (off > seg.size || nbytes > seg.size - off) bad(fmt::format("{}: its initial value lies outside its segment", what));
    if (nbytes) std::memcpy(st.initial.data.data(), seg.data + off, nbytes);
  }
  const TensorRef r = ir_.input(st.input, m.dtype, std::vector<ir::Dim>(m.shape.begin(), m.shape.end()));
  note(r, m, m.shape);
  if (lowerer_) lowerer_->input(r, m.shape);
  state_of_[index] = model_.states.size();
  model_.states.push_back(std::move(st));
  state_now_.push_back(r);
  return r;
}

void Importer::copy_into(const std::vector<int>& args, const std::string& where) {
  if (args.size() < 2) bad(fmt::format("{}: {} arguments", where, args.size()));
  const int self = args[0];
  const TensorRef dst = tensor_of(self, where + " self");
  const TensorRef src = tensor_of(args[1], where + " src");
  const Meta dm = meta_.at(dst.id);
  TensorRef y = ir_.call("aten.expand.default", {src, IntList(dm.shape.begin(), dm.shape.end())});
  if (meta_.at(src.id).dtype != dm.dtype) y = ir_.call("aten._to_copy.default", {y, scalar_type_code(dm.dtype)});
  if (lowerer_) lowerer_->lower_new();
  note(y, dm, dm.shape);
  ir_.set_seen_shape(y, dm.shape);
  values_[size_t(self)] = Value(y);
  if (auto it = state_of_.find(self); it != state_of_.end()) state_now_[it->second] = y;
  // The copy_ returns self: its out argument, the same value.
  if (args.size() >= 4 && args.back() != self && args.back() >= 0 && size_t(args.back()) < values_.size()) {
    values_[size_t(args.back())] = Value(y);
  }
  ++model_.kernel_calls;
}

void Importer::note(TensorRef t, const Meta& declared, const Shape& shape) {
  meta_[t.id] = {declared.dtype, shape};
  if (shape != declared.shape) declared_[t.id] = declared.shape;
}

std::vector<TensorRef> Importer::translate(const std::string& fn, ValueList in, std::vector<Meta> outs, bool sized,
                                           const std::string& where) {
  const Translate tr = find_translation(fn);
  if (!tr) throw Unsupported(fmt::format("{}: no mapping for {}", where, fn));
  if (!sizes_) {
    OpCall c{ir_, fn, std::move(in), outs, meta_, where};
    std::vector<TensorRef> results = tr(c);
    const std::vector<size_t> written = mutated_args(fn);
    if (results.size() < outs.size() + written.size()) {
      throw Error(fmt::format("{}: made {} results, the program declares {}", where, results.size(), outs.size()));
    }
    for (size_t i = 0; i < written.size(); ++i) {
      const TensorRef arg = c.tensor(written[i]);
      meta_[results[outs.size() + i].id] = meta_.at(arg.id);
    }
    record(std::vector<TensorRef>(results.begin(), results.begin() + long(outs.size())), outs, where);
    return results;
  }
  // At concrete sizes. The declared shapes are the results' where every
  // tensor argument has its declared shape and no argument is a size
  // computed at run time; otherwise the op's rule gives them (views and
  // factories), or they are not known before the translation runs, and
  // its nodes, lowered, give them.
  bool declared = !sized;
  const std::function<void(const Value&)> check = [&](const Value& v) {
    if (v.is_tensor()) declared = declared && !declared_.count(v.tensor().id);
    if (v.is_list()) {
      for (const Value& e : v.list()) check(e);
    }
  };
  for (const Value& v : in) check(v);
  const std::vector<Meta> bounds = outs;
  OpCall c{ir_, fn, std::move(in), outs, meta_, where};
  if (!declared) {
    if (auto rule = result_shapes(c)) {
      if (rule->size() != c.outs.size()) {
        throw Unsupported(fmt::format("{}: makes {} results at these input sizes; the program declares {}", where,
                                      rule->size(), c.outs.size()));
      }
      for (size_t i = 0; i < rule->size(); ++i) c.outs[i].shape = (*rule)[i];
    } else {
      c.out_shapes_known = false;
    }
  }
  const std::vector<TensorRef> results = tr(c);
  const std::vector<size_t> written = mutated_args(fn);
  if (results.size() < bounds.size() + written.size()) {
    throw Error(fmt::format("{}: made {} results, the program declares {}", where, results.size(), bounds.size()));
  }
  lowerer_->lower_new();
  for (size_t i = bounds.size(); i < bounds.size() + written.size(); ++i) {
    // An argument written in place: its new value has its shape.
    const TensorRef arg = c.tensor(written[i - bounds.size()]);
    note(results[i], {meta_.at(arg.id).dtype, declared_.count(arg.id) ? declared_.at(arg.id) : meta_.at(arg.id).shape},
         meta_.at(arg.id).shape);
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (meta_.count(results[i].id)) continue;  // an argument returned as it is
    const Shape got = shapes_->info(lowerer_->tensor(results[i])).shape;
    if (c.out_shapes_known && got != c.outs[i].shape) {
      throw Error(fmt::format("{}: result {} has shape {}; expected {}", where, i, shape_str(got),
                              shape_str(c.outs[i].shape)));
    }
    for (size_t d = 0; d < got.size() && got.size() == bounds[i].shape.size(); ++d) {
      if (got[d] > bounds[i].shape[d]) {
        throw Error(fmt::format("{}: result {} has shape {}, beyond the bound {} the program declares", where, i,
                                shape_str(got), shape_str(bounds[i].shape)));
      }
    }
    note(results[i], bounds[i], got);
    ir_.set_seen_shape(results[i], got);
    ir_.set_seen_dtype(results[i], bounds[i].dtype);
  }
  return results;
}

bool Importer::size_kernel(const std::string& name, const std::string& overload, const std::vector<int>& args,
                           const std::string& where) {
  if (!plan_size_kernel(name, overload)) return false;
  const bool sym_size = name == "aten::sym_size";
  const auto int_of = [&](int id) -> int64_t {
    const Value v = evalue(id);
    if (!v.is_int()) bad(fmt::format("{}: value {} is {}, not an Int", where, id, v.describe()));
    return std::get<int64_t>(v.v);
  };
  if (args.empty()) bad(fmt::format("{}: no arguments", where));
  const int out = args.back();
  if (out < 0 || size_t(out) >= values_.size() || !plan_->values()->Get(uint32_t(out))->val_as_Int()) {
    bad(fmt::format("{}: the result is not an Int value", where));
  }
  int64_t r = 0;
  if (sym_size) {
    if (args.size() != 3) bad(fmt::format("{}: {} arguments (expected self, dim, out)", where, args.size()));
    const Shape& s = shape_of(tensor_of(args[0], where + " self"));
    const int64_t rank = int64_t(s.size());
    int64_t d = int_of(args[1]);
    if (d < -rank || d >= rank) throw Error(fmt::format("{}: dim {} is out of range for shape {}", where, d, shape_str(s)));
    r = s[size_t(d < 0 ? d + rank : d)];
  } else {
    // executorch_prim::OP.Scalar(a, b, out) on ints.
    const std::string op = name.substr(std::string("executorch_prim::").size());
    if (args.size() != 3) bad(fmt::format("{}: {} arguments (expected a, b, out)", where, args.size()));
    const int64_t a = int_of(args[0]), b = int_of(args[1]);
    if (op == "add") r = a + b;
    else if (op == "sub") r = a - b;
    else if (op == "mul") r = a * b;
    else {
      if (b == 0) throw Error(fmt::format("{}: division by zero", where));
      const int64_t q = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));  // Python's floor division
      r = op == "floordiv" ? q : a - q * b;
    }
  }
  values_[size_t(out)] = Value(r);
  sized_values_.insert(out);
  return true;
}

// A portable kernel (`aten::mean.out`): its functional op, its arguments
// without the out arguments (which the call lists twice at its end: as
// arguments and as the returned values).
void Importer::kernel_call(const et::KernelCall& k, int at) {
  const auto* ops = plan_->operators();
  if (!ops || k.op_index() < 0 || uint32_t(k.op_index()) >= ops->size()) bad(fmt::format("instruction {}: bad operator index", at));
  const et::Operator* op = ops->Get(uint32_t(k.op_index()));
  const std::string name = op->name() ? op->name()->str() : "";
  const std::string overload = op->overload() ? op->overload()->str() : "";
  const std::string fn = functional_name(name, overload);
  const std::string where = fmt::format("'{}', instruction {} ({}.{})", name_, at, name, overload);
  std::vector<int> args;
  if (k.args()) args.assign(k.args()->begin(), k.args()->end());
  if (size_kernel(name, overload, args, where)) return;
  if (name == "aten::copy_") {
    copy_into(args, where);
    return;
  }
  // The returned value(s) follow the out arguments: one out repeated, or a
  // TensorList of the outs (a tuple: native_layer_norm.out), or one
  // TensorList out repeated (split_copy.Tensor_out).
  if (args.empty()) bad(fmt::format("{}: no arguments", where));
  const auto list_items = [&](int id) -> const flatbuffers::Vector<int32_t>* {
    if (id < 0 || size_t(id) >= values_.size()) bad(fmt::format("{}: value index {} is out of range", where, id));
    const et::EValue* ev = plan_->values()->Get(uint32_t(id));
    const auto* list = ev->val_as_TensorList();
    return list ? list->items() : nullptr;
  };
  size_t n_args = 0;  // the functional arguments
  std::vector<int> out_ids;
  const int last = args.back();
  if (args.size() >= 2 && args[args.size() - 2] == last) {
    n_args = args.size() - 2;
    if (const auto* items = list_items(last)) out_ids.assign(items->begin(), items->end());
    else out_ids.push_back(last);
  } else if (const auto* items = list_items(last); items && items->size() + 1 <= args.size() &&
             std::equal(items->begin(), items->end(), args.end() - 1 - long(items->size()))) {
    n_args = args.size() - 1 - items->size();
    out_ids.assign(items->begin(), items->end());
  } else {
    bad(fmt::format("{}: the out arguments are not followed by the returned value", where));
  }
  std::vector<Meta> outs;
  for (int id : out_ids) {
    if (id < 0 || size_t(id) >= values_.size()) bad(fmt::format("{}: value index {} is out of range", where, id));
    const et::EValue* ev = plan_->values()->Get(uint32_t(id));
    if (!ev->val_as_Tensor()) bad(fmt::format("{}: result value {} is not a tensor", where, id));
    outs.push_back(tensor_meta(*ev->val_as_Tensor(), fmt::format("value {}", id)));
  }
  ValueList in;
  bool sized = false;
  for (size_t i = 0; i < n_args; ++i) {
    in.push_back(evalue(args[i]));
    sized = sized || sized_values_.count(args[i]);
    // A list of sizes: its items are values of their own.
    if (const auto* l = plan_->values()->Get(uint32_t(args[i]))->val_as_IntList(); l && l->items()) {
      for (size_t j = 0; j < l->items()->size(); ++j) sized = sized || sized_values_.count(int(element(l->items(), j)));
    }
  }
  // The out-variant schema lists the functional arguments first, then the
  // out arguments: the functional op's are the first ones.
  const std::vector<TensorRef> results = translate(fn, std::move(in), outs, sized, where + " as " + fn);
  for (size_t i = 0; i < out_ids.size(); ++i) values_[size_t(out_ids[i])] = Value(results[i]);
  ++model_.kernel_calls;
}

// The Vulkan/WebGPU delegate's payload: "VH00" header, VkGraph, constants.
void Importer::delegate_call(const et::DelegateCall& d, int at) {
  const auto* dels = plan_->delegates();
  if (!dels || d.delegate_index() < 0 || uint32_t(d.delegate_index()) >= dels->size()) {
    bad(fmt::format("instruction {}: bad delegate index", at));
  }
  const et::BackendDelegate* del = dels->Get(uint32_t(d.delegate_index()));
  const std::string id = del->id() ? del->id()->str() : "";
  const std::string where = fmt::format("'{}', delegate {} ({})", name_, d.delegate_index(), id);
  if (id != "VulkanBackend" && id != "WebGPUBackend") {
    throw Unsupported(fmt::format("{}: wgnn reads the Vulkan/WebGPU delegate only (lower with WebGPUPartitioner or "
                                  "VulkanPartitioner)",
                                  where));
  }
  const et::BackendDelegateDataReference* ref = del->processed();
  if (!ref) bad(fmt::format("{} has no payload", where));
  Bytes payload;
  if (ref->location() == et::DataLocation::INLINE) {
    const auto* inl = program_->backend_delegate_data();
    if (!inl || ref->index() >= inl->size() || !inl->Get(ref->index())->data()) {
      bad(fmt::format("{}: inline payload {} does not exist", where, ref->index()));
    }
    payload = {inl->Get(ref->index())->data()->data(), inl->Get(ref->index())->data()->size()};
  } else {
    payload = segment(ref->index(), where);
  }
  // The header: 4 bytes, "VH00", u16 length (30), u32 flatbuffer offset and
  // size, u32 bytes offset, u64 bytes size.
  if (payload.size < 30 || std::memcmp(payload.data + 4, "VH00", 4) != 0) bad(fmt::format("{}: no VH00 header", where));
  const uint16_t hlen = uint16_t(payload.data[8] | payload.data[9] << 8);
  if (hlen != 30) bad(fmt::format("{}: header length {} (expected 30)", where, hlen));
  const uint64_t fb_off = le32(payload.data + 10), fb_size = le32(payload.data + 14);
  const uint64_t raw_off = le32(payload.data + 18), raw_size = le64(payload.data + 22);
  if (fb_off > payload.size || fb_size > payload.size - fb_off || raw_off > payload.size ||
      raw_size > payload.size - raw_off) {
    bad(fmt::format("{}: the header's regions lie outside the payload ({} bytes)", where, payload.size));
  }
  // The graph in 8-byte-aligned memory of its own: the payload may start
  // anywhere in a changed file, and flatbuffers reads 8-byte fields in place.
  std::vector<uint64_t> graph_copy((fb_size + 7) / 8);
  if (fb_size) std::memcpy(graph_copy.data(), payload.data + fb_off, fb_size);
  const uint8_t* fb = reinterpret_cast<const uint8_t*>(graph_copy.data());
  flatbuffers::Verifier verifier(fb, fb_size);
  if (!verifier.VerifyBuffer<vkgraph::VkGraph>(nullptr)) bad(fmt::format("{}: the graph flatbuffer does not verify", where));
  const vkgraph::VkGraph* g = vkgraph::GetVkGraph(fb);
  const Bytes raw{payload.data + raw_off, raw_size};
  const auto* vals = g->values();
  if (!vals) bad(fmt::format("{}: the graph has no values", where));
  const size_t n_in = g->input_ids() ? g->input_ids()->size() : 0;
  const size_t n_out = g->output_ids() ? g->output_ids()->size() : 0;
  const size_t n_args = d.args() ? d.args()->size() : 0;
  if (n_args != n_in + n_out) {
    bad(fmt::format("{}: the call passes {} values, the graph takes {} inputs and {} outputs", where, n_args, n_in,
                    n_out));
  }
  std::vector<std::optional<Value>> vv(vals->size());
  std::vector<bool> vsized(vals->size(), false);  // a SymInt, or a list holding one
  // The constants an op writes in place (a KV cache the delegate keeps):
  // state, not constants.
  std::set<uint32_t> written;
  for (uint32_t k = 0; g->chain() && k < g->chain()->size(); ++k) {
    const vkgraph::OperatorCall* call = g->chain()->Get(k);
    if (!call->name() || !call->args()) continue;
    for (size_t a : mutated_args(call->name()->str())) {
      if (a < call->args()->size()) written.insert(uint32_t(call->args()->Get(uint32_t(a))));
    }
  }
  // Sizes read from a tensor's values on the GPU (et_vk.select_as_symint:
  // a KV cache's start position): an int tensor of one value plus an
  // offset known here. Only the ops below that take them take them.
  struct DeviceInt {
    TensorRef base;
    int64_t offset = 0;
  };
  std::map<uint32_t, DeviceInt> device_ints;
  // The positions base + offset, ..., base + offset + n - 1: an int tensor [n].
  std::map<std::tuple<int, int64_t, int64_t>, TensorRef> positions_made;  // one per (base, offset, n)
  std::map<int, TensorRef> masks_made;  // sdpa_with_kv_cache's mask, by its positions
  const auto positions = [&](const DeviceInt& at, int64_t n) {
    if (auto it = positions_made.find({at.base.id, at.offset, n}); it != positions_made.end()) return it->second;
    const DType dt = meta_.at(at.base.id).dtype;
    HostTensor steps(dt, {n});
    for (int64_t j = 0; j < n; ++j) {
      if (dt == DType::I64) steps.as<int64_t>()[j] = at.offset + j;
      else steps.as<int32_t>()[j] = int32_t(at.offset + j);
    }
    const TensorRef r = ir_.call("aten.add.Tensor", {at.base, ir_.constant(std::move(steps))});
    note(r, {dt, {n}}, {n});
    if (lowerer_) lowerer_->lower_new();
    positions_made[{at.base.id, at.offset, n}] = r;
    return r;
  };
  const auto vmeta = [&](uint32_t i) -> Meta {
    const vkgraph::VkTensor* t = vals->Get(i)->value_as_VkTensor();
    if (!t) bad(fmt::format("{}: value {} is not a tensor", where, i));
    const auto dt = vk_dtype(t->datatype());
    if (!dt) {
      throw Unsupported(fmt::format("{}: value {} has dtype {}, which wgnn does not have", where, i,
                                    vkgraph::EnumNameVkDataType(t->datatype())));
    }
    Meta m{*dt, {}};
    if (t->dims()) {
      for (uint32_t s : *t->dims()) m.shape.push_back(int64_t(s));
    }
    return m;
  };
  // Inputs: the plan's values the call passes.
  for (size_t i = 0; i < n_in; ++i) {
    const uint32_t id = g->input_ids()->Get(uint32_t(i));
    if (id >= vals->size()) bad(fmt::format("{}: input {} is value {}, out of range", where, i, id));
    if (vals->Get(id)->value_type() == vkgraph::GraphTypes::SymInt ||
        vals->Get(id)->value_type() == vkgraph::GraphTypes::Int) {
      // A size the method computed (a SymInt the program passes in).
      const int pid = d.args()->Get(uint32_t(i));
      const Value v = evalue(pid);
      if (!v.is_int()) bad(fmt::format("{}: input {} (a size) is {}", where, i, v.describe()));
      vv[id] = v;
      vsized[id] = sized_values_.count(pid) > 0;
      continue;
    }
    if (!vals->Get(id)->value_as_VkTensor()) bad(fmt::format("{}: input {} is not a tensor", where, i));
    TensorRef t = tensor_of(d.args()->Get(uint32_t(i)), fmt::format("{} input {}", where, i));
    const Meta vm = vmeta(id);
    const Shape& program_shape = declared_.count(t.id) ? declared_.at(t.id) : meta_.at(t.id).shape;
    if (program_shape != vm.shape) {
      bad(fmt::format("{}: input {} has shape {} in the program and {} in the delegate", where, i,
                      shape_str(program_shape), shape_str(vm.shape)));
    }
    if (meta_.at(t.id).dtype != vm.dtype) {
      // The delegate's own dtype (int64 as int32, float64 as float32): its
      // runtime converts when it stages the input.
      const Shape shape = shape_of(t);
      t = ir_.call("aten._to_copy.default", {t, scalar_type_code(vm.dtype)});
      note(t, vm, shape);
      if (lowerer_) lowerer_->lower_new();
    }
    vv[id] = Value(t);
  }
  std::vector<bool> visiting(vals->size(), false);
  std::function<Value(uint32_t)> value = [&](uint32_t i) -> Value {
    if (i >= vals->size()) bad(fmt::format("{}: value index {} is out of range", where, i));
    if (vv[i]) return *vv[i];
    if (visiting[i]) bad(fmt::format("{}: value {} contains itself", where, i));
    visiting[i] = true;
    const vkgraph::VkValue* v = vals->Get(i);
    if (v->value_type() != vkgraph::GraphTypes::NONE && !v->value()) {
      bad(fmt::format("{}: value {} has a type and no value", where, i));
    }
    Value out;
    switch (v->value_type()) {
      case vkgraph::GraphTypes::NONE:
      case vkgraph::GraphTypes::Null: out = Value(None{}); break;
      case vkgraph::GraphTypes::Int: out = Value(int64_t(v->value_as_Int()->int_val())); break;
      case vkgraph::GraphTypes::Double: {
        // The serializer keeps one value per distinct scalar, and Python
        // takes 0 and 0.0 (1 and 1.0) as one key: an Int argument may name
        // a Double of the same value. An integral Double is read as an Int;
        // wgnn's ops take an Int wherever they take a Double.
        const double x = v->value_as_Double()->double_val();
        if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9.0e15) out = Value(int64_t(x));
        else out = Value(x);
        break;
      }
      case vkgraph::GraphTypes::Bool: out = Value(bool(v->value_as_Bool()->bool_val())); break;
      case vkgraph::GraphTypes::String:
        out = Value(v->value_as_String()->string_val() ? v->value_as_String()->string_val()->str() : std::string());
        break;
      case vkgraph::GraphTypes::IntList: {
        IntList l;
        if (const auto* items = v->value_as_IntList()->items()) {
          for (size_t j = 0; j < items->size(); ++j) l.push_back(element(items, j));
        }
        out = Value(std::move(l));
        break;
      }
      case vkgraph::GraphTypes::DoubleList: {
        ValueList l;
        if (const auto* items = v->value_as_DoubleList()->items()) {
          for (size_t j = 0; j < items->size(); ++j) l.emplace_back(element(items, j));
        }
        out = Value(std::move(l));
        break;
      }
      case vkgraph::GraphTypes::BoolList: {
        ValueList l;
        if (const auto* items = v->value_as_BoolList()->items()) {
          for (bool x : *items) l.emplace_back(x);
        }
        out = Value(std::move(l));
        break;
      }
      case vkgraph::GraphTypes::ValueList: {
        ValueList l;
        bool sized = false, ints = true;
        if (const auto* items = v->value_as_ValueList()->items()) {
          for (int32_t x : *items) {
            l.push_back(value(uint32_t(x)));
            sized = sized || vsized.at(uint32_t(x));
            ints = ints && l.back().is_int();
          }
        }
        if (sized && ints) {
          // Sizes some of which are SymInts (view_copy's): an int list.
          IntList sizes;
          for (const Value& e : l) sizes.push_back(std::get<int64_t>(e.v));
          out = Value(std::move(sizes));
        } else {
          out = Value(std::move(l));
        }
        vsized[i] = sized;
        break;
      }
      case vkgraph::GraphTypes::SymInt:
        // Read before an op computes it: the value it was traced with.
        out = Value(int64_t(v->value_as_SymInt()->value()));
        vsized[i] = true;
        break;
      case vkgraph::GraphTypes::VkTensor: {
        const vkgraph::VkTensor* t = v->value_as_VkTensor();
        if (t->constant_id() < 0) {
          bad(fmt::format("{}: value {} (a tensor) is read before any op computes it", where, i));
        }
        const Meta m = vmeta(i);
        const auto* consts = g->constants();
        if (!consts || uint32_t(t->constant_id()) >= consts->size()) {
          bad(fmt::format("{}: value {} names constant {}, which does not exist", where, i, t->constant_id()));
        }
        const vkgraph::VkBytes* b = consts->Get(uint32_t(t->constant_id()));
        const size_t nbytes = checked_nbytes(m.shape, dtype_size(m.dtype), fmt::format("{} constant {}", where, t->constant_id()));
        Bytes data;
        if (b->offset() == UINT64_MAX) {
          data = named_data(b->named_key() ? b->named_key()->str() : "", fmt::format("{} constant {}", where, i));
        } else {
          if (b->offset() > raw.size || b->length() > raw.size - b->offset()) {
            bad(fmt::format("{}: constant {} lies outside the payload's data", where, t->constant_id()));
          }
          data = {raw.data + b->offset(), b->length()};
        }
        if (b->length() < nbytes || data.size < nbytes) {
          bad(fmt::format("{}: constant {} holds {} bytes, its tensor ({} {}) needs {}", where, t->constant_id(),
                          std::min<uint64_t>(b->length(), data.size), dtype_name(m.dtype), shape_str(m.shape), nbytes));
        }
        if (written.count(i)) {
          // State: an IR input, the constant its initial value.
          State st;
          st.input = fmt::format("state_delegate{}_{}", d.delegate_index(), t->constant_id());
          st.output = st.input + ".next";
          st.initial = HostTensor(m.dtype, m.shape, data.data);
          const TensorRef r = ir_.input(st.input, m.dtype, std::vector<ir::Dim>(m.shape.begin(), m.shape.end()));
          note(r, m, m.shape);
          if (lowerer_) lowerer_->input(r, m.shape);
          model_.states.push_back(std::move(st));
          state_now_.push_back(r);
          delegate_state_[r.id] = model_.states.size() - 1;
          out = Value(r);
          break;
        }
        const TensorRef r = ir_.constant(HostTensor(m.dtype, m.shape, data.data),
                                         fmt::format("delegate{}_constant{}", d.delegate_index(), t->constant_id()));
        meta_[r.id] = m;
        out = Value(r);
        break;
      }
    }
    vv[i] = out;
    visiting[i] = false;
    return out;
  };
  const auto* chain = g->chain();
  for (uint32_t k = 0; chain && k < chain->size(); ++k) {
    const vkgraph::OperatorCall* call = chain->Get(k);
    const std::string op = call->name() ? call->name()->str() : "";
    const std::string w = fmt::format("{}, op {} ({})", where, k, op);
    if (!call->args() || call->args()->size() < 1) bad(fmt::format("{}: no result value", w));
    const uint32_t out_id = uint32_t(call->args()->Get(call->args()->size() - 1));
    if (out_id >= vals->size()) bad(fmt::format("{}: result value {} is out of range", w, out_id));
    if (op == "et_vk.select_as_symint.default") {
      // x.select(dim, index).item(): read on the GPU where it is used.
      if (call->args()->size() != 4) bad(fmt::format("{}: {} arguments (expected 3 and the result)", w, call->args()->size()));
      const Value x = value(uint32_t(call->args()->Get(0)));
      const Value dim = value(uint32_t(call->args()->Get(1))), index = value(uint32_t(call->args()->Get(2)));
      if (!x.is_tensor() || !dim.is_int() || !index.is_int()) bad(fmt::format("{}: expected a tensor, a dim and an index", w));
      const Shape& xs = shape_of(x.tensor());
      const int64_t rank = int64_t(xs.size()), dm = std::get<int64_t>(dim.v);
      if (rank == 0 || dm < -rank || dm >= rank) throw Error(fmt::format("{}: dim {} for shape {}", w, dm, shape_str(xs)));
      const size_t dd = size_t(dm < 0 ? dm + rank : dm);
      int64_t at = std::get<int64_t>(index.v);
      if (at < -xs[dd] || at >= xs[dd]) throw Error(fmt::format("{}: index {} for shape {}", w, at, shape_str(xs)));
      if (at < 0) at += xs[dd];
      if (numel(xs) != xs[dd]) throw Unsupported(fmt::format("{}: a tensor of more than one row", w));
      TensorRef one_value = ir_.call("aten.slice.Tensor", {x.tensor(), int64_t(dd), at, at + 1, int64_t(1)});
      one_value = ir_.call("aten.view.default", {one_value, IntList{1}});
      note(one_value, {meta_.at(x.tensor().id).dtype, {1}}, {1});
      if (lowerer_) lowerer_->lower_new();
      device_ints[out_id] = {one_value, 0};
      vv[out_id] = Value(int64_t(0));  // never read as a number: device_ints
      vsized[out_id] = true;
      continue;
    }
    if (const auto size_op = delegate_size_op(op)) {
      // A size computed from shapes: computed here, at the sizes read.
      if (call->args()->size() != 3) bad(fmt::format("{}: {} arguments (expected 2 and the result)", w, call->args()->size()));
      const uint32_t a0 = uint32_t(call->args()->Get(0)), a1 = uint32_t(call->args()->Get(1));
      if (device_ints.count(a0) || device_ints.count(a1)) {
        // A size read on the GPU plus or minus one known here.
        const bool first = device_ints.count(a0) > 0;
        if ((*size_op != "add" && !(*size_op == "sub" && first)) || (device_ints.count(a0) && device_ints.count(a1))) {
          throw Unsupported(fmt::format("{}: {} of a size read from a tensor's values", w, *size_op));
        }
        const Value other = value(first ? a1 : a0);
        if (!other.is_int()) bad(fmt::format("{}: an argument is {}, not an Int", w, other.describe()));
        DeviceInt r = device_ints.at(first ? a0 : a1);
        r.offset += (*size_op == "sub" ? -1 : 1) * std::get<int64_t>(other.v);
        device_ints[out_id] = r;
        vv[out_id] = Value(int64_t(0));
        vsized[out_id] = true;
        continue;
      }
      const auto int_of = [&](uint32_t a) -> int64_t {
        const Value x = value(uint32_t(call->args()->Get(a)));
        if (!x.is_int()) bad(fmt::format("{}: argument {} is {}, not an Int", w, a, x.describe()));
        return std::get<int64_t>(x.v);
      };
      int64_t r = 0;
      if (*size_op == "sym_size") {
        const Value x = value(uint32_t(call->args()->Get(0)));
        if (!x.is_tensor()) bad(fmt::format("{}: argument 0 is {}, not a tensor", w, x.describe()));
        const Shape& sh = shape_of(x.tensor());
        const int64_t rank = int64_t(sh.size()), dim = int_of(1);
        if (dim < -rank || dim >= rank) throw Error(fmt::format("{}: dim {} is out of range for shape {}", w, dim, shape_str(sh)));
        r = sh[size_t(dim < 0 ? dim + rank : dim)];
      } else {
        const int64_t a = int_of(0), b = int_of(1);
        if (*size_op == "add") r = a + b;
        else if (*size_op == "sub") r = a - b;
        else if (*size_op == "mul") r = a * b;
        else {
          if (b == 0) throw Error(fmt::format("{}: division by zero", w));
          const int64_t q = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
          r = *size_op == "floordiv" ? q : a - q * b;
        }
      }
      vv[out_id] = Value(r);
      vsized[out_id] = true;
      continue;
    }
    // The result: a tensor, or a list of them (a tuple).
    std::vector<uint32_t> out_ids;
    if (const auto* list = vals->Get(out_id)->value_as_ValueList()) {
      if (!list->items()) bad(fmt::format("{}: the result list is empty", w));
      for (int32_t x : *list->items()) out_ids.push_back(uint32_t(x));
    } else {
      out_ids.push_back(out_id);
    }
    std::vector<Meta> outs;
    for (uint32_t o : out_ids) {
      if (o >= vals->size() || !vals->Get(o)->value_as_VkTensor()) bad(fmt::format("{}: a result is not a tensor", w));
      outs.push_back(vmeta(o));
    }
    ValueList in;
    bool sized = false;
    std::map<size_t, DeviceInt> device_args;  // argument index -> a size read on the GPU
    for (uint32_t a = 0; a + 1 < call->args()->size(); ++a) {
      const uint32_t id = uint32_t(call->args()->Get(a));
      in.push_back(value(id));
      sized = sized || vsized.at(id);
      if (auto it = device_ints.find(id); it != device_ints.end()) device_args[a] = it->second;
    }
    if (!device_args.empty()) {
      if ((op == "aten.slice_copy.Tensor" || op == "aten.slice.Tensor") && device_args.count(2) &&
          device_args.count(3) && device_args.at(2).base.id == device_args.at(3).base.id && in.size() >= 4 &&
          in[0].is_tensor() && in[1].is_int() && (in.size() < 5 || in[4].is_none() || (in[4].is_int() && std::get<int64_t>(in[4].v) == 1))) {
        // x[start : end] with both read on the GPU from one value: the rows
        // at start .. start + (end - start) - 1, gathered.
        const int64_t n = device_args.at(3).offset - device_args.at(2).offset;
        if (n < 0) throw Error(fmt::format("{}: the slice's end is before its start", w));
        const TensorRef x = in[0].tensor();
        const Shape& xs = shape_of(x);
        const int64_t rank = int64_t(xs.size()), dm = std::get<int64_t>(in[1].v);
        if (dm < -rank || dm >= rank) throw Error(fmt::format("{}: dim {} for shape {}", w, dm, shape_str(xs)));
        const int64_t dd = dm < 0 ? dm + rank : dm;
        const TensorRef rows = ir_.call("aten.index_select.default", {x, dd, positions(device_args.at(2), n)});
        Shape shape = xs;
        shape[size_t(dd)] = n;
        note(rows, outs.at(0), shape);
        ir_.set_seen_shape(rows, shape);
        if (lowerer_) lowerer_->lower_new();
        vv[out_ids[0]] = Value(rows);
        continue;
      }
      if (mutated_args(op) == std::vector<size_t>{3, 4} && device_args.size() == 1 && device_args.count(5) &&
          in.size() > 5 && in[0].is_tensor() && shape_of(in[0].tensor()).size() == 4) {
        // sdpa_with_kv_cache's start position: the query rows' positions,
        // and the causal mask an earlier layer made for them.
        const TensorRef pos = positions(device_args.at(5), shape_of(in[0].tensor())[1]);
        in[5] = Value(pos);
        while (in.size() < 12) in.push_back(Value(None{}));
        if (auto it = masks_made.find(pos.id); it != masks_made.end()) in[11] = Value(it->second);
      } else {
        throw Unsupported(fmt::format("{}: takes a size read from a tensor's values (et_vk.select_as_symint), which "
                                      "wgnn passes to slices and sdpa_with_kv_cache only",
                                      w));
      }
    }
    const std::vector<size_t> written_args = mutated_args(op);
    std::vector<TensorRef> results = translate(op, in, outs, sized, w);
    if (written_args == std::vector<size_t>{3, 4} && results.size() == outs.size() + 3 && in.size() > 5 &&
        in[5].is_tensor()) {
      // sdpa_with_kv_cache's mask, for the layers after it.
      masks_made[in[5].tensor().id] = results.back();
      results.pop_back();
    }
    // Arguments the op wrote: their new values, and a state's.
    for (size_t i = 0; i < written_args.size(); ++i) {
      const TensorRef now = results.at(outs.size() + i);
      const uint32_t id = uint32_t(call->args()->Get(uint32_t(written_args[i])));
      const TensorRef before = vv[id]->tensor();
      vv[id] = Value(now);
      if (auto it = delegate_state_.find(before.id); it != delegate_state_.end()) {
        state_now_[it->second] = now;
        delegate_state_[now.id] = it->second;
      }
    }
    results.resize(outs.size());
    for (size_t i = 0; i < out_ids.size(); ++i) vv[out_ids[i]] = Value(results[i]);
    std::vector<Value> items;
    if (out_ids.size() > 1 || out_ids[0] != out_id) {
      ValueList l;
      for (TensorRef r : results) l.emplace_back(r);
      vv[out_id] = Value(std::move(l));
    }
  }
  for (size_t i = 0; i < n_out; ++i) {
    const uint32_t id = g->output_ids()->Get(uint32_t(i));
    const int pid = d.args()->Get(uint32_t(n_in + i));
    if (pid < 0 || size_t(pid) >= values_.size()) bad(fmt::format("{}: output {} names value {}", where, i, pid));
    if (id < vals->size() && vv[id] && vv[id]->is_int() &&
        vals->Get(id)->value_type() == vkgraph::GraphTypes::SymInt) {
      // A size the graph computed, for the ops after it.
      values_[size_t(pid)] = *vv[id];
      sized_values_.insert(pid);
      continue;
    }
    if (id >= vals->size() || !vv[id] || !vv[id]->is_tensor()) {
      bad(fmt::format("{}: output {} is not computed by the graph", where, i));
    }
    const et::EValue* ev = plan_->values()->Get(uint32_t(pid));
    if (!ev->val_as_Tensor()) bad(fmt::format("{}: output {} is not a tensor in the program", where, i));
    const Meta pm = tensor_meta(*ev->val_as_Tensor(), fmt::format("value {}", pid));
    TensorRef t = vv[id]->tensor();
    if (meta_.at(t.id).dtype != pm.dtype) {
      // Back to the program's dtype, as the delegate's runtime does.
      const Shape shape = shape_of(t);
      t = ir_.call("aten._to_copy.default", {t, scalar_type_code(pm.dtype)});
      note(t, pm, shape);
      ir_.set_seen_shape(t, shape);
      if (lowerer_) lowerer_->lower_new();
    }
    values_[size_t(pid)] = Value(t);
  }
  ++model_.delegate_calls;
}

// Every op the plan names, checked against the mappings first, so that one
// error lists them all.
void Importer::check_ops() {
  std::set<std::string> seen, missing;
  const auto note = [&](const std::string& shown, const std::string& fn) {
    if (seen.insert(shown).second) model_.ops.push_back(shown);
    if (!find_translation(fn)) missing.insert(shown == fn ? fn : fmt::format("{} (as {})", shown, fn));
  };
  std::vector<std::string> other;
  const auto* chains = plan_->chains();
  for (uint32_t c = 0; chains && c < chains->size(); ++c) {
    const auto* ins = chains->Get(c)->instructions();
    for (uint32_t i = 0; ins && i < ins->size(); ++i) {
      const et::Instruction* in = ins->Get(i);
      if (in->instr_args_type() != et::InstructionArguments::NONE && !in->instr_args()) {
        bad(fmt::format("instruction {} has a type and no arguments", i));
      }
      switch (in->instr_args_type()) {
        case et::InstructionArguments::KernelCall: {
          const auto* k = in->instr_args_as_KernelCall();
          const auto* ops = plan_->operators();
          if (!ops || k->op_index() < 0 || uint32_t(k->op_index()) >= ops->size()) break;
          const et::Operator* op = ops->Get(uint32_t(k->op_index()));
          const std::string name = op->name() ? op->name()->str() : "";
          const std::string ov = op->overload() ? op->overload()->str() : "";
          if (name == "aten::copy_") {
            // Writes a mutable buffer (or any tensor) in place.
            if (k->args() && k->args()->size() >= 1) copied_into_.insert(k->args()->Get(0));
            if (seen.insert(name).second) model_.ops.push_back(name);
            break;
          }
          if (!plan_size_kernel(name, ov)) note(name + "." + ov, functional_name(name, ov));
          break;
        }
        case et::InstructionArguments::DelegateCall: {
          const auto* dc = in->instr_args_as_DelegateCall();
          const auto* dels = plan_->delegates();
          if (!dels || dc->delegate_index() < 0 || uint32_t(dc->delegate_index()) >= dels->size()) break;
          const auto* del = dels->Get(uint32_t(dc->delegate_index()));
          const std::string id = del->id() ? del->id()->str() : "";
          if (id != "VulkanBackend" && id != "WebGPUBackend") {
            other.push_back(fmt::format("a delegate of backend '{}'", id));
            break;
          }
          // The ops of the delegate's graph.
          const auto* ref = del->processed();
          if (!ref) break;
          Bytes payload;
          if (ref->location() == et::DataLocation::INLINE) {
            const auto* inl = program_->backend_delegate_data();
            if (!inl || ref->index() >= inl->size() || !inl->Get(ref->index())->data()) break;
            payload = {inl->Get(ref->index())->data()->data(), inl->Get(ref->index())->data()->size()};
          } else {
            payload = segment(ref->index(), "a delegate");
          }
          if (payload.size < 30 || std::memcmp(payload.data + 4, "VH00", 4) != 0) break;
          const uint64_t fb_off = le32(payload.data + 10), fb_size = le32(payload.data + 14);
          if (fb_off > payload.size || fb_size > payload.size - fb_off) break;
          std::vector<uint64_t> graph_copy((fb_size + 7) / 8);
          if (fb_size) std::memcpy(graph_copy.data(), payload.data + fb_off, fb_size);
          const auto* fb = reinterpret_cast<const uint8_t*>(graph_copy.data());
          flatbuffers::Verifier verifier(fb, fb_size);
          if (!verifier.VerifyBuffer<vkgraph::VkGraph>(nullptr)) break;
          const auto* g = vkgraph::GetVkGraph(fb);
          for (uint32_t k = 0; g->chain() && k < g->chain()->size(); ++k) {
            const auto* call = g->chain()->Get(k);
            const std::string op = call->name() ? call->name()->str() : "";
            if (!delegate_size_op(op) && op != "et_vk.select_as_symint.default") note(op, op);
          }
          break;
        }
        case et::InstructionArguments::FreeCall: break;
        case et::InstructionArguments::MoveCall:
        case et::InstructionArguments::JumpFalseCall:
          other.push_back("control flow (MoveCall / JumpFalseCall instructions)");
          break;
        default: other.push_back(fmt::format("instruction type {}", int(in->instr_args_type())));
      }
    }
  }
  if (missing.empty() && other.empty()) return;
  std::vector<std::string> parts;
  if (!missing.empty()) {
    parts.push_back(fmt::format("{} op{} without a mapping: {}", missing.size(), missing.size() == 1 ? "" : "s",
                                fmt::join(missing, ", ")));
  }
  std::sort(other.begin(), other.end());
  other.erase(std::unique(other.begin(), other.end()), other.end());
  for (const auto& o : other) parts.push_back(o);
  throw Unsupported(fmt::format("'{}' (method '{}'): {}{}", name_, model_.method, fmt::join(parts, "; "),
                                missing.empty() ? "" : " (`wgnn ops --pte` lists the ops wgnn maps)"));
}

Model Importer::run(const std::string& method) {
  const auto* base = reinterpret_cast<const uint8_t*>(file_.data());
  if (!is_pte(file_)) bad("no ExecuTorch program identifier (ET12) at byte 4");
  uint64_t program_size = file_.size();
  if (file_.size() >= 8 + 24 && std::memcmp(base + 8, "eh00", 4) == 0) {
    const uint32_t hlen = le32(base + 12);
    if (hlen < 24) bad(fmt::format("extended header length {}", hlen));
    program_size = le64(base + 16);
    segment_base_ = le64(base + 24);
    if (program_size > file_.size()) {
      bad(fmt::format("the header gives a program of {} bytes; the file has {} (truncated?)", program_size,
                      file_.size()));
    }
    if (segment_base_ > file_.size()) bad(fmt::format("segment data at offset {} lies past the end", segment_base_));
    if (hlen >= 32 && segment_base_ > 0 && file_.size() >= 8 + 32) {
      const uint64_t seg_size = le64(base + 32);
      if (seg_size > file_.size() - segment_base_) {
        bad(fmt::format("the header gives {} bytes of segments at offset {}; the file has {} (truncated?)", seg_size,
                        segment_base_, file_.size()));
      }
    }
  }
  flatbuffers::Verifier verifier(base, program_size, 128, 50'000'000);
  if (!et::VerifyProgramBuffer(verifier)) bad("the program flatbuffer does not verify (corrupt or truncated)");
  program_ = et::GetProgram(base);
  const auto* plans = program_->execution_plan();
  if (!plans || plans->size() == 0) bad("no execution plan");
  for (const auto* p : *plans) model_.methods.push_back(p->name() ? p->name()->str() : "");
  std::string want = method;
  if (want.empty()) {
    want = plans->size() == 1 ? model_.methods[0] : "forward";
  }
  for (const auto* p : *plans) {
    if (p->name() && p->name()->str() == want) plan_ = p;
  }
  if (!plan_) {
    throw Error(fmt::format("'{}' has no method '{}'; its methods: {}", name_, want, fmt::join(model_.methods, ", ")));
  }
  model_.method = want;
  if (!plan_->values()) bad("the plan has no values");
  values_.resize(plan_->values()->size());
  check_ops();
  // Inputs.
  if (plan_->inputs()) {
    for (uint32_t i = 0; i < plan_->inputs()->size(); ++i) {
      const int id = plan_->inputs()->Get(i);
      if (id < 0 || size_t(id) >= values_.size()) bad(fmt::format("input {} names value {}", i, id));
      const et::EValue* ev = plan_->values()->Get(uint32_t(id));
      const std::string name = fmt::format("input_{}", i);
      if (!ev->val_as_Tensor()) {
        throw Unsupported(fmt::format("'{}': input {} is not a tensor ({}); only tensor inputs are supported", name_, i,
                                      et::EnumNameKernelTypes(ev->val_type())));
      }
      const Meta m = tensor_meta(*ev->val_as_Tensor(), name);
      const bool bounded = ev->val_as_Tensor()->shape_dynamism() != et::TensorShapeDynamism::STATIC;
      dynamic_ = dynamic_ || bounded;
      Shape shape = m.shape;
      if (sizes_) {
        if (i >= sizes_->size()) {
          throw Error(fmt::format("'{}': {} input shapes given; the method takes {} inputs", name_, sizes_->size(),
                                  plan_->inputs()->size()));
        }
        shape = (*sizes_)[i];
        bool ok = shape.size() == m.shape.size();
        for (size_t k = 0; ok && k < shape.size(); ++k) ok = shape[k] >= 0 && (bounded ? shape[k] <= m.shape[k] : shape[k] == m.shape[k]);
        if (!ok) {
          throw Error(fmt::format("'{}': {} has shape {}; the program takes {}{}", name_, name, shape_str(shape),
                                  bounded ? "at most " : "", shape_str(m.shape)));
        }
      }
      const TensorRef r = ir_.input(name, m.dtype, std::vector<ir::Dim>(shape.begin(), shape.end()));
      note(r, m, shape);
      if (lowerer_) lowerer_->input(r, shape);
      values_[size_t(id)] = Value(r);
      model_.inputs.push_back({name, m.dtype, shape, bounded ? m.shape : Shape{}});
    }
  }
  if (sizes_ && sizes_->size() != model_.inputs.size()) {
    throw Error(fmt::format("'{}': {} input shapes given; the method takes {} inputs", name_, sizes_->size(),
                            model_.inputs.size()));
  }
  // Instructions, in order (chain 0 is the method's).
  const auto* chains = plan_->chains();
  if (!chains || chains->size() == 0) bad("the plan has no chain");
  if (chains->size() > 1) throw Unsupported(fmt::format("'{}': a plan of {} chains; one is supported", name_, chains->size()));
  const auto* ins = chains->Get(0)->instructions();
  for (uint32_t i = 0; ins && i < ins->size(); ++i) {
    const et::Instruction* in = ins->Get(i);
    if (in->instr_args_type() != et::InstructionArguments::NONE && !in->instr_args()) {
      bad(fmt::format("instruction {} has a type and no arguments", i));
    }
    switch (in->instr_args_type()) {
      case et::InstructionArguments::KernelCall: kernel_call(*in->instr_args_as_KernelCall(), int(i)); break;
      case et::InstructionArguments::DelegateCall: delegate_call(*in->instr_args_as_DelegateCall(), int(i)); break;
      case et::InstructionArguments::FreeCall: break;
      default: bad(fmt::format("instruction {} has type {}", i, int(in->instr_args_type())));
    }
  }
  // Outputs.
  if (plan_->outputs()) {
    for (uint32_t i = 0; i < plan_->outputs()->size(); ++i) {
      const int id = plan_->outputs()->Get(i);
      const std::string name = fmt::format("output_{}", i);
      TensorRef t = tensor_of(id, name);
      if (ir_.value(t).kind != ir::ValueKind::Result) {
        // An input or a constant returned as it is: a copy of it (a model's
        // outputs are buffers of their own).
        const Meta m = meta_.at(t.id);
        const Shape declared = declared_.count(t.id) ? declared_.at(t.id) : m.shape;
        t = ir_.call("aten._to_copy.default", {t, scalar_type_code(m.dtype)});
        note(t, {m.dtype, declared}, m.shape);
        ir_.set_seen_shape(t, m.shape);
        if (lowerer_) lowerer_->lower_new();
      }
      ir_.output(t, name);
      const Meta& m = meta_.at(t.id);
      const et::Tensor* pt = plan_->values()->Get(uint32_t(id))->val_as_Tensor();
      const bool bounded = pt && pt->shape_dynamism() != et::TensorShapeDynamism::STATIC;
      Shape bound;
      if (bounded) bound = tensor_meta(*pt, name).shape;
      model_.outputs.push_back({name, m.dtype, m.shape, bound});
    }
  }
  // Each mutable buffer's value after the run: an output the next run
  // takes as its input.
  for (size_t k = 0; k < model_.states.size(); ++k) {
    TensorRef t = state_now_[k];
    if (ir_.value(t).kind != ir::ValueKind::Result) {
      const Meta m = meta_.at(t.id);
      t = ir_.call("aten._to_copy.default", {t, scalar_type_code(m.dtype)});
      note(t, m, m.shape);
      ir_.set_seen_shape(t, m.shape);
      if (lowerer_) lowerer_->lower_new();
    }
    ir_.output(t, model_.states[k].output);
  }
  if (model_.outputs.empty()) bad("the method returns no tensor");
  model_.dynamic = dynamic_;
  model_.ir = std::move(ir_);
  return std::move(model_);
}

}  // namespace

Model load_at_sizes(std::string_view bytes, const std::string& name, const std::string& method,
                    const std::vector<Shape>& input_shapes, gpu::Context& ctx) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 8 != 0) {
    std::vector<uint64_t> copy((bytes.size() + 7) / 8);
    if (!bytes.empty()) std::memcpy(copy.data(), bytes.data(), bytes.size());
    return Importer(std::string_view(reinterpret_cast<const char*>(copy.data()), bytes.size()), name, input_shapes, ctx)
        .run(method);
  }
  return Importer(bytes, name, input_shapes, ctx).run(method);
}

Model load_from_bytes(std::string_view bytes, const std::string& name, const std::string& method) {
  // flatbuffers reads 8-byte fields in place: the program from 8-byte-
  // aligned memory (a copy where the caller's bytes are not).
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 8 != 0) {
    std::vector<uint64_t> copy((bytes.size() + 7) / 8);
    if (!bytes.empty()) std::memcpy(copy.data(), bytes.data(), bytes.size());
    return Importer(std::string_view(reinterpret_cast<const char*>(copy.data()), bytes.size()), name).run(method);
  }
  return Importer(bytes, name).run(method);
}

Model load(const std::string& path, const std::string& method) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("cannot open '{}'", path));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw Error(fmt::format("reading '{}' failed", path));
  // The IR's constants are copies: the bytes may go.
  return load_from_bytes(bytes, path, method);
}

std::vector<std::string> supported_ops() { return translated_ops(); }

}  // namespace wgnn::pte

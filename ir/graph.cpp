#include "ir/graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "gpu/error.h"

namespace wgnn::ir {

std::string sym_shape_str(const SymShape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + "]";
}

TensorRef Graph::add_value(ValueInfo v) {
  values_.push_back(std::move(v));
  return TensorRef{int(values_.size()) - 1};
}

TensorRef Graph::input(std::string name, DType dtype, SymShape shape) {
  for (const Dim& d : shape) {
    if (!d.symbolic() && d.size < 0) {
      throw Error(fmt::format("ir: input '{}' has shape {}: a dim is a size >= 0 or a symbol", name,
                              sym_shape_str(shape)));
    }
  }
  for (TensorRef in : inputs_) {
    if (values_[size_t(in.id)].name == name) throw Error(fmt::format("ir: two inputs are named '{}'", name));
  }
  ValueInfo v;
  v.kind = ValueKind::Input;
  v.name = std::move(name);
  v.dtype = dtype;
  v.shape = std::move(shape);
  TensorRef r = add_value(std::move(v));
  inputs_.push_back(r);
  return r;
}

TensorRef Graph::constant(HostTensor t, std::string name) {
  return constant(std::make_shared<const HostTensor>(std::move(t)), std::move(name));
}

TensorRef Graph::constant(std::shared_ptr<const HostTensor> t, std::string name) {
  if (!t) throw Error("ir: a constant without data");
  ValueInfo v;
  v.kind = ValueKind::Constant;
  v.name = std::move(name);
  v.dtype = t->dtype;
  for (int64_t d : t->shape) v.shape.emplace_back(d);
  v.data = std::move(t);
  return add_value(std::move(v));
}

TensorRef Graph::made_constant(DType dtype, const Shape& shape, std::string memo,
                               std::function<const HostTensor&(HostTensor&)> make, std::string name,
                               std::shared_ptr<const HostTensor> source) {
  if (!make || memo.empty()) throw Error("ir: a made constant needs a memo and a function that makes it");
  ValueInfo v;
  v.kind = ValueKind::Constant;
  v.name = std::move(name);
  v.dtype = dtype;
  for (int64_t d : shape) v.shape.emplace_back(d);
  v.memo = std::move(memo);
  v.make = std::move(make);
  v.source = std::move(source);
  return add_value(std::move(v));
}

const HostTensor* Graph::model_values(TensorRef v) const {
  const ValueInfo& vi = value(v);
  if (vi.kind != ValueKind::Constant) return nullptr;
  return vi.data ? vi.data.get() : vi.source.get();
}

std::optional<DType> Graph::known_dtype(TensorRef v) const {
  const ValueInfo& vi = value(v);
  if (vi.kind == ValueKind::Result) return vi.seen_dtype;
  return vi.dtype;
}

std::optional<Shape> Graph::known_shape(TensorRef v) const {
  const ValueInfo& vi = value(v);
  if (vi.kind == ValueKind::Result) return vi.seen_shape;
  Shape s;
  for (const Dim& d : vi.shape) {
    if (d.symbolic()) return std::nullopt;
    s.push_back(d.size);
  }
  return s;
}

TensorRef Graph::call(std::string op, ValueList args, std::string label) {
  return call_multi(std::move(op), std::move(args), 1, std::move(label))[0];
}

std::vector<TensorRef> Graph::call_multi(std::string op, ValueList args, size_t outputs, std::string label) {
  if (outputs == 0) throw Error(fmt::format("ir: {} is called with no result", op));
  for (TensorRef t : tensor_args(args)) {
    if (t.id < 0 || size_t(t.id) >= values_.size()) {
      throw Error(fmt::format("ir: {} is given tensor %{}, which is not a value of this graph", op, t.id));
    }
  }
  Node n;
  n.op = std::move(op);
  n.args = std::move(args);
  n.label = std::move(label);
  const int at = int(nodes_.size());
  for (size_t i = 0; i < outputs; ++i) {
    ValueInfo v;
    v.node = at;
    v.index = int(i);
    n.outputs.push_back(add_value(std::move(v)));
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

void Graph::output(TensorRef v, std::string name) {
  value(v);
  if (name.empty()) name = fmt::format("output{}", outputs_.size());
  outputs_.push_back(v);
  output_names_.push_back(std::move(name));
}

const ValueInfo& Graph::value(TensorRef v) const {
  if (v.id < 0 || size_t(v.id) >= values_.size()) throw Error(fmt::format("ir: %{} is not a value of this graph", v.id));
  return values_[size_t(v.id)];
}

TensorRef Graph::new_result() { return add_value(ValueInfo{}); }

void Graph::replace_node(int at, Node n) {
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    ValueInfo& v = values_.at(size_t(n.outputs[i].id));
    v.kind = ValueKind::Result;
    v.node = at;
    v.index = int(i);
  }
  nodes_.at(size_t(at)) = std::move(n);
}

void Graph::insert_node(int at, Node n) {
  if (at < 0 || size_t(at) > nodes_.size()) throw Error(fmt::format("ir: insert_node at position {} of {} nodes", at, nodes_.size()));
  for (ValueInfo& v : values_) {
    if (v.kind == ValueKind::Result && v.node >= at) ++v.node;
  }
  nodes_.insert(nodes_.begin() + at, Node{});
  replace_node(at, std::move(n));
}

int Graph::producer(TensorRef v) const {
  const ValueInfo& vi = value(v);
  if (vi.kind != ValueKind::Result || vi.node < 0) return -1;
  const Node& n = nodes_[size_t(vi.node)];
  if (n.dead || size_t(vi.index) >= n.outputs.size() || n.outputs[size_t(vi.index)].id != v.id) return -1;
  return vi.node;
}

namespace {
void collect(const Value& v, std::vector<TensorRef>& out) {
  if (v.is_tensor()) out.push_back(v.tensor());
  if (v.is_list()) {
    for (const Value& e : v.list()) collect(e, out);
  }
}
void substitute(Value& v, TensorRef from, TensorRef to) {
  if (v.is_tensor() && v.tensor() == from) v = to;
  if (v.is_list()) {
    ValueList l = v.list();
    for (Value& e : l) substitute(e, from, to);
    v = std::move(l);
  }
}
std::string arg_str(const Value& v) {
  if (v.is_tensor()) return fmt::format("%{}", v.tensor().id);
  if (v.is_none()) return "None";
  if (v.is_bool()) return std::get<bool>(v.v) ? "True" : "False";
  if (v.is_int()) return std::to_string(std::get<int64_t>(v.v));
  if (v.is_double()) return fmt::format("{}", std::get<double>(v.v));
  if (v.is_int_list()) return shape_str(std::get<IntList>(v.v));
  if (v.is_list()) {
    std::string s = "(";
    for (size_t i = 0; i < v.list().size(); ++i) s += (i ? ", " : "") + arg_str(v.list()[i]);
    return s + ")";
  }
  return "'" + std::get<std::string>(v.v) + "'";
}
}  // namespace

std::vector<TensorRef> tensor_args(const ValueList& args) {
  std::vector<TensorRef> out;
  for (const Value& v : args) collect(v, out);
  return out;
}

bool mutates(const std::string& op) {
  const size_t dot = op.rfind('.');
  return dot != std::string::npos && dot > 0 && op[dot - 1] == '_';
}

std::vector<int> Graph::users(TensorRef v) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].dead) continue;
    for (TensorRef t : tensor_args(nodes_[i].args)) {
      if (t == v) out.push_back(int(i));
    }
  }
  return out;
}

bool Graph::is_output(TensorRef v) const { return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end(); }

void Graph::replace_uses(TensorRef from, TensorRef to) {
  for (Node& n : nodes_) {
    if (n.dead) continue;
    for (Value& a : n.args) substitute(a, from, to);
  }
  for (TensorRef& o : outputs_) {
    if (o == from) o = to;
  }
}

void Graph::compact() {
  std::vector<Node> kept;
  kept.reserve(nodes_.size());
  for (Node& n : nodes_) {
    if (!n.dead) kept.push_back(std::move(n));
  }
  nodes_ = std::move(kept);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (size_t k = 0; k < nodes_[i].outputs.size(); ++k) {
      ValueInfo& v = values_[size_t(nodes_[i].outputs[k].id)];
      v.node = int(i);
      v.index = int(k);
    }
  }
}

size_t Graph::live_nodes() const {
  return size_t(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return !n.dead; }));
}

std::string Graph::dump() const {
  std::string s;
  for (TensorRef in : inputs_) {
    const ValueInfo& v = values_[size_t(in.id)];
    s += fmt::format("%{} = input '{}' {} {}\n", in.id, v.name, dtype_name(v.dtype), sym_shape_str(v.shape));
  }
  for (const Node& n : nodes_) {
    if (n.dead) continue;
    std::string outs;
    for (size_t i = 0; i < n.outputs.size(); ++i) outs += fmt::format("{}%{}", i ? ", " : "", n.outputs[i].id);
    std::string args;
    for (size_t i = 0; i < n.args.size(); ++i) args += (i ? ", " : "") + arg_str(n.args[i]);
    s += fmt::format("{} = {}({}){}\n", outs, n.op, args, n.unfused.empty() ? "" : fmt::format("  # fused from {} nodes", n.unfused.size()));
  }
  for (size_t i = 0; i < outputs_.size(); ++i) s += fmt::format("output '{}' = %{}\n", output_names_[i], outputs_[i].id);
  return s;
}

}  // namespace wgnn::ir

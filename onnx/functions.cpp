#include "onnx/functions.h"

#include <fmt/format.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/error.h"

namespace wgnn::onnx_import {
namespace {

// Fields newer than the ONNX the project builds against (IR 9 and 10),
// which protobuf keeps as unknown fields: FunctionProto.attribute_proto
// (11, the attributes' defaults), FunctionProto.overload (13) and
// NodeProto.overload (8).
constexpr int kFunctionAttributeProto = 11, kFunctionOverload = 13, kNodeOverload = 8;

std::string unknown_string(const google::protobuf::Message& m, int field) {
  const auto& u = m.GetReflection()->GetUnknownFields(m);
  for (int i = 0; i < u.field_count(); ++i) {
    if (u.field(i).number() == field && u.field(i).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      return u.field(i).length_delimited();
    }
  }
  return "";
}

struct Function {
  const onnx::FunctionProto* proto = nullptr;
  std::map<std::string, onnx::AttributeProto> defaults;
};

using Key = std::tuple<std::string, std::string, std::string>;  // domain, name, overload

std::string domain_of(const std::string& d) { return d == "ai.onnx" ? "" : d; }

class Inliner {
 public:
  Inliner(const onnx::ModelProto& model, int opset) {
    for (const onnx::FunctionProto& f : model.functions()) {
      const Key key{domain_of(f.domain()), f.name(), unknown_string(f, kFunctionOverload)};
      if (fns_.count(key)) {
        throw Error(fmt::format("local function '{}' (domain '{}') is defined twice", f.name(), f.domain()));
      }
      for (const auto& op : f.opset_import()) {
        if (domain_of(op.domain()).empty() && op.version() != opset) {
          throw Unsupported(fmt::format("local function '{}' imports ONNX opset {}, the model {}: one opset per model "
                                        "is supported",
                                        f.name(), op.version(), opset));
        }
      }
      Function fn{&f, {}};
      const auto& u = f.GetReflection()->GetUnknownFields(f);
      for (int i = 0; i < u.field_count(); ++i) {
        if (u.field(i).number() != kFunctionAttributeProto) continue;
        onnx::AttributeProto a;
        if (!a.ParseFromString(u.field(i).length_delimited())) {
          throw Error(fmt::format("local function '{}': an attribute default does not parse", f.name()));
        }
        fn.defaults[a.name()] = a;
      }
      for (const onnx::NodeProto& n : f.node()) {
        for (const auto& a : n.attribute()) {
          if (a.has_g() || a.graphs_size() > 0) {
            throw Unsupported(fmt::format("local function '{}': its node '{}' ({}) holds a subgraph; functions with "
                                          "If, Loop or Scan are not supported",
                                          f.name(), n.name(), n.op_type()));
          }
        }
      }
      fns_[key] = fn;
    }
  }

  void graph(onnx::GraphProto& g, int depth) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
    for (onnx::NodeProto& n : *g.mutable_node()) emit(n, depth, out);
    g.mutable_node()->Swap(&out);
  }

 private:
  const Function* find(const onnx::NodeProto& n) const {
    auto it = fns_.find(Key{domain_of(n.domain()), n.op_type(), unknown_string(n, kNodeOverload)});
    return it == fns_.end() ? nullptr : &it->second;
  }

  // `n` as it is (its subgraphs inlined), or the function body it calls.
  void emit(onnx::NodeProto& n, int depth, google::protobuf::RepeatedPtrField<onnx::NodeProto>& out) {
    const Function* f = find(n);
    if (!f) {
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) graph(*a.mutable_g(), depth);
        for (auto& sg : *a.mutable_graphs()) graph(sg, depth);
      }
      *out.Add() = n;
      return;
    }
    if (depth >= 64) {
      throw Error(fmt::format("local function '{}': calls nest more than 64 deep (a function calling itself?)",
                              n.op_type()));
    }
    const onnx::FunctionProto& fp = *f->proto;
    if (n.input_size() > fp.input_size() || n.output_size() > fp.output_size()) {
      throw Error(fmt::format("node '{}' calls local function '{}' with {} inputs and {} outputs; it takes {} and {}",
                              n.name(), fp.name(), n.input_size(), n.output_size(), fp.input_size(),
                              fp.output_size()));
    }
    const std::string prefix =
        fmt::format("{}/{}#{}/", !n.name().empty() ? n.name() : n.output_size() ? n.output(0) : "call", fp.name(),
                    calls_++);
    std::map<std::string, std::string> rename;
    for (int i = 0; i < fp.input_size(); ++i) rename[fp.input(i)] = i < n.input_size() ? n.input(i) : "";
    for (int i = 0; i < fp.output_size(); ++i) {
      rename[fp.output(i)] = i < n.output_size() && !n.output(i).empty() ? n.output(i) : prefix + fp.output(i);
    }
    auto name = [&](const std::string& v) {
      if (v.empty()) return v;
      auto it = rename.find(v);
      return it != rename.end() ? it->second : prefix + v;
    };
    std::map<std::string, const onnx::AttributeProto*> given;
    for (const auto& a : n.attribute()) given[a.name()] = &a;
    for (const onnx::NodeProto& b : fp.node()) {
      if (++made_ > kMaxNodes) {
        throw Error(fmt::format("inlining local function '{}': the calls make more than {} nodes", fp.name(), kMaxNodes));
      }
      onnx::NodeProto c = b;
      c.set_name(prefix + b.name());
      for (auto& v : *c.mutable_input()) v = name(v);
      for (auto& v : *c.mutable_output()) v = name(v);
      c.clear_attribute();
      for (const auto& a : b.attribute()) {
        if (!a.has_ref_attr_name()) {
          *c.add_attribute() = a;
          continue;
        }
        // An attribute of the call's (or the function's default); absent
        // from both, the attribute is left out, as ONNX says.
        const onnx::AttributeProto* src = nullptr;
        if (auto it = given.find(a.ref_attr_name()); it != given.end()) src = it->second;
        else if (auto d = f->defaults.find(a.ref_attr_name()); d != f->defaults.end()) src = &d->second;
        if (!src) continue;
        onnx::AttributeProto* r = c.add_attribute();
        *r = *src;
        r->set_name(a.name());
      }
      emit(c, depth + 1, out);
    }
  }

  // Calls nest at most 64 deep, but each level may call several: a bound
  // on the nodes made keeps a crafted model from exhausting memory.
  static constexpr int64_t kMaxNodes = 1'000'000;
  std::map<Key, Function> fns_;
  int calls_ = 0;
  int64_t made_ = 0;
};

}  // namespace

void inline_local_functions(onnx::ModelProto& model, int opset) {
  if (model.functions_size() == 0) return;
  Inliner in(model, opset);
  in.graph(*model.mutable_graph(), 0);
  model.clear_functions();
}

}  // namespace wgnn::onnx_import

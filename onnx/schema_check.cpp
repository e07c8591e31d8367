#include "onnx/schema_check.h"

#include <fmt/format.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "gpu/error.h"

namespace wgnn::onnx_import {

std::string node_name(const onnx::NodeProto& n) {
  if (!n.name().empty()) return n.name();
  if (n.output_size() > 0 && !n.output(0).empty()) return n.output(0);
  return "(unnamed, no output)";
}

namespace {

std::string where(const onnx::NodeProto& n) { return fmt::format("node '{}' ({})", node_name(n), n.op_type()); }

std::string type_name(onnx::AttributeProto::AttributeType t) {
  if (t == onnx::AttributeProto::UNDEFINED) return "UNDEFINED";
  return onnx::AttributeProto::AttributeType_Name(t);
}

// An attribute's type: its `type` field, or for files that leave it unset
// (IR version 1), the one value field that is set.
onnx::AttributeProto::AttributeType type_of(const onnx::AttributeProto& a) {
  using A = onnx::AttributeProto;
  if (a.type() != A::UNDEFINED) return a.type();
  if (a.has_f()) return A::FLOAT;
  if (a.has_i()) return A::INT;
  if (a.has_s()) return A::STRING;
  if (a.has_t()) return A::TENSOR;
  if (a.has_g()) return A::GRAPH;
  if (a.has_sparse_tensor()) return A::SPARSE_TENSOR;
  if (a.has_tp()) return A::TYPE_PROTO;
  if (a.floats_size()) return A::FLOATS;
  if (a.ints_size()) return A::INTS;
  if (a.strings_size()) return A::STRINGS;
  if (a.tensors_size()) return A::TENSORS;
  if (a.graphs_size()) return A::GRAPHS;
  if (a.sparse_tensors_size()) return A::SPARSE_TENSORS;
  if (a.type_protos_size()) return A::TYPE_PROTOS;
  return A::UNDEFINED;
}

std::string count_range(int lo, int hi) {
  if (lo == hi) return fmt::format("exactly {}", lo);
  if (hi == std::numeric_limits<int>::max()) return fmt::format("at least {}", lo);
  return fmt::format("{} to {}", lo, hi);
}

}  // namespace

int schema_max_opset() {
  const auto& m = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = m.find(onnx::ONNX_DOMAIN);
  return it == m.end() ? 0 : it->second.second;
}

void check_graph_rules(const onnx::GraphProto& g) {
  // Who assigned each name first: "graph input", "initializer", or a node.
  std::map<std::string, std::string> assigned;
  std::set<std::string> inputs;
  for (const auto& in : g.input()) {
    if (in.name().empty()) throw Error("a graph input has an empty name");
    if (!inputs.insert(in.name()).second) throw Error(fmt::format("graph input '{}' is declared twice", in.name()));
    assigned[in.name()] = "a graph input";
  }
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) {
    // ONNX names every value once. Runtimes differ on which duplicate wins
    // (ONNX Runtime takes the last), so neither is taken.
    if (!inits.insert(t.name()).second) {
      throw Error(fmt::format("initializer '{}' is given twice (ONNX values are assigned once)", t.name()));
    }
    if (!inputs.count(t.name())) assigned[t.name()] = "an initializer";  // an input's default value is allowed
  }
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) {
      if (o.empty()) continue;  // an optional output left out
      auto [it, fresh] = assigned.emplace(o, where(n));
      if (fresh) continue;
      if (it->second == where(n)) {
        throw Error(fmt::format("{}: writes output '{}' twice (ONNX values are assigned once)", where(n), o));
      }
      const std::string what = inits.count(o)    ? "an initializer"
                               : inputs.count(o) ? "a graph input"
                                                 : "also written by " + it->second;
      throw Error(fmt::format("{}: writes '{}', which is {} (ONNX values are assigned once)", where(n), o, what));
    }
  }
  if (g.output_size() == 0) throw Error("the graph has no outputs: nothing to compute");
  for (int i = 0; i < g.output_size(); ++i) {
    if (g.output(i).name().empty()) throw Error(fmt::format("graph output {} has an empty name", i));
  }
}

void check_node_schemas(const onnx::GraphProto& g, int opset) {
  const int known = schema_max_opset();
  const bool exact = opset <= known;
  for (const auto& n : g.node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(n.op_type(), std::min(opset, known), onnx::ONNX_DOMAIN);
    if (!s || s->Deprecated()) continue;
    const std::string at = fmt::format("node '{}' ({}, opset {})", node_name(n), n.op_type(), opset);
    const auto& attrs = s->attributes();
    std::set<std::string> seen;
    for (const auto& a : n.attribute()) {
      if (!seen.insert(a.name()).second) {
        throw Error(fmt::format("node '{}' ({}): attribute '{}' is given twice", node_name(n), n.op_type(), a.name()));
      }
      auto it = attrs.find(a.name());
      if (it == attrs.end()) {
        // Names starting "__" are internal to ONNX, allowed everywhere.
        if (exact && a.name().rfind("__", 0) != 0) {
          throw Error(fmt::format("node '{}' ({}): attribute '{}' is not an attribute of {} at opset {}",
                                  node_name(n), n.op_type(), a.name(), n.op_type(), opset));
        }
        continue;
      }
      const auto got = type_of(a);
      if (got != it->second.type) {
        throw Error(fmt::format("node '{}' ({}): attribute '{}' is {}; {} requires {}", node_name(n), n.op_type(),
                                a.name(), type_name(got), n.op_type(), type_name(it->second.type)));
      }
    }
    if (!exact) continue;
    for (const auto& [name, attr] : attrs) {
      if (attr.required && !seen.count(name)) {
        throw Error(fmt::format("node '{}' ({}): required attribute '{}' ({}) is missing", node_name(n),
                                n.op_type(), name, type_name(attr.type)));
      }
    }
    if (n.input_size() < s->min_input() || n.input_size() > s->max_input()) {
      throw Error(fmt::format("{}: has {} input{}; {} takes {}", at, n.input_size(), n.input_size() == 1 ? "" : "s",
                              n.op_type(), count_range(s->min_input(), s->max_input())));
    }
    if (n.output_size() < s->min_output() || n.output_size() > s->max_output()) {
      throw Error(fmt::format("{}: has {} output{}; {} makes {}", at, n.output_size(),
                              n.output_size() == 1 ? "" : "s", n.op_type(),
                              count_range(s->min_output(), s->max_output())));
    }
    const auto& formal = s->inputs();
    for (int i = 0; i < n.input_size() && size_t(i) < formal.size(); ++i) {
      if (n.input(i).empty() && formal[size_t(i)].GetOption() == onnx::OpSchema::Single) {
        throw Error(fmt::format("{}: input {} ('{}') is required but left empty", at, i,
                                formal[size_t(i)].GetName()));
      }
    }
  }
}

}  // namespace wgnn::onnx_import

// Common subexpressions: a live node that calls the same op on the same
// arguments as an earlier one (the same values, or small constants with
// the same bytes; equal numbers, lists and strings) computes the same
// results, so its readers read the earlier node's and it is dropped.
// ONNX Runtime's graph optimizer does this as well. What an importer
// repeats per layer collapses: GroupQueryAttention's positions and mask,
// computed from seqlens_k and the total length once per layer, are
// computed once.
//
// Left alone: a node that writes an argument in place (ir::mutates), a
// node whose results such a node reads or writes (two zero tensors filled
// in place are two tensors), a fused node (its unfused chain is its own),
// and a node whose result the model returns (two outputs stay two
// buffers). It runs after the fusion passes, so that sharing a value
// between layers never hides a chain from them (they look for results
// with one reader).
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "passes/passes.h"

namespace wgnn::passes {
namespace {

// Constants up to this size are compared by their bytes.
constexpr size_t kSmallConstant = 4096;

void append_key(const ir::Graph& g, const Value& v, std::string& k) {
  if (v.is_none()) {
    k += 'N';
  } else if (v.is_tensor()) {
    const TensorRef t = v.tensor();
    if (t.id >= 0 && g.has_data(t) && g.value(t).data->nbytes() <= kSmallConstant) {
      const HostTensor& d = *g.value(t).data;
      k += fmt::format("C{}{}:", dtype_name(d.dtype), shape_str(d.shape));
      k.append(reinterpret_cast<const char*>(d.data.data()), d.nbytes());
    } else {
      k += fmt::format("%{}", t.id);
    }
  } else if (v.is_int()) {
    k += fmt::format("i{}", std::get<int64_t>(v.v));
  } else if (v.is_double()) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "d%a", std::get<double>(v.v));
    k += buf;
  } else if (v.is_bool()) {
    k += std::get<bool>(v.v) ? "b1" : "b0";
  } else if (v.is_int_list()) {
    k += '[';
    for (int64_t i : std::get<IntList>(v.v)) k += fmt::format("{},", i);
    k += ']';
  } else if (v.is_list()) {
    k += '(';
    for (const Value& e : v.list()) append_key(g, e, k), k += ',';
    k += ')';
  } else {
    const std::string& s = std::get<std::string>(v.v);
    k += fmt::format("s{}:", s.size());
    k += s;
  }
  k += ';';
}

// Renames tensors inside an argument list (lists searched too).
void rename(ValueList& args, const std::unordered_map<int, int>& to) {
  for (Value& a : args) {
    if (a.is_tensor()) {
      auto it = to.find(a.tensor().id);
      if (it != to.end()) a = Value(TensorRef{it->second});
    } else if (a.is_list()) {
      rename(std::get<ValueList>(a.v), to);
    }
  }
}

class CommonSubexpressions final : public Pass {
 public:
  const char* name() const override { return "common_subexpressions"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    // Values an in-place node touches: their producers keep their own.
    std::unordered_set<int> touched;
    for (const ir::Node& n : g.nodes()) {
      if (n.dead || !ir::mutates(n.op)) continue;
      for (TensorRef t : ir::tensor_args(n.args)) touched.insert(t.id);
      for (TensorRef t : n.outputs) touched.insert(t.id);
    }
    std::unordered_map<std::string, int> first;  // key -> node
    std::unordered_map<int, int> renamed;         // a merged result -> the kept one
    size_t merged = 0;
    auto& nodes = g.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      ir::Node& n = nodes[i];
      if (n.dead || ir::mutates(n.op) || !n.unfused.empty() || n.outputs.empty()) continue;
      bool skip = false;
      for (TensorRef o : n.outputs) skip = skip || touched.count(o.id) > 0;
      if (skip) continue;
      std::string key = n.op + fmt::format("/{}(", n.outputs.size());
      for (const Value& a : n.args) append_key(g, a, key);
      auto [it, fresh] = first.emplace(std::move(key), int(i));
      if (fresh) continue;
      bool returned = false;
      for (TensorRef o : n.outputs) returned = returned || g.is_output(o);
      if (returned) continue;
      const ir::Node& kept = nodes[size_t(it->second)];
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        g.replace_uses(n.outputs[k], kept.outputs[k]);
        renamed[n.outputs[k].id] = kept.outputs[k].id;
      }
      nodes[i].dead = true;
      ++merged;
    }
    // A fused node's unfused chain (lowered where the fused op refuses a
    // plan's shapes) reads the kept results too.
    if (!renamed.empty()) {
      for (ir::Node& n : nodes) {
        if (n.dead) continue;
        for (ir::Node& u : n.unfused) rename(u.args, renamed);
      }
    }
    return merged;
  }
};

}  // namespace

std::unique_ptr<Pass> common_subexpressions() { return std::make_unique<CommonSubexpressions>(); }

}  // namespace wgnn::passes

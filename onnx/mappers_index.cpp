// ONNX's indexing and scan operators -> wgnn ops: TopK (aten.topk,
// ops/topk.cpp), GatherND, ScatterND, ScatterElements and Scatter
// (ops/scatter.cpp), CumSum (ops/cumsum.cpp). Each as ONNX defines it at
// every opset wgnn reads (7 to 21); arguments that became inputs (TopK's
// k, CumSum's axis) are read on the host, as constants or values folded
// from shapes and constants.
#include <fmt/format.h>

#include "onnx/host_ops.h"
#include "onnx/mappers_index.h"

namespace wgnn::onnx_import {
namespace {

const std::vector<DType> kNumeric = {DType::F32, DType::F16, DType::I32, DType::I64};

std::vector<Slot> one(Slot s) {
  std::vector<Slot> v;
  v.push_back(std::move(s));
  return v;
}

// A scalar or one-value integer input read on the host.
int64_t host_scalar(NodeCtx& c, size_t i, const char* what) {
  const std::vector<int64_t> v = c.host_ints(i, what);
  if (v.size() != 1) c.fail(fmt::format("input '{}' has {} values; it must hold one", what, v.size()));
  return v[0];
}

std::vector<Slot> topk(NodeCtx& c) {
  const int64_t k = c.opset < 10 ? c.attr_int("k", -1) : host_scalar(c, 1, "K");
  if (c.opset < 10 && !c.has_attr("k")) c.fail("attribute 'k' is missing");
  const bool largest = c.opset < 11 || c.attr_int("largest", 1) != 0;
  const bool sorted = c.opset < 11 || c.attr_int("sorted", 1) != 0;
  Value r = c.call("aten.topk.default", {c.tensor(0), k, c.attr_int("axis", -1), largest, sorted});
  std::vector<Slot> out;
  for (const Value& v : r.list()) out.push_back(c.out(v));
  return out;
}

// ONNX's reduction names -> scatter_reduce's.
std::string aten_reduce(NodeCtx& c, const std::string& r) {
  if (r == "add") return "sum";
  if (r == "mul") return "prod";
  if (r == "max") return "amax";
  if (r == "min") return "amin";
  c.fail(fmt::format("reduction '{}' (accepted: none, add, mul, max, min)", r));
}

std::vector<Slot> scatter_elements(NodeCtx& c) {
  const int64_t axis = c.attr_int("axis", 0);
  const std::string r = c.opset < 16 ? "none" : c.attr_string("reduction", "none");
  if (r == "none") return one(c.out(c.call("aten.scatter.src", {c.tensor(0), axis, c.tensor(1), c.tensor(2)})));
  return one(c.out(
      c.call("aten.scatter_reduce.two", {c.tensor(0), axis, c.tensor(1), c.tensor(2), aten_reduce(c, r), true})));
}

}  // namespace

void add_index_mappers(std::map<std::string, OpMapper>& m) {
  m["TopK"] = {kNumeric, topk, nullptr};
  m["GatherND"] = {{}, [](NodeCtx& c) {
                     return one(c.out(c.call("wgnn.gather_nd.default",
                                             {c.tensor(0), c.tensor(1), c.opset < 12 ? 0 : c.attr_int("batch_dims", 0)})));
                   }, nullptr};
  m["ScatterND"] = {kNumeric, [](NodeCtx& c) {
                      const std::string r = c.opset < 16 ? "none" : c.attr_string("reduction", "none");
                      return one(c.out(c.call("wgnn.scatter_nd.default", {c.tensor(0), c.tensor(1), c.tensor(2), r})));
                    }, nullptr};
  m["ScatterElements"] = {kNumeric, scatter_elements, nullptr};
  m["Scatter"] = {kNumeric, scatter_elements, nullptr};
  m["CumSum"] = {kNumeric, [](NodeCtx& c) {
                   return one(c.out(c.call("wgnn.cumsum.default",
                                           {c.tensor(0), host_scalar(c, 1, "axis"), c.attr_int("exclusive", 0) != 0,
                                            c.attr_int("reverse", 0) != 0})));
                 }, nullptr};
}

}  // namespace wgnn::onnx_import

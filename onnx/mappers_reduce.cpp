// Reductions and softmax: ReduceMean / Sum / Max / Min / Prod, those composed of elementwise ops and a sum (L1, L2, SumSquare, LogSum, LogSumExp), ArgMax, ArgMin, Hardmax, Softmax, LogSoftmax.
// Internal to onnx/: added to the op table by make_mappers() (onnx/mappers.cpp);
// the helpers they share are in onnx/mapper_util.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "onnx/host_ops.h"
#include "onnx/mapper_util.h"
#include "onnx/node_ctx.h"
#include "onnx/subgraph.h"
#include "onnx/tensor_proto.h"
#include "ops/layout.h"

namespace wgnn::onnx_import {

namespace {

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


}  // namespace

void add_reduce_mappers(Mappers& m) {
  // Reductions and softmax.
  m["ReduceMean"] = reduce("ReduceMean", "aten.mean.dim", 18, kFloat);
  m["ReduceSum"] = reduce("ReduceSum", "aten.sum.dim_IntList", 13, kNumeric);
  std::vector<DType> ordered = kNumeric;
  ordered.push_back(DType::Bool);  // opset 20: max is any, min is all
  m["ReduceMax"] = reduce("ReduceMax", "aten.amax.default", 18, ordered);
  m["ReduceMin"] = reduce("ReduceMin", "aten.amin.default", 18, ordered);
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
      // Over no element the shift is left out (there is no maximum): the
      // sum of no exp is 0, its log -inf, as ONNX defines.
      bool empty = false;
      for (int64_t a : axes) empty |= c.shape(0)[size_t(ops::normalize_axis(a, r, "Reduce", "axes"))] == 0;
      const bool shift = kind == "LogSumExp" && !empty;
      if (kind == "LogSumExp" && !shift) x = c.call("aten.exp.default", {x}).tensor();
      if (shift) {
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
      if (shift) y = c.call("aten.add.Tensor", {y, mx}).tensor();
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
}

}  // namespace wgnn::onnx_import

// Shape and data-movement ONNX operators: views (Identity, Reshape, Flatten, Squeeze, Unsqueeze, Dropout), values known from shapes (Shape, Size, Constant, ConstantOfShape, Range, EyeLike), DepthToSpace, SpaceToDepth, Transpose, Concat, Split, Slice, Gather, GatherElements, Expand, Trilu, Tile, Pad, OneHot.
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

void add_shape_mappers(Mappers& m) {
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
                     // Exactly one value attribute (a function body's Constant
                     // whose value the call did not give has none).
                     if (c.node.attribute_size() != 1) {
                       c.fail(fmt::format("a Constant has exactly one value attribute; this one has {}",
                                          c.node.attribute_size()));
                     }
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
                  // Opset 27's stash_type 0 asks float16 to accumulate in
                  // float16; the values here come from start + i * delta in
                  // double, which is stash_type 1 (the default).
                  if (c.opset >= 27 && c.attr_int("stash_type", 1) != 1 && (s.dtype == DType::F16))
                    c.unsupported(fmt::format("stash_type {} (float16 accumulated in float16); supported: 1", c.attr_int("stash_type", 1)));
                  const int64_t n = std::max<int64_t>(int64_t(std::ceil((limit - start) / delta)), 0);
                  HostTensor t(s.dtype, {n});
                  for (int64_t i = 0; i < n; ++i) host::set(t, size_t(i), start + double(i) * delta);
                  return one(Slot::of_host(std::move(t)));
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
                         // mode (opset 28): the depth ordered block row, block
                         // column, channel (DCR, the only order before) or
                         // channel, block row, block column (CRD).
                         const std::string mode = c.opset >= 28 ? c.attr_string("mode", "DCR") : "DCR";
                         if (mode != "DCR" && mode != "CRD") c.fail(fmt::format("mode '{}' (accepted: DCR, CRD)", mode));
                         const int64_t N = s[0], C = s[1], H = s[2] / b, W = s[3] / b;
                         TensorRef v = c.view(c.tensor(0), {N, C, H, b, W, b});
                         const IntList perm = mode == "DCR" ? IntList{0, 3, 5, 1, 2, 4} : IntList{0, 1, 3, 5, 2, 4};
                         TensorRef t = c.call("aten.permute.default", {v, perm}).tensor();
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
  // CenterCropPad (opset 18): each listed axis cropped or zero-padded to
  // its size in `shape`, centred (an odd difference leaves the extra at
  // the end), as a slice and a pad.
  m["CenterCropPad"] = {{}, [](NodeCtx& c) {
                          const Shape& s = c.shape(0);
                          const int64_t r = int64_t(s.size());
                          const std::vector<int64_t> want = c.host_ints(1, "shape");
                          std::vector<int64_t> axes = c.attr_ints("axes");
                          if (axes.empty())
                            for (int64_t d = 0; d < r; ++d) axes.push_back(d);
                          if (want.size() != axes.size()) {
                            c.fail(fmt::format("shape has {} values for {} axes", want.size(), axes.size()));
                          }
                          TensorRef t = c.tensor(0);
                          IntList pads(size_t(2 * r), 0);  // aten.pad: (before, after) from the last dim back
                          bool padded = false;
                          for (size_t i = 0; i < axes.size(); ++i) {
                            const int64_t a = ops::normalize_axis(axes[i], r, "CenterCropPad", "axes");
                            const int64_t dim = s[size_t(a)], to = want[i];
                            if (to < 0) c.fail(fmt::format("shape value {} is negative", to));
                            if (to < dim) {
                              const int64_t start = (dim - to) / 2;
                              t = c.call("aten.slice.Tensor", {t, a, start, start + to, int64_t(1)}).tensor();
                            } else if (to > dim) {
                              const int64_t before = (to - dim) / 2;
                              pads[size_t(2 * (r - 1 - a))] = before;
                              pads[size_t(2 * (r - 1 - a) + 1)] = to - dim - before;
                              padded = true;
                            }
                          }
                          if (padded) t = c.call("aten.pad.default", {t, pads, std::string("constant"), 0.0}).tensor();
                          return one(c.out(t));
                        }, nullptr};
  m["Pad"] = {{}, [](NodeCtx& c) {
                const Shape& s = c.shape(0);
                const int64_t r = int64_t(s.size());
                std::string mode = c.attr_string("mode", "constant");
                // Opset 1 names the attribute `paddings`, 2 to 10 `pads`.
                std::vector<int64_t> pads = c.opset >= 11 ? c.host_ints(1, "pads")
                                            : c.opset >= 2 ? c.attr_ints("pads") : c.attr_ints("paddings");
                // A constant_value computed on the GPU (or a float graph
                // input): zeros padded, then that value where the mask of
                // the padding (built on the host) says.
                const bool gpu_value = c.opset >= 11 && c.has(2) && !c.is_host(2) &&
                                       !(c.builder && c.builder->host_value(c.node.input(2)));
                double value = c.opset >= 11 ? (c.has(2) && !gpu_value ? host::get(c.host(2, "constant_value"), 0) : 0.0)
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
                TensorRef y = c.call("aten.pad.default", {c.tensor(0), aten_pad, mode, value}).tensor();
                if (gpu_value && mode == "constant") {
                  if (numel(c.shape(2)) != 1) c.fail(fmt::format("constant_value {} must hold one value", shape_str(c.shape(2))));
                  const Shape os = c.g.info(y).shape;
                  HostTensor inside(DType::Bool, os);
                  for (int64_t i = 0; i < numel(os); ++i) {
                    int64_t rest = i;
                    bool in = true;
                    for (int64_t d = r - 1; d >= 0; --d) {
                      const int64_t at = rest % os[size_t(d)] - begin[size_t(d)];
                      rest /= os[size_t(d)];
                      in = in && at >= 0 && at < s[size_t(d)];
                    }
                    inside.data[size_t(i)] = in ? 1 : 0;
                  }
                  y = c.call("aten.where.self", {c.constant(inside), y, c.view(c.tensor(2), {})}).tensor();
                }
                return one(c.out(y));
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
}

}  // namespace wgnn::onnx_import

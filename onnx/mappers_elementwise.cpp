// Elementwise ONNX operators: unary math and activations, Clip, PRelu, binary and variadic arithmetic, comparisons and logic, Where, Cast, CastLike, IsNaN, IsInf, Shrink.
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

// ONNX PRelu: x where x >= 0, else slope * x, slope broadcasting to x (numpy
// rules). One value or one per channel (dim 1) is aten.prelu; other shapes
// compose where(x < 0, x * slope, x).
std::vector<Slot> prelu(NodeCtx& c) {
  const Shape& xs = c.shape(0);
  const Shape& ss = c.shape(1);
  if (c.dtype(1) != c.dtype(0)) c.fail("X and slope must have the same dtype");
  if (ss.size() > xs.size()) c.fail(fmt::format("slope {} has more dims than X {}", shape_str(ss), shape_str(xs)));
  // slope right-aligned to X: is it [C, 1, ..., 1] at dim 1?
  const size_t off = xs.size() - ss.size();
  bool per_channel = xs.size() >= 2;
  for (size_t d = 0; d < ss.size() && per_channel; ++d) {
    if (off + d != 1 && ss[d] != 1) per_channel = false;
    if (off + d == 1 && ss[d] != xs[1] && ss[d] != 1) per_channel = false;
  }
  TensorRef x = c.tensor(0);
  TensorRef slope = c.tensor(1);
  const int64_t n = numel(ss);
  if (n == 1) return one(c.out(c.call("aten.prelu.default", {x, c.view(slope, {1})})));
  // Opsets 1 to 6 (before numpy broadcasting): a 1-D slope of C values is one per channel.
  if (c.opset < 7 && ss.size() == 1 && xs.size() >= 2 && n == xs[1]) per_channel = true;
  if (per_channel && n == xs[1]) return one(c.out(c.call("aten.prelu.default", {x, c.view(slope, {n})})));
  HostTensor zero = host::scalar_like(c.dtype(0), 0.0);
  TensorRef z = c.constant(zero);
  TensorRef neg = c.call("aten.lt.Tensor", {x, z}).tensor();
  TensorRef scaled = c.call("aten.mul.Tensor", {x, slope}).tensor();
  if (c.g.info(scaled).shape != xs) c.fail(fmt::format("slope {} does not broadcast to X {}", shape_str(ss), shape_str(xs)));
  return one(c.out(c.call("aten.where.self", {neg, scaled, x})));
}

// GroupNormalization: opset 18 has one scale and bias per group, opset 21
// one per channel. Per-group constants are repeated per channel on the host;
// per-group tensors computed on the GPU scale the normalized groups.

}  // namespace

void add_elementwise_mappers(Mappers& m) {
  // Unary math.
  for (auto [onnx_op, aten] : std::initializer_list<std::pair<const char*, const char*>>{
           {"Relu", "aten.relu.default"},       {"Sigmoid", "aten.sigmoid.default"}, {"Tanh", "aten.tanh.default"},
           {"Exp", "aten.exp.default"},         {"Log", "aten.log.default"},         {"Sqrt", "aten.sqrt.default"},
           {"Reciprocal", "aten.reciprocal.default"}, {"Floor", "aten.floor.default"}, {"Ceil", "aten.ceil.default"},
           {"Round", "aten.round.default"},     {"Sin", "aten.sin.default"},         {"Cos", "aten.cos.default"},
           {"Erf", "aten.erf.default"},         {"Softplus", "aten.softplus.default"},
           {"HardSwish", "aten.hardswish.default"}, {"Tan", "aten.tan.default"}, {"Asin", "aten.asin.default"},
           {"Acos", "aten.acos.default"},       {"Atan", "aten.atan.default"},       {"Sinh", "aten.sinh.default"},
           {"Cosh", "aten.cosh.default"},       {"Asinh", "aten.asinh.default"},     {"Acosh", "aten.acosh.default"},
           {"Atanh", "aten.atanh.default"},     {"Softsign", "aten.softsign.default"}}) {
    m[onnx_op] = unary(aten);
  }
  m["Neg"] = unary("aten.neg.default");
  m["Abs"] = unary("aten.abs.default");
  m["Sign"] = unary("aten.sign.default");
  for (const char* op : {"Neg", "Abs", "Sign", "Sqrt", "Floor", "Ceil", "Reciprocal", "Exp", "Log", "Relu"}) {
    m[op].fold = [op = std::string(op)](NodeCtx& c) { return one_host(host::unary(op, c.host(0, "X"))); };
  }
  m["LeakyRelu"] = {kFloat, [](NodeCtx& c) {
                      return one(c.out(c.call("aten.leaky_relu.default",
                                              {c.tensor(0), double(c.attr_float("alpha", 0.01f))})));
                    }, nullptr};
  m["Elu"] = {kFloat, [](NodeCtx& c) {
                return one(c.out(c.call("aten.elu.default", {c.tensor(0), double(c.attr_float("alpha", 1.f))})));
              }, nullptr};
  m["HardSigmoid"] = {kFloat, [](NodeCtx& c) {
                        return one(c.out(c.call("aten.hardsigmoid.default",
                                                {c.tensor(0), double(c.attr_float("alpha", 0.2f)),
                                                 double(c.attr_float("beta", 0.5f))})));
                      }, nullptr};
  m["ThresholdedRelu"] = {kFloat, [](NodeCtx& c) {
                            return one(c.out(c.call("aten.threshold.default",
                                                    {c.tensor(0), double(c.attr_float("alpha", 1.f)), 0.0})));
                          }, nullptr};
  m["Celu"] = {kFloat, [](NodeCtx& c) {
                 return one(c.out(c.call("aten.celu.default", {c.tensor(0), double(c.attr_float("alpha", 1.f))})));
               }, nullptr};
  m["Selu"] = {kFloat, [](NodeCtx& c) {
                 return one(c.out(c.call("aten.selu.default", {c.tensor(0), double(c.attr_float("alpha", 1.67326319217681884765625f)),
                                                              double(c.attr_float("gamma", 1.05070102214813232421875f))})));
               }, nullptr};
  m["Gelu"] = {kFloat, [](NodeCtx& c) {
                 return one(c.out(c.call("aten.gelu.default",
                                         {c.tensor(0), c.attr_string("approximate", "none")})));
               }, nullptr};
  m["Clip"] = {{}, [](NodeCtx& c) {
                 if (!host::is_float(c.dtype(0))) {
                   TensorRef t = c.tensor(0);
                   if (c.has(1)) t = c.call("aten.maximum.default", {t, c.tensor(1)}).tensor();
                   if (c.has(2)) t = c.call("aten.minimum.default", {t, c.tensor(2)}).tensor();
                   return one(c.out(c.has(1) || c.has(2) ? t : c.view(t, c.shape(0))));
                 }
                 std::optional<double> lo, hi;
                 if (c.opset < 11) {
                   lo = double(c.attr_float("min", -std::numeric_limits<float>::max()));
                   hi = double(c.attr_float("max", std::numeric_limits<float>::max()));
                 } else {
                   // A bound computed on the GPU (not foldable on the host) is a tensor operand.
                   auto known = [&](size_t i) -> const HostTensor* {
                     if (c.is_host(i)) return &c.host(i, "bound");
                     return c.builder ? c.builder->host_value(c.node.input(int(i))) : nullptr;
                   };
                   if ((c.has(1) && !known(1)) || (c.has(2) && !known(2))) {
                     TensorRef t = c.tensor(0);
                     if (c.has(1)) t = c.call("aten.maximum.default", {t, c.tensor(1)}).tensor();
                     if (c.has(2)) t = c.call("aten.minimum.default", {t, c.tensor(2)}).tensor();
                     return one(c.out(t));
                   }
                   if (c.has(1)) lo = host::get(*known(1), 0);
                   if (c.has(2)) hi = host::get(*known(2), 0);
                   if (!lo && !hi) return one(c.out(c.view(c.tensor(0), c.shape(0))));
                 }
                 return one(c.out(c.call("aten.clamp.default", {c.tensor(0), lo ? Value(*lo) : Value(None{}),
                                                               hi ? Value(*hi) : Value(None{})})));
               }, nullptr};

  m["PRelu"] = {kFloat, prelu, nullptr};

  // Binary and variadic elementwise.
  // uint8 / int8 arithmetic wraps around (ops/binary.cpp), as ONNX Runtime's.
  const std::vector<DType> arith = {DType::F32, DType::F16, DType::I32, DType::I64, DType::U8, DType::I8};
  m["Add"] = binary("Add", "aten.add.Tensor", arith);
  m["Sub"] = binary("Sub", "aten.sub.Tensor", arith);
  m["Mul"] = binary("Mul", "aten.mul.Tensor", arith);
  m["Div"] = binary("Div", "aten.div.Tensor", arith);
  m["Pow"] = binary("Pow", "aten.pow.Tensor_Tensor", kNumeric);
  m["Mod"] = binary("Mod", "aten.remainder.Tensor", arith);
  m["Min"] = binary("Min", "aten.minimum.default", arith);
  m["Max"] = binary("Max", "aten.maximum.default", arith);
  m["Sum"] = binary("Sum", "aten.add.Tensor", kNumeric);
  m["Mean"] = {kFloat, [](NodeCtx& c) {
                 TensorRef acc = c.tensor(0);
                 for (size_t i = 1; i < c.inputs(); ++i) acc = c.call("aten.add.Tensor", {acc, c.tensor(i)}).tensor();
                 HostTensor k = host::scalar_like(c.dtype(0), 1.0 / double(c.inputs()));
                 TensorRef kt = c.constant(k);
                 return one(c.out(c.call("aten.mul.Tensor", {acc, kt})));
               }, nullptr};
  // Comparisons: 8-bit integers compare as the values they hold (int8
  // sign-extended, uint8 zero-extended in 32-bit words).
  std::vector<DType> order = kNumeric;
  order.insert(order.end(), {DType::U8, DType::I8});
  std::vector<DType> cmp = order;
  cmp.push_back(DType::Bool);
  m["Equal"] = binary("Equal", "aten.eq.Tensor", cmp);
  m["Less"] = binary("Less", "aten.lt.Tensor", order);
  m["LessOrEqual"] = binary("LessOrEqual", "aten.le.Tensor", order);
  m["Greater"] = binary("Greater", "aten.gt.Tensor", order);
  m["GreaterOrEqual"] = binary("GreaterOrEqual", "aten.ge.Tensor", order);
  m["And"] = binary("And", "aten.logical_and.default", kBool);
  m["Or"] = binary("Or", "aten.logical_or.default", kBool);
  m["Xor"] = binary("Xor", "aten.logical_xor.default", kBool);
  // Bitwise operators (opset 18) on int32, int64, uint8 and int8; Not as
  // xor with all ones of the dtype.
  const std::vector<DType> ints = {DType::I32, DType::I64, DType::U8, DType::I8};
  for (auto [onnx_op, aten] : std::initializer_list<std::pair<const char*, const char*>>{
           {"BitwiseAnd", "aten.bitwise_and.Tensor"}, {"BitwiseOr", "aten.bitwise_or.Tensor"},
           {"BitwiseXor", "aten.bitwise_xor.Tensor"}}) {
    m[onnx_op] = binary(onnx_op, aten, ints);
    m[onnx_op].fold = nullptr;
  }
  m["BitwiseNot"] = {ints, [](NodeCtx& c) {
                       const DType d = c.dtype(0);
                       TensorRef ones = c.constant(host::scalar_like(d, d == DType::U8 ? 255.0 : -1.0));
                       return one(c.out(c.call("aten.bitwise_xor.Tensor", {c.tensor(0), ones})));
                     }, nullptr};
  m["Not"] = unary("aten.logical_not.default", kBool);
  m["Not"].fold = [](NodeCtx& c) { return one_host(host::unary("Not", c.host(0, "X"))); };
  m["Where"] = {{}, [](NodeCtx& c) {
                  if (c.dtype(0) != DType::Bool) c.fail("condition must be bool");
                  return one(c.out(c.call("aten.where.self", {c.tensor(0), c.tensor(1), c.tensor(2)})));
                },
                [](NodeCtx& c) {
                  return one_host(host::where(c.host(0, "condition"), c.host(1, "X"), c.host(2, "Y")));
                }};
  m["Cast"] = {{}, [](NodeCtx& c) {
                 // fp16 mode: a Cast to float32 makes float16 (c.gpu_dtype).
                 const DType model_to = dtype_from_onnx(int(c.attr_int("to", 0)), c.where());
                 return one(c.out(cast_to(c, c.tensor(0), model_to)));
               },
               [](NodeCtx& c) {
                 return one_host(host::cast(c.host(0, "input"), dtype_from_onnx(int(c.attr_int("to", 0)), c.where())));
               }};

  m["CastLike"] = {{}, [](NodeCtx& c) {
                     // A widened float16 GPU tensor reads as float32 here, so only a
                     // host target says float16 (then the value is rounded to it).
                     return one(c.out(cast_to(c, c.tensor(0), c.slot_dtype(1))));
                   },
                   [](NodeCtx& c) {
                     return one_host(host::cast(c.host(0, "input"), c.host(1, "target_type").dtype));
                   }};

  // Data movement.
  m["IsNaN"] = {kFloat, [](NodeCtx& c) { return one(c.out(c.call("aten.isnan.default", {c.tensor(0)}))); }, nullptr};
  m["IsInf"] = {kFloat, [](NodeCtx& c) {
                  return one(c.out(c.call("wgnn.isinf.default", {c.tensor(0), c.attr_int("detect_positive", 1) != 0,
                                                                 c.attr_int("detect_negative", 1) != 0})));
                }, nullptr};
  // Shrink: x + bias below -lambd, x - bias above lambd, else 0.
  m["Shrink"] = {kFloat, [](NodeCtx& c) {
                   const double lambd = c.attr_float("lambd", 0.5f), bias = c.attr_float("bias", 0.f);
                   const DType dt = c.slot_dtype(0);
                   TensorRef x = c.tensor(0);
                   auto k = [&](double v) { return c.constant(host::scalar_like(dt, v)); };
                   TensorRef lo = c.call("aten.lt.Tensor", {x, k(-lambd)}).tensor();
                   TensorRef hi = c.call("aten.gt.Tensor", {x, k(lambd)}).tensor();
                   TensorRef plus = c.call("aten.add.Tensor", {x, k(bias)}).tensor();
                   TensorRef minus = c.call("aten.sub.Tensor", {x, k(bias)}).tensor();
                   TensorRef mid = c.call("aten.where.self", {hi, minus, k(0.0)}).tensor();
                   return one(c.out(c.call("aten.where.self", {lo, plus, mid})));
                 }, nullptr};
}

}  // namespace wgnn::onnx_import

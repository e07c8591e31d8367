// ONNX's quantized operators -> wgnn ops (ops/quantized.cpp):
// QuantizeLinear, DequantizeLinear (per tensor, per axis, blocked),
// DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger,
// QLinearConv and com.microsoft MatMulNBits (4-bit weights). uint8 and int8 values; zero points and scales of one value,
// or one per axis element / row / column / output channel where ONNX
// allows; anything else is Unsupported naming the node and what is missing.
// Scales are read in float32 even in fp16 mode (c.tensor_exact): a scale
// rounded to float16 would move values between quantization steps.
#include <fmt/format.h>

#include <functional>

#include "graph/half.h"
#include "onnx/host_ops.h"
#include "onnx/mappers_quant.h"
#include "ops/quantized.h"

namespace wgnn::onnx_import {
namespace {


int64_t float_code(DType d) { return d == DType::F16 ? 5 : 6; }  // ATen ScalarType
int64_t quant_code(DType d) { return d == DType::I8 ? 1 : d == DType::I32 ? 3 : 0; }

void require_quantized(NodeCtx& c, size_t i, const char* what) {
  const DType d = c.slot_dtype(i);
  if (d != DType::U8 && d != DType::I8) {
    c.unsupported(fmt::format("{} has dtype {}; supported: uint8, int8", what, dtype_name(d)));
  }
}

// The quantized dtype of QuantizeLinear's result: the zero point's, else
// output_dtype (opset 21), else uint8.
DType quantized_result(NodeCtx& c) {
  if (c.has(2)) {
    require_quantized(c, 2, "y_zero_point");
    return c.slot_dtype(2);
  }
  const int64_t odt = c.attr_int("output_dtype", 0);
  if (odt == 0 || odt == 2) return DType::U8;  // TensorProto UINT8
  if (odt == 3) return DType::I8;
  c.unsupported(fmt::format("output_dtype {} (supported: 2 uint8, 3 int8)", odt));
}

// QuantizeLinear's precision (opset 23): the type the division runs in,
// by default the scale's. wgnn divides in float32 (ops/kernels/
// quantize.wgsl), which is the default for a float32 scale; a float16 scale
// keeps the float32 division it had before opset 23.
void check_precision(NodeCtx& c) {
  if (c.opset < 23) return;
  const int64_t p = c.attr_int("precision", 0);
  if (p == 0 || p == 1) return;  // unset, TensorProto FLOAT
  if (p == 10 && c.slot_dtype(1) == DType::F16) return;  // FLOAT16: the scale's own
  c.unsupported(fmt::format("precision {} (supported: unset, 1 float, or 10 float16 with a float16 scale)", p));
}

// DequantizeLinear's result type: output_dtype (opset 23), else the
// scale's. float32 or float16.
DType dequantized_result(NodeCtx& c) {
  const DType scale = c.slot_dtype(1);
  if (c.opset < 23 || c.attr_int("output_dtype", 0) == 0) return scale;
  const int64_t odt = c.attr_int("output_dtype", 0);
  if (odt == 1) return DType::F32;
  if (odt == 10) return DType::F16;
  c.unsupported(fmt::format("output_dtype {} (supported: 1 float, 10 float16)", odt));
}

// How QuantizeLinear / DequantizeLinear apply their scale: per tensor (a
// scale of one value), per axis (a 1-D scale along `axis`) or blocked
// (opset 21 block_size: the scale has x's rank, ceil(dim / block) along
// the axis).
enum class QMode { Tensor, Axis, Blocked };
struct QdqLayout {
  QMode mode = QMode::Tensor;
  int64_t axis = 0, block = 0;
};

QdqLayout qdq_layout(NodeCtx& c) {
  const Shape& xs = c.shape(0);
  const Shape& ss = c.shape(1);
  const int64_t r = int64_t(xs.size());
  QdqLayout l;
  l.block = c.attr_int("block_size", 0);
  l.axis = c.attr_int("axis", 1);
  if (l.block > 0 || !(ss.size() == 0 || (ss.size() == 1 && ss[0] == 1))) {
    if (l.axis < -r || l.axis >= r) c.fail(fmt::format("axis {} is out of range for x {}", l.axis, shape_str(xs)));
    if (l.axis < 0) l.axis += r;
  }
  if (l.block > 0) {
    l.mode = QMode::Blocked;
    Shape want = xs;
    want[size_t(l.axis)] = (xs[size_t(l.axis)] + l.block - 1) / l.block;
    if (ss != want) {
      c.fail(fmt::format("scale {} must be {} (x {} in blocks of {} along axis {})", shape_str(ss), shape_str(want),
                         shape_str(xs), l.block, l.axis));
    }
  } else if (ss.size() == 0 || (ss.size() == 1 && ss[0] == 1)) {
    l.mode = QMode::Tensor;
  } else if (ss.size() == 1) {
    l.mode = QMode::Axis;
    if (ss[0] != xs[size_t(l.axis)]) {
      c.fail(fmt::format("scale {} must have x {}'s size along axis {}", shape_str(ss), shape_str(xs), l.axis));
    }
  } else {
    c.fail(fmt::format("scale {} must be a scalar or 1-D (or, with block_size, of x's rank)", shape_str(ss)));
  }
  if (c.has(2) && (l.mode == QMode::Tensor ? numel(c.shape(2)) != 1 : c.shape(2) != ss)) {
    c.fail(fmt::format("zero point {} and scale {} differ", shape_str(c.shape(2)), shape_str(ss)));
  }
  return l;
}

OpMapper qdq_mapper(bool quantize) {
  OpMapper m;
  m.dtypes = quantize ? std::vector<DType>{DType::F32, DType::F16}
                      : std::vector<DType>{DType::U8, DType::I8, DType::I32};
  m.build = [quantize](NodeCtx& c) {
    if (quantize) check_precision(c);
    const DType qd = quantize ? quantized_result(c) : c.slot_dtype(0);
    if (!quantize && c.has(2) && c.slot_dtype(2) != qd) {
      c.fail(fmt::format("x_zero_point has dtype {}, x {}", dtype_name(c.slot_dtype(2)), dtype_name(qd)));
    }
    const QdqLayout l = qdq_layout(c);
    const std::string base = quantize ? "quantize" : "dequantize";
    ValueList args{c.tensor(0), c.tensor_exact(1), c.has(2) ? Value(c.tensor(2)) : Value(None{})};
    std::string op;
    if (l.mode == QMode::Blocked) {
      op = "wgnn." + base + "_blocked.default";
      args.insert(args.end(), {l.axis, l.block});
    } else if (l.mode == QMode::Tensor) {
      op = "quantized_decomposed." + base + "_per_tensor.tensor";
      args[1] = c.view(args[1].tensor(), {});
      if (c.has(2)) args[2] = c.view(args[2].tensor(), {});
    } else {
      op = "quantized_decomposed." + base + "_per_channel.default";
      args.push_back(l.axis);
    }
    const auto [lo, hi] = qd == DType::U8 ? std::pair<int64_t, int64_t>{0, 255} : std::pair<int64_t, int64_t>{-128, 127};
    args.insert(args.end(), {lo, hi, quant_code(qd)});
    if (!quantize) args.push_back(float_code(c.gpu_dtype(dequantized_result(c))));
    return one(c.out(c.call(op, args)));
  };
  if (!quantize) {
    // Constant quantized weights (the QDQ form) are dequantized once, on
    // the host, with the kernel's arithmetic: float32(x - zero_point) * scale.
    m.fold = [](NodeCtx& c) {
      const HostTensor& x = c.host(0, "x");
      const HostTensor& s = c.host(1, "x_scale");
      if (x.dtype != DType::U8 && x.dtype != DType::I8 && x.dtype != DType::I32) {
        c.unsupported(fmt::format("x has dtype {}; supported: uint8, int8, int32", dtype_name(x.dtype)));
      }
      if (c.has(2) && c.slot_dtype(2) != x.dtype) {
        c.fail(fmt::format("x_zero_point has dtype {}, x {}", dtype_name(c.slot_dtype(2)), dtype_name(x.dtype)));
      }
      if (s.dtype != DType::F32 && s.dtype != DType::F16) {
        c.unsupported(fmt::format("x_scale has dtype {}; supported: float32, float16", dtype_name(s.dtype)));
      }
      const QdqLayout l = qdq_layout(c);
      const HostTensor* z = c.has(2) ? &c.host(2, "x_zero_point") : nullptr;
      HostTensor y = ops::dequantize_on_host(x, s, z, l.mode == QMode::Tensor ? 0 : l.axis, l.block,
                                             dequantized_result(c));
      std::vector<HostTensor> out;
      out.push_back(std::move(y));
      return out;
    };
    // Into the IR, the weights are dequantized only where a host value is
    // read: a product reads them as a node that passes fuse or fold once.
    m.defer = [fold = m.fold, build = m.build](NodeCtx& c) {
      if (c.slot_dtype(0) != DType::U8 && c.slot_dtype(0) != DType::I8 && c.slot_dtype(0) != DType::I32) {
        c.unsupported(fmt::format("x has dtype {}; supported: uint8, int8, int32", dtype_name(c.slot_dtype(0))));
      }
      if (c.has(2) && c.slot_dtype(2) != c.slot_dtype(0)) {
        c.fail(fmt::format("x_zero_point has dtype {}, x {}", dtype_name(c.slot_dtype(2)), dtype_name(c.slot_dtype(0))));
      }
      if (c.slot_dtype(1) != DType::F32 && c.slot_dtype(1) != DType::F16) {
        c.unsupported(fmt::format("x_scale has dtype {}; supported: float32, float16", dtype_name(c.slot_dtype(1))));
      }
      qdq_layout(c);
      const DType yd = dequantized_result(c);
      // The node's inputs (host values: initializers, or values folded
      // before it), kept with the node for the deferred fold or build.
      struct Node {
        const onnx::NodeProto* proto;
        int opset;
        Storage storage;
        Graph* graph;
        IrTrace* trace;
        std::vector<Slot> in;
        std::vector<bool> present;
        NodeCtx ctx(Graph& g, IrTrace* t) {
          std::vector<Slot*> p;
          for (size_t i = 0; i < in.size(); ++i) p.push_back(present[i] ? &in[i] : nullptr);
          NodeCtx c(g, *proto, opset, std::move(p), nullptr, storage);
          c.trace = t;
          return c;
        }
      };
      auto n = std::make_shared<Node>(Node{&c.node, c.opset, c.storage, &c.mut_graph(), c.trace, {}, {}});
      for (size_t i = 0; i < c.inputs(); ++i) {
        n->present.push_back(c.has(i));
        n->in.push_back(c.has(i) ? c.slot(i) : Slot{});
      }
      return one(Slot::of_deferred(
          yd, c.shape(0),
          [n, fold] {
            NodeCtx f = n->ctx(*n->graph, nullptr);
            return std::move(fold(f).at(0));
          },
          [n, build](Graph& g, IrTrace* t) -> TensorRef {
            // Only into the plan the node was read in (a subgraph's reader
            // is given the value folded).
            if (&g != n->graph || !t || t != n->trace) return TensorRef{-1};
            NodeCtx b = n->ctx(g, t);
            return build(b).at(0).ref;
          }));
    };
  }
  return m;
}

// A zero point or scale of a product operand: one value, or one per row of
// a [.., M, K] (shape [M] or [.., M, 1] with batch dims of 1) / per column
// of b [.., K, N] ([N] or [.., 1, N]).
void check_operand_param(NodeCtx& c, size_t i, const char* what, int64_t n, bool rows) {
  if (!c.has(i)) return;
  const Shape& s = c.shape(i);
  const int64_t k = numel(s);
  if (k == 1) return;
  bool ok = k == n;
  if (ok && s.size() >= 2) ok = rows ? s.back() == 1 : s[s.size() - 2] == 1;
  if (!ok) {
    c.unsupported(fmt::format("{} {}: supported are one value or one per {} ({} values)", what, shape_str(s),
                              rows ? "row of a" : "column of b", n));
  }
}

// numpy matmul of a (input ia) and b (input ib) through the 3-D op `op`
// (a [Ba, M, K] @ b [Bb, K, N], Ba and Bb 1 or the batch). `extra(a, b)`
// gives the op's arguments.
std::vector<Slot> integer_matmul(NodeCtx& c, size_t ia, size_t ib, const std::string& op,
                                 const std::function<ValueList(TensorRef, TensorRef)>& extra) {
  Shape as = c.shape(ia), bs = c.shape(ib);
  if (as.empty() || bs.empty()) c.fail("a and b must have at least one dim");
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) c.fail(fmt::format("a {} and b {} do not multiply", shape_str(c.shape(ia)), shape_str(c.shape(ib))));
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch(std::max(ab.size(), bb.size()), 1);
  for (size_t j = 0; j < batch.size(); ++j) {
    const int64_t x = j + ab.size() >= batch.size() ? ab[j + ab.size() - batch.size()] : 1;
    const int64_t y = j + bb.size() >= batch.size() ? bb[j + bb.size() - batch.size()] : 1;
    if (x != y && x != 1 && y != 1) c.fail(fmt::format("batch dims of a {} and b {} do not broadcast", shape_str(as), shape_str(bs)));
    batch[j] = std::max(x, y);
  }
  const int64_t nb = numel(batch);
  auto as3 = [&](size_t i, const Shape& full, const Shape& own, int64_t rows, int64_t cols) {
    TensorRef t = c.view(c.tensor(i), full);
    if (numel(own) != 1 && numel(own) != nb) {  // a partial broadcast: materialize the batch
      Shape target = batch;
      target.insert(target.end(), {rows, cols});
      IntList sizes(target.begin(), target.end());
      Shape padded = full;
      while (padded.size() < target.size()) padded.insert(padded.begin(), 1);
      t = c.call("aten.expand.default", {c.view(t, padded), sizes}).tensor();
      return c.view(t, {nb, rows, cols});
    }
    return c.view(t, {numel(own), rows, cols});
  };
  const TensorRef A = as3(ia, as, ab, M, K), B = as3(ib, bs, bb, K, N);
  TensorRef y = c.call(op, extra(A, B)).tensor();
  Shape out = batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  return one(c.out(c.view(y, out)));
}

Value zp_arg(NodeCtx& c, size_t i) {
  if (!c.has(i)) return None{};
  return c.view(c.tensor(i), {numel(c.shape(i))});
}
Value scale_arg(NodeCtx& c, size_t i) { return c.view(c.tensor_exact(i), {numel(c.shape(i))}); }

int64_t rows_of(const Shape& s) { return s.size() >= 2 ? s[s.size() - 2] : 1; }

OpMapper matmul_integer_mapper() {
  OpMapper m;
  m.dtypes = {DType::U8, DType::I8};
  m.build = [](NodeCtx& c) {
    require_quantized(c, 1, "B");
    check_operand_param(c, 2, "a_zero_point", rows_of(c.shape(0)), true);
    check_operand_param(c, 3, "b_zero_point", c.shape(1).back(), false);
    return integer_matmul(c, 0, 1, "wgnn.matmul_integer.default", [&](TensorRef a, TensorRef b) {
      return ValueList{a, b, zp_arg(c, 2), zp_arg(c, 3)};
    });
  };
  return m;
}

OpMapper qlinear_matmul_mapper() {
  OpMapper m;
  m.dtypes = {DType::U8, DType::I8};
  m.build = [](NodeCtx& c) {
    require_quantized(c, 3, "b");
    require_quantized(c, 7, "y_zero_point");
    const int64_t M = rows_of(c.shape(0)), N = c.shape(3).back();
    check_operand_param(c, 1, "a_scale", M, true);
    check_operand_param(c, 2, "a_zero_point", M, true);
    check_operand_param(c, 4, "b_scale", N, false);
    check_operand_param(c, 5, "b_zero_point", N, false);
    if (numel(c.shape(6)) != 1 || numel(c.shape(7)) != 1) c.unsupported("y_scale and y_zero_point must be one value each");
    return integer_matmul(c, 0, 3, "wgnn.qlinear_matmul.default", [&](TensorRef a, TensorRef b) {
      return ValueList{a, scale_arg(c, 1), zp_arg(c, 2), b, scale_arg(c, 4), zp_arg(c, 5), scale_arg(c, 6), zp_arg(c, 7)};
    });
  };
  return m;
}

// The geometry of ConvInteger / QLinearConv (x input 0, w input `wi`):
// strides, begin-then-end pads (from pads or auto_pad), dilations, group.
struct ConvGeometry {
  IntList strides, pads, dilations;
  int64_t group = 1;
};

ConvGeometry conv_geometry(NodeCtx& c, size_t wi) {
  const Shape& xs = c.shape(0);
  const Shape& ws = c.shape(wi);
  if (xs.size() < 3 || xs.size() > 5) c.unsupported(fmt::format("x {}: supported are 1 to 3 spatial dims", shape_str(xs)));
  if (ws.size() != xs.size()) c.fail(fmt::format("w {} and x {} differ in rank", shape_str(ws), shape_str(xs)));
  const size_t d = xs.size() - 2;
  const IntList kernel(ws.begin() + 2, ws.end());
  if (c.has_attr("kernel_shape") && c.attr_ints("kernel_shape") != kernel) {
    c.fail(fmt::format("attribute 'kernel_shape' {} does not match w {}", shape_str(c.attr_ints("kernel_shape")), shape_str(ws)));
  }
  ConvGeometry geo{spatial_attr(c, "strides", d, 1), {}, spatial_attr(c, "dilations", d, 1), c.attr_int("group", 1)};
  geo.pads = window_pads(c, kernel, geo.strides, geo.dilations);
  return geo;
}

void check_per_tensor(NodeCtx& c, size_t i, const char* what) {
  if (c.has(i) && numel(c.shape(i)) != 1) {
    c.unsupported(fmt::format("{} {}: supported is one value (per tensor)", what, shape_str(c.shape(i))));
  }
}
void check_per_channel(NodeCtx& c, size_t i, const char* what, int64_t co) {
  if (c.has(i) && numel(c.shape(i)) != 1 && !(c.shape(i).size() == 1 && c.shape(i)[0] == co)) {
    c.unsupported(fmt::format("{} {}: supported are one value or one per output channel ({})", what,
                              shape_str(c.shape(i)), co));
  }
}

OpMapper conv_integer_mapper() {
  OpMapper m;
  m.dtypes = {DType::U8, DType::I8};
  m.build = [](NodeCtx& c) {
    require_quantized(c, 1, "w");
    check_per_tensor(c, 2, "x_zero_point");
    check_per_channel(c, 3, "w_zero_point", c.shape(1)[0]);
    const ConvGeometry geo = conv_geometry(c, 1);
    return one(c.out(c.call("wgnn.conv_integer.default", {c.tensor(0), c.tensor(1), zp_arg(c, 2), zp_arg(c, 3),
                                                          geo.strides, geo.pads, geo.dilations, geo.group})));
  };
  return m;
}

OpMapper qlinear_conv_mapper() {
  OpMapper m;
  m.dtypes = {DType::U8, DType::I8};
  m.build = [](NodeCtx& c) {
    require_quantized(c, 3, "w");
    require_quantized(c, 7, "y_zero_point");
    const int64_t co = c.shape(3)[0];
    check_per_tensor(c, 1, "x_scale");
    check_per_tensor(c, 2, "x_zero_point");
    check_per_channel(c, 4, "w_scale", co);
    check_per_channel(c, 5, "w_zero_point", co);
    check_per_tensor(c, 6, "y_scale");
    check_per_tensor(c, 7, "y_zero_point");
    const ConvGeometry geo = conv_geometry(c, 3);
    return one(c.out(c.call("wgnn.qlinear_conv.default",
                            {c.tensor(0), scale_arg(c, 1), zp_arg(c, 2), c.tensor(3), scale_arg(c, 4), zp_arg(c, 5),
                             scale_arg(c, 6), zp_arg(c, 7), c.has(8) ? Value(c.tensor(8)) : Value(None{}), geo.strides,
                             geo.pads, geo.dilations, geo.group})));
  };
  return m;
}

// DynamicQuantizeLinear: float32 x -> uint8 y, float32 y_scale, uint8
// y_zero_point (the range from the data, ops/quantized.cpp).
OpMapper dynamic_quantize_mapper() {
  OpMapper m;
  m.dtypes = {DType::F32, DType::F16};
  m.build = [](NodeCtx& c) {
    if (c.slot_dtype(0) != DType::F32 && c.gpu_dtype(DType::F32) != c.slot_dtype(0)) {
      c.unsupported(fmt::format("x has dtype {}; supported: float32", dtype_name(c.slot_dtype(0))));
    }
    TensorRef x = c.tensor(0);
    if (c.g.info(x).dtype != DType::F32) x = c.call("aten._to_copy.default", {x, int64_t(6)}).tensor();
    const ValueList r = c.call("wgnn.dynamic_quantize_linear.default", {x}).list();
    TensorRef scale = r[1].tensor();
    if (c.gpu_dtype(DType::F32) != DType::F32) scale = c.call("aten._to_copy.default", {scale, float_code(c.gpu_dtype(DType::F32))}).tensor();
    std::vector<Slot> out;
    out.push_back(c.out(r[0]));
    out.push_back(c.out(scale));
    out.push_back(c.out(r[2]));
    return out;
  };
  return m;
}

// com.microsoft MatMulNBits (ONNX Runtime's contrib op): Y = A @ B^T (+
// bias), B [N, K] quantized in blocks of block_size along K. B is uint8
// [N, k_blocks, block_size * bits / 8], two 4-bit values a byte (the low
// nibble first); scales [N * k_blocks] (or [N, k_blocks]) of A's dtype;
// zero_points uint8, packed the same way per row (ceil(k_blocks / 2) bytes),
// 8 when absent; g_idx (deprecated) absent; bias [N]. bits 4 only.
// accuracy_level is ignored: products are float32 (as ONNX Runtime's CPU
// computes float32 for accuracy levels 0 to 3). B and the zero points must
// be constants: their bytes are uploaded as they are, four to a 32-bit word
// (ops/quantized.cpp unpacks them in the kernel).
OpMapper matmul_nbits_mapper() {
  OpMapper m;
  m.dtypes = {DType::F32, DType::F16};
  m.build = [](NodeCtx& c) {
    const int64_t bits = c.attr_int("bits", 4);
    if (bits != 4) c.unsupported(fmt::format("bits {} (supported: 4)", bits));
    if (!c.has_attr("K") || !c.has_attr("N") || !c.has_attr("block_size")) c.fail("attributes K, N and block_size are required");
    const int64_t K = c.attr_int("K", 0), N = c.attr_int("N", 0), block = c.attr_int("block_size", 0);
    if (c.has(4)) c.unsupported("g_idx (a permutation of K, deprecated in ONNX Runtime) is not supported");
    if (K <= 0 || N <= 0 || block < 16 || (block & (block - 1)) != 0) {
      c.fail(fmt::format("K {}, N {} and block_size {}: K and N must be positive, block_size a power of two >= 16", K, N, block));
    }
    const Shape& as = c.shape(0);
    if (as.empty() || as.back() != K) c.fail(fmt::format("A {} must end in K = {}", shape_str(as), K));
    const int64_t k_blocks = (K + block - 1) / block, blob = block * bits / 8;
    const HostTensor& b = c.host(1, "B (the quantized weights)");
    if (b.dtype != DType::U8) c.fail(fmt::format("B has dtype {}; expected uint8", dtype_name(b.dtype)));
    if (b.shape != Shape{N, k_blocks, blob}) {
      c.fail(fmt::format("B {} must be [N, k_blocks, blob_size] = [{}, {}, {}]", shape_str(b.shape), N, k_blocks, blob));
    }
    HostTensor bw(DType::I32, {N, k_blocks * blob / 4});
    std::copy(b.data.begin(), b.data.end(), bw.data.begin());
    const Shape& ss = c.shape(2);
    if (numel(ss) != N * k_blocks || (ss != Shape{N * k_blocks} && ss != Shape{N, k_blocks})) {
      c.fail(fmt::format("scales {} must be [{}] (N * k_blocks) or [{}, {}]", shape_str(ss), N * k_blocks, N, k_blocks));
    }
    Value zp = None{};
    if (c.has(3)) {
      const DType zd = c.slot_dtype(3);
      if (zd != DType::U8) {
        c.unsupported(fmt::format("zero_points of dtype {} (supported: uint8, packed 4-bit values)", dtype_name(zd)));
      }
      const HostTensor& z = c.host(3, "zero_points");
      const int64_t row_bytes = (k_blocks + 1) / 2;
      if (z.numel() != N * row_bytes) {
        c.fail(fmt::format("zero_points {} must hold N * ceil(k_blocks / 2) = {} bytes", shape_str(z.shape), N * row_bytes));
      }
      HostTensor zw(DType::I32, {(N * row_bytes + 3) / 4});
      std::copy(z.data.begin(), z.data.end(), zw.data.begin());
      zp = c.constant(zw, "zero_points (packed)");
    }
    const int64_t M = numel(as) / K;
    TensorRef a = c.view(c.tensor(0), {M, K});
    Value bias = None{};
    if (c.has(5)) {
      if (c.shape(5) != Shape{N}) c.fail(fmt::format("bias {} must be [{}]", shape_str(c.shape(5)), N));
      bias = c.tensor(5);
    }
    TensorRef y = c.call("wgnn.matmul_nbits.default", {a, c.constant(bw, "B (packed)"),
                                                       c.view(c.tensor_exact(2), {N * k_blocks}), zp, bias, K, N, block})
                      .tensor();
    Shape out = as;
    out.back() = N;
    return one(c.out(c.view(y, out)));
  };
  return m;
}

}  // namespace

void add_quant_mappers(std::map<std::string, OpMapper>& m) {
  m["QuantizeLinear"] = qdq_mapper(true);
  m["DequantizeLinear"] = qdq_mapper(false);
  m["DynamicQuantizeLinear"] = dynamic_quantize_mapper();
  m["MatMulInteger"] = matmul_integer_mapper();
  m["QLinearMatMul"] = qlinear_matmul_mapper();
  m["ConvInteger"] = conv_integer_mapper();
  m["QLinearConv"] = qlinear_conv_mapper();
  m["com.microsoft.MatMulNBits"] = matmul_nbits_mapper();
}

}  // namespace wgnn::onnx_import

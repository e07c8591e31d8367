// Quantized ops: quantize / dequantize (per tensor, per channel, blocked),
// ONNX's DynamicQuantizeLinear, and integer matrix products and
// convolutions (int32 accumulation, optionally requantized to uint8/int8).
//
// uint8 and int8 values live on the GPU as 32-bit integers, as every
// non-float dtype does (graph/tensor.h gpu_dtype_size): uint8 as u32 0..255,
// int8 as i32 -128..127. Both read correctly as i32, so every kernel here
// reads quantized storage as array<i32> and writes uint8/int8 results as
// i32 bits (a uint8 value has the same bits in u32 and i32).
//
// Kernels:
//   - kernels/quantize.wgsl: quantize (x / scale rounded half to even, plus
//     the zero point, saturated) and dequantize ((q - zp) * scale), one
//     element per invocation;
//   - kernels/matmul_integer.wgsl: (a - a_zp) @ (b - b_zp) in i32, 16x16
//     tiles through workgroup memory, int32 out or requantized;
//   - kernels/conv_integer_tiled.wgsl: a convolution (1-D to 3-D, groups,
//     stride, padding, dilation) as an implicit GEMM in i32, tiles staged in
//     workgroup memory with the zero points subtracted, the k table of
//     ops/conv_tile.h, int32 out or requantized;
//   - kernels/conv_integer.wgsl: the same convolution direct, one output per
//     invocation: for one input channel per group, and for every one with
//     WGNN_CONV_INTEGER=direct; both share the epilogue (bit-identical
//     results: integer sums);
//   - kernels/matmul_qweight.wgsl: a float product with quantized weights
//     unpacked and dequantized in the kernel as its tiles are staged (no
//     float copy of the weights): 4-bit block-quantized (com.microsoft
//     MatMulNBits) or 8-bit, four to a word (DequantizeLinear then MatMul,
//     fused by passes/fuse_matmul_dequant.cpp).
// The integer products multiply i32 values, one per 32-bit word (the
// tensors' storage). Where the instance offers the WGSL language feature
// packed_4x8_integer_dot_product (gpu::Features::packed_4x8_dot),
// MatMulInteger and QLinearMatMul stage their tiles four 8-bit values to a
// word and multiply them with dot4I8Packed
// (kernels/matmul_integer_dot4.wgsl); WGNN_DOT4=0 in the environment takes
// the unpacked kernel everywhere. The convolutions stay unpacked.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "graph/half.h"
#include "ops/conv_tile.h"
#include "ops/helpers.h"
#include "ops/quantized.h"
#include "ops/uniforms.h"
#include "ops/registry.h"

namespace wgnn::ops {
namespace {

bool is_quantized(DType d) { return d == DType::U8 || d == DType::I8; }

// The quantized dtype of ATen ScalarType code `code` (0 uint8, 1 int8; 3
// int32 where `int32` allows it: dequantizing int32).
DType quant_dtype(const Args& a, size_t i, bool int32) {
  const int64_t code = a.integer(i, "dtype", 0);
  if (code == 0) return DType::U8;
  if (code == 1) return DType::I8;
  if (code == 3 && int32) return DType::I32;
  a.fail(fmt::format("argument 'dtype' is {}; accepted ScalarType codes: 0 (uint8), 1 (int8){}", code,
                     int32 ? ", 3 (int32)" : ""));
}

std::pair<int32_t, int32_t> quant_range(DType d) {
  if (d == DType::I32) return {INT32_MIN, INT32_MAX};
  return d == DType::U8 ? std::pair{0, 255} : std::pair{-128, 127};
}

// The WGSL type of a float32 / float16 scale (and whether it needs f16).
std::string scale_type(const Args& a, TensorRef s, std::string_view name, bool& needs_f16) {
  a.require_float(s, name);
  if (a.g.info(s).dtype == DType::F16) {
    if (!a.g.ctx().features().shader_f16) a.fail(fmt::format("argument '{}' is float16; this adapter lacks shader-f16", name));
    needs_f16 = true;
    return "f16";
  }
  return "f32";
}

void require_quantized(const Args& a, TensorRef t, std::string_view name, DType want = DType::F32) {
  const DType d = a.g.info(t).dtype;
  if (!is_quantized(d)) a.fail(fmt::format("argument '{}' has dtype {}; accepted: uint8, int8", name, dtype_name(d)));
  if (want != DType::F32 && d != want) {
    a.fail(fmt::format("argument '{}' has dtype {}; expected {}", name, dtype_name(d), dtype_name(want)));
  }
}


enum class QMode { Tensor, Channel, Blocked };

// quantize_per_tensor.tensor(input, scale, zero_point, quant_min, quant_max, dtype)
// quantize_per_channel.default(input, scales, zero_points, axis, quant_min, quant_max, dtype)
// wgnn.quantize_blocked.default(input, scales, zero_points, axis, block_size, quant_min, quant_max, dtype)
// and the dequantize ops with the same arguments. zero_point may be None
// (0); it has the quantized dtype and the scale's shape. Dequantize returns
// the scale's dtype, or out_dtype (an argument after dtype: ScalarType 5
// float16, 6 float32), and also takes int32 input (dtype 3, int32 zero
// points). Input and scale may differ in float dtype (float16 input, a
// float32 scale).
Value qdq(Graph& g, const ValueList& args, std::string_view op, bool quantize, QMode mode) {
  Args a{op, args, g};
  const TensorRef x = a.tensor(0, "input");
  const TensorRef s = a.tensor(1, "scale");
  const TensorRef zp = a.optional_tensor(2, "zero_point");
  const TensorInfo& xi = g.info(x);
  const TensorInfo& si = g.info(s);
  size_t next = 3;
  int64_t axis = 0, block = 1;
  if (mode != QMode::Tensor) {
    axis = a.integer(next++, "axis", 0);
    const int64_t r = int64_t(xi.shape.size());
    if (axis < -r || axis >= r) a.fail(fmt::format("axis {} is out of range for input of rank {}", axis, r));
    if (axis < 0) axis += r;
  }
  if (mode == QMode::Blocked) {
    block = a.integer(next++, "block_size", 0);
    if (block <= 0) a.fail(fmt::format("block_size is {}; it must be positive", block));
  }
  const int64_t qmin_arg = a.integer(next, "quant_min", 0), qmax_arg = a.integer(next + 1, "quant_max", 0);
  const DType qd = quant_dtype(a, next + 2, !quantize);
  auto [qmin, qmax] = quant_range(qd);
  if (quantize) {
    if (qmin_arg < qmin || qmax_arg > qmax || qmin_arg > qmax_arg) {
      a.fail(fmt::format("quant range [{}, {}] is not within {}'s [{}, {}]", qmin_arg, qmax_arg, dtype_name(qd), qmin,
                         qmax));
    }
    qmin = int32_t(qmin_arg);
    qmax = int32_t(qmax_arg);
    a.require_float(x, "input");
  } else if (xi.dtype != qd) {
    a.fail(fmt::format("argument 'input' has dtype {}; 'dtype' says {}", dtype_name(xi.dtype), dtype_name(qd)));
  }
  if (zp.id >= 0) {
    const TensorInfo& zi = g.info(zp);
    if (zi.dtype != qd) {
      a.fail(fmt::format("zero_point has dtype {}; expected {}", dtype_name(zi.dtype), dtype_name(qd)));
    }
    if (zi.shape != si.shape && !(mode == QMode::Tensor && zi.numel() == 1)) {
      a.fail(fmt::format("zero_point {} and scale {} differ in shape", shape_str(zi.shape), shape_str(si.shape)));
    }
  }
  QdqParams p{};
  p.count = uint32_t(xi.numel());
  p.inner = 1;
  p.dim = 1;
  p.block = uint32_t(block);
  p.sdim = 1;
  if (mode == QMode::Tensor) {
    if (si.numel() != 1) a.fail(fmt::format("scale {} must hold one value (per tensor)", shape_str(si.shape)));
  } else {
    for (size_t d = size_t(axis) + 1; d < xi.shape.size(); ++d) p.inner *= uint32_t(xi.shape[d]);
    p.dim = uint32_t(xi.shape[size_t(axis)]);
    if (mode == QMode::Channel) {
      if (si.shape.size() != 1 || si.shape[0] != xi.shape[size_t(axis)]) {
        a.fail(fmt::format("scale {} must be 1-D with input {}'s size {} along axis {}", shape_str(si.shape),
                           shape_str(xi.shape), xi.shape[size_t(axis)], axis));
      }
    } else {
      Shape want = xi.shape;
      want[size_t(axis)] = (xi.shape[size_t(axis)] + block - 1) / block;
      if (si.shape != want) {
        a.fail(fmt::format("scale {} must be {} (input {}, blocks of {} along axis {})", shape_str(si.shape),
                           shape_str(want), shape_str(xi.shape), block, axis));
      }
      p.sdim = uint32_t(want[size_t(axis)]);
    }
  }
  p.mode = uint32_t(mode);
  p.has_zp = zp.id >= 0 ? 1 : 0;
  p.qmin = qmin;
  p.qmax = qmax;
  for (auto [t, n] : {std::pair{x, "input"}, std::pair{s, "scale"}}) a.require_fits_binding(t, n);
  if (xi.numel() >= (int64_t(1) << 32)) a.fail("input has 2^32 elements or more");

  bool f16 = false;
  const std::string S = scale_type(a, s, "scale", f16);
  DType out_dtype = quantize ? qd : si.dtype;
  if (!quantize && next + 3 < args.size() && !args[next + 3].is_none()) {
    const int64_t code = a.integer(next + 3, "out_dtype", 6);
    if (code != 5 && code != 6) a.fail(fmt::format("argument 'out_dtype' is {}; accepted: 5 (float16), 6 (float32)", code));
    out_dtype = code == 5 ? DType::F16 : DType::F32;
  }
  const std::string src = quantize ? (xi.dtype == DType::F16 ? "f16" : "f32") : "i32";
  if (quantize && xi.dtype == DType::F16) f16 = true;
  if (out_dtype == DType::F16) {
    if (!g.ctx().features().shader_f16) a.fail("a float16 result needs shader-f16, which this adapter lacks");
    f16 = true;
  }
  const std::string dst = quantize ? "i32" : out_dtype == DType::F16 ? "f16" : "f32";
  Subs subs = {{"ENABLE", f16 ? "enable f16;" : ""}, {"SRC", src}, {"DST", dst}, {"S", S}};
  subs.emplace_back("BODY", quantize ? "  let sc = f32(scale[s]);\n"
                                       "  let q = select(round_div(f32(src[i]), sc), 0.0, sc == 0.0) + f32(z);\n"
                                       "  dst[i] = i32(clamp(q, f32(params.qmin), f32(params.qmax)));"
                                     : "  dst[i] = " + dst + "(f32(src[i] - z) * f32(scale[s]));");
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/quantize.wgsl", subs);
  const TensorRef y = g.add_tensor(xi.shape, out_dtype);
  g.add_dispatch(pl, {Binding::of(y), g.uniform(p), Binding::of(x), Binding::of(s), optional_input(g, zp.id >= 0 ? Value(zp) : Value(None{}))},
                 grid_for(g, gpu::ceil_div(uint64_t(p.count), 256)), std::string(op),
                 quantize ? "quantize" : "dequantize");
  return y;
}

// ---- integer products -------------------------------------------------------

// A zero point (or scale) of a product operand: one value, or one per row
// (a) / column (b) / output channel. Returns 1 for per-row, 0 for one value.
uint32_t per_index(const Args& a, TensorRef t, std::string_view name, int64_t n, std::string_view what) {
  const int64_t k = a.g.info(t).numel();
  if (k == 1) return 0;
  if (k == n) return 1;
  a.fail(fmt::format("argument '{}' {} must hold one value or one per {} ({})", name, shape_str(a.g.info(t).shape), what,
                     n));
}

// The requantization's inputs (QLinear ops): scales of both operands and of
// the result, the result's zero point, and a convolution's int32 bias.
struct Requant {
  TensorRef a_scale, b_scale, y_scale, y_zp, bias{-1};
};

// The product kernels' binding 6: every requantization parameter in one
// buffer (kernels/qside.wgsl packs them; WebGPU's default limit is 8 storage
// buffers per stage). a_scale at 0, b_scale at off_sb, y_scale at off_y,
// y_zero_point at off_y + 1, the bias from off_y + 2.
const char* kSideBinding = "@group(0) @binding(6) var<storage, read> side: array<u32>;\n";


// Checks the requantization arguments and records the dispatch that packs
// them (an init dispatch when all are constants). Returns the packed buffer
// and sets off_sb / off_y.
gpu::Buffer pack_requant(const Args& a, const Requant& r, uint32_t& off_sb, uint32_t& off_y) {
  Graph& g = a.g;
  bool f16 = false;
  const std::string SA = scale_type(a, r.a_scale, "a_scale", f16), SB = scale_type(a, r.b_scale, "b_scale", f16),
                    SY = scale_type(a, r.y_scale, "y_scale", f16);
  if (g.info(r.y_scale).numel() != 1) a.fail("y_scale must hold one value (per tensor)");
  if (g.info(r.y_zp).numel() != 1) a.fail("y_zero_point must hold one value (per tensor)");
  require_quantized(a, r.y_zp, "y_zero_point");
  SideParams p{uint32_t(g.info(r.a_scale).numel()), uint32_t(g.info(r.b_scale).numel()),
               r.bias.id >= 0 ? uint32_t(g.info(r.bias).numel()) : 0u, 0};
  p.total = p.nsa + p.nsb + 2 + p.nbias;
  off_sb = p.nsa;
  off_y = p.nsa + p.nsb;
  gpu::Buffer side = g.scratch(uint64_t(p.total) * 4, "requantization parameters");
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/qside.wgsl",
                                   {{"ENABLE", f16 ? "enable f16;" : ""}, {"SA", SA}, {"SB", SB}, {"SY", SY}});
  std::vector<Binding> b = {Binding::of(side), g.uniform(p), Binding::of(r.a_scale), Binding::of(r.b_scale),
                            Binding::of(r.y_scale), Binding::of(r.y_zp),
                            r.bias.id >= 0 ? Binding::of(r.bias) : Binding::of(g.ctx().dummy_buffer())};
  bool constant = true;
  for (TensorRef t : {r.a_scale, r.b_scale, r.y_scale, r.y_zp, r.bias}) {
    if (t.id >= 0 && g.info(t).kind != TensorKind::Constant) constant = false;
  }
  const gpu::Grid grid = grid_for(g, gpu::ceil_div(uint64_t(p.total), 64));
  if (constant) {
    g.add_init_dispatch(pl, std::move(b), grid, std::string(a.op), "requantization parameters");
  } else {
    g.add_dispatch(pl, std::move(b), grid, std::string(a.op), "requantization parameters");
  }
  return side;
}

// The requantize epilogue: `acc_expr` (i32), the scale indices `ia`, `ib`.
std::string requant_epilogue(const std::string& acc_expr, const std::string& ia, const std::string& ib) {
  return fmt::format(
      "    let y0 = params.off_y;\n"
      "    let ms = bitcast<f32>(side[{}]) * bitcast<f32>(side[params.off_sb + {}]) / bitcast<f32>(side[y0]);\n"
      "    let q = round(f32({}) * ms) + f32(bitcast<i32>(side[y0 + 1u]));\n"
      "    dst[o] = i32(clamp(q, f32(params.qmin), f32(params.qmax)));",
      ia, ib, acc_expr);
}


// a [Ba, M, K], b [Bb, K, N] (Ba, Bb 1 or the batch), zero points None, one
// value or per row of a / column of b. With `rq`, the result is requantized.
TensorRef matmul_integer(const Args& a, TensorRef A, TensorRef B, TensorRef azp, TensorRef bzp, const Requant* rq) {
  Graph& g = a.g;
  require_quantized(a, A, "a");
  require_quantized(a, B, "b");
  const Shape as = g.info(A).shape, bs = g.info(B).shape;
  if (as.size() != 3 || bs.size() != 3) a.fail(fmt::format("a {} and b {} must be 3-D (batch, rows, columns)", shape_str(as), shape_str(bs)));
  const int64_t M = as[1], K = as[2], N = bs[2];
  if (bs[1] != K) a.fail(fmt::format("a {} and b {} do not multiply", shape_str(as), shape_str(bs)));
  const int64_t batch = std::max(as[0], bs[0]);
  if ((as[0] != 1 && as[0] != batch) || (bs[0] != 1 && bs[0] != batch)) {
    a.fail(fmt::format("batch sizes of a {} and b {} do not broadcast", shape_str(as), shape_str(bs)));
  }
  MatmulIntParams p{};
  p.M = uint32_t(M);
  p.N = uint32_t(N);
  p.K = uint32_t(K);
  p.batch = uint32_t(batch);
  p.a_bstride = as[0] == 1 ? 0 : uint32_t(M * K);
  p.b_bstride = bs[0] == 1 ? 0 : uint32_t(K * N);
  if (azp.id >= 0) {
    require_quantized(a, azp, "a_zero_point", g.info(A).dtype);
    p.a_zp_rows = per_index(a, azp, "a_zero_point", M, "row of a");
  }
  if (bzp.id >= 0) {
    require_quantized(a, bzp, "b_zero_point", g.info(B).dtype);
    p.b_zp_cols = per_index(a, bzp, "b_zero_point", N, "column of b");
  }
  p.tiles_m = uint32_t((M + 15) / 16);
  p.tiles_n = uint32_t((N + 15) / 16);
  for (auto [t, n] : {std::pair{A, "a"}, std::pair{B, "b"}}) a.require_fits_binding(t, n);
  if (std::max({batch * M * N, as[0] * M * K, bs[0] * K * N}) >= (int64_t(1) << 31)) {
    a.fail("a, b or the result has 2^31 elements or more (32-bit indexing)");
  }
  Subs subs{{"ENABLE", ""}};
  DType out = DType::I32;
  gpu::Buffer side;
  if (rq) {
    p.a_s_rows = per_index(a, rq->a_scale, "a_scale", M, "row of a");
    p.b_s_cols = per_index(a, rq->b_scale, "b_scale", N, "column of b");
    std::tie(p.qmin, p.qmax) = quant_range(g.info(rq->y_zp).dtype);
    out = g.info(rq->y_zp).dtype;
    subs.emplace_back("REQUANT_BINDINGS", kSideBinding);
    subs.emplace_back("EPILOGUE", requant_epilogue("acc", "select(0u, row, params.a_s_rows == 1u)",
                                                   "select(0u, col, params.b_s_cols == 1u)"));
  } else {
    subs.insert(subs.end(), {{"REQUANT_BINDINGS", ""}, {"EPILOGUE", "    dst[o] = acc;"}});
  }
  const TensorRef y = g.add_tensor({batch, M, N}, out);
  if (batch * M * N == 0) return y;
  if (K == 0) a.fail("the reduction (K) is empty");
  if (rq) side = pack_requant(a, *rq, p.off_sb, p.off_y);
  const char* env = a.g.ctx().settings().get("WGNN_DOT4");
  const bool dot4 = g.ctx().features().packed_4x8_dot && !(env && std::string_view(env) == "0");
  if (dot4) {
    subs.emplace_back("A_SHIFT", g.info(A).dtype == DType::U8 ? "128" : "0");
    subs.emplace_back("B_SHIFT", g.info(B).dtype == DType::U8 ? "128" : "0");
  }
  const gpu::Pipeline& pl =
      kernel(g, dot4 ? "ops/kernels/matmul_integer_dot4.wgsl" : "ops/kernels/matmul_integer.wgsl", subs);
  auto opt = [&](TensorRef t) { return optional_input(g, t.id >= 0 ? Value(t) : Value(None{})); };
  std::vector<Binding> b = {Binding::of(y), g.uniform(p), Binding::of(A), Binding::of(B), opt(azp), opt(bzp)};
  if (rq) b.push_back(Binding::of(side));
  g.add_dispatch(pl, std::move(b), grid_for(g, uint64_t(batch) * p.tiles_m * p.tiles_n), std::string(a.op),
                 fmt::format("matmul_integer{} {}x{}x{}{}", dot4 ? " dot4" : "", M, N, K, rq ? " requantized" : ""),
                 2.0 * double(batch * M * N) * double(K));
  return y;
}

// wgnn.matmul_integer.default(a, b, a_zero_point, b_zero_point) -> int32 [B, M, N]
Value matmul_integer_op(Graph& g, const ValueList& args) {
  Args a{"wgnn.matmul_integer.default", args, g};
  return matmul_integer(a, a.tensor(0, "a"), a.tensor(1, "b"), a.optional_tensor(2, "a_zero_point"),
                        a.optional_tensor(3, "b_zero_point"), nullptr);
}

// wgnn.qlinear_matmul.default(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point)
Value qlinear_matmul_op(Graph& g, const ValueList& args) {
  Args a{"wgnn.qlinear_matmul.default", args, g};
  const Requant rq{a.tensor(1, "a_scale"), a.tensor(4, "b_scale"), a.tensor(6, "y_scale"), a.tensor(7, "y_zero_point")};
  return matmul_integer(a, a.tensor(0, "a"), a.tensor(3, "b"), a.optional_tensor(2, "a_zero_point"),
                        a.optional_tensor(5, "b_zero_point"), &rq);
}


// WGNN_CONV_INTEGER=direct in the environment takes the direct kernel for
// every integer convolution (tests and measurement); unset or "tiled", the
// tiled one where it applies.
bool conv_integer_direct(const Settings& settings) {
  const char* env = settings.get("WGNN_CONV_INTEGER");
  if (!env || !*env || std::string_view(env) == "tiled") return false;
  if (std::string_view(env) == "direct") return true;
  throw Error(fmt::format("WGNN_CONV_INTEGER is '{}'; accepted: direct, tiled", env));
}

static_assert(sizeof(ConvIntTiledParams) == 128);

// Records kernels/conv_integer_tiled.wgsl, an implicit GEMM per group over
// the geometry in `p` (the direct kernel's parameters) for a batch of n;
// `subs` holds the direct kernel's epilogue, `b` its bindings from 2 on (x,
// w, zero points, requantization parameters; the k table follows them).
void record_conv_integer_tiled(const Args& a, const ConvIntParams& p, int64_t n, TensorRef y, Subs subs,
                               std::vector<Binding> b,
                               double flops, const std::string& kind) {
  Graph& g = a.g;
  const int64_t kvol = int64_t(p.KD) * p.KH * p.KW, kred = int64_t(p.cin_g) * kvol;
  const int64_t in_vol = int64_t(p.D) * p.H * p.W, out_vol = int64_t(p.OD) * p.OH * p.OW, npix = n * out_vol;
  const int64_t groups = int64_t(p.C / p.cin_g);
  const ConvTile t = pick_conv_tile(p.cout_g, uint64_t(npix));
  ConvIntTiledParams q{};
  q.cin = p.C, q.cout = p.Co, q.cin_g = p.cin_g, q.cout_g = p.cout_g, q.kred = uint32_t(kred), q.npix = uint32_t(npix);
  q.in_d = p.D, q.in_h = p.H, q.in_w = p.W, q.in_vol = uint32_t(in_vol);
  q.out_d = p.OD, q.out_h = p.OH, q.out_w = p.OW, q.out_vol = uint32_t(out_vol);
  q.sd = p.sd, q.sh = p.sh, q.sw = p.sw, q.pd = p.pd, q.ph = p.ph, q.pw = p.pw;
  q.mtiles = uint32_t(gpu::ceil_div(uint64_t(p.cout_g), t.tm));
  q.ntiles = uint32_t(gpu::ceil_div(uint64_t(npix), t.tn));
  const uint64_t tiles = uint64_t(groups) * q.mtiles * q.ntiles;
  if (tiles > UINT32_MAX) a.fail("too many output tiles for 32-bit indexing");
  q.tiles = uint32_t(tiles), q.groups = uint32_t(groups);
  q.w_zp_chan = p.w_zp_chan, q.w_s_chan = p.w_s_chan, q.has_bias = p.has_bias, q.qmin = p.qmin, q.qmax = p.qmax;
  q.off_sb = p.off_sb, q.off_y = p.off_y;
  const std::vector<int32_t> tab = conv_k_table(int64_t(p.cin_g), {int64_t(p.KD), int64_t(p.KH), int64_t(p.KW)},
                                                {int64_t(p.dd), int64_t(p.dh), int64_t(p.dw)}, in_vol);
  if (uint64_t(tab.size()) * 4 > g.ctx().limits().max_storage_buffer_binding_size) {
    a.fail(fmt::format("the reduction ({} values) is too long for the k table's binding", kred));
  }
  const TensorRef table = g.add_constant({int64_t(tab.size())}, DType::I32, tab.data(), "conv_integer k table");
  subs.emplace_back("KTAB_BINDING", fmt::format("@group(0) @binding({}) var<storage, read> ktab: array<vec4<i32>>;",
                                                b.size() + 2));
  b.insert(b.begin(), {Binding::of(y), g.uniform(q)});
  b.push_back(Binding::of(table));
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/conv_integer_tiled.wgsl", subs,
                                   {{"TM", double(t.tm)}, {"TN", double(t.tn)}, {"TK", double(t.tk)}});
  g.add_dispatch(pl, std::move(b), grid_for(g, tiles), std::string(a.op),
                 fmt::format("{} gemm k={}x{}x{} tile={}x{}", kind, p.KD, p.KH, p.KW, t.tm, t.tn), flops);
}

// wgnn.conv_integer.default(x, w, x_zero_point, w_zero_point, stride, padding, dilation, groups)
// wgnn.qlinear_conv.default(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
//                           bias, stride, padding, dilation, groups)
// x [N, C, spatial...] (1 to 3 spatial dims), w [Co, C / groups, kernel...];
// padding holds 2 * d values (begins, then ends), stride and dilation d.
Value conv_integer(Graph& g, const ValueList& args, bool qlinear) {
  const std::string_view op = qlinear ? "wgnn.qlinear_conv.default" : "wgnn.conv_integer.default";
  Args a{op, args, g};
  const size_t xi_ = 0, wi_ = qlinear ? 3 : 1, xz_ = qlinear ? 2 : 2, wz_ = qlinear ? 5 : 3;
  const TensorRef x = a.tensor(xi_, "x"), w = a.tensor(wi_, "w");
  const TensorRef xzp = a.optional_tensor(xz_, "x_zero_point"), wzp = a.optional_tensor(wz_, "w_zero_point");
  require_quantized(a, x, "x");
  require_quantized(a, w, "w");
  const size_t geo = qlinear ? 9 : 4;
  const Shape xs = g.info(x).shape, ws = g.info(w).shape;
  if (xs.size() < 3 || xs.size() > 5) a.fail(fmt::format("x {} must be N x C x 1 to 3 spatial dims", shape_str(xs)));
  const int d = int(xs.size()) - 2;
  if (ws.size() != xs.size()) a.fail(fmt::format("w {} must have x {}'s rank", shape_str(ws), shape_str(xs)));
  const IntList stride = a.int_list(geo, "stride"), pad = a.int_list(geo + 1, "padding"),
                dil = a.int_list(geo + 2, "dilation");
  const int64_t groups = a.integer(geo + 3, "groups", 1);
  if (stride.size() != size_t(d) || dil.size() != size_t(d) || pad.size() != size_t(2 * d)) {
    a.fail(fmt::format("stride {}, dilation {} need {} values and padding {} {}", shape_str(stride), shape_str(dil), d,
                       shape_str(pad), 2 * d));
  }
  const int64_t N = xs[0], C = xs[1], Co = ws[0];
  if (groups <= 0 || C % groups != 0 || Co % groups != 0 || ws[1] * groups != C) {
    a.fail(fmt::format("groups {} does not fit x {} and w {}", groups, shape_str(xs), shape_str(ws)));
  }
  int64_t in3[3] = {1, 1, 1}, k3[3] = {1, 1, 1}, s3[3] = {1, 1, 1}, d3[3] = {1, 1, 1}, p3[3] = {0, 0, 0}, o3[3] = {1, 1, 1};
  for (int j = 0; j < d; ++j) {
    const int t = 3 - d + j;
    in3[t] = xs[size_t(2 + j)];
    k3[t] = ws[size_t(2 + j)];
    s3[t] = stride[size_t(j)];
    d3[t] = dil[size_t(j)];
    p3[t] = pad[size_t(j)];
    if (s3[t] <= 0 || d3[t] <= 0) a.fail("stride and dilation must be positive");
    if (pad[size_t(j)] < 0 || pad[size_t(d + j)] < 0) a.fail("padding must not be negative");
    const int64_t span = d3[t] * (k3[t] - 1) + 1;
    o3[t] = (in3[t] + pad[size_t(j)] + pad[size_t(d + j)] - span) / s3[t] + 1;
    if (o3[t] <= 0) a.fail(fmt::format("the kernel {} is larger than the padded input {}", shape_str(ws), shape_str(xs)));
  }
  Shape out{N, Co};
  for (int j = 0; j < d; ++j) out.push_back(o3[3 - d + j]);
  ConvIntParams p{};
  p.count = uint32_t(numel(out));
  p.C = uint32_t(C);
  p.D = uint32_t(in3[0]);
  p.H = uint32_t(in3[1]);
  p.W = uint32_t(in3[2]);
  p.Co = uint32_t(Co);
  p.OD = uint32_t(o3[0]);
  p.OH = uint32_t(o3[1]);
  p.OW = uint32_t(o3[2]);
  p.KD = uint32_t(k3[0]);
  p.KH = uint32_t(k3[1]);
  p.KW = uint32_t(k3[2]);
  p.sd = uint32_t(s3[0]);
  p.sh = uint32_t(s3[1]);
  p.sw = uint32_t(s3[2]);
  p.pd = int32_t(p3[0]);
  p.ph = int32_t(p3[1]);
  p.pw = int32_t(p3[2]);
  p.dd = uint32_t(d3[0]);
  p.dh = uint32_t(d3[1]);
  p.dw = uint32_t(d3[2]);
  p.cin_g = uint32_t(C / groups);
  p.cout_g = uint32_t(Co / groups);
  if (xzp.id >= 0) {
    require_quantized(a, xzp, "x_zero_point", g.info(x).dtype);
    if (g.info(xzp).numel() != 1) a.fail("x_zero_point must hold one value (per tensor)");
  }
  if (wzp.id >= 0) {
    require_quantized(a, wzp, "w_zero_point", g.info(w).dtype);
    p.w_zp_chan = per_index(a, wzp, "w_zero_point", Co, "output channel");
  }
  for (auto [t, n] : {std::pair{x, "x"}, std::pair{w, "w"}}) a.require_fits_binding(t, n);
  if (std::max({numel(out), numel(xs), numel(ws)}) >= (int64_t(1) << 31)) {
    a.fail("x, w or the result has 2^31 elements or more (32-bit indexing)");
  }
  Subs subs{{"ENABLE", ""}};
  DType dt = DType::I32;
  std::optional<Requant> rq;
  if (qlinear) {
    rq = Requant{a.tensor(1, "x_scale"), a.tensor(4, "w_scale"), a.tensor(6, "y_scale"), a.tensor(7, "y_zero_point"),
                 a.optional_tensor(8, "bias")};
    if (g.info(rq->a_scale).numel() != 1) a.fail("x_scale must hold one value (per tensor)");
    p.w_s_chan = per_index(a, rq->b_scale, "w_scale", Co, "output channel");
    require_quantized(a, rq->y_zp, "y_zero_point");
    std::tie(p.qmin, p.qmax) = quant_range(g.info(rq->y_zp).dtype);
    dt = g.info(rq->y_zp).dtype;
    if (rq->bias.id >= 0) {
      const TensorInfo& bi = g.info(rq->bias);
      if (bi.dtype != DType::I32) a.fail(fmt::format("bias has dtype {}; expected int32", dtype_name(bi.dtype)));
      if (bi.shape != Shape{Co}) a.fail(fmt::format("bias {} must be [{}]", shape_str(bi.shape), Co));
      p.has_bias = 1;
    }
    subs.emplace_back("REQUANT_BINDINGS", kSideBinding);
    subs.emplace_back("EPILOGUE",
                      "  if (params.has_bias == 1u) {\n    acc = acc + bitcast<i32>(side[params.off_y + 2u + co]);\n  }\n" +
                          requant_epilogue("acc", "0u", "select(0u, co, params.w_s_chan == 1u)"));
  } else {
    subs.insert(subs.end(), {{"REQUANT_BINDINGS", ""}, {"EPILOGUE", "  dst[o] = acc;"}});
  }
  const TensorRef y = g.add_tensor(out, dt);
  if (p.count == 0) return y;
  gpu::Buffer side;
  if (rq) side = pack_requant(a, *rq, p.off_sb, p.off_y);
  auto opt = [&](TensorRef t) { return optional_input(g, t.id >= 0 ? Value(t) : Value(None{})); };
  // Bindings 2 on (x, w, the zero points, the requantization parameters);
  // each kernel puts y and its uniform in front.
  std::vector<Binding> b = {Binding::of(x), Binding::of(w), opt(xzp), opt(wzp)};
  if (rq) b.push_back(Binding::of(side));
  const double flops = 2.0 * double(p.count) * double(p.cin_g * p.KD * p.KH * p.KW);
  const std::string kind = qlinear ? "qlinear_conv" : "conv_integer";
  // The tiled implicit GEMM wherever a group has more than one input
  // channel; the direct kernel for one (depthwise: the reduction is the
  // kernel volume alone, and a tile of 16 to 64 channels would hold only
  // cout_g of them), or everywhere with WGNN_CONV_INTEGER=direct.
  if (p.cin_g > 1 && !conv_integer_direct(g.ctx().settings())) {
    record_conv_integer_tiled(a, p, int64_t(N), y, subs, std::move(b), flops, kind);
    return y;
  }
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/conv_integer.wgsl", subs);
  b.insert(b.begin(), {Binding::of(y), g.uniform(p)});
  g.add_dispatch(pl, std::move(b), grid_for(g, gpu::ceil_div(uint64_t(p.count), 256)), std::string(op), kind, flops);
  return y;
}

// wgnn.dynamic_quantize_linear.default(x) -> (y uint8, y_scale float32 [], y_zero_point uint8 [])
// as ONNX's DynamicQuantizeLinear: over the data's range extended to hold 0,
// scale = (max - min) / 255, zero_point = saturate(round(0 - min / scale)),
// y = saturate(round(x / scale) + zero_point). Data of all zeros (scale 0)
// gives scale 0, zero point 0 and y 0.
Value dynamic_quantize_linear(Graph& g, const ValueList& args) {
  Args a{"wgnn.dynamic_quantize_linear.default", args, g};
  const TensorRef x = a.tensor(0, "x");
  if (g.info(x).dtype != DType::F32) a.fail(fmt::format("argument 'x' has dtype {}; accepted: float32", dtype_name(g.info(x).dtype)));
  if (g.info(x).numel() == 0) a.fail("argument 'x' is empty; its range is undefined");
  IntList all;
  for (size_t d = 0; d < g.info(x).shape.size(); ++d) all.push_back(int64_t(d));
  const TensorRef mn = call(g, "aten.amin.default", {x, all, false}).tensor();
  const TensorRef mx = call(g, "aten.amax.default", {x, all, false}).tensor();
  const TensorRef scale = g.add_tensor({}, DType::F32);
  const TensorRef zp = g.add_tensor({}, DType::U8);
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/quant_params.wgsl");
  g.add_dispatch(pl, {Binding::of(scale), Binding::of(zp), Binding::of(mn), Binding::of(mx)}, grid_for(g, 1),
                 std::string(a.op), "quant_params");
  const TensorRef y = call(g, "quantized_decomposed.quantize_per_tensor.tensor", {x, scale, zp, int64_t(0), int64_t(255), int64_t(0)}).tensor();
  return ValueList{y, scale, zp};
}


// 4-bit MatMulNBits weights: q0 k_blocks, q1 block, q2 words a row, q3 zero
// point bytes a row, q4 has zero points.
const char* kNBitsWeight = R"(fn weight(k: u32, n: u32) -> f32 {
  let q = (b[n * params.q2 + k / 8u] >> (4u * (k % 8u))) & 15u;
  let blk = k / params.q1;
  var z = 8u;
  if (params.q4 == 1u) {
    let byte = n * params.q3 + blk / 2u;
    z = (zp[byte / 4u] >> (8u * (byte % 4u) + 4u * (blk % 2u))) & 15u;
  }
  return f32(i32(q) - i32(z)) * f32(scales[n * params.q0 + blk]);
})";

// 8-bit DequantizeLinear weights [K, N]: q0 words a row (ceil(N / 4)), q1
// scale mode (0 one, 1 per column, 2 per row), q2 int8 (sign-extended),
// q3 has zero points (one i32 each).
const char* kInt8Weight = R"(fn weight(k: u32, n: u32) -> f32 {
  let byte = (b[k * params.q0 + n / 4u] >> (8u * (n % 4u))) & 255u;
  var q = i32(byte);
  if (params.q2 == 1u) {
    q = (q << 24u) >> 24u;
  }
  var s = 0u;
  if (params.q1 == 1u) {
    s = n;
  } else if (params.q1 == 2u) {
    s = k;
  }
  var z = 0;
  if (params.q3 == 1u) {
    z = bitcast<i32>(zp[s]);
  }
  return f32(q - z) * f32(scales[s]);
})";

// Records kernels/matmul_qweight.wgsl: a [M, K] float (M from a's shape),
// b the packed weights, scales of float32 / float16, zero points or None,
// bias [N] of a's dtype or None; p's q0..q5 and `weight` say how to read b.
// `nbits`: 4-bit MatMulNBits weights, which a product of at most 8 rows
// reads on kernels/gemv_nbits.wgsl instead (WGNN_NO_GEMV=1: the tiles).
TensorRef matmul_qweight(const Args& a, TensorRef A, TensorRef B, TensorRef S, TensorRef Z, TensorRef bias, int64_t K,
                         int64_t N, MatmulQWeightParams p, const char* weight, const std::string& label,
                         bool nbits = false) {
  Graph& g = a.g;
  const TensorInfo& ai = g.info(A);
  const int64_t M = ai.shape[0];
  bool f16 = false;
  const std::string ST = scale_type(a, S, "scales", f16);
  if (bias.id >= 0) {
    const TensorInfo& xi = g.info(bias);
    if (xi.dtype != ai.dtype || xi.numel() != N) {
      a.fail(fmt::format("bias {} {} must be {} [{}]", dtype_name(xi.dtype), shape_str(xi.shape), dtype_name(ai.dtype), N));
    }
    p.has_bias = 1;
  }
  p.M = uint32_t(M);
  p.N = uint32_t(N);
  p.K = uint32_t(K);
  p.tiles_m = uint32_t((M + 15) / 16);
  p.tiles_n = uint32_t((N + 15) / 16);
  for (auto [t, n] : {std::pair{A, "a"}, std::pair{B, "b"}, std::pair{S, "scales"}}) a.require_fits_binding(t, n);
  if (std::max({M * N, M * K, K * N}) >= (int64_t(1) << 31)) {
    a.fail("a, b or the result has 2^31 elements or more (32-bit indexing)");
  }
  Subs subs = float_subs(g, ai.dtype, a.op);
  for (auto& [key, value] : subs) {
    if (key == "ENABLE" && f16) value = "enable f16;";  // float16 scales with float32 a
  }
  subs.emplace_back("S", ST);
  subs.emplace_back("WEIGHT", weight);
  const TensorRef y = g.add_tensor({M, N}, ai.dtype);
  if (M == 0) return y;
  auto opt = [&](TensorRef t) { return optional_input(g, t.id >= 0 ? Value(t) : Value(None{})); };
  const char* no_gemv = g.ctx().settings().get("WGNN_NO_GEMV");
  if (nbits && M <= 8 && !(no_gemv && std::string_view(no_gemv) == "1")) {
    // CT columns a workgroup: the most (up to 16) that still make 256
    // workgroups, so that a narrow product keeps enough loads in flight.
    int ct = 16;
    while (ct > 1 && (N + ct - 1) / ct < 256) ct /= 2;
    const gpu::Pipeline& pl = kernel(g, "ops/kernels/gemv_nbits.wgsl", subs,
                                     {{"CT", double(ct)}, {"A_VEC", K % 4 == 0 ? 1.0 : 0.0}});
    g.add_dispatch(pl, {Binding::of(y), g.uniform(p), Binding::of(A), Binding::of(B), Binding::of(S), opt(Z), opt(bias)},
                   grid_for(g, uint64_t((N + ct - 1) / ct)), std::string(a.op),
                   fmt::format("{} gemv {}x{}x{}", label, M, N, K), 2.0 * double(M * N) * double(K));
    return y;
  }
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/matmul_qweight.wgsl", subs);
  g.add_dispatch(pl, {Binding::of(y), g.uniform(p), Binding::of(A), Binding::of(B), Binding::of(S), opt(Z), opt(bias)},
                 grid_for(g, uint64_t(p.tiles_m) * p.tiles_n), std::string(a.op),
                 fmt::format("{} {}x{}x{}", label, M, N, K), 2.0 * double(M * N) * double(K));
  return y;
}

void require_a(const Args& a, TensorRef A, int64_t K) {
  a.require_float(A, "a");
  const Shape& s = a.g.info(A).shape;
  if (s.size() != 2 || s[1] != K) a.fail(fmt::format("a {} must be [M, K] with K = {}", shape_str(s), K));
}

// wgnn.matmul_nbits.default(a, b, scales, zero_points, bias, K, N, block_size)
// -> a [M, K] @ dequantized(b)^T [K, N] (+ bias), a's dtype.
// a [M, K] float32 / float16; b int32 [N, row_words]: MatMulNBits' 4-bit
// weights [N, k_blocks, block / 2] bytes, four bytes to a word (little
// endian), row_words = k_blocks * block / 8; scales [N * k_blocks] (or
// [N, k_blocks]), float32 / float16; zero_points None (8) or int32 words
// holding N rows of ceil(k_blocks / 2) bytes of packed 4-bit zero points;
// bias None or [N] of a's dtype. block_size a power of two, at least 16.
Value matmul_nbits(Graph& g, const ValueList& args) {
  Args a{"wgnn.matmul_nbits.default", args, g};
  const TensorRef A = a.tensor(0, "a"), B = a.tensor(1, "b"), S = a.tensor(2, "scales");
  const TensorRef Z = a.optional_tensor(3, "zero_points"), bias = a.optional_tensor(4, "bias");
  const int64_t K = a.integer(5, "K", 0), N = a.integer(6, "N", 0), block = a.integer(7, "block_size", 0);
  if (K <= 0 || N <= 0) a.fail(fmt::format("K {} and N {} must be positive", K, N));
  if (block < 16 || (block & (block - 1)) != 0) a.fail(fmt::format("block_size {} must be a power of two, at least 16", block));
  require_a(a, A, K);
  const int64_t k_blocks = (K + block - 1) / block, row_words = k_blocks * block / 8;
  const TensorInfo& bi = g.info(B);
  if (bi.dtype != DType::I32 || bi.shape != Shape{N, row_words}) {
    a.fail(fmt::format("b {} {} must be int32 [{}, {}] (packed 4-bit weights, 8 to a word)", dtype_name(bi.dtype),
                       shape_str(bi.shape), N, row_words));
  }
  if (g.info(S).numel() != N * k_blocks) {
    a.fail(fmt::format("scales {} must hold N * k_blocks = {} values", shape_str(g.info(S).shape), N * k_blocks));
  }
  MatmulQWeightParams p{};
  p.q0 = uint32_t(k_blocks);
  p.q1 = uint32_t(block);
  p.q2 = uint32_t(row_words);
  p.q3 = uint32_t((k_blocks + 1) / 2);
  if (Z.id >= 0) {
    const TensorInfo& zi = g.info(Z);
    const int64_t words = (N * int64_t(p.q3) + 3) / 4;
    if (zi.dtype != DType::I32 || zi.numel() != words) {
      a.fail(fmt::format("zero_points {} {} must be int32 of {} words (N rows of {} bytes of 4-bit values)",
                         dtype_name(zi.dtype), shape_str(zi.shape), words, p.q3));
    }
    p.q4 = 1;
  }
  return matmul_qweight(a, A, B, S, Z, bias, K, N, p, kNBitsWeight, fmt::format("matmul_nbits 4-bit blocks of {}", block),
                        true);
}

// wgnn.matmul_dequant.default(a, b, scales, zero_points, N, int8, mode)
// -> a [M, K] @ ((b - zero_points) * scales) [K, N], a's dtype: a
// DequantizeLinear of constant 8-bit weights and the MatMul reading it in
// one dispatch. b int32 [K, ceil(N / 4)]: the uint8 (int8 when `int8`)
// weights [K, N], four columns to a word (little endian, the last word of a
// row padded); mode 0: one scale (and zero point), 1: one per column (N),
// 2: one per row (K); scales float32 / float16; zero_points None (0) or
// int32, one value per scale.
Value matmul_dequant(Graph& g, const ValueList& args) {
  Args a{"wgnn.matmul_dequant.default", args, g};
  const TensorRef A = a.tensor(0, "a"), B = a.tensor(1, "b"), S = a.tensor(2, "scales");
  const TensorRef Z = a.optional_tensor(3, "zero_points");
  const int64_t N = a.integer(4, "N", 0), mode = a.integer(6, "mode", 0);
  const bool int8 = a.boolean(5, "int8", false);
  const TensorInfo& bi = g.info(B);
  if (bi.dtype != DType::I32 || bi.shape.size() != 2 || N <= 0 || bi.shape[1] != (N + 3) / 4) {
    a.fail(fmt::format("b {} {} must be int32 [K, ceil(N / 4)] with N = {} (8-bit weights, 4 to a word)",
                       dtype_name(bi.dtype), shape_str(bi.shape), N));
  }
  const int64_t K = bi.shape[0];
  require_a(a, A, K);
  if (mode < 0 || mode > 2) a.fail(fmt::format("mode {}: accepted 0 (one scale), 1 (per column), 2 (per row)", mode));
  const int64_t ns = mode == 0 ? 1 : mode == 1 ? N : K;
  if (g.info(S).numel() != ns) a.fail(fmt::format("scales {} must hold {} values", shape_str(g.info(S).shape), ns));
  MatmulQWeightParams p{};
  p.q0 = uint32_t((N + 3) / 4);
  p.q1 = uint32_t(mode);
  p.q2 = int8 ? 1 : 0;
  if (Z.id >= 0) {
    const TensorInfo& zi = g.info(Z);
    if (zi.dtype != DType::I32 || zi.numel() != ns) {
      a.fail(fmt::format("zero_points {} {} must be int32 of {} values", dtype_name(zi.dtype), shape_str(zi.shape), ns));
    }
    p.q3 = 1;
  }
  return matmul_qweight(a, A, B, S, Z, TensorRef{-1}, K, N, p, kInt8Weight,
                        fmt::format("matmul_dequant {}", int8 ? "int8" : "uint8"));
}

}  // namespace

HostTensor dequantize_on_host(const HostTensor& x, const HostTensor& scale, const HostTensor* zero_point, int64_t axis,
                              int64_t block, DType out) {
  if (x.dtype != DType::U8 && x.dtype != DType::I8 && x.dtype != DType::I32) {
    throw Error(fmt::format("dequantize: x has dtype {}; supported: uint8, int8, int32", dtype_name(x.dtype)));
  }
  if (scale.dtype != DType::F32 && scale.dtype != DType::F16) {
    throw Error(fmt::format("dequantize: the scale has dtype {}; supported: float32, float16", dtype_name(scale.dtype)));
  }
  if (out != DType::F32 && out != DType::F16) throw Error(fmt::format("dequantize to {}", dtype_name(out)));
  if (zero_point && (zero_point->dtype != x.dtype || zero_point->numel() != scale.numel())) {
    throw Error(fmt::format("dequantize: zero point {} {} against x {} and scale {}", dtype_name(zero_point->dtype),
                            shape_str(zero_point->shape), dtype_name(x.dtype), shape_str(scale.shape)));
  }
  const int64_t r = int64_t(x.shape.size()), n = x.numel();
  const bool per_tensor = block <= 0 && scale.numel() == 1;
  if (!per_tensor && (axis < 0 || axis >= r)) throw Error(fmt::format("dequantize: axis {} of x {}", axis, shape_str(x.shape)));
  int64_t inner = 1, dim = 1, sdim = 1;
  if (!per_tensor) {
    for (int64_t d = axis + 1; d < r; ++d) inner *= x.shape[size_t(d)];
    dim = x.shape[size_t(axis)];
    sdim = block > 0 ? (dim + block - 1) / block : dim;
    const int64_t want = block > 0 ? n / std::max<int64_t>(dim, 1) * sdim : dim;
    if (scale.numel() != want) {
      throw Error(fmt::format("dequantize: scale {} for x {} (axis {}, block {})", shape_str(scale.shape),
                              shape_str(x.shape), axis, block));
    }
  }
  HostTensor y = HostTensor::uninitialized(out, x.shape);
  for (int64_t i = 0; i < n; ++i) {
    size_t si = 0;
    if (!per_tensor) {
      const int64_t a = (i / inner) % dim;
      si = block > 0 ? size_t(((i / (inner * dim)) * sdim + a / block) * inner + i % inner) : size_t(a);
    }
    const int64_t q = x.get_int(size_t(i)) - (zero_point ? zero_point->get_int(si) : 0);
    const float v = float(int32_t(q)) * float(scale.get_double(si));
    if (out == DType::F32) {
      y.as<float>()[i] = v;
    } else {
      y.as<uint16_t>()[i] = float_to_half_saturate(v);
    }
  }
  return y;
}

void register_quantized_ops(OpRegistry& r) {
  struct Q {
    const char* name;
    bool quantize;
    QMode mode;
  };
  for (const Q q : {Q{"quantized_decomposed.quantize_per_tensor.tensor", true, QMode::Tensor},
                    Q{"quantized_decomposed.quantize_per_channel.default", true, QMode::Channel},
                    Q{"wgnn.quantize_blocked.default", true, QMode::Blocked},
                    Q{"quantized_decomposed.dequantize_per_tensor.tensor", false, QMode::Tensor},
                    Q{"quantized_decomposed.dequantize_per_channel.default", false, QMode::Channel},
                    Q{"wgnn.dequantize_blocked.default", false, QMode::Blocked}}) {
    r.add(q.name, [q](Graph& g, const ValueList& args) { return qdq(g, args, q.name, q.quantize, q.mode); });
  }
  r.add("wgnn.dynamic_quantize_linear.default", dynamic_quantize_linear);
  r.add("wgnn.matmul_integer.default", matmul_integer_op);
  r.add("wgnn.qlinear_matmul.default", qlinear_matmul_op);
  r.add("wgnn.conv_integer.default", [](Graph& g, const ValueList& args) { return conv_integer(g, args, false); });
  r.add("wgnn.qlinear_conv.default", [](Graph& g, const ValueList& args) { return conv_integer(g, args, true); });
  r.add("wgnn.matmul_nbits.default", matmul_nbits);
  r.add("wgnn.matmul_dequant.default", matmul_dequant);
}

}  // namespace wgnn::ops

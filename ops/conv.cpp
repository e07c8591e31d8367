// Convolution and pooling ops with ATen's names, arguments and output sizes,
// for 1 to 3 spatial dims (every kernel sees D x H x W, missing dims of size
// 1), plus internal variants for ONNX that take separate begin and end pads.
//
// Convolution picks one of three kernels:
//   - kernels/conv_depthwise.wgsl: forward with one input channel per group
//     (depthwise, with channel multipliers; also C_in == 1): a direct loop
//     per output element;
//   - kernels/conv.wgsl with POINTWISE: forward 1x1, stride 1, no padding: a
//     tiled matrix product over channels;
//   - kernels/conv.wgsl: everything else (any groups, stride, padding,
//     dilation, transposed) as an implicit GEMM with workgroup-staged tiles;
//     the host builds a small table that decodes the reduction index;
//     with few output tiles and a long reduction, split-K (partial sums
//     over ranges of the reduction, then kernels/conv_splitk.wgsl).
// Bias is fused; f32 and f16 storage, f32 math. wgnn.convolution_padded
// also takes an activation and a per-output-channel float32 affine
// (y = act((acc + bias[c]) * scale[c] + shift[c]), optionally with
// acc + bias[c] rounded to float16 first: an inference batch norm in
// float16, fused by the importer), both in every kernel's epilogue; the
// affine is generated text (add_epilogue_subs), so kernels without it
// compile the same WGSL as before.
// In float16 on a device with subgroup matrices (ops/subgroup_matmul.h),
// forward convolutions with one group run on them first: 1x1 (stride 1, no
// padding) as a plain product per image, other 2-D and 1-D ones as an
// implicit GEMM whose B tile the kernel gathers from the input; the kernels
// above take what they decline (sizes not multiples of 8, 3-D, groups).
//
// Pooling: kernels/pool.wgsl (one thread per output: max with optional
// argmax, average, adaptive average), and kernels/global_pool.wgsl for a
// window that is the whole input (global average / max pooling): a row
// reduction with several threads per row.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/conv_tile.h"
#include "ops/epilogue.h"
#include "ops/helpers.h"
#include "ops/matmul.h"
#include "ops/registry.h"
#include "ops/uniforms.h"
#include "ops/subgroup_matmul.h"

namespace wgnn::ops {

ConvTile pick_conv_tile(uint64_t cout_g, uint64_t npix) {
  constexpr ConvTile kTiles[] = {{64, 64, 16}, {32, 128, 16}, {16, 256, 8}};
  for (const ConvTile& t : kTiles) {
    if (t.tm * t.tk > 4 * 256 || t.tk * t.tn > 8 * 256 || 256 % t.tn != 0) throw Error("conv: bad tile table");
  }
  ConvTile best = kTiles[0];
  uint64_t best_cost = UINT64_MAX;
  for (const ConvTile& t : kTiles) {
    const uint64_t cost = gpu::ceil_div(cout_g, t.tm) * t.tm * gpu::ceil_div(npix, t.tn) * t.tn;
    if (cost < best_cost) {
      best = t;
      best_cost = cost;
    }
  }
  return best;
}

std::vector<int32_t> conv_k_table(int64_t cin_g, const std::array<int64_t, 3>& k, const std::array<int64_t, 3>& dil,
                                  int64_t in_vol, bool transposed, int64_t cout_g) {
  const int64_t per = transposed ? 8 : 4, kvol = k[0] * k[1] * k[2];
  std::vector<int32_t> tab(size_t(cin_g * kvol * per), 0);
  for (int64_t ci = 0; ci < cin_g; ++ci) {
    for (int64_t kd = 0; kd < k[0]; ++kd) {
      for (int64_t kh = 0; kh < k[1]; ++kh) {
        for (int64_t kw = 0; kw < k[2]; ++kw) {
          const int64_t kk = (kd * k[1] + kh) * k[2] + kw;
          int32_t* e = &tab[size_t((ci * kvol + kk) * per)];
          e[0] = int32_t(ci * in_vol);
          e[1] = int32_t(kd * dil[0]);
          e[2] = int32_t(kh * dil[1]);
          e[3] = int32_t(kw * dil[2]);
          if (transposed) e[4] = int32_t(ci * cout_g * kvol + kk);
        }
      }
    }
  }
  return tab;
}

namespace {

// Spatial values, left-padded to three dims (D, H, W): dim j of d spatial
// dims is slot 3 - d + j.
using Dims3 = std::array<int64_t, 3>;

constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();

std::string dims_str(const Dims3& v, int d) {
  return fmt::format("[{}]", fmt::join(v.begin() + (3 - d), v.end(), ", "));
}

void require_at_most(const Args& a, size_t n) {
  if (a.args.size() > n) a.fail(fmt::format("takes at most {} arguments, got {}", n, a.args.size()));
}

// An IntList argument of `d` values (one value applies to every dim).
// `def` fills an absent (None) argument; `empty_def`, when given, fills an
// empty list (pooling's stride defaults to the kernel size).
Dims3 spatial(const Args& a, size_t i, std::string_view name, int d, int64_t def,
              const Dims3* empty_def = nullptr) {
  Dims3 out{def, def, def};
  if (i >= a.args.size() || a.args[i].is_none()) {
    if (empty_def) return *empty_def;
    return out;
  }
  const IntList v = a.int_list(i, name);
  if (v.empty() && empty_def) return *empty_def;
  if (v.size() != 1 && v.size() != size_t(d)) {
    a.fail(fmt::format("argument '{}' is {}; expected {} value{} (or one for every dim)", name, shape_str(v), d,
                       d > 1 ? "s" : ""));
  }
  for (int j = 0; j < d; ++j) out[size_t(3 - d + j)] = v.size() == 1 ? v[0] : v[size_t(j)];
  return out;
}

// Begin and end pads: `padding` of d values (symmetric) or, when `split`,
// of 2 * d values (begins, then ends: ONNX's order).
void read_pads(const Args& a, size_t i, int d, bool split, Dims3& begin, Dims3& end) {
  if (!split) {
    begin = end = spatial(a, i, "padding", d, 0);
    return;
  }
  const IntList v = a.int_list(i, "padding");
  begin = end = Dims3{0, 0, 0};
  if (v.size() != size_t(2 * d)) {
    a.fail(fmt::format("argument 'padding' is {}; expected {} values (begin pads, then end pads)", shape_str(v),
                       2 * d));
  }
  for (int j = 0; j < d; ++j) {
    begin[size_t(3 - d + j)] = v[size_t(j)];
    end[size_t(3 - d + j)] = v[size_t(d + j)];
  }
}

void require_positive(const Args& a, const Dims3& v, int d, std::string_view name) {
  for (int64_t x : v) {
    if (x <= 0) a.fail(fmt::format("argument '{}' is {}; every value must be > 0", name, dims_str(v, d)));
  }
}

void require_non_negative(const Args& a, const Dims3& v, int d, std::string_view name) {
  for (int64_t x : v) {
    if (x < 0) a.fail(fmt::format("argument '{}' is {}; every value must be >= 0", name, dims_str(v, d)));
  }
}

void require_index_range(const Args& a, int64_t n, std::string_view what, const Shape& s) {
  if (n > kMaxIndex) a.fail(fmt::format("{} {} is too large for 32-bit indexing", what, shape_str(s)));
}

void require_result_fits(const Args& a, const Shape& shape, DType dtype) {
  require_index_range(a, numel(shape), "the result", shape);
  const uint64_t bytes = uint64_t(numel(shape)) * gpu_dtype_size(dtype);
  const uint64_t limit = a.g.ctx().limits().max_storage_buffer_binding_size;
  if (bytes > limit) {
    a.fail(fmt::format("the result {} {} is {} bytes, over this device's maxStorageBufferBindingSize of {} bytes",
                       dtype_name(dtype), shape_str(shape), bytes, limit));
  }
}

// ---- convolution ------------------------------------------------------------

struct ConvSpec {
  int d = 2;
  Dims3 stride{1, 1, 1}, pad_begin{0, 0, 0}, pad_end{0, 0, 0}, dil{1, 1, 1}, out_pad{0, 0, 0};
  bool transposed = false;
  int64_t groups = 1;
  ActivationSpec act;  // applied to the result (ops/epilogue.h): none, ReLU or clamp
  TensorRef affine{-1};  // [2, Cout] float32: scale, then shift per output channel (none: -1)
  // The convolution (with its bias) rounded to float16 storage before the
  // affine: the values of a separate convolution then batch norm.
  bool affine_rounded = false;
  // A tensor of the result's shape and dtype added before the activation:
  // act(conv * affine + residual), a residual block's sum (none: -1).
  TensorRef residual{-1};
};

// The kernels' epilogue text: {{AFFINE_BINDING}} ends the line of their
// last binding and {{AFFINE}} is the value before the activation. Without
// the affine and the residual they are "" and `v`, the kernel's text
// unchanged. The affine: a float32 binding `affine` ([2, Cout]) and v *
// affine[c] + affine[params.cout + c], `c` the output channel (v rounded
// to f16 first with `rounded`). The residual: a binding `residual` of the
// result's type, its element `oi` (the output's index) added to that value,
// which float16 storage rounds to f16 first (the separate add's operand).
void add_epilogue_subs(Subs& subs, const ConvSpec& s, int binding, const std::string& v, const std::string& c,
                       bool rounded, bool f16, const std::string& oi) {
  const bool affine = s.affine.id >= 0, residual = s.residual.id >= 0;
  std::string decl, val = v;
  if (affine) {
    decl += fmt::format("\n@group(0) @binding({}) var<storage, read> affine: array<f32>;", binding++);
    val = fmt::format("{0} * affine[{1}] + affine[params.cout + {1}]", rounded ? fmt::format("round_f16({})", v)
                                                                                 : fmt::format("({})", v), c);
  }
  if (residual) {
    decl += fmt::format("\n@group(0) @binding({}) var<storage, read> residual: array<{}>;", binding,
                        f16 ? "f16" : "f32");
    val = fmt::format("{} + f32(residual[{}])", f16 ? fmt::format("round_f16({})", val) : fmt::format("({})", val), oi);
  }
  if ((affine && rounded) || (residual && f16)) decl += "\n" + round_f16_wgsl();
  subs.emplace_back("AFFINE_BINDING", decl);
  subs.emplace_back("AFFINE", val);
}

// The second pass of a split-K convolution (kernels/conv_splitk.wgsl), the
// regular kernel's or the tensor cores': the `splits` float32 parts
// [splits, cout, npix] (npix = images * out_vol) added in order with the
// bias, then s's affine, residual and activation, into y.
void record_conv_splitk_sum(const Args& a, TensorRef y, TensorRef part, uint64_t splits, const ConvSpec& s,
                            Binding bias, bool has_bias, bool rounded, int64_t cout, int64_t out_vol, int64_t npix,
                            const Subs& subs) {
  Graph& g = a.g;
  const bool f16 = g.info(y).dtype == DType::F16;
  SplitKParams sp{uint32_t(cout * npix), uint32_t(cout), uint32_t(out_vol), uint32_t(npix), uint32_t(splits),
                  has_bias, 0, 0};
  Subs sum_subs = subs;
  add_epilogue_subs(sum_subs, s, 4, "acc", "c", rounded, f16, "i");
  std::vector<Binding> sum_bindings{Binding::of(y), g.uniform(sp), Binding::of(part), bias};
  if (s.affine.id >= 0) sum_bindings.push_back(Binding::of(s.affine));
  if (s.residual.id >= 0) sum_bindings.push_back(Binding::of(s.residual));
  g.add_dispatch(kernel(g, "ops/kernels/conv_splitk.wgsl", sum_subs, activation_constants(s.act)),
                 std::move(sum_bindings), grid_for(g, gpu::ceil_div(uint64_t(sp.count), 256)), std::string(a.op),
                 fmt::format("conv splitk sum {}{}{}{}", splits, s.affine.id >= 0 ? " affine" : "",
                             s.residual.id >= 0 ? " residual" : "", activation_label(s.act.act)));
}

// A result computed without its residual (the tensor-core paths, whose
// epilogue has none): the residual added, then the activation, as separate
// dispatches (the values of the unfused chain).
TensorRef add_residual_then_act(Graph& g, TensorRef y, const ConvSpec& s) {
  TensorRef sum = ops::call(g, "aten.add.Tensor", {y, s.residual}).tensor();
  switch (s.act.act) {
    case Activation::Relu: return ops::call(g, "aten.relu.default", {sum}).tensor();
    case Activation::Clamp: return ops::call(g, "aten.clamp.default", {sum, s.act.lo, s.act.hi}).tensor();
    case Activation::Gelu: return ops::call(g, "aten.gelu.default", {sum, std::string("none")}).tensor();
    case Activation::GeluTanh: return ops::call(g, "aten.gelu.default", {sum, std::string("tanh")}).tensor();
    default: return sum;
  }
}

// One dispatch of kernels/conv_depthwise.wgsl into y (count elements):
// channels first ([N, C, *spatial]) or, with channels_last, [N, *spatial, C]
// (wgnn.conv_depthwise_channels_last); the epilogue's affine and residual
// as `s` gives them.
void record_depthwise(const Args& a, TensorRef y, TensorRef x, TensorRef w, TensorRef b, const ConvSpec& s,
                      const Dims3& in, const Dims3& k, const Dims3& out, int64_t cout, int64_t cin, bool rounded,
                      bool channels_last) {
  Graph& g = a.g;
  const DType dt = g.info(x).dtype;
  DepthwiseParams p{};
  p.count = uint32_t(g.info(y).numel());
  // Channels last with one channel per group (C_out = C_in):
  // kernels/conv_depthwise_cl.wgsl, the kernel's dims its constants,
  // weights per tap; WGNN_DEPTHWISE_VEC4=0: conv_depthwise.wgsl's one
  // channel a thread, for measuring.
  const char* vec_env = a.g.ctx().settings().get("WGNN_DEPTHWISE_VEC4");
  const bool cl_kernel = channels_last && cout == cin && !(vec_env && std::string_view(vec_env) == "0");
  // A thread per VW channels of OWB output columns: the widest (VW 4, 2,
  // 1 dividing C; then OWB 4, 2, 1) that makes enough threads to fill a
  // large GPU (2^17: on the H200 ConvNeXt-T's float16 GPU time is 1.3% lower
  // than with 2^16 and DaViT-B's the same; 2^18 and more slow DaViT-B,
  // docs/BENCHMARKS.md). ConvNeXt's last 7x7 maps of 768 channels make
  // 9408 threads with VW 4 and OWB 1, 37632 with VW 1.
  uint32_t vw = 1, owb = 1;
  if (cl_kernel) {
    // WGNN_DEPTHWISE_THREADS=N: 2^N threads (measuring).
    uint64_t enough = uint64_t(1) << 17;
    if (const char* e = a.g.ctx().settings().get("WGNN_DEPTHWISE_THREADS"); e && *e) enough = uint64_t(1) << std::clamp(std::atoi(e), 0, 30);
    const uint64_t rows = uint64_t(g.info(y).numel() / (out[2] * cout));
    auto threads = [&](uint32_t v, uint32_t o) {
      return rows * gpu::ceil_div(uint64_t(out[2]), o) * uint64_t(cout / v);
    };
    bool found = false;
    for (uint32_t v : {4u, 2u, 1u}) {
      if (found || cout % v) continue;
      for (uint32_t o : {4u, 2u, 1u}) {
        if (!found && threads(v, o) >= enough) vw = v, owb = o, found = true;
      }
    }
    p.count = uint32_t(threads(vw, owb));
  }
  p.cout = uint32_t(cout);
  p.mult = uint32_t(cout / cin);
  p.has_bias = b.id >= 0;
  p.in_d = uint32_t(in[0]), p.in_h = uint32_t(in[1]), p.in_w = uint32_t(in[2]);
  p.in_vol = uint32_t(in[0] * in[1] * in[2]);
  p.out_d = uint32_t(out[0]), p.out_h = uint32_t(out[1]), p.out_w = uint32_t(out[2]);
  p.out_vol = uint32_t(out[0] * out[1] * out[2]);
  p.k_d = uint32_t(k[0]), p.k_h = uint32_t(k[1]), p.k_w = uint32_t(k[2]), p.kvol = uint32_t(k[0] * k[1] * k[2]);
  for (size_t j = 0; j < 3; ++j) {
    p.stride[j] = int32_t(s.stride[j]);
    p.pad[j] = int32_t(s.pad_begin[j]);
    p.dil[j] = int32_t(s.dil[j]);
  }
  Subs subs = float_subs(g, dt, a.op);
  add_epilogue_subs(subs, s, 5, "acc", "co", rounded, dt == DType::F16, "i");
  gpu::Constants constants = activation_constants(s.act);
  if (channels_last && !cl_kernel) constants.emplace_back("CHANNELS_LAST", 1.0);
  if (cl_kernel) {
    constants.emplace_back("OWB", double(owb));
    for (auto& kv : depthwise_vector_subs(dt, vw)) subs.push_back(std::move(kv));
  }
  // The kernel's dims as pipeline constants: the tap loops unroll.
  constants.emplace_back("KD", double(k[0]));
  constants.emplace_back("KH", double(k[1]));
  constants.emplace_back("KW", double(k[2]));
  const Binding bias = b.id >= 0 ? Binding::of(b) : Binding::of(g.ctx().dummy_buffer());
  Binding weight = Binding::of(w);
  if (cl_kernel) {
    // The weight per tap ([*k, C], kernels/depthwise_taps.wgsl): once when
    // it is a constant, else on every run.
    const uint64_t taps = uint64_t(k[0] * k[1] * k[2]), count = taps * uint64_t(cout);
    gpu::Buffer wt = g.scratch(count * gpu_dtype_size(dt), "depthwise weight per tap");
    const gpu::Pipeline& tr = kernel(g, "ops/kernels/depthwise_taps.wgsl", float_subs(g, dt, a.op));
    std::vector<Binding> tb{Binding::of(wt),
                            g.uniform(DepthwiseTapsParams{uint32_t(count), uint32_t(cout), uint32_t(taps), 0}),
                            Binding::of(w)};
    const gpu::Grid tg = grid_for(g, gpu::ceil_div(count, 256));
    if (g.info(w).kind == TensorKind::Constant)
      g.add_init_dispatch(tr, std::move(tb), tg, std::string(a.op), "depthwise weight per tap");
    else
      g.add_dispatch(tr, std::move(tb), tg, std::string(a.op), "depthwise weight per tap");
    weight = Binding::of(wt);
  }
  std::vector<Binding> bindings{Binding::of(y), g.uniform(p), Binding::of(x), weight, bias};
  if (s.affine.id >= 0) bindings.push_back(Binding::of(s.affine));
  if (s.residual.id >= 0) bindings.push_back(Binding::of(s.residual));
  g.add_dispatch(kernel(g, cl_kernel ? "ops/kernels/conv_depthwise_cl.wgsl" : "ops/kernels/conv_depthwise.wgsl", subs, constants), std::move(bindings),
                 grid_for(g, gpu::ceil_div(uint64_t(p.count), cl_kernel ? 64 : 256)), std::string(a.op),
                 fmt::format("conv depthwise {}k={}{}{}{}",
                             channels_last ? cl_kernel ? fmt::format("channels-last v{}x{} ", vw, owb) : "channels-last " : "",
                             dims_str(k, s.d),
                             s.affine.id >= 0 ? " affine" : "", s.residual.id >= 0 ? " residual" : "",
                             activation_label(s.act.act)),
                 2.0 * double(g.info(y).numel()) * double(p.kvol));
}

static_assert(sizeof(ConvParams) == 128);

static_assert(sizeof(DepthwiseParams) == 112);

// Split-K: with few output tiles and a long reduction (a late ResNet layer
// at batch 1: 512 channels of 7x7, K = 4608, is 8 tiles of 64x64), the
// reduction is cut into ranges of at least 16 steps so that about 192
// workgroups run; partial sums go through an f32 buffer.
uint64_t pick_splits(uint64_t tiles, uint64_t kred, uint32_t tk) {
  const uint64_t steps = gpu::ceil_div(kred, tk);
  if (tiles >= 96 || steps < 32) return 1;
  return std::min<uint64_t>({gpu::ceil_div(192, tiles), steps / 16, 32});
}

static_assert(sizeof(Im2colParams) == 96);

// A large float32 convolution of one group, as a GEMM: its patches moved
// once into a [cin * kvol, pixels] matrix per image, then the regular GEMM,
// W [Co, cin * kvol] @ patches + bias, with the activation in its epilogue,
// writing the result in place. Where the kernel tiles the input (kernel =
// stride, no padding or dilation, an exact number of patches: a vision
// transformer's patch embedding, DaViT's downsampling) the patches are a
// view and permute (one tiled copy); otherwise, in 1-D, kernels/im2col.wgsl
// gathers them with the padding's zeros (the Whisper encoder's
// convolutions).
// On an H200 the GEMM runs at 2-3x the implicit-GEMM kernel's rate on these
// shapes (docs/BENCHMARKS.md). Only at least kPatchesMinFlops (the copy's
// dispatch costs about what a small one's GEMM saves) and patches of at
// most kPatchesMaxBytes (ISNet's full-size layers would need gigabytes);
// no affine or residual (the GEMM adds its residual after the activation).
// WGNN_CONV_PATCHES=0 keeps them all on the implicit GEMM, =1 takes small
// ones and gathers in 2-D and 3-D too (tests). Returns false where it does
// not apply.
constexpr double kPatchesMinFlops = 256e6;
constexpr uint64_t kPatchesMaxBytes = uint64_t(64) << 20;
bool record_patches(const Args& a, TensorRef y, TensorRef x, TensorRef w, TensorRef b, const ConvSpec& s,
                    const Dims3& in, const Dims3& k, const Dims3& out) {
  Graph& g = a.g;
  const char* e = a.g.ctx().settings().get("WGNN_CONV_PATCHES");
  const std::string_view mode = e ? e : "";
  if (mode == "0") return false;
  if (s.affine.id >= 0 || s.residual.id >= 0) return false;
  bool tiles = true;
  for (size_t j = 0; j < 3; ++j) {
    tiles = tiles && s.stride[j] == k[j] && s.dil[j] == 1 && s.pad_begin[j] == 0 && s.pad_end[j] == 0 &&
            in[j] == out[j] * k[j];
  }
  // Gathered patches only in 1-D by default: on the H200 they took the
  // Whisper encoder's two convolutions from 0.31 to 0.20 ms, but MODNet 512's
  // 3x3 layers from 5.14 to 5.51 GPU ms (docs/BENCHMARKS.md).
  if (!tiles && s.d != 1 && mode != "1") return false;
  const TensorInfo& xi = g.info(x);
  const int64_t n = xi.shape[0], cin = xi.shape[1], cout = g.info(w).shape[0];
  const int64_t kvol = k[0] * k[1] * k[2], q = out[0] * out[1] * out[2], kred = cin * kvol;
  if (mode != "1" && 2.0 * double(n * q) * double(cout) * double(kred) < kPatchesMinFlops) return false;
  const uint64_t count = uint64_t(n * kred * q), bytes = count * gpu_dtype_size(xi.dtype);
  if ((mode != "1" && bytes > kPatchesMaxBytes) || bytes > g.ctx().limits().max_storage_buffer_binding_size ||
      count > uint64_t(kMaxIndex) || uint64_t(xi.numel()) > uint64_t(kMaxIndex)) {
    return false;
  }
  TensorRef cols;
  if (tiles) {
    // x [n, cin, o0, k0, o1, k1, o2, k2] -> [n, cin, k0, k1, k2, o0, o1, o2].
    const TensorRef v = ops::call(g, "aten.view.default",
                                  {x, IntList{n, cin, out[0], k[0], out[1], k[1], out[2], k[2]}})
                            .tensor();
    cols = ops::call(g, "aten.permute.default", {v, IntList{0, 1, 3, 5, 7, 2, 4, 6}}).tensor();
  } else {
    cols = g.add_tensor({n, kred, q}, xi.dtype);
    Im2colParams p{};
    p.count = uint32_t(count);
    p.kvol = uint32_t(kvol);
    p.in_d = uint32_t(in[0]), p.in_h = uint32_t(in[1]), p.in_w = uint32_t(in[2]);
    p.in_vol = uint32_t(in[0] * in[1] * in[2]);
    p.out_h = uint32_t(out[1]), p.out_w = uint32_t(out[2]), p.out_vol = uint32_t(q);
    p.k_h = uint32_t(k[1]), p.k_w = uint32_t(k[2]);
    for (size_t j = 0; j < 3; ++j) {
      p.stride[j] = int32_t(s.stride[j]);
      p.pad[j] = int32_t(s.pad_begin[j]);
      p.dil[j] = int32_t(s.dil[j]);
    }
    g.add_dispatch(kernel(g, "ops/kernels/im2col.wgsl", float_subs(g, xi.dtype, a.op)),
                   {Binding::of(cols), g.uniform(p), Binding::of(x)}, grid_for(g, gpu::ceil_div(count, 256)),
                   std::string(a.op), fmt::format("conv patches k={}", dims_str(k, s.d)));
  }
  StridedGemm p;
  p.a = w, p.b = cols, p.out = y, p.bias = b;
  p.M = cout, p.N = q, p.K = kred;
  p.batch = {n};
  p.sa = {0};
  p.sb = {kred * q};
  p.so = {cout * q};
  p.lda = kred, p.ldb = q, p.ldc = q;
  p.act = s.act;
  if (b.id >= 0) p.sc = {0}, p.bias_sm = 1, p.bias_sn = 0;
  record_strided_gemm(a, p);
  return true;
}

TensorRef convolution(const Args& a, TensorRef x, TensorRef w, TensorRef b, const ConvSpec& s) {
  Graph& g = a.g;
  a.require_float(x, "input");
  const TensorInfo xi = g.info(x);
  const TensorInfo wi = g.info(w);
  const int d = s.d;
  const size_t rank = size_t(d) + 2;
  if (xi.shape.size() != rank) {
    a.fail(fmt::format("argument 'input' has shape {}; a {}-D convolution takes rank {} (N, C{})",
                       shape_str(xi.shape), d, rank, d == 1 ? ", L" : d == 2 ? ", H, W" : ", D, H, W"));
  }
  if (wi.shape.size() != rank) {
    a.fail(fmt::format("argument 'weight' has shape {}; expected rank {} like the input {}", shape_str(wi.shape), rank,
                       shape_str(xi.shape)));
  }
  if (wi.dtype != xi.dtype) {
    a.fail(fmt::format("argument 'weight' has dtype {}; expected the input's {}", dtype_name(wi.dtype),
                       dtype_name(xi.dtype)));
  }
  const int64_t groups = s.groups;
  if (groups < 1) a.fail(fmt::format("argument 'groups' is {}; it must be >= 1", groups));
  const int64_t n = xi.shape[0], cin = xi.shape[1];
  if (cin < 1) a.fail(fmt::format("argument 'input' {} has no channels", shape_str(xi.shape)));
  if (cin % groups != 0) {
    a.fail(fmt::format("input channels ({}) are not divisible by groups ({})", cin, groups));
  }
  int64_t cout;
  if (!s.transposed) {
    cout = wi.shape[0];
    if (cout % groups != 0) {
      a.fail(fmt::format("weight {} has {} output channels, not divisible by groups ({})", shape_str(wi.shape), cout,
                         groups));
    }
    if (wi.shape[1] * groups != cin) {
      a.fail(fmt::format("weight {} with groups={} expects input to have {} channels, but input {} has {}",
                         shape_str(wi.shape), groups, wi.shape[1] * groups, shape_str(xi.shape), cin));
    }
  } else {
    if (wi.shape[0] != cin) {
      a.fail(fmt::format("transposed weight {} expects input to have {} channels (weight dim 0), but input {} has {}",
                         shape_str(wi.shape), wi.shape[0], shape_str(xi.shape), cin));
    }
    cout = wi.shape[1] * groups;
  }
  if (b.id >= 0) {
    const TensorInfo& bi = g.info(b);
    if (bi.shape != Shape{cout}) {
      a.fail(fmt::format("argument 'bias' has shape {}; expected [{}] (one value per output channel)",
                         shape_str(bi.shape), cout));
    }
    if (bi.dtype != xi.dtype) {
      a.fail(fmt::format("argument 'bias' has dtype {}; expected the input's {}", dtype_name(bi.dtype),
                         dtype_name(xi.dtype)));
    }
  }
  if (s.affine.id >= 0) {
    const TensorInfo& ai = g.info(s.affine);
    if (ai.shape != Shape{2, cout} || ai.dtype != DType::F32) {
      a.fail(fmt::format("argument 'affine' is {} {}; expected float32 [2, {}] (scale, then shift per output channel)",
                         dtype_name(ai.dtype), shape_str(ai.shape), cout));
    }
  }
  require_positive(a, s.stride, d, "stride");
  require_positive(a, s.dil, d, "dilation");
  if (!s.transposed) {
    require_non_negative(a, s.pad_begin, d, "padding");
    require_non_negative(a, s.pad_end, d, "padding");
  }

  Dims3 in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1};
  for (int j = 0; j < d; ++j) {
    in[size_t(3 - d + j)] = xi.shape[size_t(2 + j)];
    k[size_t(3 - d + j)] = wi.shape[size_t(2 + j)];
  }
  for (size_t j = 3 - size_t(d); j < 3; ++j) {
    if (k[j] < 1) a.fail(fmt::format("weight {} has an empty kernel", shape_str(wi.shape)));
    const int64_t ext = s.dil[j] * (k[j] - 1) + 1;
    if (!s.transposed) {
      const int64_t padded = in[j] + s.pad_begin[j] + s.pad_end[j];
      if (padded < ext) {
        a.fail(fmt::format("the kernel {} (dilation {}) spans {} but the padded input is {} ({} plus padding) along "
                           "spatial dim {}: the kernel can't be greater than the padded input",
                           dims_str(k, d), dims_str(s.dil, d), ext, padded, in[j], j - (3 - size_t(d))));
      }
      out[j] = (padded - ext) / s.stride[j] + 1;
    } else {
      out[j] = (in[j] - 1) * s.stride[j] - s.pad_begin[j] - s.pad_end[j] + ext + s.out_pad[j];
      if (out[j] < 1) {
        a.fail(fmt::format("the transposed convolution's output along spatial dim {} would be {} (input {}, stride "
                           "{}, padding {} + {}, kernel span {}, output_padding {})",
                           j - (3 - size_t(d)), out[j], in[j], s.stride[j], s.pad_begin[j], s.pad_end[j], ext,
                           s.out_pad[j]));
      }
    }
  }
  Shape out_shape{n, cout};
  for (size_t j = 3 - size_t(d); j < 3; ++j) out_shape.push_back(out[j]);
  a.require_fits_binding(x, "input");
  a.require_fits_binding(w, "weight");
  require_index_range(a, xi.numel(), "the input", xi.shape);
  require_index_range(a, wi.numel(), "the weight", wi.shape);
  require_result_fits(a, out_shape, xi.dtype);
  if (s.residual.id >= 0) {
    const TensorInfo& ri = g.info(s.residual);
    if (ri.dtype != xi.dtype) {
      a.fail(fmt::format("argument 'residual' has dtype {}; expected the input's {}", dtype_name(ri.dtype),
                         dtype_name(xi.dtype)));
    }
    // One that broadcasts (another shape than the result's) is added by a
    // separate aten.add, the activation after it.
    if (ri.shape != out_shape) {
      broadcast_shapes(out_shape, ri.shape, a.op);  // an Error naming both when they do not broadcast
      ConvSpec plain = s;
      plain.residual = TensorRef{-1};
      plain.act = ActivationSpec{};
      return add_residual_then_act(g, convolution(a, x, w, b, plain), s);
    }
  }
  TensorRef y = g.add_tensor(out_shape, xi.dtype);
  if (numel(out_shape) == 0) return y;
  const bool f16 = xi.dtype == DType::F16;
  const std::string res_label = s.residual.id >= 0 ? " residual" : "";

  const Subs subs = float_subs(g, xi.dtype, a.op);
  const int64_t cin_g = cin / groups, cout_g = cout / groups;
  const int64_t kvol = k[0] * k[1] * k[2];
  const int64_t in_vol = in[0] * in[1] * in[2], out_vol = out[0] * out[1] * out[2];
  const Binding bias = b.id >= 0 ? Binding::of(b) : Binding::of(g.ctx().dummy_buffer());
  const bool rounded = s.affine_rounded && xi.dtype == DType::F16;

  if (!s.transposed && cin_g == 1) {
    record_depthwise(a, y, x, w, b, s, in, k, out, cout, cin, rounded, false);
    return y;
  }

  if (!s.transposed && groups == 1 && kvol > 1 && !f16 && record_patches(a, y, x, w, b, s, in, k, out)) return y;
  const bool pointwise = !s.transposed && kvol == 1 && s.stride == Dims3{1, 1, 1} && s.pad_begin == Dims3{0, 0, 0} &&
                         s.pad_end == Dims3{0, 0, 0};
  // A float16 1x1 convolution with one group is a product per image,
  // W [Co, Ci] @ X[n] [Ci, H*W] + bias[co]: on subgroup matrices (tensor
  // cores) where the device has them.
  if (pointwise && groups == 1 && n * cin * in_vol <= kMaxIndex) {
    SubgroupGemm q;
    q.a = w, q.b = x, q.bias = b, q.out = y;
    q.M = cout, q.N = out_vol, q.K = cin, q.batch = n;
    q.a_batch = 0, q.b_batch = cin * in_vol;
    q.bias_sm = 1, q.bias_sn = 0;
    q.affine = s.affine, q.affine_rounded = rounded;
    // The residual in the epilogue, before the activation; else a separate
    // add and activation after the product.
    if (s.residual.id >= 0) {
      SubgroupGemm r = q;
      r.act = s.act, r.residual = s.residual, r.residual_first = true;
      if (record_subgroup_gemm(g, r, a.op, "conv 1x1")) return y;
    }
    q.act = s.residual.id >= 0 ? ActivationSpec{} : s.act;
    if (record_subgroup_gemm(g, q, a.op, "conv 1x1")) return s.residual.id >= 0 ? add_residual_then_act(g, y, s) : y;
  }
  // Any other float16 2-D (or 1-D) convolution with one group: an implicit
  // GEMM on subgroup matrices, W [Co, Ci*KH*KW] @ im2col(X[n]) per image,
  // the im2col tile gathered from x in the kernel. Also a 1x1 one whose
  // pixels are not a multiple of 8 (the product reads X's rows as vec4s;
  // this kernel gathers X in scalars).
  if ((!pointwise || out_vol % 8 != 0) && !s.transposed && groups == 1 && d <= 2) {
    SubgroupConv q;
    q.x = x, q.w = w, q.bias = b, q.out = y, q.affine = s.affine, q.affine_rounded = rounded;
    q.batch = n, q.cin = cin, q.h = in[1], q.w_in = in[2], q.cout = cout, q.oh = out[1], q.ow = out[2];
    q.kh = k[1], q.kw = k[2];
    q.stride_h = s.stride[1], q.stride_w = s.stride[2], q.top = s.pad_begin[1], q.left = s.pad_begin[2];
    q.dil_h = s.dil[1], q.dil_w = s.dil[2];
    q.act = s.residual.id >= 0 ? ActivationSpec{} : s.act;
    auto pair = [](int64_t u, int64_t v) { return u == v ? fmt::format("{}", u) : fmt::format("{}x{}", u, v); };
    std::string what = fmt::format("conv {}x{}", k[1], k[2]);
    if (s.stride[1] != 1 || s.stride[2] != 1) what += " stride " + pair(s.stride[1], s.stride[2]);
    if (s.dil[1] != 1 || s.dil[2] != 1) what += " dilation " + pair(s.dil[1], s.dil[2]);
    // Few tiles over a long reduction (ResNet-50's 3x3 layers from 28x28
    // down, 26 to 8 tiles over K = 1152 to 4608): split-K on the tensor
    // cores, the bias, affine, residual and activation in the regular
    // convolution's sum pass (whose layout of the parts it shares).
    // Split or not is a choice of the plan's structure (Graph::choose):
    // replayed where this size's tiles need no split, one range of K.
    const bool can_split = n == 1 && f16 && tensor_cores_available(g.ctx());
    SubgroupSplit split =
        can_split ? subgroup_gemm_splits(a.g.ctx().settings(), cout, out_vol, cin * kvol, 1, true) : SubgroupSplit{};
    const Graph::Choice split_choice = can_split ? g.choose("conv.subgroup_splitk", split.kchunk > 0) : Graph::Choice{};
    if (split_choice.value && split.kchunk == 0) split = SubgroupSplit{1, (cin * kvol + 31) / 32 * 32};
    if (split_choice.value) {
      SubgroupConv r = q;
      r.bias = r.affine = TensorRef{-1}, r.act = ActivationSpec{};
      r.splits = split.splits, r.kchunk = split.kchunk;
      TensorRef part{-1};
      if (record_subgroup_conv(g, r, a.op, what, &part)) {
        g.made(split_choice, 1);
        record_conv_splitk_sum(a, y, part, uint64_t(split.splits), s, bias, b.id >= 0, rounded, cout, out_vol,
                               n * out_vol, subs);
        return y;
      }
    }
    g.made(split_choice, 0);
    if (s.residual.id >= 0) {
      SubgroupConv r = q;
      r.act = s.act, r.residual = s.residual;
      if (record_subgroup_conv(g, r, a.op, what)) return y;
    }
    if (record_subgroup_conv(g, q, a.op, what)) return s.residual.id >= 0 ? add_residual_then_act(g, y, s) : y;
  }
  const int64_t kred = cin_g * kvol;
  const int64_t npix = n * out_vol;
  require_index_range(a, npix * std::max<int64_t>(cout_g, 1), "the result", out_shape);
  const ConvTile t = pick_conv_tile(uint64_t(cout_g), uint64_t(npix));
  ConvParams p{};
  p.cin = uint32_t(cin), p.cout = uint32_t(cout), p.cin_g = uint32_t(cin_g), p.cout_g = uint32_t(cout_g);
  p.kred = uint32_t(kred), p.kvol = uint32_t(kvol), p.npix = uint32_t(npix), p.has_bias = b.id >= 0;
  p.in_d = uint32_t(in[0]), p.in_h = uint32_t(in[1]), p.in_w = uint32_t(in[2]), p.in_vol = uint32_t(in_vol);
  p.out_d = uint32_t(out[0]), p.out_h = uint32_t(out[1]), p.out_w = uint32_t(out[2]), p.out_vol = uint32_t(out_vol);
  for (size_t j = 0; j < 3; ++j) {
    p.stride[j] = int32_t(s.stride[j]);
    p.pad[j] = int32_t(s.pad_begin[j]);
  }
  p.mtiles = uint32_t(gpu::ceil_div(uint64_t(cout_g), t.tm));
  p.ntiles = uint32_t(gpu::ceil_div(uint64_t(npix), t.tn));
  p.groups = uint32_t(groups);
  uint64_t splits = pick_splits(uint64_t(groups) * p.mtiles * p.ntiles, uint64_t(kred), t.tk);
  const uint64_t kchunk = gpu::ceil_div(gpu::ceil_div(uint64_t(kred), t.tk), splits) * t.tk;
  splits = gpu::ceil_div(uint64_t(kred), kchunk);
  // Split or not is a choice of the plan's structure (Graph::choose): a
  // size that replays a split where its own tiles need none runs one range
  // (splits = 1) through the same two passes.
  const Graph::Choice split_choice = g.choose("conv.splitk", splits > 1);
  const bool split = split_choice.value != 0;
  if (!split) splits = 1;
  const uint64_t part_elems = splits * uint64_t(cout) * uint64_t(npix);
  const bool split_fits = part_elems <= uint64_t(kMaxIndex) &&
                          part_elems * 4 <= g.ctx().limits().max_storage_buffer_binding_size;
  if (!split || !split_fits) splits = 0;  // 0: no split
  g.made(split_choice, splits > 0);
  p.kchunk = uint32_t(splits > 1 ? kchunk : uint64_t(kred));
  const uint64_t tiles = std::max<uint64_t>(splits, 1) * groups * p.mtiles * p.ntiles;
  if (tiles > UINT32_MAX) a.fail("too many output tiles for 32-bit indexing");
  p.tiles = uint32_t(tiles);

  // The reduction index k = (ci, kd, kh, kw) decoded on the host.
  Binding table = Binding::of(g.ctx().dummy_buffer());
  if (!pointwise) {
    const std::vector<int32_t> tab = conv_k_table(cin_g, k, s.dil, in_vol, s.transposed, cout_g);
    table = Binding::of(g.add_constant({int64_t(tab.size())}, DType::I32, tab.data(), "conv k table"));
  }
  Subs gemm_subs = subs;
  gemm_subs.emplace_back("O", splits > 0 ? "f32" : xi.dtype == DType::F16 ? "f16" : "f32");
  // Split-K: the affine and the residual in the second pass.
  const bool gemm_affine = s.affine.id >= 0 && splits == 0;
  ConvSpec gemm_epilogue = s;
  if (splits > 0) gemm_epilogue.affine = gemm_epilogue.residual = TensorRef{-1};
  add_epilogue_subs(gemm_subs, gemm_epilogue, 6, "acc[i][j] + b", "c", rounded, f16, "oi");
  const gpu::Pipeline& pipe =
      kernel(g, "ops/kernels/conv.wgsl", gemm_subs,
             {{"TM", double(t.tm)},
              {"TN", double(t.tn)},
              {"TK", double(t.tk)},
              {"TRANSPOSED", s.transposed ? 1.0 : 0.0},
              {"POINTWISE", pointwise ? 1.0 : 0.0},
              {"SPLITK", splits > 0 ? 1.0 : 0.0},
              {"ACT", double(s.act.code())},
              {"LO", s.act.lo},
              {"HI", s.act.hi}});
  const std::string label = fmt::format("conv{} {} k={} tile={}x{}{}{}{}", s.transposed ? " transposed" : "",
                                        pointwise ? "pointwise" : "gemm", dims_str(k, d), t.tm, t.tn,
                                        gemm_affine ? " affine" : "", splits == 0 ? res_label : "",
                                        splits == 0 ? activation_label(s.act.act) : "");
  // Useful work, 2 per multiply-add: each output takes cin_g * kvol taps
  // forward; transposed, each input element meets cout_g * kvol outputs
  // (the taps the gather skips as zero are not counted).
  const double flops = s.transposed ? 2.0 * double(n * in_vol) * double(cin) * double(cout_g * kvol)
                                    : 2.0 * double(npix) * double(cout) * double(kred);
  if (splits == 0) {
    std::vector<Binding> bindings{Binding::of(y), g.uniform(p), Binding::of(x), Binding::of(w), bias, table};
    if (gemm_affine) bindings.push_back(Binding::of(s.affine));
    if (s.residual.id >= 0) bindings.push_back(Binding::of(s.residual));
    g.add_dispatch(pipe, std::move(bindings), grid_for(g, tiles), std::string(a.op), label, flops);
    return y;
  }
  TensorRef part = g.add_tensor({int64_t(splits), cout, npix}, DType::F32);
  g.add_dispatch(pipe, {Binding::of(part), g.uniform(p), Binding::of(x), Binding::of(w), bias, table},
                 grid_for(g, tiles), std::string(a.op), fmt::format("{} splitk={}", label, splits), flops);
  record_conv_splitk_sum(a, y, part, splits, s, bias, b.id >= 0, rounded, cout, out_vol, npix, subs);
  return y;
}

// The number of spatial dims of a convolution: the weight's rank - 2 (the
// input must have the weight's rank).
int conv_dims(const Args& a, TensorRef x, TensorRef w) {
  const Shape& xs = a.g.info(x).shape;
  const Shape& ws = a.g.info(w).shape;
  if (ws.size() < 3 || ws.size() > 5) {
    a.fail(fmt::format("argument 'weight' has shape {}; accepted: rank 3 (1-D), 4 (2-D) or 5 (3-D convolution)",
                       shape_str(ws)));
  }
  if (xs.size() != ws.size()) {
    a.fail(fmt::format("expected {}-dimensional input for {}-dimensional weight {}, but got input {} (batched "
                       "input only: N, C, spatial...)",
                       ws.size(), ws.size(), shape_str(ws), shape_str(xs)));
  }
  return int(ws.size()) - 2;
}

// aten.convolution.default(input, weight, bias?, stride, padding, dilation,
//     transposed, output_padding, groups)
// and wgnn.convolution_padded.default with the same arguments, except that
// `padding` holds 2 * d values (begin pads, then end pads, as ONNX), and
// that a transposed convolution's pads may be negative (extra output);
// it also takes act='none'|'relu'|'clamp'|'gelu'|'gelu_tanh', lo, hi: an activation applied
// to the result in the same dispatch (fused by the ONNX importer), and
// affine=None: a float32 tensor [2, Cout] (scale, then shift per output
// channel) applied before the activation, in f32:
// act((conv + bias[c]) * scale[c] + shift[c]) (an inference batch norm in
// float16, fused by the importer); affine_rounded=False: True rounds
// conv + bias to float16 before the affine (float16 storage), the values of
// a separate convolution and batch norm; residual=None: a tensor of the
// result's shape and dtype added before the activation, act(conv * affine
// + residual) (a residual block's sum, rounded to float16 first in float16
// storage: the values of a separate add).
Value convolution_op(Graph& g, const ValueList& args, bool split_pads) {
  Args a{split_pads ? "wgnn.convolution_padded.default" : "aten.convolution.default", args, g};
  require_at_most(a, split_pads ? 15 : 9);
  TensorRef x = a.tensor(0, "input");
  TensorRef w = a.tensor(1, "weight");
  TensorRef b = a.optional_tensor(2, "bias");
  ConvSpec s;
  s.d = conv_dims(a, x, w);
  s.stride = spatial(a, 3, "stride", s.d, 1);
  read_pads(a, 4, s.d, split_pads, s.pad_begin, s.pad_end);
  s.dil = spatial(a, 5, "dilation", s.d, 1);
  s.transposed = a.boolean(6, "transposed", false);
  s.out_pad = spatial(a, 7, "output_padding", s.d, 0);
  s.groups = a.integer(8, "groups", 1);
  if (split_pads) {
    s.act.act = parse_activation(a, a.string(9, "act", "none"),
                                 {Activation::None, Activation::Relu, Activation::Clamp, Activation::Gelu,
                                  Activation::GeluTanh});
    if (s.act.act == Activation::Clamp) {
      s.act.lo = a.scalar(10, "lo", 0.0);
      s.act.hi = a.scalar(11, "hi", 0.0);
      if (std::isnan(s.act.lo) || std::isnan(s.act.hi) || s.act.lo > s.act.hi) {
        a.fail(fmt::format("clamp bounds [{}, {}] are not a range", s.act.lo, s.act.hi));
      }
    }
    s.affine = a.optional_tensor(12, "affine");
    s.affine_rounded = a.boolean(13, "affine_rounded", false);
    s.residual = a.optional_tensor(14, "residual");
  }
  if (s.transposed) {
    require_non_negative(a, s.out_pad, s.d, "output_padding");
    if (!split_pads) {
      require_non_negative(a, s.pad_begin, s.d, "padding");
      for (size_t j = 0; j < 3; ++j) {
        if (s.out_pad[j] >= s.stride[j] && s.out_pad[j] >= s.dil[j]) {
          a.fail(fmt::format("output_padding {} must be smaller than either stride {} or dilation {}",
                             dims_str(s.out_pad, s.d), dims_str(s.stride, s.d), dims_str(s.dil, s.d)));
        }
      }
    }
  }
  return convolution(a, x, w, b, s);
}

// wgnn.conv_depthwise_channels_last.default(input, weight, bias, size,
// stride, padding, dilation): a depthwise convolution (one input channel
// per group) on channels-last data, the form a transformer's convolutional
// position encoding has before its permutes (DaViT's ConvPosEnc:
// x [N, H*W, C] -> [N, C, H, W] -> depthwise conv -> [N, H*W, C]).
// input is [N, *size, C_in], or [N, prod(size), C_in] (positions in a
// row); weight [C_out, 1, *k] with C_out a multiple of C_in; bias [C_out]
// or None; stride and dilation d values (or one for all), padding d values
// (symmetric) or 2 d (begins, then ends); residual None or a tensor of
// the result's shape and dtype added in the epilogue (rounded to float16
// first in float16 storage: the separate add's values). The result is
// [N, *out, C_out], or [N, prod(out), C_out] for an input of positions in
// a row.
Value conv_depthwise_channels_last(Graph& g, const ValueList& args) {
  Args a{"wgnn.conv_depthwise_channels_last.default", args, g};
  require_at_most(a, 8);
  TensorRef x = a.tensor(0, "input");
  TensorRef w = a.tensor(1, "weight");
  TensorRef b = a.optional_tensor(2, "bias");
  a.require_float(x, "input");
  const TensorInfo xi = g.info(x), wi = g.info(w);
  if (wi.dtype != xi.dtype) {
    a.fail(fmt::format("argument 'weight' has dtype {}; expected the input's {}", dtype_name(wi.dtype),
                       dtype_name(xi.dtype)));
  }
  const int d = int(wi.shape.size()) - 2;
  if (d < 1 || d > 3 || wi.shape[1] != 1) {
    a.fail(fmt::format("argument 'weight' has shape {}; expected [C_out, 1, *kernel] with 1 to 3 kernel dims",
                       shape_str(wi.shape)));
  }
  const IntList size = a.int_list(3, "size");
  if (size.size() != size_t(d) || std::any_of(size.begin(), size.end(), [](int64_t v) { return v < 1; })) {
    a.fail(fmt::format("argument 'size' is {}; expected the {} positive spatial sizes of the input", shape_str(size), d));
  }
  int64_t positions = 1;
  for (int64_t v : size) positions *= v;
  const bool row = xi.shape.size() == 3 && d != 1;
  const bool spatial_ok =
      row ? xi.shape[1] == positions
          : xi.shape.size() == size_t(d) + 2 && std::equal(size.begin(), size.end(), xi.shape.begin() + 1);
  if (!spatial_ok) {
    a.fail(fmt::format("argument 'input' has shape {}; expected [N, {}, C] or [N, {}, C] for size {}",
                       shape_str(xi.shape), fmt::join(size, ", "), positions, shape_str(size)));
  }
  const int64_t n = xi.shape[0], cin = xi.shape.back(), cout = wi.shape[0];
  if (cin < 1 || cout % cin) {
    a.fail(fmt::format("weight {} has {} output channels, not a multiple of the input's {} channels",
                       shape_str(wi.shape), cout, cin));
  }
  if (b.id >= 0 && (g.info(b).shape != Shape{cout} || g.info(b).dtype != xi.dtype)) {
    a.fail(fmt::format("argument 'bias' is {} {}; expected {} [{}]", dtype_name(g.info(b).dtype),
                       shape_str(g.info(b).shape), dtype_name(xi.dtype), cout));
  }
  ConvSpec s;
  s.d = d;
  s.stride = spatial(a, 4, "stride", d, 1);
  const bool split = a.args.size() > 5 && !a.args[5].is_none() && a.int_list(5, "padding").size() == size_t(2 * d);
  read_pads(a, 5, d, split, s.pad_begin, s.pad_end);
  s.dil = spatial(a, 6, "dilation", d, 1);
  require_positive(a, s.stride, d, "stride");
  require_positive(a, s.dil, d, "dilation");
  require_non_negative(a, s.pad_begin, d, "padding");
  require_non_negative(a, s.pad_end, d, "padding");
  Dims3 in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1};
  for (int j = 0; j < d; ++j) {
    in[size_t(3 - d + j)] = size[size_t(j)];
    k[size_t(3 - d + j)] = wi.shape[size_t(2 + j)];
  }
  Shape out_shape{n};
  int64_t out_positions = 1;
  for (size_t j = 3 - size_t(d); j < 3; ++j) {
    const int64_t ext = s.dil[j] * (k[j] - 1) + 1, padded = in[j] + s.pad_begin[j] + s.pad_end[j];
    if (k[j] < 1 || padded < ext) {
      a.fail(fmt::format("the kernel {} (dilation {}) spans more than the padded input {} along spatial dim {}",
                         dims_str(k, d), dims_str(s.dil, d), padded, j - (3 - size_t(d))));
    }
    out[j] = (padded - ext) / s.stride[j] + 1;
    out_positions *= out[j];
    if (!row) out_shape.push_back(out[j]);
  }
  if (row) out_shape.push_back(out_positions);
  out_shape.push_back(cout);
  a.require_fits_binding(x, "input");
  require_index_range(a, xi.numel(), "the input", xi.shape);
  require_result_fits(a, out_shape, xi.dtype);
  s.residual = a.optional_tensor(7, "residual");
  if (s.residual.id >= 0 && (g.info(s.residual).shape != out_shape || g.info(s.residual).dtype != xi.dtype)) {
    a.fail(fmt::format("argument 'residual' is {} {}; expected the result's {} {}", dtype_name(g.info(s.residual).dtype),
                       shape_str(g.info(s.residual).shape), dtype_name(xi.dtype), shape_str(out_shape)));
  }
  TensorRef y = g.add_tensor(out_shape, xi.dtype);
  if (numel(out_shape) == 0) return y;
  record_depthwise(a, y, x, w, b, s, in, k, out, cout, cin, false, true);
  return y;
}

// ---- pooling ------------------------------------------------------------------

struct PoolSpec {
  int d = 2;
  Dims3 kernel{1, 1, 1}, stride{1, 1, 1}, pad_begin{0, 0, 0}, pad_end{0, 0, 0}, dil{1, 1, 1};
  bool avg = false;
  bool ceil_mode = false;
  bool count_include_pad = true;
  int64_t divisor_override = 0;
  bool adaptive = false;
  Dims3 adaptive_out{1, 1, 1};
  // Argmax output: none, ATen's (offset in the (n, c) plane), or ONNX's
  // (offset from the tensor's start, row- or column-major).
  enum class Indices { None, Plane, OnnxRowMajor, OnnxColMajor } indices = Indices::None;
};

static_assert(sizeof(PoolParams) == 144);


uint32_t pow2_floor(uint64_t v) {
  uint32_t p = 1;
  while (uint64_t(p) * 2 <= v) p *= 2;
  return p;
}

const std::vector<DType> kMaxPoolDtypes = {DType::F32, DType::F16, DType::I32, DType::I64, DType::U8, DType::I8};

// ATen's pooling output size (pooling_output_shape_pad_lr): with ceil_mode
// the last window must start inside the input or its begin padding.
int64_t pool_out_size(int64_t in, int64_t k, int64_t pb, int64_t pe, int64_t s, int64_t dil, bool ceil_mode) {
  const int64_t span = in + pb + pe - dil * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (span >= 0 ? span / s : -((-span + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + pb) --out;
  return out;
}

// Returns the output, and with spec.indices the argmax (int64) too.
ValueList pool(const Args& a, TensorRef x, const PoolSpec& s) {
  Graph& g = a.g;
  const TensorInfo xi = g.info(x);
  const int d = s.d;
  if (xi.shape.size() != size_t(d) + 1 && xi.shape.size() != size_t(d) + 2) {
    a.fail(fmt::format("argument 'self' has shape {}; a {}-D pooling takes rank {} (C{}) or {} (N, C{})",
                       shape_str(xi.shape), d, d + 1, d == 1 ? ", L" : d == 2 ? ", H, W" : ", D, H, W", d + 2,
                       d == 1 ? ", L" : d == 2 ? ", H, W" : ", D, H, W"));
  }
  if (s.avg) {
    a.require_float(x, "self");
  } else if (std::find(kMaxPoolDtypes.begin(), kMaxPoolDtypes.end(), xi.dtype) == kMaxPoolDtypes.end()) {
    a.fail(fmt::format("argument 'self' has dtype {}; accepted: float32, float16, int32, int64, uint8, int8",
                       dtype_name(xi.dtype)));
  }
  const size_t lead = xi.shape.size() - size_t(d);
  int64_t planes = 1;
  for (size_t i = 0; i < lead; ++i) planes *= xi.shape[i];
  Dims3 in{1, 1, 1}, out{1, 1, 1};
  for (int j = 0; j < d; ++j) in[size_t(3 - d + j)] = xi.shape[lead + size_t(j)];
  if (s.adaptive) {
    require_positive(a, s.adaptive_out, d, "output_size");
    out = s.adaptive_out;
    for (size_t j = 0; j < 3; ++j) {
      if (in[j] < 1) a.fail(fmt::format("argument 'self' {} has an empty spatial dim", shape_str(xi.shape)));
      // The kernel computes window bounds as (o + 1) * in in 32 bits.
      if ((out[j] + 1) * in[j] > kMaxIndex) {
        a.fail(fmt::format("output_size {} over input {} is too large for 32-bit window arithmetic",
                           dims_str(out, d), shape_str(xi.shape)));
      }
    }
  } else {
    require_positive(a, s.kernel, d, "kernel_size");
    require_positive(a, s.stride, d, "stride");
    require_positive(a, s.dil, d, "dilation");
    require_non_negative(a, s.pad_begin, d, "padding");
    require_non_negative(a, s.pad_end, d, "padding");
    for (size_t j = 3 - size_t(d); j < 3; ++j) {
      out[j] = pool_out_size(in[j], s.kernel[j], s.pad_begin[j], s.pad_end[j], s.stride[j], s.dil[j], s.ceil_mode);
      if (out[j] < 1) {
        a.fail(fmt::format("the output size along spatial dim {} would be {}: input {} with kernel {} (dilation {}) "
                           "and padding {} + {} is too small",
                           j - (3 - size_t(d)), out[j], in[j], s.kernel[j], s.dil[j], s.pad_begin[j], s.pad_end[j]));
      }
    }
  }
  Shape out_shape(xi.shape.begin(), xi.shape.begin() + long(lead));
  for (size_t j = 3 - size_t(d); j < 3; ++j) out_shape.push_back(out[j]);
  a.require_fits_binding(x, "self");
  require_index_range(a, xi.numel(), "the input", xi.shape);
  require_result_fits(a, out_shape, xi.dtype);
  TensorRef y = g.add_tensor(out_shape, xi.dtype);
  const bool want_idx = s.indices != PoolSpec::Indices::None;
  TensorRef idx = want_idx ? g.add_tensor(out_shape, DType::I64) : TensorRef{-1};
  ValueList result{y};
  if (want_idx) result.push_back(idx);
  const int64_t count = numel(out_shape);
  if (count == 0) return result;

  const bool is_float = xi.dtype == DType::F32 || xi.dtype == DType::F16;
  const int64_t in_vol = in[0] * in[1] * in[2];
  const bool whole = s.adaptive ? out == Dims3{1, 1, 1}
                                : in == s.kernel && s.dil == Dims3{1, 1, 1} && s.pad_begin == Dims3{0, 0, 0} &&
                                      s.pad_end == Dims3{0, 0, 0} && s.divisor_override == 0;
  if (whole && is_float && !want_idx) {
    const uint32_t tpr = std::min<uint32_t>(256, pow2_floor(uint64_t(std::max<int64_t>(in_vol / 4, 1))));
    const gpu::Pipeline& p = kernel(g, "ops/kernels/global_pool.wgsl", float_subs(g, xi.dtype, a.op),
                                    {{"TPR", double(tpr)}, {"AVG", s.avg ? 1.0 : 0.0}});
    GlobalPoolParams gp{uint32_t(planes), uint32_t(in_vol), 0, 0};
    g.add_dispatch(p, {Binding::of(y), g.uniform(gp), Binding::of(x)},
                   grid_for(g, gpu::ceil_div(uint64_t(planes), 256 / tpr)), std::string(a.op),
                   fmt::format("global {} pool tpr={}", s.avg ? "avg" : "max", tpr));
    return result;
  }

  Subs subs;
  if (is_float) {
    subs = float_subs(g, xi.dtype, a.op);
    subs.emplace_back("C", "f32");
  } else {
    subs = {{"ENABLE", ""}, {"T", wgsl_type(xi.dtype)}, {"C", wgsl_type(xi.dtype)}};
  }
  // What a max window without any input element gives (the dtype's lowest
  // value; ONNX Runtime's choice).
  double empty = 0;
  switch (xi.dtype) {
    case DType::F32:
    case DType::F16: empty = -double(std::numeric_limits<float>::max()); break;
    case DType::I8: empty = -128; break;
    case DType::U8: empty = 0; break;
    default: empty = double(std::numeric_limits<int32_t>::min()); break;
  }
  const gpu::Pipeline& p = kernel(g, "ops/kernels/pool.wgsl", subs,
                                  {{"AVG", s.avg ? 1.0 : 0.0},
                                   {"ADAPTIVE", s.adaptive ? 1.0 : 0.0},
                                   {"WRITE_IDX", want_idx ? 1.0 : 0.0},
                                   {"IS_FLOAT", is_float ? 1.0 : 0.0},
                                   {"EMPTY", empty}});
  PoolParams pp{};
  pp.count = uint32_t(count);
  pp.divisor_override = uint32_t(s.divisor_override);
  pp.count_include_pad = s.count_include_pad;
  pp.idx_plane = s.indices == PoolSpec::Indices::OnnxRowMajor || s.indices == PoolSpec::Indices::OnnxColMajor
                     ? uint32_t(in_vol)
                     : 0;
  pp.idx_col_major = s.indices == PoolSpec::Indices::OnnxColMajor;
  for (size_t j = 0; j < 3; ++j) {
    pp.in_dims[j] = uint32_t(in[j]);
    pp.out_dims[j] = uint32_t(out[j]);
    pp.kernel[j] = int32_t(s.kernel[j]);
    pp.stride[j] = int32_t(s.stride[j]);
    pp.pad_begin[j] = int32_t(s.pad_begin[j]);
    pp.pad_end[j] = int32_t(s.pad_end[j]);
    pp.dil[j] = int32_t(s.dil[j]);
  }
  pp.in_dims[3] = uint32_t(in_vol);
  pp.out_dims[3] = uint32_t(out[0] * out[1] * out[2]);
  g.add_dispatch(p,
                 {Binding::of(y), g.uniform(pp), Binding::of(x),
                  want_idx ? Binding::of(idx) : Binding::of(g.ctx().dummy_buffer())},
                 grid_for(g, gpu::ceil_div(uint64_t(count), 256)), std::string(a.op),
                 fmt::format("{} pool k={}", s.adaptive ? "adaptive avg" : s.avg ? "avg" : "max",
                             dims_str(s.adaptive ? out : s.kernel, d)));
  return result;
}

// ATen's checks on pooling padding: at most half the (effective) kernel.
void require_half_kernel_pads(const Args& a, const PoolSpec& s) {
  for (size_t j = 3 - size_t(s.d); j < 3; ++j) {
    const int64_t eff = s.avg ? s.kernel[j] : s.dil[j] * (s.kernel[j] - 1) + 1;
    if (s.pad_begin[j] > eff / 2) {
      a.fail(fmt::format("padding {} should be at most half of the {}kernel size {} (dilation {})",
                         dims_str(s.pad_begin, s.d), s.avg ? "" : "effective ", dims_str(s.kernel, s.d),
                         dims_str(s.dil, s.d)));
    }
  }
}

// aten.max_pool{1,2,3}d[_with_indices].default(self, kernel_size, stride=[],
//     padding=0, dilation=1, ceil_mode=False)
Value max_pool(Graph& g, const ValueList& args, const std::string& op, int d, bool with_indices) {
  Args a{op, args, g};
  require_at_most(a, 6);
  TensorRef x = a.tensor(0, "self");
  PoolSpec s;
  s.d = d;
  if (a.int_list(1, "kernel_size").empty()) a.fail("argument 'kernel_size' is empty");
  s.kernel = spatial(a, 1, "kernel_size", d, 1);
  s.stride = spatial(a, 2, "stride", d, 1, &s.kernel);
  s.pad_begin = s.pad_end = spatial(a, 3, "padding", d, 0);
  s.dil = spatial(a, 4, "dilation", d, 1);
  s.ceil_mode = a.boolean(5, "ceil_mode", false);
  s.indices = with_indices ? PoolSpec::Indices::Plane : PoolSpec::Indices::None;
  require_positive(a, s.kernel, d, "kernel_size");
  require_positive(a, s.dil, d, "dilation");
  require_non_negative(a, s.pad_begin, d, "padding");
  require_half_kernel_pads(a, s);
  ValueList r = pool(a, x, s);
  return with_indices ? Value(r) : r[0];
}

// aten.avg_pool1d.default(self, kernel_size, stride=[], padding=0,
//     ceil_mode=False, count_include_pad=True)
// aten.avg_pool{2,3}d.default(..., divisor_override=None)
Value avg_pool(Graph& g, const ValueList& args, const std::string& op, int d) {
  Args a{op, args, g};
  require_at_most(a, d == 1 ? 6 : 7);
  TensorRef x = a.tensor(0, "self");
  PoolSpec s;
  s.d = d;
  s.avg = true;
  if (a.int_list(1, "kernel_size").empty()) a.fail("argument 'kernel_size' is empty");
  s.kernel = spatial(a, 1, "kernel_size", d, 1);
  s.stride = spatial(a, 2, "stride", d, 1, &s.kernel);
  s.pad_begin = s.pad_end = spatial(a, 3, "padding", d, 0);
  s.ceil_mode = a.boolean(4, "ceil_mode", false);
  s.count_include_pad = a.boolean(5, "count_include_pad", true);
  if (d > 1) {
    s.divisor_override = a.integer(6, "divisor_override", 0);
    if (a.args.size() > 6 && !a.args[6].is_none() && s.divisor_override <= 0) {
      a.fail(fmt::format("argument 'divisor_override' is {}; it must be > 0 (or None)", s.divisor_override));
    }
  }
  require_positive(a, s.kernel, d, "kernel_size");
  require_non_negative(a, s.pad_begin, d, "padding");
  require_half_kernel_pads(a, s);
  return pool(a, x, s)[0];
}

// aten.adaptive_avg_pool{1,2,3}d.default(self, output_size) (and
// aten._adaptive_avg_pool{2,3}d.default)
Value adaptive_avg_pool(Graph& g, const ValueList& args, const std::string& op, int d) {
  Args a{op, args, g};
  require_at_most(a, 2);
  TensorRef x = a.tensor(0, "self");
  PoolSpec s;
  s.d = d;
  s.avg = true;
  s.adaptive = true;
  const IntList v = a.int_list(1, "output_size");
  if (v.size() != size_t(d) && v.size() != 1) {
    a.fail(fmt::format("argument 'output_size' is {}; expected {} value{}", shape_str(v), d, d > 1 ? "s" : ""));
  }
  s.adaptive_out = spatial(a, 1, "output_size", d, 1);
  return pool(a, x, s)[0];
}

// wgnn.max_pool_padded.default(input, kernel_size, stride, padding,
//     dilation, ceil_mode) and
// wgnn.max_pool_padded_with_indices.default(..., storage_order) -> (out,
//     indices): the spatial dims d are kernel_size's length; `padding` holds
//     2 * d values (begins, then ends); no limit on the pads; indices as ONNX
//     MaxPool's (offsets from the tensor's start; storage_order 1: column-
//     major over H x W).
// wgnn.avg_pool_padded.default(input, kernel_size, stride, padding,
//     dilation, ceil_mode, count_include_pad, divisor_override=None)
Value padded_pool(Graph& g, const ValueList& args, const std::string& op, bool avg, bool with_indices) {
  Args a{op, args, g};
  require_at_most(a, avg ? 8 : with_indices ? 7 : 6);
  TensorRef x = a.tensor(0, "input");
  const IntList ks = a.int_list(1, "kernel_size");
  if (ks.empty() || ks.size() > 3) {
    a.fail(fmt::format("argument 'kernel_size' is {}; expected 1 to 3 values", shape_str(ks)));
  }
  PoolSpec s;
  s.d = int(ks.size());
  s.avg = avg;
  s.kernel = spatial(a, 1, "kernel_size", s.d, 1);
  s.stride = spatial(a, 2, "stride", s.d, 1, &s.kernel);
  read_pads(a, 3, s.d, true, s.pad_begin, s.pad_end);
  s.dil = spatial(a, 4, "dilation", s.d, 1);
  s.ceil_mode = a.boolean(5, "ceil_mode", false);
  if (avg) {
    s.count_include_pad = a.boolean(6, "count_include_pad", false);
    s.divisor_override = a.integer(7, "divisor_override", 0);
    if (s.divisor_override < 0) a.fail("argument 'divisor_override' must be > 0 (or None)");
  }
  if (with_indices) {
    const int64_t order = a.integer(6, "storage_order", 0);
    if (order != 0 && order != 1) a.fail(fmt::format("argument 'storage_order' is {}; accepted: 0, 1", order));
    if (order == 1 && s.d == 3) a.fail("storage_order 1 (column-major indices) is supported for 1-D and 2-D only");
    s.indices = order ? PoolSpec::Indices::OnnxColMajor : PoolSpec::Indices::OnnxRowMajor;
  }
  ValueList r = pool(a, x, s);
  return with_indices ? Value(r) : r[0];
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  r.add("aten.convolution.default", [](Graph& g, const ValueList& a) { return convolution_op(g, a, false); });
  r.add("wgnn.convolution_padded.default", [](Graph& g, const ValueList& a) { return convolution_op(g, a, true); });
  r.add("wgnn.conv_depthwise_channels_last.default", conv_depthwise_channels_last);
  for (int d = 1; d <= 3; ++d) {
    const std::string mp = fmt::format("aten.max_pool{}d.default", d);
    r.add(mp, [mp, d](Graph& g, const ValueList& a) { return max_pool(g, a, mp, d, false); });
    const std::string mpi = fmt::format("aten.max_pool{}d_with_indices.default", d);
    r.add(mpi, [mpi, d](Graph& g, const ValueList& a) { return max_pool(g, a, mpi, d, true); });
    const std::string ap = fmt::format("aten.avg_pool{}d.default", d);
    r.add(ap, [ap, d](Graph& g, const ValueList& a) { return avg_pool(g, a, ap, d); });
    const std::string aap = fmt::format("aten.adaptive_avg_pool{}d.default", d);
    r.add(aap, [aap, d](Graph& g, const ValueList& a) { return adaptive_avg_pool(g, a, aap, d); });
    if (d > 1) {
      const std::string aap_ = fmt::format("aten._adaptive_avg_pool{}d.default", d);
      r.add(aap_, [aap_, d](Graph& g, const ValueList& a) { return adaptive_avg_pool(g, a, aap_, d); });
    }
  }
  r.add("wgnn.max_pool_padded.default", [](Graph& g, const ValueList& a) {
    return padded_pool(g, a, "wgnn.max_pool_padded.default", false, false);
  });
  r.add("wgnn.max_pool_padded_with_indices.default", [](Graph& g, const ValueList& a) {
    return padded_pool(g, a, "wgnn.max_pool_padded_with_indices.default", false, true);
  });
  r.add("wgnn.avg_pool_padded.default", [](Graph& g, const ValueList& a) {
    return padded_pool(g, a, "wgnn.avg_pool_padded.default", true, false);
  });
}

}  // namespace wgnn::ops

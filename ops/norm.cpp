// Normalization ops: batch_norm (inference), layer_norm, group_norm and
// instance_norm, with ATen's names, arguments and multi-output results.
#include <array>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/epilogue.h"
#include "ops/helpers.h"
#include "ops/matmul.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

void require_eps(const Args& a, double eps) {
  if (!(eps >= 0.0) || !std::isfinite(eps)) {
    a.fail(fmt::format("argument 'eps' is {}; accepted: a finite value >= 0", eps));
  }
}

void require_channel_vector(const Args& a, TensorRef t, std::string_view name, int64_t channels, DType dtype) {
  if (t.id < 0) return;
  const TensorInfo& ti = a.g.info(t);
  if (ti.shape.size() != 1 || ti.shape[0] != channels) {
    a.fail(fmt::format("argument '{}' has shape {}; expected [{}] (one value per channel)", name,
                       shape_str(ti.shape), channels));
  }
  if (ti.dtype != dtype) {
    a.fail(fmt::format("argument '{}' has dtype {} but the other parameters have {}; they must agree", name,
                       dtype_name(ti.dtype), dtype_name(dtype)));
  }
}


// The activation of an op's (activation, lo, hi) arguments from `i` on:
// wgnn's fused norms (passes/fuse_norm_activation).
ActivationSpec norm_activation(const Args& a, size_t i) {
  ActivationSpec s;
  s.act = parse_activation(a, a.string(i, "act", "none"),
                           {Activation::None, Activation::Relu, Activation::Clamp, Activation::Gelu,
                            Activation::GeluTanh});
  if (s.act == Activation::Clamp) {
    s.lo = a.scalar(i + 1, "lo", 0.0);
    s.hi = a.scalar(i + 2, "hi", 0.0);
    if (std::isnan(s.lo) || std::isnan(s.hi) || s.lo > s.hi) {
      a.fail(fmt::format("clamp bounds [{}, {}] are not a range", s.lo, s.hi));
    }
  }
  return s;
}

// aten._native_batch_norm_legit_no_training(input, weight?, bias?,
//     running_mean, running_var, momentum, eps) -> (out, save_mean, save_invstd)
// and wgnn.batch_norm_activation(the same, act, lo, hi) -> out: the
// activation applied to out as it is stored.
Value batch_norm_impl(Graph& g, const ValueList& args, bool fused) {
  const std::string op =
      fused ? "wgnn.batch_norm_activation.default" : "aten._native_batch_norm_legit_no_training.default";
  Args a{op, args, g};
  const ActivationSpec act = fused ? norm_activation(a, 7) : ActivationSpec{};
  TensorRef x = a.tensor(0, "input");
  TensorRef w = a.optional_tensor(1, "weight");
  TensorRef b = a.optional_tensor(2, "bias");
  TensorRef mean = a.tensor(3, "running_mean");
  TensorRef var = a.tensor(4, "running_var");
  (void)a.scalar(5, "momentum", 0.1);  // unused in inference
  const double eps = a.scalar(6, "eps", 1e-5);
  require_eps(a, eps);
  a.require_float(x, "input");
  a.require_fits_binding(x, "input");
  const TensorInfo xi = g.info(x);
  if (xi.shape.size() < 2 || xi.shape.size() > 5) {
    a.fail(fmt::format("argument 'input' has shape {}; accepted: rank 2 to 5, N x C x ...", shape_str(xi.shape)));
  }
  const int64_t channels = xi.shape[1];
  a.require_float(mean, "running_mean");
  const DType pdtype = g.info(mean).dtype;
  require_channel_vector(a, mean, "running_mean", channels, pdtype);
  require_channel_vector(a, var, "running_var", channels, pdtype);
  require_channel_vector(a, w, "weight", channels, pdtype);
  require_channel_vector(a, b, "bias", channels, pdtype);
  if (xi.numel() > 0xFFFFFFFFll) a.fail("input too large for 32-bit indexing");

  // Fold (scale, shift) per channel: once at prepare() when every parameter
  // is a constant, else on every run.
  gpu::Buffer folded = g.scratch(uint64_t(std::max<int64_t>(channels, 1)) * 8, "batch_norm folded");
  {
    const gpu::Pipeline& fold = kernel(g, "ops/kernels/batch_norm_fold.wgsl", float_subs(g, pdtype, op));
    Binding fp = g.uniform(FoldParams{uint32_t(channels), float(eps), w.id >= 0, b.id >= 0});
    std::vector<Binding> bind = {Binding::of(folded), fp,
                                 w.id >= 0 ? Binding::of(w) : Binding::of(g.ctx().dummy_buffer()),
                                 b.id >= 0 ? Binding::of(b) : Binding::of(g.ctx().dummy_buffer()),
                                 Binding::of(mean), Binding::of(var)};
    bool constant = true;
    for (TensorRef t : {w, b, mean, var}) {
      if (t.id >= 0 && g.info(t).kind != TensorKind::Constant) constant = false;
    }
    const gpu::Grid grid = grid_for(g, gpu::ceil_div(uint64_t(channels), 64));
    if (constant) {
      g.add_init_dispatch(fold, std::move(bind), grid, op, "batch_norm_fold");
    } else {
      g.add_dispatch(fold, std::move(bind), grid, op, "batch_norm_fold");
    }
  }

  int64_t inner = 1;
  for (size_t d = 2; d < xi.shape.size(); ++d) inner *= xi.shape[d];
  const bool vec4 = inner % 4 == 0;
  const int vw = vec4 ? 4 : 1;
  const uint64_t count = uint64_t(xi.numel()) / vw;
  const gpu::Pipeline& p =
      kernel(g, "ops/kernels/batch_norm.wgsl", vector_subs(g, xi.dtype, vec4, op), activation_constants(act));
  Binding params =
      g.uniform(BatchNormParams{uint32_t(count), uint32_t(inner / vw), uint32_t(std::max<int64_t>(channels, 1)), 0});
  TensorRef y = g.add_tensor(xi.shape, xi.dtype);
  g.add_dispatch(p, {Binding::of(y), params, Binding::of(x), Binding::of(folded)},
                 grid_for(g, gpu::ceil_div(count, 256)), op, "batch_norm" + activation_label(act.act));
  if (fused) return y;
  // In inference ATen returns empty statistics.
  TensorRef save_mean = g.add_tensor({0}, xi.dtype);
  TensorRef save_invstd = g.add_tensor({0}, xi.dtype);
  return ValueList{y, save_mean, save_invstd};
}

Value batch_norm_no_training(Graph& g, const ValueList& args) { return batch_norm_impl(g, args, false); }
Value batch_norm_activation(Graph& g, const ValueList& args) { return batch_norm_impl(g, args, true); }


uint32_t pow2_floor(uint64_t v) {
  uint32_t p = 1;
  while (uint64_t(p) * 2 <= v) p *= 2;
  return p;
}

// A split product's parts added in order into `acc` (vec4<f32>), eight
// loads in flight before their adds (as lib/splitk_parts.wgsl's sum: a
// part past params.parts adds 0.0, which leaves the sum's bits).
const std::string& folded_sum_wgsl() {
  static const std::string text = [] {
    std::string t = "var acc = vec4<f32>(0.0);\n  let stride = params.part_stride;\n"
                    "  for (var s = 0u; s < params.parts; s += 8u) {\n    let at = s * stride + i;\n";
    for (int k = 0; k < 8; ++k) {
      t += fmt::format("    var p{0} = vec4<f32>(0.0);\n    if (s + {0}u < params.parts) {{ p{0} = part[at + {0}u * stride]; }}\n", k);
    }
    for (int k = 0; k < 8; ++k) t += fmt::format("    acc += p{};\n", k);
    return t + "  }\n";
  }();
  return text;
}

// Layer norm of x (or of x + x2, the sum also returned): {out, mean, rstd[, sum]}.
// With `folded`, x2 is a split product's sum: its parts and bias added as
// the rows load, in the sum pass's order and rounding (vec4 rows only).
ValueList layer_norm(Graph& g, const std::string& op, Args& a, TensorRef x, TensorRef x2, const IntList& normalized,
                     TensorRef w, TensorRef b, double eps, const SplitSum* folded = nullptr, bool rms = false) {
  require_eps(a, eps);
  a.require_float(x, "input");
  const TensorInfo xi = g.info(x);
  if (x2.id >= 0) {
    const TensorInfo& o = g.info(x2);
    if (o.shape != xi.shape || o.dtype != xi.dtype) {
      a.fail(fmt::format("'other' ({} {}) must have the shape and dtype of 'self' ({} {})", dtype_name(o.dtype),
                         shape_str(o.shape), dtype_name(xi.dtype), shape_str(xi.shape)));
    }
  }
  const size_t k = normalized.size();
  if (k == 0 || k > xi.shape.size()) {
    a.fail(fmt::format("normalized_shape {} must name 1 to {} trailing dims of input {}", shape_str(normalized),
                       xi.shape.size(), shape_str(xi.shape)));
  }
  const size_t axis = xi.shape.size() - k;
  for (size_t i = 0; i < k; ++i) {
    if (xi.shape[axis + i] != normalized[i]) {
      a.fail(fmt::format("normalized_shape {} does not match the trailing dims of input {}", shape_str(normalized),
                         shape_str(xi.shape)));
    }
  }
  int64_t width = 1, rows = 1;
  for (size_t i = 0; i < xi.shape.size(); ++i) (i < axis ? rows : width) *= xi.shape[i];
  if (width == 0) a.fail("normalized_shape has a zero dimension; rows must not be empty");
  for (auto [t, name] : {std::pair{w, "weight"}, std::pair{b, "bias"}}) {
    if (t.id < 0) continue;
    const TensorInfo& ti = g.info(t);
    if (ti.shape != Shape(normalized.begin(), normalized.end())) {
      a.fail(fmt::format("argument '{}' has shape {}; expected normalized_shape {}", name, shape_str(ti.shape),
                         shape_str(normalized)));
    }
    if (ti.dtype != xi.dtype) {
      a.fail(fmt::format("argument '{}' has dtype {}; expected the input's {}", name, dtype_name(ti.dtype),
                         dtype_name(xi.dtype)));
    }
  }
  if (xi.numel() > 0xFFFFFFFFll) a.fail("input too large for 32-bit indexing");

  const bool vec4 = width % 4 == 0;
  const int64_t width_v = width / (vec4 ? 4 : 1);
  // Threads per row: a quarter of its vec4s (at least 4 chunks each), or,
  // for at most 8 rows (a decoder step's one token), as many as the row has
  // vec4s: the few rows are then not read by a handful of threads each.
  // WGNN_LAYER_NORM_TPR fixes it (a power of two up to 256, for measuring).
  const uint32_t forced_tpr = [&] {
    const char* e = g.ctx().settings().get("WGNN_LAYER_NORM_TPR");
    const int v = e ? std::atoi(e) : 0;
    return v >= 1 && v <= 256 && (v & (v - 1)) == 0 ? uint32_t(v) : 0u;
  }();
  uint32_t tpr = std::min<uint32_t>(256, pow2_floor(uint64_t(std::max<int64_t>(width_v / 4, 1))));
  if (rows <= 8) tpr = std::min<uint32_t>(256, pow2_floor(uint64_t(std::max<int64_t>(width_v, 1))));
  // Few rows (fewer than 128 workgroups): up to 64 threads a row while the
  // row has more vec4s than threads, so that more multiprocessors share
  // the work. On the H200, forcing 64 took DeiT-T (197 rows of 48 vec4s: 7
  // workgroups at 8 a row) from 0.702 to 0.652 GPU ms and BART's decoder
  // (32 rows of 192: 4 workgroups at 32) from 0.920 to 0.879
  // (docs/BENCHMARKS.md); models with many rows keep theirs.
  while (tpr < 64 && int64_t(tpr) < width_v && gpu::ceil_div(uint64_t(rows), uint64_t(256 / tpr)) < 128) tpr *= 2;
  // A split product's parts summed as the rows load (each row reads
  // `parts` times its width): at least as many threads a row as it has
  // vec4s (rounded down to a power of two), up to 256. BART's 768-wide
  // rows take 128 (GPU 0.883 -> 0.877 ms against the sum pass on the H200);
  // DeiT-T's 192-wide keep the 64 of the rule above (forced to 32 they
  // lost 0.652 -> 0.666; docs/BENCHMARKS.md).
  if (folded) tpr = std::max(tpr, std::min<uint32_t>(256, pow2_floor(uint64_t(std::max<int64_t>(width_v, 1)))));
  if (forced_tpr) tpr = forced_tpr;
  // Shares of at most 16 chunks per thread stay in registers (x read once).
  const uint64_t chunks = gpu::ceil_div(uint64_t(width_v), tpr);
  const bool cached = chunks <= 16;
  Subs subs = vector_subs(g, xi.dtype, vec4, op);
  // Before the type placeholders they contain.
  if (folded) {
    if (!vec4 || folded->count != uint64_t(xi.numel())) {
      a.fail(fmt::format("a split product's sum of {} elements cannot be folded into rows of {}", folded->count,
                         width));
    }
    const bool bias = folded->bias.id >= 0;
    subs.insert(subs.begin(),
                {{"ADD_DECL",
                  std::string("@group(0) @binding(7) var<storage, read> part: array<vec4<f32>>;\n"
                              "@group(0) @binding(8) var<storage, read_write> sum_out: array<{{V}}>;") +
                      (bias ? "\n@group(0) @binding(9) var<storage, read> mm_bias: array<{{V}}>;" : "")},
                 {"LOAD_X", folded_sum_wgsl() +
                                (bias ? "  let y = {{V}}(acc + {{F32V}}(mm_bias[i % params.width_v]));\n"
                                      : "  let y = {{V}}(acc);\n") +
                                "  let s = {{V}}({{F32V}}(x[i]) + {{F32V}}(y));\n"
                                "  sum_out[i] = s;\n  return s;"}});
  } else if (x2.id >= 0) {
    subs.insert(subs.begin(), {{"ADD_DECL",
                                "@group(0) @binding(7) var<storage, read> x2: array<{{V}}>;\n"
                                "@group(0) @binding(8) var<storage, read_write> sum_out: array<{{V}}>;"},
                               {"LOAD_X",
                                "let s = {{V}}({{F32V}}(x[i]) + {{F32V}}(x2[i]));\n  sum_out[i] = s;\n  return s;"}});
  } else {
    subs.insert(subs.begin(), {{"ADD_DECL", ""}, {"LOAD_X", "return x[i];"}});
  }
  const gpu::Pipeline& p = kernel(g, "ops/kernels/layer_norm.wgsl", subs,
                                  {{"TPR", double(tpr)},
                                   {"CHUNKS", double(cached ? chunks : 1)},
                                   {"CACHED", cached ? 1.0 : 0.0},
                                   {"RMS", rms ? 1.0 : 0.0}});
  Shape stat_shape(xi.shape.begin(), xi.shape.begin() + long(axis));
  stat_shape.insert(stat_shape.end(), k, 1);
  TensorRef y = g.add_tensor(xi.shape, xi.dtype);
  TensorRef mean = g.add_tensor(stat_shape, DType::F32);
  TensorRef rstd = g.add_tensor(stat_shape, DType::F32);
  TensorRef sum = x2.id >= 0 || folded ? g.add_tensor(xi.shape, xi.dtype) : TensorRef{-1};
  const uint64_t rows_per_group = 256 / tpr;
  // Over the binding limit: spans of rows, every per-row tensor bound by
  // its span's range (weight and bias whole).
  const uint64_t row = uint64_t(width) * gpu_dtype_size(xi.dtype);
  if (w.id >= 0) a.require_fits_binding(w, "weight");
  if (b.id >= 0) a.require_fits_binding(b, "bias");
  const std::vector<Span> spans = binding_spans(g, uint64_t(rows), {row, 4}, 1,
                                                fmt::format("{}: argument 'input' {} {}", op, dtype_name(xi.dtype),
                                                            shape_str(xi.shape)));
  if (folded && spans.size() != 1) a.fail("a split product's sum is folded into one dispatch only");
  for (const Span& sp : spans) {
    auto part = [&](TensorRef t, uint64_t unit) { return bind_bytes(g, t, sp.start * unit, sp.count * unit); };
    Binding params = g.uniform(LayerNormParams{uint32_t(sp.count), uint32_t(width_v), float(width), float(eps),
                                                   w.id >= 0, b.id >= 0, folded ? uint32_t(folded->splits) : 0u,
                                                   folded ? uint32_t(folded->count / 4) : 0u});
    std::vector<Binding> bindings{part(y, row), part(mean, 4), part(rstd, 4), params, part(x, row),
                                  optional_input(g, w.id >= 0 ? Value(w) : Value(None{})),
                                  optional_input(g, b.id >= 0 ? Value(b) : Value(None{}))};
    if (folded) {
      bindings.push_back(Binding::of(folded->part));
      bindings.push_back(part(sum, row));
      if (folded->bias.id >= 0) bindings.push_back(Binding::of(folded->bias));
    } else if (x2.id >= 0) {
      bindings.push_back(part(x2, row));
      bindings.push_back(part(sum, row));
    }
    g.add_dispatch(p, std::move(bindings), grid_for(g, gpu::ceil_div(sp.count, rows_per_group)), op,
                   fmt::format("{}{} tpr={}{}{}", x2.id >= 0 || folded ? "add_" : "", rms ? "rms_norm" : "layer_norm", tpr,
                               cached ? fmt::format(" cached{}", chunks) : "",
                               folded ? fmt::format(" splitk sum {}{}", folded->splits,
                                                    folded->bias.id >= 0 ? " bias" : "")
                                      : ""));
  }
  if (x2.id >= 0 || folded) return ValueList{y, mean, rstd, sum};
  return ValueList{y, mean, rstd};
}

// aten.native_layer_norm(input, normalized_shape, weight?, bias?, eps)
//     -> (out, mean, rstd)
Value native_layer_norm(Graph& g, const ValueList& args) {
  const std::string op = "aten.native_layer_norm.default";
  Args a{op, args, g};
  return layer_norm(g, op, a, a.tensor(0, "input"), TensorRef{-1}, a.int_list(1, "normalized_shape"),
                    a.optional_tensor(2, "weight"), a.optional_tensor(3, "bias"), a.scalar(4, "eps", 1e-5));
}

// aten.rms_norm(input, normalized_shape, weight?, eps?) -> out: x /
// sqrt(mean(x^2) + eps) over the trailing dims, times weight; eps None is
// the dtype's machine epsilon, as in PyTorch. (The kernel is layer norm's
// with RMS on; passes/fuse_rms_norm finds the written-out form.)
double rms_eps(const Args& a, size_t i, TensorRef x, Graph& g) {
  return a.scalar(i, "eps", g.info(x).dtype == DType::F16 ? 0.0009765625 : double(std::numeric_limits<float>::epsilon()));
}

Value rms_norm(Graph& g, const ValueList& args) {
  const std::string op = "aten.rms_norm.default";
  Args a{op, args, g};
  const TensorRef x = a.tensor(0, "input");
  const ValueList r = layer_norm(g, op, a, x, TensorRef{-1}, a.int_list(1, "normalized_shape"),
                                 a.optional_tensor(2, "weight"), TensorRef{-1}, rms_eps(a, 3, x, g), nullptr, true);
  return r[0];
}

// wgnn.add_rms_norm(self, other, normalized_shape, weight?, eps?) -> (out,
// sum): aten.rms_norm of self + other (same shape and dtype), the sum also
// written, as wgnn.add_layer_norm (passes/fuse_add_layer_norm).
Value add_rms_norm(Graph& g, const ValueList& args) {
  const std::string op = "wgnn.add_rms_norm.default";
  Args a{op, args, g};
  const TensorRef x = a.tensor(0, "self");
  const ValueList r = layer_norm(g, op, a, x, a.tensor(1, "other"), a.int_list(2, "normalized_shape"),
                                 a.optional_tensor(3, "weight"), TensorRef{-1}, rms_eps(a, 4, x, g), nullptr, true);
  return ValueList{r[0], r[3]};
}

// wgnn.add_layer_norm(self, other, normalized_shape, weight?, bias?, eps)
//     -> (out, mean, rstd, sum): layer norm of self + other (same shape and
// dtype; the sum rounded to that dtype, as aten.add would give it), the sum
// also written: a residual add and the layer norm after it in one dispatch.
Value add_layer_norm(Graph& g, const ValueList& args) {
  const std::string op = "wgnn.add_layer_norm.default";
  Args a{op, args, g};
  return layer_norm(g, op, a, a.tensor(0, "self"), a.tensor(1, "other"), a.int_list(2, "normalized_shape"),
                    a.optional_tensor(3, "weight"), a.optional_tensor(4, "bias"), a.scalar(5, "eps", 1e-5));
}

// wgnn.matmul_add_layer_norm(self, other, bias, alpha, act, trans_self,
//     trans_other, lo, hi, residual, normalized_shape, weight?, ln_bias?, eps)
//     -> (out, mean, rstd, sum): wgnn.add_layer_norm of wgnn.matmul_add(self ..
// hi) and residual (passes/fuse_matmul_layer_norm: alpha 1, no activation,
// self not transposed, other a 2-D weight). Where the product is split
// along K, the layer norm adds its parts and bias as it loads its rows, in
// the sum pass's order and rounding, and the pass is not recorded: one
// dispatch fewer. Otherwise the product and the norm as the two ops record
// them (so also where the device allows fewer storage buffers than the
// folded layer norm binds). Shapes are checked before the product is
// recorded, so that a plan they do not suit runs the unfused nodes.
Value matmul_add_layer_norm(Graph& g, const ValueList& args) {
  const std::string op = "wgnn.matmul_add_layer_norm.default";
  Args a{op, args, g};
  if (args.size() != 14) a.fail(fmt::format("takes 14 arguments, got {}", args.size()));
  const TensorRef self = a.tensor(0, "self"), other = a.tensor(1, "other"), res = a.tensor(9, "residual");
  const bool trans_other = a.boolean(6, "trans_other", false);
  if (a.boolean(5, "trans_self", false)) a.fail("argument 'trans_self' must be False");
  const TensorInfo si = g.info(self), oi = g.info(other), ri = g.info(res);
  if (si.shape.size() < 2 || oi.shape.size() != 2) {
    a.fail(fmt::format("'self' {} must be at least 2-D and 'other' {} 2-D", shape_str(si.shape), shape_str(oi.shape)));
  }
  const int64_t N = oi.shape[trans_other ? 0 : 1];
  Shape out_shape(si.shape.begin(), si.shape.end() - 1);
  out_shape.push_back(N);
  if (ri.shape != out_shape || ri.dtype != si.dtype) {
    a.fail(fmt::format("argument 'residual' is {} {}; expected the product's {} {}", dtype_name(ri.dtype),
                       shape_str(ri.shape), dtype_name(si.dtype), shape_str(out_shape)));
  }
  const IntList normalized = a.int_list(10, "normalized_shape");
  if (normalized != IntList{N}) {
    a.fail(fmt::format("normalized_shape [{}] must be the product's last dim [{}]", fmt::join(normalized, ", "), N));
  }
  const TensorRef w = a.optional_tensor(11, "weight"), b = a.optional_tensor(12, "ln_bias");
  for (auto [t, name] : {std::pair{w, "weight"}, std::pair{b, "ln_bias"}}) {
    if (t.id >= 0 && (g.info(t).shape != Shape{N} || g.info(t).dtype != si.dtype)) {
      a.fail(fmt::format("argument '{}' is {} {}; expected {} [{}]", name, dtype_name(g.info(t).dtype),
                         shape_str(g.info(t).shape), dtype_name(si.dtype), N));
    }
  }
  const double eps = a.scalar(13, "eps", 1e-5);
  require_eps(a, eps);
  a.require_float(res, "residual");
  // The folded layer norm binds 8 storage buffers, 9 with the product's
  // bias: more than WebGPU's default limit of 8 allows there.
  std::optional<SplitSumCapture> capture;
  if (g.ctx().limits().max_storage_buffers_per_shader_stage >= (args[2].is_none() ? 8u : 9u)) {
    capture.emplace(N, ri.numel());
  }
  const TensorRef y = ops::call(g, "wgnn.matmul_add.default", ValueList(args.begin(), args.begin() + 9)).tensor();
  const std::optional<SplitSum> folded = capture ? capture->taken : std::nullopt;
  capture.reset();
  if (folded) return layer_norm(g, op, a, res, TensorRef{-1}, normalized, w, b, eps, &*folded);
  return layer_norm(g, op, a, y, res, normalized, w, b, eps);
}

// WGNN_GROUP_NORM_SPLIT: 1 (the default) cuts few long rows into slices,
// 0 keeps one workgroup a row.
bool group_norm_split(const Settings& settings) {
  const char* e = settings.get("WGNN_GROUP_NORM_SPLIT");
  if (!e || !*e) return true;
  const std::string_view v(e);
  if (v != "0" && v != "1") throw Error(fmt::format("WGNN_GROUP_NORM_SPLIT='{}': expected 0 or 1", e));
  return v == "1";
}

// Group norm of x viewed as [N, C, HxW] (shapes checked by the caller):
// returns (out, mean [N, groups], rstd [N, groups]); mean and rstd are f32.
ValueList group_norm(const Args& a, TensorRef x, TensorRef w, TensorRef b, int64_t N, int64_t C, int64_t hw,
                     int64_t groups, double eps, const ActivationSpec& act = {}) {
  Graph& g = a.g;
  const TensorInfo xi = g.info(x);
  for (auto [t, name] : {std::pair{w, "weight"}, std::pair{b, "bias"}}) {
    if (t.id < 0) continue;
    const TensorInfo& ti = g.info(t);
    if (ti.shape != Shape{C}) {
      a.fail(fmt::format("argument '{}' has shape {}; expected [{}] (one value per channel)", name,
                         shape_str(ti.shape), C));
    }
    if (ti.dtype != xi.dtype) {
      a.fail(fmt::format("argument '{}' has dtype {}; expected the input's {}", name, dtype_name(ti.dtype),
                         dtype_name(xi.dtype)));
    }
  }
  if (xi.numel() > 0xFFFFFFFFll) a.fail("input too large for 32-bit indexing");
  const int64_t rows = N * groups, width = C / groups * hw;
  TensorRef y = g.add_tensor(xi.shape, xi.dtype);
  TensorRef mean = g.add_tensor({N, groups}, DType::F32);
  TensorRef rstd = g.add_tensor({N, groups}, DType::F32);
  if (rows == 0) return ValueList{y, mean, rstd};
  if (width == 0) a.fail("each group is empty (C / group * HxW = 0); groups must not be empty");

  const bool vec4 = hw % 4 == 0;
  const int64_t width_v = width / (vec4 ? 4 : 1);
  // Fewer rows than multiprocessors on a typical GPU (128), each of at
  // least 4096 chunks, go in slices of 1024 chunks or more over about 512
  // workgroups, in two dispatches (kernels/group_norm_split.wgsl): x is read
  // twice, but by 4-30 times the workgroups. MODNet 512's 15 such norms
  // (8-32 rows of up to 65,536 vec4s) took 442 -> 338 us on the H200, the
  // model 2.784 -> 2.600 GPU ms (docs/BENCHMARKS.md).
  // WGNN_GROUP_NORM_SPLIT=0 keeps one workgroup a row.
  if (group_norm_split(a.g.ctx().settings()) && rows < 128 && width_v >= 4096) {
    const int64_t want = std::min<int64_t>((512 + rows - 1) / rows, width_v / 1024);
    const int64_t slice_v = (width_v + want - 1) / want;
    const int64_t splits = (width_v + slice_v - 1) / slice_v;
    const uint64_t chunks = gpu::ceil_div(uint64_t(slice_v), 256);
    const bool cached = chunks <= 16;
    Binding params = g.uniform(GroupNormParams{uint32_t(rows), uint32_t(width_v), float(width), float(eps),
                                                   w.id >= 0, b.id >= 0, uint32_t(groups),
                                                   uint32_t(hw / (vec4 ? 4 : 1)), uint32_t(C / groups),
                                                   uint32_t(splits), uint32_t(slice_v), 0});
    gpu::Buffer partial = g.scratch(uint64_t(rows * splits) * 16, "group_norm slice statistics");
    for (uint32_t pass : {1u, 2u}) {
      gpu::Constants constants = activation_constants(act);
      constants.insert(constants.end(), {{"TPR", 256.0},
                                         {"CHUNKS", double(cached ? chunks : 1)},
                                         {"CACHED", cached ? 1.0 : 0.0},
                                         {"PASS", double(pass)}});
      const gpu::Pipeline& p =
          kernel(g, "ops/kernels/group_norm_split.wgsl", vector_subs(g, xi.dtype, vec4, a.op), constants);
      g.add_dispatch(p,
                     {Binding::of(y), Binding::of(mean), Binding::of(rstd), params, Binding::of(x),
                      optional_input(g, w.id >= 0 ? Value(w) : Value(None{})),
                      optional_input(g, b.id >= 0 ? Value(b) : Value(None{})), Binding::of(partial)},
                     grid_for(g, uint64_t(rows * splits)), std::string(a.op),
                     fmt::format("group_norm {} slices x {} {}", rows, splits,
                                 pass == 1 ? "statistics" : "normalized" + activation_label(act.act)));
    }
    return ValueList{y, mean, rstd};
  }
  const uint32_t tpr = std::min<uint32_t>(256, pow2_floor(uint64_t(std::max<int64_t>(width_v / 4, 1))));
  const uint64_t chunks = gpu::ceil_div(uint64_t(width_v), tpr);
  const bool cached = chunks <= 16;
  gpu::Constants constants = activation_constants(act);
  constants.insert(constants.end(),
                   {{"TPR", double(tpr)}, {"CHUNKS", double(cached ? chunks : 1)}, {"CACHED", cached ? 1.0 : 0.0}});
  const gpu::Pipeline& p = kernel(g, "ops/kernels/group_norm.wgsl", vector_subs(g, xi.dtype, vec4, a.op), constants);
  Binding params = g.uniform(GroupNormParams{uint32_t(rows), uint32_t(width_v), float(width), float(eps),
                                                 w.id >= 0, b.id >= 0, uint32_t(groups),
                                                 uint32_t(hw / (vec4 ? 4 : 1)), uint32_t(C / groups), 0, 0, 0});
  const uint64_t rows_per_group = 256 / tpr;
  g.add_dispatch(p,
                 {Binding::of(y), Binding::of(mean), Binding::of(rstd), params, Binding::of(x),
                  optional_input(g, w.id >= 0 ? Value(w) : Value(None{})),
                  optional_input(g, b.id >= 0 ? Value(b) : Value(None{}))},
                 grid_for(g, gpu::ceil_div(uint64_t(rows), rows_per_group)), std::string(a.op),
                 fmt::format("group_norm tpr={}{}{}", tpr, cached ? fmt::format(" cached{}", chunks) : "",
                             activation_label(act.act)));
  return ValueList{y, mean, rstd};
}

// Input [N, C, ...] of a float dtype: N, C and the product of the rest.
std::array<int64_t, 3> ncx(const Args& a, TensorRef x) {
  a.require_float(x, "input");
  a.require_fits_binding(x, "input");
  const Shape& s = a.g.info(x).shape;
  if (s.size() < 2) a.fail(fmt::format("argument 'input' has shape {}; expected N x C x ...", shape_str(s)));
  int64_t hw = 1;
  for (size_t d = 2; d < s.size(); ++d) hw *= s[d];
  return {s[0], s[1], hw};
}

// aten.native_group_norm(input, weight?, bias?, N, C, HxW, group, eps)
//     -> (out, mean [N, group], rstd [N, group])
Value native_group_norm(Graph& g, const ValueList& args) {
  const std::string op = "aten.native_group_norm.default";
  Args a{op, args, g};
  TensorRef x = a.tensor(0, "input");
  TensorRef w = a.optional_tensor(1, "weight");
  TensorRef b = a.optional_tensor(2, "bias");
  const int64_t N = a.integer(3, "N", -1), C = a.integer(4, "C", -1), hw = a.integer(5, "HxW", -1);
  const int64_t groups = a.integer(6, "group", -1);
  const double eps = a.scalar(7, "eps", 1e-5);
  require_eps(a, eps);
  const auto [xn, xc, xhw] = ncx(a, x);
  if (N != xn || C != xc || hw != xhw) {
    a.fail(fmt::format("N={}, C={}, HxW={} do not describe input {} (expected N={}, C={}, HxW={})", N, C, hw,
                       shape_str(g.info(x).shape), xn, xc, xhw));
  }
  if (groups <= 0 || C % groups != 0) {
    a.fail(fmt::format("argument 'group' is {}; it must be positive and divide C = {}", groups, C));
  }
  return group_norm(a, x, w, b, N, C, hw, groups, eps);
}

// aten.instance_norm(input, weight?, bias?, running_mean?, running_var?,
//     use_input_stats, momentum, eps, cudnn_enabled) -> out
// With use_input_stats, each (n, c) plane normalizes by its own statistics
// (group norm with one channel per group); the running statistics are not
// updated (inference). Without, it is batch norm with the running ones.
// wgnn.instance_norm_activation(the same, act, lo, hi): the activation
// applied to out as it is stored.
Value instance_norm_impl(Graph& g, const ValueList& args, bool fused) {
  const std::string op = fused ? "wgnn.instance_norm_activation.default" : "aten.instance_norm.default";
  Args a{op, args, g};
  const ActivationSpec act = fused ? norm_activation(a, 9) : ActivationSpec{};
  TensorRef x = a.tensor(0, "input");
  TensorRef w = a.optional_tensor(1, "weight");
  TensorRef b = a.optional_tensor(2, "bias");
  TensorRef rm = a.optional_tensor(3, "running_mean");
  TensorRef rv = a.optional_tensor(4, "running_var");
  const bool use_input_stats = a.boolean(5, "use_input_stats", true);
  const double momentum = a.scalar(6, "momentum", 0.1);
  const double eps = a.scalar(7, "eps", 1e-5);
  (void)a.boolean(8, "cudnn_enabled", false);
  require_eps(a, eps);
  const auto [n, c, hw] = ncx(a, x);
  if (!use_input_stats) {
    if (rm.id < 0 || rv.id < 0) a.fail("use_input_stats=False needs running_mean and running_var");
    auto opt = [](TensorRef t) { return t.id >= 0 ? Value(t) : Value(None{}); };
    try {
      if (!fused) return batch_norm_no_training(g, {x, opt(w), opt(b), rm, rv, momentum, eps}).list()[0];
      return batch_norm_activation(g, {x, opt(w), opt(b), rm, rv, momentum, eps, std::string(activation_name(act.act)),
                                       act.lo, act.hi});
    } catch (const Error& e) {
      a.fail(fmt::format("with use_input_stats=False (batch norm): {}", e.what()));
    }
  }
  return group_norm(a, x, w, b, n, c, hw, c, eps, act)[0];
}

Value instance_norm(Graph& g, const ValueList& args) { return instance_norm_impl(g, args, false); }
Value instance_norm_activation(Graph& g, const ValueList& args) { return instance_norm_impl(g, args, true); }

}  // namespace

void register_norm_ops(OpRegistry& r) {
  r.add("aten._native_batch_norm_legit_no_training.default", batch_norm_no_training);
  r.add("aten.native_layer_norm.default", native_layer_norm);
  r.add("wgnn.add_layer_norm.default", add_layer_norm);
  r.add("aten.rms_norm.default", rms_norm);
  r.add("wgnn.add_rms_norm.default", add_rms_norm);
  r.add("wgnn.matmul_add_layer_norm.default", matmul_add_layer_norm);
  r.add("aten.native_group_norm.default", native_group_norm);
  r.add("aten.instance_norm.default", instance_norm);
  r.add("wgnn.batch_norm_activation.default", batch_norm_activation);
  r.add("wgnn.instance_norm_activation.default", instance_norm_activation);
}

}  // namespace wgnn::ops

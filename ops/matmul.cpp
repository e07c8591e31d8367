// Matrix products with ATen names and semantics: matmul (numpy rules: 1-D
// operands, broadcast batch dims), mm, bmm, addmm, linear, and wgnn.gemm for
// ONNX Gemm (transposed operands, alpha, beta, a broadcast C), and
// wgnn.matmul_add (a MatMul with a fused bias and scale). All run one
// tiled kernel (kernels/matmul.wgsl) with the bias fused in its epilogue,
// products of at most 8 rows kernels/gemv.wgsl (same epilogue), and float16
// products the tensor-core kernel where the device has it.
//
// Dtypes: float32 or float16, every operand the same (no type promotion);
// float16 accumulates in f32. Transposed operands are read in place (no
// copy). A batch of matrices times one shared matrix (linear on [B, S, K])
// runs as one [B * S, K] product.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/epilogue.h"
#include "ops/helpers.h"
#include "ops/layout.h"
#include "ops/matmul.h"
#include "ops/registry.h"
#include "ops/subgroup_matmul.h"
#include "ops/uniforms.h"

namespace wgnn::ops {

namespace {

// A product of the kernel: out[b] = alpha * op(A[b]) @ op(B[b]) + beta * bias[b].
struct Gemm {
  TensorRef a, b, bias{-1};
  bool a_trans = false, b_trans = false;
  int64_t M = 0, N = 0, K = 0;
  Shape batch;            // output batch dims
  Shape sa, sb, sc;       // their element strides in A, B, bias (0: broadcast)
  int64_t bias_sm = 0, bias_sn = 0;
  double alpha = 1, beta = 1;
  ActivationSpec act;     // the epilogue's activation (ops/epilogue.h): none or a GELU
  int64_t lda = 0;        // A's row stride when not the product's own (a part of a split); 0: derived
  int64_t ldb = 0;        // B's row stride when not its own (an operand read through a view); 0: derived
  int64_t a_off = 0, b_off = 0, c_off = 0;  // element offsets of A, B and bias in their buffers
  // The result written through a view of its tensor (record_strided_gemm):
  // element offset, row stride and batch strides; ldc 0: contiguous.
  int64_t o_off = 0, ldc = 0;
  Shape so;
  Shape out_shape;        // the result's shape (M x N per batch, contiguous)
  // Added last, after the activation: a tensor of the result's shape and
  // dtype (a transformer's residual, x + linear(h)); none: -1.
  TensorRef residual{-1};
};

using Params = MatmulParams;  // ops/uniforms.h
static_assert(sizeof(Params) == 240);

// The regular kernel's configuration (ops/kernels/matmul.wgsl): a TM x TN
// tile of C per workgroup, RM x RN per invocation, K in steps of TK through
// STAGES workgroup-memory stages, and the invocations' layout (`warp_tiles`:
// 8 x 4 blocks per 32 invocations).
struct MatmulConfig {
  uint32_t tm = 64, tn = 64, rm = 4, rn = 4, tk = 16, stages = 1;
  bool warp_tiles = false;
  uint32_t threads() const { return (tm / rm) * (tn / rn); }
};

// WGNN_MATMUL_CONFIG=TMxTN[:RMxRN][:kTK][:sSTAGES][:w][,...] (tuning,
// tests) fixes the configuration of every product of the regular kernel
// (one), or of the products of each listed tile (several).
MatmulConfig parse_matmul_config(const std::string& text) {
  MatmulConfig c;
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("WGNN_MATMUL_CONFIG='{}': {} (expected TMxTN[:RMxRN][:kTK][:sSTAGES][:w], "
                             "e.g. 64x64:4x4:k16:s1)", text, why));
  };
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t colon = text.find(':', at);
    parts.push_back(text.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  auto pair = [&](const std::string& p, uint32_t& x, uint32_t& y) {
    unsigned u = 0, v = 0;
    char tail = 0;
    if (std::sscanf(p.c_str(), "%ux%u%c", &u, &v, &tail) != 2) throw bad("'" + p + "' is not AxB");
    x = u, y = v;
  };
  pair(parts[0], c.tm, c.tn);
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p == "w") {
      c.warp_tiles = true;
    } else if (!p.empty() && (p[0] == 'k' || p[0] == 's')) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(p.c_str() + 1, &end, 10);
      if (end == p.c_str() + 1 || *end) throw bad("'" + p + "' is not a number");
      (p[0] == 'k' ? c.tk : c.stages) = uint32_t(v);
    } else {
      pair(p, c.rm, c.rn);
    }
  }
  if (c.rm != 4 && c.rm != 8) throw bad("RM must be 4 or 8");
  if (c.rn != 4 && c.rn != 8) throw bad("RN must be 4 or 8");
  if (c.tk != 8 && c.tk != 16 && c.tk != 32) throw bad("TK must be 8, 16 or 32");
  if (c.stages != 1 && c.stages != 2) throw bad("STAGES must be 1 or 2");
  if (c.tm % (c.rm * 4) || c.tn % (c.rn * 4) || c.tm > 256 || c.tn > 256) {
    throw bad("TM must be a multiple of 4 RM and TN of 4 RN, at most 256");
  }
  const uint32_t nt = c.threads();
  if (nt > 256) throw bad(fmt::format("{} invocations per workgroup (at most 256)", nt));
  if ((c.tm * c.tk / 4) % nt || (c.tn * c.tk / 4) % nt) {
    throw bad("each operand's slice (TM x TK, TN x TK) must be a whole number of vec4 loads per invocation");
  }
  if (c.warp_tiles && ((c.tn / c.rn) % 8 || (c.tm / c.rm) % 4)) throw bad("w needs TN/RN % 8 == 0 and TM/RM % 4 == 0");
  return c;
}

// The configuration of a product of M x N per batch. Measured on the H200
// (docs/BENCHMARKS.md): 64x64 where that makes enough workgroups to fill a
// large GPU, else 32x64 (a product of DeiT-T, 197x192x192, makes 12
// workgroups of 64x64, which leaves most of an H200 idle); 32x64 beat 32x32
// and 64x64 on DeiT-T's small products, and 32x32 was never the fastest.
// WGNN_MATMUL_TILE=64x64|32x64|32x32 fixes the tile (tuning, tests),
// WGNN_MATMUL_CONFIG everything.
constexpr uint64_t kFillGroups = 256;
MatmulConfig matmul_config(const Settings& settings, int64_t M, int64_t N, int64_t K, int64_t batch) {
  // One configuration: every product. Several, comma-separated: each
  // replaces the default for products whose default tile is its tile.
  std::vector<MatmulConfig> fixed;
  if (const char* env = settings.get("WGNN_MATMUL_CONFIG"); env && *env) {
    const std::string text(env);
    for (size_t at = 0; at <= text.size();) {
      const size_t comma = std::min(text.find(',', at), text.size());
      fixed.push_back(parse_matmul_config(text.substr(at, comma - at)));
      at = comma + 1;
    }
    if (fixed.size() == 1) return fixed[0];
  }
  MatmulConfig c;
  auto listed = [&](const MatmulConfig& d) {
    for (const MatmulConfig& f : fixed) {
      if (f.tm == d.tm && f.tn == d.tn) return f;
    }
    return d;
  };
  if (const char* env = settings.get("WGNN_MATMUL_TILE"); env && *env) {
    const std::string t(env);
    if (t == "64x64") {
      if (K >= 128) c.rm = 8;
      return c;
    }
    c.tm = 32;
    if (t == "32x64") return c;
    c.tn = 32;
    if (t == "32x32") return c;
    throw Error(fmt::format("WGNN_MATMUL_TILE='{}': expected 64x64, 32x64 or 32x32", t));
  }
  auto groups = [&](uint64_t tm, uint64_t tn) {
    return gpu::ceil_div(uint64_t(M), tm) * gpu::ceil_div(uint64_t(N), tn) * uint64_t(batch);
  };
  if (groups(64, 64) < kFillGroups) c.tm = 32;
  // 64x64 tiles with K of 128 or more: 8 x 4 per thread (128 threads).
  // On the H200 (docs/BENCHMARKS.md) 9-16% faster on DaViT-B's products
  // (2304x2048x512: 30.6 against 26.4 TFLOP/s), as fast on Whisper's
  // 1500x2048x512; K = 64 (attention's q k^T) stays 4 x 4.
  if (c.tm == 64 && K >= 128) c.rm = 8;
  return listed(c);
}

// Split-K (kernels/matmul.wgsl with SPLITK, then matmul_splitk.wgsl), for
// float32 products (a bias the same for every batch):
//   - whose tiles leave the GPU mostly idle while K is long (DaViT's channel
//     attention, 32 x 32 per head over K = 36,864 pixels: 4 workgroups for
//     a whole product): ranges of K of at least 16 steps of 16, to about
//     kFillGroups workgroups, at most 64 ranges;
//   - with fewer than kSplitFillGroups tiles and K of 1024 or more (the
//     Whisper encoder's 1500 x 512 x 2048 and its attention's 1500 x 64 x
//     1500 per head): about kSplitFillGroups workgroups, each range at least
//     512 long. On the H200 (docs/BENCHMARKS.md) 1500x512x2048 with a bias
//     went from 20.3 to 22.5 TFLOP/s in two ranges, 2304x512x2048 from 19.1
//     to 24.2 (two) and 26.2 (four); products of K = 512 lost 1-20% in two.
// Returns 1 for no split. WGNN_MATMUL_SPLITK=0 turns it off;
// WGNN_MATMUL_SPLITK=N (N > 1, tuning) cuts every float32 product into N
// ranges of K where each keeps at least 4 steps of 16.
constexpr uint64_t kSplitFillGroups = 1024;
uint64_t matmul_splits(const Settings& settings, uint64_t groups, uint64_t K) {
  const long setting = [&] {
    const char* e = settings.get("WGNN_MATMUL_SPLITK");
    if (!e || !*e) return -1L;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end || v < 0 || v > 64) {
      throw Error(fmt::format("WGNN_MATMUL_SPLITK='{}': expected 0 (off) or a number of ranges of K up to 64", e));
    }
    return v;
  }();
  const uint64_t steps = gpu::ceil_div(K, uint64_t(16));
  if (setting > 1) return std::max<uint64_t>(1, std::min<uint64_t>(uint64_t(setting), steps / 4));
  if (setting == 0 || setting == 1) return 1;
  if (groups * 2 <= kFillGroups && steps >= 64) {
    return std::min<uint64_t>({gpu::ceil_div(kFillGroups, groups), steps / 16, 64});
  }
  if (K >= 1024 && groups * 2 <= kSplitFillGroups) return std::min<uint64_t>(kSplitFillGroups / groups, K / 512);
  return 1;
}

void require_operand(const Args& a, TensorRef t, std::string_view name) {
  a.require_float(t, name);
  require_rank(a.g.info(t).shape, a.op, name);
  if (a.g.info(t).numel() > int64_t(UINT32_MAX)) {
    a.fail(fmt::format("argument '{}' {} is too large for 32-bit indexing", name, shape_str(a.g.info(t).shape)));
  }
}

void require_same_dtype(const Args& a, TensorRef x, std::string_view xn, TensorRef y, std::string_view yn) {
  const DType dx = a.g.info(x).dtype, dy = a.g.info(y).dtype;
  if (dx != dy) {
    a.fail(fmt::format("arguments '{}' ({}) and '{}' ({}) must have the same dtype (no type promotion)", xn,
                       dtype_name(dx), yn, dtype_name(dy)));
  }
}

// Element strides of `shape`'s leading dims (all but the last two) read at
// the indices of `batch` (right-aligned; 0 where `shape` has size 1 or no dim).
Shape batch_strides(const Shape& shape, const Shape& batch) {
  const Shape cs = contiguous_strides(shape);
  const size_t nb = shape.size() - 2;
  Shape s(batch.size(), 0);
  for (size_t i = 0; i < nb; ++i) s[batch.size() - nb + i] = shape[i] == 1 ? 0 : cs[i];
  return s;
}

void record_splitk_sum(const Args& a, const Gemm& p, uint64_t count, TensorRef part, uint64_t splits, Binding out,
                       Binding in_c, Binding res);

// The product on subgroup matrices (tensor cores) when the device has them
// and the operands suit the kernel (ops/subgroup_matmul.h): float16, at most
// one batch dim after merging. Products of too few tiles are cut into
// ranges of K (subgroup_gemm_splits). The kernel's epilogue, or the split's
// sum pass, adds `residual` (residual_added says so). Returns false to fall
// back.
bool record_subgroup(const Args& a, const Gemm& p, const Shape& shape, const std::array<Shape, 3>& st, int64_t batch,
                     TensorRef y, TensorRef residual, bool& residual_added) {
  Graph& g = a.g;
  const std::string_view op = a.op;
  if (shape.size() > 1) return false;
  SubgroupGemm q;
  q.a = p.a, q.b = p.b, q.bias = p.bias, q.out = y;
  q.M = p.M, q.N = p.N, q.K = p.K, q.batch = batch;
  q.a_trans = p.a_trans, q.b_trans = p.b_trans;
  q.a_batch = shape.empty() ? 0 : st[0][0];
  q.b_batch = shape.empty() ? 0 : st[1][0];
  q.bias_batch = shape.empty() ? 0 : st[2][0];
  q.bias_sm = p.bias_sm, q.bias_sn = p.bias_sn;
  q.alpha = p.alpha, q.beta = p.beta;
  q.act = p.act;
  // Split-K: a bias the same for every batch entry (the sum pass's), the
  // result contiguous.
  const bool f16_tc = g.info(y).dtype == DType::F16 && g.tensor_cores() && tensor_cores_available(g.ctx());
  // Split or not is a choice of the plan's structure (Graph::choose):
  // replayed where this size's tiles need no split, one range of K.
  const bool can_split = f16_tc && q.bias_batch == 0 && p.ldc == 0;
  SubgroupSplit split = can_split ? subgroup_gemm_splits(a.g.ctx().settings(), p.M, p.N, p.K, batch) : SubgroupSplit{};
  const Graph::Choice split_choice = can_split ? g.choose("matmul.subgroup_splitk", split.kchunk > 0) : Graph::Choice{};
  if (split_choice.value && split.kchunk == 0) split = SubgroupSplit{1, (p.K + 31) / 32 * 32};
  if (split_choice.value) {
    SubgroupGemm r = q;
    r.bias = TensorRef{-1}, r.act = ActivationSpec{};
    r.splits = split.splits, r.kchunk = split.kchunk;
    TensorRef part{-1};
    const bool recorded = record_subgroup_gemm(g, r, op, "gemm", &part);
    g.made(split_choice, recorded);
    if (recorded) {
      Gemm s = p;
      s.residual = residual;
      const uint64_t count = uint64_t(p.M) * uint64_t(p.N) * uint64_t(batch);
      record_splitk_sum(a, s, count, part, uint64_t(split.splits), Binding::of(y),
                        p.bias.id >= 0 ? Binding::of(p.bias) : Binding::of(g.ctx().dummy_buffer()),
                        residual.id >= 0 ? Binding::of(residual) : Binding::of(g.ctx().dummy_buffer()));
      residual_added = residual.id >= 0;
      return true;
    }
  }
  // The residual in the kernel's epilogue where it takes it
  // (WGNN_SUBGROUP_RESIDUAL=0: by a separate add, for measuring).
  const char* fused = a.g.ctx().settings().get("WGNN_SUBGROUP_RESIDUAL");
  if (residual.id >= 0 && !(fused && std::string_view(fused) == "0")) {
    SubgroupGemm r = q;
    r.residual = residual;
    if (record_subgroup_gemm(g, r, op, "gemm")) {
      residual_added = true;
      return true;
    }
  }
  return record_subgroup_gemm(g, q, op, "gemm");
}

void dispatch(const Args& a, const Gemm& p, const Shape& shape, const std::array<Shape, 3>& st, Binding out,
              Binding in_a, Binding in_b, Binding in_c);

// The innermost SplitSumCapture alive on this thread (ops/matmul.h).
thread_local SplitSumCapture* split_capture = nullptr;

// The second pass of a split-K product (kernels/matmul_splitk.wgsl): the
// `splits` float32 parts of `count` elements each added in order, then
// alpha, p's bias (the same for every batch), activation and residual
// (p.residual, bound as `res`), the result written to `out` in p's dtype.
// Not recorded where this thread's SplitSumCapture takes the parts.
void record_splitk_sum(const Args& a, const Gemm& p, uint64_t count, TensorRef part, uint64_t splits, Binding out,
                       Binding in_c, Binding res) {
  Graph& g = a.g;
  if (SplitSumCapture* c = split_capture;
      c && !c->taken && p.alpha == 1 && p.act.act == Activation::None && p.residual.id < 0 && p.N == c->width &&
      p.N % 4 == 0 && int64_t(count) == c->count &&
      (p.bias.id < 0 || (p.beta == 1 && p.bias_sm == 0 && p.bias_sn == 1 && g.info(p.bias).numel() == p.N))) {
    c->taken = SplitSum{part, splits, count, p.bias};
    return;
  }
  MatmulSplitKParams sp{};
  sp.count = uint32_t(count);
  sp.splits = uint32_t(splits);
  sp.alpha = float(p.alpha);
  sp.beta = float(p.beta);
  sp.M = uint32_t(p.M);
  sp.N = uint32_t(p.N);
  sp.bias_sm = uint32_t(p.bias_sm);
  sp.bias_sn = uint32_t(p.bias_sn);
  gpu::Constants sc = activation_constants(p.act);
  sc.emplace_back("HAS_BIAS", p.bias.id >= 0 ? 1.0 : 0.0);
  sc.emplace_back("HAS_RESIDUAL", p.residual.id >= 0 ? 1.0 : 0.0);
  g.add_dispatch(kernel(g, "ops/kernels/matmul_splitk.wgsl", float_subs(g, g.info(p.a).dtype, a.op), sc),
                 {out, g.uniform(sp), Binding::of(part), in_c, res}, grid_for(g, gpu::ceil_div(count, uint64_t(256))),
                 std::string(a.op), fmt::format("gemm splitk sum {}{}{}", splits, p.bias.id >= 0 ? " bias" : "",
                                                p.residual.id >= 0 ? " residual" : ""));
}

// A large float16 product whose N or K is not a multiple of 8 (the
// Whisper encoder's attention over 1,500 keys: scores 1500 x 1500 x 64,
// then 1500 x 64 x 1500), which the tensor-core kernel cannot load or
// store in place: its operands copied with zeros up to multiples of 8
// (aten.pad), the product on subgroup matrices, and the padded columns
// cropped off (aten.pad with a negative pad). Zero rows and columns of K
// add nothing; the extra columns of N are dropped. Plain operands only
// (no bias, offsets, leading dims or a transposed A), one batch dim at
// most, dense per batch; at least kPadMinFlops. Off unless WGNN_MATMUL_PAD=1:
// not yet measured on tensor cores (the copies, about 150 MB a layer for
// the Whisper encoder, against the products' gain; docs/BENCHMARKS.md).
// Returns the result, or nothing (having recorded nothing).
constexpr double kPadMinFlops = 256e6;
std::optional<TensorRef> record_subgroup_padded(const Args& a, const Gemm& p, const Shape& shape,
                                                const std::array<Shape, 3>& st, int64_t batch) {
  Graph& g = a.g;
  if (const char* e = a.g.ctx().settings().get("WGNN_MATMUL_PAD"); !e || std::string_view(e) != "1") return std::nullopt;
  if (g.info(p.a).dtype != DType::F16 || !g.tensor_cores() || !tensor_cores_available(g.ctx())) return std::nullopt;
  if (shape.size() > 1 || p.bias.id >= 0 || p.a_trans || p.lda || p.ldb || p.ldc || p.a_off || p.b_off) {
    return std::nullopt;
  }
  const int64_t M = p.M, N = p.N, K = p.K, Np = (N + 7) / 8 * 8, Kp = (K + 7) / 8 * 8;
  if (Np == N && Kp == K) return std::nullopt;  // record_subgroup takes it as it is
  if (2.0 * double(M) * double(N) * double(K) * double(batch) < kPadMinFlops) return std::nullopt;
  const int64_t rows_b = p.b_trans ? N : K, cols_b = p.b_trans ? K : N;
  // Dense operands: [batch, M, K] and [batch, rows_b, cols_b] in place.
  if (g.info(p.a).numel() != batch * M * K || g.info(p.b).numel() != batch * rows_b * cols_b) return std::nullopt;
  if (batch > 1 && (st[0][0] != M * K || st[1][0] != rows_b * cols_b)) return std::nullopt;
  const uint64_t max_dim = g.ctx().limits().max_compute_workgroups_per_dimension;
  if (uint64_t(batch) > max_dim || uint64_t(batch * M * Np) > UINT32_MAX) return std::nullopt;
  for (const int64_t elems : {batch * M * Kp, batch * Kp * Np, batch * M * Np}) {
    if (uint64_t(elems) * 2 > binding_limit(g)) return std::nullopt;
  }
  const auto padded = [&](TensorRef t, int64_t rows, int64_t cols, int64_t prows, int64_t pcols) {
    const TensorRef v = ops::call(g, "aten.view.default", {t, IntList{batch, rows, cols}}).tensor();
    if (prows == rows && pcols == cols) return v;
    return ops::call(g, "aten.pad.default", {v, IntList{0, pcols - cols, 0, prows - rows}}).tensor();
  };
  SubgroupGemm q;
  q.a = padded(p.a, M, K, M, Kp);
  q.b = p.b_trans ? padded(p.b, N, K, Np, Kp) : padded(p.b, K, N, Kp, Np);
  const TensorRef y = g.add_tensor({batch, M, Np}, DType::F16);
  q.out = y;
  q.M = M, q.N = Np, q.K = Kp, q.batch = batch;
  q.b_trans = p.b_trans;
  q.a_batch = batch > 1 ? M * Kp : 0;
  q.b_batch = batch > 1 ? Kp * Np : 0;
  q.alpha = p.alpha;
  q.act = p.act;
  if (!record_subgroup_gemm(g, q, a.op, "gemm padded")) {
    // Not taken after all (the kernel's own limits): the regular kernel on
    // the padded operands, the same values.
    Gemm r = p;
    r.a = q.a, r.b = q.b, r.N = Np, r.K = Kp, r.batch = {batch}, r.out_shape = {batch, M, Np};
    r.lda = 0, r.ldb = 0;
    const std::array<Shape, 3> rst = {Shape{batch > 1 ? M * Kp : 0}, Shape{batch > 1 ? Kp * Np : 0}, Shape{0}};
    dispatch(a, r, {batch}, rst, Binding::of(y), Binding::of(r.a), Binding::of(r.b),
             Binding::of(g.ctx().dummy_buffer()));
  }
  TensorRef out = Np == N ? y : ops::call(g, "aten.pad.default", {y, IntList{0, N - Np}}).tensor();
  return ops::call(g, "aten.view.default", {out, IntList(p.out_shape.begin(), p.out_shape.end())}).tensor();
}

// One dispatch of the kernel for product `p` over batch `shape` (strides
// `st`), with its operands bound as given (whole, or the byte ranges a
// split binds, p describing the part).
void dispatch(const Args& a, const Gemm& p, const Shape& shape, const std::array<Shape, 3>& st, Binding out,
              Binding in_a, Binding in_b, Binding in_c) {
  const int64_t batch = std::max<int64_t>(numel(shape), 1);
  Graph& g = a.g;
  const DType dt = g.info(p.a).dtype;
  const int64_t lda = p.lda ? p.lda : p.a_trans ? p.M : p.K, ldb = p.ldb ? p.ldb : p.b_trans ? p.K : p.N;
  // vec4 loads: the contiguous dim and every row and batch offset a multiple of 4.
  auto all4 = [](const Shape& s) { return std::all_of(s.begin(), s.end(), [](int64_t v) { return v % 4 == 0; }); };
  const bool a_vec = (p.a_trans ? p.M : p.K) % 4 == 0 && lda % 4 == 0 && p.a_off % 4 == 0 && all4(st[0]);
  const bool b_vec = (p.b_trans ? p.K : p.N) % 4 == 0 && ldb % 4 == 0 && p.b_off % 4 == 0 && all4(st[1]);
  const bool strided_out = p.ldc != 0;

  const MatmulConfig cfg = matmul_config(a.g.ctx().settings(), p.M, p.N, p.K, batch);
  const uint32_t tile_m = cfg.tm, tile_n = cfg.tn;
  const uint64_t tiles_m = gpu::ceil_div(uint64_t(p.M), tile_m), tiles_n = gpu::ceil_div(uint64_t(p.N), tile_n);
  const uint64_t groups = tiles_m * tiles_n * uint64_t(batch);
  if (groups > UINT32_MAX) a.fail(fmt::format("the result {} needs too many workgroups", shape_str(p.out_shape)));
  // The sum pass adds a bias only where it is the same for every batch.
  const bool bias_batch_shared = std::all_of(st[2].begin(), st[2].end(), [](int64_t s) { return s == 0; });
  // The sum pass writes a contiguous result and reads the bias from its start.
  const bool can_split = dt == DType::F32 && (p.bias.id < 0 || (bias_batch_shared && p.c_off == 0)) && !strided_out;
  uint64_t splits = can_split ? matmul_splits(a.g.ctx().settings(), groups, uint64_t(p.K)) : 1;
  const uint64_t kchunk =
      gpu::ceil_div(gpu::ceil_div(uint64_t(p.K), uint64_t(cfg.tk)), std::max<uint64_t>(splits, 1)) * cfg.tk;
  splits = gpu::ceil_div(uint64_t(p.K), kchunk);
  // Split or not is a choice of the plan's structure (Graph::choose): a
  // size that replays a split where its own tiles need none runs one range
  // (splits = 1) through the same two passes. 0 below: no split.
  const Graph::Choice split_choice = can_split ? g.choose("matmul.splitk", splits > 1) : Graph::Choice{};
  if (!split_choice.value) {
    splits = 0;
  } else {
    const uint64_t part = splits * uint64_t(p.M) * uint64_t(p.N) * uint64_t(batch);
    if (part > UINT32_MAX || part * 4 > binding_limit(g) || groups * splits > UINT32_MAX) splits = 0;
  }
  g.made(split_choice, splits > 0);
  Params params{};
  params.M = uint32_t(p.M);
  params.N = uint32_t(p.N);
  params.K = uint32_t(p.K);
  params.batch = uint32_t(batch);
  params.tiles_m = uint32_t(tiles_m);
  params.tiles_n = uint32_t(tiles_n);
  params.lda = uint32_t(lda);
  params.ldb = uint32_t(ldb);
  params.bias_sm = uint32_t(p.bias_sm);
  params.bias_sn = uint32_t(p.bias_sn);
  params.rank = uint32_t(shape.size());
  params.kchunk = uint32_t(splits > 1 ? kchunk : uint64_t(p.K));
  params.splits = uint32_t(std::max<uint64_t>(splits, 1));
  params.alpha = float(p.alpha);
  params.beta = float(p.beta);
  params.shape = pack(shape, a.op);
  params.sa = pack(st[0], a.op);
  params.sb = pack(st[1], a.op);
  params.sc = pack(st[2], a.op);
  params.a_off = uint32_t(p.a_off);
  params.b_off = uint32_t(p.b_off);
  params.c_off = uint32_t(p.c_off);
  if (strided_out) {
    params.o_off = uint32_t(p.o_off);
    params.ldc = uint32_t(p.ldc);
    params.so = pack(p.so, a.op);
  } else {
    // Contiguous: batch index b at b * M * N.
    params.ldc = uint32_t(p.N);
    Shape so(shape.size());
    int64_t step = p.M * p.N;
    for (size_t d = shape.size(); d-- > 0;) so[d] = step, step *= shape[d];
    params.so = pack(so, a.op);
  }
  Subs subs = float_subs(g, dt, a.op);
  subs.emplace_back("TM", std::to_string(tile_m));
  subs.emplace_back("TN", std::to_string(tile_n));
  subs.emplace_back("RM", std::to_string(cfg.rm));
  subs.emplace_back("RN", std::to_string(cfg.rn));
  subs.emplace_back("TK", std::to_string(cfg.tk));
  subs.emplace_back("STAGES", std::to_string(cfg.stages));
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/matmul.wgsl", subs,
                                   {{"A_TRANS", p.a_trans ? 1.0 : 0.0},
                                    {"B_TRANS", p.b_trans ? 1.0 : 0.0},
                                    {"A_VEC", a_vec ? 1.0 : 0.0},
                                    {"B_VEC", b_vec ? 1.0 : 0.0},
                                    {"HAS_BIAS", p.bias.id >= 0 ? 1.0 : 0.0},
                                    {"SPLITK", splits > 0 ? 1.0 : 0.0},
                                    {"HAS_RESIDUAL", p.residual.id >= 0 ? 1.0 : 0.0},
                                    {"WARP_TILES", cfg.warp_tiles ? 1.0 : 0.0},
                                    {"ACT", double(p.act.code())},
                                    {"LO", p.act.lo},
                                    {"HI", p.act.hi},
                                    {"F16_OUT", dt == DType::F16 ? 1.0 : 0.0}});
  const std::string label =
      fmt::format("gemm {}x{}x{}{}{}{}{}", p.M, p.N, p.K, batch > 1 ? fmt::format(" batch {}", batch) : "",
                  p.a_trans ? " At" : "", p.b_trans ? " Bt" : "", p.bias.id >= 0 ? " bias" : "") +
      activation_label(p.act.act) + (p.residual.id >= 0 ? " residual" : "");
  const double flops = 2.0 * double(p.M) * double(p.N) * double(p.K) * double(batch);
  const Binding res = p.residual.id >= 0 ? Binding::of(p.residual) : Binding::of(g.ctx().dummy_buffer());
  if (splits == 0) {
    g.add_dispatch(pl, {out, g.uniform(params), in_a, in_b, in_c, res}, grid_for(g, groups), std::string(a.op), label,
                   flops);
    return;
  }
  const uint64_t count = uint64_t(p.M) * uint64_t(p.N) * uint64_t(batch);
  const TensorRef part = g.add_tensor({int64_t(splits), int64_t(count)}, DType::F32);
  g.add_dispatch(pl, {Binding::of(part), g.uniform(params), in_a, in_b, in_c, res}, grid_for(g, groups * splits),
                 std::string(a.op), fmt::format("{} splitk={}", label, splits), flops);
  record_splitk_sum(a, p, count, part, splits, out, in_c, res);
}

// A single product with an operand or the result over the binding limit,
// cut into products of parts (record_split's cases, in order):
//   - B fits, A not transposed: spans of rows of M (A, the result and a
//     bias that moves along M bound by range), written in place;
//   - B transposed ([N, K]: a linear layer's weight, an output head): spans
//     of N (rows of B), each a product of its own, joined by a
//     concatenation along the last dim (the copy splits too);
//   - B not transposed ([K, N]): spans of K (rows of B, columns of A), each
//     product adding the one before as its bias; the first takes the
//     original bias, the last the activation.
TensorRef record_split(const Args& a, const Gemm& p, uint64_t es) {
  Graph& g = a.g;
  const DType dt = g.info(p.a).dtype;
  const uint64_t out_bytes = uint64_t(numel(p.out_shape)) * es;
  const uint64_t limit = binding_limit(g);
  auto bytes = [&](TensorRef t) { return t.id < 0 ? 0 : g.info(t).gpu_bytes(); };
  auto whole_bias = [&]() { return p.bias.id >= 0 ? Binding::of(p.bias) : Binding::of(g.ctx().dummy_buffer()); };
  const std::array<Shape, 3> st;
  const std::string what = fmt::format("{}: the product {}x{}x{}", a.op, p.M, p.N, p.K);
  if (bytes(p.b) <= limit && !p.a_trans) {
    std::vector<uint64_t> units = {uint64_t(p.N) * es, uint64_t(p.K) * es};
    const bool bias_moves = p.bias.id >= 0 && p.bias_sm != 0;
    if (p.bias.id >= 0 && !bias_moves && bytes(p.bias) > limit) a.fail(what + ": its bias is over the limit (" + binding_limit_advice(g.ctx()) + ")");
    std::vector<uint64_t> extra = {0, 0};
    if (bias_moves) {
      units.push_back(uint64_t(p.bias_sm) * es);
      extra.push_back((uint64_t(p.N - 1) * uint64_t(p.bias_sn) + 1) * es);
    }
    const TensorRef y = g.add_tensor(p.out_shape, dt);
    for (const Span& s : binding_spans(g, uint64_t(p.M), units, 1, what, extra)) {
      Gemm q = p;
      q.M = int64_t(s.count);
      const Binding c = bias_moves ? bind_bytes(g, p.bias, s.start * units[2], s.count * units[2] + extra[2])
                                   : whole_bias();
      dispatch(a, q, {}, st, bind_bytes(g, y, s.start * units[0], s.count * units[0]),
               bind_bytes(g, p.a, s.start * units[1], s.count * units[1]), Binding::of(p.b), c);
    }
    return y;
  }
  if (bytes(p.a) > limit) a.fail(what + ": both operands are over the limit; one of them is split, not both (" + binding_limit_advice(g.ctx()) + ")");
  if (p.b_trans) {
    // Columns of the result: B rows [n0, n1), each product its own tensor.
    const bool bias_moves = p.bias.id >= 0 && p.bias_sn != 0;
    if (p.bias.id >= 0 && !bias_moves && bytes(p.bias) > limit) a.fail(what + ": its bias is over the limit (" + binding_limit_advice(g.ctx()) + ")");
    std::vector<uint64_t> units = {uint64_t(p.K) * es, uint64_t(p.M) * es}, extra = {0, 0};
    if (bias_moves) {
      units.push_back(uint64_t(p.bias_sn) * es);
      extra.push_back((uint64_t(p.M - 1) * uint64_t(p.bias_sm) + 1) * es);
    }
    ValueList parts;
    const std::vector<Span> spans = binding_spans(g, uint64_t(p.N), units, 4, what, extra);
    for (const Span& s : spans) {
      Gemm q = p;
      q.N = int64_t(s.count);
      const TensorRef part = g.add_tensor({p.M, q.N}, dt);
      const Binding c = bias_moves ? bind_bytes(g, p.bias, s.start * units[2], s.count * units[2] + extra[2])
                                   : whole_bias();
      dispatch(a, q, {}, st, Binding::of(part), Binding::of(p.a),
               bind_bytes(g, p.b, s.start * units[0], s.count * units[0]), c);
      parts.push_back(part);
    }
    const TensorRef joined = call(g, "aten.cat.default", {parts, int64_t(1)}).tensor();
    return g.add_view(joined, p.out_shape);
  }
  // Rows of K: B rows [k0, k1), A columns (or rows, transposed) from k0.
  if (out_bytes > limit) a.fail(what + ": its result and its operand B are both over the limit (" + binding_limit_advice(g.ctx()) + ")");
  const TensorRef y = g.add_tensor(p.out_shape, dt);
  if (p.bias.id >= 0 && bytes(p.bias) > limit) a.fail(what + ": its bias is over the limit (" + binding_limit_advice(g.ctx()) + ")");
  const uint64_t a_unit = (p.a_trans ? uint64_t(p.M) : 1) * es;
  const uint64_t a_reach = p.a_trans ? 0 : uint64_t(p.M - 1) * uint64_t(p.K) * es;
  const std::vector<Span> spans =
      binding_spans(g, uint64_t(p.K), {uint64_t(p.N) * es, a_unit}, 4, what, {0, a_reach + es});
  TensorRef prev{-1};
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    Gemm q = p;
    q.K = int64_t(s.count);
    const bool last = i + 1 == spans.size();
    if (!last) q.act = ActivationSpec{};
    const TensorRef out = last ? y : g.add_tensor({p.M, p.N}, dt);
    Binding c = whole_bias();
    if (prev.id >= 0) {
      q.bias = prev;
      q.beta = 1;
      q.bias_sm = p.N;
      q.bias_sn = 1;
      c = Binding::of(prev);
    }
    // The kernel reads A with lda = the full K (or M) from the bound start.
    q.lda = p.a_trans ? p.M : p.K;
    dispatch(a, q, {}, st, Binding::of(out), bind_bytes(g, p.a, s.start * a_unit, s.count * a_unit + a_reach),
             bind_bytes(g, p.b, s.start * uint64_t(p.N) * es, s.count * uint64_t(p.N) * es), c);
    prev = out;
  }
  return y;
}

// A product over one batch dim (`shape`, strides `st`) with an operand or
// the result over the binding limit: spans of the batch, each operand that
// moves along it bound from its span's first matrix (one that does not,
// such as a shared weight, whole).
TensorRef record_batch_split(const Args& a, const Gemm& p, const Shape& shape, const std::array<Shape, 3>& st,
                             uint64_t es) {
  Graph& g = a.g;
  const std::array<TensorRef, 3> ops = {p.a, p.b, p.bias};
  // Elements one matrix of each operand spans from its start.
  const std::array<uint64_t, 3> reach = {uint64_t(p.M * p.K), uint64_t(p.K * p.N),
                                         uint64_t((p.M - 1) * p.bias_sm + (p.N - 1) * p.bias_sn + 1)};
  std::vector<uint64_t> units = {uint64_t(p.M * p.N) * es}, extra = {0};
  for (size_t k = 0; k < 3; ++k) {
    if (ops[k].id < 0) continue;
    if (st[k][0] == 0) {
      if (g.info(ops[k]).gpu_bytes() > binding_limit(g)) {
        a.fail(fmt::format("a batched product ({}) whose operand {} {} is shared by every batch and over this "
                           "device's maxStorageBufferBindingSize of {} bytes ({})",
                           shape_str(p.out_shape), k == 0 ? "A" : k == 1 ? "B" : "bias",
                           shape_str(g.info(ops[k]).shape), binding_limit(g), binding_limit_advice(g.ctx())));
      }
      continue;
    }
    // A span of c matrices binds (c - 1) * stride + reach elements.
    units.push_back(uint64_t(st[k][0]) * es);
    extra.push_back(reach[k] > uint64_t(st[k][0]) ? (reach[k] - uint64_t(st[k][0])) * es : 0);
  }
  const TensorRef y = g.add_tensor(p.out_shape, g.info(p.a).dtype);
  const std::string what = fmt::format("{}: the batched product {}", a.op, shape_str(p.out_shape));
  for (const Span& s : binding_spans(g, uint64_t(shape[0]), units, 1, what, extra)) {
    std::array<Binding, 3> b;
    for (size_t k = 0; k < 3; ++k) {
      if (ops[k].id < 0) {
        b[k] = Binding::of(g.ctx().dummy_buffer());
      } else if (st[k][0] == 0) {
        b[k] = Binding::of(ops[k]);
      } else {
        const uint64_t stride = uint64_t(st[k][0]) * es;
        b[k] = bind_bytes(g, ops[k], s.start * stride, (s.count - 1) * stride + reach[k] * es);
      }
    }
    dispatch(a, p, {int64_t(s.count)}, st, bind_bytes(g, y, s.start * units[0], s.count * units[0]), b[0], b[1],
             b[2]);
  }
  return y;
}

// A product of at most kGemvRows rows (a decoder step: one token per
// sequence) on kernels/gemv.wgsl, which streams B once for all the rows;
// the tiled kernels spend a 32- or 64-row tile on each. Single products
// with A not transposed; false otherwise. WGNN_NO_GEMV=1 turns it off, and
// so does WGNN_SUBGROUP_MATMUL=emulate (the tests of the tensor-core kernel
// send it every product it can take, few rows included).
constexpr int64_t kGemvRows = 8;
// glu: B is [K, 2 N], the gate's columns then the up product's, and the
// result silu(gate) * up (wgnn.matmul_silu_mul).
bool record_gemv(const Args& a, const Gemm& p, const Shape& shape, TensorRef y, bool glu = false) {
  const bool off = [&] {
    const char* e = a.g.ctx().settings().get("WGNN_NO_GEMV");
    return e && std::string_view(e) == "1";
  }();
  if (subgroup_matmul_emulated(a.g.ctx().settings())) return false;
  if (off || !shape.empty() || p.a_trans || p.M > kGemvRows || p.M < 1) return false;
  Graph& g = a.g;
  const DType dt = g.info(p.a).dtype;
  if (glu && p.b_trans) return false;
  const int64_t lda = p.lda ? p.lda : p.K, ldb = p.b_trans ? p.K : glu ? 2 * p.N : p.N;
  GemvParams params{uint32_t(p.M), uint32_t(p.N), uint32_t(p.K), uint32_t(lda), uint32_t(ldb),
                    uint32_t(p.bias_sm), uint32_t(p.bias_sn), 0u, float(p.alpha), float(p.beta), 0u, 0u};
  const bool a_vec = p.K % 4 == 0 && lda % 4 == 0;
  const bool b_vec = (p.b_trans ? p.K : p.N) % 4 == 0;
  // B [K, N]: 4 CV columns per workgroup, the most (up to 16) that still
  // make 256 workgroups, so that a narrow product keeps enough loads in
  // flight; WGNN_GEMV_CV=1|2|4 fixes it (for measuring).
  const int forced_cv = [&] {
    const char* e = a.g.ctx().settings().get("WGNN_GEMV_CV");
    const int v = e ? std::atoi(e) : 0;
    return v == 1 || v == 2 || v == 4 ? v : 0;
  }();
  int cv = 4;
  while (cv > 1 && gpu::ceil_div(uint64_t(p.N), uint64_t(4 * cv)) < 256) cv /= 2;
  if (forced_cv) cv = forced_cv;
  // B_TRANS: CT columns per workgroup, likewise the most (up to 16) that
  // make 256 workgroups: ResNet-50's classifier (1000 x 2048) ran 63
  // workgroups of 16 at 16 columns each and took 33 µs on an H200.
  int ct = 16;
  while (ct > 1 && gpu::ceil_div(uint64_t(p.N), uint64_t(ct)) < 256) ct /= 2;
  const uint64_t groups = gpu::ceil_div(uint64_t(p.N), p.b_trans ? uint64_t(ct) : uint64_t(4 * cv));
  gpu::Constants c = {{"B_TRANS", p.b_trans ? 1.0 : 0.0},
                      {"CV", double(cv)},
                      {"CT", double(ct)},
                      {"A_VEC", a_vec ? 1.0 : 0.0},
                      {"B_VEC", b_vec ? 1.0 : 0.0},
                      {"HAS_BIAS", p.bias.id >= 0 ? 1.0 : 0.0},
                      {"F16_OUT", dt == DType::F16 ? 1.0 : 0.0}};
  if (glu) c.push_back({"GLU", 1.0});
  for (auto& kv : activation_constants(p.act)) c.push_back(kv);
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/gemv.wgsl", float_subs(g, dt, a.op), c);
  g.add_dispatch(pl,
                 {Binding::of(y), g.uniform(params), Binding::of(p.a), Binding::of(p.b),
                  p.bias.id >= 0 ? Binding::of(p.bias) : Binding::of(g.ctx().dummy_buffer())},
                 grid_for(g, groups), std::string(a.op),
                 fmt::format("gemv {}x{}x{}{}{}", p.M, glu ? 2 * p.N : p.N, p.K, p.b_trans ? " Bt" : "",
                             p.bias.id >= 0 ? " bias" : "") +
                     (glu ? std::string(" silu_mul") : activation_label(p.act.act)),
                 2.0 * double(p.M) * double(glu ? 2 * p.N : p.N) * double(p.K));
  return true;
}

TensorRef record_product(const Args& a, Gemm p, bool& residual_added);

// Records the product (none when the result is empty). The regular
// kernel adds a residual in its epilogue where it records the product in
// one dispatch; else (gemv, tensor cores, parts of a split) aten.add does.
TensorRef record(const Args& a, const Gemm& p) {
  bool added = false;
  const TensorRef y = record_product(a, p, added);
  if (p.residual.id < 0 || added || numel(p.out_shape) == 0) return y;
  return ops::call(a.g, "aten.add.Tensor", {y, p.residual}).tensor();
}

TensorRef record_product(const Args& a, Gemm p, bool& residual_added) {
  const TensorRef residual = p.residual;
  p.residual = TensorRef{-1};
  Graph& g = a.g;
  const DType dt = g.info(p.a).dtype;
  const int64_t total = numel(p.out_shape);
  if (total > int64_t(UINT32_MAX)) {
    a.fail(fmt::format("the result {} is too large for 32-bit indexing", shape_str(p.out_shape)));
  }
  const uint64_t bytes = uint64_t(total) * gpu_dtype_size(dt), limit = g.ctx().limits().max_buffer_size;
  if (bytes > limit) {
    a.fail(fmt::format("the result {} {} is {} bytes, over this device's maxBufferSize of {} bytes (a tensor is one "
                       "buffer)",
                       dtype_name(dt), shape_str(p.out_shape), bytes, limit));
  }
  if (total == 0) return g.add_tensor(p.out_shape, dt);
  if (p.beta == 0) p.bias = TensorRef{-1};  // ATen and ONNX: C is ignored (NaN in it too)

  // A batch of A against one B (and a bias shared by every row) is one
  // taller product: [b, M, K] x [K, N] -> [b * M, K] x [K, N].
  const bool b_shared = std::all_of(p.sb.begin(), p.sb.end(), [](int64_t s) { return s == 0; });
  const bool bias_rows_shared =
      p.bias.id < 0 || (p.bias_sm == 0 && std::all_of(p.sc.begin(), p.sc.end(), [](int64_t s) { return s == 0; }));
  bool a_dense = !p.a_trans;
  int64_t expect = p.M * p.K;
  for (size_t d = p.batch.size(); d-- > 0 && a_dense;) {
    if (p.batch[d] != 1 && p.sa[d] != expect) a_dense = false;
    expect *= p.batch[d];
  }
  if (!p.batch.empty() && b_shared && bias_rows_shared && a_dense) {
    p.M *= numel(p.batch);
    p.batch.clear();
    p.sa.clear();
    p.sb.clear();
    p.sc.clear();
  }
  // Drop batch dims of size 1; merge dims that every operand strides alike.
  Shape shape;
  std::array<Shape, 3> st;
  const std::array<const Shape*, 3> in = {&p.sa, &p.sb, &p.sc};
  for (size_t d = 0; d < p.batch.size(); ++d) {
    if (p.batch[d] == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < 3 && merge; ++k) merge = st[k].back() == (*in[k])[d] * p.batch[d];
    if (merge) {
      shape.back() *= p.batch[d];
      for (size_t k = 0; k < 3; ++k) st[k].back() = (*in[k])[d];
    } else {
      shape.push_back(p.batch[d]);
      for (size_t k = 0; k < 3; ++k) st[k].push_back((*in[k])[d]);
    }
  }
  const int64_t batch = std::max<int64_t>(numel(shape), 1);
  const uint64_t es = gpu_dtype_size(dt);
  auto fits = [&](TensorRef t) { return t.id < 0 || g.info(t).gpu_bytes() <= binding_limit(g); };
  if (fits(p.a) && fits(p.b) && fits(p.bias) && bytes <= binding_limit(g)) {
    if (const auto y = record_subgroup_padded(a, p, shape, st, batch)) return *y;
    const TensorRef y = g.add_tensor(p.out_shape, dt);
    if (record_gemv(a, p, shape, y)) return y;
    if (record_subgroup(a, p, shape, st, batch, y, residual, residual_added)) return y;
    p.residual = residual;
    residual_added = residual.id >= 0;
    dispatch(a, p, shape, st, Binding::of(y), Binding::of(p.a), Binding::of(p.b),
             p.bias.id >= 0 ? Binding::of(p.bias) : Binding::of(g.ctx().dummy_buffer()));
    return y;
  }
  if (shape.size() == 1) return record_batch_split(a, p, shape, st, es);
  if (!shape.empty()) {
    a.fail(fmt::format("a product with batch dims {} that do not merge into one, with an operand or result over "
                       "this device's maxStorageBufferBindingSize of {} bytes; only single products and one batch "
                       "dim are split ({})",
                       shape_str(shape), binding_limit(g), binding_limit_advice(g.ctx())));
  }
  return record_split(a, p, es);
}

// Sets the bias of `p` (broadcast to [batch..., M, N]) with its strides.
void set_bias(const Args& a, Gemm& p, TensorRef bias, std::string_view name) {
  if (bias.id < 0) return;
  require_operand(a, bias, name);
  if (a.g.info(bias).dtype != a.g.info(p.a).dtype) {
    a.fail(fmt::format("argument '{}' has dtype {} but the matrices have {}; they must agree", name,
                       dtype_name(a.g.info(bias).dtype), dtype_name(a.g.info(p.a).dtype)));
  }
  Shape full = p.batch;
  full.push_back(p.M);
  full.push_back(p.N);
  const Shape& bs = a.g.info(bias).shape;
  bool ok = bs.size() <= full.size();
  for (size_t i = 0; ok && i < bs.size(); ++i) {
    const int64_t d = bs[bs.size() - 1 - i];
    ok = d == 1 || d == full[full.size() - 1 - i];
  }
  if (!ok) {
    a.fail(fmt::format("argument '{}' {} does not broadcast to the product's shape {}", name, shape_str(bs),
                       shape_str(full)));
  }
  const Shape s = broadcast_strides(bs, full);
  p.bias = bias;
  p.sc.assign(s.begin(), s.end() - 2);
  p.bias_sm = s[s.size() - 2];
  p.bias_sn = s[s.size() - 1];
}

// aten.matmul.default(self, other): numpy matmul. 1-D operands get a dim of
// 1 prepended (self) or appended (other), removed from the result; leading
// dims broadcast.
Value matmul(Graph& g, const ValueList& args) {
  Args a{"aten.matmul.default", args, g};
  if (args.size() > 2) a.fail(fmt::format("takes 2 arguments, got {}", args.size()));
  TensorRef x = a.tensor(0, "self");
  TensorRef y = a.tensor(1, "other");
  require_operand(a, x, "self");
  require_operand(a, y, "other");
  require_same_dtype(a, x, "self", y, "other");
  Shape xs = g.info(x).shape, ys = g.info(y).shape;
  if (xs.empty() || ys.empty()) {
    a.fail(fmt::format("both arguments must be at least 1-D, got {} and {}", shape_str(xs), shape_str(ys)));
  }
  const bool x1 = xs.size() == 1, y1 = ys.size() == 1;
  if (x1) xs.insert(xs.begin(), 1);
  if (y1) ys.push_back(1);
  Gemm p;
  p.a = x;
  p.b = y;
  p.M = xs[xs.size() - 2];
  p.K = xs.back();
  p.N = ys.back();
  if (ys[ys.size() - 2] != p.K) {
    a.fail(fmt::format("shapes {} and {} cannot be multiplied ({} != {})", shape_str(g.info(x).shape),
                       shape_str(g.info(y).shape), p.K, ys[ys.size() - 2]));
  }
  const Shape xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2);
  try {
    p.batch = broadcast_shapes(xb, yb, a.op);
  } catch (const Error&) {
    a.fail(fmt::format("batch dims of {} and {} do not broadcast", shape_str(g.info(x).shape),
                       shape_str(g.info(y).shape)));
  }
  p.sa = batch_strides(xs, p.batch);
  p.sb = batch_strides(ys, p.batch);
  p.sc = Shape(p.batch.size(), 0);
  p.out_shape = p.batch;
  if (!x1) p.out_shape.push_back(p.M);
  if (!y1) p.out_shape.push_back(p.N);
  p.beta = 0;
  return record(a, p);
}

// wgnn.matmul_add.default(self, other, bias=None, alpha=1, act='none',
// trans_self=False, trans_other=False, lo=0, hi=0, residual=None): act(alpha *
// matmul(op(self), op(other)) + bias) + residual, bias, activation ('none', 'relu',
// 'clamp' to [lo, hi], 'gelu', 'gelu_tanh': aten.gelu's two forms, 'silu') and
// residual (the result's shape and dtype) fused in
// the product's epilogue (the regular kernel; the others add the residual
// in a dispatch of its own); op() swaps the
// last two dims of an operand whose trans_ flag is set (read transposed by
// the kernel, never copied). Both operands at least 2-D; the bias broadcasts to the product without
// enlarging it (a MatMul then an Add of a [N] or [1, .., N] constant, fused
// by passes/fuse_matmul_add.cpp).
Value matmul_add(Graph& g, const ValueList& args) {
  Args a{"wgnn.matmul_add.default", args, g};
  if (args.size() < 2 || args.size() > 10) a.fail(fmt::format("takes 2 to 10 arguments, got {}", args.size()));
  TensorRef x = a.tensor(0, "self");
  TensorRef y = a.tensor(1, "other");
  TensorRef bias = a.optional_tensor(2, "bias");
  const double alpha = a.scalar(3, "alpha", 1.0);
  const Activation act = parse_activation(a, a.string(4, "act", "none"),
                                          {Activation::None, Activation::Relu, Activation::Clamp, Activation::Gelu,
                                           Activation::GeluTanh, Activation::Silu});
  const bool ta = a.boolean(5, "trans_self", false), tb = a.boolean(6, "trans_other", false);
  double lo = 0, hi = 0;
  if (act == Activation::Clamp) {
    lo = a.scalar(7, "lo", 0.0);
    hi = a.scalar(8, "hi", 0.0);
    if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) {
      a.fail(fmt::format("clamp bounds [{}, {}] are not a finite range", lo, hi));
    }
  }
  require_operand(a, x, "self");
  require_operand(a, y, "other");
  require_same_dtype(a, x, "self", y, "other");
  const Shape &xs = g.info(x).shape, &ys = g.info(y).shape;
  if (xs.size() < 2 || ys.size() < 2) {
    a.fail(fmt::format("both arguments must be at least 2-D, got {} and {}", shape_str(xs), shape_str(ys)));
  }
  Gemm p;
  p.a = x;
  p.b = y;
  p.a_trans = ta;
  p.b_trans = tb;
  p.M = xs[xs.size() - (ta ? 1 : 2)];
  p.K = xs[xs.size() - (ta ? 2 : 1)];
  p.N = ys[ys.size() - (tb ? 2 : 1)];
  const int64_t ky = ys[ys.size() - (tb ? 1 : 2)];
  if (ky != p.K) {
    a.fail(fmt::format("shapes {}{} and {}{} cannot be multiplied ({} != {})", shape_str(xs), ta ? " (transposed)" : "",
                       shape_str(ys), tb ? " (transposed)" : "", p.K, ky));
  }
  const Shape xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2);
  try {
    p.batch = broadcast_shapes(xb, yb, a.op);
  } catch (const Error&) {
    a.fail(fmt::format("batch dims of {} and {} do not broadcast", shape_str(xs), shape_str(ys)));
  }
  p.sa = batch_strides(xs, p.batch);
  p.sb = batch_strides(ys, p.batch);
  p.sc = Shape(p.batch.size(), 0);
  p.out_shape = p.batch;
  p.out_shape.push_back(p.M);
  p.out_shape.push_back(p.N);
  p.alpha = alpha;
  p.act.act = act;
  p.act.lo = lo;
  p.act.hi = hi;
  if (bias.id >= 0) {
    set_bias(a, p, bias, "bias");
  } else {
    p.beta = 0;
  }
  p.residual = a.optional_tensor(9, "residual");
  if (p.residual.id >= 0) {
    const TensorInfo& ri = g.info(p.residual);
    if (ri.shape != p.out_shape || ri.dtype != g.info(x).dtype) {
      a.fail(fmt::format("argument 'residual' is {} {}; expected the result's {} {}", dtype_name(ri.dtype),
                         shape_str(ri.shape), dtype_name(g.info(x).dtype), shape_str(p.out_shape)));
    }
  }
  return record(a, p);
}

// wgnn.matmul_silu_mul.default(self, other, bias=None) -> silu(g) * u, where
// [g, u] = self @ other + bias split in two along the last dim: SwiGLU's
// gate and up products with their weights side by side (other [K, 2 F],
// bias None or [2 F]), self [..., M, K] -> [..., M, F], in one dispatch of
// kernels/gemv.wgsl. Products of at most 8 rows (a decoder's step) only:
// others are refused before anything is recorded (passes/fuse_silu_mul.cpp
// keeps the product and wgnn.silu_mul for them).
Value matmul_silu_mul(Graph& g, const ValueList& args) {
  Args a{"wgnn.matmul_silu_mul.default", args, g};
  if (args.size() < 2 || args.size() > 3) a.fail(fmt::format("takes 2 or 3 arguments, got {}", args.size()));
  const TensorRef x = a.tensor(0, "self"), w = a.tensor(1, "other"), bias = a.optional_tensor(2, "bias");
  require_operand(a, x, "self");
  require_operand(a, w, "other");
  require_same_dtype(a, x, "self", w, "other");
  const Shape &xs = g.info(x).shape, &ws = g.info(w).shape;
  if (xs.size() < 2 || ws.size() != 2 || ws[1] % 2 != 0 || xs.back() != ws[0]) {
    a.fail(fmt::format("self {} and other {}: expected [..., M, K] and [K, 2 F]", shape_str(xs), shape_str(ws)));
  }
  Gemm p;
  p.a = x;
  p.b = w;
  p.K = ws[0];
  p.N = ws[1] / 2;
  p.M = numel(xs) / p.K;
  if (p.M > kGemvRows || p.M < 1) {
    a.fail(fmt::format("{} rows: only products of 1 to {} rows (a decoder's step) are fused", p.M, kGemvRows));
  }
  if (bias.id >= 0) {
    const TensorInfo& bi = g.info(bias);
    if (bi.shape != Shape{ws[1]} || bi.dtype != g.info(x).dtype) {
      a.fail(fmt::format("bias {} {}: expected {} [{}]", dtype_name(bi.dtype), shape_str(bi.shape),
                         dtype_name(g.info(x).dtype), ws[1]));
    }
    p.bias = bias;
    p.bias_sn = 1;
  } else {
    p.beta = 0;
  }
  p.out_shape = xs;
  p.out_shape.back() = p.N;
  const char* no_gemv = g.ctx().settings().get("WGNN_NO_GEMV");
  if ((no_gemv && std::string_view(no_gemv) == "1") || subgroup_matmul_emulated(g.ctx().settings())) {
    a.fail("the product kernel for few rows is off (WGNN_NO_GEMV=1 or WGNN_SUBGROUP_MATMUL=emulate)");
  }
  for (TensorRef t : {x, w, bias}) {
    if (t.id >= 0 && g.info(t).gpu_bytes() > binding_limit(g)) a.fail("an operand over the binding limit");
  }
  const TensorRef y = g.add_tensor(p.out_shape, g.info(x).dtype);
  if (!record_gemv(a, p, {}, y, true)) a.fail("the product kernel for few rows refused it");
  return y;
}

// Both operands exactly 2-D (mm) or 3-D with one batch (bmm).
Value mm_like(Graph& g, const ValueList& args, const char* op, size_t rank) {
  Args a{op, args, g};
  if (args.size() > 2) a.fail(fmt::format("takes 2 arguments, got {}", args.size()));
  TensorRef x = a.tensor(0, "self");
  TensorRef y = a.tensor(1, "mat2");
  require_operand(a, x, "self");
  require_operand(a, y, "mat2");
  require_same_dtype(a, x, "self", y, "mat2");
  const Shape &xs = g.info(x).shape, &ys = g.info(y).shape;
  if (xs.size() != rank || ys.size() != rank) {
    a.fail(fmt::format("expects {}-D tensors, got {} and {}", rank, shape_str(xs), shape_str(ys)));
  }
  if (rank == 3 && xs[0] != ys[0]) a.fail(fmt::format("batch sizes differ: {} and {}", shape_str(xs), shape_str(ys)));
  if (xs[rank - 1] != ys[rank - 2]) {
    a.fail(fmt::format("shapes {} and {} cannot be multiplied ({} != {})", shape_str(xs), shape_str(ys), xs[rank - 1],
                       ys[rank - 2]));
  }
  return matmul(g, {x, y});
}

// aten.addmm.default(self, mat1, mat2, *, beta=1, alpha=1):
// beta * self + alpha * (mat1 @ mat2), self broadcast to [M, N].
Value addmm(Graph& g, const ValueList& args) {
  Args a{"aten.addmm.default", args, g};
  if (args.size() > 5) a.fail(fmt::format("takes at most 5 arguments, got {}", args.size()));
  TensorRef bias = a.tensor(0, "self");
  TensorRef x = a.tensor(1, "mat1");
  TensorRef y = a.tensor(2, "mat2");
  Gemm p;
  p.beta = a.scalar(3, "beta", 1.0);
  p.alpha = a.scalar(4, "alpha", 1.0);
  require_operand(a, x, "mat1");
  require_operand(a, y, "mat2");
  require_same_dtype(a, x, "mat1", y, "mat2");
  const Shape &xs = g.info(x).shape, &ys = g.info(y).shape;
  if (xs.size() != 2 || ys.size() != 2) {
    a.fail(fmt::format("'mat1' and 'mat2' must be 2-D, got {} and {}", shape_str(xs), shape_str(ys)));
  }
  if (xs[1] != ys[0]) {
    a.fail(fmt::format("shapes {} and {} cannot be multiplied ({} != {})", shape_str(xs), shape_str(ys), xs[1], ys[0]));
  }
  p.a = x;
  p.b = y;
  p.M = xs[0];
  p.K = xs[1];
  p.N = ys[1];
  p.out_shape = {p.M, p.N};
  set_bias(a, p, bias, "self");
  return record(a, p);
}

// aten.linear.default(input, weight, bias=None): input @ weight^T + bias, with
// input [..., K], weight [N, K] (or [K]: no N dim in the result) and bias
// broadcast to the result (usually [N]).
Value linear(Graph& g, const ValueList& args) {
  Args a{"aten.linear.default", args, g};
  if (args.size() > 3) a.fail(fmt::format("takes at most 3 arguments, got {}", args.size()));
  TensorRef x = a.tensor(0, "input");
  TensorRef w = a.tensor(1, "weight");
  TensorRef bias = a.optional_tensor(2, "bias");
  require_operand(a, x, "input");
  require_operand(a, w, "weight");
  require_same_dtype(a, x, "input", w, "weight");
  Shape xs = g.info(x).shape;
  const Shape& ws = g.info(w).shape;
  if (xs.empty()) a.fail("argument 'input' must be at least 1-D, got a 0-d tensor");
  if (ws.size() != 2 && ws.size() != 1) {
    a.fail(fmt::format("argument 'weight' must be 2-D [out_features, in_features], got {}", shape_str(ws)));
  }
  if (ws.back() != xs.back()) {
    a.fail(fmt::format("input {} and weight {} do not match: {} input features, weight expects {}", shape_str(xs),
                       shape_str(ws), xs.back(), ws.back()));
  }
  Gemm p;
  p.a = x;
  p.b = w;
  p.b_trans = true;  // weight is [N, K]
  p.out_shape = Shape(xs.begin(), xs.end() - 1);
  if (ws.size() == 2) p.out_shape.push_back(ws[0]);
  if (xs.size() == 1) xs.insert(xs.begin(), 1);
  p.M = xs[xs.size() - 2];
  p.K = xs.back();
  p.N = ws.size() == 2 ? ws[0] : 1;
  p.batch = Shape(xs.begin(), xs.end() - 2);
  p.sa = batch_strides(xs, p.batch);
  p.sb = Shape(p.batch.size(), 0);
  p.sc = Shape(p.batch.size(), 0);
  if (bias.id >= 0) {
    const Shape& bs = g.info(bias).shape;
    bool ok = bs.size() <= p.out_shape.size();
    for (size_t i = 0; ok && i < bs.size(); ++i) {
      const int64_t d = bs[bs.size() - 1 - i];
      ok = d == 1 || d == p.out_shape[p.out_shape.size() - 1 - i];
    }
    if (!ok) {
      a.fail(fmt::format("argument 'bias' {} does not broadcast to the result {}", shape_str(bs),
                         shape_str(p.out_shape)));
    }
    if (ws.size() == 1) {  // the result has no N dim: read the bias as [..., 1]
      Shape b1 = bs;
      b1.push_back(1);
      bias = g.add_view(bias, b1);
    }
    set_bias(a, p, bias, "bias");
  }
  return record(a, p);
}

// wgnn.gemm.default(A, B, C=None, alpha=1, beta=1, transA=False, transB=False):
// ONNX Gemm. alpha * op(A) @ op(B) + beta * C with A, B 2-D (op transposes
// when asked) and C broadcast to [M, N].
Value gemm(Graph& g, const ValueList& args) {
  Args a{"wgnn.gemm.default", args, g};
  if (args.size() > 7) a.fail(fmt::format("takes at most 7 arguments, got {}", args.size()));
  TensorRef x = a.tensor(0, "A");
  TensorRef y = a.tensor(1, "B");
  TensorRef c = a.optional_tensor(2, "C");
  Gemm p;
  p.alpha = a.scalar(3, "alpha", 1.0);
  p.beta = a.scalar(4, "beta", 1.0);
  p.a_trans = a.boolean(5, "transA", false);
  p.b_trans = a.boolean(6, "transB", false);
  require_operand(a, x, "A");
  require_operand(a, y, "B");
  require_same_dtype(a, x, "A", y, "B");
  const Shape &xs = g.info(x).shape, &ys = g.info(y).shape;
  if (xs.size() != 2 || ys.size() != 2) {
    a.fail(fmt::format("'A' and 'B' must be 2-D, got {} and {}", shape_str(xs), shape_str(ys)));
  }
  p.a = x;
  p.b = y;
  p.M = p.a_trans ? xs[1] : xs[0];
  p.K = p.a_trans ? xs[0] : xs[1];
  const int64_t kb = p.b_trans ? ys[1] : ys[0];
  p.N = p.b_trans ? ys[0] : ys[1];
  if (kb != p.K) {
    a.fail(fmt::format("op(A) is {}x{} and op(B) is {}x{}: inner dims differ (transA={}, transB={})", p.M, p.K, kb,
                       p.N, p.a_trans, p.b_trans));
  }
  p.out_shape = {p.M, p.N};
  set_bias(a, p, c, "C");
  return record(a, p);
}

}  // namespace

void record_strided_gemm(const Args& a, const StridedGemm& s) {
  Graph& g = a.g;
  const DType dt = g.info(s.a).dtype;
  for (TensorRef t : {s.b, s.bias, s.out}) {
    if (t.id >= 0 && g.info(t).dtype != dt) a.fail("a strided product's operands and result must share one dtype");
  }
  const size_t nb = s.batch.size();
  if (s.sa.size() != nb || s.sb.size() != nb || s.so.size() != nb || (s.bias.id >= 0 && s.sc.size() != nb)) {
    a.fail("a strided product needs one batch stride per batch dim for each operand");
  }
  if (s.M < 1 || s.N < 1 || s.K < 1 || s.ldc < 1) a.fail("a strided product needs M, N, K and ldc of at least 1");
  // The largest element each view reaches, inside its tensor.
  auto reach = [&](TensorRef t, int64_t off, const Shape& bs, std::initializer_list<std::pair<int64_t, int64_t>> dims,
                   std::string_view name) {
    int64_t last = off;
    bool neg = off < 0;
    for (size_t d = 0; d < nb; ++d) last += (s.batch[d] - 1) * bs[d], neg = neg || bs[d] < 0;
    for (const auto& [n, stride] : dims) last += (n - 1) * stride, neg = neg || stride < 0;
    if (neg || last >= g.info(t).numel() || last > int64_t(UINT32_MAX)) {
      a.fail(fmt::format("a strided product's {} view reaches element {} of a tensor of {}", name, last,
                         g.info(t).numel()));
    }
  };
  reach(s.a, s.a_off, s.sa, {{s.a_trans ? s.K : s.M, s.lda}, {s.a_trans ? s.M : s.K, 1}}, "A");
  reach(s.b, s.b_off, s.sb, {{s.b_trans ? s.N : s.K, s.ldb}, {s.b_trans ? s.K : s.N, 1}}, "B");
  if (s.bias.id >= 0) reach(s.bias, s.c_off, s.sc, {{s.M, s.bias_sm}, {s.N, s.bias_sn}}, "bias");
  reach(s.out, s.o_off, s.so, {{s.M, s.ldc}, {s.N, 1}}, "result");
  Gemm p;
  p.a = s.a, p.b = s.b, p.bias = s.bias;
  p.a_trans = s.a_trans, p.b_trans = s.b_trans;
  p.M = s.M, p.N = s.N, p.K = s.K;
  p.batch = s.batch;
  p.bias_sm = s.bias_sm, p.bias_sn = s.bias_sn;
  p.alpha = s.alpha, p.beta = s.beta;
  p.act = s.act;
  p.lda = s.lda, p.ldb = s.ldb, p.ldc = s.ldc;
  p.a_off = s.a_off, p.b_off = s.b_off, p.c_off = s.c_off, p.o_off = s.o_off;
  p.so = s.so;
  p.out_shape = g.info(s.out).shape;
  const std::array<Shape, 3> st = {s.sa, s.sb, s.bias.id >= 0 ? s.sc : Shape(nb, 0)};
  dispatch(a, p, s.batch, st, Binding::of(s.out), Binding::of(s.a), Binding::of(s.b),
           s.bias.id >= 0 ? Binding::of(s.bias) : Binding::of(g.ctx().dummy_buffer()));
}

void register_matmul_ops(OpRegistry& r) {
  r.add("aten.matmul.default", matmul);
  r.add("aten.mm.default", [](Graph& g, const ValueList& args) { return mm_like(g, args, "aten.mm.default", 2); });
  r.add("aten.bmm.default", [](Graph& g, const ValueList& args) { return mm_like(g, args, "aten.bmm.default", 3); });
  r.add("aten.addmm.default", addmm);
  r.add("aten.linear.default", linear);
  r.add("wgnn.gemm.default", gemm);
  r.add("wgnn.matmul_add.default", matmul_add);
  r.add("wgnn.matmul_silu_mul.default", matmul_silu_mul);
}

SplitSumCapture::SplitSumCapture(int64_t row_width, int64_t rows) : width(row_width), count(rows), prev_(split_capture) {
  split_capture = this;
}
SplitSumCapture::~SplitSumCapture() { split_capture = prev_; }

}  // namespace wgnn::ops

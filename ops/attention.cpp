// wgnn.attention.default: scaled-dot-product attention as one dispatch
// (kernels/attention.wgsl, flash-style: online softmax, no L x S scores in
// memory), for the ONNX importer's fusion of q k^T * scale (+ mask),
// softmax, @ v.
//
// q, k and v are read through strided 4-D views of their buffers, so that
// they may be slices of one packed projection, or k stored transposed,
// without a copy; the result is written through a strided view of a new
// contiguous tensor, so that a following transpose(1, 2) + reshape is
// absorbed.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/attention.h"
#include "ops/helpers.h"
#include "ops/matmul.h"
#include "ops/subgroup_attention.h"
#include "ops/subgroup_matmul.h"
#include "ops/uniforms.h"
#include "ops/registry.h"

namespace wgnn::ops {
namespace {

constexpr std::string_view kOp = "wgnn.attention.default";
// Head dims the kernel takes: a thread keeps a query row and an output row
// in registers (f32), so D + DV values per thread.
constexpr int64_t kMaxHeadDim = 128;

// A strided view: element offset, four sizes, four element strides.
struct View {
  int64_t off = 0;
  std::array<int64_t, 4> n{}, s{};
};

using Params = AttentionParams;  // ops/uniforms.h (splits: KS, a loop bound the compiler does not unroll)
static_assert(sizeof(Params) == 144);

uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// The largest element index a view addresses (all sizes >= 1; values
// checked to fit u32 before, so each product fits u64).
uint64_t max_index(int64_t off, const std::array<int64_t, 4>& n, const std::array<int64_t, 4>& s) {
  uint64_t m = uint64_t(off);
  for (size_t i = 0; i < 4; ++i) m = sat_add(m, uint64_t(n[i] - 1) * uint64_t(s[i]));
  return m;
}

bool empty(const View& v) { return std::any_of(v.n.begin(), v.n.end(), [](int64_t x) { return x == 0; }); }

// Checks a view [offset, n0..n3, s0..s3] of tensor `t`: no value negative,
// each fitting u32, the largest addressed element inside `t`.
// `given` is what the caller passed (for messages), `v` the 9 values.
View check_view(const Args& a, const IntList& v, const IntList& given, std::string_view name, TensorRef t,
                std::string_view tname) {
  for (int64_t x : v) {
    if (x < 0 || x > int64_t(UINT32_MAX)) {
      a.fail(fmt::format("argument '{}' [{}] has the value {}; offsets, sizes and strides must be in 0..{} (no "
                         "negative strides, 32-bit indexing)",
                         name, fmt::join(given, ", "), x, UINT32_MAX));
    }
  }
  View r;
  r.off = v[0];
  for (size_t d = 0; d < 4; ++d) {
    r.n[d] = v[1 + d];
    r.s[d] = v[5 + d];
  }
  if (!empty(r)) {
    const uint64_t hi = max_index(r.off, r.n, r.s);
    const int64_t numel = a.g.info(t).numel();
    if (hi >= uint64_t(numel)) {
      a.fail(fmt::format("argument '{}' [{}] reads element {}, out of bounds of '{}' {} ({} elements)", name,
                         fmt::join(given, ", "), hi, tname, shape_str(a.g.info(t).shape), numel));
    }
  }
  return r;
}

// A q / k / v view: [offset, n0..n3, s0..s3] with sizes `dims`.
View parse_view(const Args& a, size_t i, std::string_view name, TensorRef t, std::string_view tname,
                std::string_view dims) {
  const IntList v = a.int_list(i, name);
  if (v.size() != 9) {
    a.fail(fmt::format("argument '{}' has {} values; expected 9: [offset, {}, then their element strides]", name,
                       v.size(), dims));
  }
  return check_view(a, v, v, name, t, tname);
}

// Tiles of the kernel: BQ queries per workgroup, KS threads per query, BK
// keys per tile; the rest follows (see attention.wgsl).
struct Tile {
  int64_t bq = 0, ks = 0, bk = 0;
  int64_t tile4 = 0, cw = 0;  // vec4s of workgroup memory, merge round width
  uint64_t bytes() const { return uint64_t(tile4) * 16 + uint64_t(bq * ks) * 4; }
};

int64_t nd_of(int64_t d) { return (d + 3) / 4; }
int64_t odd(int64_t x) { return x | 1; }

Tile complete(int64_t bq, int64_t ks, int64_t bk, int64_t D, int64_t DV) {
  Tile t{bq, ks, bk, 0, 0};
  const int64_t wg = bq * ks, nv = nd_of(DV);
  const int64_t stage = bk * (odd(nd_of(D)) + odd(nv));
  const int64_t room = std::max(stage, wg);
  t.cw = 1;
  for (int64_t c = nv; c >= 1; --c) {
    if (nv % c == 0 && wg * c <= room) {
      t.cw = c;
      break;
    }
  }
  t.tile4 = std::max(stage, wg * t.cw);
  return t;
}

int64_t pow2_at_least(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

// Enough workgroups to fill a large GPU (an H200 has 132 multiprocessors,
// each holding a few of these workgroups).
constexpr int64_t kFillGroups = 256;
constexpr int64_t kThreads = 128;  // per workgroup, where the problem allows
constexpr int64_t kMaxSplit = 32;  // KS: more partials only lengthen the merge
constexpr int64_t kKeysPerThread = 8;
constexpr int64_t kMaxTileKeys = 64;

// The tile for a problem (WGNN_ATTENTION_TILE=BQxKSxBK fixes it, for tuning
// and tests). Queries: the largest BQ that still makes kFillGroups
// workgroups (larger BQ: fewer K/V tile loads per query), else 4 (small
// problems: more workgroups; below 4 the K/V reloads grow); BQ never above
// L rounded up to a power of two. KS = 128 / BQ threads
// share a query (up to 32, and not above S); BK = 8 keys per thread and tile
// (the per-tile rescale and barriers amortized), or all of S up to 64,
// within the workgroup memory
// budget: the device's limit, at most 32 KiB (more only adds keys per tile).
Tile choose_tile(const Args& a, int64_t BH, int64_t L, int64_t S, int64_t D, int64_t DV) {
  const gpu::Limits& lim = a.g.ctx().limits();
  const uint64_t limit = lim.max_compute_workgroup_storage_size;
  const int64_t max_threads = std::min<int64_t>(256, lim.max_compute_invocations_per_workgroup);
  if (const char* env = a.g.ctx().settings().get("WGNN_ATTENTION_TILE"); env && *env) {
    long long lbq = 0, lks = 0, lbk = 0;
    char tail = 0;
    const int got = std::sscanf(env, "%lldx%lldx%lld%c", &lbq, &lks, &lbk, &tail);
    const int64_t bq = lbq, ks = lks, bk = lbk;
    if (got != 3 || bq < 1 || ks < 1 || bk < ks || bk % ks != 0 || bq * ks > max_threads || bk > 256) {
      a.fail(fmt::format("WGNN_ATTENTION_TILE='{}': expected BQxKSxBK (queries per workgroup, threads per "
                         "query, keys per tile) with BK a multiple of KS, BK <= 256 and BQ * KS <= {}",
                         env, max_threads));
    }
    const Tile t = complete(bq, ks, bk, D, DV);
    if (t.bytes() > limit) {
      a.fail(fmt::format("WGNN_ATTENTION_TILE='{}' needs {} bytes of workgroup memory for D={} Dv={}; this "
                         "device allows {}",
                         env, t.bytes(), D, DV, limit));
    }
    return t;
  }
  const uint64_t budget = std::min<uint64_t>(limit, 32768);
  // Long sequences with enough queries: a thread per query and no key
  // split (the warp's 32 queries read each staged key row as a broadcast;
  // no merge). On an H200 the Whisper-base encoder's 8 x 1500 x 1500
  // attention ran 1.45x faster so (128x1x32) than with the split tiles
  // below (32x4x32), and 2.2x faster than 64x2x32 (docs/BENCHMARKS.md).
  if (L >= 128 && BH * int64_t(gpu::ceil_div(uint64_t(L), 128)) >= 64 && max_threads >= 128) {
    const Tile t = complete(128, 1, 32, D, DV);
    if (t.bytes() <= budget) return t;
  }
  const int64_t lmax = pow2_at_least(L), floor = std::min<int64_t>(4, lmax);
  int64_t bq = floor;
  for (int64_t c = 64; c > floor; c /= 2) {
    if (c <= lmax && BH * int64_t(gpu::ceil_div(uint64_t(L), uint64_t(c))) >= kFillGroups) {
      bq = c;
      break;
    }
  }
  // One query per workgroup (a decoder step): 64 threads share it (on an
  // H200 BART-base's step attention ran 7% faster with 1x64x64 than 1x32x32).
  const int64_t max_split = bq == 1 ? 2 * kMaxSplit : kMaxSplit;
  int64_t ks = std::min({kThreads / bq, max_split, pow2_at_least(S), max_threads / bq});
  int64_t bk = std::min(std::max(ks, std::min(ks * kKeysPerThread, pow2_at_least(S))), kMaxTileKeys);
  // Short sequences: every key in one tile (one staging, one barrier pair).
  // DaViT-B's 49-key windows (64 queries, 2 threads each) ran 2.2 -> 0.7 ms
  // on an H200 with 64 keys per tile instead of 16 (docs/BENCHMARKS.md).
  if (S <= kMaxTileKeys) bk = pow2_at_least(S);
  bk = std::max(bk, ks);
  Tile t = complete(bq, ks, bk, D, DV);
  while (t.bytes() > budget && (bk > ks || ks > 1)) {
    if (bk > ks) {
      bk /= 2;
    } else {
      ks /= 2;
      bk = ks;
    }
    t = complete(bq, ks, bk, D, DV);
  }
  if (t.bytes() > limit) {
    a.fail(fmt::format("head dims D={}, Dv={} need {} bytes of workgroup memory; this device allows {}", D, DV,
                       t.bytes(), limit));
  }
  return t;
}

// Attention over many keys as scores = scale * q k^T + mask (one batched
// product, the mask as its bias), softmax over the keys, then scores v
// written through the result's view: q, k, v and the mask read in place
// through their views, the result written in its layout, so no copy of a
// head split or merge. Needs each operand's view contiguous along one of
// its two matrix dims, the mask of q's dtype and the result's view
// contiguous along Dv; returns false otherwise (the kernel then runs).
bool record_two_products(const Args& a, TensorRef q, TensorRef k, TensorRef v, TensorRef mask, double scale,
                         const View& qv, const View& kv, const View& vv, const View& mv, const IntList& ov,
                         TensorRef y) {
  Graph& g = a.g;
  const DType dt = g.info(q).dtype;
  const int64_t B = qv.n[0], H = qv.n[1], L = qv.n[2], D = qv.n[3], S = kv.n[2], DV = vv.n[3];
  if (mask.id >= 0 && g.info(mask).dtype != dt) return false;
  if (ov[4] != 1 && DV > 1) return false;
  // A matrix view [rows, cols] (sizes n[2], n[3]): row-major with row stride
  // s[2] (cols contiguous), or column-major with column stride s[3].
  auto unit = [](const View& w, size_t d) { return w.s[d] == 1 || w.n[d] == 1; };
  if (!(unit(qv, 3) || unit(qv, 2)) || !(unit(kv, 3) || unit(kv, 2)) || !(unit(vv, 3) || unit(vv, 2))) return false;
  const uint64_t scores_bytes = uint64_t(B * H * L * S) * gpu_dtype_size(dt);
  if (scores_bytes > g.ctx().limits().max_storage_buffer_binding_size) return false;

  const TensorRef scores = g.add_tensor({B, H, L, S}, dt);
  StridedGemm p;  // scores [B, H, L, S] = scale * q [L, D] @ k^T [D, S] + mask
  p.a = q, p.b = k, p.out = scores;
  p.M = L, p.N = S, p.K = D;
  p.batch = {B, H};
  p.sa = {qv.s[0], qv.s[1]};
  p.sb = {kv.s[0], kv.s[1]};
  p.so = {H * L * S, L * S};
  p.a_off = qv.off, p.b_off = kv.off;
  p.a_trans = !unit(qv, 3);  // [D, L] columns of q
  p.lda = p.a_trans ? qv.s[3] : qv.s[2];
  p.b_trans = unit(kv, 3);  // k [S, D] rows: k^T read transposed
  p.ldb = p.b_trans ? kv.s[2] : kv.s[3];
  p.ldc = S;
  p.alpha = scale;
  if (mask.id >= 0) {
    p.bias = mask;
    p.sc = {mv.s[0], mv.s[1]};
    p.c_off = mv.off;
    p.bias_sm = mv.s[2], p.bias_sn = mv.s[3];
  }
  record_strided_gemm(a, p);
  const TensorRef probs = ops::call(g, "aten._softmax.default", {scores, int64_t(3), false}).tensor();

  StridedGemm o;  // y (through out_view) = probs [L, S] @ v [S, Dv]
  o.a = probs, o.b = v, o.out = y;
  o.M = L, o.N = DV, o.K = S;
  o.batch = {B, H};
  o.sa = {H * L * S, L * S};
  o.sb = {vv.s[0], vv.s[1]};
  o.so = {ov[1], ov[2]};
  o.lda = S;
  o.b_off = vv.off;
  o.b_trans = !unit(vv, 3);  // v stored [Dv, S]
  o.ldb = o.b_trans ? vv.s[3] : vv.s[2];
  o.o_off = ov[0];
  o.ldc = ov[3];
  record_strided_gemm(a, o);
  return true;
}

// WGNN_SUBGROUP_ATTENTION=0 keeps float16 attention off the tensor cores;
// =1 takes every case the kernel can (however little work: tests).
std::string_view subgroup_attention_mode(const Settings& settings) {
  const char* e = settings.get("WGNN_SUBGROUP_ATTENTION");
  return e ? std::string_view(e) : std::string_view();
}
bool subgroup_attention_allowed(const Settings& settings) { return subgroup_attention_mode(settings) != "0"; }

// Queries below which the tensor-core kernel is not used (a decoder step's
// one query would leave 15 of its 16 matrix rows empty).
constexpr int64_t kMinTensorCoreQueries = 16;
// Tiles of 16 queries (times batch and heads) below which it is not used
// either: too few workgroups to fill a large GPU, where the scalar kernel
// splits the work finer. On an H200, with the kernel's first tiles (64-key
// blocks), BART-base's decoder (12 heads of 32 queries: 24 tiles) ran 3.5%
// slower on it and DeiT-T (3 heads of 197: 39) the same; with today's
// kernel (16-key blocks, q in registers, the keys in ranges) DeiT-T's GPU
// time went 0.935 -> 0.71 ms on it and BART's stayed level
// (docs/BENCHMARKS.md), so the line is at 32.
constexpr int64_t kMinTensorCoreTiles = 32;

bool enough_work(const Settings& settings, int64_t BH, int64_t L) {
  if (L < kMinTensorCoreQueries) return false;
  return subgroup_attention_mode(settings) == "1" || BH * ((L + 15) / 16) >= kMinTensorCoreTiles;
}

// The ranges the tensor-core kernel cuts the keys into: 1 where its
// (b, h, query tile) workgroups are enough (kKeySplitGroups, two per
// multiprocessor of an H200), else about that many workgroups in all, each
// range about kKeySplitMinKeys keys or more. The Whisper encoder's 192
// workgroups over 1,500 keys: 2 ranges took its GPU time from 1.99 to 1.86
// ms; 3, 4 and 6 ranges lost (2.03-2.15); DeiT-T's 12 over 197 keys: 4
// ranges took it from 0.78 to 0.71 (docs/BENCHMARKS.md).
// WGNN_SUBGROUP_ATTENTION_SPLITS=0: none; =N: N ranges wherever each still
// has a block of keys (tuning, tests).
constexpr uint64_t kKeySplitGroups = 264, kKeySplitMinKeys = 64;
uint64_t attention_key_splits(const Settings& settings, uint64_t groups, uint64_t S, uint32_t bkv) {
  if (const char* e = settings.get("WGNN_SUBGROUP_ATTENTION_SPLITS"); e && *e) {
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end || v < 0 || v > 64)
      throw Error(fmt::format("WGNN_SUBGROUP_ATTENTION_SPLITS='{}': expected 0 (none) or a number of key ranges up to 64", e));
    return std::max<uint64_t>(1, std::min<uint64_t>(uint64_t(v), gpu::ceil_div(S, bkv)));
  }
  if (groups >= kKeySplitGroups) return 1;
  if (S <= kKeySplitMinKeys) return 1;
  return std::max<uint64_t>(1, std::min(gpu::ceil_div(kKeySplitGroups, groups), gpu::ceil_div(S, kKeySplitMinKeys)));
}

// Float16 attention on subgroup matrices (ops/subgroup_attention.h) where
// the device has them (or they run emulated) and the head dims are
// multiples of 16; false otherwise (the other paths run).
bool record_subgroup_attention(const Args& a, TensorRef q, TensorRef k, TensorRef v, TensorRef mask, double scale,
                               const View& qv, const View& kv, const View& vv, const View& mv, const IntList& ov,
                               TensorRef y) {
  Graph& g = a.g;
  const int64_t B = qv.n[0], H = qv.n[1], L = qv.n[2], D = qv.n[3], S = kv.n[2], DV = vv.n[3];
  if (g.info(q).dtype != DType::F16 || !enough_work(g.ctx().settings(), B * H, L) || !subgroup_attention_allowed(g.ctx().settings())) return false;
  if (!tensor_cores_available(g.ctx())) return false;
  SubgroupAttentionConfig cfg = pick_subgroup_attention(g.ctx(), uint32_t(D), uint32_t(DV), uint64_t(L));
  if (cfg.sg == 0) return false;
  cfg.emulate = subgroup_matmul_emulated(g.ctx().settings());
  cfg.mask = mask.id >= 0;
  cfg.mask_f16 = cfg.mask && g.info(mask).dtype == DType::F16;
  // vec4<u32> loads: the head dim contiguous, offsets and strides whole
  // 16-byte units.
  auto vec_ok = [](const View& w) {
    bool ok = w.s[3] == 1 && w.n[3] % 8 == 0 && w.off % 8 == 0;
    for (size_t d = 0; d < 3; ++d) ok = ok && (w.n[d] == 1 || w.s[d] % 8 == 0);
    return ok;
  };
  cfg.vec = vec_ok(qv) && vec_ok(kv) && vec_ok(vv);
  if (const char* e = a.g.ctx().settings().get("WGNN_SUBGROUP_ATTENTION_PREFETCH"); e && std::string_view(e) == "0") cfg.prefetch = false;
  // The picker sized the tiles with one V tile; a second where it fits.
  if (cfg.workgroup_bytes() > g.ctx().limits().max_compute_workgroup_storage_size) cfg.v_double = false;
  const uint64_t q_tiles = gpu::ceil_div(uint64_t(L), uint64_t(cfg.queries()));
  const uint64_t groups = uint64_t(B) * uint64_t(H) * q_tiles;
  if (groups > UINT32_MAX) return false;
  // Few workgroups over many keys: the keys in ranges, then a merge pass.
  const uint64_t ksplits = attention_key_splits(g.ctx().settings(), groups, uint64_t(S), cfg.bkv);
  const uint64_t kchunk = gpu::ceil_div(gpu::ceil_div(uint64_t(S), ksplits), cfg.bkv) * cfg.bkv;
  const uint64_t ranges = gpu::ceil_div(uint64_t(S), kchunk);
  const uint64_t part_elems = ranges * uint64_t(B * H * L) * attention_part_row(uint32_t(DV));
  cfg.ksplit = ranges > 1 && groups * ranges <= UINT32_MAX && part_elems <= UINT32_MAX &&
               part_elems * 4 <= g.ctx().limits().max_storage_buffer_binding_size;

  Params p{};
  p.B = uint32_t(B), p.H = uint32_t(H), p.L = uint32_t(L), p.S = uint32_t(S);
  p.q_tiles = uint32_t(q_tiles);
  p.o_off = uint32_t(ov[0]);
  p.scale = float(scale);
  p.splits = 0;  // the emulated kernel's loop bounds add it
  p.kchunk = uint32_t(cfg.ksplit ? kchunk : S);
  p.ksplits = uint32_t(cfg.ksplit ? ranges : 1);
  p.offs[0] = uint32_t(qv.off), p.offs[1] = uint32_t(kv.off), p.offs[2] = uint32_t(vv.off), p.offs[3] = uint32_t(mv.off);
  for (size_t i = 0; i < 4; ++i) {
    p.qs[i] = uint32_t(qv.s[i]), p.ks[i] = uint32_t(kv.s[i]), p.vs[i] = uint32_t(vv.s[i]);
    p.ms[i] = uint32_t(mv.s[i]), p.os[i] = uint32_t(ov[1 + i]);
  }
  const gpu::Pipeline& pl = g.meta() ? meta_pipeline() : g.ctx().pipeline(cfg.name(), subgroup_attention_wgsl(cfg));
  const TensorRef part = cfg.ksplit ? g.add_tensor({int64_t(part_elems)}, DType::F32) : TensorRef{-1};
  std::vector<Binding> bindings = {Binding::of(y), g.uniform(p), Binding::of(q), Binding::of(k), Binding::of(v)};
  // Without a mask the kernel declares no binding 5, so none is given.
  if (cfg.mask) bindings.push_back(Binding::of(mask));
  if (cfg.ksplit) bindings.push_back(Binding::of(part));
  const std::string label = fmt::format("attention L={} S={} D={} heads={}{}{}{} tensor cores", L, S, D, H,
                                        DV != D ? fmt::format(" Dv={}", DV) : "", B > 1 ? fmt::format(" batch={}", B) : "",
                                        mask.id >= 0 ? " mask" : "");
  const std::string emulated = cfg.emulate ? " emulated" : "";
  g.add_dispatch(pl, std::move(bindings), grid_for(g, groups * (cfg.ksplit ? ranges : 1)), std::string(kOp),
                 label + (cfg.ksplit ? fmt::format(" keys in {} ranges", ranges) : "") + emulated,
                 2.0 * double(B) * double(H) * double(L) * double(S) * double(D + DV));
  if (cfg.ksplit) {
    const std::string name = fmt::format("subgroup attention key-split merge Dv={}", DV);
    const gpu::Pipeline& merge =
        g.meta() ? meta_pipeline() : g.ctx().pipeline(name, subgroup_attention_combine_wgsl(uint32_t(DV)));
    g.add_dispatch(merge, {Binding::of(y), g.uniform(p), Binding::of(part)},
                   grid_for(g, gpu::ceil_div(uint64_t(B * H * L * DV / 4), 256)), std::string(kOp),
                   fmt::format("attention merge of {} key ranges L={} Dv={} heads={}", ranges, L, DV, H));
  }
  return true;
}

// wgnn.attention.default(Tensor q, Tensor k, Tensor v, Tensor? mask, float
// scale, int[] q_view, int[] k_view, int[] v_view, int[] mask_view,
// int[] out_shape, int[] out_view) -> Tensor
//
// q is read as [B, H, L, D], k as [B, H, S, D] (logical k, not k^T), v as
// [B, H, S, Dv], each view [offset, sizes..., strides...] in elements of
// its tensor; the mask (additive, float32 or float16, or None with an empty
// mask_view) as [offset, sB, sH, sL, sS] over [B, H, L, S]. The result is a
// new contiguous tensor of shape out_shape (B * H * L * Dv elements, q's
// dtype) with O[b, h, l, d] at out_view = [offset, sB, sH, sL, sD]:
//   O = softmax(scale * q k^T + mask) v, per (b, h), accumulated in f32.
Value attention(Graph& g, const ValueList& args) {
  Args a{kOp, args, g};
  if (args.size() != 11) {
    a.fail(fmt::format("takes 11 arguments (q, k, v, mask, scale, q_view, k_view, v_view, mask_view, out_shape, "
                       "out_view), got {}",
                       args.size()));
  }
  const TensorRef q = a.tensor(0, "q"), k = a.tensor(1, "k"), v = a.tensor(2, "v");
  const TensorRef mask = a.optional_tensor(3, "mask");
  if (args[4].is_none()) a.fail("argument 'scale' is required (a Double), got None");
  const double scale = a.scalar(4, "scale", 1.0);

  // Dtypes: q, k, v one float dtype; the mask float32 or float16.
  a.require_float(q, "q");
  const DType dt = g.info(q).dtype;
  for (auto [t, name] : {std::pair{k, "k"}, std::pair{v, "v"}}) {
    if (g.info(t).dtype != dt) {
      a.fail(fmt::format("arguments 'q' ({}) and '{}' ({}) must have the same dtype; accepted: float32 or float16, "
                         "all three alike",
                         dtype_name(dt), name, dtype_name(g.info(t).dtype)));
    }
  }
  a.require_fits_binding(q, "q");
  a.require_fits_binding(k, "k");
  a.require_fits_binding(v, "v");

  const View qv = parse_view(a, 5, "q_view", q, "q", "B, H, L, D");
  const View kv = parse_view(a, 6, "k_view", k, "k", "B, H, S, D");
  const View vv = parse_view(a, 7, "v_view", v, "v", "B, H, S, Dv");
  const int64_t B = qv.n[0], H = qv.n[1], L = qv.n[2], D = qv.n[3];
  const int64_t S = kv.n[2], DV = vv.n[3];
  if (kv.n[0] != B || vv.n[0] != B || kv.n[1] != H || vv.n[1] != H) {
    a.fail(fmt::format("batch and head sizes differ: q [B={}, H={}], k [B={}, H={}], v [B={}, H={}]; they must be "
                       "equal (broadcast with a stride of 0)",
                       B, H, kv.n[0], kv.n[1], vv.n[0], vv.n[1]));
  }
  if (vv.n[2] != S) {
    a.fail(fmt::format("k has S={} keys but v has S={}; they must be equal", S, vv.n[2]));
  }
  if (kv.n[3] != D) {
    a.fail(fmt::format("q has head dim D={} but k has D={}; they must be equal", D, kv.n[3]));
  }
  if (D < 1 || D > kMaxHeadDim || DV < 1 || DV > kMaxHeadDim) {
    a.fail(fmt::format("head dims D={} (q, k) and Dv={} (v) are not supported: the kernel takes 1 to {} for each",
                       D, DV, kMaxHeadDim));
  }
  if (S < 1) a.fail("k and v have no keys (S = 0); softmax needs at least one");

  // The mask: [offset, sB, sH, sL, sS] over [B, H, L, S].
  const IntList mview = args[8].is_none() ? IntList{} : a.int_list(8, "mask_view");
  View mv;
  if (mask.id < 0) {
    if (!mview.empty()) {
      a.fail(fmt::format("argument 'mask_view' is [{}] but 'mask' is None; it must be empty then",
                         fmt::join(mview, ", ")));
    }
  } else {
    const DType md = g.info(mask).dtype;
    if (md != DType::F32 && md != DType::F16) {
      a.fail(fmt::format("argument 'mask' has dtype {}; accepted: float32, float16 (an additive mask)",
                         dtype_name(md)));
    }
    a.require_fits_binding(mask, "mask");
    if (mview.size() != 5) {
      a.fail(fmt::format("argument 'mask_view' has {} values; expected 5: [offset, sB, sH, sL, sS] (element offset "
                         "and strides over [B, H, L, S])",
                         mview.size()));
    }
    mv = check_view(a, {mview[0], B, H, L, S, mview[1], mview[2], mview[3], mview[4]}, mview, "mask_view", mask,
                    "mask");
  }

  // The result.
  const IntList out_shape = a.int_list(9, "out_shape");
  for (int64_t x : out_shape) {
    if (x < 0) a.fail(fmt::format("argument 'out_shape' [{}] has a negative size", fmt::join(out_shape, ", ")));
  }
  const Shape oshape(out_shape.begin(), out_shape.end());
  int64_t want = 0;
  if (__builtin_mul_overflow(B, H, &want) || __builtin_mul_overflow(want, L, &want) ||
      __builtin_mul_overflow(want, DV, &want) || numel(oshape) != want) {
    a.fail(fmt::format("argument 'out_shape' {} has {} elements; the result has B*H*L*Dv = {}*{}*{}*{}",
                       shape_str(oshape), numel(oshape), B, H, L, DV));
  }
  const IntList ov = a.int_list(10, "out_view");
  if (ov.size() != 5) {
    a.fail(fmt::format("argument 'out_view' has {} values; expected 5: [offset, sB, sH, sL, sD] (element offset and "
                       "strides of O[b, h, l, d] in the result)",
                       ov.size()));
  }
  {
    IntList full = {ov[0], B, H, L, DV, ov[1], ov[2], ov[3], ov[4]};
    for (int64_t x : full) {
      if (x < 0 || x > int64_t(UINT32_MAX)) {
        a.fail(fmt::format("argument 'out_view' [{}] has the value {}; offset and strides must be in 0..{}",
                           fmt::join(ov, ", "), x, UINT32_MAX));
      }
    }
    if (want > 0) {
      const uint64_t hi = max_index(ov[0], {B, H, L, DV}, {ov[1], ov[2], ov[3], ov[4]});
      if (hi >= uint64_t(want)) {
        a.fail(fmt::format("argument 'out_view' [{}] writes element {}, out of bounds of the result {} ({} elements)",
                           fmt::join(ov, ", "), hi, shape_str(oshape), want));
      }
      // Every element written once: the view is the result's contiguous
      // layout with its dims permuted (dims of size 1 aside).
      std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
      const std::array<int64_t, 4> sizes = {B, H, L, DV};
      for (size_t d = 0; d < 4; ++d) {
        if (sizes[d] > 1) dims.emplace_back(ov[1 + d], sizes[d]);
      }
      std::sort(dims.begin(), dims.end());
      int64_t expect = 1;
      bool ok = ov[0] == 0;
      for (const auto& [stride, size] : dims) {
        ok = ok && stride == expect;
        expect *= size;
      }
      if (!ok) {
        a.fail(fmt::format("argument 'out_view' [{}] does not write each element of the result {} once; it must be "
                           "the result's contiguous layout with [B, H, L, Dv] = [{}, {}, {}, {}] permuted",
                           fmt::join(ov, ", "), shape_str(oshape), B, H, L, DV));
      }
    }
  }
  const uint64_t bytes = uint64_t(want) * gpu_dtype_size(dt), limit = g.ctx().limits().max_storage_buffer_binding_size;
  if (bytes > limit) {
    a.fail(fmt::format("the result {} {} is {} bytes, over this device's maxStorageBufferBindingSize of {} bytes",
                       dtype_name(dt), shape_str(oshape), bytes, limit));
  }
  TensorRef y = g.add_tensor(oshape, dt);
  if (want == 0) return y;
  if (record_subgroup_attention(a, q, k, v, mask, scale, qv, kv, vv, mv, ov, y)) return y;
  if (S > attention_max_keys(g.ctx().settings()) && record_two_products(a, q, k, v, mask, scale, qv, kv, vv, mv, ov, y)) return y;

  const Tile t = choose_tile(a, B * H, L, S, D, DV);
  const uint64_t q_tiles = gpu::ceil_div(uint64_t(L), uint64_t(t.bq));
  const uint64_t groups = uint64_t(B) * uint64_t(H) * q_tiles;
  if (groups > UINT32_MAX) a.fail(fmt::format("B*H*ceil(L/{}) = {} workgroups do not fit 32 bits", t.bq, groups));

  Params p{};
  p.B = uint32_t(B);
  p.H = uint32_t(H);
  p.L = uint32_t(L);
  p.S = uint32_t(S);
  p.q_tiles = uint32_t(q_tiles);
  p.o_off = uint32_t(ov[0]);
  p.scale = float(scale);
  p.splits = uint32_t(t.ks);
  p.offs[0] = uint32_t(qv.off);
  p.offs[1] = uint32_t(kv.off);
  p.offs[2] = uint32_t(vv.off);
  p.offs[3] = uint32_t(mv.off);
  for (size_t i = 0; i < 4; ++i) {
    p.qs[i] = uint32_t(qv.s[i]);
    p.ks[i] = uint32_t(kv.s[i]);
    p.vs[i] = uint32_t(vv.s[i]);
    p.ms[i] = uint32_t(mv.s[i]);
    p.os[i] = uint32_t(ov[1 + i]);
  }

  // vec4 loads along D: stride 1, D a multiple of 4 and every row's start a
  // multiple of 4. Else scalar loads, keys innermost when that is the
  // smaller stride (k stored transposed).
  auto vec_ok = [](const View& w) {
    bool ok = w.s[3] == 1 && w.n[3] % 4 == 0 && w.off % 4 == 0;
    for (size_t d = 0; d < 3; ++d) ok = ok && (w.n[d] == 1 || w.s[d] % 4 == 0);
    return ok;
  };
  const bool q_vec = vec_ok(qv), k_vec = vec_ok(kv), v_vec = vec_ok(vv);
  const bool k_keys = !k_vec && kv.s[2] < kv.s[3];
  const bool v_keys = !v_vec && vv.s[2] < vv.s[3];

  const bool mask_f16 = mask.id >= 0 && g.info(mask).dtype == DType::F16;
  const bool any_f16 = dt == DType::F16 || mask_f16;
  if (any_f16) float_subs(g, DType::F16, kOp);  // throws without shader-f16
  Subs subs = {{"ENABLE", any_f16 ? "enable f16;" : ""},
               {"T", dt == DType::F16 ? "f16" : "f32"},
               {"M", mask_f16 ? "f16" : "f32"}};
  subs.emplace_back("D", std::to_string(D));
  subs.emplace_back("DV", std::to_string(DV));
  subs.emplace_back("BQ", std::to_string(t.bq));
  subs.emplace_back("KS", std::to_string(t.ks));
  subs.emplace_back("BK", std::to_string(t.bk));
  subs.emplace_back("TILE", std::to_string(t.tile4));
  subs.emplace_back("CW", std::to_string(t.cw));
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/attention.wgsl", subs,
                                   {{"HAS_MASK", mask.id >= 0 ? 1.0 : 0.0},
                                    {"Q_VEC", q_vec ? 1.0 : 0.0},
                                    {"K_VEC", k_vec ? 1.0 : 0.0},
                                    {"V_VEC", v_vec ? 1.0 : 0.0},
                                    {"K_KEYS", k_keys ? 1.0 : 0.0},
                                    {"V_KEYS", v_keys ? 1.0 : 0.0}});
  g.add_dispatch(pl,
                 {Binding::of(y), g.uniform(p), Binding::of(q), Binding::of(k), Binding::of(v),
                  mask.id >= 0 ? Binding::of(mask) : Binding::of(g.ctx().dummy_buffer())},
                 grid_for(g, groups), std::string(kOp),
                 fmt::format("attention L={} S={} D={} heads={}{}{}{}", L, S, D, H,
                             DV != D ? fmt::format(" Dv={}", DV) : "", B > 1 ? fmt::format(" batch={}", B) : "",
                             mask.id >= 0 ? " mask" : ""),
                 // q k^T and p v: 2 * L * S * (D + Dv) per head (4 * L * S * D when Dv = D)
                 2.0 * double(B) * double(H) * double(L) * double(S) * double(D + DV));
  return y;
}

}  // namespace

// The most keys the one-dispatch kernel takes (WGNN_ATTENTION_MAX_KEYS,
// default 1024). Beyond it, two products and a softmax between them: on an
// H200 the kernel, which computes in f32 registers with a thread per query,
// lost to them on the Whisper-base encoder's 1500 keys (docs/BENCHMARKS.md).
int64_t attention_max_keys(const Settings& settings) {
  const char* e = settings.get("WGNN_ATTENTION_MAX_KEYS");
  if (!e || !*e) return 1024;
  char* end = nullptr;
  const long long x = std::strtoll(e, &end, 10);
  if (*end || x < 0) throw Error(fmt::format("WGNN_ATTENTION_MAX_KEYS='{}': expected a number of keys", e));
  return int64_t(x);
}

bool attention_on_tensor_cores(const gpu::Context& ctx, int64_t BH, int64_t L, int64_t D, int64_t DV) {
  return enough_work(ctx.settings(), BH, L) && subgroup_attention_allowed(ctx.settings()) && tensor_cores_available(ctx) &&
         D <= 128 && DV <= 128 && pick_subgroup_attention(ctx, uint32_t(D), uint32_t(DV)).sg > 0;
}

void register_attention_ops(OpRegistry& r) { r.add(std::string(kOp), attention); }

}  // namespace wgnn::ops

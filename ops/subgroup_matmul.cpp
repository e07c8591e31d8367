// WGSL generation for the subgroup-matrix (tensor-core) matrix product; see
// subgroup_matmul.h. The kernel is unrolled at generation time: every result
// matrix is its own variable and every load names its offset, so no array of
// subgroup matrices is indexed at run time (which would spill them).
//
// Uniformity: subgroupMatrixLoad/Store need subgroup-uniform offsets. Each
// subgroup works on its own sub-block, so the offsets depend on the subgroup
// index (local_invocation_index / 32), which WGSL's uniformity analysis
// cannot see is subgroup-uniform; the kernel turns the
// chromium.subgroup_matrix_uniformity diagnostic off and is only
// chosen where subgroups are exactly 32 invocations (subgroup_matmul_supported),
// so invocations 32s..32s+31 are subgroup s (Dawn requires full subgroups for
// shaders using subgroup matrices).
#include "ops/subgroup_matmul.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "gpu/context.h"
#include "gpu/error.h"
#include "gpu/shaders.h"

namespace wgnn::ops {

uint32_t SubgroupMatmulConfig::workgroup_bytes() const {
  const uint32_t as = (a_trans ? bm : bk) + 8, bs = (b_trans ? bk : bn) + 8;
  const uint32_t a_rows = a_trans ? bk : bm, b_rows = b_trans ? bn : bk;
  const uint32_t scratch = full_tiles ? 0 : subgroups() * 256 * 4;
  return stages * a_rows * as * 2 + stages * b_rows * bs * 2 + scratch;
}

std::string SubgroupMatmulConfig::name() const {
  return fmt::format("subgroup matmul {}x{}x{} sg{}x{} s{}{}{}{}", bm, bn, bk, sg_m, sg_n, stages,
                     out_f16 ? " f16out" : "", bias ? " bias" : "", full_tiles ? " full" : "") + (a_trans ? " At" : "") + (b_trans ? " Bt" : "") +
         (act == 1 ? " gelu" : act == 2 ? " gelu-tanh" : act == 3 ? " relu" : act == 4 ? " clamp" : "") + (ablate ? fmt::format(" ablate{}", ablate) : "");
}

namespace {

// The per-thread word rotation (a WGSL expression of `lane`) that spreads the
// scalar stores of a warp's 16-byte chunks over the most banks: a tile with
// `cols` halves per row and a row stride of `stride` halves, chunks assigned
// in thread order. Tried: (lane / d) % 4 and (lane / d1 + lane / d2) % 4.
std::string best_rotation(uint32_t cols, uint32_t stride) {
  auto conflicts = [&](auto rot) {
    int worst = 0;
    for (uint32_t j = 0; j < 4; ++j) {
      int count[32] = {};
      for (uint32_t t = 0; t < 32; ++t) {
        const uint32_t word = ((t / (cols / 8)) * stride + (t % (cols / 8)) * 8) / 2 + (j + rot(t)) % 4;
        worst = std::max(worst, ++count[word % 32]);
      }
    }
    return worst;
  };
  std::string best = "0u";
  int best_n = conflicts([](uint32_t) { return 0u; });
  const uint32_t ds[] = {1, 2, 4, 8, 16};
  for (uint32_t d1 : ds) {
    const int n = conflicts([&](uint32_t t) { return t / d1; });
    if (n < best_n) best_n = n, best = fmt::format("(lane / {}u) % 4u", d1);
  }
  for (uint32_t d1 : ds)
    for (uint32_t d2 : ds) {
      if (d2 <= d1) continue;
      const int n = conflicts([&](uint32_t t) { return t / d1 + t / d2; });
      if (n < best_n) best_n = n, best = fmt::format("(lane / {}u + lane / {}u) % 4u", d1, d2);
    }
  return best;
}

}  // namespace

std::string subgroup_matmul_wgsl(const SubgroupMatmulConfig& c) {
  const uint32_t T = c.threads();
  const bool valid = c.sg_m > 0 && c.sg_n > 0 && c.bm % (c.sg_m * 16) == 0 && c.bn % (c.sg_n * 16) == 0 &&
                     c.bk % 16 == 0 && c.bk > 0 && (c.stages == 1 || c.stages == 2) &&
                     (c.bm * c.bk / 8) % 32 == 0 && (c.bk * c.bn / 8) % 32 == 0;
  if (!valid)
    throw Error(fmt::format("invalid subgroup matmul configuration: {}", c.name()));
  const uint32_t TM = c.bm / c.sg_m / 16, TN = c.bn / c.sg_n / 16;
  // Workgroup tiles, rows padded by 8 halves (16 bytes) against bank
  // conflicts: A as [BM][BK] (or [BK][BM] when A is transposed in memory),
  // B as [BK][BN] (or [BN][BK] when transposed); a transposed tile is read
  // as a column-major subgroup matrix.
  const uint32_t A_ROWS = c.a_trans ? c.bk : c.bm, A_COLS = c.a_trans ? c.bm : c.bk;
  const uint32_t B_ROWS = c.b_trans ? c.bn : c.bk, B_COLS = c.b_trans ? c.bk : c.bn;
  const uint32_t AS = A_COLS + 8, BS = B_COLS + 8;
  const uint32_t SA_STAGE = A_ROWS * AS, SB_STAGE = B_ROWS * BS;
  // vec4 loads per thread for the A and B tiles (the last may be partial).
  const uint32_t NA = (c.bm * c.bk / 8 + T - 1) / T, NB = (c.bk * c.bn / 8 + T - 1) / T;
  const uint32_t TOTAL_A = c.bm * c.bk / 8, TOTAL_B = c.bk * c.bn / 8;

  std::string s;
  auto add = [&](const std::string& line) { s += line; s += '\n'; };
  add("enable f16;");
  add("enable chromium_experimental_subgroup_matrix;");
  add("diagnostic(off, chromium.subgroup_matrix_uniformity);");
  add("struct Params { M: u32, N: u32, K: u32, tiles_n: u32, a_batch: u32, b_batch: u32, c_batch: u32,");
  add("  bias_batch: u32, bias_sm: u32, bias_sn: u32, pad0: u32, pad1: u32, alpha: f32, beta: f32,");
  add("  lo: f32, hi: f32 }");
  const bool no_scratch = c.full_tiles;
  if (c.full_tiles && (c.bias || c.out_f16 || c.act)) throw Error("the full-tile variant has no bias, activation or float16 output");
  if (c.act > 4) throw Error(fmt::format("invalid subgroup matmul activation {}", c.act));
  add("@group(0) @binding(0) var<storage, read> A: array<vec4<u32>>;");
  add("@group(0) @binding(1) var<storage, read> B: array<vec4<u32>>;");
  add(fmt::format("@group(0) @binding(2) var<storage, read_write> C: array<{}>;", c.out_f16 ? "vec4<u32>" : "f32"));
  add("@group(0) @binding(3) var<uniform> P: Params;");
  if (c.bias) add(fmt::format("@group(0) @binding(4) var<storage, read> BIAS: array<{}>;", c.bias_f16 ? "f16" : "f32"));
  add(fmt::format("const BM = {}u; const BN = {}u; const BK = {}u; const AS = {}u; const BS = {}u;", c.bm, c.bn, c.bk,
                  AS, BS));
  add(fmt::format("var<workgroup> sa: array<f16, {}>;", c.stages * SA_STAGE));
  add(fmt::format("var<workgroup> sb: array<f16, {}>;", c.stages * SB_STAGE));
  if (!no_scratch) add(fmt::format("var<workgroup> sc: array<f32, {}>;", c.subgroups() * 256));

  // Eight halves packed in a vec4<u32> into workgroup memory at `i`, the
  // four words in an order rotated by `rot`. Scalar f16 stores of 16-byte
  // chunks all land on the same 8 of the 32 banks (4-way conflicts, the
  // bottleneck of the whole kernel when measured); rotating the word order
  // per thread spreads one store instruction over all banks.
  for (const char* arr : {"sa", "sb"}) {
    add(fmt::format("fn put_{}(i: u32, v: vec4<u32>, rot: u32) {{", arr));
    // r[w] = v[(w + rot) % 4] with selects (a dynamic vector index is slower).
    add("  let r1 = select(v, v.yzwx, (rot & 1u) != 0u);");
    add("  let r = select(r1, r1.zwxy, (rot & 2u) != 0u);");
    for (int w = 0; w < 4; ++w) {
      add(fmt::format("  {{ let o = i + 2u * (({0}u + rot) & 3u); let h = bitcast<vec2<f16>>(r[{0}]); {1}[o] = h.x; "
                      "{1}[o + 1u] = h.y; }}",
                      w, arr));
    }
    add("}");
  }

  if (c.act == 1) add(std::string(gpu::shader_source("ops/kernels/lib/erf.wgsl")));
  if (!no_scratch) {
  // The epilogue of one 16x16 result staged in `sc` at `sbase`: each lane
  // writes 8 consecutive columns of one row (N % 8 == 0: all in or all out).
  add("fn emit(r0: u32, c0: u32, sbase: u32, lane: u32, c_off: u32, bias_off: u32) {");
  add("  let r = r0 + lane / 2u; let col = c0 + (lane % 2u) * 8u;");
  add("  if (r >= P.M || col >= P.N) { return; }");
  add("  let s = sbase + (lane / 2u) * 16u + (lane % 2u) * 8u;");
  for (int q = 0; q < 8; ++q) {
    std::string v = fmt::format("sc[s + {}u] * P.alpha", q);
    if (c.bias) v += fmt::format(" + P.beta * f32(BIAS[bias_off + r * P.bias_sm + (col + {}u) * P.bias_sn])", q);
    if (c.act == 0) {
      add(fmt::format("  let v{} = {};", q, v));
    } else {
      add(fmt::format("  let y{} = {};", q, v));
      const char* f = c.act == 1   ? "  let v{0} = 0.5 * y{0} * (1.0 + erf1(y{0} * 0.70710678118654752));"
                      : c.act == 2 ? "  let v{0} = 0.5 * y{0} * (1.0 + tanh(clamp(0.7978845608028654 * (y{0} + "
                                     "0.044715 * y{0} * y{0} * y{0}), -15.0, 15.0)));"
                      : c.act == 3 ? "  let v{0} = max(y{0}, 0.0);"
                                   : "  let v{0} = clamp(y{0}, P.lo, P.hi);";
      add(fmt::format(fmt::runtime(f), q));
    }
  }
  if (c.out_f16) {
    add("  C[(c_off + r * P.N + col) / 8u] = vec4<u32>(pack2x16float(vec2<f32>(v0, v1)), "
        "pack2x16float(vec2<f32>(v2, v3)), pack2x16float(vec2<f32>(v4, v5)), pack2x16float(vec2<f32>(v6, v7)));");
  } else {
    for (int q = 0; q < 8; ++q) add(fmt::format("  C[c_off + r * P.N + col + {0}u] = v{0};", q));
  }
  add("}");
  }

  add(fmt::format("@compute @workgroup_size({})", T));
  add("fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {");
  add("  let sg = lid / 32u; let lane = lid % 32u;");
  add(fmt::format("  let wm = sg / {0}u; let wn = sg % {0}u;", c.sg_n));
  add("  let M = P.M; let N = P.N; let K = P.K;");
  add("  let m0 = wid.y * BM; let n0 = wid.x * BN; let bt = wid.z;");
  add("  let a_off = bt * P.a_batch; let b_off = bt * P.b_batch;");
  add("  let ktiles = (K + BK - 1u) / BK;");
  add(fmt::format("  let rot_a = {};", c.no_rotation ? "0u" : best_rotation(A_COLS, AS)));
  add(fmt::format("  let rot_b = {};", c.no_rotation ? "0u" : best_rotation(B_COLS, BS)));
  for (uint32_t i = 0; i < TM; ++i)
    for (uint32_t j = 0; j < TN; ++j) add(fmt::format("  var acc{}_{} = subgroup_matrix_result<f32, 16, 16>();", i, j));
  // Per-thread coordinates of its share of the A and B tiles.
  for (uint32_t q = 0; q < NA; ++q) {
    add(fmt::format("  let ar{0} = (lid + {1}u) / {2}u; let ac{0} = ((lid + {1}u) % {2}u) * 8u;", q, q * T, A_COLS / 8));
    add(fmt::format("  var ra{} = vec4<u32>();", q));
  }
  for (uint32_t q = 0; q < NB; ++q) {
    add(fmt::format("  let br{0} = (lid + {1}u) / {2}u; let bc{0} = ((lid + {1}u) % {2}u) * 8u;", q, q * T, B_COLS / 8));
    add(fmt::format("  var rb{} = vec4<u32>();", q));
  }
  auto load_regs = [&](const std::string& kt, const std::string& ind) {
    for (uint32_t q = 0; q < NA; ++q) {
      const std::string guard = (q + 1) * T > TOTAL_A ? fmt::format(" && ar{} < {}u", q, A_ROWS) : std::string();
      if (c.a_trans) {
        add(fmt::format("{0}{{ let gk = {2} * BK + ar{1}; let gm = m0 + ac{1}; ra{1} = vec4<u32>();", ind, q, kt));
        add(fmt::format("{0}  if (gm < M && gk < K{2}) {{ ra{1} = A[(a_off + gk * M + gm) / 8u]; }} }}", ind, q, guard));
      } else {
        add(fmt::format("{0}{{ let gm = m0 + ar{1}; let gk = {2} * BK + ac{1}; ra{1} = vec4<u32>();", ind, q, kt));
        add(fmt::format("{0}  if (gm < M && gk < K{2}) {{ ra{1} = A[(a_off + gm * K + gk) / 8u]; }} }}", ind, q, guard));
      }
    }
    for (uint32_t q = 0; q < NB; ++q) {
      const std::string guard = (q + 1) * T > TOTAL_B ? fmt::format(" && br{} < {}u", q, B_ROWS) : std::string();
      if (c.b_trans) {
        add(fmt::format("{0}{{ let gn = n0 + br{1}; let gk = {2} * BK + bc{1}; rb{1} = vec4<u32>();", ind, q, kt));
        add(fmt::format("{0}  if (gk < K && gn < N{2}) {{ rb{1} = B[(b_off + gn * K + gk) / 8u]; }} }}", ind, q, guard));
      } else {
        add(fmt::format("{0}{{ let gk = {2} * BK + br{1}; let gn = n0 + bc{1}; rb{1} = vec4<u32>();", ind, q, kt));
        add(fmt::format("{0}  if (gk < K && gn < N{2}) {{ rb{1} = B[(b_off + gk * N + gn) / 8u]; }} }}", ind, q, guard));
      }
    }
  };
  auto store_regs = [&](const std::string& buf, const std::string& ind) {
    for (uint32_t q = 0; q < NA; ++q)
      add(fmt::format("{0}{4}put_sa({1} * {2}u + ar{3} * AS + ac{3}, ra{3}, rot_a);{5}", ind, buf, SA_STAGE, q,
                      (q + 1) * T > TOTAL_A ? fmt::format("if (ar{} < {}u) {{ ", q, A_ROWS) : std::string(),
                      (q + 1) * T > TOTAL_A ? " }" : ""));
    for (uint32_t q = 0; q < NB; ++q)
      add(fmt::format("{0}{4}put_sb({1} * {2}u + br{3} * BS + bc{3}, rb{3}, rot_b);{5}", ind, buf, SB_STAGE, q,
                      (q + 1) * T > TOTAL_B ? fmt::format("if (br{} < {}u) {{ ", q, B_ROWS) : std::string(),
                      (q + 1) * T > TOTAL_B ? " }" : ""));
  };
  load_regs("0u", "  ");
  store_regs("0u", "  ");
  add("  workgroupBarrier();");
  if (c.ablate & 4) {
    if (c.a_trans || c.b_trans) throw Error("ablation 4 is for untransposed operands");
    for (uint32_t i = 0; i < TM; ++i)
      add(fmt::format("  let pl{} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&sa, wm * {}u + {}u, false, AS);", i,
                      TM * 16 * AS, i * 16 * AS));
    for (uint32_t j = 0; j < TN; ++j)
      add(fmt::format("  let pr{} = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&sb, wn * {}u + {}u, false, BS);", j,
                      TN * 16, j * 16));
  }
  add("  for (var kt = 0u; kt < ktiles; kt++) {");
  add(c.stages == 2 ? "    let cur = kt & 1u; let nxt = cur ^ 1u;" : "    let cur = 0u; let nxt = 0u;");
  add("    let more = kt + 1u < ktiles;");
  add("    if (more) {");
  if (!(c.ablate & 1)) load_regs("(kt + 1u)", "      ");
  add("    }");
  // Offsets of result row block i / column block j at depth step ks.
  auto a_frag = [&](uint32_t i, uint32_t ks) {
    return c.a_trans ? fmt::format("abase + {}u, true", ks * 16 * AS + i * 16)
                     : fmt::format("abase + {}u, false", i * 16 * AS + ks * 16);
  };
  auto b_frag = [&](uint32_t j, uint32_t ks) {
    return c.b_trans ? fmt::format("bbase + {}u, true", j * 16 * BS + ks * 16)
                     : fmt::format("bbase + {}u, false", ks * 16 * BS + j * 16);
  };
  add(fmt::format("    let abase = cur * {}u + wm * {}u;", SA_STAGE, c.a_trans ? TM * 16 : TM * 16 * AS));
  add(fmt::format("    let bbase = cur * {}u + wn * {}u;", SB_STAGE, c.b_trans ? TN * 16 * BS : TN * 16));
  for (uint32_t ks = 0; ks < c.bk / 16; ++ks) {
    add("    {");
    for (uint32_t i = 0; i < TM; ++i)
      add(fmt::format(fmt::runtime((c.ablate & 4) ? "      let l{0} = pl{0};" : "      let l{} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&sa, {}, AS);"),
                      i, a_frag(i, ks)));
    for (uint32_t j = 0; j < TN; ++j)
      add(fmt::format(fmt::runtime((c.ablate & 4) ? "      let r{0} = pr{0};" : "      let r{} = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&sb, {}, BS);"),
                      j, b_frag(j, ks)));
    for (uint32_t i = 0; i < TM; ++i)
      for (uint32_t j = 0; j < TN; ++j)
        add(fmt::format("      acc{0}_{1} = subgroupMatrixMultiplyAccumulate(l{0}, r{1}, acc{0}_{1});", i, j));
    add("    }");
  }
  if (c.stages == 1) add("    workgroupBarrier();");
  add("    if (more) {");
  if (!(c.ablate & 2)) store_regs("nxt", "      ");
  add("    }");
  add("    workgroupBarrier();");
  add("  }");

  add("  let c_off = bt * P.c_batch; let bias_off = bt * P.bias_batch;");
  add(fmt::format("  let wm0 = m0 + wm * {}u; let wn0 = n0 + wn * {}u;", TM * 16, TN * 16));
  const bool direct = !c.out_f16 && !c.bias && c.act == 0;
  if (no_scratch) {  // full tiles only
    for (uint32_t i = 0; i < TM; ++i)
      for (uint32_t j = 0; j < TN; ++j)
        add(fmt::format("  subgroupMatrixStore(&C, c_off + (wm0 + {}u) * N + wn0 + {}u, acc{}_{}, false, N);", i * 16,
                        j * 16, i, j));
    add("}");
    return s;
  }
  if (direct) {
    add("  if (P.alpha == 1.0 && m0 + BM <= M && n0 + BN <= N) {");
    for (uint32_t i = 0; i < TM; ++i)
      for (uint32_t j = 0; j < TN; ++j)
        add(fmt::format("    subgroupMatrixStore(&C, c_off + (wm0 + {}u) * N + wn0 + {}u, acc{}_{}, false, N);", i * 16,
                        j * 16, i, j));
    add("    return;");
    add("  }");
  }
  for (uint32_t i = 0; i < TM; ++i)
    for (uint32_t j = 0; j < TN; ++j) {
      add("  workgroupBarrier();");
      add(fmt::format("  subgroupMatrixStore(&sc, sg * 256u, acc{}_{}, false, 16u);", i, j));
      add("  workgroupBarrier();");
      add(fmt::format("  emit(wm0 + {}u, wn0 + {}u, sg * 256u, lane, c_off, bias_off);", i * 16, j * 16));
    }
  add("}");
  return s;
}

SubgroupMatmulConfig parse_subgroup_matmul_config(const std::string& text) {
  SubgroupMatmulConfig c;
  char mode = 0;
  const int n =
      std::sscanf(text.c_str(), "%ux%ux%u:%ux%u:%u:%c", &c.bm, &c.bn, &c.bk, &c.sg_m, &c.sg_n, &c.stages, &mode);
  if (n < 6 || (n == 7 && mode != 'f' && mode != 'v')) {
    throw Error(fmt::format("bad subgroup matmul configuration '{}' (expected "
                            "BMxBNxBK:SGMxSGN:STAGES[:v|:f][/tN][/r][/aN], e.g. 256x128x32:4x4:1)",
                            text));
  }
  c.full_tiles = mode == 'f';
  auto number_after = [&](const char* key) -> std::optional<uint32_t> {
    const auto at = text.find(key);
    if (at == std::string::npos) return std::nullopt;
    return uint32_t(std::strtoul(text.c_str() + at + 2, nullptr, 10));
  };
  c.ablate = number_after("/a").value_or(0);
  c.no_rotation = text.find("/r") != std::string::npos;
  const uint32_t t = number_after("/t").value_or(0);  // 1: A stored transposed, 2: B, 3: both
  c.a_trans = t & 1;
  c.b_trans = t & 2;
  subgroup_matmul_wgsl(c);  // validates
  return c;
}

bool subgroup_matmul_supported(const gpu::Context& ctx, const SubgroupMatmulConfig& cfg) {
  const auto& f = ctx.features();
  if (!f.subgroup_matrix || !f.shader_f16) return false;
  if (ctx.adapter().subgroup_min_size != 32 || ctx.adapter().subgroup_max_size != 32) return false;
  bool config = false;
  for (const auto& m : f.subgroup_matrix_configs)
    if (m.component == "f16" && m.result == "f32" && m.m == 16 && m.n == 16 && m.k == 16) config = true;
  return config && cfg.workgroup_bytes() <= ctx.limits().max_compute_workgroup_storage_size &&
         cfg.threads() <= ctx.limits().max_compute_invocations_per_workgroup;
}

bool record_subgroup_gemm(Graph& g, const SubgroupGemm& p, std::string_view op, std::string_view what) {
  for (TensorRef t : {p.a, p.b, p.out})
    if (g.info(t).dtype != DType::F16) return false;
  if (p.bias.id >= 0 && g.info(p.bias).dtype != DType::F16) return false;
  if (const char* env = std::getenv("WGNN_SUBGROUP_MATMUL"); env && std::string_view(env) == "0") return false;
  if (p.N % 8 != 0 || (p.a_trans ? p.M : p.K) % 8 != 0 || (p.b_trans && p.K % 8 != 0)) return false;
  if (p.a_batch % 8 != 0 || p.b_batch % 8 != 0) return false;
  SubgroupMatmulConfig cfg;
  // 128x128 tiles on 4 subgroups (64x64 each, one stage, 23 KB of
  // workgroup memory: several workgroups share a multiprocessor) for big
  // products, where they beat 256x128 on 16 subgroups (H200: 187 vs 172
  // TFLOP/s at 4096^3, docs/BENCHMARKS.md); the models' smaller products
  // ran faster on 64x64 tiles.
  const int64_t big_tiles =
      int64_t(gpu::ceil_div(uint64_t(p.M), 128) * gpu::ceil_div(uint64_t(p.N), 128)) * p.batch;
  if (big_tiles >= 256) {
    cfg.bm = 128, cfg.bn = 128, cfg.bk = 32, cfg.sg_m = 2, cfg.sg_n = 2, cfg.stages = 1;
  } else {
    cfg.bm = 64, cfg.bn = 64, cfg.bk = 32, cfg.sg_m = 2, cfg.sg_n = 2, cfg.stages = 2;
  }
  // WGNN_SUBGROUP_MATMUL_CONFIG (e.g. 128x128x32:2x4:2) picks the tiles
  // for every product, for tuning and for testing each configuration.
  if (const char* env = std::getenv("WGNN_SUBGROUP_MATMUL_CONFIG"); env && *env) {
    cfg = parse_subgroup_matmul_config(env);
    if (cfg.full_tiles || cfg.ablate || cfg.a_trans || cfg.b_trans) {
      throw Error(fmt::format("WGNN_SUBGROUP_MATMUL_CONFIG='{}': give tiles, subgroups and stages only", env));
    }
  }
  cfg.a_trans = p.a_trans;
  cfg.b_trans = p.b_trans;
  cfg.out_f16 = true;
  cfg.bias = p.bias.id >= 0;
  cfg.bias_f16 = true;
  cfg.act = uint32_t(p.act);
  if (!subgroup_matmul_supported(g.ctx(), cfg)) return false;
  const uint64_t tiles_m = gpu::ceil_div(uint64_t(p.M), cfg.bm), tiles_n = gpu::ceil_div(uint64_t(p.N), cfg.bn);
  const uint64_t max_dim = g.ctx().limits().max_compute_workgroups_per_dimension;
  if (tiles_m > max_dim || tiles_n > max_dim || uint64_t(p.batch) > max_dim) return false;
  SubgroupMatmulParams params{};
  params.M = uint32_t(p.M);
  params.N = uint32_t(p.N);
  params.K = uint32_t(p.K);
  params.tiles_n = uint32_t(tiles_n);
  params.a_batch = uint32_t(p.a_batch);
  params.b_batch = uint32_t(p.b_batch);
  params.c_batch = uint32_t(p.M * p.N);
  params.bias_batch = uint32_t(p.bias_batch);
  params.bias_sm = uint32_t(p.bias_sm);
  params.bias_sn = uint32_t(p.bias_sn);
  params.alpha = float(p.alpha);
  params.beta = float(p.beta);
  params.lo = float(p.lo);
  params.hi = float(p.hi);
  const gpu::Pipeline& pl = g.ctx().pipeline(cfg.name(), subgroup_matmul_wgsl(cfg));
  std::vector<Binding> bindings{Binding::of(p.a), Binding::of(p.b), Binding::of(p.out), Binding::of(g.uniform(params))};
  if (cfg.bias) bindings.push_back(Binding::of(p.bias));
  g.add_dispatch(pl, std::move(bindings), gpu::Grid{uint32_t(tiles_n), uint32_t(tiles_m), uint32_t(p.batch)},
                 std::string(op),
                 fmt::format("{} subgroup-matrix {}x{}x{}{}{}{}{}", what, p.M, p.N, p.K,
                             p.batch > 1 ? fmt::format(" batch {}", p.batch) : "", p.a_trans ? " At" : "",
                             p.b_trans ? " Bt" : "", cfg.bias ? " bias" : "") +
                     (p.act == 1 ? " gelu" : p.act == 2 ? " gelu-tanh" : p.act == 3 ? " relu" : p.act == 4 ? " clamp" : ""),
                 2.0 * double(p.M) * double(p.N) * double(p.K) * double(p.batch));
  return true;
}

}  // namespace wgnn::ops

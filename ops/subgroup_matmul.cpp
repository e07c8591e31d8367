// WGSL generation for the subgroup-matrix (tensor-core) matrix product; see
// subgroup_matmul.h. The kernel is unrolled at generation time: every result
// matrix is its own variable and every load names its offset, so no array of
// subgroup matrices is indexed at run time (which would spill them).
//
// Uniformity: subgroupMatrixLoad/Store need subgroup-uniform offsets. Each
// subgroup works on its own sub-block, so the offsets depend on the subgroup
// index (local_invocation_index / 32), which WGSL's uniformity analysis
// cannot see is subgroup-uniform; the kernel turns the
// chromium_experimental.subgroup_matrix_uniformity diagnostic off and is only
// chosen where subgroups are exactly 32 invocations (subgroup_matmul_supported),
// so invocations 32s..32s+31 are subgroup s (Dawn requires full subgroups for
// shaders using subgroup matrices).
#include "ops/subgroup_matmul.h"

#include <fmt/format.h>

#include "gpu/context.h"
#include "gpu/error.h"

namespace wgnn::ops {

uint32_t SubgroupMatmulConfig::workgroup_bytes() const {
  const uint32_t as = bk + 8, bs = bn + 8;
  return stages * bm * as * 2 + stages * bk * bs * 2 + subgroups() * 256 * 4;
}

std::string SubgroupMatmulConfig::name() const {
  return fmt::format("subgroup matmul {}x{}x{} sg{}x{} s{}{}{}", bm, bn, bk, sg_m, sg_n, stages,
                     out_f16 ? " f16out" : "", bias ? " bias" : "");
}

std::string subgroup_matmul_wgsl(const SubgroupMatmulConfig& c) {
  const uint32_t T = c.threads();
  const bool valid = c.sg_m > 0 && c.sg_n > 0 && c.bm % (c.sg_m * 16) == 0 && c.bn % (c.sg_n * 16) == 0 &&
                     c.bk % 16 == 0 && c.bk > 0 && (c.stages == 1 || c.stages == 2) &&
                     (c.bm * c.bk / 8) % T == 0 && (c.bk * c.bn / 8) % T == 0;
  if (!valid) throw Error(fmt::format("invalid subgroup matmul configuration: {}", c.name()));
  const uint32_t TM = c.bm / c.sg_m / 16, TN = c.bn / c.sg_n / 16;
  const uint32_t AS = c.bk + 8, BS = c.bn + 8;  // padded row strides (halves): no bank conflicts
  const uint32_t NA = c.bm * c.bk / 8 / T, NB = c.bk * c.bn / 8 / T;

  std::string s;
  auto add = [&](const std::string& line) { s += line; s += '\n'; };
  add("enable f16;");
  add("enable chromium_experimental_subgroup_matrix;");
  add("diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);");
  add("struct Params { M: u32, N: u32, K: u32, tiles_n: u32, a_batch: u32, b_batch: u32, c_batch: u32,");
  add("  bias_batch: u32, bias_sm: u32, bias_sn: u32, pad0: u32, pad1: u32, alpha: f32, beta: f32,");
  add("  pad2: f32, pad3: f32 }");
  add("@group(0) @binding(0) var<storage, read> A: array<vec4<u32>>;");
  add("@group(0) @binding(1) var<storage, read> B: array<vec4<u32>>;");
  add(fmt::format("@group(0) @binding(2) var<storage, read_write> C: array<{}>;", c.out_f16 ? "vec4<u32>" : "f32"));
  add("@group(0) @binding(3) var<uniform> P: Params;");
  if (c.bias) add(fmt::format("@group(0) @binding(4) var<storage, read> BIAS: array<{}>;", c.bias_f16 ? "f16" : "f32"));
  add(fmt::format("const BM = {}u; const BN = {}u; const BK = {}u; const AS = {}u; const BS = {}u;", c.bm, c.bn, c.bk,
                  AS, BS));
  add(fmt::format("var<workgroup> sa: array<f16, {}>;", c.stages * c.bm * AS));
  add(fmt::format("var<workgroup> sb: array<f16, {}>;", c.stages * c.bk * BS));
  add(fmt::format("var<workgroup> sc: array<f32, {}>;", c.subgroups() * 256));

  // Eight halves packed in a vec4<u32> into workgroup memory at `i`.
  for (const char* arr : {"sa", "sb"}) {
    add(fmt::format("fn put_{}(i: u32, v: vec4<u32>) {{", arr));
    for (int w = 0; w < 4; ++w) {
      add(fmt::format("  let h{0} = bitcast<vec2<f16>>(v[{0}]); {1}[i + {2}u] = h{0}.x; {1}[i + {3}u] = h{0}.y;", w,
                      arr, 2 * w, 2 * w + 1));
    }
    add("}");
  }

  // The epilogue of one 16x16 result staged in `sc` at `sbase`: each lane
  // writes 8 consecutive columns of one row (N % 8 == 0: all in or all out).
  add("fn emit(r0: u32, c0: u32, sbase: u32, lane: u32, c_off: u32, bias_off: u32) {");
  add("  let r = r0 + lane / 2u; let col = c0 + (lane % 2u) * 8u;");
  add("  if (r >= P.M || col >= P.N) { return; }");
  add("  let s = sbase + (lane / 2u) * 16u + (lane % 2u) * 8u;");
  for (int q = 0; q < 8; ++q) {
    std::string v = fmt::format("sc[s + {}u] * P.alpha", q);
    if (c.bias) v += fmt::format(" + P.beta * f32(BIAS[bias_off + r * P.bias_sm + (col + {}u) * P.bias_sn])", q);
    add(fmt::format("  let v{} = {};", q, v));
  }
  if (c.out_f16) {
    add("  C[(c_off + r * P.N + col) / 8u] = vec4<u32>(pack2x16float(vec2<f32>(v0, v1)), "
        "pack2x16float(vec2<f32>(v2, v3)), pack2x16float(vec2<f32>(v4, v5)), pack2x16float(vec2<f32>(v6, v7)));");
  } else {
    for (int q = 0; q < 8; ++q) add(fmt::format("  C[c_off + r * P.N + col + {0}u] = v{0};", q));
  }
  add("}");

  add(fmt::format("@compute @workgroup_size({})", T));
  add("fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {");
  add("  let sg = lid / 32u; let lane = lid % 32u;");
  add(fmt::format("  let wm = sg / {0}u; let wn = sg % {0}u;", c.sg_n));
  add("  let M = P.M; let N = P.N; let K = P.K;");
  add("  let m0 = wid.y * BM; let n0 = wid.x * BN; let bt = wid.z;");
  add("  let a_off = bt * P.a_batch; let b_off = bt * P.b_batch;");
  add("  let ktiles = (K + BK - 1u) / BK;");
  for (uint32_t i = 0; i < TM; ++i)
    for (uint32_t j = 0; j < TN; ++j) add(fmt::format("  var acc{}_{} = subgroup_matrix_result<f32, 16, 16>();", i, j));
  // Per-thread coordinates of its share of the A and B tiles.
  for (uint32_t q = 0; q < NA; ++q) {
    add(fmt::format("  let ar{0} = (lid + {1}u) / {2}u; let ac{0} = ((lid + {1}u) % {2}u) * 8u;", q, q * T, c.bk / 8));
    add(fmt::format("  var ra{} = vec4<u32>();", q));
  }
  for (uint32_t q = 0; q < NB; ++q) {
    add(fmt::format("  let br{0} = (lid + {1}u) / {2}u; let bc{0} = ((lid + {1}u) % {2}u) * 8u;", q, q * T, c.bn / 8));
    add(fmt::format("  var rb{} = vec4<u32>();", q));
  }
  auto load_regs = [&](const std::string& kt, const std::string& ind) {
    for (uint32_t q = 0; q < NA; ++q) {
      add(fmt::format("{0}{{ let gm = m0 + ar{1}; let gk = {2} * BK + ac{1}; ra{1} = vec4<u32>();", ind, q, kt));
      add(fmt::format("{0}  if (gm < M && gk < K) {{ ra{1} = A[(a_off + gm * K + gk) / 8u]; }} }}", ind, q));
    }
    for (uint32_t q = 0; q < NB; ++q) {
      add(fmt::format("{0}{{ let gk = {2} * BK + br{1}; let gn = n0 + bc{1}; rb{1} = vec4<u32>();", ind, q, kt));
      add(fmt::format("{0}  if (gk < K && gn < N) {{ rb{1} = B[(b_off + gk * N + gn) / 8u]; }} }}", ind, q));
    }
  };
  auto store_regs = [&](const std::string& buf, const std::string& ind) {
    for (uint32_t q = 0; q < NA; ++q)
      add(fmt::format("{0}put_sa({1} * {2}u + ar{3} * AS + ac{3}, ra{3});", ind, buf, c.bm * AS, q));
    for (uint32_t q = 0; q < NB; ++q)
      add(fmt::format("{0}put_sb({1} * {2}u + br{3} * BS + bc{3}, rb{3});", ind, buf, c.bk * BS, q));
  };
  load_regs("0u", "  ");
  store_regs("0u", "  ");
  add("  workgroupBarrier();");
  add("  for (var kt = 0u; kt < ktiles; kt++) {");
  add(c.stages == 2 ? "    let cur = kt & 1u; let nxt = cur ^ 1u;" : "    let cur = 0u; let nxt = 0u;");
  add("    let more = kt + 1u < ktiles;");
  add("    if (more) {");
  load_regs("(kt + 1u)", "      ");
  add("    }");
  add(fmt::format("    let abase = cur * {}u + wm * {}u;", c.bm * AS, TM * 16 * AS));
  add(fmt::format("    let bbase = cur * {}u + wn * {}u;", c.bk * BS, TN * 16));
  for (uint32_t ks = 0; ks < c.bk / 16; ++ks) {
    add("    {");
    for (uint32_t i = 0; i < TM; ++i)
      add(fmt::format("      let l{} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&sa, abase + {}u, false, AS);",
                      i, i * 16 * AS + ks * 16));
    for (uint32_t j = 0; j < TN; ++j)
      add(fmt::format("      let r{} = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&sb, bbase + {}u, false, BS);",
                      j, ks * 16 * BS + j * 16));
    for (uint32_t i = 0; i < TM; ++i)
      for (uint32_t j = 0; j < TN; ++j)
        add(fmt::format("      acc{0}_{1} = subgroupMatrixMultiplyAccumulate(l{0}, r{1}, acc{0}_{1});", i, j));
    add("    }");
  }
  if (c.stages == 1) add("    workgroupBarrier();");
  add("    if (more) {");
  store_regs("nxt", "      ");
  add("    }");
  add("    workgroupBarrier();");
  add("  }");

  add("  let c_off = bt * P.c_batch; let bias_off = bt * P.bias_batch;");
  add(fmt::format("  let wm0 = m0 + wm * {}u; let wn0 = n0 + wn * {}u;", TM * 16, TN * 16));
  const bool direct = !c.out_f16 && !c.bias;
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

}  // namespace wgnn::ops

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
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

#include "gpu/context.h"
#include "gpu/error.h"
#include "gpu/shaders.h"
#include "ops/helpers.h"

namespace wgnn::ops {

std::string round_f16_wgsl() { return std::string(gpu::shader_source("ops/kernels/lib/f16.wgsl")); }


uint32_t SubgroupMatmulConfig::workgroup_bytes() const {
  const uint32_t as = (a_trans ? bm : bk) + 8, bs = (b_trans ? bk : bn) + 8;
  const uint32_t a_rows = a_trans ? bk : bm, b_rows = b_trans ? bn : bk;
  const uint32_t scratch = full_tiles ? 0 : subgroups() * 256 * 4;
  return pad_kb * 1024 + stages * a_rows * as * 2 + stages * b_rows * bs * 2 + scratch;
}

std::string SubgroupMatmulConfig::name() const {
  return fmt::format("subgroup matmul {}x{}x{} sg{}x{} s{}{}{}{}{}", bm, bn, bk, sg_m, sg_n, stages,
                     prefetch == 2 ? " d2" : "", out_f16 ? " f16out" : "", bias ? " bias" : "", full_tiles ? " full" : "") + (affine ? affine_rounded ? " affine-rounded" : " affine" : "") + (a_trans ? " At" : "") + (b_trans ? " Bt" : "") +
         activation_label(act) + (ablate ? fmt::format(" ablate{}", ablate) : "") +
         (conv ? " conv" : "") + (residual ? residual_first ? " residual-first" : " residual" : "") + (odd_n ? " oddN" : "") + (splitk ? " splitk" : "") + (checked_loads ? " checked" : "") + (word_loads ? " words" : "") + (vec4_tiles ? " vec4tiles" : "") + (pad_kb ? fmt::format(" pad{}", pad_kb) : "") +
         (emulate ? " emulated" : "");
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
                     (c.bm * c.bk / 8) % 32 == 0 && (c.bk * c.bn / 8) % 32 == 0 &&
                     (c.prefetch == 1 || c.prefetch == 2);
  if (!valid)
    throw Error(fmt::format("invalid subgroup matmul configuration: {}", c.name()));
  // Convolution mode: thread t stages columns of the B tile, the same ones
  // for the whole kernel, and rows r0, r0 + RS, r0 + 2 RS, ... of each tile.
  // Threads covering whole rows (T % BN == 0): column t % BN, r0 = t / BN,
  // RS = T / BN; wider tiles (BN % T == 0): columns t, t + T, ..., every row.
  const uint32_t RS = c.bn <= T ? T / c.bn : 1, NCOL = c.bn <= T ? 1 : c.bn / T, JR = c.bk / RS;
  if (c.conv) {
    if (!((T % c.bn == 0 && c.bk % (T / c.bn) == 0) || c.bn % T == 0))
      throw Error(fmt::format("subgroup matmul configuration {}: the convolution mode needs the {} threads to cover whole "
                              "rows of the {}x{} B tile, or BN to be a multiple of the threads",
                              c.name(), T, c.bk, c.bn));
    if (c.a_trans || c.b_trans || c.full_tiles || c.ablate)
      throw Error(fmt::format("subgroup matmul configuration {}: the convolution mode takes no transposed operands, full "
                              "tiles or ablations", c.name()));
  }
  if (c.emulate && c.ablate) throw Error("the emulated kernel takes no ablations");
  if (c.vec4_tiles && (c.conv || c.word_loads))
    throw Error(fmt::format("subgroup matmul configuration {}: vec4 tiles are for products whose chunks are loaded whole "
                            "(no convolution gather, no word loads)", c.name()));
  if (c.word_loads && (c.conv || c.no_rotation))
    throw Error(fmt::format("subgroup matmul configuration {}: word loads are for products with rotated stores",
                            c.name()));
  if (c.residual && (!c.out_f16 || c.full_tiles))
    throw Error(fmt::format("subgroup matmul configuration {}: a residual needs float16 results", c.name()));
  if (c.residual_first && !c.residual)
    throw Error(fmt::format("subgroup matmul configuration {}: the residual before the activation needs a residual",
                            c.name()));
  if (c.odd_n && (!c.conv || !(c.out_f16 || c.splitk)))
    throw Error(fmt::format("subgroup matmul configuration {}: scalar float16 results are for the convolution mode",
                            c.name()));
  if (c.splitk && (c.out_f16 || c.bias || c.affine || c.act != Activation::None || c.full_tiles))
    throw Error(fmt::format("subgroup matmul configuration {}: split-K writes plain float32 sums (no float16 "
                            "output, bias, affine, activation or full-tile variant)", c.name()));
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
  // The mark gpu::Pipeline::tensor_cores() reads (the emulation's too: a
  // tiered plan waits for either alike).
  add("// wgnn: tensor-core kernel");
  if (!c.emulate) {
    add("enable chromium_experimental_subgroup_matrix;");
    add("diagnostic(off, chromium.subgroup_matrix_uniformity);");
  }
  add(c.conv ? SubgroupConvParams::wgsl() : SubgroupMatmulParams::wgsl());
  const bool no_scratch = c.full_tiles;
  if (c.full_tiles && (c.bias || c.out_f16 || c.act != Activation::None || c.affine)) throw Error("the full-tile variant has no bias, activation or float16 output");
  if (uint32_t(c.act) > uint32_t(Activation::Silu)) throw Error(fmt::format("invalid subgroup matmul activation {}", uint32_t(c.act)));
  // Word loads (/w): the operands bound as words, each 16-byte chunk
  // loaded as four words in the thread's rotated order (below).
  const char* op_type = c.word_loads ? "array<u32>" : "array<vec4<u32>>";
  add(fmt::format("@group(0) @binding(0) var<storage, read> A: {};", op_type));
  add(c.conv ? "@group(0) @binding(1) var<storage, read> X: array<f16>;"
             : fmt::format("@group(0) @binding(1) var<storage, read> B: {};", op_type));
  add(fmt::format("@group(0) @binding(2) var<storage, read_write> C: array<{}>;", c.out_f16 ? c.odd_n ? "f16" : "vec4<u32>" : "f32"));
  add("@group(0) @binding(3) var<uniform> P: Params;");
  if (c.bias) add(fmt::format("@group(0) @binding(4) var<storage, read> BIAS: array<{}>;", c.bias_f16 ? "f16" : "f32"));
  if (c.affine) add(fmt::format("@group(0) @binding({}) var<storage, read> AFF: array<f32>;", c.bias ? 5 : 4));
  // The residual as 8 halves at once; as halves with odd_n (rows not a
  // multiple of 8 long: each column checked, like the stores).
  if (c.residual)
    add(fmt::format("@group(0) @binding({}) var<storage, read> RES: array<{}>;", 4 + int(c.bias) + int(c.affine),
                    c.odd_n ? "f16" : "vec4<u32>"));
  add(fmt::format("const BM = {}u; const BN = {}u; const BK = {}u; const AS = {}u; const BS = {}u;", c.bm, c.bn, c.bk,
                  AS, BS));
  // Tiles of halves, or (/v) of 16-byte vectors, written whole (a Dawn
  // whose Tint takes f16 subgroup-matrix loads from vec4<u32> workgroup
  // arrays: docs/BENCHMARKS.md).
  if (c.vec4_tiles) {
    add(fmt::format("var<workgroup> sa: array<vec4<u32>, {}>;", c.stages * SA_STAGE / 8));
    add(fmt::format("var<workgroup> sb: array<vec4<u32>, {}>;", c.stages * SB_STAGE / 8));
  } else {
    add(fmt::format("var<workgroup> sa: array<f16, {}>;", c.stages * SA_STAGE));
    add(fmt::format("var<workgroup> sb: array<f16, {}>;", c.stages * SB_STAGE));
  }
  if (!no_scratch) add(fmt::format("var<workgroup> sc: array<f32, {}>;", c.subgroups() * 256));
  if (c.pad_kb) add(fmt::format("var<workgroup> pad_mem: array<f32, {}>;", c.pad_kb * 256));

  // Eight halves packed in a vec4<u32> into workgroup memory at `i`, the
  // four words in an order rotated by `rot`. Scalar f16 stores of 16-byte
  // chunks all land on the same 8 of the 32 banks (4-way conflicts, the
  // bottleneck of the whole kernel when measured); rotating the word order
  // per thread spreads one store instruction over all banks.
  for (const char* arr : {"sa", "sb"}) {
    if (c.conv && std::string_view(arr) == "sb") continue;  // B is gathered in scalars
    add(fmt::format("fn put_{}(i: u32, v: vec4<u32>, rot: u32) {{", arr));
    if (c.vec4_tiles) {  // one 16-byte store, in order
      add(fmt::format("  {}[i / 8u] = v;", arr));
      add("}");
      continue;
    }
    // r[w] = v[(w + rot) % 4] with selects (a dynamic vector index is
    // slower); word loads (/w) arrive in that order.
    if (c.word_loads) {
      add("  let r = v;");
    } else {
      add("  let r1 = select(v, v.yzwx, (rot & 1u) != 0u);");
      add("  let r = select(r1, r1.zwxy, (rot & 2u) != 0u);");
    }
    // (Ablation 64: the first two words only, half the stores.)
    for (int w = 0; w < ((c.ablate & 64) ? 2 : 4); ++w) {
      add(fmt::format("  {{ let o = i + 2u * (({0}u + rot) & 3u); let h = bitcast<vec2<f16>>(r[{0}]); {1}[o] = h.x; "
                      "{1}[o + 1u] = h.y; }}",
                      w, arr));
    }
    add("}");
  }

  if (c.emulate) {
    // Element i of a tile (halves), from either layout.
    for (const char* arr : {"sa", "sb"}) {
      add(fmt::format("fn at_{}(i: u32) -> f32 {{", arr));
      if (c.vec4_tiles) {
        add(fmt::format("  let h = unpack2x16float({}[i / 8u][(i / 2u) % 4u]);", arr));
        add("  return select(h.x, h.y, (i & 1u) != 0u);");
      } else {
        add(fmt::format("  return f32({}[i]);", arr));
      }
      add("}");
    }
    // A 16x16 subgroup matrix as a lane sees it here: a left / right
    // operand is its offset in sa / sb (read where it is multiplied, before
    // the next barrier, so the same values), a result is the lane's 8
    // elements (row lane / 2, columns (lane % 2) * 8 + 0..7) as the columns
    // of a mat2x4. The loop's bound is 16 + P.pad0 (0): a bound the shader
    // compiler cannot unroll keeps lavapipe's compile time down (the
    // unrolled 128x128 kernel took minutes).
    add("fn emu_mac(acc: mat2x4<f32>, l: u32, r: u32, lane: u32) -> mat2x4<f32> {");
    add("  var o = acc; let row = lane / 2u; let c0 = (lane % 2u) * 8u;");
    add("  for (var k = 0u; k < 16u + P.pad0; k++) {");
    add(fmt::format("    let a = at_sa(l + {});", c.a_trans ? "k * AS + row" : "row * AS + k"));
    auto b_at = [&](uint32_t e) {
      return c.b_trans ? fmt::format("at_sb(r + (c0 + {}u) * BS + k)", e) : fmt::format("at_sb(r + k * BS + c0 + {}u)", e);
    };
    for (uint32_t h = 0; h < 2; ++h)
      add(fmt::format("    o[{}] += a * vec4<f32>({}, {}, {}, {});", h, b_at(4 * h), b_at(4 * h + 1), b_at(4 * h + 2),
                      b_at(4 * h + 3)));
    add("  }");
    add("  return o;");
    add("}");
    std::vector<std::string> dsts;
    if (!no_scratch) dsts.push_back("sc");
    if (!c.out_f16) dsts.push_back("C");
    for (const std::string& dst : dsts) {
      add(fmt::format("fn emu_store_{}(base: u32, v: mat2x4<f32>, lane: u32, stride: u32) {{", dst));
      add("  let o = base + (lane / 2u) * stride + (lane % 2u) * 8u;");
      for (uint32_t e = 0; e < 8; ++e) add(fmt::format("  {}[o + {}u] = v[{}][{}];", dst, e, e / 4, e % 4));
      add("}");
    }
  }
  // A result matrix stored (column-major: never) at `off` of `dst` with a row stride.
  auto store_mat = [&](const std::string& ind, const std::string& dst, const std::string& off, const std::string& acc,
                       const std::string& stride) {
    if (c.emulate)
      add(fmt::format("{}emu_store_{}({}, {}, lane, {});", ind, dst, off, acc, stride));
    else
      add(fmt::format("{}subgroupMatrixStore(&{}, {}, {}, false, {});", ind, dst, off, acc, stride));
  };

  if (c.act != Activation::None) {
    add(std::string(gpu::shader_source("ops/kernels/lib/math.wgsl")));
    add(std::string(gpu::shader_source("ops/kernels/lib/activation.wgsl")));
  }
  if ((c.affine && c.affine_rounded) || c.residual_first) add(round_f16_wgsl());
  if (!no_scratch) {
  // The epilogue of one 16x16 result staged in `sc` at `sbase`: each lane
  // writes 8 consecutive columns of one row (N % 8 == 0: all in or all out;
  // odd_n: each checked).
  add("fn emit(r0: u32, c0: u32, sbase: u32, lane: u32, c_off: u32, bias_off: u32) {");
  add("  let r = r0 + lane / 2u; let col = c0 + (lane % 2u) * 8u;");
  add("  if (r >= P.M || col >= P.N) { return; }");
  add("  let s = sbase + (lane / 2u) * 16u + (lane % 2u) * 8u;");
  if (c.affine) add("  let a_scale = AFF[r]; let a_shift = AFF[P.M + r];");
  auto pre_activation = [&](const std::string& q) {
    std::string v = fmt::format("sc[s + {}] * P.alpha", q);
    if (c.bias) v += fmt::format(" + P.beta * f32(BIAS[bias_off + r * P.bias_sm + (col + {}) * P.bias_sn])", q);
    if (c.affine) v = (c.affine_rounded ? "round_f16(" + v + ")" : "(" + v + ")") + " * a_scale + a_shift";
    return v;
  };
  auto read_residual = [&] {
    if (c.odd_n) {
      add("  let ro = c_off + r * P.N + col;");
      add("  var rs = array<f32, 8>();");
      add("  for (var q = 0u; q < 8u; q++) { if (col + q < P.N) { rs[q] = f32(RES[ro + q]); } }");
      add("  let rh = array<vec2<f32>, 4>(vec2<f32>(rs[0], rs[1]), vec2<f32>(rs[2], rs[3]), vec2<f32>(rs[4], rs[5]), "
          "vec2<f32>(rs[6], rs[7]));");
      return;
    }
    add("  let rv = RES[(c_off + r * P.N + col) / 8u];");
    add("  let rh = array<vec2<f32>, 4>(unpack2x16float(rv.x), unpack2x16float(rv.y), unpack2x16float(rv.z), "
        "unpack2x16float(rv.w));");
  };
  if (c.residual_first) read_residual();
  for (int q = 0; q < 8; ++q) {
    std::string v = pre_activation(fmt::format("{}u", q));
    // Before the activation: the value rounded to float16 as a separate
    // convolution's result would be, then the residual (8 halves at once).
    if (c.residual_first) v = fmt::format("round_f16({}) + rh[{}].{}", v, q / 2, q % 2 ? "y" : "x");
    if (c.act == Activation::None) {
      add(fmt::format("  let v{} = {};", q, v));
    } else {
      add(fmt::format("  let v{} = apply_activation({}u, {}, P.lo, P.hi);", q, uint32_t(c.act), v));
    }
  }
  if (c.residual && !c.residual_first) {
    // After the activation (wgnn.matmul_add's order), 8 halves at once.
    read_residual();
    for (int q = 0; q < 8; ++q) add(fmt::format("  let w{0} = v{0} + rh[{1}].{2};", q, q / 2, q % 2 ? "y" : "x"));
  }
  const char* v = c.residual && !c.residual_first ? "w" : "v";
  if (c.odd_n && c.out_f16) {
    add("  let o = c_off + r * P.N + col;");
    for (int q = 0; q < 8; ++q) add(fmt::format("  if (col + {0}u < P.N) {{ C[o + {0}u] = f16({1}{0}); }}", q, v));
  } else if (c.out_f16) {
    add(fmt::format("  C[(c_off + r * P.N + col) / 8u] = vec4<u32>(pack2x16float(vec2<f32>({0}0, {0}1)), "
        "pack2x16float(vec2<f32>({0}2, {0}3)), pack2x16float(vec2<f32>({0}4, {0}5)), "
        "pack2x16float(vec2<f32>({0}6, {0}7)));", v));
  } else {
    for (int q = 0; q < 8; ++q)
      add(fmt::format(fmt::runtime(c.odd_n ? "  if (col + {0}u < P.N) {{ C[c_off + r * P.N + col + {0}u] = v{0}; }}"
                                           : "  C[c_off + r * P.N + col + {0}u] = v{0};"), q));
  }
  add("}");
  }

  add(fmt::format("@compute @workgroup_size({})", T));
  add("fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {");
  add("  let sg = lid / 32u; let lane = lid % 32u;");
  if (c.pad_kb) add("  if (P.pad1 == 0x7fffffffu) { pad_mem[lid] = 1.0; }");
  add(fmt::format("  let wm = sg / {0}u; let wn = sg % {0}u;", c.sg_n));
  // KS: the row stride along K of A (B transposed); K: the depth this
  // workgroup sums (its range of K in split-K, whose start k0 moves the
  // operands' offsets).
  add("  let M = P.M; let N = P.N; let KS = P.K;");
  if (c.splitk) {
    add("  let m0 = wid.y * BM; let n0 = wid.x * BN; let bt = wid.z / P.splits; let kr = wid.z - bt * P.splits;");
    add("  let k0 = kr * P.kchunk; let K = min(KS - k0, P.kchunk);");
    // (The convolution mode's B has no rows in memory: its range starts
    // with the reduction row k0, below.)
    add(fmt::format("  let a_off = bt * P.a_batch + k0{}; let b_off = bt * P.b_batch{};", c.a_trans ? " * M" : "",
                    c.conv ? "" : c.b_trans ? " + k0" : " + k0 * N"));
  } else {
    add("  let K = KS;");
    add("  let m0 = wid.y * BM; let n0 = wid.x * BN; let bt = wid.z;");
    add("  let a_off = bt * P.a_batch; let b_off = bt * P.b_batch;");
  }
  add("  let ktiles = (K + BK - 1u) / BK;");
  add(fmt::format("  let rot_a = {};", c.no_rotation ? "0u" : best_rotation(A_COLS, AS)));
  if (!c.conv) add(fmt::format("  let rot_b = {};", c.no_rotation ? "0u" : best_rotation(B_COLS, BS)));
  // The 16-byte chunk at `i` (vec4 units) of A or B: one vec4 load, or four
  // word loads (/w) in the order the workgroup stores take them (the
  // rotation without selects).
  if (c.word_loads) {
    add("  let wa0 = rot_a & 3u; let wa1 = (rot_a + 1u) & 3u; let wa2 = (rot_a + 2u) & 3u; let wa3 = (rot_a + 3u) & 3u;");
    add("  let wb0 = rot_b & 3u; let wb1 = (rot_b + 1u) & 3u; let wb2 = (rot_b + 2u) & 3u; let wb3 = (rot_b + 3u) & 3u;");
  }
  // The result matrices: named variables, or (emulated) an array the
  // multiplications index at run time (compact code: lavapipe compiles the
  // unrolled form of the big tiles for minutes).
  auto acc = [&](uint32_t i, uint32_t j) {
    return c.emulate ? fmt::format("emu_acc[{}]", i * TN + j) : fmt::format("acc{}_{}", i, j);
  };
  if (c.emulate) {
    add(fmt::format("  var emu_acc: array<mat2x4<f32>, {}>;", TM * TN));
  } else {
    for (uint32_t i = 0; i < TM; ++i)
      for (uint32_t j = 0; j < TN; ++j) add(fmt::format("  var {} = subgroup_matrix_result<f32, 16, 16>();", acc(i, j)));
  }
  // Per-thread coordinates of its share of the A and B tiles.
  for (uint32_t q = 0; q < NA; ++q) {
    add(fmt::format("  let ar{0} = (lid + {1}u) / {2}u; let ac{0} = ((lid + {1}u) % {2}u) * 8u;", q, q * T, A_COLS / 8));
    add(fmt::format("  var ra{} = vec4<u32>();", q));
    if (c.prefetch == 2) add(fmt::format("  var ra{}x = vec4<u32>();", q));
  }
  for (uint32_t q = 0; q < NB && !c.conv; ++q) {
    add(fmt::format("  let br{0} = (lid + {1}u) / {2}u; let bc{0} = ((lid + {1}u) % {2}u) * 8u;", q, q * T, B_COLS / 8));
    add(fmt::format("  var rb{} = vec4<u32>();", q));
    if (c.prefetch == 2) add(fmt::format("  var rb{}x = vec4<u32>();", q));
  }
  if (c.conv) {
    // Column slot cs of this thread: output pixel gn (decoded once), the
    // input coordinates of its tap (0, 0) (iy a huge sentinel past the last
    // pixel, so that every tap is out of the image) and its address.
    for (uint32_t cs = 0; cs < NCOL; ++cs) {
      add(fmt::format("  let gn{0} = n0 + {1}; let oy{0} = gn{0} / P.out_w; let ox{0} = gn{0} - oy{0} * P.out_w;", cs,
                      RS > 1 || NCOL == 1 ? "lid % BN" : fmt::format("lid + {}u", cs * T)));
      add(fmt::format("  let iy{0} = select(0x80000000u, oy{0} * P.stride_h - P.top, gn{0} < N); "
                      "let ix{0} = ox{0} * P.stride_w - P.left;", cs));
      add(fmt::format("  let px{0} = b_off + iy{0} * P.in_w + ix{0};", cs));
    }
    // The thread's first reduction row kr0, decoded into the channel offset
    // cb = ci * H*W and the tap's offsets yo = ky * dil_h, xo = kx * dil_w;
    // each later row (tiles are loaded in order) is RS further: a fixed step
    // with one carry per digit.
    const std::string r0 = RS > 1 ? "lid / BN" : "0u";
    add(fmt::format("  let kr0 = {}{}; let kc0 = kr0 / P.khw; let kk0 = kr0 - kc0 * P.khw; let ky0 = kk0 / P.kw;", c.splitk ? "k0 + " : "", r0));
    add("  var cb = kc0 * P.in_hw; var yo = ky0 * P.dil_h; var xo = (kk0 - ky0 * P.kw) * P.dil_w;");
    add(fmt::format("  let sbo = {} * BS + {};", r0, RS > 1 || NCOL == 1 ? "lid % BN" : "lid"));
    for (uint32_t j = 0; j < JR; ++j)
      for (uint32_t cs = 0; cs < NCOL; ++cs) {
        add(fmt::format("  var vb{}_{} = f16();", j, cs));
        if (c.prefetch == 2) add(fmt::format("  var vb{}_{}x = f16();", j, cs));
      }
  }
  // The global loads of tile `kt`. Two forms: checked (every element
  // against M, N and K, zero outside) and fast, from the per-thread
  // addresses above: rows past M (columns past N) are clamped to the last
  // one, so that their loads stay in the buffer and their results are
  // never written, and only K needs a check, on the last tile when K is
  // not a multiple of BK. The fast form runs on all the other tiles: the
  // checks and branches of every load took 28% of the time at 4096^3 on
  // the H200 (docs/BENCHMARKS.md).
  // `rs` names the register set ("" or, with two tiles in flight, "x").
  auto ld = [&](char op, const std::string& i) -> std::string {
    const char M_ = op == 'a' ? 'A' : 'B';
    if (c.word_loads)
      return fmt::format("vec4<u32>({0}[4u * ({1}) + w{2}0], {0}[4u * ({1}) + w{2}1], {0}[4u * ({1}) + w{2}2], "
                         "{0}[4u * ({1}) + w{2}3])", M_, i, op);
    return fmt::format("{}[{}]", M_, i);
  };
  auto load_a_checked = [&](const std::string& kt, const std::string& ind, const std::string& rs) {
    for (uint32_t q = 0; q < NA; ++q) {
      const std::string guard = (q + 1) * T > TOTAL_A ? fmt::format(" && ar{} < {}u", q, A_ROWS) : std::string();
      const std::string r = fmt::format("ra{}{}", q, rs);
      if (c.a_trans) {
        add(fmt::format("{0}{{ let gk = {2} * BK + ar{1}; let gm = m0 + ac{1}; {3} = vec4<u32>();", ind, q, kt, r));
        add(fmt::format("{0}  if (gm < M && gk < K{1}) {{ {2} = {3}; }} }}", ind, guard, r, ld('a', "(a_off + gk * M + gm) / 8u")));
      } else {
        add(fmt::format("{0}{{ let gm = m0 + ar{1}; let gk = {2} * BK + ac{1}; {3} = vec4<u32>();", ind, q, kt, r));
        add(fmt::format("{0}  if (gm < M && gk < K{1}) {{ {2} = {3}; }} }}", ind, guard, r, ld('a', "(a_off + gm * KS + gk) / 8u")));
      }
    }
  };
  auto load_b_checked = [&](const std::string& kt, const std::string& ind, const std::string& rs) {
    for (uint32_t q = 0; q < NB && !c.conv; ++q) {
      const std::string guard = (q + 1) * T > TOTAL_B ? fmt::format(" && br{} < {}u", q, B_ROWS) : std::string();
      const std::string r = fmt::format("rb{}{}", q, rs);
      if (c.b_trans) {
        add(fmt::format("{0}{{ let gn = n0 + br{1}; let gk = {2} * BK + bc{1}; {3} = vec4<u32>();", ind, q, kt, r));
        add(fmt::format("{0}  if (gk < K && gn < N{1}) {{ {2} = {3}; }} }}", ind, guard, r, ld('b', "(b_off + gn * KS + gk) / 8u")));
      } else {
        add(fmt::format("{0}{{ let gk = {2} * BK + br{1}; let gn = n0 + bc{1}; {3} = vec4<u32>();", ind, q, kt, r));
        add(fmt::format("{0}  if (gk < K && gn < N{1}) {{ {2} = {3}; }} }}", ind, guard, r, ld('b', "(b_off + gk * N + gn) / 8u")));
      }
    }
  };
  auto load_fast = [&](const std::string& kt_in, const std::string& ind, const std::string& rs) {
    const std::string kt = (c.ablate & 8) ? std::string("0u") : kt_in;
    for (uint32_t q = 0; q < NA; ++q) {
      const bool part = (q + 1) * T > TOTAL_A;
      add(fmt::format("{}{}ra{}{} = {};{}", ind, part ? fmt::format("if (ar{} < {}u) {{ ", q, A_ROWS) : "", q, rs,
                      ld('a', fmt::format("abase{} + {} * {}", q, kt, c.a_trans ? "astep" : fmt::format("{}u", c.bk / 8))),
                      part ? " }" : ""));
    }
    for (uint32_t q = 0; q < NB && !c.conv; ++q) {
      const bool part = (q + 1) * T > TOTAL_B;
      add(fmt::format("{}{}rb{}{} = {};{}", ind, part ? fmt::format("if (br{} < {}u) {{ ", q, B_ROWS) : "", q, rs,
                      ld('b', fmt::format("bbase{} + {} * {}", q, kt, c.b_trans ? fmt::format("{}u", c.bk / 8) : "bstep")),
                      part ? " }" : ""));
    }
  };
  // `tail`: a WGSL expression, true where tile kt is the last one (where K
  // may end inside the tile).
  auto load_regs = [&](const std::string& kt, const std::string& ind, const std::string& tail,
                       const std::string& rs = "") {
    if (c.checked_loads) {
      load_a_checked(kt, ind, rs);
      load_b_checked(kt, ind, rs);
    } else {
      add(fmt::format("{}if (kfull || !({})) {{", ind, tail));
      load_fast(kt, ind + "  ", rs);
      add(fmt::format("{}}} else {{", ind));
      load_a_checked(kt, ind + "  ", rs);
      if (!c.conv) load_b_checked(kt, ind + "  ", rs);
      add(fmt::format("{}}}", ind));
    }
    if (c.conv) {
      for (uint32_t j = 0; j < JR; ++j) {
        add(fmt::format("{}{{ let ro = cb + yo * P.in_w + xo; let rk = cb < P.chw;", ind));
        for (uint32_t cs = 0; cs < NCOL; ++cs)
          add(fmt::format("{0}  {{ let iy = iy{2} + yo; let ix = ix{2} + xo; vb{1}_{2}{3} = f16(); "
                          "if (rk && iy < P.in_h && ix < P.in_w) {{ vb{1}_{2}{3} = X[px{2} + ro]; }} }}",
                          ind, j, cs, rs));
        add(fmt::format("{}  xo += P.step_x; let cx = xo >= P.span_w; xo = select(xo, xo - P.span_w, cx);", ind));
        add(fmt::format("{}  yo += P.step_y + select(0u, P.dil_h, cx); let cy = yo >= P.span_h; "
                        "yo = select(yo, yo - P.span_h, cy);", ind));
        add(fmt::format("{}  cb += P.step_c + select(0u, P.in_hw, cy); }}", ind));
      }
    }
  };
  auto store_regs = [&](const std::string& buf, const std::string& ind, const std::string& rs = "") {
    for (uint32_t q = 0; q < NA; ++q)
      add(fmt::format("{0}{4}put_sa({1} * {2}u + ar{3} * AS + ac{3}, ra{3}{6}, rot_a);{5}", ind, buf, SA_STAGE, q,
                      (q + 1) * T > TOTAL_A ? fmt::format("if (ar{} < {}u) {{ ", q, A_ROWS) : std::string(),
                      (q + 1) * T > TOTAL_A ? " }" : "", rs));
    if (c.conv)
      for (uint32_t j = 0; j < JR; ++j)
        for (uint32_t cs = 0; cs < NCOL; ++cs)
          add(fmt::format("{}sb[{} * {}u + sbo + {}u] = vb{}_{}{};", ind, buf, SB_STAGE, j * RS * BS + cs * T, j, cs, rs));
    for (uint32_t q = 0; q < NB && !c.conv; ++q)
      add(fmt::format("{0}{4}put_sb({1} * {2}u + br{3} * BS + bc{3}, rb{3}{6}, rot_b);{5}", ind, buf, SB_STAGE, q,
                      (q + 1) * T > TOTAL_B ? fmt::format("if (br{} < {}u) {{ ", q, B_ROWS) : std::string(),
                      (q + 1) * T > TOTAL_B ? " }" : "", rs));
  };
  if (!c.checked_loads) {
    // Per-thread element addresses (in vec4 units) of the fast loads, rows
    // and columns clamped into the matrix (M, N >= 8 and multiples of 8
    // where a vec4 runs along them).
    add("  let kfull = K % BK == 0u; let astep = BK * M / 8u; let bstep = BK * N / 8u;");
    // (Ablation 16: every workgroup loads the first one's rows and columns.)
    const std::string am0 = (c.ablate & 16) ? "0u" : "m0", an0 = (c.ablate & 16) ? "0u" : "n0";
    for (uint32_t q = 0; q < NA; ++q)
      add(fmt::format(fmt::runtime(c.a_trans ? "  let abase{0} = (a_off + ar{0} * M + min({1} + ac{0}, M - 8u)) / 8u;"
                                             : "  let abase{0} = (a_off + min({1} + ar{0}, M - 1u) * KS + ac{0}) / 8u;"), q, am0));
    for (uint32_t q = 0; q < NB && !c.conv; ++q)
      add(fmt::format(fmt::runtime(c.b_trans ? "  let bbase{0} = (b_off + min({1} + br{0}, N - 1u) * KS + bc{0}) / 8u;"
                                             : "  let bbase{0} = (b_off + br{0} * N + min({1} + bc{0}, N - 8u)) / 8u;"), q, an0));
  }
  load_regs("0u", "  ", "ktiles == 1u");
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
  // Offsets of result row block i / column block j at depth step ks.
  auto a_frag = [&](uint32_t i, uint32_t ks) {
    return fmt::format("abase + {}u", c.a_trans ? ks * 16 * AS + i * 16 : i * 16 * AS + ks * 16);
  };
  auto b_frag = [&](uint32_t j, uint32_t ks) {
    return fmt::format("bbase + {}u", c.b_trans ? j * 16 * BS + ks * 16 : ks * 16 * BS + j * 16);
  };
  // The multiplies of the tile in workgroup buffer `cur` (a WGSL expression).
  auto multiply = [&](const std::string& cur, const std::string& ind) {
    add(fmt::format("{}let abase = {} * {}u + wm * {}u;", ind, cur, SA_STAGE, c.a_trans ? TM * 16 : TM * 16 * AS));
    add(fmt::format("{}let bbase = {} * {}u + wn * {}u;", ind, cur, SB_STAGE, c.b_trans ? TN * 16 * BS : TN * 16));
    if (c.emulate) {
      add(fmt::format("{}for (var q = 0u; q < {}u + P.pad0; q++) {{", ind, TM * TN * c.bk / 16));
      add(fmt::format("{}  let ks = q / {}u; let ij = q % {}u; let i = ij / {}u; let j = ij % {}u;", ind, TM * TN, TM * TN,
                      TN, TN));
      add(fmt::format("{}  emu_acc[ij] = emu_mac(emu_acc[ij], abase + {}, bbase + {}, lane);", ind,
                      c.a_trans ? fmt::format("ks * {}u + i * 16u", 16 * AS) : fmt::format("i * {}u + ks * 16u", 16 * AS),
                      c.b_trans ? fmt::format("j * {}u + ks * 16u", 16 * BS) : fmt::format("ks * {}u + j * 16u", 16 * BS)));
      add(ind + "}");
      return;
    }
    for (uint32_t ks = 0; ks < c.bk / 16; ++ks) {
      add(ind + "{");
      for (uint32_t i = 0; i < TM; ++i)
        add((c.ablate & 4) ? fmt::format("{0}  let l{1} = pl{1};", ind, i)
                           : fmt::format("{}  let l{} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&sa, {}, {}, AS);",
                                         ind, i, a_frag(i, ks), c.a_trans));
      for (uint32_t j = 0; j < TN; ++j)
        add((c.ablate & 4) ? fmt::format("{0}  let r{1} = pr{1};", ind, j)
                           : fmt::format("{}  let r{} = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&sb, {}, {}, BS);",
                                         ind, j, b_frag(j, ks), c.b_trans));
      for (uint32_t i = 0; i < TM; ++i)
        for (uint32_t j = 0; j < TN; ++j)
          add(fmt::format("{}  {} = subgroupMatrixMultiplyAccumulate(l{}, r{}, {});", ind, acc(i, j), i, j, acc(i, j)));
      add(ind + "}");
    }
  };
  if (c.prefetch == 2) {
    // Two tiles in flight (one workgroup buffer): while tile kt is
    // multiplied, tile kt + 1 sits in one register set and tile kt + 2 is
    // loading into the other. Unrolled by two, so that the sets swap names
    // rather than values (a copy would wait for the load).
    add("  if (ktiles > 1u) {");
    load_regs("1u", "    ", "ktiles == 2u", "x");
    add("  }");
    add("  for (var kt = 0u; kt < ktiles; kt += 2u) {");
    for (int half = 0; half < 2; ++half) {
      const std::string now = half ? "x" : "", next = half ? "" : "x";
      const std::string t1 = fmt::format("kt + {}u", 1 + half), t2 = fmt::format("kt + {}u", 2 + half);
      add(fmt::format("    if ({} < ktiles) {{", t2));
      if (!(c.ablate & 1)) load_regs("(" + t2 + ")", "      ", fmt::format("kt + {}u == ktiles", 3 + half), now);
      add("    }");
      // Two stages: this half multiplies buffer `half` and stores the
      // next tile into the other one, read last before the previous
      // barrier (one barrier a tile).
      const std::string cur = c.stages == 2 ? fmt::format("{}u", half) : "0u";
      const std::string nxt = c.stages == 2 ? fmt::format("{}u", 1 - half) : "0u";
      add("    {");
      multiply(cur, "      ");
      add("    }");
      if (c.stages == 1) add("    workgroupBarrier();");
      add(fmt::format("    if ({} >= ktiles) {{ break; }}", t1));
      if (!(c.ablate & 2)) store_regs(nxt, "    ", next);
      add("    workgroupBarrier();");
    }
    add("  }");
  } else {
    add("  for (var kt = 0u; kt < ktiles; kt++) {");
    add(c.stages == 2 ? "    let cur = kt & 1u; let nxt = cur ^ 1u;" : "    let cur = 0u; let nxt = 0u;");
    add("    let more = kt + 1u < ktiles;");
    add("    if (more) {");
    if (!(c.ablate & 1)) load_regs("(kt + 1u)", "      ", "kt + 2u == ktiles");
    add("    }");
    multiply("cur", "    ");
    if (c.stages == 1 && !(c.ablate & 32)) add("    workgroupBarrier();");
    add("    if (more) {");
    if (!(c.ablate & 2)) store_regs("nxt", "      ");
    add("    }");
    add("    workgroupBarrier();");
    add("  }");
  }

  add(c.splitk ? "  let c_off = kr * P.kcount + bt * P.c_batch; let bias_off = 0u;"
               : "  let c_off = bt * P.c_batch; let bias_off = bt * P.bias_batch;");
  add(fmt::format("  let wm0 = m0 + wm * {}u; let wn0 = n0 + wn * {}u;", TM * 16, TN * 16));
  const bool direct = !c.out_f16 && !c.bias && c.act == Activation::None && !c.affine;
  if (no_scratch) {  // full tiles only
    for (uint32_t i = 0; i < TM; ++i)
      for (uint32_t j = 0; j < TN; ++j)
        store_mat("  ", "C", fmt::format("c_off + (wm0 + {}u) * N + wn0 + {}u", i * 16, j * 16), acc(i, j), "N");
    add("}");
    return s;
  }
  if (direct) {
    add("  if (P.alpha == 1.0 && m0 + BM <= M && n0 + BN <= N) {");
    for (uint32_t i = 0; i < TM; ++i)
      for (uint32_t j = 0; j < TN; ++j)
        store_mat("    ", "C", fmt::format("c_off + (wm0 + {}u) * N + wn0 + {}u", i * 16, j * 16), acc(i, j), "N");
    add("    return;");
    add("  }");
  }
  if (c.emulate) {  // a loop, not TM x TN copies of the epilogue (compile time)
    add(fmt::format("  for (var ij = 0u; ij < {}u + P.pad0; ij++) {{", TM * TN));
    add("    workgroupBarrier();");
    store_mat("    ", "sc", "sg * 256u", "emu_acc[ij]", "16u");
    add("    workgroupBarrier();");
    add(fmt::format("    emit(wm0 + (ij / {0}u) * 16u, wn0 + (ij % {0}u) * 16u, sg * 256u, lane, c_off, bias_off);", TN));
    add("  }");
    add("}");
    return s;
  }
  for (uint32_t i = 0; i < TM; ++i)
    for (uint32_t j = 0; j < TN; ++j) {
      add("  workgroupBarrier();");
      store_mat("  ", "sc", "sg * 256u", acc(i, j), "16u");
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
                            "BMxBNxBK:SGMxSGN:STAGES[:v|:f][/dN][/tN][/r][/c][/w][/v][/pN][/aN], e.g. 128x128x32:2x2:1)",
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
  c.checked_loads = text.find("/c") != std::string::npos;
  c.word_loads = text.find("/w") != std::string::npos;
  c.vec4_tiles = text.find("/v") != std::string::npos;
  c.pad_kb = number_after("/p").value_or(0);
  c.prefetch = number_after("/d").value_or(1);
  const uint32_t t = number_after("/t").value_or(0);  // 1: A stored transposed, 2: B, 3: both
  c.a_trans = t & 1;
  c.b_trans = t & 2;
  subgroup_matmul_wgsl(c);  // validates
  return c;
}

bool subgroup_matmul_supported(const gpu::Context& ctx, const SubgroupMatmulConfig& cfg) {
  const auto& f = ctx.features();
  const bool fits = cfg.workgroup_bytes() <= ctx.limits().max_compute_workgroup_storage_size &&
                    cfg.threads() <= ctx.limits().max_compute_invocations_per_workgroup;
  if (cfg.emulate) return f.shader_f16 && fits;
  if (!f.subgroup_matrix || !f.shader_f16) return false;
  if (ctx.adapter().subgroup_min_size != 32 || ctx.adapter().subgroup_max_size != 32) return false;
  bool config = false;
  for (const auto& m : f.subgroup_matrix_configs)
    if (m.component == "f16" && m.result == "f32" && m.m == 16 && m.n == 16 && m.k == 16) config = true;
  return config && fits;
}

namespace {

// The generated kernel's pipeline, with the generation counted as WGSL time.
const gpu::Pipeline& timed_pipeline(Graph& g, const SubgroupMatmulConfig& cfg) {
  if (g.meta()) return meta_pipeline();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string wgsl = subgroup_matmul_wgsl(cfg);
  g.ctx().add_wgsl_time(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  try {
    return g.ctx().pipeline(cfg.name(), wgsl);
  } catch (const gpu::GpuError& e) {
    if (!cfg.vec4_tiles || cfg.emulate) throw;
    throw gpu::GpuError(fmt::format("vec4 workgroup tiles (WGNN_SUBGROUP_VEC4_TILES=1) need a Dawn whose Tint takes "
                                    "f16 subgroup-matrix loads from them (scripts/patch-dawn-vec4-tiles, then "
                                    "WGNN_DAWN_REBUILD=1 scripts/build-dawn): {}", e.what()));
  }
}


// WGNN_SUBGROUP_MATMUL: "0" turns the tensor-core kernels off, "emulate"
// runs them emulated (tests).
enum class Mode { Off, On, Emulate };
Mode subgroup_mode(const Settings& settings) {
  const char* env = settings.get("WGNN_SUBGROUP_MATMUL");
  if (env && std::string_view(env) == "0") return Mode::Off;
  if (env && std::string_view(env) == "emulate") return Mode::Emulate;
  return Mode::On;
}

}  // namespace

bool subgroup_matmul_emulated(const Settings& settings) { return subgroup_mode(settings) == Mode::Emulate; }

bool tensor_cores_available(const gpu::Context& ctx) {
  switch (subgroup_mode(ctx.settings())) {
    case Mode::Off: return false;
    case Mode::Emulate: return ctx.features().shader_f16;
    case Mode::On: return subgroup_matmul_supported(ctx);
  }
  return false;
}

namespace {

// The tiles of an M x N x K product (times `batch`; `split`: cut into
// ranges of K, subgroup_gemm_splits). One stage in all:
// the driver gives a multiprocessor 48 KB of workgroup memory on the H200,
// so a second stage halves the workgroups that run at once
// (docs/BENCHMARKS.md).
// Two workgroups on each of the H200's 132 multiprocessors.
constexpr int64_t kDeepTiles = 264;
// Products of at most this many 64x64 tiles take 32x64 tiles (below): the
// measured products had 12 to 48.
constexpr int64_t kSmallTiles = 48;
// WGNN_SUBGROUP_SMALL_TILES=0: products of few tiles keep 64x64 (measuring).
bool small_tiles_enabled(const Settings& settings) {
  const char* e = settings.get("WGNN_SUBGROUP_SMALL_TILES");
  if (!e || !*e) return true;
  const std::string_view v(e);
  if (v != "0" && v != "1") throw Error(fmt::format("WGNN_SUBGROUP_SMALL_TILES='{}': expected 0 or 1", e));
  return v == "1";
}
SubgroupMatmulConfig pick_config(const Settings& settings, int64_t M, int64_t N, int64_t K, int64_t batch, bool split = false,
                                 bool conv = false) {
  SubgroupMatmulConfig cfg;
  // 128x128 tiles (4 subgroups of 64x64, 23 KB of workgroup memory: two
  // workgroups per multiprocessor) where there are at least 300 of them,
  // K is at least 256 and N spans more than one tile; else 64x64 tiles (4
  // subgroups of 32x32, 14 KB). Alone, 128x128 won at 100 tiles and up
  // (docs/results/gemm_shapes_h200.md: by 14-110% at 4096^3,
  // 2304x1536x512, 576x3072x1024 and 9216x768x256; 64x64 by 18-87% with
  // fewer tiles). Inside the models, 64x64 took the products of 100 to 300
  // tiles faster: with the threshold at 300 rather than 100, DaViT-B ran
  // 8.64 -> 7.82 ms and the Whisper encoder 2.20 -> 2.11 (its q/k/v and
  // fc1, 144 and 192 tiles), ConvNeXt-T and DeiT-T the same; 600 changed
  // nothing more (docs/BENCHMARKS.md).
  const int64_t big_tiles = int64_t(gpu::ceil_div(uint64_t(M), 128) * gpu::ceil_div(uint64_t(N), 128)) * batch;
  // WGNN_SUBGROUP_BIG_TILES=N: the least 128x128 tiles for that size (tuning).
  int64_t big_min = 300;
  if (const char* e = settings.get("WGNN_SUBGROUP_BIG_TILES"); e && *e) {
    char* end = nullptr;
    big_min = std::strtol(e, &end, 10);
    if (*end || big_min < 0)
      throw Error(fmt::format("WGNN_SUBGROUP_BIG_TILES='{}': expected the least number of 128x128 tiles (0 or more)", e));
  }
  if (big_tiles >= big_min && K >= 256 && N > 128) {
    cfg.bm = 128, cfg.bn = 128, cfg.bk = 32, cfg.sg_m = 2, cfg.sg_n = 2, cfg.stages = 1;
  } else {
    cfg.bm = 64, cfg.bn = 64, cfg.bk = 32, cfg.sg_m = 2, cfg.sg_n = 2, cfg.stages = 1;
    // 64 deep (22 KB: two workgroups per multiprocessor, not three) where
    // the tiles fit in one wave at two per multiprocessor and K is at least
    // 128: half the K steps, each with its two barriers. Timed dispatch by
    // dispatch in seven models (docs/results/gemm_tiles_by_product_h200.md),
    // it won on 33 of the 35 such products that run whole (the Whisper
    // encoder's 1500 x 512 x 2048: 48 -> 35 us; MODNet's and ResNet-50's
    // small-map 1x1 convolutions by 10-30%; two lost 4% and 10%), and lost
    // on 40 of the 43 with more tiles or a shorter K (DaViT-B's 2304 x 512
    // x 2048, 288 tiles: 51 -> 60 us). Split-K ranges keep 32 (mixed).
    const int64_t tiles = int64_t(gpu::ceil_div(uint64_t(M), 64) * gpu::ceil_div(uint64_t(N), 64)) * batch;
    if (!split && tiles <= kDeepTiles && K >= 128) cfg.bk = 64;
    // Products (not convolutions) of at most kSmallTiles 64x64 tiles: 32x64
    // tiles on four subgroups of 16x32, 32 deep. BART's decoder (32 rows)
    // wasted half of each 64-row tile; DeiT-T's 197 rows make 7 rows of
    // tiles instead of 4. On the H200 (`WGNN_SUBGROUP_DEEP=32x64x32:2x2:1@0`
    // on every product, docs/BENCHMARKS.md) BART's GPU time went from 0.876
    // to 0.805 ms and DeiT-T's from 0.639 to 0.614; 32x64 on two subgroups
    // of 32x32 and 32x128 tiles gained less or lost.
    if (!conv && tiles <= kSmallTiles && small_tiles_enabled(settings)) {
      cfg.bm = 32, cfg.bn = 64, cfg.bk = 32, cfg.sg_m = 2, cfg.sg_n = 2, cfg.stages = 1;
    }
  }
  // WGNN_SUBGROUP_DEEP=CONFIG@KMIN: the tiles of the products that do not
  // take 128x128 and have K >= KMIN (tuning).
  if (const char* e = settings.get("WGNN_SUBGROUP_DEEP"); e && *e && cfg.bm != 128) {
    const std::string v(e);
    const auto at = v.find('@');
    char* end = nullptr;
    const long kmin = at == std::string::npos ? -1 : std::strtol(v.c_str() + at + 1, &end, 10);
    if (kmin < 0 || *end)
      throw Error(fmt::format("WGNN_SUBGROUP_DEEP='{}': expected CONFIG@KMIN, e.g. 64x64x64:2x2:1@1024", e));
    if (K >= kmin) cfg = parse_subgroup_matmul_config(v.substr(0, at));
  }
  // WGNN_SUBGROUP_PREFETCH=2: the loads two tiles ahead (tuning).
  if (const char* e = settings.get("WGNN_SUBGROUP_PREFETCH"); e && *e) {
    const std::string_view v(e);
    if (v != "1" && v != "2")
      throw Error(fmt::format("WGNN_SUBGROUP_PREFETCH='{}': expected 1 or 2 (tiles in flight in registers)", e));
    cfg.prefetch = v == "2" ? 2 : 1;
  }
  // WGNN_SUBGROUP_MATMUL_CONFIG (e.g. 128x128x32:2x4:2) picks the tiles
  // for every product, for tuning and for testing each configuration.
  if (const char* env = settings.get("WGNN_SUBGROUP_MATMUL_CONFIG"); env && *env) {
    cfg = parse_subgroup_matmul_config(env);
    if (cfg.full_tiles || cfg.ablate || cfg.a_trans || cfg.b_trans) {
      throw Error(fmt::format("WGNN_SUBGROUP_MATMUL_CONFIG='{}': give tiles, subgroups and stages only", env));
    }
  }
  // WGNN_SUBGROUP_VEC4_TILES=1: the products' workgroup tiles as vec4<u32>,
  // each chunk stored whole (SubgroupMatmulConfig::vec4_tiles; a Dawn
  // patched by scripts/patch-dawn-vec4-tiles, or emulated). Measuring.
  if (const char* e = settings.get("WGNN_SUBGROUP_VEC4_TILES"); e && *e) {
    const std::string_view v(e);
    if (v != "0" && v != "1")
      throw Error(fmt::format("WGNN_SUBGROUP_VEC4_TILES='{}': expected 0 or 1 (vec4<u32> workgroup tiles)", e));
    cfg.vec4_tiles = v == "1" && !conv;
  }
  return cfg;
}

// The operands the kernel takes: float16 inputs and result, a float16 bias,
// a float32 [2, rows] affine (scale, shift).
bool epilogue_operands_ok(Graph& g, std::initializer_list<TensorRef> f16, TensorRef bias, TensorRef affine,
                          int64_t rows) {
  for (TensorRef t : f16)
    if (g.info(t).dtype != DType::F16) return false;
  if (bias.id >= 0 && g.info(bias).dtype != DType::F16) return false;
  return affine.id < 0 || (g.info(affine).dtype == DType::F32 && g.info(affine).shape == Shape{2, rows});
}

// The tiles and epilogue of a product or convolution: pick_config's tiles,
// float16 results, the optional float16 bias and float32 affine, the
// activation.
SubgroupMatmulConfig epilogue_config(const Settings& settings, int64_t M, int64_t N, int64_t K, int64_t batch, bool split, Mode mode, bool bias,
                                     bool affine, bool affine_rounded, Activation act, bool conv = false) {
  SubgroupMatmulConfig cfg = pick_config(settings, M, N, K, batch, split, conv);
  cfg.emulate = mode == Mode::Emulate;
  cfg.out_f16 = true;
  cfg.bias = bias;
  cfg.bias_f16 = true;
  cfg.affine = affine;
  cfg.affine_rounded = affine && affine_rounded;
  cfg.act = act;
  return cfg;
}


}  // namespace

// Split-K where the tiles are at most kSplitTiles (half the H200's 132
// multiprocessors) and K has at least 8 steps of 32: ranges of at least 4
// steps, to about kSplitTarget workgroups, at most 64 ranges. BART-base's
// decoder (32 tokens: 12 tiles of 64x64 for its 768 x 768 projections) and
// DaViT's channel attention (32 x 32 per head over 36,864 pixels: 4 tiles)
// ran on a handful of multiprocessors, each walking the whole of K: on the
// H200 those went from 26 to 14 + 8 (the sum) µs and from 420 to 25 + 12.
// With more tiles the sum pass costs more than the split gains (the
// Whisper encoder's 1500 x 512 x 512 on 192 tiles: 27 -> 23 + 15 µs;
// DaViT-B's 2304 x 1536 x 512 on 216: 45 -> 75 + 27), docs/BENCHMARKS.md.
// Deeper products of up to two tiles per multiprocessor split too lost:
// the Whisper encoder's 1500 x 512 x 2048 (192 tiles of 64 steps) in 3
// ranges of 22 steps took the model from 2.44 to 2.58 ms (docs/BENCHMARKS.md).
constexpr int64_t kSplitTiles = 64, kSplitTarget = 512;
SubgroupSplit subgroup_gemm_splits(const Settings& settings, int64_t M, int64_t N, int64_t K, int64_t batch, bool conv) {
  const long setting = [&] {
    const char* e = settings.get("WGNN_SUBGROUP_SPLITK");
    if (!e || !*e) return -1L;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end || v < 0 || v > 64)
      throw Error(fmt::format("WGNN_SUBGROUP_SPLITK='{}': expected 0 (off) or a number of ranges of K up to 64", e));
    return v;
  }();
  // WGNN_SUBGROUP_SPLIT_TARGET=N: the workgroups a split aims at (tuning).
  const int64_t target = [&] {
    const char* e = settings.get("WGNN_SUBGROUP_SPLIT_TARGET");
    if (!e || !*e) return kSplitTarget;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end || v < 1 || v > 65536)
      throw Error(fmt::format("WGNN_SUBGROUP_SPLIT_TARGET='{}': expected the workgroups a split aims at (1 to 65536)", e));
    return int64_t(v);
  }();
  const SubgroupMatmulConfig cfg = pick_config(settings, M, N, K, batch, false, conv);
  const int64_t tiles = int64_t(gpu::ceil_div(uint64_t(M), cfg.bm) * gpu::ceil_div(uint64_t(N), cfg.bn)) * batch;
  const int64_t steps = (K + 31) / 32;
  int64_t splits = 1;
  if (setting > 1) {
    if (steps >= 2 * setting) splits = setting;
  } else if (setting < 0 && tiles <= kSplitTiles && steps >= 8) {
    splits = std::min<int64_t>({(target + tiles - 1) / tiles, steps / 4, 64});
  }
  if (splits < 2) return {};
  const int64_t kchunk = (steps + splits - 1) / splits * 32;
  return {(K + kchunk - 1) / kchunk, kchunk};
}

bool record_subgroup_gemm(Graph& g, const SubgroupGemm& p, std::string_view op, std::string_view what,
                          TensorRef* part) {
  const bool split = p.kchunk > 0;  // parts, even of one range (a replayed split)
  if (split ? (!part || g.info(p.a).dtype != DType::F16 || g.info(p.b).dtype != DType::F16 || p.bias.id >= 0 ||
               p.affine.id >= 0 ||
               p.act.act != Activation::None || p.kchunk <= 0 || p.kchunk % 32 != 0 ||
               (p.splits - 1) * p.kchunk >= p.K || p.splits * p.kchunk < p.K)
            : !epilogue_operands_ok(g, {p.a, p.b, p.out}, p.bias, p.affine, p.M))
    return false;
  const Mode mode = subgroup_mode(g.ctx().settings());
  if (mode == Mode::Off || !g.tensor_cores()) return false;
  if (p.N % 8 != 0 || (p.a_trans ? p.M : p.K) % 8 != 0 || (p.b_trans && p.K % 8 != 0)) return false;
  if (p.a_batch % 8 != 0 || p.b_batch % 8 != 0) return false;
  SubgroupMatmulConfig cfg = epilogue_config(g.ctx().settings(), p.M, p.N, p.K, p.batch, split, mode, p.bias.id >= 0, p.affine.id >= 0,
                                              p.affine_rounded, p.act.act);
  cfg.a_trans = p.a_trans;
  cfg.b_trans = p.b_trans;
  if (split) cfg.out_f16 = false, cfg.bias_f16 = false, cfg.splitk = true;
  cfg.residual = p.residual.id >= 0;
  cfg.residual_first = cfg.residual && p.residual_first;
  if (!subgroup_matmul_supported(g.ctx(), cfg)) return false;
  const uint64_t tiles_m = gpu::ceil_div(uint64_t(p.M), cfg.bm), tiles_n = gpu::ceil_div(uint64_t(p.N), cfg.bn);
  const uint64_t max_dim = g.ctx().limits().max_compute_workgroups_per_dimension;
  const uint64_t count = uint64_t(p.M) * uint64_t(p.N) * uint64_t(p.batch);
  if (tiles_m > max_dim || tiles_n > max_dim || uint64_t(p.batch * p.splits) > max_dim) return false;
  if (split && (count * uint64_t(p.splits) > UINT32_MAX ||
                count * uint64_t(p.splits) * 4 > g.ctx().limits().max_storage_buffer_binding_size))
    return false;
  if (p.residual.id >= 0 && (split || g.info(p.residual).dtype != DType::F16 ||
                             uint64_t(g.info(p.residual).numel()) != count))
    return false;
  const TensorRef out = split ? g.add_tensor({p.splits, int64_t(count)}, DType::F32) : p.out;
  if (split) *part = out;
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
  params.alpha = split ? 1.f : float(p.alpha);
  params.beta = float(p.beta);
  params.lo = float(p.act.lo);
  params.hi = float(p.act.hi);
  params.splits = uint32_t(p.splits);
  params.kchunk = uint32_t(split ? p.kchunk : p.K);
  params.kcount = uint32_t(split ? count : 0);
  const gpu::Pipeline& pl = timed_pipeline(g, cfg);
  std::vector<Binding> bindings{Binding::of(p.a), Binding::of(p.b), Binding::of(out), g.uniform(params)};
  if (cfg.bias) bindings.push_back(Binding::of(p.bias));
  if (cfg.affine) bindings.push_back(Binding::of(p.affine));
  if (cfg.residual) bindings.push_back(Binding::of(p.residual));
  g.add_dispatch(pl, std::move(bindings),
                 gpu::Grid{uint32_t(tiles_n), uint32_t(tiles_m), uint32_t(p.batch * p.splits)}, std::string(op),
                 fmt::format("{} subgroup-matrix {}x{}x{}{}{}{}{}", what, p.M, p.N, p.K,
                             p.batch > 1 ? fmt::format(" batch {}", p.batch) : "", p.a_trans ? " At" : "",
                             p.b_trans ? " Bt" : "", cfg.bias ? " bias" : "") +
                     (cfg.affine ? " affine" : "") + (cfg.residual_first ? " residual" : "") +
                     activation_label(p.act.act) + (cfg.residual && !cfg.residual_first ? " residual" : "") +
                     (split ? fmt::format(" splitk={}", p.splits) : "") + (cfg.emulate ? " emulated" : ""),
                 2.0 * double(p.M) * double(p.N) * double(p.K) * double(p.batch));
  return true;
}

bool record_subgroup_conv(Graph& g, const SubgroupConv& p, std::string_view op, std::string_view what,
                          TensorRef* part) {
  const bool split = p.kchunk > 0;  // parts, even of one range (a replayed split)
  if (split ? (!part || p.batch != 1 || g.info(p.x).dtype != DType::F16 || g.info(p.w).dtype != DType::F16 ||
               p.bias.id >= 0 || p.affine.id >= 0 || p.act.act != Activation::None || p.kchunk <= 0 ||
               p.kchunk % 32 != 0 || (p.splits - 1) * p.kchunk >= p.cin * p.kh * p.kw ||
               p.splits * p.kchunk < p.cin * p.kh * p.kw)
            : !epilogue_operands_ok(g, {p.x, p.w, p.out}, p.bias, p.affine, p.cout))
    return false;
  const Mode mode = subgroup_mode(g.ctx().settings());
  if (mode == Mode::Off || !g.tensor_cores()) return false;
  // WGNN_SUBGROUP_CONV=0: KxK convolutions on the regular kernel (products
  // and 1x1 convolutions still on subgroup matrices), for measuring.
  if (const char* env = g.ctx().settings().get("WGNN_SUBGROUP_CONV"); env && std::string_view(env) == "0") return false;
  // The weight rows are read as vec4<u32>: where Ci*KH*KW is not a
  // multiple of 8 (an RGB image's 3 channels, MODNet's image concatenated
  // to its features), they are copied into rows of K, the next multiple of
  // 8, zero past the end; the reduction rows past Ci*KH*KW gather zeros
  // (their channel is past the last). The epilogue writes 8 halves at once
  // where N % 8 == 0, else one at a time (odd_n).
  const int64_t M = p.cout, N = p.oh * p.ow, KW = p.cin * p.kh * p.kw, K = (KW + 7) / 8 * 8;
  if (M < 1 || N < 1 || KW < 1 || p.batch < 1) return false;
  // WGNN_SUBGROUP_ODD_N=0: those whose N is not a multiple of 8 on the
  // regular kernel, for measuring.
  if (const char* env = g.ctx().settings().get("WGNN_SUBGROUP_ODD_N"); N % 8 != 0 && env && std::string_view(env) == "0")
    return false;
  // Every index and coordinate within the int32 range (u32 in the kernel,
  // where coordinates left of or above the image wrap to huge values).
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t in_elems = p.batch * p.cin * p.h * p.w_in, out_elems = p.batch * M * N;
  const int64_t reach_h = (p.oh - 1) * p.stride_h + (p.kh - 1) * p.dil_h + 1;
  const int64_t reach_w = (p.ow - 1) * p.stride_w + (p.kw - 1) * p.dil_w + 1;
  // The channel offset of a thread's rows runs up to a tile's rows past
  // the last channel.
  const int64_t channel_reach = (p.cin + 64) * p.h * p.w_in;
  for (int64_t v : {in_elems, out_elems, M * K, channel_reach, p.top, p.left, reach_h, reach_w, p.kh * p.dil_h,
                    p.kw * p.dil_w})
    if (v > kMax) return false;
  if (p.top < 0 || p.left < 0) return false;
  SubgroupMatmulConfig cfg =
      epilogue_config(g.ctx().settings(), M, N, K, p.batch, split, mode, p.bias.id >= 0, p.affine.id >= 0, p.affine_rounded,
                      p.act.act, true);
  cfg.conv = true;
  cfg.odd_n = N % 8 != 0;
  if (split) cfg.out_f16 = false, cfg.bias_f16 = false, cfg.splitk = true;
  // The residual, before the activation, 8 halves at a time.
  if (p.residual.id >= 0) {
    if (split || g.info(p.residual).dtype != DType::F16 || g.info(p.residual).numel() != p.batch * M * N)
      return false;
    cfg.residual = cfg.residual_first = true;
  }
  const uint32_t T = cfg.threads();
  const bool rows = cfg.bn <= T && T % cfg.bn == 0 && cfg.bk % (T / cfg.bn) == 0;
  if (!rows && cfg.bn % T != 0) {
    throw Error(fmt::format("WGNN_SUBGROUP_MATMUL_CONFIG='{}': the convolution mode needs the threads to cover whole "
                            "rows of the B tile (threads % BN == 0, BK % (threads / BN) == 0) or BN % threads == 0",
                            g.ctx().settings().get("WGNN_SUBGROUP_MATMUL_CONFIG")));
  }
  if (!subgroup_matmul_supported(g.ctx(), cfg)) return false;
  const uint64_t tiles_m = gpu::ceil_div(uint64_t(M), cfg.bm), tiles_n = gpu::ceil_div(uint64_t(N), cfg.bn);
  const uint64_t max_dim = g.ctx().limits().max_compute_workgroups_per_dimension;
  if (tiles_m > max_dim || tiles_n > max_dim || uint64_t(p.batch * p.splits) > max_dim) return false;
  const uint64_t count = uint64_t(M) * uint64_t(N);
  if (split && (count * uint64_t(p.splits) > UINT32_MAX ||
                count * uint64_t(p.splits) * 4 > g.ctx().limits().max_storage_buffer_binding_size))
    return false;
  const TensorRef out = split ? g.add_tensor({p.splits, int64_t(count)}, DType::F32) : p.out;
  if (split) *part = out;
  SubgroupConvParams params{};
  params.M = uint32_t(M), params.N = uint32_t(N), params.K = uint32_t(K), params.tiles_n = uint32_t(tiles_n);
  params.a_batch = 0, params.b_batch = uint32_t(p.cin * p.h * p.w_in), params.c_batch = uint32_t(M * N);
  params.bias_batch = 0, params.bias_sm = 1, params.bias_sn = 0;
  params.alpha = 1, params.beta = 1, params.lo = float(p.act.lo), params.hi = float(p.act.hi);
  params.splits = uint32_t(p.splits);
  params.kchunk = uint32_t(split ? p.kchunk : K);
  params.kcount = uint32_t(split ? count : 0);
  params.in_h = uint32_t(p.h), params.in_w = uint32_t(p.w_in), params.in_hw = uint32_t(p.h * p.w_in);
  params.chw = uint32_t(p.cin * p.h * p.w_in);
  params.out_w = uint32_t(p.ow), params.khw = uint32_t(p.kh * p.kw), params.kw = uint32_t(p.kw);
  params.stride_h = uint32_t(p.stride_h), params.stride_w = uint32_t(p.stride_w);
  params.top = uint32_t(p.top), params.left = uint32_t(p.left);
  params.dil_h = uint32_t(p.dil_h), params.dil_w = uint32_t(p.dil_w);
  params.span_h = uint32_t(p.kh * p.dil_h), params.span_w = uint32_t(p.kw * p.dil_w);
  // A thread's reduction rows are `step` apart (the kernel's RS), a mixed
  // radix number (ci, ky, kx) with digits below (Ci, KH, KW).
  const int64_t step = rows ? T / cfg.bn : 1;
  params.step_x = uint32_t((step % p.kw) * p.dil_w);
  params.step_y = uint32_t((step / p.kw % p.kh) * p.dil_h);
  params.step_c = uint32_t(step / (p.kh * p.kw) * p.h * p.w_in);
  const gpu::Pipeline& pl = timed_pipeline(g, cfg);
  Binding weight = Binding::of(p.w);
  if (K != KW) {
    // Once, when the weight is a constant; else on every run.
    gpu::Buffer padded = g.scratch(uint64_t(M * K) * 2, "convolution weight rows padded to 8");
    const gpu::Pipeline& pad = kernel(g, "ops/kernels/pad_rows.wgsl", float_subs(g, DType::F16, op));
    std::vector<Binding> b{Binding::of(padded),
                           g.uniform(PadRowsParams{uint32_t(M * K), uint32_t(KW), uint32_t(K), 0}),
                           Binding::of(p.w)};
    const gpu::Grid grid = grid_for(g, gpu::ceil_div(uint64_t(M * K), 256));
    if (g.info(p.w).kind == TensorKind::Constant)
      g.add_init_dispatch(pad, std::move(b), grid, std::string(op), "weight rows padded to 8");
    else
      g.add_dispatch(pad, std::move(b), grid, std::string(op), "weight rows padded to 8");
    weight = Binding::of(padded);
  }
  std::vector<Binding> bindings{weight, Binding::of(p.x), Binding::of(out), g.uniform(params)};
  if (cfg.bias) bindings.push_back(Binding::of(p.bias));
  if (cfg.affine) bindings.push_back(Binding::of(p.affine));
  if (cfg.residual) bindings.push_back(Binding::of(p.residual));
  g.add_dispatch(pl, std::move(bindings), gpu::Grid{uint32_t(tiles_n), uint32_t(tiles_m), uint32_t(p.batch * p.splits)},
                 std::string(op),
                 fmt::format("{} subgroup-matrix {}x{}x{}{}{}", what, M, N, KW,
                             p.batch > 1 ? fmt::format(" batch {}", p.batch) : "", cfg.bias ? " bias" : "") +
                     (cfg.affine ? " affine" : "") + (cfg.residual ? " residual" : "") + activation_label(p.act.act) +
                     (split ? fmt::format(" splitk={}", p.splits) : "") + (cfg.emulate ? " emulated" : ""),
                 2.0 * double(M) * double(N) * double(KW) * double(p.batch));
  return true;
}

}  // namespace wgnn::ops

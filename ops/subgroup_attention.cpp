// The tensor-core attention kernel's WGSL (ops/subgroup_attention.h).
#include "ops/subgroup_attention.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "gpu/error.h"
#include "ops/uniforms.h"

namespace wgnn::ops {

namespace {

// Row strides of the staged tiles, in halves: 8 more than the row (16
// bytes), against bank conflicts of the matrix loads.
uint32_t pad8(uint32_t n) { return n + 8; }

}  // namespace

bool SubgroupAttentionConfig::two_v_tiles() const { return v_double && vec && prefetch; }
bool SubgroupAttentionConfig::pair_shuffle() const { return shuffle && !emulate; }

uint32_t SubgroupAttentionConfig::workgroup_bytes() const {
  const uint32_t q = qreg ? 0 : queries() * pad8(d) * 2, k = bkv * pad8(d) * 2;
  const uint32_t v = (two_v_tiles() ? 2 : 1) * bkv * pad8(dv) * 2;
  const uint32_t scores = sg * 16 * bkv * 4, p = sg * 16 * (p_pad ? pad8(bkv) : bkv) * 2;
  const uint32_t red = pair_shuffle() ? 0 : threads() * 4;
  return q + k + v + scores + p + red + 16;  // and the rescale flag
}

std::string SubgroupAttentionConfig::name() const {
  return fmt::format("subgroup attention D={} Dv={} q{} k{}{}{}{}{}{}{}{}{}{}", d, dv, queries(), bkv,
                     mask ? (mask_f16 ? " mask-f16" : " mask") : "", vec ? " vec" : "",
                     vec && prefetch ? " prefetch" : "", two_v_tiles() ? " two-v" : "", pair_shuffle() ? " shuffle" : "",
                     p_pad ? "" : " p-unpadded", qreg ? " q-registers" : "", ksplit ? " key-split" : "",
                     emulate ? " emulated" : "");
}

std::string subgroup_attention_wgsl(const SubgroupAttentionConfig& c) {
  const bool valid = c.d % 16 == 0 && c.dv % 16 == 0 && c.d >= 16 && c.dv >= 16 && c.d <= 128 && c.dv <= 128 &&
                     c.sg >= 1 && c.sg <= 8 && c.bkv % 16 == 0 && c.bkv >= 16 && c.bkv <= 128;
  if (!valid) throw Error(fmt::format("invalid subgroup attention configuration: {}", c.name()));
  const uint32_t WG = c.threads(), BQ = c.queries(), BKV = c.bkv, D = c.d, DV = c.dv;
  const uint32_t QS = pad8(D), KST = pad8(D), VS = pad8(DV), PS = c.p_pad ? pad8(BKV) : BKV, HALF = BKV / 2;
  const uint32_t NJ = BKV / 16, ND = D / 16, NO = DV / 16, NK = BKV / 16;
  const bool pf = c.vec && c.prefetch, two_v = c.two_v_tiles(), shfl = c.pair_shuffle();

  std::string s;
  auto add = [&](const std::string& line) {
    s += line;
    s += '\n';
  };
  add("enable f16;");
  if (shfl) add("enable subgroups;");
  // The mark gpu::Pipeline::tensor_cores() reads (the emulation's too: a
  // tiered plan waits for either alike).
  add("// wgnn: tensor-core kernel");
  if (!c.emulate) {
    add("enable chromium_experimental_subgroup_matrix;");
    add("diagnostic(off, chromium.subgroup_matrix_uniformity);");
  }
  add(AttentionParams::wgsl());
  const std::string in = c.vec ? "vec4<u32>" : "f16";
  add("@group(0) @binding(0) var<storage, read_write> out: array<f16>;");
  add("@group(0) @binding(1) var<uniform> params: Params;");
  add(fmt::format("@group(0) @binding(2) var<storage, read> qb: array<{}>;", in));
  add(fmt::format("@group(0) @binding(3) var<storage, read> kb: array<{}>;", in));
  add(fmt::format("@group(0) @binding(4) var<storage, read> vb: array<{}>;", in));
  if (c.mask) add(fmt::format("@group(0) @binding(5) var<storage, read> mb: array<{}>;", c.mask_f16 ? "f16" : "f32"));
  // Bindings are given in order: the parts' follows the mask's, if any.
  if (c.ksplit) add(fmt::format("@group(0) @binding({}) var<storage, read_write> part: array<f32>;", c.mask ? 6 : 5));
  add(fmt::format("const QS = {}u; const KST = {}u; const VS = {}u; const PS = {}u; const BKV = {}u; const HALF = {}u;",
                  QS, KST, VS, PS, BKV, HALF));
  add(fmt::format("const VT = {}u;", BKV * VS));  // a V tile
  // A row's max is raised only when a block's scores pass it by more than
  // TAU (then its O and sum are rescaled): p = e^(x - max) stays below e^8
  // (float16 holds it; O and the sums are float32).
  add("const TAU: f32 = 8.0;");
  if (!c.qreg) add(fmt::format("var<workgroup> qs: array<f16, {}>;", BQ * QS));
  // One K and P tile; one V tile, or two (two_v). K, V and P all
  // double-buffered made 20 KB for head dims of 64: two workgroups per
  // multiprocessor of an H200 instead of three (docs/DAWN.md), and the
  // Whisper encoder's attention slower (docs/BENCHMARKS.md).
  add(fmt::format("var<workgroup> ks: array<f16, {}>;", BKV * KST));
  add(fmt::format("var<workgroup> vs: array<f16, {}>;", (two_v ? 2 : 1) * BKV * VS));
  add(fmt::format("var<workgroup> sc: array<f32, {}>;", c.sg * 16 * BKV));
  add(fmt::format("var<workgroup> ps: array<f16, {}>;", c.sg * 16 * PS));
  if (!shfl) add(fmt::format("var<workgroup> red: array<f32, {}>;", WG));
  // Set by any lane whose row's max rose this block (then every subgroup
  // rescales its O, in workgroup-uniform control flow); lanes may set it
  // to the same 1 together. 16 bytes, as every workgroup variable here: a
  // 4-byte one (u32 or atomic<u32>) made the subgroup-matrix results wrong
  // on an H200 under Vulkan (docs/DAWN.md).
  add("var<workgroup> rescale: vec4<u32>;");
  // -inf from a private variable's bits (a constant's bitcast to inf is a
  // shader-creation error); the running max starts at the lowest finite f32.
  add("var<private> inf_bits: u32 = 0x7f800000u;");
  add("const LOWEST: f32 = -0x1.fffffep+127f;");
  if (c.qreg && c.emulate) add(fmt::format("var<private> qr: array<f16, {}>;", D));  // the lane's q row

  // The eight halves of vec4<u32> `x` into `dst` from `o`.
  auto unpack8 = [&](const std::string& ind, const std::string& dst) {
    for (int w = 0; w < 4; ++w)
      add(fmt::format("{0}{{ let h = bitcast<vec2<f16>>(x[{1}]); {2}[o + {3}u] = h.x; {2}[o + {4}u] = h.y; }}", ind, w, dst,
                      2 * w, 2 * w + 1));
  };
  // Rows [row0, row0 + ROWS) of a q / k / v view (element `base` of the
  // (b, h), row stride rs, element stride es along the head dim) into a
  // workgroup tile of row stride `st`, zeros past `limit`.
  auto stage = [&](const std::string& fn, const std::string& buf, const std::string& dst, uint32_t rows, uint32_t dim,
                   uint32_t st) {
    add(fmt::format("fn {}(base: u32, row0: u32, limit: u32, rs: u32, es: u32, lid: u32) {{", fn));
    if (c.vec) {
      add(fmt::format("  for (var i = lid; i < {}u; i += {}u) {{", rows * dim / 8, WG));
      add(fmt::format("    let r = i / {0}u; let cc = i - r * {0}u; let j = row0 + r;", dim / 8));
      add("    var x = vec4<u32>();");
      add(fmt::format("    if (j < limit) {{ x = {}[(base + j * rs) / 8u + cc]; }}", buf));
      add(fmt::format("    let o = r * {}u + cc * 8u;", st));
      unpack8("    ", dst);
      add("  }");
    } else {
      add(fmt::format("  for (var i = lid; i < {}u; i += {}u) {{", rows * dim, WG));
      add(fmt::format("    let r = i / {0}u; let d = i - r * {0}u; let j = row0 + r;", dim));
      add("    var x = f16();");
      add(fmt::format("    if (j < limit) {{ x = {}[base + j * rs + d * es]; }}", buf));
      add(fmt::format("    {}[r * {}u + d] = x;", dst, st));
      add("  }");
    }
    add("}");
  };
  // With qreg, q is staged 16 rows (one subgroup's) at a time through ks
  // (QS == KST), from which that subgroup loads its left matrices.
  stage("stage_q", "qb", c.qreg ? "ks" : "qs", c.qreg ? 16 : BQ, D, QS);
  stage("stage_k", "kb", "ks", BKV, D, KST);
  stage("stage_v", "vb", "vs", BKV, DV, VS);
  // Prefetch (vec4 loads only): the next block's K / V rows go into
  // registers while this block is multiplied and scanned (fetch_*), and
  // into workgroup memory at the start of the next iteration (put_*), so
  // that the global loads' latency is not waited for between barriers.
  auto prefetch = [&](const std::string& name, const std::string& buf, const std::string& dst, uint32_t dim,
                      uint32_t st) {
    const uint32_t chunks = BKV * dim / 8, regs = (chunks + WG - 1) / WG;
    add(fmt::format("var<private> pf_{}: array<vec4<u32>, {}>;", name, regs));
    add(fmt::format("fn fetch_{}(base: u32, row0: u32, limit: u32, rs: u32, lid: u32) {{", name));
    add(fmt::format("  for (var t = 0u; t < {}u; t++) {{", regs));
    add(fmt::format("    let i = lid + t * {}u; let r = i / {}u; let cc = i - r * {}u; let j = row0 + r;", WG, dim / 8,
                    dim / 8));
    add("    var x = vec4<u32>();");
    add(fmt::format("    if (i < {}u && j < limit) {{ x = {}[(base + j * rs) / 8u + cc]; }}", chunks, buf));
    add(fmt::format("    pf_{}[t] = x;", name));
    add("  }");
    add("}");
    add(fmt::format("fn put_{}(lid: u32, to: u32) {{", name));
    add(fmt::format("  for (var t = 0u; t < {}u; t++) {{", regs));
    add(fmt::format("    let i = lid + t * {}u; let r = i / {}u; let cc = i - r * {}u;", WG, dim / 8, dim / 8));
    add(fmt::format("    if (i < {}u) {{", chunks));
    add(fmt::format("      let o = to + r * {}u + cc * 8u; let x = pf_{}[t];", st, name));
    unpack8("      ", dst);
    add("    }");
    add("  }");
    add("}");
  };
  if (pf) {
    prefetch("k", "kb", "ks", D, KST);
    prefetch("v", "vb", "vs", DV, VS);
  }

  if (c.emulate) {
    // A result matrix as a lane holds it: row lane / 2, columns
    // (lane % 2) * 8 + 0..7, as the columns of a mat2x4. The loops' bound
    // 16 + params.splits (0) keeps lavapipe from unrolling them.
    auto emu = [&](const std::string& fn, const std::string& a_at, const std::string& b_at) {
      add(fmt::format("fn {}(acc: mat2x4<f32>, l: u32, r: u32, lane: u32) -> mat2x4<f32> {{", fn));
      add("  var o = acc; let row = lane / 2u; let c0 = (lane % 2u) * 8u;");
      add("  for (var k = 0u; k < 16u + params.splits; k++) {");
      add(fmt::format("    let a = f32({});", a_at));
      for (int h = 0; h < 2; ++h) {
        std::string b[4];
        for (int e = 0; e < 4; ++e) b[e] = fmt::format(fmt::runtime(b_at), fmt::format("(c0 + {}u)", 4 * h + e));
        add(fmt::format("    o[{}] += a * vec4<f32>(f32({}), f32({}), f32({}), f32({}));", h, b[0], b[1], b[2], b[3]));
      }
      add("  }");
      add("  return o;");
      add("}");
    };
    // k^T: column n is K row n. With qreg, q is the lane's own row in qr.
    emu("emu_qk", c.qreg ? "qr[l + k]" : "qs[l + row * QS + k]", "ks[r + {} * KST + k]");
    emu("emu_pv", "ps[l + row * PS + k]", "vs[r + k * VS + {}]");
    add("fn emu_store(off: u32, stride: u32, v: mat2x4<f32>, lane: u32) {");
    add("  let o = off + (lane / 2u) * stride + (lane % 2u) * 8u;");
    for (int e = 0; e < 8; ++e) add(fmt::format("  sc[o + {}u] = v[{}][{}];", e, e / 4, e % 4));
    add("}");
    add("fn emu_load(off: u32, stride: u32, lane: u32) -> mat2x4<f32> {");
    add("  let o = off + (lane / 2u) * stride + (lane % 2u) * 8u;");
    add("  return mat2x4<f32>(vec4<f32>(sc[o], sc[o + 1u], sc[o + 2u], sc[o + 3u]),");
    add("                     vec4<f32>(sc[o + 4u], sc[o + 5u], sc[o + 6u], sc[o + 7u]));");
    add("}");
  }
  const std::string result_t = c.emulate ? "mat2x4<f32>" : "subgroup_matrix_result<f32, 16, 16>";
  // acc += left (16 x 16 at `lo` of `la`, row-major) @ right (at `ro` of
  // `ra`, column-major where `rcm`); `emu` is the emulated form's function.
  auto mma = [&](const std::string& ind, const std::string& acc, const std::string& emu, const std::string& la,
                 const std::string& lo, const std::string& ls, const std::string& ra, const std::string& ro,
                 const std::string& rs, bool rcm) {
    if (c.emulate) {
      add(fmt::format("{}{} = {}({}, {}, {}, lane);", ind, acc, emu, acc, lo, ro));
    } else {
      add(fmt::format("{}{{ let lm = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&{}, {}, false, {});", ind, la,
                      lo, ls));
      add(fmt::format("{}  let rm = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&{}, {}, {}, {});", ind, ra, ro,
                      rcm, rs));
      add(fmt::format("{}  {} = subgroupMatrixMultiplyAccumulate(lm, rm, {}); }}", ind, acc, acc));
    }
  };
  // q rows @ k^T: the right matrix is column-major in ks (column n = the
  // staged K row n). P @ V: both row-major.
  auto mma_qk = [&](const std::string& ind, const std::string& acc, const std::string& qo, const std::string& ko,
                    uint32_t dd) {
    if (c.qreg && !c.emulate) {
      add(fmt::format("{}{{ let rm = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&ks, {}, true, KST);", ind, ko));
      add(fmt::format("{}  {} = subgroupMatrixMultiplyAccumulate(qm{}, rm, {}); }}", ind, acc, dd, acc));
      return;
    }
    mma(ind, acc, "emu_qk", "qs", qo, "QS", "ks", ko, "KST", true);
  };
  auto mma_pv = [&](const std::string& ind, const std::string& acc, const std::string& po, const std::string& vo) {
    mma(ind, acc, "emu_pv", "ps", po, "PS", "vs", vo, "VS", false);
  };
  auto store = [&](const std::string& ind, const std::string& acc, const std::string& off, const std::string& stride) {
    if (c.emulate) {
      add(fmt::format("{}emu_store({}, {}, {}, lane);", ind, off, stride, acc));
    } else {
      add(fmt::format("{}subgroupMatrixStore(&sc, {}, {}, false, {});", ind, off, acc, stride));
    }
  };
  // The block's scores for this subgroup's 16 queries into sc (row stride
  // BKV): NJ result matrices, one at a time.
  auto scores = [&](const std::string& ind) {
    if (c.emulate) {
      add(fmt::format("{}for (var j = 0u; j < {}u + params.splits; j++) {{", ind, NJ));
      add(fmt::format("{}  var acc = {}();", ind, result_t));
      add(fmt::format("{}  for (var dd = 0u; dd < {}u + params.splits; dd++) {{", ind, ND));
      mma_qk(ind + "    ", "acc", c.qreg ? "dd * 16u" : "qrow + dd * 16u", "j * 16u * KST + dd * 16u", 0);
      add(fmt::format("{}  }}", ind));
      store(ind + "  ", "acc", "sbase + j * 16u", "BKV");
      add(fmt::format("{}}}", ind));
      return;
    }
    for (uint32_t j = 0; j < NJ; ++j) {
      add(fmt::format("{}{{ var acc = {}();", ind, result_t));
      for (uint32_t dd = 0; dd < ND; ++dd)
        mma_qk(ind + "  ", "acc", fmt::format("qrow + {}u", dd * 16), fmt::format("{}u", j * 16 * KST + dd * 16), dd);
      store(ind + "  ", "acc", fmt::format("sbase + {}u", j * 16), "BKV");
      add(fmt::format("{}}}", ind));
    }
  };
  // The other lane of this lane's row's value of `v` (lanes 2r and 2r + 1):
  // a shuffle, or (emulated: any subgroup size) through workgroup memory,
  // whose next write to red comes after a barrier the partner's read
  // precedes (the one before P @ V in the loop).
  auto partner = [&](const std::string& ind, const std::string& v) -> std::string {
    if (shfl) return fmt::format("subgroupShuffleXor({}, 1u)", v);
    add(fmt::format("{}red[lid] = {};", ind, v));
    add(fmt::format("{}workgroupBarrier();", ind));
    return "red[lid ^ 1u]";
  };
  // The lane's score of column `col` of its row: scale * S + mask, -inf past S.
  auto score_at = [&](const std::string& ind) {
    add(fmt::format("{}let key = k0 + col;", ind));
    add(fmt::format("{}var x = sc[srow + col] * params.scale;", ind));
    if (c.mask) add(fmt::format("{}if (live && key < S) {{ x += f32(mb[mbase + key * params.ms.w]); }}", ind));
    add(fmt::format("{}x = select(neg_inf, x, key < S);", ind));
  };

  add(fmt::format("@compute @workgroup_size({})", WG));
  add("fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,");
  add("        @builtin(local_invocation_index) lid: u32) {");
  add("  let flat = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;");
  add("  let groups = params.B * params.H * params.q_tiles;");
  if (c.ksplit) {
    // This workgroup's keys [kb, S): range kr of params.kchunk keys.
    add("  if (flat >= groups * params.ksplits) { return; }");
    add("  let kr = flat / groups; let gq = flat - kr * groups;");
    add("  let kb = kr * params.kchunk; let S = min(params.S, kb + params.kchunk);");
    // The result is the merge pass's to write; a use the compiler keeps
    // holds binding 0 in the layout (apad1 is never this).
    add("  if (params.apad1 == 0x7fffffffu) { out[0] = f16(0.0); }");
  } else {
    add("  if (flat >= groups) { return; }");
    add("  let gq = flat; let kb = 0u; let S = params.S;");
  }
  add("  let bh = gq / params.q_tiles; let qt = gq - bh * params.q_tiles;");
  add("  let b = bh / params.H; let h = bh - b * params.H;");
  add("  let sg = lid / 32u; let lane = lid % 32u;");
  add("  let L = params.L;");
  add(fmt::format("  let q0 = qt * {}u;", BQ));
  // This lane's query row r of its subgroup (two lanes per row: half hf of
  // each block's columns), its staged rows and scratch.
  add("  let r = lane / 2u; let hf = lane % 2u;");
  add("  let l = q0 + sg * 16u + r; let live = l < L;");
  add("  let qrow = sg * 16u * QS;");
  add("  let sbase = sg * 16u * BKV; let srow = sbase + r * BKV;");
  add("  let pbase = sg * 16u * PS; let prow = pbase + r * PS;");
  add("  let neg_inf = -bitcast<f32>(inf_bits);");
  add("  let kbase = params.offs.y + b * params.ks.x + h * params.ks.y;");
  add("  let vbase = params.offs.z + b * params.vs.x + h * params.vs.y;");
  if (c.mask) add("  let mbase = params.offs.w + b * params.ms.x + h * params.ms.y + l * params.ms.z;");
  add("  let qbase = params.offs.x + b * params.qs.x + h * params.qs.y;");
  if (c.qreg) {
    // Each subgroup's 16 q rows through ks in turn, into its left matrices
    // (or, emulated, the lane's row into qr) for the whole kernel.
    if (!c.emulate) {
      for (uint32_t dd = 0; dd < ND; ++dd) add(fmt::format("  var qm{}: subgroup_matrix_left<f16, 16, 16>;", dd));
    }
    add(fmt::format("  for (var s = 0u; s < {}u; s++) {{", c.sg));
    add("    stage_q(qbase, q0 + s * 16u, L, params.qs.z, params.qs.w, lid);");
    add("    workgroupBarrier();");
    add("    if (s == sg) {");
    if (c.emulate) {
      add(fmt::format("      for (var d = 0u; d < {}u; d++) {{ qr[d] = ks[r * KST + d]; }}", D));
    } else {
      for (uint32_t dd = 0; dd < ND; ++dd)
        add(fmt::format("      qm{} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&ks, {}u, false, KST);", dd,
                        dd * 16));
    }
    add("    }");
    add("    workgroupBarrier();");
    add("  }");
  } else {
    add("  stage_q(qbase, q0, L, params.qs.z, params.qs.w, lid);");
  }

  // One pass over the key blocks (online softmax): O and the sum are kept
  // against a running max m that a block raises only past m + TAU.
  if (c.emulate) {
    add(fmt::format("  var o: array<mat2x4<f32>, {}>;", NO));
  } else {
    for (uint32_t j = 0; j < NO; ++j) add(fmt::format("  var o{} = {}();", j, result_t));
  }
  add("  var m = LOWEST;");
  add("  var lsum = 0.0;");
  add("  let c0 = hf * 8u;");
  const std::string fetch_next =
      "fetch_k(kbase, k0 + BKV, S, params.ks.z, lid); fetch_v(vbase, k0 + BKV, S, params.vs.z, lid);";
  if (pf) add("  fetch_k(kbase, kb, S, params.ks.z, lid); fetch_v(vbase, kb, S, params.vs.z, lid);");
  if (two_v) {
    // The first block's tiles; later blocks' are put during the block
    // before (below). vo: the V tile this block reads.
    add("  put_k(lid, 0u); put_v(lid, 0u);");
    add("  workgroupBarrier();");
    add("  var vo = 0u;");
  }
  add("  for (var k0 = kb; k0 < S; k0 += BKV) {");
  if (two_v) {
    add("    let more = k0 + BKV < S;");
    add("    if (more) { " + fetch_next + " }");
  } else if (pf) {
    add("    put_k(lid, 0u); put_v(lid, 0u);");
    add("    workgroupBarrier();");
    add("    if (k0 + BKV < S) { " + fetch_next + " }");
  } else {
    add("    stage_k(kbase, k0, S, params.ks.z, params.ks.w, lid);");
    add("    stage_v(vbase, k0, S, params.vs.z, params.vs.w, lid);");
    add("    workgroupBarrier();");
  }
  scores("    ");
  add("    workgroupBarrier();");
  // Each lane reads its half of the row's scores once, into registers
  // (x0, x1, ...), starting at a per-row rotation: the 16 rows' lanes read
  // different banks of the scratch at each step. The pair's maxima make
  // the block's max (the same value in both lanes, so the same decisions).
  add("    let rot = (r * BKV / 32u) % HALF;");
  add("    var bm = neg_inf;");
  for (uint32_t i = 0; i < HALF; ++i) {
    add(fmt::format("    var x{}: f32;", i));
    add(fmt::format("    {{ let col = hf * HALF + ({}u + rot) % HALF;", i));
    score_at("      ");
    add(fmt::format("      x{0} = x; bm = max(bm, x); }}", i));
  }
  add(fmt::format("    bm = max(bm, {});", partner("    ", "bm")));
  // A row with no weight yet (m still LOWEST: O and the sum are 0) takes
  // the block's max without a rescale; a row masked -inf everywhere keeps
  // LOWEST, its p are 0 and its 0 / 0 is NaN, as the math says.
  add("    var alpha = 1.0;");
  add("    if (bm > m + TAU) {");
  add("      if (m != LOWEST) { alpha = exp(m - bm); lsum *= alpha; rescale.x = 1u; }");
  add("      m = bm;");
  add("    }");
  // The sum is of the float16 weights that multiply V.
  for (uint32_t i = 0; i < HALF; ++i)
    add(fmt::format("    {{ let col = hf * HALF + ({0}u + rot) % HALF; let p = f16(exp(x{0} - m)); lsum += f32(p); "
                    "ps[prow + col] = p; }}",
                    i));
  // The next block's K (its scores are stored: the last reads of K) and V
  // (into the tile the last block read), made visible by the barrier below.
  if (two_v) add("    if (more) { put_k(lid, 0u); put_v(lid, VT - vo); }");
  // The barrier before P @ V, and the flag read uniformly. Rescaling goes
  // through the scratch: each O matrix stored, the lanes' rows scaled by
  // their alpha (1 where the max did not move), loaded back.
  add("    if (workgroupUniformLoad(&rescale).x != 0u) {");
  for (uint32_t j = 0; j < NO; ++j) {
    const std::string oj = c.emulate ? fmt::format("o[{}]", j) : fmt::format("o{}", j);
    add("      workgroupBarrier();");
    if (j == 0) add("      if (lid == 0u) { rescale.x = 0u; }");
    store("      ", oj, "sbase", "16u");
    add("      workgroupBarrier();");
    add("      for (var e = 0u; e < 8u; e++) { sc[sbase + r * 16u + c0 + e] *= alpha; }");
    add("      workgroupBarrier();");
    if (c.emulate)
      add(fmt::format("      {} = emu_load(sbase, 16u, lane);", oj));
    else
      add(fmt::format("      {} = subgroupMatrixLoad<{}>(&sc, sbase, false, 16u);", oj, result_t));
  }
  // With two V tiles no barrier ends the block: this one keeps the next
  // block's scores from overwriting the scratch before every lane has loaded.
  if (two_v) add("      workgroupBarrier();");
  add("    }");
  const std::string vo = two_v ? "vo + " : "";
  if (c.emulate) {
    add(fmt::format("    for (var j = 0u; j < {}u + params.splits; j++) {{", NO));
    add(fmt::format("      for (var kk = 0u; kk < {}u + params.splits; kk++) {{", NK));
    mma_pv("        ", "o[j]", "pbase + kk * 16u", vo + "kk * 16u * VS + j * 16u");
    add("      }");
    add("    }");
  } else {
    for (uint32_t kk = 0; kk < NK; ++kk)
      for (uint32_t j = 0; j < NO; ++j)
        mma_pv("    ", fmt::format("o{}", j), fmt::format("pbase + {}u", kk * 16),
               vo + fmt::format("{}u", kk * 16 * VS + j * 16));
  }
  if (two_v)
    add("    vo = VT - vo;");
  else
    add("    workgroupBarrier();");
  add("  }");

  // The row sums, then O / sum through the result's view.
  add(fmt::format("  let total = lsum + {};", partner("  ", "lsum")));
  if (c.ksplit) {
    // The range's unnormalised rows, then their max and sum.
    add(fmt::format("  let orow = (((kr * params.B + b) * params.H + h) * L + l) * {}u;", attention_part_row(DV)));
    add(fmt::format("  if (live && hf == 0u) {{ part[orow + {}u] = m; part[orow + {}u] = total; }}", DV, DV + 1));
  } else {
    add("  let inv = 1.0 / total;");
    add("  let obase = params.o_off + b * params.os.x + h * params.os.y + l * params.os.z;");
  }
  auto emit = [&](const std::string& ind, const std::string& acc, const std::string& j16) {
    add(fmt::format("{}workgroupBarrier();", ind));
    store(ind, acc, "sbase", "16u");
    add(fmt::format("{}workgroupBarrier();", ind));
    add(fmt::format("{}if (live) {{", ind));
    add(fmt::format("{}  for (var e = 0u; e < 8u; e++) {{", ind));
    if (c.ksplit)
      add(fmt::format("{}    part[orow + {} + c0 + e] = sc[sbase + r * 16u + c0 + e];", ind, j16));
    else
      add(fmt::format("{}    out[obase + ({} + c0 + e) * params.os.w] = f16(sc[sbase + r * 16u + c0 + e] * inv);", ind, j16));
    add(fmt::format("{}  }}", ind));
    add(fmt::format("{}}}", ind));
  };
  if (c.emulate) {
    add(fmt::format("  for (var j = 0u; j < {}u + params.splits; j++) {{", NO));
    emit("    ", "o[j]", "j * 16u");
    add("  }");
  } else {
    for (uint32_t j = 0; j < NO; ++j) emit("  ", fmt::format("o{}", j), fmt::format("{}u", j * 16));
  }
  add("}");
  return s;
}

uint32_t attention_part_row(uint32_t dv) { return dv + 4; }

std::string subgroup_attention_combine_wgsl(uint32_t dv) {
  std::string s = "enable f16;\n" + AttentionParams::wgsl();
  // A thread per four values of a row: vec4 reads of each range's part row
  // (16-byte aligned: dv is a multiple of 16, the row dv + 4 floats).
  s += fmt::format(R"(
@group(0) @binding(0) var<storage, read_write> out: array<f16>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> part: array<vec4<f32>>;
const DV = {0}u;
const RS4 = {1}u;  // a part row in vec4s: DV values, then the max, the sum and two unused
const LOWEST: f32 = -0x1.fffffep+127f;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * 256u + lid;
  let rows = params.B * params.H * params.L;
  if (i >= rows * (DV / 4u)) {{ return; }}
  let row = i / (DV / 4u); let d4 = i - row * (DV / 4u);
  let bh = row / params.L; let l = row - bh * params.L;
  let b = bh / params.H; let h = bh - b * params.H;
  let stride = rows * RS4;
  var mx = LOWEST;
  for (var r = 0u; r < params.ksplits; r++) {{ mx = max(mx, part[r * stride + row * RS4 + DV / 4u].x); }}
  var num = vec4<f32>();
  var den = 0.0;
  for (var r = 0u; r < params.ksplits; r++) {{
    let at = r * stride + row * RS4;
    let ms = part[at + DV / 4u];
    let w = exp(ms.x - mx);
    num += w * part[at + d4];
    den += w * ms.y;
  }}
  let o = num / den;
  let base = params.o_off + b * params.os.x + h * params.os.y + l * params.os.z + d4 * 4u * params.os.w;
  out[base] = f16(o.x);
  out[base + params.os.w] = f16(o.y);
  out[base + 2u * params.os.w] = f16(o.z);
  out[base + 3u * params.os.w] = f16(o.w);
}}
)", dv, attention_part_row(dv) / 4);
  return s;
}

SubgroupAttentionConfig pick_subgroup_attention(const gpu::Context& ctx, uint32_t d, uint32_t dv, uint64_t queries) {
  SubgroupAttentionConfig none;
  none.sg = 0;
  if (d % 16 || dv % 16 || d == 0 || dv == 0 || d > 128 || dv > 128) return none;
  const uint64_t limit = ctx.limits().max_compute_workgroup_storage_size;
  const uint32_t max_threads = ctx.limits().max_compute_invocations_per_workgroup;
  auto env_is = [&](const char* name, const char* value) {
    const char* e = ctx.settings().get(name);
    return e && std::string(e) == value;
  };
  const bool qreg = !env_is("WGNN_SUBGROUP_ATTENTION_QREG", "0");
  // The forms of the block loop (ops/subgroup_attention.h); only measuring
  // switches them.
  auto form = [&](SubgroupAttentionConfig& c) {
    c.qreg = qreg;
    c.v_double = !env_is("WGNN_SUBGROUP_ATTENTION_VTILES", "1");
    c.shuffle = ctx.features().subgroups && !env_is("WGNN_SUBGROUP_ATTENTION_SHUFFLE", "0");
    c.p_pad = !env_is("WGNN_SUBGROUP_ATTENTION_PPAD", "0");
  };
  // Sized for the most a configuration of these tiles can take: one V tile
  // (the caller adds the second where it fits) and the pair's exchange in
  // workgroup memory (the emulated kernel's).
  auto bytes = [](SubgroupAttentionConfig c) {
    c.v_double = false, c.shuffle = false;
    return c.workgroup_bytes();
  };
  // WGNN_SUBGROUP_ATTENTION_TILE=SGxBKV fixes the subgroups and keys per block (tuning).
  if (const char* env = ctx.settings().get("WGNN_SUBGROUP_ATTENTION_TILE"); env && *env) {
    SubgroupAttentionConfig c;
    c.d = d, c.dv = dv;
    form(c);
    char tail = 0;
    if (std::sscanf(env, "%ux%u%c", &c.sg, &c.bkv, &tail) != 2)
      throw Error(fmt::format("WGNN_SUBGROUP_ATTENTION_TILE='{}': expected SGxBKV, e.g. 4x32", env));
    subgroup_attention_wgsl(c);  // validates
    if (bytes(c) > limit || c.threads() > max_threads)
      throw Error(fmt::format("WGNN_SUBGROUP_ATTENTION_TILE='{}' needs {} bytes of workgroup memory for D={} Dv={}; "
                              "this device allows {}",
                              env, bytes(c), d, dv, limit));
    return c;
  }
  // Blocks of 16 keys on 4 subgroups (64 queries, 14 KB for head dims of
  // 64: three workgroups per multiprocessor) run the Whisper-base encoder's
  // attention (1,500 queries) fastest on an H200: 1.33 ms of GPU for the
  // model in one pass, against 1.40 on 2 subgroups and 1.55 on 8; for
  // DaViT-B's windows (49) and DeiT-T (197) 2 subgroups were faster by 1-2%
  // (docs/BENCHMARKS.md).
  constexpr uint64_t kShortQueries = 256;
  for (uint32_t sg : {4u, 2u, 1u}) {
    if (sg == 4 && queries <= kShortQueries) continue;
    SubgroupAttentionConfig c;
    c.d = d, c.dv = dv, c.sg = sg, c.bkv = 16;
    form(c);
    if (bytes(c) <= limit && c.threads() <= max_threads) return c;
  }
  return none;
}

}  // namespace wgnn::ops

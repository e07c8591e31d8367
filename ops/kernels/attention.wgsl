// Scaled-dot-product attention in one dispatch, flash-style (ops/attention.cpp):
//   O[b, h, l, :] = softmax_s(scale * q[b, h, l, :] . k[b, h, s, :] + mask[b, h, l, s]) @ v[b, h, s, :]
// without the L x S scores in memory. q, k, v, the mask and O are read and
// written through strided views (element offset and strides in `params`,
// strides may be 0); q, k, v are stored as {{T}}, the mask as {{M}}; all math
// is f32.
//
// A workgroup takes BQ queries of one (b, h); KS threads share a query
// (thread lid: query lid % BQ, key split lid / BQ), so a warp of consecutive
// threads reads the same key rows (broadcasts). A thread keeps its query
// row (times scale) and its output row in registers (D and DV are
// constants: the loops over them unroll). Keys go in tiles of BK: K and V
// rows are staged in workgroup memory as vec4<f32> (rows padded to an odd
// number of vec4s, so that the KS key rows a warp reads at once fall in
// different banks); each thread scores its KPT = BK / KS keys of the tile
// (keys ks, ks + KS, ...), rescales its output once when the tile raised its
// running max m (o *= exp(m_old - m_new)), then adds p * V for those keys
// (online softmax: running max m, sum l, output o, all f32). At the end the
// KS partial (m, l, o) of a query merge through workgroup memory (fixed
// order: deterministic) and O = o / l is written.
//
// The running max starts at the lowest finite f32, not -inf: keys masked
// with -inf (and keys past S in the last tile) score -inf and get p = 0,
// never exp(-inf - -inf); a row masked -inf everywhere gives 0 / 0 = NaN,
// as the math does. Float-min masks (exporters' "-inf") stay finite:
// exp(-3.4e38 - m) is an exact 0.
{{ENABLE}}

const D: u32 = {{D}}u;    // head dim of q and k
const DV: u32 = {{DV}}u;  // head dim of v and O
const ND: u32 = (D + 3u) / 4u;
const NV: u32 = (DV + 3u) / 4u;
const KR: u32 = ND | 1u;  // vec4s per staged K row (odd)
const VR: u32 = NV | 1u;
const BQ: u32 = {{BQ}}u;  // queries per workgroup
const KS: u32 = {{KS}}u;  // threads per query (key splits)
const BK: u32 = {{BK}}u;  // keys per tile, a multiple of KS
const KPT: u32 = BK / KS;
const WG: u32 = BQ * KS;
const TILE: u32 = {{TILE}}u;  // vec4s of workgroup memory: >= BK * (KR + VR) and >= WG * CW
const CW: u32 = {{CW}}u;      // vec4s of o per thread per merge round (divides NV)
const V_OFF: u32 = BK * KR;

override HAS_MASK: bool = false;
// vec4 loads along D (stride 1, D a multiple of 4, every row start a
// multiple of 4); else scalar loads, keys innermost when K_KEYS / V_KEYS
// (k stored transposed: consecutive threads read consecutive keys).
override Q_VEC: bool = false;
override K_VEC: bool = false;
override V_VEC: bool = false;
override K_KEYS: bool = false;
override V_KEYS: bool = false;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> qb: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read> kb: array<vec4<{{T}}>>;
@group(0) @binding(4) var<storage, read> vb: array<vec4<{{T}}>>;
@group(0) @binding(5) var<storage, read> mb: array<{{M}}>;

// K rows [BK][KR], then V rows [BK][VR]; reused by the final merge.
var<workgroup> tile: array<vec4<f32>, TILE>;
var<workgroup> red: array<f32, WG>;

// -inf from a private variable's bits (a bitcast of a constant to inf is a
// shader-creation error).
var<private> inf_bits: u32 = 0x7f800000u;
const LOWEST: f32 = -0x1.fffffep+127f;

fn q_at(i: u32) -> f32 { return f32(qb[i >> 2u][i & 3u]); }
fn k_at(i: u32) -> f32 { return f32(kb[i >> 2u][i & 3u]); }
fn v_at(i: u32) -> f32 { return f32(vb[i >> 2u][i & 3u]); }

// The K rows of keys k0 .. k0 + BK - 1 into tile[r * KR ..], zeros past S
// and past D. The vec4 paths (contiguous rows: the common layouts) loop a
// constant number of times, so that they unroll and every global load of
// the tile is in flight before a store waits on one; the scalar paths
// (transposed or odd layouts) are plain loops (4x the iterations, which
// unrolled would mostly lengthen compiling).
const K_VEC_IT: u32 = (BK * ND + WG - 1u) / WG;
const V_VEC_IT: u32 = (BK * NV + WG - 1u) / WG;

fn load_k(k0: u32, base: u32, lid: u32) {
  let S = params.S;
  let sn = params.ks.z;
  let sd = params.ks.w;
  if (K_VEC) {
    for (var it = 0u; it < K_VEC_IT; it++) {
      let i = lid + it * WG;
      let r = i / ND;
      let c = i - r * ND;
      let j = k0 + r;
      var x = vec4<f32>(0.0);
      if (j < S && i < BK * ND) {
        x = vec4<f32>(kb[((base + j * sn) >> 2u) + c]);
      }
      if (i < BK * ND) {
        tile[r * KR + c] = x;
      }
    }
  } else {
    for (var i = lid; i < BK * ND * 4u; i += WG) {
      var r = i / (ND * 4u);
      var d = i - r * (ND * 4u);
      if (K_KEYS) {
        r = i % BK;
        d = i / BK;
      }
      let j = k0 + r;
      var x = 0.0;
      if (j < S && d < D) {
        x = k_at(base + j * sn + d * sd);
      }
      tile[r * KR + d / 4u][d % 4u] = x;
    }
  }
}

fn load_v(k0: u32, base: u32, lid: u32) {
  let S = params.S;
  let sn = params.vs.z;
  let sd = params.vs.w;
  if (V_VEC) {
    for (var it = 0u; it < V_VEC_IT; it++) {
      let i = lid + it * WG;
      let r = i / NV;
      let c = i - r * NV;
      let j = k0 + r;
      var x = vec4<f32>(0.0);
      if (j < S && i < BK * NV) {
        x = vec4<f32>(vb[((base + j * sn) >> 2u) + c]);
      }
      if (i < BK * NV) {
        tile[V_OFF + r * VR + c] = x;
      }
    }
  } else {
    for (var i = lid; i < BK * NV * 4u; i += WG) {
      var r = i / (NV * 4u);
      var d = i - r * (NV * 4u);
      if (V_KEYS) {
        r = i % BK;
        d = i / BK;
      }
      let j = k0 + r;
      var x = 0.0;
      if (j < S && d < DV) {
        x = v_at(base + j * sn + d * sd);
      }
      tile[V_OFF + r * VR + d / 4u][d % 4u] = x;
    }
  }
}

// Four output values of (b, h, l) from dim c * 4 (those below DV).
fn store4(base: u32, c: u32, x: vec4<f32>) {
  for (var i = 0u; i < 4u; i++) {
    let d = c * 4u + i;
    if (d < DV) {
      out[base + d * params.os.w] = {{T}}(x[i]);
    }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let flat = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  if (flat >= params.B * params.H * params.q_tiles) {
    return;
  }
  let bh = flat / params.q_tiles;
  let qt = flat - bh * params.q_tiles;
  let b = bh / params.H;
  let h = bh - b * params.H;
  let qi = lid % BQ;
  let ks = lid / BQ;
  let l = qt * BQ + qi;
  let live = l < params.L;
  let S = params.S;
  let kbase = params.offs.y + b * params.ks.x + h * params.ks.y;
  let vbase = params.offs.z + b * params.vs.x + h * params.vs.y;
  let mbase = params.offs.w + b * params.ms.x + h * params.ms.y + l * params.ms.z;
  let neg_inf = -bitcast<f32>(inf_bits);

  // The query row, times scale (zeros past D, and for rows past L).
  var q: array<vec4<f32>, ND>;
  if (live) {
    let qbase = params.offs.x + b * params.qs.x + h * params.qs.y + l * params.qs.z;
    for (var c = 0u; c < ND; c++) {
      var x = vec4<f32>(0.0);
      if (Q_VEC) {
        x = vec4<f32>(qb[(qbase >> 2u) + c]);
      } else {
        for (var i = 0u; i < 4u; i++) {
          let d = c * 4u + i;
          if (d < D) {
            x[i] = q_at(qbase + d * params.qs.w);
          }
        }
      }
      q[c] = x * params.scale;
    }
  }

  var o: array<vec4<f32>, NV>;
  var m = LOWEST;
  var lsum = 0.0;
  for (var k0 = 0u; k0 < S; k0 += BK) {
    load_k(k0, kbase, lid);
    load_v(k0, vbase, lid);
    workgroupBarrier();
    // Scores of this thread's keys k0 + ks + t * KS.
    var s: array<f32, KPT>;
    var mt = m;
    for (var t = 0u; t < KPT; t++) {
      let r = t * KS + ks;
      let j = k0 + r;
      // Four independent chains of FMAs, summed at the end.
      var acc4 = vec4<f32>(0.0);
      for (var c = 0u; c < ND; c++) {
        acc4 = fma(q[c], tile[r * KR + c], acc4);
      }
      var acc = (acc4.x + acc4.y) + (acc4.z + acc4.w);
      if (HAS_MASK && live && j < S) {
        acc += f32(mb[mbase + j * params.ms.w]);
      }
      s[t] = select(neg_inf, acc, j < S);
      mt = max(mt, s[t]);
    }
    // One rescale per tile, only where the max rose.
    if (mt > m) {
      let alpha = exp(m - mt);
      lsum *= alpha;
      for (var c = 0u; c < NV; c++) {
        o[c] *= alpha;
      }
      m = mt;
    }
    for (var t = 0u; t < KPT; t++) {
      let p = exp(s[t] - m);
      lsum += p;
      let row = V_OFF + (t * KS + ks) * VR;
      for (var c = 0u; c < NV; c++) {
        o[c] = fma(vec4<f32>(p), tile[row + c], o[c]);
      }
    }
    workgroupBarrier();
  }

  let obase = params.o_off + b * params.os.x + h * params.os.y + l * params.os.z;
  if (KS == 1u) {
    if (live) {
      let inv = 1.0 / lsum;
      for (var c = 0u; c < NV; c++) {
        store4(obase, c, o[c] * inv);
      }
    }
    return;
  }

  // Merge the KS partials of each query: common max, summed l and o. The
  // loops over the partials read workgroup memory only and need no
  // unrolling; their bound is a uniform (params.splits = KS), not the
  // constant, so that compilers that unroll every constant loop (lavapipe)
  // do not.
  let splits = params.splits;
  red[lid] = m;
  workgroupBarrier();
  var mx = red[qi];
  for (var k = 1u; k < splits; k++) {
    mx = max(mx, red[k * BQ + qi]);
  }
  let f = exp(m - mx);
  workgroupBarrier();
  red[lid] = lsum * f;
  workgroupBarrier();
  var total = 0.0;
  for (var k = 0u; k < splits; k++) {
    total += red[k * BQ + qi];
  }
  let inv = 1.0 / total;
  // o in rounds of CW vec4s per thread; the KS threads of a query share
  // the round's sums.
  for (var c0 = 0u; c0 < NV; c0 += CW) {
    for (var c = 0u; c < CW; c++) {
      tile[lid * CW + c] = o[c0 + c] * f;
    }
    workgroupBarrier();
    for (var c = ks; c < CW; c += KS) {
      var acc = vec4<f32>(0.0);
      for (var k = 0u; k < splits; k++) {
        acc += tile[(k * BQ + qi) * CW + c];
      }
      if (live) {
        store4(obase, c0 + c, acc * inv);
      }
    }
    workgroupBarrier();
  }
}

// Scaled-dot-product attention in one dispatch, blocked over queries and
// keys (ops/attention.cpp, record_blocked): for many queries over many keys
// (the Whisper encoder's 1500 x 1500 per head), where attention.wgsl's
// thread per query leaves the GPU half empty and two products write and
// read the L x S scores.
//
// A workgroup takes BQ = 4 * QG queries of one (b, h); its QG * KG threads
// are a QG x KG grid (thread lid: query group lid / KG, key group lid % KG).
// Keys go in tiles of BK = 4 * KG. For each tile a thread:
//   1. scores its 4 queries against its 4 keys (16 sums over D, q and k
//      read as vec4 straight from their buffers: a workgroup reads the same
//      few rows again and again, which the cache serves);
//   2. writes its rows' largest score to `red`; after a barrier every
//      thread of a row reads the row's KG maxima, so all of them move the
//      row's running max m alike; rescales its sums and outputs by
//      exp(m_old - m_new);
//   3. writes p = exp(s - m) to `probs` ([key][query group], 4 rows a vec4);
//      after a barrier adds p * V for every key of the tile into its 4 rows'
//      outputs, its columns being vec4s kg, kg + KG, ... of Dv.
// A row's sum l stays split over its KG threads (they share m) and is
// merged once at the end in a fixed order (deterministic); O = o / l.
// Two barriers per tile: each workgroup-memory array is written only after
// the barrier that follows the reads of its previous contents.
//
// Keys past S score -inf (p = 0) and read the last key's row; query rows
// past L read the last row and are not written. The running max starts at
// the lowest finite f32, as in attention.wgsl: a row masked -inf everywhere
// gives 0 / 0 = NaN, as the math does. q, k and v are views with D and Dv
// contiguous (vec4 loads, element offsets and row strides multiples of 4);
// the mask is read as scalars through its strides; the result is written
// through its view. {{T}}: q, k, v and O storage; {{M}}: the mask's; all
// math is f32.
{{ENABLE}}

const D: u32 = {{D}}u;    // head dim of q and k (a multiple of 4)
const DV: u32 = {{DV}}u;  // head dim of v and O (a multiple of 4)
const ND: u32 = D / 4u;
const NV: u32 = DV / 4u;
const QG: u32 = {{QG}}u;  // query groups of 4 rows
const KG: u32 = {{KG}}u;  // key groups of 4 keys
const BQ: u32 = QG * 4u;
const BK: u32 = KG * 4u;
const WG: u32 = QG * KG;
const CPT: u32 = (NV + KG - 1u) / KG;  // vec4 columns of O per thread

override HAS_MASK: bool = false;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> qb: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read> kb: array<vec4<{{T}}>>;
@group(0) @binding(4) var<storage, read> vb: array<vec4<{{T}}>>;
@group(0) @binding(5) var<storage, read> mb: array<{{M}}>;

var<workgroup> probs: array<vec4<f32>, BK * QG>;  // [key][query group]: p of 4 rows
var<workgroup> red: array<f32, BQ * KG>;          // [row][key group]

// -inf from a private variable's bits (a bitcast of a constant to inf is a
// shader-creation error).
var<private> inf_bits: u32 = 0x7f800000u;
const LOWEST: f32 = -0x1.fffffep+127f;

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
  let qg = lid / KG;
  let kg = lid - qg * KG;
  let L = params.L;
  let S = params.S;
  let neg_inf = -bitcast<f32>(inf_bits);

  // This thread's 4 query rows: vec4 index of each row's start (rows past L
  // read the last), and whether it is written.
  let qbase = params.offs.x + b * params.qs.x + h * params.qs.y;
  let row0 = qt * BQ + qg * 4u;
  var qrow: array<u32, 4>;
  var mrow: array<u32, 4>;
  for (var i = 0u; i < 4u; i++) {
    let r = min(row0 + i, L - 1u);
    qrow[i] = (qbase + r * params.qs.z) >> 2u;
    mrow[i] = params.offs.w + b * params.ms.x + h * params.ms.y + r * params.ms.z;
  }
  let kbase = params.offs.y + b * params.ks.x + h * params.ks.y;
  let vbase = params.offs.z + b * params.vs.x + h * params.vs.y;

  var o: array<vec4<f32>, 4u * CPT>;  // [row][column]
  var m = vec4<f32>(LOWEST);
  var l = vec4<f32>(0.0);
  for (var k0 = 0u; k0 < S; k0 += BK) {
    // 1. Scores: s[j][i] of row i and key k0 + kg * 4 + j.
    var krow: array<u32, 4>;
    for (var j = 0u; j < 4u; j++) {
      krow[j] = (kbase + min(k0 + kg * 4u + j, S - 1u) * params.ks.z) >> 2u;
    }
    var s = array<vec4<f32>, 4>();
    for (var c = 0u; c < ND; c++) {
      let q0 = vec4<f32>(qb[qrow[0] + c]);
      let q1 = vec4<f32>(qb[qrow[1] + c]);
      let q2 = vec4<f32>(qb[qrow[2] + c]);
      let q3 = vec4<f32>(qb[qrow[3] + c]);
      for (var j = 0u; j < 4u; j++) {
        let kv = vec4<f32>(kb[krow[j] + c]);
        s[j] += vec4<f32>(dot(q0, kv), dot(q1, kv), dot(q2, kv), dot(q3, kv));
      }
    }
    var mt = vec4<f32>(LOWEST);
    for (var j = 0u; j < 4u; j++) {
      let key = k0 + kg * 4u + j;
      var x = s[j] * params.scale;
      if (HAS_MASK && key < S) {
        x += vec4<f32>(f32(mb[mrow[0] + key * params.ms.w]), f32(mb[mrow[1] + key * params.ms.w]),
                       f32(mb[mrow[2] + key * params.ms.w]), f32(mb[mrow[3] + key * params.ms.w]));
      }
      s[j] = select(vec4<f32>(neg_inf), x, key < S);
      mt = max(mt, s[j]);
    }
    // 2. The rows' running max, alike in all KG threads of a row.
    for (var i = 0u; i < 4u; i++) {
      red[(qg * 4u + i) * KG + kg] = mt[i];
    }
    workgroupBarrier();
    for (var i = 0u; i < 4u; i++) {
      for (var g = 0u; g < KG; g++) {
        mt[i] = max(mt[i], red[(qg * 4u + i) * KG + g]);
      }
    }
    let mn = max(m, mt);
    let alpha = exp(m - mn);
    m = mn;
    l *= alpha;
    for (var i = 0u; i < 4u; i++) {
      for (var t = 0u; t < CPT; t++) {
        o[i * CPT + t] *= alpha[i];
      }
    }
    // 3. Probabilities through workgroup memory, then p * V.
    for (var j = 0u; j < 4u; j++) {
      let p = exp(s[j] - m);
      l += p;
      probs[(kg * 4u + j) * QG + qg] = p;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      let p = probs[kk * QG + qg];
      let vrow = (vbase + min(k0 + kk, S - 1u) * params.vs.z) >> 2u;
      for (var t = 0u; t < CPT; t++) {
        let c = kg + t * KG;
        if (c < NV) {
          let v = vec4<f32>(vb[vrow + c]);
          o[t] = fma(vec4<f32>(p.x), v, o[t]);
          o[CPT + t] = fma(vec4<f32>(p.y), v, o[CPT + t]);
          o[2u * CPT + t] = fma(vec4<f32>(p.z), v, o[2u * CPT + t]);
          o[3u * CPT + t] = fma(vec4<f32>(p.w), v, o[3u * CPT + t]);
        }
      }
    }
  }

  // The rows' sums over their KG threads, in key-group order.
  for (var i = 0u; i < 4u; i++) {
    red[(qg * 4u + i) * KG + kg] = l[i];
  }
  workgroupBarrier();
  var total = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i++) {
    for (var g = 0u; g < KG; g++) {
      total[i] += red[(qg * 4u + i) * KG + g];
    }
  }
  let inv = 1.0 / total;
  let obase = params.o_off + b * params.os.x + h * params.os.y;
  for (var i = 0u; i < 4u; i++) {
    let r = row0 + i;
    if (r < L) {
      let rbase = obase + r * params.os.z;
      for (var t = 0u; t < CPT; t++) {
        let c = kg + t * KG;
        if (c < NV) {
          let x = o[i * CPT + t] * inv[i];
          for (var e = 0u; e < 4u; e++) {
            out[rbase + (c * 4u + e) * params.os.w] = {{T}}(x[e]);
          }
        }
      }
    }
  }
}

// Layer norm over rows of `width` elements: out = (x - mean) * rstd * w + b,
// with mean and rstd (f32) written per row.
//
// TPR threads share a row (TPR a power of two, 1..256), so one workgroup of
// 256 covers 256 / TPR rows: short rows pack many to a workgroup, long rows
// get all 256 threads. Values are shifted by the row's first element, so
// rows with a large mean and a small spread keep their precision; each
// thread computes the mean and M2 of its share, and the TPR partial results
// merge pairwise (Chan et al.) in workgroup memory. Never E[x^2] - E[x]^2.
//
// CACHED (CHUNKS <= MAX_CHUNKS chunks per thread): the thread loads its whole
// share into registers at once (many loads in flight), reads x from memory
// once, and computes its mean and M2 in two passes over the registers.
// Otherwise the share streams through a per-chunk Welford/Chan update and x
// is read a second time for the output.
//
// ADD (wgnn.add_layer_norm): x is the sum of two inputs, rounded to their
// dtype as a separate add would, and also written out (the residual).
{{ENABLE}}

override TPR: u32 = 64u;
override CHUNKS: u32 = 4u;
override CACHED: bool = true;
const MAX_CHUNKS: u32 = 16u;
const WG: u32 = 256u;

struct Params {
  rows: u32,
  width_v: u32,     // row width in {{V}} units
  width: f32,       // row width in elements
  eps: f32,
  has_weight: u32,
  has_bias: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> y: array<{{V}}>;
@group(0) @binding(1) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(2) var<storage, read_write> rstd_out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;
@group(0) @binding(4) var<storage, read> x: array<{{V}}>;
@group(0) @binding(5) var<storage, read> weight: array<{{V}}>;
@group(0) @binding(6) var<storage, read> bias: array<{{V}}>;
{{ADD_DECL}}

fn load_x(i: u32) -> {{V}} {
  {{LOAD_X}}
}

var<workgroup> s_n: array<f32, WG>;
var<workgroup> s_mean: array<f32, WG>;
var<workgroup> s_m2: array<f32, WG>;

fn first_element(v: {{V}}) -> f32 {
  return {{FIRST}};
}

fn affine(o_in: {{F32V}}, j: u32) -> {{F32V}} {
  var o = o_in;
  if (params.has_weight != 0u) {
    o = o * {{F32V}}(weight[j]);
  }
  if (params.has_bias != 0u) {
    o = o + {{F32V}}(bias[j]);
  }
  return o;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let group = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  let r_local = lid / TPR;
  let t = lid % TPR;
  let row = group * (WG / TPR) + r_local;
  let live = row < params.rows;
  let base = row * params.width_v;
  let nb = f32({{VW}});

  var shift = 0.0;
  var n = 0.0;
  var mean = 0.0;
  var m2 = 0.0;
  var cache: array<{{F32V}}, MAX_CHUNKS>;
  if (live) {
    shift = first_element(load_x(base));
    if (CACHED) {
      var sum = 0.0;
      for (var c = 0u; c < CHUNKS; c++) {
        let j = t + c * TPR;
        if (j < params.width_v) {
          let v = {{F32V}}(load_x(base + j)) - shift;
          cache[c] = v;
          sum += {{CSUM}};
          n += nb;
        }
      }
      if (n > 0.0) {
        mean = sum / n;
        for (var c = 0u; c < CHUNKS; c++) {
          if (t + c * TPR < params.width_v) {
            let d = cache[c] - mean;
            m2 += {{CSQ}};
          }
        }
      }
    } else {
      for (var j = t; j < params.width_v; j += TPR) {
        let v = {{F32V}}(load_x(base + j)) - shift;
        let cm = {{CSUM}} / nb;
        let d = v - cm;
        let cm2 = {{CSQ}};
        let nn = n + nb;
        let delta = cm - mean;
        mean += delta * (nb / nn);
        m2 += cm2 + delta * delta * (n * nb / nn);
        n = nn;
      }
    }
  }
  s_n[lid] = n;
  s_mean[lid] = mean;
  s_m2[lid] = m2;
  workgroupBarrier();
  for (var off = TPR / 2u; off > 0u; off = off / 2u) {
    if (t < off) {
      let na = s_n[lid];
      let nc = s_n[lid + off];
      let nn = na + nc;
      if (nc > 0.0) {
        let delta = s_mean[lid + off] - s_mean[lid];
        s_mean[lid] = s_mean[lid] + delta * (nc / nn);
        s_m2[lid] = s_m2[lid] + s_m2[lid + off] + delta * delta * (na * nc / nn);
        s_n[lid] = nn;
      }
    }
    workgroupBarrier();
  }
  if (!live) {
    return;
  }
  let head = r_local * TPR;
  let mean_s = s_mean[head];  // mean of (x - shift)
  let variance = max(s_m2[head] / params.width, 0.0);
  let rstd = inverseSqrt(variance + params.eps);
  if (t == 0u) {
    mean_out[row] = mean_s + shift;
    rstd_out[row] = rstd;
  }
  if (CACHED) {
    for (var c = 0u; c < CHUNKS; c++) {
      let j = t + c * TPR;
      if (j < params.width_v) {
        y[base + j] = {{V}}(affine((cache[c] - mean_s) * rstd, j));
      }
    }
  } else {
    for (var j = t; j < params.width_v; j += TPR) {
      y[base + j] = {{V}}(affine(({{F32V}}(load_x(base + j)) - shift - mean_s) * rstd, j));
    }
  }
}

// Group norm (and instance norm: one channel per group) over x [N, C, HxW]:
// each row is one (n, group), `channels per group` x HxW contiguous values;
//   out = (x - mean) * rstd * weight[c] + bias[c]
// with the channel c of each value, and mean and rstd (f32) per row.
//
// The statistics follow layer_norm.wgsl: TPR threads per row (a power of
// two), values shifted by the row's first element, per-thread mean and M2
// merged pairwise (Chan et al.) in workgroup memory; shares of at most
// MAX_CHUNKS chunks stay in registers (CACHED), longer ones stream with a
// per-chunk Welford update. Never E[x^2] - E[x]^2. In the vec4 variant HxW
// is a multiple of 4, so a chunk never straddles two channels.
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
  groups: u32,
  hw_v: u32,        // HxW in {{V}} units
  channels_per_group: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> y: array<{{V}}>;
@group(0) @binding(1) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(2) var<storage, read_write> rstd_out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;
@group(0) @binding(4) var<storage, read> x: array<{{V}}>;
@group(0) @binding(5) var<storage, read> weight: array<{{T}}>;
@group(0) @binding(6) var<storage, read> bias: array<{{T}}>;

var<workgroup> s_n: array<f32, WG>;
var<workgroup> s_mean: array<f32, WG>;
var<workgroup> s_m2: array<f32, WG>;

fn first_element(v: {{V}}) -> f32 {
  return {{FIRST}};
}

// Chunk j of a row of group `grp`: its channel's weight and bias.
fn affine(o_in: {{F32V}}, grp: u32, j: u32) -> {{F32V}} {
  var o = o_in;
  let c = grp * params.channels_per_group + j / params.hw_v;
  if (params.has_weight != 0u) {
    o = o * f32(weight[c]);
  }
  if (params.has_bias != 0u) {
    o = o + f32(bias[c]);
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
  let grp = row % params.groups;
  let nb = f32({{VW}});

  var shift = 0.0;
  var n = 0.0;
  var mean = 0.0;
  var m2 = 0.0;
  var cache: array<{{F32V}}, MAX_CHUNKS>;
  if (live) {
    shift = first_element(x[base]);
    if (CACHED) {
      var sum = 0.0;
      for (var c = 0u; c < CHUNKS; c++) {
        let j = t + c * TPR;
        if (j < params.width_v) {
          let v = {{F32V}}(x[base + j]) - shift;
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
        let v = {{F32V}}(x[base + j]) - shift;
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
        y[base + j] = {{V}}(affine((cache[c] - mean_s) * rstd, grp, j));
      }
    }
  } else {
    for (var j = t; j < params.width_v; j += TPR) {
      y[base + j] = {{V}}(affine(({{F32V}}(x[base + j]) - shift - mean_s) * rstd, grp, j));
    }
  }
}

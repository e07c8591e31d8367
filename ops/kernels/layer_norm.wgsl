// Layer norm over rows of `width` elements: out = (x - mean) * rstd * w + b,
// with mean and rstd (f32) written per row. The statistics are
// lib/row_stats.wgsl's: TPR threads per row (short rows pack up to 256 rows
// per workgroup, long rows get all 256 threads), shifted values, pairwise
// merges, the share in registers when it is at most MAX_CHUNKS chunks.
//
// RMS (aten.rms_norm, wgnn.add_rms_norm): no centring and no bias: out =
// x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps), mean(x^2) taken as
// the row's variance plus its mean squared (both from row_stats: a sum of
// non-negative terms, no cancellation); mean_out is 0.
//
// ADD (wgnn.add_layer_norm): x is the sum of two inputs, rounded to their
// dtype as a separate add would, and also written out (the residual). With
// wgnn.matmul_add_layer_norm the second input is a product split along K:
// its float32 parts (params.parts of them) and its bias are added as the
// sum pass would, rounded, then added to x.
{{ENABLE}}

override TPR: u32 = 64u;
override CHUNKS: u32 = 4u;
override CACHED: bool = true;
override RMS: bool = false;
const MAX_CHUNKS: u32 = 16u;
const WG: u32 = 256u;

{{PARAMS}}

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

fn row_chunk(i: u32) -> {{F32V}} {
  return {{F32V}}(load_x(i));
}

{{include lib/row_stats.wgsl}}

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
  var cache: array<{{F32V}}, MAX_CHUNKS>;
  let st = row_stats(live, base, t, lid, r_local, params.width_v, params.width, params.eps, &cache);
  if (!live) {
    return;
  }
  // What is subtracted from the shifted values (x - shift), and the scale.
  var centre = st.mean_s;
  var rstd = st.rstd;
  if (RMS) {
    let m = st.mean_s + st.shift;
    rstd = inverseSqrt(max(st.m2 / params.width, 0.0) + m * m + params.eps);
    centre = -st.shift;
  }
  if (t == 0u) {
    mean_out[row] = select(st.mean_s + st.shift, 0.0, RMS);
    rstd_out[row] = rstd;
  }
  if (CACHED) {
    for (var c = 0u; c < CHUNKS; c++) {
      let j = t + c * TPR;
      if (j < params.width_v) {
        y[base + j] = {{V}}(affine((cache[c] - centre) * rstd, j));
      }
    }
  } else {
    for (var j = t; j < params.width_v; j += TPR) {
      y[base + j] = {{V}}(affine((row_chunk(base + j) - st.shift - centre) * rstd, j));
    }
  }
}

// Group norm (ops/norm.cpp) for few, long rows: each row of group_norm.wgsl
// is cut into `splits` slices of slice_v chunks, one workgroup a slice, in
// two dispatches.
//   PASS 1: each slice's count, shift (its first element), mean of
//           (x - shift) and M2 (lib/row_stats.wgsl) into `partial`.
//   PASS 2: each workgroup merges its row's slices in order (Chan et al.,
//           means taken relative to the row's first element), writes the
//           row's mean and rstd (slice 0) and normalizes its slice.
// A row of 16 MB over 16 workgroups on a GPU of 132 multiprocessors is
// what this is for (MODNet's instance norms).
{{ENABLE}}

override TPR: u32 = 256u;
override CHUNKS: u32 = 4u;
override CACHED: bool = true;
override PASS: u32 = 1u;
const MAX_CHUNKS: u32 = 16u;
const WG: u32 = 256u;

{{PARAMS}}

{{include lib/group_norm_io.wgsl}}
{{include lib/row_stats.wgsl}}
{{include lib/math.wgsl}}
{{include lib/activation.wgsl}}

// (count, shift, mean of x - shift, M2) per (row, slice).
@group(0) @binding(7) var<storage, read_write> partial: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let w = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  // A whole workgroup is live or not (row_stats has barriers).
  let row = w / params.splits;
  let s = w - row * params.splits;
  if (row >= params.rows) {
    return;
  }
  let start = s * params.slice_v;
  let len = min(params.slice_v, params.width_v - start);
  let base = row * params.width_v;
  if (PASS == 1u) {
    var cache: array<{{F32V}}, MAX_CHUNKS>;
    let st = row_stats(true, base + start, lid, lid, 0u, len, f32(len * {{VW}}u), params.eps, &cache);
    if (lid == 0u) {
      partial[w] = vec4<f32>(st.n, st.shift, st.mean_s, st.m2);
    }
    return;
  }
  let first = row * params.splits;
  let origin = partial[first].y;
  var n = 0.0;
  var mean = 0.0;
  var m2 = 0.0;
  for (var k = 0u; k < params.splits; k++) {
    let p = partial[first + k];
    if (p.x > 0.0) {
      let mb = (p.y - origin) + p.z;
      let nn = n + p.x;
      let delta = mb - mean;
      mean += delta * (p.x / nn);
      m2 += p.w + delta * delta * (n * p.x / nn);
      n = nn;
    }
  }
  let rstd = inverseSqrt(max(m2 / params.width, 0.0) + params.eps);
  if (s == 0u && lid == 0u) {
    mean_out[row] = origin + mean;
    rstd_out[row] = rstd;
  }
  let grp = row % params.groups;
  for (var j = start + lid; j < start + len; j += WG) {
    y[base + j] = {{V}}(finish((row_chunk(base + j) - origin - mean) * rstd, grp, j));
  }
}

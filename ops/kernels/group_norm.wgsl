// Group norm (and instance norm: one channel per group) over x [N, C, HxW]:
// each row is one (n, group), `channels per group` x HxW contiguous values;
//   out = (x - mean) * rstd * weight[c] + bias[c]
// with the channel c of each value, and mean and rstd (f32) per row. The
// statistics are lib/row_stats.wgsl's, as layer_norm's. In the vec4 variant
// HxW is a multiple of 4, so a chunk never straddles two channels.
{{ENABLE}}

override TPR: u32 = 64u;
override CHUNKS: u32 = 4u;
override CACHED: bool = true;
const MAX_CHUNKS: u32 = 16u;
const WG: u32 = 256u;

{{PARAMS}}

{{include lib/group_norm_io.wgsl}}
{{include lib/row_stats.wgsl}}
{{include lib/math.wgsl}}
{{include lib/activation.wgsl}}

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
  var cache: array<{{F32V}}, MAX_CHUNKS>;
  let st = row_stats(live, base, t, lid, r_local, params.width_v, params.width, params.eps, &cache);
  if (!live) {
    return;
  }
  if (t == 0u) {
    mean_out[row] = st.mean_s + st.shift;
    rstd_out[row] = st.rstd;
  }
  if (CACHED) {
    for (var c = 0u; c < CHUNKS; c++) {
      let j = t + c * TPR;
      if (j < params.width_v) {
        y[base + j] = {{V}}(finish((cache[c] - st.mean_s) * st.rstd, grp, j));
      }
    }
  } else {
    for (var j = t; j < params.width_v; j += TPR) {
      y[base + j] = {{V}}(finish((row_chunk(base + j) - st.shift - st.mean_s) * st.rstd, grp, j));
    }
  }
}

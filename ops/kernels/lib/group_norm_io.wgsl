// Group norm's bindings and per-chunk helpers, shared by group_norm.wgsl
// (one workgroup a row) and group_norm_split.wgsl (a row in slices):
// x [N, C, HxW] in rows of `channels per group` x HxW values, y alike,
// mean and rstd (f32) per row, the optional per-channel weight and bias.
// row_chunk is what lib/row_stats.wgsl reads, and finish() applies
// lib/activation.wgsl's activation (lib/math.wgsl, lib/row_stats.wgsl and
// lib/activation.wgsl are included beside this).
@group(0) @binding(0) var<storage, read_write> y: array<{{V}}>;
@group(0) @binding(1) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(2) var<storage, read_write> rstd_out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;
@group(0) @binding(4) var<storage, read> x: array<{{V}}>;
@group(0) @binding(5) var<storage, read> weight: array<{{T}}>;
@group(0) @binding(6) var<storage, read> bias: array<{{T}}>;

fn row_chunk(i: u32) -> {{F32V}} {
  return {{F32V}}(x[i]);
}

// Chunk j of a row of group `grp`, normalized: its channel's weight and
// bias, then the activation (ACT; none by default).
fn finish(o_in: {{F32V}}, grp: u32, j: u32) -> {{F32V}} {
  var o = o_in;
  let c = grp * params.channels_per_group + j / params.hw_v;
  if (params.has_weight != 0u) {
    o = o * f32(weight[c]);
  }
  if (params.has_bias != 0u) {
    o = o + f32(bias[c]);
  }
  return {{ACTIVATE_V}}(o);
}

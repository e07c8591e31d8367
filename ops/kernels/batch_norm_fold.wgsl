// Folds inference batch-norm parameters into one scale and shift per channel:
//   scale = weight / sqrt(var + eps),  shift = bias - mean * scale
// Absent weight / bias count as 1 / 0. Runs once when the parameters are
// constants (see ops/norm.cpp).
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> folded: array<vec2<f32>>;  // (scale, shift)
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> weight: array<{{T}}>;
@group(0) @binding(3) var<storage, read> bias: array<{{T}}>;
@group(0) @binding(4) var<storage, read> mean: array<{{T}}>;
@group(0) @binding(5) var<storage, read> variance: array<{{T}}>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let c = gid.x + gid.y * nwg.x * 64u;
  if (c >= params.channels) {
    return;
  }
  var w = 1.0;
  var b = 0.0;
  if (params.has_weight != 0u) {
    w = f32(weight[c]);
  }
  if (params.has_bias != 0u) {
    b = f32(bias[c]);
  }
  let scale = w * inverseSqrt(f32(variance[c]) + params.eps);
  folded[c] = vec2<f32>(scale, b - f32(mean[c]) * scale);
}

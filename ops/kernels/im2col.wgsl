// The patches of a convolution (ops/conv.cpp record_patches), 1 to 3
// spatial dims seen as D x H x W:
//   cols[n, c * kvol + k, o] = x[n, c, o * stride - pad + k * dil], 0 outside
// for k over the kvol kernel taps (kd, kh, kw) and o over the out_vol
// output positions; a GEMM of the weight [cout, cin * kvol] by cols then
// gives the convolution. One element per invocation, consecutive ones along
// o, so the writes are consecutive and the reads `stride` apart.
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> cols: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let pl = i % params.out_vol;
  let row = i / params.out_vol;  // n * cin * kvol + c * kvol + k
  let k = row % params.kvol;
  let nc = row / params.kvol;  // n * cin + c
  let khw = params.k_h * params.k_w;
  let kk = vec3<i32>(vec3<u32>(k / khw, (k % khw) / params.k_w, k % params.k_w));
  let ohw = params.out_h * params.out_w;
  let o = vec3<i32>(vec3<u32>(pl / ohw, (pl % ohw) / params.out_w, pl % params.out_w));
  // Negative positions wrap to large u32s, outside like those past the end.
  let p = vec3<u32>(o * params.stride.xyz - params.pad.xyz + kk * params.dil.xyz);
  var v = {{T}}(0);
  if (p.x < params.in_d && p.y < params.in_h && p.z < params.in_w) {
    v = x[nc * params.in_vol + (p.x * params.in_h + p.y) * params.in_w + p.z];
  }
  cols[i] = v;
}

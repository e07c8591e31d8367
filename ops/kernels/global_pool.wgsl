// Global pooling: the mean (AVG) or the maximum of each row of `width`
// elements (a row is one (n, c) plane), f32 math. TPR threads share a row
// (a power of two, 1..256), so a workgroup of 256 covers 256 / TPR rows; the
// per-thread results merge pairwise in workgroup memory. The maximum
// propagates NaN (as ATen).
{{ENABLE}}

override TPR: u32 = 64u;
override AVG: bool = false;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

var<workgroup> part: array<f32, WG>;

fn is_nan(v: f32) -> bool {
  return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

fn combine(a: f32, b: f32) -> f32 {
  if (AVG) {
    return a + b;
  }
  if (is_nan(a) || b <= a) {
    return a;
  }
  return b;  // b > a, or b is NaN
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let group = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  let row = group * (WG / TPR) + lid / TPR;
  let t = lid % TPR;
  let live = row < params.rows;
  let base = row * params.width;
  var r = 0.0;
  if (live) {
    if (!AVG) {
      r = f32(x[base]);
    }
    for (var j = t; j < params.width; j += TPR) {
      r = combine(r, f32(x[base + j]));
    }
  }
  part[lid] = r;
  workgroupBarrier();
  for (var off = TPR / 2u; off > 0u; off = off / 2u) {
    if (t < off) {
      part[lid] = combine(part[lid], part[lid + off]);
    }
    workgroupBarrier();
  }
  if (live && t == 0u) {
    var v = part[lid];
    if (AVG) {
      v = v / f32(params.width);
    }
    y[row] = {{T}}(v);
  }
}

// argmax / argmin along one dim: the input viewed as [outer, n, inner]
// (contiguous), one invocation per output (outer * inner of them) walking
// its n elements with stride `inner`. The first extreme wins (the last with
// LAST); in floats a NaN counts as the extreme, so the first NaN's index is
// the result, as in PyTorch. {{T}} is the storage type (f32, f16 or i32 for
// int32 / int64), {{C}} the comparison type (f32 or i32); indices are
// written as int32 (int64 results are stored as int32).
{{ENABLE}}

override MAX: bool = true;
override LAST: bool = false;
override FLOAT: bool = true;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<i32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

fn is_nan(v: {{C}}) -> bool {
  if (!FLOAT) {
    return false;
  }
  return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// v replaces the current best: strictly beyond it, or equal with LAST.
fn better(v: {{C}}, best: {{C}}) -> bool {
  if (LAST && v == best) {
    return true;
  }
  if (MAX) {
    return v > best;
  }
  return v < best;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let o = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (o >= params.count) {
    return;
  }
  let base = (o / params.inner) * params.n * params.inner + o % params.inner;
  var best = {{C}}(x[base]);
  var idx = 0u;
  if (!is_nan(best)) {
    for (var k = 1u; k < params.n; k++) {
      let v = {{C}}(x[base + k * params.inner]);
      if (is_nan(v)) {
        idx = k;
        break;
      }
      if (better(v, best)) {
        best = v;
        idx = k;
      }
    }
  }
  y[o] = i32(idx);
}

// softmax / log_softmax along an axis that is not the innermost: the input
// is viewed as [outer, n, inner] and the axis is the middle one (stride
// `inner`). One invocation per (outer, inner) column, adjacent invocations
// on adjacent columns (coalesced reads); three passes over the column: max,
// sum of exp(x - max), output. Math in f32; {{T}} is the input's storage
// type, {{O}} the output's. Same results as softmax.wgsl (NaN and -inf
// rows included).
{{ENABLE}}

override LOG: bool = false;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{O}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

// max that propagates NaN, testing NaN by its bits (WGSL lets compilers
// assume no NaNs, so `v != v` may fold to false).
fn max_nan(a: f32, v: f32) -> f32 {
  let a_nan = (bitcast<u32>(a) & 0x7fffffffu) > 0x7f800000u;
  let v_nan = (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
  return select(select(a, v, v > a), select(a, v, v_nan), a_nan || v_nan);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let col = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (col >= params.columns) {
    return;
  }
  let inner = params.inner;
  let base = (col / inner) * params.n * inner + col % inner;
  var m = f32(x[base]);  // max is idempotent: no -inf start needed
  for (var k = 1u; k < params.n; k++) {
    let v = f32(x[base + k * inner]);
    m = max_nan(m, v);
  }
  var s = 0.0;
  for (var k = 0u; k < params.n; k++) {
    s += exp(f32(x[base + k * inner]) - m);
  }
  let inv = 1.0 / s;
  let log_s = log(s);
  for (var k = 0u; k < params.n; k++) {
    let d = f32(x[base + k * inner]) - m;
    y[base + k * inner] = {{O}}(select(exp(d) * inv, d - log_s, LOG));
  }
}

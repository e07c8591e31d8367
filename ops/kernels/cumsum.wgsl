// aten.cumsum and wgnn.cumprod (ops/cumsum.cpp): one invocation per column
// (outer, inner) walks the `n` elements along the axis (stride `inner`),
// forward or in reverse, writing the running sum (OP +, INIT 0) or product
// (OP *, INIT 1) including (or, exclusive, before) each element. Floats
// accumulate in float32, integers in i32 (wrapping).
{{ENABLE}}

const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<{{T}}>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let col = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (col >= params.cols) {
    return;
  }
  let n = params.n;
  let base = (col / params.inner) * n * params.inner + col % params.inner;
  var acc = {{A}}({{INIT}});
  for (var s = 0u; s < n; s++) {
    let i = select(s, n - 1u - s, params.reverse != 0u);
    let at = base + i * params.inner;
    let v = {{A}}(src[at]);
    if (params.exclusive != 0u) {
      dst[at] = {{T}}(acc);
      acc = acc {{OP}} v;
    } else {
      acc = acc {{OP}} v;
      dst[at] = {{T}}(acc);
    }
  }
}

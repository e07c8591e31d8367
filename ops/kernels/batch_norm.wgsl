// Inference batch norm on N x C x (inner) data: y = x * scale[c] + shift[c],
// with (scale, shift) folded by batch_norm_fold.wgsl. {{V}} is vec4<{{T}}>
// when the inner size is a multiple of 4 (each vec4 then lies in one
// channel), else {{T}}; math is f32. Then lib/activation.wgsl's activation
// (ACT; none by default).
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{V}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{V}}>;
@group(0) @binding(3) var<storage, read> folded: array<vec2<f32>>;

{{include lib/math.wgsl}}
{{include lib/activation.wgsl}}

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let c = (i / params.inner) % params.channels;
  let st = folded[c];
  y[i] = {{V}}({{ACTIVATE_V}}({{F32V}}(x[i]) * st.x + st.y));
}

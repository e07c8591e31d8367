// Unary elementwise ops: dst = f(src), four elements per invocation, math in
// f32 whatever the storage type {{T}}. ops/elementwise.cpp supplies f as the
// expression {{EXPR}} of `x` (vec4<f32>) and the parameters p0, p1.
// Entry points: `main` (src -> dst) and `main_inplace` (dst -> dst).
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<vec4<{{T}}>>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<vec4<{{T}}>>;

{{include lib/math.wgsl}}
{{include lib/f16.wgsl}}

fn f(x: vec4<f32>) -> vec4<f32> {
  let p0 = params.p0;
  let p1 = params.p1;
  return {{EXPR}};
}

const WG: u32 = 256u;

fn flat_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = flat_index(wid, nwg, lid);
  if (i < params.count) {
    dst[i] = vec4<{{T}}>(f(vec4<f32>(src[i])));
  }
}

@compute @workgroup_size(WG)
fn main_inplace(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let i = flat_index(wid, nwg, lid);
  if (i < params.count) {
    dst[i] = vec4<{{T}}>(f(vec4<f32>(dst[i])));
  }
}

// dst = src, one vec4<f32> per invocation. The memory-bandwidth yardstick
// that every other kernel's GB/s is compared with.
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;

override WG: u32 = 256;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i < arrayLength(&dst)) {
    dst[i] = src[i];
  }
}

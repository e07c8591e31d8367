// The second pass of a split-K product (matmul.wgsl with SPLITK, float32):
// adds the `splits` parts part[s * count + i] in order, then alpha and the
// activation (ACT of lib/activation.wgsl), one thread per output element.
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> part: array<f32>;

const WG: u32 = 256u;

{{include lib/math.wgsl}}
{{include lib/activation.wgsl}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  var acc = 0.0;
  var at = i;
  for (var s = 0u; s < params.splits; s++) {
    acc += part[at];
    at += params.count;
  }
  out[i] = {{T}}(activate(acc * params.alpha));
}

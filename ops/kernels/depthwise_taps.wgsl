// A depthwise convolution's weight [C, 1, *k] (per channel, its taps in a
// row) as [*k, C] (per tap, its channels in a row): the layout in which
// kernels/conv_depthwise_cl.wgsl loads four channels' weights of a tap as
// one vector, consecutive threads consecutive vectors. Runs once when the
// weight is a constant (ops/conv.cpp).
//   dst[t * channels + c] = src[c * taps + t]
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.count) {
    return;
  }
  let t = i / params.channels;
  let c = i - t * params.channels;
  dst[i] = src[c * params.taps + t];
}

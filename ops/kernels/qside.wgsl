// The requantization parameters of a QLinear product or convolution packed
// into one u32 buffer (`side`), so that the product's kernel binds one
// buffer for all of them (WebGPU's default limit is 8 storage buffers per
// stage): [a_scale (nsa values) | b_scale (nsb) | y_scale | y_zero_point |
// bias (nbias)], scales (float32 or float16 each) as f32 bits, integers as i32 bits. Once at prepare()
// when they are constants (ops/quantized.cpp).
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> side: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> sa: array<{{SA}}>;
@group(0) @binding(3) var<storage, read> sb: array<{{SB}}>;
@group(0) @binding(4) var<storage, read> sy: array<{{SY}}>;
@group(0) @binding(5) var<storage, read> zy: array<i32>;
@group(0) @binding(6) var<storage, read> bias: array<i32>;

const WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.total) {
    return;
  }
  let b0 = params.nsa + params.nsb;
  if (i < params.nsa) {
    side[i] = bitcast<u32>(f32(sa[i]));
  } else if (i < b0) {
    side[i] = bitcast<u32>(f32(sb[i - params.nsa]));
  } else if (i == b0) {
    side[i] = bitcast<u32>(f32(sy[0]));
  } else if (i == b0 + 1u) {
    side[i] = bitcast<u32>(zy[0]);
  } else {
    side[i] = bitcast<u32>(bias[i - b0 - 2u]);
  }
}

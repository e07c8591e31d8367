// QuantizeLinear / DequantizeLinear, one element per invocation.
// Quantize: dst = clamp(round(x / scale[s]) + zp[s], qmin, qmax),
//   round half to even, decided as IEEE division would (round_div,
//   lib/quant.wgsl: WGSL's division may be 2.5 ULP off) (a scale of 0
//   gives the zero point: DynamicQuantizeLinear of all zeros); dst is int32
//   storage (uint8 and int8 values are stored as 32-bit integers, and a
//   uint8 value 0..255 has the same bits as u32 and as i32).
// Dequantize: dst = f32(x - zp[s]) * scale[s], x and zp read
//   as i32 (uint8, int8 or int32 storage).
// ops/quantized.cpp supplies the body, one of the two. s, the scale's
// index: 0 (per tensor), the index along the axis (per axis), or the
// block's index (blocked: scale has x's shape with ceil(dim / block) along
// the axis).
{{ENABLE}}
{{include lib/quant.wgsl}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{DST}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<{{SRC}}>;
@group(0) @binding(3) var<storage, read> scale: array<{{S}}>;
@group(0) @binding(4) var<storage, read> zp: array<i32>;

const WG: u32 = 256u;

fn scale_index(i: u32) -> u32 {
  if (params.mode == 0u) {
    return 0u;
  }
  let a = (i / params.inner) % params.dim;
  if (params.mode == 1u) {
    return a;
  }
  let o = i / (params.inner * params.dim);
  let r = i % params.inner;
  return (o * params.sdim + a / params.block) * params.inner + r;
}

fn zero_point(s: u32) -> i32 {
  if (params.has_zp == 0u) {
    return 0;
  }
  return zp[s];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let s = scale_index(i);
  let z = zero_point(s);
{{BODY}}
}

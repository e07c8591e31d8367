// DynamicQuantizeLinear's parameters from the data's min and max (one
// invocation): the range extended to hold 0, scale = (max - min) / 255,
// zero_point = round(saturate(0 - min / scale)) (half to even); a range of
// 0 (all zeros) gives scale 0 and zero point 0. Both divisions round as
// IEEE's do (lib/quant.wgsl), so the results are ONNX Runtime's on any GPU.
{{include lib/quant.wgsl}}
@group(0) @binding(0) var<storage, read_write> scale: array<f32>;
@group(0) @binding(1) var<storage, read_write> zp: array<i32>;
@group(0) @binding(2) var<storage, read> mn: array<f32>;
@group(0) @binding(3) var<storage, read> mx: array<f32>;

@compute @workgroup_size(1)
fn main() {
  let lo = min(mn[0], 0.0);
  let hi = max(mx[0], 0.0);
  let s = div255(hi - lo);
  var z = 0.0;
  if (s > 0.0) {
    z = clamp(round_div(0.0 - lo, s), 0.0, 255.0);
  }
  scale[0] = s;
  zp[0] = i32(z);
}

// DynamicQuantizeLinear's parameters from the data's min and max (one
// invocation): the range extended to hold 0, scale = (max - min) / 255,
// zero_point = round(saturate(0 - min / scale)) (half to even); a range of
// 0 (all zeros) gives scale 0 and zero point 0.
@group(0) @binding(0) var<storage, read_write> scale: array<f32>;
@group(0) @binding(1) var<storage, read_write> zp: array<i32>;
@group(0) @binding(2) var<storage, read> mn: array<f32>;
@group(0) @binding(3) var<storage, read> mx: array<f32>;

@compute @workgroup_size(1)
fn main() {
  let lo = min(mn[0], 0.0);
  let hi = max(mx[0], 0.0);
  let s = (hi - lo) / 255.0;
  var z = 0.0;
  if (s > 0.0) {
    z = round(clamp(0.0 - lo / s, 0.0, 255.0));
  }
  scale[0] = s;
  zp[0] = i32(z);
}

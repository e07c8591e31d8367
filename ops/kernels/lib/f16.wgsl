// float16 rounding in float32 arithmetic, for values kept in float32 storage.
// Integer arithmetic on the bits: drivers fold f32(f16(v)) (and
// pack2x16float then unpack2x16float) into v.

// v rounded to float16's precision: to nearest even, subnormals on
// float16's grid, no overflow to infinity (finite values beyond 65504 keep
// float16's 11 significant bits).
fn round_f16(v: f32) -> f32 {
  if (abs(v) < 6.103515625e-05) { return round(v * 16777216.0) * 5.9604644775390625e-08; }
  let b = bitcast<u32>(v);
  return bitcast<f32>((b + 0xFFFu + ((b >> 13u) & 1u)) & 0xFFFFE000u);
}

// v as an IEEE float32 -> float16 conversion gives it, widened back: rounded
// to nearest even, beyond float16's range an infinity of v's sign, NaN kept.
fn cast_f16(v: f32) -> f32 {
  let r = round_f16(v);
  let b = bitcast<u32>(v);
  let inf = bitcast<f32>((b & 0x80000000u) | 0x7F800000u);
  return select(r, inf, abs(r) > 65504.0 && (b & 0x7FFFFFFFu) <= 0x7F800000u);
}

fn cast_f16_4(x: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(cast_f16(x.x), cast_f16(x.y), cast_f16(x.z), cast_f16(x.w));
}

// Quantization's roundings, as ONNX Runtime computes them with IEEE
// division. WGSL's f32 division may be off by 2.5 ULP (NVIDIA's is): a
// quotient near a half-integer then lands on the wrong side, and a uint8
// result is off by one step. These decide exactly, with products that are
// exact in f32 (operands split by masking their low mantissa bits) and
// differences exact by Sterbenz's lemma; a fused multiply-add in their
// place gives the same results, since the products are exact. Needs the
// including kernel to keep f32 semantics (no fast-math reassociation,
// which WGSL does not allow).

// x - h * s exactly, for h with at most 11 significant bits (a half-integer
// below 1024 in magnitude) and s > 0: s's top 13 significant bits times h
// fit 24 bits, the rest times h fits 22, and the residual is representable.
fn quant_residual(x: f32, h: f32, s: f32) -> f32 {
  let sh = bitcast<f32>(bitcast<u32>(s) & 0xfffff800u);
  let sl = s - sh;
  return (x - h * sh) - h * sl;
}

// round(x / s), half to even, where x / s is the f32 quotient rounded as
// IEEE division rounds it (ONNX Runtime's: round(fl(x / s))), for
// quotients below 1000 in magnitude (what a quantizer keeps before it
// saturates); larger ones, s = 0, NaN and inf as round(x / s). Only a
// quotient near a half-integer h can go wrong: fl(x / s) is h exactly when
// the exact residual x - h * s is within half an ULP of h (times s), ties
// to h's even neighbour; else the residual's sign says the side.
fn round_div(x: f32, s: f32) -> f32 {
  let q0 = x / s;
  if (!(abs(q0) < 1000.0) || s == 0.0) {
    return round(q0);
  }
  let xs = select(x, -x, s < 0.0);
  let sa = abs(s);
  let k = floor(xs / sa);
  let h = k + 0.5;
  let r = quant_residual(xs, h, sa);
  let half_ulp = bitcast<f32>(bitcast<u32>(abs(h)) & 0x7f800000u) * (1.0 / 16777216.0) * sa;
  let h_even = (bitcast<u32>(h) & 1u) == 0u;
  if (abs(r) < half_ulp || (abs(r) == half_ulp && h_even)) {
    // fl(x / s) == h: a tie, to the even one of k and k + 1.
    return select(k + 1.0, k, fract(k * 0.5) == 0.0);
  }
  return select(k, k + 1.0, r > 0.0);
}

// d / 255 rounded correctly (half to even) for finite d >= 0: the quotient
// is moved by one ULP while the exact residual d - q * 255 says so.
fn div255(d: f32) -> f32 {
  var q = d / 255.0;
  if (!(d > 0.0) || !(q >= 1.17549435e-38) || q > 1.0e36) {
    return q;
  }
  for (var i = 0; i < 3; i++) {
    let qh = bitcast<f32>(bitcast<u32>(q) & 0xffff0000u);  // 8 significant bits
    let ql = q - qh;                                         // 16
    let r = (d - qh * 255.0) - ql * 255.0;                   // d - q * 255, exactly
    let half = bitcast<f32>(bitcast<u32>(q) & 0x7f800000u) * (255.0 / 16777216.0);  // ulp(q) / 2 * 255
    let bits = bitcast<u32>(q);
    if (r > half || (r == half && (bits & 1u) == 1u)) {
      q = bitcast<f32>(bits + 1u);
    } else if (r < -half || (r == -half && (bits & 1u) == 1u)) {
      q = bitcast<f32>(bits - 1u);
    } else {
      break;
    }
  }
  return q;
}

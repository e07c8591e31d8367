// Included by kernels (an include line, ops::kernel): float math that
// several kernels share.
//
// WGSL lets a compiler assume that no value is NaN or infinite, so NaN is
// tested on the bits (no assumption can fold that away), and functions that
// must keep NaN select it explicitly.

fn isnan1(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn isnan4(x: vec4<f32>) -> vec4<bool> {
  return (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u);
}
fn isinf4(x: vec4<f32>) -> vec4<bool> {
  return (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) == vec4<u32>(0x7f800000u);
}
// The sign bit (true for -0.0).
fn signbit4(x: vec4<f32>) -> vec4<bool> { return (bitcast<vec4<u32>>(x) & vec4<u32>(0x80000000u)) != vec4<u32>(0u); }
// NaN and inf from the bits of private variables: a bitcast of a constant to
// a non-finite value is a shader-creation error in WGSL.
var<private> nan_bits: u32 = 0x7fc00000u;
var<private> inf_bits: u32 = 0x7f800000u;
fn nan4() -> vec4<f32> { return vec4<f32>(bitcast<f32>(nan_bits)); }
fn inf4() -> vec4<f32> { return vec4<f32>(bitcast<f32>(inf_bits)); }

// erf(x): for |x| < 0.5 its Taylor series (relative error about 1e-9 before
// rounding, so erf(1e-8) is 1.128e-8, not 0); beyond, Numerical Recipes'
// erfc Chebyshev fit (about 1.2e-7 absolute). NaN stays NaN. WGSL has no erf.
fn erf1(x: f32) -> f32 {
  let z = abs(x);
  let x2 = x * x;
  let series = 1.1283791670955126 * x *
               (1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 +
               x2 * (-1.0 / 1320.0 + x2 * (1.0 / 9360.0)))))));
  let t = 1.0 / (1.0 + 0.5 * z);
  let poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
             t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  let fit = select(1.0 - t * exp(poly), t * exp(poly) - 1.0, x < 0.0);
  return select(select(fit, series, z < 0.5), x, isnan1(x));
}

fn erf4(x: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(erf1(x.x), erf1(x.y), erf1(x.z), erf1(x.w));
}

// GELU(x) = x * Phi(x) = x / 2 * erfc(-x / sqrt(2)), aten.gelu's
// approximate='none'. erfc(z) for z = |x| / sqrt(2) >= 0 from the same
// Chebyshev fit as erf1 (relative error about 1.2e-7 for every z), then
// Phi = erfc / 2 for x < 0 and 1 - erfc / 2 beyond: no cancellation in
// 1 + erf for negative x (GELU(-5) keeps its digits) and no series branch
// (Phi is near 1/2 where the series would be needed), so about half of
// erf1's instructions. NaN stays NaN.
fn gelu1(x: f32) -> f32 {
  let z = abs(x) * 0.70710678118654752;
  let t = 1.0 / (1.0 + 0.5 * z);
  let poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
             t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  let half_erfc = 0.5 * t * exp(poly);
  return select(x * select(1.0 - half_erfc, half_erfc, x < 0.0), x, isnan1(x));
}

fn gelu4(x: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(gelu1(x.x), gelu1(x.y), gelu1(x.z), gelu1(x.w));
}

// tanh(x): for |x| < 0.5 its Taylor series to x^13 (relative error below
// 1e-7; a form through exp loses all relative precision near 0), beyond
// 1 - 2 / (exp(2|x|) + 1) with x's sign (exp overflowing gives 1). NaN
// stays NaN.
fn tanh1(x: f32) -> f32 {
  let z = abs(x);
  let x2 = x * x;
  let series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0 +
               x2 * (-1382.0 / 155925.0 + x2 * (21844.0 / 6081075.0)))))));
  let far = 1.0 - 2.0 / (exp(2.0 * z) + 1.0);
  return select(select(select(far, -far, x < 0.0), series, z < 0.5), x, isnan1(x));
}

fn tanh4(x: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(tanh1(x.x), tanh1(x.y), tanh1(x.z), tanh1(x.w));
}

// sinh(x): for |x| < 0.5 its Taylor series to x^9, beyond (e^x - e^-x) / 2.
// NaN stays NaN.
fn sinh4(x: vec4<f32>) -> vec4<f32> {
  let x2 = x * x;
  let series = x * (1.0 + x2 * (1.0 / 6.0 + x2 * (1.0 / 120.0 + x2 * (1.0 / 5040.0 + x2 * (1.0 / 362880.0)))));
  let far = 0.5 * (exp(x) - exp(-x));
  return select(select(far, series, abs(x) < vec4<f32>(0.5)), x, isnan4(x));
}

// Included by kernels (an include line, ops::kernel): erf(x) to
// about 1.2e-7 (absolute), after Numerical Recipes' erfc Chebyshev fit;
// WGSL has no erf.
fn erf1(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
             t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  return sign(x) * (1.0 - t * exp(poly));
}

fn erf4(x: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(erf1(x.x), erf1(x.y), erf1(x.z), erf1(x.w));
}

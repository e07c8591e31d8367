// The activations a convolution or matrix-product kernel applies last in
// its epilogue, one numbering for every kernel (ops/epilogue.h, Activation):
// 0 none, 1 ReLU, 2 clamp to [lo, hi] (ReLU6, Clip), 3 GELU (erf), 4 GELU
// (tanh approximation), as aten.gelu's approximate='none' / 'tanh', 5 SiLU
// (x * sigmoid(x), aten.silu: the gate of SwiGLU feed-forwards). NaN stays
// NaN. Needs lib/math.wgsl (isnan1, gelu1, tanh1), which the including
// kernel includes too.
//
// Kernels with override constants call activate(v) or activate4(v) (ACT, LO, HI set by
// ops::activation_constants; the branch folds when the pipeline is made);
// kernels generated as text call apply_activation with the code written in.
override ACT: u32 = 0u;
override LO: f32 = 0.0;
override HI: f32 = 0.0;

fn apply_activation(code: u32, v: f32, lo: f32, hi: f32) -> f32 {
  if (code == 1u) {
    return select(max(v, 0.0), v, isnan1(v));
  }
  if (code == 2u) {
    return select(clamp(v, lo, hi), v, isnan1(v));
  }
  if (code == 3u) {
    return gelu1(v);
  }
  if (code == 4u) {
    return 0.5 * v * (1.0 + tanh1(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  }
  if (code == 5u) {
    return v / (1.0 + exp(-v));
  }
  return v;
}

fn activate(v: f32) -> f32 { return apply_activation(ACT, v, LO, HI); }

// activate() on each component (the kernels of ops/helpers.cpp's
// vector_subs name the one their vector type takes as ACTIVATE_V).
fn activate4(v: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(activate(v.x), activate(v.y), activate(v.z), activate(v.w));
}

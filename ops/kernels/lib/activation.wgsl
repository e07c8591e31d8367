// Included by the convolution kernels (an include line, ops::kernel):
// the activation applied to their result, fused from the ONNX graph
// (onnx/fusion.h): ACT 0 none, 1 ReLU, 2 clamp to [LO, HI] (ReLU6, Clip).
override ACT: u32 = 0u;
override LO: f32 = 0.0;
override HI: f32 = 0.0;
// NaN stays NaN (isnan1: lib/math.wgsl, which the including kernel
// includes too).
fn activate(v: f32) -> f32 {
  if (ACT == 1u) {
    return select(max(v, 0.0), v, isnan1(v));
  }
  if (ACT == 2u) {
    return select(clamp(v, LO, HI), v, isnan1(v));
  }
  return v;
}

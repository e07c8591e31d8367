// Separable resampling of up to two dims (ops/resize.cpp). The input is
// viewed as [P, IH, Q, IW, R] and the output as [P, OH, Q, OW, R]; every
// output element is
//   out = sum_a sum_b wh[oh][a] * ww[ow][b] * x[p, ih[oh][a], q, iw[ow][b], r]
// with TH taps (index, weight) per output row and TW per output column,
// computed on the host (nearest: one tap; linear: two; cubic: four). A tap
// index of -1 marks a coordinate outside the crop region (ONNX
// tf_crop_and_resize): the output is then `fill`.
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
// (index, bitcast weight): OH * TH row taps, then OW * TW column taps.
@group(0) @binding(3) var<storage, read> taps: array<vec2<i32>>;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let R = params.R;
  let r = i % R;
  var t = i / R;
  let ow = t % params.OW;
  t = t / params.OW;
  let q = t % params.Q;
  t = t / params.Q;
  let oh = t % params.OH;
  let p = t / params.OH;

  var acc = 0.0;
  var outside = false;
  if (params.pairwise != 0u) {
    // ONNX Runtime's order (ops/resize.cpp, Taps::pairwise), every term
    // rounded before it is added: `one` is 1.0 that the compiler cannot
    // see, so a fused multiply-add of it adds the rounded term exactly.
    let one = f32(params.pairwise);
    for (var a = 0u; a < params.TH; a++) {
      let th = taps[oh * params.TH + a];
      let row = ((p * params.IH + u32(th.x)) * params.Q + q) * params.IW;
      for (var b = 0u; b < params.TW; b++) {
        let tw = taps[params.w_base + ow * params.TW + b];
        let w = bitcast<f32>(tw.y) * bitcast<f32>(th.y);
        acc += (w * f32(x[(row + u32(tw.x)) * R + r])) * one;
      }
    }
    out[i] = {{T}}(acc);
    return;
  }
  for (var a = 0u; a < params.TH; a++) {
    let th = taps[oh * params.TH + a];
    outside = outside || th.x < 0;
    let row = ((p * params.IH + u32(max(th.x, 0))) * params.Q + q) * params.IW;
    var s = 0.0;
    for (var b = 0u; b < params.TW; b++) {
      let tw = taps[params.w_base + ow * params.TW + b];
      outside = outside || tw.x < 0;
      s += bitcast<f32>(tw.y) * f32(x[(row + u32(max(tw.x, 0))) * R + r]);
    }
    acc += bitcast<f32>(th.y) * s;
  }
  out[i] = {{T}}(select(acc, params.fill, outside));
}

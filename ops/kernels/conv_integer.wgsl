// ConvInteger and QLinearConv: a direct convolution, one output per
// invocation, over D x H x W (missing dims of size 1). acc = sum over the
// group's input channels and the kernel taps of (x - x_zp) * (w[co] -
// w_zp[co]) in i32; a tap outside the input (padding) adds 0, as if the
// padding held x_zp. x and w are uint8 or int8 values in 32-bit storage,
// read as i32. x_zp is one value, w_zp one or one per output channel.
// The epilogue (ops/quantized.cpp) writes acc as int32, or requantizes it
// (QLinearConv): clamp(round(f32(acc + bias[co]) * (x_scale * w_scale[co] /
// y_scale)) + y_zp, qmin, qmax), round half to even, the multiplier in f32;
// the scales, y_zp and the bias packed in `side` (kernels/qside.wgsl).
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<i32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<i32>;
@group(0) @binding(3) var<storage, read> w: array<i32>;
@group(0) @binding(4) var<storage, read> x_zp: array<i32>;
@group(0) @binding(5) var<storage, read> w_zp: array<i32>;
{{REQUANT_BINDINGS}}

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let o = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (o >= params.count) {
    return;
  }
  let ow = o % params.OW;
  var t = o / params.OW;
  let oh = t % params.OH;
  t = t / params.OH;
  let od = t % params.OD;
  t = t / params.OD;
  let co = t % params.Co;
  let n = t / params.Co;
  let g = co / params.cout_g;
  let zx = x_zp[0];
  let zw = w_zp[select(0u, co, params.w_zp_chan == 1u)];
  let id0 = i32(od * params.sd) - params.pd;
  let ih0 = i32(oh * params.sh) - params.ph;
  let iw0 = i32(ow * params.sw) - params.pw;
  var acc: i32 = 0;
  for (var ci: u32 = 0u; ci < params.cin_g; ci = ci + 1u) {
    let c = g * params.cin_g + ci;
    let x_c = (n * params.C + c) * params.D;
    let w_c = ((co * params.cin_g + ci) * params.KD) * params.KH;
    for (var kd: u32 = 0u; kd < params.KD; kd = kd + 1u) {
      let id = id0 + i32(kd * params.dd);
      if (id < 0 || id >= i32(params.D)) {
        continue;
      }
      for (var kh: u32 = 0u; kh < params.KH; kh = kh + 1u) {
        let ih = ih0 + i32(kh * params.dh);
        if (ih < 0 || ih >= i32(params.H)) {
          continue;
        }
        let x_row = ((x_c + u32(id)) * params.H + u32(ih)) * params.W;
        let w_row = ((w_c + kd * params.KH) + kh) * params.KW;
        for (var kw: u32 = 0u; kw < params.KW; kw = kw + 1u) {
          let iw = iw0 + i32(kw * params.dw);
          if (iw < 0 || iw >= i32(params.W)) {
            continue;
          }
          acc = acc + (x[x_row + u32(iw)] - zx) * (w[w_row + kw] - zw);
        }
      }
    }
  }
{{EPILOGUE}}
}

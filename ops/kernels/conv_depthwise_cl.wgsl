// Depthwise convolution on channels-last data, VW channels a thread (4, 2
// or 1): wgnn.conv_depthwise_channels_last where C_out = C_in.
// x [N, *spatial, C] and y [N, *out, C] are read and written as {{XV}}
// (VW elements), and the weight as [*k, C] (kernels/depthwise_taps.wgsl
// made it from [C, 1, *k]): one load per tap of x and of w, consecutive
// threads consecutive vectors. A thread takes OWB consecutive output
// columns of one row (each tap's weights loaded once for them). The host
// picks VW and OWB, the widest first, so that small maps still make enough
// threads. The kernel's dims are pipeline constants (KD, KH, KW), so that
// the loops unroll and a thread's loads go out together. Bias, the
// optional affine and residual (the AFFINE_BINDING and AFFINE
// placeholders: conv.cpp's add_epilogue_subs) and the activation per
// channel, f32 math (in vec4<f32>, the lanes past VW unused):
//   y[n, o, c] = bias[c] + sum_k w[c, 0, k] * x[n, o * stride - pad + k * dil, c]
// params.count is N * out_d * out_h * ceil(out_w / OWB) * C / VW.
{{ENABLE}}

override KD: u32 = 1u;
override KH: u32 = 1u;
override KW: u32 = 1u;
override OWB: u32 = 4u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{XV}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{XV}}>;
@group(0) @binding(3) var<storage, read> w: array<{{XV}}>;
@group(0) @binding(4) var<storage, read> bias: array<{{T}}>;{{AFFINE_BINDING}}

const WG: u32 = 64u;
const VW: u32 = {{VW}}u;

// A loaded vector as vec4<f32> (lanes past VW zero).
fn widen(v: {{XV}}) -> vec4<f32> {
  return {{WIDEN}};
}

{{include lib/activation.wgsl}}
{{include lib/math.wgsl}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (t >= params.count) {
    return;
  }
  let c4 = params.cout / VW;  // vectors per position
  let cv = t % c4;
  var rest = t / c4;
  let nwb = (params.out_w + OWB - 1u) / OWB;
  let ow0 = (rest % nwb) * OWB;
  rest /= nwb;
  let oh = rest % params.out_h;
  rest /= params.out_h;
  let od = rest % params.out_d;
  let n = rest / params.out_d;
  let xbase = n * params.in_vol * c4 + cv;
  let org = vec3<i32>(vec3<u32>(od, oh, ow0)) * params.stride.xyz - params.pad.xyz;
  let co0 = cv * VW;
  var b4 = vec4<f32>();
  if (params.has_bias != 0u) {
    for (var q = 0u; q < VW; q++) {
      b4[q] = f32(bias[co0 + q]);
    }
  }
  var sums: array<vec4<f32>, 4>;
  for (var j = 0u; j < OWB; j++) {
    sums[j] = b4;
  }
  for (var kd = 0u; kd < KD; kd++) {
    let id = u32(org.x + i32(kd) * params.dil.x);
    for (var kh = 0u; kh < KH; kh++) {
      let ih = u32(org.y + i32(kh) * params.dil.y);
      if (id >= params.in_d || ih >= params.in_h) {
        continue;
      }
      let row = xbase + (id * params.in_h + ih) * params.in_w * c4;
      for (var kw = 0u; kw < KW; kw++) {
        let wv = widen(w[((kd * KH + kh) * KW + kw) * c4 + cv]);
        for (var j = 0u; j < OWB; j++) {
          let iw = u32(org.z + i32(j) * params.stride.z + i32(kw) * params.dil.z);
          if (iw < params.in_w) {
            sums[j] += widen(x[row + iw * c4]) * wv;
          }
        }
      }
    }
  }
  let pl0 = (od * params.out_h + oh) * params.out_w + ow0;
  for (var j = 0u; j < OWB; j++) {
    if (ow0 + j < params.out_w) {
      let o4 = (n * params.out_vol + pl0 + j) * c4 + cv;  // the vector written
      var r = vec4<{{T}}>();
      for (var q = 0u; q < VW; q++) {
        let i = o4 * VW + q;
        let co = co0 + q;
        let acc = sums[j][q];
        r[q] = {{T}}(activate({{AFFINE}}));
      }
      y[o4] = {{PACK}};
    }
  }
}

// Depthwise convolution on channels-last data, four channels a thread:
// wgnn.conv_depthwise_channels_last where C_out = C_in, a multiple of 4.
// x [N, *spatial, C] and y [N, *out, C] are read and written as vec4<T>
// (one load per tap, not four), and the kernel's dims are pipeline
// constants (KD, KH, KW), so that the tap loops unroll and a thread's loads
// go out together rather than one loop trip after another. Bias, the
// optional affine and residual (the AFFINE_BINDING and AFFINE placeholders:
// conv.cpp's add_epilogue_subs) and the activation per channel, f32 math:
//   y[n, o, c] = bias[c] + sum_k w[c, 0, k] * x[n, o * stride - pad + k * dil, c]
// params.count is the outputs / 4.
{{ENABLE}}

override KD: u32 = 1u;
override KH: u32 = 1u;
override KW: u32 = 1u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<vec4<{{T}}>>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read> w: array<{{T}}>;
@group(0) @binding(4) var<storage, read> bias: array<{{T}}>;{{AFFINE_BINDING}}

const WG: u32 = 256u;

{{include lib/activation.wgsl}}
{{include lib/math.wgsl}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (t >= params.count) {
    return;
  }
  let c4 = params.cout / 4u;  // vec4s per position
  let cv = t % c4;
  let np = t / c4;  // n * out_vol + the output position
  let pl = np % params.out_vol;
  let xbase = (np / params.out_vol) * params.in_vol * c4 + cv;
  let ohw = params.out_h * params.out_w;
  let o = vec3<i32>(vec3<u32>(pl / ohw, (pl % ohw) / params.out_w, pl % params.out_w));
  let org = o * params.stride.xyz - params.pad.xyz;
  let co0 = cv * 4u;
  let kv = KD * KH * KW;
  var acc4 = vec4<f32>();
  if (params.has_bias != 0u) {
    acc4 = vec4<f32>(f32(bias[co0]), f32(bias[co0 + 1u]), f32(bias[co0 + 2u]), f32(bias[co0 + 3u]));
  }
  for (var kd = 0u; kd < KD; kd++) {
    let id = u32(org.x + i32(kd) * params.dil.x);
    for (var kh = 0u; kh < KH; kh++) {
      let ih = u32(org.y + i32(kh) * params.dil.y);
      for (var kw = 0u; kw < KW; kw++) {
        let iw = u32(org.z + i32(kw) * params.dil.z);
        if (id < params.in_d && ih < params.in_h && iw < params.in_w) {
          let xv = vec4<f32>(x[xbase + ((id * params.in_h + ih) * params.in_w + iw) * c4]);
          let wa = co0 * kv + (kd * KH + kh) * KW + kw;
          acc4 += xv * vec4<f32>(f32(w[wa]), f32(w[wa + kv]), f32(w[wa + 2u * kv]), f32(w[wa + 3u * kv]));
        }
      }
    }
  }
  var r: vec4<{{T}}>;
  for (var j = 0u; j < 4u; j++) {
    let i = t * 4u + j;
    let co = co0 + j;
    let acc = acc4[j];
    r[j] = {{T}}(activate({{AFFINE}}));
  }
  y[t] = r;
}

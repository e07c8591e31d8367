// Depthwise convolution (one input channel per group: groups == C_in, and
// C_out = mult * C_in), forward, 1 to 3 spatial dims seen as D x H x W: one
// thread per output element, a direct loop over the kernel window with a
// fused bias, f32 math; then the optional per-channel affine
// and residual (the AFFINE_BINDING and AFFINE placeholders: conv.cpp's add_epilogue_subs) and the
// activation.
//   y[n, co, o] = bias[co] + sum_k w[co, 0, k] * x[n, co / mult, o * stride - pad + k * dil]
// CHANNELS_LAST: x is [N, *spatial, C_in] and y [N, *out, C_out]
// (wgnn.conv_depthwise_channels_last: consecutive threads take consecutive
// channels of one output position, so reads and writes stay consecutive).
// (Four channels a thread, C_out = C_in a multiple of 4: conv_depthwise_cl.wgsl.)
{{ENABLE}}

override CHANNELS_LAST: bool = false;
// The kernel's dims (params.k_d, k_h, k_w) as constants: the tap loops unroll.
override KD: u32 = 1u;
override KH: u32 = 1u;
override KW: u32 = 1u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
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
  let i = t;
  var pl: u32;
  var co: u32;
  var xbase: u32;
  var xstep = 1u;  // elements between neighbouring input positions
  if (CHANNELS_LAST) {
    co = i % params.cout;
    let np = i / params.cout;  // n * out_vol + pl
    pl = np % params.out_vol;
    xstep = params.cout / params.mult;  // cin
    xbase = (np / params.out_vol) * params.in_vol * xstep + co / params.mult;
  } else {
    pl = i % params.out_vol;
    let nc = i / params.out_vol;  // n * cout + co
    co = nc % params.cout;
    xbase = (nc / params.mult) * params.in_vol;  // (n * cin + co / mult) planes (cout = mult * cin)
  }
  let ohw = params.out_h * params.out_w;
  let o = vec3<i32>(vec3<u32>(pl / ohw, (pl % ohw) / params.out_w, pl % params.out_w));
  let org = o * params.stride.xyz - params.pad.xyz;
  let wbase = co * params.kvol;
  var acc = 0.0;
  if (params.has_bias != 0u) {
    acc = f32(bias[co]);
  }
  for (var kd = 0u; kd < KD; kd++) {
    let id = u32(org.x + i32(kd) * params.dil.x);
    if (id >= params.in_d) {
      continue;
    }
    for (var kh = 0u; kh < KH; kh++) {
      let ih = u32(org.y + i32(kh) * params.dil.y);
      if (ih >= params.in_h) {
        continue;
      }
      let row = (id * params.in_h + ih) * params.in_w;
      let wrow = wbase + (kd * KH + kh) * KW;
      for (var kw = 0u; kw < KW; kw++) {
        let iw = u32(org.z + i32(kw) * params.dil.z);
        if (iw < params.in_w) {
          acc += f32(x[xbase + (row + iw) * xstep]) * f32(w[wrow + kw]);
        }
      }
    }
  }
  y[i] = {{T}}(activate({{AFFINE}}));
}

// The second pass of a split-K convolution (conv.wgsl with SPLITK): adds
// the `splits` partial sums part[split][c][q] (f32, q = n * out_vol + p)
// and the bias into y[n][c][p], one thread per output element, then the
// optional affine and residual (the AFFINE_BINDING and AFFINE placeholders: conv.cpp's add_epilogue_subs)
// and the activation.
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> part: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<{{T}}>;{{AFFINE_BINDING}}

const WG: u32 = 256u;

{{include lib/activation.wgsl}}
{{include lib/math.wgsl}}
{{include lib/splitk_parts.wgsl}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let p = i % params.out_vol;
  let nc = i / params.out_vol;
  let c = nc % params.cout;
  let n = nc / params.cout;
  var acc = 0.0;
  if (params.has_bias != 0u) {
    acc = f32(bias[c]);
  }
  let stride = params.cout * params.npix;
  acc = sum_parts(acc, c * params.npix + n * params.out_vol + p, stride, params.splits);
  y[i] = {{T}}(activate({{AFFINE}}));
}

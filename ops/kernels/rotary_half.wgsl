// Rotary position embedding, the "rotate half" form (ops/rotary.cpp,
// wgnn.rotary_half): over the last dim of width 2 * half,
//   out[i] = x[i] * cos[i] + r[i] * sin[i],
//   r = cat(-x[half:], x[:half]),
// cos and sin read through broadcast strides (params.sc, params.ss). With
// params.pairs, the interleaved form (wgnn.rotary_pairs: ExecuTorch's and
// Meta's Llama): each pair (x[2k], x[2k+1]) rotated by angle k,
//   out[2k] = x[2k] * cos[k] - x[2k+1] * sin[k],
//   out[2k+1] = x[2k+1] * cos[k] + x[2k] * sin[k],
// cos and sin read over the pair grid (x's shape with the last dim halved).
// One element per invocation; the products and the sum in f32, in that
// order.
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
@group(0) @binding(3) var<storage, read> cs: array<{{T}}>;
@group(0) @binding(4) var<storage, read> sn: array<{{T}}>;

{{include lib/dims.wgsl}}

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.numel) {
    return;
  }
  let pairs = params.pairs != 0u;
  var rem = select(i, i / 2u, pairs);
  var oc = 0u;
  var os = 0u;
  for (var d = params.rank; d > 0u; d--) {
    let n = dim_of(params.shape, d - 1u);
    let c = rem % n;
    rem = rem / n;
    oc += c * dim_of(params.sc, d - 1u);
    os += c * dim_of(params.ss, d - 1u);
  }
  let j = i % (2u * params.half);
  var r: f32;
  if (pairs) {
    if ((i & 1u) == 0u) {
      r = -f32(x[i + 1u]);
    } else {
      r = f32(x[i - 1u]);
    }
  } else if (j < params.half) {
    r = -f32(x[i + params.half]);
  } else {
    r = f32(x[i - params.half]);
  }
  let a = f32(x[i]) * f32(cs[oc]);
  let b = r * f32(sn[os]);
  out[i] = {{T}}(a + b);
}

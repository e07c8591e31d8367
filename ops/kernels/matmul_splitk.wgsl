// The second pass of a split-K product (matmul.wgsl with SPLITK, float32):
// adds the `splits` parts part[s * count + i] in order, then alpha, the bias
// (HAS_BIAS: the same for every batch, read through its strides along M and
// N), the activation (ACT of lib/activation.wgsl) and the residual
// (HAS_RESIDUAL: a tensor of the result's shape), one thread per output
// element: the epilogue of matmul.wgsl, in the same order.
{{ENABLE}}

{{PARAMS}}

override HAS_BIAS: bool = false;
override HAS_RESIDUAL: bool = false;

@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> part: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<vec4<{{T}}>>;
@group(0) @binding(4) var<storage, read> res: array<{{T}}>;

const WG: u32 = 256u;

{{include lib/math.wgsl}}
{{include lib/activation.wgsl}}
{{include lib/splitk_parts.wgsl}}

fn bias_at(i: u32) -> f32 { return f32(bias[i >> 2u][i & 3u]); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let acc = sum_parts(0.0, i, params.count, params.splits);
  var y = acc * params.alpha;
  if (HAS_BIAS) {
    let n = i % params.N;
    let m = (i / params.N) % params.M;
    y += params.beta * bias_at(m * params.bias_sm + n * params.bias_sn);
  }
  y = activate(y);
  if (HAS_RESIDUAL) {
    y += f32(res[i]);
  }
  out[i] = {{T}}(y);
}

// MatMulNBits' product with few rows (ops/quantized.cpp, M <= 8: a
// decoder's step): y[m, n] = sum_k a[m, k] * (q(n, k) - z(n, k)) * s(n, k)
// (+ bias[n]), the 4-bit weights read as stored, row n of b holding K (in
// blocks) eight values a word, the low nibble first. The tiled kernel
// (matmul_qweight.wgsl) computes 16 rows per workgroup, 15 of them wasted
// at one row; here CT columns per workgroup, each read along K by 256 / CT
// invocations a word (eight weights of one block: one scale, one zero
// point) at a time, the partial sums added in workgroup memory.
// Parameters as matmul_qweight's 4-bit ones: q0 k_blocks, q1 block, q2
// words a row, q3 zero point bytes a row, q4 has zero points.
{{ENABLE}}

const MR: u32 = 8u;  // most rows
const WG: u32 = 256u;
override CT: u32 = 16u;  // columns per workgroup (1 to 16, a power of 2)
override A_VEC: bool = false;  // K a multiple of 4

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> a: array<{{T}}>;
@group(0) @binding(3) var<storage, read> b: array<u32>;
@group(0) @binding(4) var<storage, read> scales: array<{{S}}>;
@group(0) @binding(5) var<storage, read> zp: array<u32>;
@group(0) @binding(6) var<storage, read> bias: array<{{T}}>;

var<workgroup> red: array<f32, WG>;

// a[m, k .. k + 3], zero past K.
fn a4(m: u32, k: u32) -> vec4<f32> {
  let base = m * params.K + k;
  if (A_VEC && k + 3u < params.K) {
    return vec4<f32>(f32(a[base]), f32(a[base + 1u]), f32(a[base + 2u]), f32(a[base + 3u]));
  }
  var v = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j++) {
    if (k + j < params.K) {
      v[j] = f32(a[base + j]);
    }
  }
  return v;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let group = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  let KS = WG / CT;  // invocations along K per column
  let c = lid / KS;
  let ks = lid % KS;
  let n = group * CT + c;
  let M = params.M;
  var acc: array<f32, MR>;
  if (n < params.N) {
    let words = (params.K + 7u) / 8u;  // the words that hold k < K
    for (var w = ks; w < words; w += KS) {
      let q = b[n * params.q2 + w];
      let k = w * 8u;
      let blk = k / params.q1;
      var z = 8u;
      if (params.q4 == 1u) {
        let byte = n * params.q3 + blk / 2u;
        z = (zp[byte / 4u] >> (8u * (byte % 4u) + 4u * (blk % 2u))) & 15u;
      }
      let zf = vec4<f32>(f32(z));
      let s = f32(scales[n * params.q0 + blk]);
      let lo = (vec4<f32>(vec4<u32>(q, q >> 4u, q >> 8u, q >> 12u) & vec4<u32>(15u)) - zf) * s;
      let hi = (vec4<f32>(vec4<u32>(q >> 16u, q >> 20u, q >> 24u, q >> 28u) & vec4<u32>(15u)) - zf) * s;
      for (var m = 0u; m < MR; m++) {
        if (m < M) {
          acc[m] += dot(a4(m, k), lo) + dot(a4(m, k + 4u), hi);
        }
      }
    }
  }
  for (var m = 0u; m < MR; m++) {
    if (m >= M) {
      break;
    }
    red[lid] = acc[m];
    workgroupBarrier();
    for (var s = KS / 2u; s > 0u; s = s / 2u) {
      if (ks < s) {
        red[lid] += red[lid + s];
      }
      workgroupBarrier();
    }
    if (ks == 0u && n < params.N) {
      var y = red[lid];
      if (params.has_bias == 1u) {
        y += f32(bias[n]);
      }
      dst[m * params.N + n] = {{T}}(y);
    }
    workgroupBarrier();
  }
}

// A float product with quantized weights read as stored and dequantized in
// the kernel: y[m, n] = sum_k a[m, k] * weight(k, n) (+ bias[n]). Each
// workgroup computes a 16x16 output tile, K in steps of 16 through
// workgroup memory: a's tile as given, the weights' tile unpacked and
// dequantized as it is staged (no float copy of the weights exists). The
// accumulator is f32. The WEIGHT text (ops/quantized.cpp) defines weight(k, n)
// over b, scales and zp and the parameters q0..q5:
//   - MatMulNBits, 4-bit: row n of b holds k_blocks * block / 2 bytes,
//     element k in byte k / 2, the low nibble for even k (word k / 8, bits
//     4 * (k % 8) of a little-endian u32); zero points packed the same way
//     per row (ceil(k_blocks / 2) bytes), 8 when absent;
//   - DequantizeLinear then MatMul, 8-bit: b [K, N] four columns to a word
//     (byte n % 4 of word k * ceil(N / 4) + n / 4), sign-extended for int8;
//     one scale and zero point, or one per column or per row.
// For 4-bit weights a 16-step never crosses a block (block >= 16, a power
// of two).
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> a: array<{{T}}>;
@group(0) @binding(3) var<storage, read> b: array<u32>;
@group(0) @binding(4) var<storage, read> scales: array<{{S}}>;
@group(0) @binding(5) var<storage, read> zp: array<u32>;
@group(0) @binding(6) var<storage, read> bias: array<{{T}}>;

const T: u32 = 16u;

var<workgroup> ta: array<array<f32, 16>, 16>;  // [m][k]
var<workgroup> tb: array<array<f32, 16>, 16>;  // [k][n]

{{WEIGHT}}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let w = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  if (w >= params.tiles_m * params.tiles_n) {
    return;
  }
  let tm = w / params.tiles_n;
  let tn = w % params.tiles_n;
  let row = tm * T + lid.y;
  let col = tn * T + lid.x;
  let M = params.M;
  let N = params.N;
  let K = params.K;
  var acc = 0.0;
  for (var k0: u32 = 0u; k0 < K; k0 = k0 + T) {
    let ka = k0 + lid.x;
    var va = 0.0;
    if (row < M && ka < K) {
      va = f32(a[row * K + ka]);
    }
    ta[lid.y][lid.x] = va;
    let kb = k0 + lid.y;
    var vb = 0.0;
    if (col < N && kb < K) {
      vb = weight(kb, col);
    }
    tb[lid.y][lid.x] = vb;
    workgroupBarrier();
    for (var k: u32 = 0u; k < T; k = k + 1u) {
      acc = acc + ta[lid.y][k] * tb[k][lid.x];
    }
    workgroupBarrier();
  }
  if (row < M && col < N) {
    if (params.has_bias == 1u) {
      acc = acc + f32(bias[col]);
    }
    dst[row * N + col] = {{T}}(acc);
  }
}

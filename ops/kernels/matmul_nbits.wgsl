// com.microsoft MatMulNBits with 4-bit weights: y[m, n] = sum_k a[m, k] *
// ((q[n, k] - zp[n, blk]) * scale[n, blk]) (+ bias[n]), blk = k / block.
// The weights stay packed as the model stores them: row n of b holds
// k_blocks * block / 2 bytes, element k in byte k / 2, the low nibble for
// even k (so word k / 8, bits 4 * (k % 8) of a little-endian u32). Zero
// points, when present, are packed the same way per row (ceil(k_blocks / 2)
// bytes a row, the low nibble for even blocks); absent, every zero point is
// 8. Each workgroup computes a 16x16 output tile, K in steps of 16 through
// workgroup memory: a's tile as given, b's tile unpacked and dequantized as
// it is staged (block >= 16 and a power of two, so a step never crosses a
// block). The accumulator is f32.
{{ENABLE}}

struct Params {
  M: u32,
  N: u32,
  K: u32,
  k_blocks: u32,
  block: u32,
  row_words: u32,     // u32 words of b per row n
  zp_row_bytes: u32,  // bytes of packed zero points per row n
  has_zp: u32,
  has_bias: u32,
  tiles_m: u32,
  tiles_n: u32,
  pad: u32,
}

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

// The dequantized weight of row n, element k.
fn weight(n: u32, k: u32) -> f32 {
  let q = (b[n * params.row_words + k / 8u] >> (4u * (k % 8u))) & 15u;
  let blk = k / params.block;
  var z = 8u;
  if (params.has_zp == 1u) {
    let byte = n * params.zp_row_bytes + blk / 2u;
    z = (zp[byte / 4u] >> (8u * (byte % 4u) + 4u * (blk % 2u))) & 15u;
  }
  return f32(i32(q) - i32(z)) * f32(scales[n * params.k_blocks + blk]);
}

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
      vb = weight(col, kb);
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

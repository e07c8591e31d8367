// MatMulInteger and QLinearMatMul: acc[b, m, n] = sum_k (a[b, m, k] - a_zp)
// * (b[b, k, n] - b_zp) in i32, a 16x16 output tile per workgroup, K in
// steps of 16 through workgroup memory (zero points subtracted as the tiles
// are staged). a and b are uint8 or int8 values in 32-bit storage, read as
// i32. a_zp is one value or one per row of a, b_zp one or one per column of
// b. A batch of size 1 in a or b is shared by every batch of the result
// (a_bstride / b_bstride 0).
// The epilogue (ops/quantized.cpp) writes acc as int32, or requantizes it
// (QLinearMatMul): clamp(round(f32(acc) * (a_scale * b_scale / y_scale)) +
// y_zp, qmin, qmax), round half to even, the multiplier in f32; the
// scales and y_zp packed in `side` (kernels/qside.wgsl).
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<i32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> a: array<i32>;
@group(0) @binding(3) var<storage, read> b: array<i32>;
@group(0) @binding(4) var<storage, read> a_zp: array<i32>;
@group(0) @binding(5) var<storage, read> b_zp: array<i32>;
{{REQUANT_BINDINGS}}

const T: u32 = 16u;

var<workgroup> ta: array<array<i32, 16>, 16>;  // [m][k]
var<workgroup> tb: array<array<i32, 16>, 16>;  // [k][n]

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let w = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  let tiles = params.tiles_m * params.tiles_n;
  let bt = w / tiles;
  if (bt >= params.batch) {
    return;
  }
  let tm = (w % tiles) / params.tiles_n;
  let tn = w % params.tiles_n;
  let row = tm * T + lid.y;
  let col = tn * T + lid.x;
  let M = params.M;
  let N = params.N;
  let K = params.K;
  let row_c = min(row, M - 1u);
  let col_c = min(col, N - 1u);
  let za = a_zp[select(0u, row_c, params.a_zp_rows == 1u)];
  let zb = b_zp[select(0u, col_c, params.b_zp_cols == 1u)];
  let a_base = bt * params.a_bstride + row * K;
  let b_base = bt * params.b_bstride + col;
  var acc: i32 = 0;
  for (var k0: u32 = 0u; k0 < K; k0 = k0 + T) {
    let ka = k0 + lid.x;
    var va: i32 = 0;
    if (row < M && ka < K) {
      va = a[a_base + ka] - za;
    }
    ta[lid.y][lid.x] = va;
    let kb = k0 + lid.y;
    var vb: i32 = 0;
    if (col < N && kb < K) {
      vb = b[b_base + kb * N] - zb;
    }
    tb[lid.y][lid.x] = vb;
    workgroupBarrier();
    for (var k: u32 = 0u; k < T; k = k + 1u) {
      acc = acc + ta[lid.y][k] * tb[k][lid.x];
    }
    workgroupBarrier();
  }
  if (row < M && col < N) {
    let o = (bt * M + row) * N + col;
{{EPILOGUE}}
  }
}

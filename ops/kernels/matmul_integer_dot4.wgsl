// MatMulInteger and QLinearMatMul through WGSL's packed_4x8_integer_dot_product
// (dot4I8Packed): the same product, parameters, bindings and epilogue as
// kernels/matmul_integer.wgsl, with the 16x16 tiles staged as four 8-bit
// values to a word. Values are moved into int8's range first, a' = a -
// A_SHIFT (128 for uint8, 0 for int8), zero points alike, so that
//   sum_k (a - a_zp)(b - b_zp) = sum_k (a' - za')(b' - zb')
//     = sum a'b' - zb' sum a' - za' sum b' + Kp za' zb',
// each sum a dot4I8Packed per four k (the plain sums against 0x01010101).
// K is padded to Kp (a multiple of 16) with a' = za' and b' = zb', whose
// terms cancel. i32 wraps, as the unpacked kernel's accumulator does.
requires packed_4x8_integer_dot_product;
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
const A_SHIFT: i32 = {{A_SHIFT}};
const B_SHIFT: i32 = {{B_SHIFT}};
const ONES: u32 = 0x01010101u;

var<workgroup> ta: array<array<u32, 4>, 16>;  // [m][k / 4]
var<workgroup> tb: array<array<u32, 4>, 16>;  // [n][k / 4]

fn za_of(row: u32) -> i32 {
  return a_zp[select(0u, min(row, params.M - 1u), params.a_zp_rows == 1u)] - A_SHIFT;
}
fn zb_of(col: u32) -> i32 {
  return b_zp[select(0u, min(col, params.N - 1u), params.b_zp_cols == 1u)] - B_SHIFT;
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
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
  let za = za_of(row);
  let zb = zb_of(col);
  // The invocations that stage: 0..63 a word of a's tile, 64..127 one of b's.
  let sr = (li % 64u) / 4u;
  let sw = li % 4u;
  let srow = tm * T + sr;
  let scol = tn * T + sr;
  let sza = za_of(srow);
  let szb = zb_of(scol);
  var acc: i32 = 0;
  var sa: i32 = 0;
  var sb: i32 = 0;
  var kp: u32 = 0u;
  for (var k0: u32 = 0u; k0 < K; k0 = k0 + T) {
    if (li < 64u) {
      var v = vec4<i32>(sza);
      for (var j: u32 = 0u; j < 4u; j = j + 1u) {
        let k = k0 + 4u * sw + j;
        if (srow < M && k < K) {
          v[j] = a[bt * params.a_bstride + srow * K + k] - A_SHIFT;
        }
      }
      ta[sr][sw] = pack4xI8(v);
    } else if (li < 128u) {
      var v = vec4<i32>(szb);
      for (var j: u32 = 0u; j < 4u; j = j + 1u) {
        let k = k0 + 4u * sw + j;
        if (scol < N && k < K) {
          v[j] = b[bt * params.b_bstride + k * N + scol] - B_SHIFT;
        }
      }
      tb[sr][sw] = pack4xI8(v);
    }
    workgroupBarrier();
    for (var q: u32 = 0u; q < 4u; q = q + 1u) {
      let pa = ta[lid.y][q];
      let pb = tb[lid.x][q];
      acc = acc + dot4I8Packed(pa, pb);
      sa = sa + dot4I8Packed(pa, ONES);
      sb = sb + dot4I8Packed(pb, ONES);
    }
    workgroupBarrier();
    kp = kp + T;
  }
  acc = acc - zb * sa - za * sb + i32(kp) * za * zb;
  if (row < M && col < N) {
    let o = (bt * M + row) * N + col;
{{EPILOGUE}}
  }
}

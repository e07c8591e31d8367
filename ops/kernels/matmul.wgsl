// Batched GEMM with a fused epilogue (ops/matmul.cpp):
//   out[b] = alpha * op(A[b]) @ op(B[b]) + beta * bias[b]
// op(A) is M x K, op(B) is K x N, out[b] is a contiguous M x N matrix, and
// bias is read through broadcast strides (0 where it broadcasts).
//
// A is stored [M, K] (row stride lda), or [K, M] when A_TRANS; B is stored
// [K, N] (row stride ldb), or [N, K] when B_TRANS. Batch b decodes over the
// output's batch dims (`shape`) into element offsets of A, B and bias
// (strides `sa`, `sb`, `sc`: 0 where an operand broadcasts).
//
// Tiling: one workgroup of 16 x 16 threads computes a 64 x 64 tile of one
// batch; each thread a 4 x 4 block in registers (f32). K advances in steps of
// 16: both operands' 64 x 16 slices go to workgroup memory (as f32, k-major,
// vec4 along M and N), each thread loading four values, one vec4 load when
// A_VEC / B_VEC (the contiguous dim a multiple of 4: no vec4 straddles the
// edge). Edges load zeros; stores are masked. Every workgroup decodes its
// flat index (x + y * nx + z * nx * ny) into (batch, tile row, tile column),
// so any batch count fits the grid.
{{ENABLE}}

const TM: u32 = 64u;
const TN: u32 = 64u;
const TK: u32 = 16u;

override A_TRANS: bool = false;
override B_TRANS: bool = false;
override A_VEC: bool = false;
override B_VEC: bool = false;
override HAS_BIAS: bool = false;
// float16 results beyond its range become +-inf (as IEEE and ATen), not a
// device-defined value.
override F16_OUT: bool = false;
var<private> inf_bits: u32 = 0x7f800000u;

struct Params {
  M: u32,
  N: u32,
  K: u32,
  batch: u32,
  tiles_m: u32,
  tiles_n: u32,
  lda: u32,
  ldb: u32,
  bias_sm: u32,  // bias element strides at (m, n)
  bias_sn: u32,
  rank: u32,     // batch dims in `shape`
  _p0: u32,
  alpha: f32,
  beta: f32,
  _p1: u32,
  _p2: u32,
  shape: array<vec4<u32>, 2>,
  sa: array<vec4<u32>, 2>,
  sb: array<vec4<u32>, 2>,
  sc: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> a: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read> b: array<vec4<{{T}}>>;
@group(0) @binding(4) var<storage, read> bias: array<vec4<{{T}}>>;

// [TK][TM / 4] and [TK][TN / 4]: row k holds 64 values of M (N) as vec4.
var<workgroup> As: array<vec4<f32>, 256>;
var<workgroup> Bs: array<vec4<f32>, 256>;

fn dim_of(v: array<vec4<u32>, 2>, d: u32) -> u32 { return v[d / 4u][d % 4u]; }
fn a_at(i: u32) -> f32 { return f32(a[i >> 2u][i & 3u]); }
fn b_at(i: u32) -> f32 { return f32(b[i >> 2u][i & 3u]); }
fn bias_at(i: u32) -> f32 { return f32(bias[i >> 2u][i & 3u]); }

// Four values along a contiguous dim from element `base`, `valid` of them in
// range (vec4: all four or none, and `base` a multiple of 4).
fn load_a4(base: u32, valid: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  if (A_VEC) {
    if (valid >= 4u) {
      v = vec4<f32>(a[base >> 2u]);
    }
  } else {
    for (var j = 0u; j < min(valid, 4u); j++) {
      v[j] = a_at(base + j);
    }
  }
  return v;
}

fn load_b4(base: u32, valid: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  if (B_VEC) {
    if (valid >= 4u) {
      v = vec4<f32>(b[base >> 2u]);
    }
  } else {
    for (var j = 0u; j < min(valid, 4u); j++) {
      v[j] = b_at(base + j);
    }
  }
  return v;
}

fn remaining(limit: u32, at: u32) -> u32 { return select(0u, limit - at, at < limit); }

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid3: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let flat = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  let tiles = params.tiles_m * params.tiles_n;
  if (flat >= tiles * params.batch) {
    return;
  }
  let batch = flat / tiles;
  let rem = flat - batch * tiles;
  let tile_m = rem / params.tiles_n;
  let m0 = tile_m * TM;
  let n0 = (rem - tile_m * params.tiles_n) * TN;
  let M = params.M;
  let N = params.N;
  let K = params.K;

  // Batch offsets.
  var oa = 0u;
  var ob = 0u;
  var oc = 0u;
  var r = batch;
  for (var k = params.rank; k > 0u; k--) {
    let d = k - 1u;
    let n = dim_of(params.shape, d);
    let c = r % n;
    r = r / n;
    oa += c * dim_of(params.sa, d);
    ob += c * dim_of(params.sb, d);
    oc += c * dim_of(params.sc, d);
  }

  let tx = lid3.x;
  let ty = lid3.y;
  var acc: array<vec4<f32>, 4>;
  for (var k0 = 0u; k0 < K; k0 += TK) {
    if (A_TRANS) {
      // [K, M]: thread -> row k, four consecutive m.
      let k = k0 + lid / 16u;
      let m = m0 + (lid % 16u) * 4u;
      var v = vec4<f32>(0.0);
      if (k < K) {
        v = load_a4(oa + k * params.lda + m, remaining(M, m));
      }
      As[lid] = v;
    } else {
      // [M, K]: thread -> row m, four consecutive k.
      let mm = lid / 4u;
      let kk = (lid % 4u) * 4u;
      let m = m0 + mm;
      var v = vec4<f32>(0.0);
      if (m < M) {
        v = load_a4(oa + m * params.lda + k0 + kk, remaining(K, k0 + kk));
      }
      for (var j = 0u; j < 4u; j++) {
        As[(kk + j) * 16u + mm / 4u][mm % 4u] = v[j];
      }
    }
    if (B_TRANS) {
      // [N, K]: thread -> row n, four consecutive k.
      let nn = lid / 4u;
      let kk = (lid % 4u) * 4u;
      let n = n0 + nn;
      var v = vec4<f32>(0.0);
      if (n < N) {
        v = load_b4(ob + n * params.ldb + k0 + kk, remaining(K, k0 + kk));
      }
      for (var j = 0u; j < 4u; j++) {
        Bs[(kk + j) * 16u + nn / 4u][nn % 4u] = v[j];
      }
    } else {
      // [K, N]: thread -> row k, four consecutive n.
      let k = k0 + lid / 16u;
      let n = n0 + (lid % 16u) * 4u;
      var v = vec4<f32>(0.0);
      if (k < K) {
        v = load_b4(ob + k * params.ldb + n, remaining(N, n));
      }
      Bs[lid] = v;
    }
    workgroupBarrier();
    for (var k = 0u; k < TK; k++) {
      let av = As[k * 16u + ty];
      let bv = Bs[k * 16u + tx];
      acc[0] = fma(vec4<f32>(av.x), bv, acc[0]);
      acc[1] = fma(vec4<f32>(av.y), bv, acc[1]);
      acc[2] = fma(vec4<f32>(av.z), bv, acc[2]);
      acc[3] = fma(vec4<f32>(av.w), bv, acc[3]);
    }
    workgroupBarrier();
  }

  // Epilogue: scale, bias, masked stores.
  let ob_out = batch * M * N;
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + ty * 4u + i;
    if (m >= M) {
      break;
    }
    let v = acc[i] * params.alpha;
    for (var j = 0u; j < 4u; j++) {
      let n = n0 + tx * 4u + j;
      if (n >= N) {
        break;
      }
      var y = v[j];
      if (HAS_BIAS) {
        y += params.beta * bias_at(oc + m * params.bias_sm + n * params.bias_sn);
      }
      if (F16_OUT && abs(y) >= 65520.0) {
        y = sign(y) * bitcast<f32>(inf_bits);
      }
      out[ob_out + m * N + n] = {{T}}(y);
    }
  }
}

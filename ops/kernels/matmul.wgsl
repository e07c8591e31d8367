// Batched GEMM with a fused epilogue (ops/matmul.cpp):
//   out[b] = alpha * op(A[b]) @ op(B[b]) + beta * bias[b]
// op(A) is M x K, op(B) is K x N, out[b] is a contiguous M x N matrix, and
// bias is read through broadcast strides (0 where it broadcasts).
//
// A is stored [M, K] (row stride lda), or [K, M] when A_TRANS; B is stored
// [K, N] (row stride ldb), or [N, K] when B_TRANS. Batch b decodes over the
// output's batch dims (`shape`) into element offsets of A, B, bias and the
// result (strides `sa`, `sb`, `sc`: 0 where an operand broadcasts; `so`),
// each from its base offset (a_off, ...); the result's rows are ldc apart.
//
// Tiling: one workgroup of (TN / RN) x (TM / RM) invocations computes a
// TM x TN tile of one batch; each invocation an RM x RN block in registers
// (f32). ops/matmul.cpp picks the tile from the problem size (small products
// need small tiles to fill the GPU). K advances in steps of TK: both
// operands' slices go to workgroup memory (as f32, k-major, vec4 along M and
// N), each invocation loading A_LOADS (B_LOADS) groups of four values, one
// vec4 load each when A_VEC / B_VEC (the contiguous dim a multiple of 4: no
// vec4 straddles the edge). The next slice's global loads are issued into
// registers before the current slice's multiplies. STAGES 1: one
// workgroup-memory stage, two barriers per slice; STAGES 2: the registers go
// to the other stage while this one is read, one barrier per slice.
// WARP_TILES: the 32 invocations of a subgroup-sized run of the local index
// cover 8 x 4 blocks of the thread grid (fewer distinct workgroup-memory
// vectors per read than a 16 x 2 run). Edges load zeros; stores are masked.
// Every workgroup decodes its flat index (x + y * nx + z * nx * ny) into
// (batch, tile row, tile column), so any batch count fits the grid.
//
// SPLITK (float32 only: `out` is then the f32 buffer of parts): workgroup
// flat index also decodes a split s, which sums k in [s * kchunk,
// (s + 1) * kchunk) and writes its raw sums to part s of `out`
// (s * batch * M * N + ...); kernels/matmul_splitk.wgsl adds the parts in
// order (deterministic) and applies alpha and the activation. For products
// with few tiles and a long K (DaViT's channel attention: 32 x 32 outputs
// per head, K the 36,864 pixels), which otherwise keep a few workgroups
// busy along all of K.
{{ENABLE}}

const TM: u32 = {{TM}}u;
const TN: u32 = {{TN}}u;
const TK: u32 = {{TK}}u;  // K step: 8, 16 or 32
const STAGES: u32 = {{STAGES}}u;  // workgroup-memory stages: 1 or 2
const RM: u32 = {{RM}}u;  // rows of C per thread (4 or 8)
const RN: u32 = {{RN}}u;  // columns of C per thread (4 or 8)
const WX: u32 = TN / RN;
const WY: u32 = TM / RM;
const NT: u32 = WX * WY;
const AW: u32 = TM / 4u;  // vec4s per k-row of As
const BW: u32 = TN / 4u;  // vec4s per k-row of Bs
const KV: u32 = TK / 4u;  // vec4s along K per row of A (B transposed)
const AS: u32 = TK * AW;  // one stage of As, in vec4s
const BS: u32 = TK * BW;
const A_LOADS: u32 = TM * TK / 4u / NT;
const B_LOADS: u32 = TN * TK / 4u / NT;

override A_TRANS: bool = false;
override B_TRANS: bool = false;
override A_VEC: bool = false;
override B_VEC: bool = false;
override HAS_BIAS: bool = false;
override SPLITK: bool = false;
// A tensor of the result's shape added after the activation (`res`, bound
// whole), to the float16 value of the product where the result is float16:
// a separate add's values bit for bit.
override HAS_RESIDUAL: bool = false;
override WARP_TILES: bool = false;
// The activation applied last in the epilogue: ACT of lib/activation.wgsl.
// float16 results beyond its range become +-inf (as IEEE and ATen), not a
// device-defined value.
override F16_OUT: bool = false;  // inf_bits: lib/math.wgsl

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> a: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read> b: array<vec4<{{T}}>>;
@group(0) @binding(4) var<storage, read> bias: array<vec4<{{T}}>>;
@group(0) @binding(5) var<storage, read> res: array<{{T}}>;

// [STAGES][TK][TM / 4] and [STAGES][TK][TN / 4]: row k holds TM (TN) values
// of M (N) as vec4.
var<workgroup> As: array<vec4<f32>, STAGES * AS>;
var<workgroup> Bs: array<vec4<f32>, STAGES * BS>;

{{include lib/dims.wgsl}}
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

{{include lib/math.wgsl}}
{{include lib/activation.wgsl}}
{{include lib/f16.wgsl}}

fn remaining(limit: u32, at: u32) -> u32 { return select(0u, limit - at, at < limit); }

// The K slice at k0 of both operands into registers: group q = lid + i * NT
// of four values. A [M, K]: q -> row q / 4, k (q % 4) * 4; A_TRANS [K, M]:
// q -> k q / (TM / 4), m (q % (TM / 4)) * 4; B likewise.
// Values at k >= K (the end of this workgroup's range of K) load as zeros.
fn load_slice(k0: u32, K: u32, oa: u32, ob: u32, m0: u32, n0: u32, lid: u32,
              pa: ptr<function, array<vec4<f32>, A_LOADS>>, pb: ptr<function, array<vec4<f32>, B_LOADS>>) {
  let M = params.M;
  let N = params.N;
  for (var i = 0u; i < A_LOADS; i++) {
    let q = lid + i * NT;
    var v = vec4<f32>(0.0);
    if (A_TRANS) {
      let k = k0 + q / AW;
      let m = m0 + (q % AW) * 4u;
      if (k < K) {
        v = load_a4(oa + k * params.lda + m, remaining(M, m));
      }
    } else {
      let m = m0 + q / KV;
      let k = k0 + (q % KV) * 4u;
      if (m < M) {
        v = load_a4(oa + m * params.lda + k, remaining(K, k));
      }
    }
    (*pa)[i] = v;
  }
  for (var i = 0u; i < B_LOADS; i++) {
    let q = lid + i * NT;
    var v = vec4<f32>(0.0);
    if (B_TRANS) {
      let n = n0 + q / KV;
      let k = k0 + (q % KV) * 4u;
      if (n < N) {
        v = load_b4(ob + n * params.ldb + k, remaining(K, k));
      }
    } else {
      let k = k0 + q / BW;
      let n = n0 + (q % BW) * 4u;
      if (k < K) {
        v = load_b4(ob + k * params.ldb + n, remaining(N, n));
      }
    }
    (*pb)[i] = v;
  }
}

// The registers of load_slice into workgroup memory, k-major, at stage `st`.
fn store_slice(st: u32, lid: u32, pa: ptr<function, array<vec4<f32>, A_LOADS>>,
               pb: ptr<function, array<vec4<f32>, B_LOADS>>) {
  let sa = st * AS;
  let sb = st * BS;
  for (var i = 0u; i < A_LOADS; i++) {
    let q = lid + i * NT;
    let v = (*pa)[i];
    if (A_TRANS) {
      As[sa + q] = v;
    } else {
      let mm = q / KV;
      let kk = (q % KV) * 4u;
      for (var j = 0u; j < 4u; j++) {
        As[sa + (kk + j) * AW + mm / 4u][mm % 4u] = v[j];
      }
    }
  }
  for (var i = 0u; i < B_LOADS; i++) {
    let q = lid + i * NT;
    let v = (*pb)[i];
    if (B_TRANS) {
      let nn = q / KV;
      let kk = (q % KV) * 4u;
      for (var j = 0u; j < 4u; j++) {
        Bs[sb + (kk + j) * BW + nn / 4u][nn % 4u] = v[j];
      }
    } else {
      Bs[sb + q] = v;
    }
  }
}

// The multiplies of the slice at stage `st` into the thread's block.
fn multiply(st: u32, tx: u32, ty: u32, acc: ptr<function, array<vec4<f32>, RM * RN / 4u>>) {
  let sa = st * AS;
  let sb = st * BS;
  for (var k = 0u; k < TK; k++) {
    var av: array<vec4<f32>, RM / 4u>;
    var bv: array<vec4<f32>, RN / 4u>;
    for (var r = 0u; r < RM / 4u; r++) {
      av[r] = As[sa + k * AW + ty + r * WY];
    }
    for (var c = 0u; c < RN / 4u; c++) {
      bv[c] = Bs[sb + k * BW + tx + c * WX];
    }
    for (var i = 0u; i < RM; i++) {
      let x = vec4<f32>(av[i / 4u][i % 4u]);
      for (var c = 0u; c < RN / 4u; c++) {
        (*acc)[i * (RN / 4u) + c] = fma(x, bv[c], (*acc)[i * (RN / 4u) + c]);
      }
    }
  }
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let flat = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  let tiles = params.tiles_m * params.tiles_n;
  let per_split = tiles * params.batch;
  let nsplit = select(1u, params.splits, SPLITK);
  if (flat >= per_split * nsplit) {
    return;
  }
  let split = flat / per_split;
  let batch = (flat - split * per_split) / tiles;
  let rem = flat - split * per_split - batch * tiles;
  let tile_m = rem / params.tiles_n;
  let m0 = tile_m * TM;
  let n0 = (rem - tile_m * params.tiles_n) * TN;
  let M = params.M;
  let N = params.N;
  // This workgroup's range of K: all of it, or its split's.
  let kbeg = select(0u, split * params.kchunk, SPLITK);
  let K = select(params.K, min(params.K, kbeg + params.kchunk), SPLITK);

  // Batch offsets.
  var oa = params.a_off;
  var ob = params.b_off;
  var oc = params.c_off;
  var oo = params.o_off;
  var r = batch;
  for (var k = params.rank; k > 0u; k--) {
    let d = k - 1u;
    let n = dim_of(params.shape, d);
    let c = r % n;
    r = r / n;
    oa += c * dim_of(params.sa, d);
    ob += c * dim_of(params.sb, d);
    oc += c * dim_of(params.sc, d);
    oo += c * dim_of(params.so, d);
  }

  // The thread's place in the WX x WY grid: row-major, or in 8 x 4 blocks
  // of 32 consecutive invocations (WARP_TILES: WX % 8 == 0, WY % 4 == 0).
  var tx = lid % WX;
  var ty = lid / WX;
  if (WARP_TILES) {
    let w = lid / 32u;
    let l = lid % 32u;
    tx = (w % (WX / 8u)) * 8u + l % 8u;
    ty = (w / (WX / 8u)) * 4u + l / 8u;
  }
  var acc: array<vec4<f32>, RM * RN / 4u>;
  var pa: array<vec4<f32>, A_LOADS>;
  var pb: array<vec4<f32>, B_LOADS>;
  load_slice(kbeg, K, oa, ob, m0, n0, lid, &pa, &pb);
  if (STAGES == 1u) {
    for (var k0 = kbeg; k0 < K; k0 += TK) {
      store_slice(0u, lid, &pa, &pb);
      workgroupBarrier();
      if (k0 + TK < K) {
        load_slice(k0 + TK, K, oa, ob, m0, n0, lid, &pa, &pb);
      }
      multiply(0u, tx, ty, &acc);
      workgroupBarrier();
    }
  } else {
    // Slice t is read from stage t % 2 while slice t + 1 is written to the
    // other: after the barrier that ends slice t, no invocation still reads
    // the stage slice t + 2 will overwrite.
    store_slice(0u, lid, &pa, &pb);
    workgroupBarrier();
    var st = 0u;
    for (var k0 = kbeg; k0 < K; k0 += TK) {
      let more = k0 + TK < K;
      if (more) {
        load_slice(k0 + TK, K, oa, ob, m0, n0, lid, &pa, &pb);
      }
      multiply(st, tx, ty, &acc);
      if (more) {
        store_slice(st ^ 1u, lid, &pa, &pb);
      }
      workgroupBarrier();
      st ^= 1u;
    }
  }

  // Epilogue: scale, bias, masked stores. Thread (tx, ty) holds rows
  // (ty + r * WY) * 4 + 0..3 and columns (tx + c * WX) * 4 + 0..3 of the
  // tile (interleaved, so that a warp's workgroup-memory reads are
  // consecutive vec4s).
  // The result's element (m, n) of this batch: oo + m * ldc + n (split-K's
  // parts: contiguous, part `split` after the others).
  let ob_out = select(oo, (split * params.batch + batch) * M * N, SPLITK);
  let ldc = select(params.ldc, N, SPLITK);
  for (var i = 0u; i < RM; i++) {
    let m = m0 + (ty + (i / 4u) * WY) * 4u + i % 4u;
    if (m >= M) {
      continue;
    }
    for (var c = 0u; c < RN / 4u; c++) {
      let v = acc[i * (RN / 4u) + c] * select(params.alpha, 1.0, SPLITK);
      for (var j = 0u; j < 4u; j++) {
        let n = n0 + (tx + c * WX) * 4u + j;
        if (n >= N) {
          break;
        }
        if (SPLITK) {
          out[ob_out + m * ldc + n] = {{T}}(v[j]);
          continue;
        }
        var y = v[j];
        if (HAS_BIAS) {
          y += params.beta * bias_at(oc + m * params.bias_sm + n * params.bias_sn);
        }
        y = activate(y);
        if (F16_OUT && abs(y) >= 65520.0) {
          y = sign(y) * bitcast<f32>(inf_bits);
        }
        if (HAS_RESIDUAL) {
          if (F16_OUT) {
            y = cast_f16(y);
          }
          y += f32(res[ob_out + m * ldc + n]);
          if (F16_OUT && abs(y) >= 65520.0) {
            y = sign(y) * bitcast<f32>(inf_bits);
          }
        }
        out[ob_out + m * ldc + n] = {{T}}(y);
      }
    }
  }
}

// Products with few rows (ops/matmul.cpp, M <= 8, one batch): the shape of
// a decoder's step (one token per sequence). The tiled kernel (matmul.wgsl)
// computes 32 or 64 rows per workgroup, so with M = 1 it reads each weight
// row for one useful row at a time and runs far below the memory's speed;
// here every workgroup streams a block of B's columns once, for all M rows.
//   out = alpha * A @ op(B) + beta * bias, then the activation (epilogue of
//   ops/epilogue.h), A [M, K] (row stride lda), B [K, N] (row stride ldb)
//   or, with B_TRANS, [N, K].
// The memory's latency, not its bandwidth, bounds a product this small
// unless many loads are in flight: so many workgroups with few columns
// each, K spread over most invocations, four independent loads at a time.
// B [K, N]: CV x (256 / CV) invocations; each of CV takes 4 columns (a
// vec4 of a B row: 4 CV columns per workgroup) and each of the other
// 256 / CV every (256 / CV)th row of K. CV (1, 2 or 4) is chosen on the
// host so that a narrow product still has enough workgroups. B_TRANS: CT
// columns per workgroup (16 down to 1, again for enough workgroups), each
// read along K by 256 / CT invocations, four vec4s each in flight. The
// partial sums over K are added in workgroup memory.
// GLU (B [K, 2 N], not transposed; wgnn.matmul_silu_mul): SwiGLU's gate and
// up products side by side, out[m, n] = silu(gate) * up with gate the
// product's column n and up its column N + n (bias likewise). A workgroup
// takes the same 4 CV columns of each: 2 CV invocations across, the second
// CV on the up columns, and each gate column's invocation adds the up
// column's sum from workgroup memory.
{{ENABLE}}

const MR: u32 = 8u;  // most rows
const WG: u32 = 256u;

override B_TRANS: bool = false;
override A_VEC: bool = false;  // K and lda multiples of 4
override B_VEC: bool = false;  // the contiguous dim of B (N, or K with B_TRANS) a multiple of 4
override HAS_BIAS: bool = false;
override F16_OUT: bool = false;
override CV: u32 = 4u;  // B [K, N]: vec4s of columns per workgroup
override CT: u32 = 16u;  // B_TRANS: columns per workgroup (1 to 16, a power of 2)
override GLU: bool = false;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> a: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read> b: array<vec4<{{T}}>>;
@group(0) @binding(4) var<storage, read> bias: array<vec4<{{T}}>>;

var<workgroup> red: array<vec4<f32>, WG>;

fn a_at(i: u32) -> f32 { return f32(a[i >> 2u][i & 3u]); }
fn b_at(i: u32) -> f32 { return f32(b[i >> 2u][i & 3u]); }
fn bias_at(i: u32) -> f32 { return f32(bias[i >> 2u][i & 3u]); }

fn load_a4(base: u32, valid: u32) -> vec4<f32> {
  if (A_VEC && valid >= 4u) {
    return vec4<f32>(a[base >> 2u]);
  }
  var v = vec4<f32>(0.0);
  for (var j = 0u; j < min(valid, 4u); j++) {
    v[j] = a_at(base + j);
  }
  return v;
}

fn load_b4(base: u32, valid: u32) -> vec4<f32> {
  if (B_VEC && valid >= 4u) {
    return vec4<f32>(b[base >> 2u]);
  }
  var v = vec4<f32>(0.0);
  for (var j = 0u; j < min(valid, 4u); j++) {
    v[j] = b_at(base + j);
  }
  return v;
}

{{include lib/math.wgsl}}
{{include lib/activation.wgsl}}

fn remaining(limit: u32, at: u32) -> u32 { return select(0u, limit - at, at < limit); }

fn store(m: u32, n: u32, v: f32) {
  var y = v * params.alpha;
  if (HAS_BIAS) {
    y += params.beta * bias_at(m * params.bias_sm + n * params.bias_sn);
  }
  y = activate(y);
  if (F16_OUT && abs(y) >= 65520.0) {
    y = sign(y) * bitcast<f32>(inf_bits);
  }
  out[m * params.N + n] = {{T}}(y);
}

// GLU: silu(gate) * up, each with its bias (bias [2 N]).
fn store_glu(m: u32, n: u32, gate: f32, up: f32) {
  var g = gate * params.alpha;
  var u = up * params.alpha;
  if (HAS_BIAS) {
    g += params.beta * bias_at(n);
    u += params.beta * bias_at(params.N + n);
  }
  var y = g / (1.0 + exp(-g)) * u;
  if (F16_OUT && abs(y) >= 65520.0) {
    y = sign(y) * bitcast<f32>(inf_bits);
  }
  out[m * params.N + n] = {{T}}(y);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let group = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  let M = params.M;
  let N = params.N;
  let K = params.K;
  var acc: array<vec4<f32>, MR>;
  if (!B_TRANS) {
    let CX = select(CV, 2u * CV, GLU);  // invocations across
    let KT = WG / CX;  // rows of K in flight per vec4 of columns
    let tx = lid % CX;
    let ty = lid / CX;
    let up = GLU && tx >= CV;
    let n0 = group * (4u * CV) + select(tx, tx - CV, up) * 4u;
    let valid = remaining(N, n0);
    let col = n0 + select(0u, N, up);  // the column of B
    if (valid > 0u) {
      // Four rows of B in flight per step: k, k + KT, k + 2 KT, k + 3 KT.
      var k = ty;
      for (; k + 3u * KT < K; k += 4u * KT) {
        let b0 = load_b4(k * params.ldb + col, valid);
        let b1 = load_b4((k + KT) * params.ldb + col, valid);
        let b2 = load_b4((k + 2u * KT) * params.ldb + col, valid);
        let b3 = load_b4((k + 3u * KT) * params.ldb + col, valid);
        for (var m = 0u; m < MR; m++) {
          if (m < M) {
            let r = m * params.lda + k;
            acc[m] += a_at(r) * b0 + a_at(r + KT) * b1 + a_at(r + 2u * KT) * b2 + a_at(r + 3u * KT) * b3;
          }
        }
      }
      for (; k < K; k += KT) {
        let bv = load_b4(k * params.ldb + col, valid);
        for (var m = 0u; m < MR; m++) {
          if (m < M) {
            acc[m] += a_at(m * params.lda + k) * bv;
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
      for (var s = KT / 2u; s > 0u; s = s / 2u) {
        if (ty < s) {
          red[lid] += red[lid + s * CX];
        }
        workgroupBarrier();
      }
      if (ty == 0u && !up) {
        let v = red[lid];
        if (GLU) {
          let u = red[lid + CV];
          for (var j = 0u; j < min(valid, 4u); j++) {
            store_glu(m, n0 + j, v[j], u[j]);
          }
        } else {
          for (var j = 0u; j < min(valid, 4u); j++) {
            store(m, n0 + j, v[j]);
          }
        }
      }
      workgroupBarrier();
    }
    return;
  }
  let KS = WG / CT;  // invocations along K per column
  let c = lid / KS;
  let ks = lid % KS;
  let n = group * CT + c;
  if (n < N) {
    // Four vec4s of the column in flight per step: k, k + 4 KS, k + 8 KS, k + 12 KS.
    let step = 4u * KS;
    var k = ks * 4u;
    for (; k + 3u * step < K; k += 4u * step) {
      let b0 = load_b4(n * params.ldb + k, K - k);
      let b1 = load_b4(n * params.ldb + k + step, K - k - step);
      let b2 = load_b4(n * params.ldb + k + 2u * step, K - k - 2u * step);
      let b3 = load_b4(n * params.ldb + k + 3u * step, K - k - 3u * step);
      for (var m = 0u; m < MR; m++) {
        if (m < M) {
          let r = m * params.lda + k;
          acc[m].x += dot(load_a4(r, K - k), b0) + dot(load_a4(r + step, K - k - step), b1) +
                      dot(load_a4(r + 2u * step, K - k - 2u * step), b2) +
                      dot(load_a4(r + 3u * step, K - k - 3u * step), b3);
        }
      }
    }
    for (; k < K; k += step) {
      let left = K - k;
      let bv = load_b4(n * params.ldb + k, left);
      for (var m = 0u; m < MR; m++) {
        if (m < M) {
          acc[m].x += dot(load_a4(m * params.lda + k, left), bv);
        }
      }
    }
  }
  for (var m = 0u; m < MR; m++) {
    if (m >= M) {
      break;
    }
    red[lid] = vec4<f32>(acc[m].x, 0.0, 0.0, 0.0);
    workgroupBarrier();
    for (var s = KS / 2u; s > 0u; s = s / 2u) {
      if (ks < s) {
        red[lid].x += red[lid + s].x;
      }
      workgroupBarrier();
    }
    if (ks == 0u && n < N) {
      store(m, n, red[lid].x);
    }
    workgroupBarrier();
  }
}

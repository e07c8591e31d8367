// ConvInteger and QLinearConv as an implicit GEMM (the layout of
// kernels/conv.wgsl, in integers), for 1 to 3 spatial dims (D x H x W,
// missing dims of size 1), with groups, stride, padding and dilation. Per
// group, y[co, q] = sum_k (w[co, k] - w_zp[co]) * (col[k, q] - x_zp) over
// k = (ci, kd, kh, kw) in cin_g * kernel volume and q = (n, od, oh, ow);
// col is gathered from x as tiles are staged, never stored.
//
// A workgroup of 256 threads computes a TM x TN tile (output channels x
// pixels), each thread 4 x 4 of it. The reduction walks k in steps of TK,
// staging a TM x TK tile of w and a TK x TN tile of col in workgroup memory
// as i32 with the zero points already subtracted; a tap outside the input
// (padding) and a k or channel past the end stage 0, so padding acts as if
// it held x_zp, as in kernels/conv_integer.wgsl. Accumulation in i32
// (wrapping, like the direct kernel: the sums are equal in any order). k is
// decoded through `ktab`, the host's table (ops/conv_tile.h):
//   ktab[k] = (ci * in_vol, kd * dil_d, kh * dil_h, kw * dil_w).
// The epilogue (placeholder EPILOGUE, ops/quantized.cpp) is the direct kernel's,
// with `acc`, `co` (the channel in the tensor) and `o` (the output index)
// bound: int32 out, or the QLinearConv requantization.
{{ENABLE}}

override TM: u32 = 64u;
override TN: u32 = 64u;
override TK: u32 = 16u;

const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<i32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<i32>;
@group(0) @binding(3) var<storage, read> w: array<i32>;
@group(0) @binding(4) var<storage, read> x_zp: array<i32>;
@group(0) @binding(5) var<storage, read> w_zp: array<i32>;
{{REQUANT_BINDINGS}}
{{KTAB_BINDING}}

// k-major tiles: ws[kk][m] and xs[kk][q], four consecutive m (or q) per vec4.
var<workgroup> ws: array<vec4<i32>, TK * TM / 4u>;
var<workgroup> xs: array<vec4<i32>, TK * TN / 4u>;

// Element (k, this thread's pixel) of col minus x_zp, 0 outside the input.
// `org` is the pixel's origin in input coordinates (o * stride - pad),
// `xbase` the offset of its image and group in x.
fn gather(k: u32, org: vec3<i32>, xbase: u32, zx: i32) -> i32 {
  let t = ktab[k];
  let p = vec3<u32>(org + t.yzw);  // negative -> huge: one unsigned test per dim
  if (any(p >= vec3<u32>(params.in_d, params.in_h, params.in_w))) {
    return 0;
  }
  return x[xbase + u32(t.x) + (p.x * params.in_h + p.y) * params.in_w + p.z] - zx;
}

// This thread's share of the weight tile at k0 (TM x TK, element e = lid +
// i * WG: at most 4 per thread for the tiles conv_tile.h picks), minus the
// channel's zero point.
fn stage_w(k0: u32, co0: u32, gi: u32, lid: u32, pw: ptr<function, array<i32, 4>>) {
  for (var i = 0u; i < 4u; i++) {
    let e = lid + i * WG;
    var v = 0;
    if (e < TM * TK) {
      let k = k0 + e % TK;
      let co = co0 + e / TK;
      if (k < params.kred && co < params.cout_g) {
        let c = gi * params.cout_g + co;
        v = w[c * params.kred + k] - w_zp[select(0u, c, params.w_zp_chan == 1u)];
      }
    }
    (*pw)[i] = v;
  }
}

// This thread's share of the col tile at k0 (TK x TN, all for its pixel: at
// most 8 per thread).
fn stage_x(k0: u32, qvalid: bool, org: vec3<i32>, xbase: u32, zx: i32, lid: u32,
           px: ptr<function, array<i32, 8>>) {
  for (var i = 0u; i < 8u; i++) {
    let e = lid + i * WG;
    var v = 0;
    if (e < TK * TN) {
      let k = k0 + e / TN;
      if (k < params.kred && qvalid) {
        v = gather(k, org, xbase, zx);
      }
    }
    (*px)[i] = v;
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let tile = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  if (tile >= params.tiles) {
    return;
  }
  let tn = tile % params.ntiles;
  let co0 = (tile / params.ntiles) % params.mtiles * TM;
  let gi = tile / params.ntiles / params.mtiles;
  let q0 = tn * TN;
  let zx = x_zp[0];

  // The pixel this thread stages for col.
  let col = lid % TN;
  let q = q0 + col;
  let qvalid = q < params.npix;
  let img = q / params.out_vol;
  let pl = q % params.out_vol;
  let ohw = params.out_h * params.out_w;
  let op = vec3<i32>(vec3<u32>(pl / ohw, (pl % ohw) / params.out_w, pl % params.out_w));
  let org = op * vec3<i32>(vec3<u32>(params.sd, params.sh, params.sw)) - vec3<i32>(params.pd, params.ph, params.pw);
  let xbase = (img * params.cin + gi * params.cin_g) * params.in_vol;

  let tx = lid % (TN / 4u);
  let ty = lid / (TN / 4u);
  var accs: array<vec4<i32>, 4>;

  // The next K slice is gathered into registers while the current one is
  // multiplied (one workgroup-memory stage, register prefetch).
  var pw: array<i32, 4>;
  var px: array<i32, 8>;
  stage_w(0u, co0, gi, lid, &pw);
  stage_x(0u, qvalid, org, xbase, zx, lid, &px);
  for (var k0 = 0u; k0 < params.kred; k0 += TK) {
    for (var i = 0u; i < 4u; i++) {
      let e = lid + i * WG;
      if (e < TM * TK) {
        let m = e / TK;
        ws[(e % TK) * (TM / 4u) + m / 4u][m % 4u] = pw[i];
      }
    }
    for (var i = 0u; i < 8u; i++) {
      let e = lid + i * WG;
      if (e < TK * TN) {
        xs[(e / TN) * (TN / 4u) + col / 4u][col % 4u] = px[i];
      }
    }
    workgroupBarrier();
    if (k0 + TK < params.kred) {
      stage_w(k0 + TK, co0, gi, lid, &pw);
      stage_x(k0 + TK, qvalid, org, xbase, zx, lid, &px);
    }
    for (var kk = 0u; kk < TK; kk++) {
      let a = ws[kk * (TM / 4u) + ty];
      let b = xs[kk * (TN / 4u) + tx];
      accs[0] += a.x * b;
      accs[1] += a.y * b;
      accs[2] += a.z * b;
      accs[3] += a.w * b;
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < 4u; i++) {
    let cg = co0 + ty * 4u + i;
    if (cg >= params.cout_g) {
      break;
    }
    let co = gi * params.cout_g + cg;
    for (var j = 0u; j < 4u; j++) {
      let qj = q0 + tx * 4u + j;
      if (qj >= params.npix) {
        break;
      }
      let o = (qj / params.out_vol * params.cout + co) * params.out_vol + qj % params.out_vol;
      var acc = accs[i][j];
{{EPILOGUE}}
    }
  }
}

// Convolution (and transposed convolution) as an implicit GEMM, for 1 to 3
// spatial dims (seen as D x H x W, missing dims of size 1), with groups and a
// fused bias. Per group g, the output is a matrix product
//   y[co, q] = sum_k w[co, k] * col[k, q]
// over k = (ci, kd, kh, kw) in C_in/groups * kernel volume, and q = (n, od,
// oh, ow) over the batch and the output pixels. `col` is never stored: its
// elements are gathered from x when a tile is staged.
//
// A workgroup of 256 threads computes a TM x TN tile (output channels x
// pixels); each thread 4 x 4 of it (4 channels, 4 consecutive pixels). The
// reduction walks k in steps of TK, staging a TM x TK tile of w and a
// TK x TN tile of col in workgroup memory (as f32, whatever the storage).
// Each thread stages col for one fixed pixel (TN divides 256), so the pixel
// is decoded once per thread, and k is decoded through `ktab`, a table the
// host builds per convolution:
//   forward:    ktab[k]      = (ci * in_vol, kd * dil_d, kh * dil_h, kw * dil_w)
//   transposed: ktab[2k]     = the same,
//               ktab[2k + 1] = (ci * cout_g * kvol + kernel offset, 0, 0, 0)
// POINTWISE (1x1 kernel, stride 1, no padding, forward) needs no table: col
// is x itself, read at x[n, ci, q].
//
// Forward: input position = o * stride - pad_begin + k * dil.
// Transposed: o + pad_begin - k * dil must be a multiple of the stride, and
// the quotient is the input position (a gather: no atomics).
//
// SPLITK (few tiles, a long reduction): the reduction is cut into `splits`
// ranges of `kchunk`; each workgroup sums one range of one tile and writes
// it, without bias, as f32 ({{O}}) to y[split][c][q];
// conv_splitk.wgsl adds the ranges and the bias. Otherwise {{O}} is {{T}}
// and y is the output.
//
// AFFINE_BINDING and AFFINE (placeholders): an optional per-output-channel float32
// affine and an optional residual (the result's element oi added) before
// the activation (conv.cpp's add_epilogue_subs; not with SPLITK, where the
// second pass applies them).
{{ENABLE}}

override TM: u32 = 64u;
override TN: u32 = 64u;
override TK: u32 = 16u;
override TRANSPOSED: bool = false;
override POINTWISE: bool = false;
override SPLITK: bool = false;
{{include lib/activation.wgsl}}
{{include lib/math.wgsl}}

const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{O}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
@group(0) @binding(3) var<storage, read> w: array<{{T}}>;
@group(0) @binding(4) var<storage, read> bias: array<{{T}}>;
@group(0) @binding(5) var<storage, read> ktab: array<vec4<i32>>;{{AFFINE_BINDING}}

// k-major tiles: ws[kk][m] and xs[kk][q], four consecutive m (or q) per vec4.
var<workgroup> ws: array<vec4<f32>, TK * TM / 4u>;
var<workgroup> xs: array<vec4<f32>, TK * TN / 4u>;

// Element (k, this thread's pixel) of col. `org` is the pixel's origin in
// input coordinates (see the header), `xbase` the offset of its image and
// group in x.
fn gather(k: u32, org: vec3<i32>, xbase: u32, pl: u32) -> f32 {
  if (POINTWISE) {
    return f32(x[xbase + k * params.in_vol + pl]);
  }
  let dims = vec3<u32>(params.in_d, params.in_h, params.in_w);
  if (TRANSPOSED) {
    let t = ktab[2u * k];
    let s = params.stride.xyz;
    let u = org - t.yzw;
    // u >= 0, a multiple of the stride, and u / stride inside the input.
    if (any(u < vec3<i32>(0)) || any(u % s != vec3<i32>(0))) {
      return 0.0;
    }
    let p = vec3<u32>(u / s);
    if (any(p >= dims)) {
      return 0.0;
    }
    return f32(x[xbase + u32(t.x) + (p.x * params.in_h + p.y) * params.in_w + p.z]);
  }
  let t = ktab[k];
  let p = vec3<u32>(org + t.yzw);  // negative -> huge: one unsigned test per dim
  if (any(p >= dims)) {
    return 0.0;
  }
  return f32(x[xbase + u32(t.x) + (p.x * params.in_h + p.y) * params.in_w + p.z]);
}

// This thread's share of the weight tile at k0 (TM x TK, element e = lid +
// i * WG: at most 4 per thread for the tiles conv.cpp picks).
fn stage_w(k0: u32, kend: u32, co0: u32, wbase: u32, lid: u32, pw: ptr<function, array<f32, 4>>) {
  for (var i = 0u; i < 4u; i++) {
    let e = lid + i * WG;
    var v = 0.0;
    if (e < TM * TK) {
      let k = k0 + e % TK;
      let co = co0 + e / TK;
      if (k < kend && co < params.cout_g) {
        if (TRANSPOSED) {
          v = f32(w[wbase + u32(ktab[2u * k + 1u].x) + co * params.kvol]);
        } else {
          v = f32(w[wbase + co * params.kred + k]);
        }
      }
    }
    (*pw)[i] = v;
  }
}

// This thread's share of the col tile at k0 (TK x TN, all for its pixel: at
// most 8 per thread).
fn stage_x(k0: u32, kend: u32, qvalid: bool, org: vec3<i32>, xbase: u32, pl: u32, lid: u32,
           px: ptr<function, array<f32, 8>>) {
  for (var i = 0u; i < 8u; i++) {
    let e = lid + i * WG;
    var v = 0.0;
    if (e < TK * TN) {
      let k = k0 + e / TN;
      if (k < kend && qvalid) {
        v = gather(k, org, xbase, pl);
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
  let gs = tile / params.ntiles / params.mtiles;  // split * groups + group
  let gi = gs % params.groups;
  let split = gs / params.groups;
  let q0 = tn * TN;
  var kbeg = 0u;
  var kend = params.kred;
  if (SPLITK) {
    kbeg = split * params.kchunk;
    kend = min(kbeg + params.kchunk, params.kred);
  }

  // The pixel this thread stages for col.
  let col = lid % TN;
  let q = q0 + col;
  let qvalid = q < params.npix;
  let img = q / params.out_vol;
  let pl = q % params.out_vol;
  let ohw = params.out_h * params.out_w;
  let o = vec3<i32>(vec3<u32>(pl / ohw, (pl % ohw) / params.out_w, pl % params.out_w));
  var org: vec3<i32>;
  if (TRANSPOSED) {
    org = o + params.pad.xyz;
  } else {
    org = o * params.stride.xyz - params.pad.xyz;
  }
  let xbase = (img * params.cin + gi * params.cin_g) * params.in_vol;
  let wbase = gi * params.cout_g * params.kred;  // the group's weights (either layout)

  let tx = lid % (TN / 4u);
  let ty = lid / (TN / 4u);
  var acc: array<vec4<f32>, 4>;

  // The next K slice is gathered into registers while the current one is
  // multiplied (one workgroup-memory stage, register prefetch).
  var pw: array<f32, 4>;
  var px: array<f32, 8>;
  stage_w(kbeg, kend, co0, wbase, lid, &pw);
  stage_x(kbeg, kend, qvalid, org, xbase, pl, lid, &px);
  for (var k0 = kbeg; k0 < kend; k0 += TK) {
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
    if (k0 + TK < kend) {
      stage_w(k0 + TK, kend, co0, wbase, lid, &pw);
      stage_x(k0 + TK, kend, qvalid, org, xbase, pl, lid, &px);
    }
    for (var kk = 0u; kk < TK; kk++) {
      let a = ws[kk * (TM / 4u) + ty];
      let b = xs[kk * (TN / 4u) + tx];
      acc[0] += a.x * b;
      acc[1] += a.y * b;
      acc[2] += a.z * b;
      acc[3] += a.w * b;
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < 4u; i++) {
    let co = co0 + ty * 4u + i;
    if (co >= params.cout_g) {
      break;
    }
    let c = gi * params.cout_g + co;
    var b = 0.0;
    if (params.has_bias != 0u && !SPLITK) {
      b = f32(bias[c]);
    }
    for (var j = 0u; j < 4u; j++) {
      let qj = q0 + tx * 4u + j;
      if (qj >= params.npix) {
        break;
      }
      if (SPLITK) {
        y[(split * params.cout + c) * params.npix + qj] = {{O}}(acc[i][j]);
      } else {
        let n = qj / params.out_vol;
        let oi = (n * params.cout + c) * params.out_vol + qj % params.out_vol;
        y[oi] = {{O}}(activate({{AFFINE}}));
      }
    }
  }
}

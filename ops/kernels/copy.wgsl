// Strided copy: one invocation per element of an iteration shape (rank <=
// 8), dst[dst_off(c)] = src[src_off(c)] for each coordinate vector c. It
// moves data bit for bit: {{T}} is u32 for every 32-bit dtype (float32,
// int32, int64 stored as int32, bool) and f16 for float16 (2-byte elements,
// so float16 needs the shader-f16 feature). ops/movement.cpp builds every
// data-movement op on it:
//
//   MODE 0 (affine)  src_off = src_base + sum c[d] * src_stride[d], strides
//                    signed (two's complement; u32 arithmetic wraps and the
//                    final offset is in range): permute, slice (any step),
//                    expand (stride 0), cat (dst strided), split.
//   MODE 1 (wrap)    source coordinate c[d] % in_dim[d]: repeat / Tile.
//   MODE 2..5 (pad)  source coordinate t = c[d] - lo[d]; outside
//                    [0, in_dim[d]): 2 constant (write fill[0]), 3 reflect,
//                    4 replicate (clamp), 5 circular (wrap). Negative lo
//                    crops.
{{ENABLE}}

override MODE: u32 = 0u;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<{{T}}>;
@group(0) @binding(3) var<storage, read> fill: array<{{T}}>;  // the pad value (MODE 2)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  var rem = i;
  var d_off = params.dst_base;
  var s_off = params.src_base;
  var inside = true;
  for (var k = params.rank; k > 0u; k--) {
    let d = k - 1u;
    let n = params.shape[d >> 2u][d & 3u];
    let c = rem % n;
    rem = rem / n;
    d_off += c * params.dst_stride[d >> 2u][d & 3u];
    var t = c;
    if (MODE == 1u) {
      t = c % params.in_dim[d >> 2u][d & 3u];
    } else if (MODE >= 2u) {
      let m = i32(params.in_dim[d >> 2u][d & 3u]);
      var ti = i32(c) - bitcast<i32>(params.lo[d >> 2u][d & 3u]);
      if (ti < 0 || ti >= m) {
        switch MODE {
          case 2u: {
            inside = false;
            ti = 0;
          }
          case 3u: {
            ti = select(ti, -ti, ti < 0);
            ti = select(ti, 2 * (m - 1) - ti, ti >= m);
          }
          case 4u: {
            ti = clamp(ti, 0, m - 1);
          }
          default: {
            ti = ((ti % m) + m) % m;
          }
        }
      }
      t = u32(ti);
    }
    s_off += t * params.src_stride[d >> 2u][d & 3u];
  }
  if (MODE == 2u && !inside) {
    dst[d_off] = fill[0];
  } else {
    dst[d_off] = src[s_off];
  }
}

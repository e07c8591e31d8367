// GatherND (wgnn.gather_nd, ops/scatter.cpp): one invocation per output
// element o = (bm, s), bm = o / slice the index tuple (over every batch
// element: b = bm / per_batch), s the element of the slice it copies:
//   dst[o] = src[b * batch_stride + sum_j index[bm * q + j] * stride_j + s]
// Negative indices count from the end; one still outside its dim is
// reported (report(), the graph's checked mode) and clamped. Elements move
// bit for bit ({{T}} u32, or f16 for float16).
{{ENABLE}}

const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<{{T}}>;
@group(0) @binding(3) var<storage, read> index: array<i32>;
{{CHECK_DECL}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let o = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (o >= params.count) {
    return;
  }
  let bm = o / params.slice;
  var off = (bm / params.per_batch) * params.batch_stride + o % params.slice;
  for (var j = 0u; j < params.q; j++) {
    let size = i32(params.dims[j >> 2u][j & 3u]);
    var ix = index[bm * params.q + j];
    let given = ix;
    ix = select(ix, ix + size, ix < 0);
    if (ix < 0 || ix >= size) {
      report(params.check_slot, given);
    }
    off += u32(clamp(ix, 0, size - 1)) * params.strides[j >> 2u][j & 3u];
  }
  dst[o] = src[off];
}

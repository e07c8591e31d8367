// TopK, second pass (aten.topk, ops/topk.cpp): one invocation per kept
// element j of a row ranks it among the row's k kept ones (sel, in index
// order, from kernels/topk_select.wgsl): larger keys first, equal keys by
// the lower index. It writes its value and index at that rank, along the
// row's axis of the [outer, k, inner] results. Indices are int32 (int64
// results are stored as int32).
{{ENABLE}}

override INTS: bool = false;  // {{T}} is i32 (int32, int64 stored as int32)
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> values: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> indices: array<i32>;
@group(0) @binding(2) var<uniform> params: Params;
@group(0) @binding(3) var<storage, read> x: array<{{T}}>;
@group(0) @binding(4) var<storage, read> sel: array<u32>;

{{include lib/topk_key.wgsl}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let g = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (g >= params.rows_or_count) {
    return;
  }
  let k = params.k;
  let row = g / k;
  let j = g % k;
  let outer = row / params.inner;
  let in_i = row % params.inner;
  let base = outer * params.n * params.inner + in_i;
  let ij = sel[row * k + j];
  let kj = key_of(ij, base);
  var rank = 0u;
  for (var m = 0u; m < k; m++) {
    let km = key_of(sel[row * k + m], base);
    if (km > kj || (km == kj && m < j)) {
      rank++;
    }
  }
  let o = (outer * k + rank) * params.inner + in_i;
  values[o] = x[base + ij * params.inner];
  indices[o] = i32(ij);
}

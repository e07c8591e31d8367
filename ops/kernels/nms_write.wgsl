// wgnn.nms (ops/dynamic.cpp): the rows [batch, class, box] of the boxes
// kernels/nms.wgsl kept, one invocation per (batch, class), in (batch,
// class, order kept) order; `found` rows in all (int64 as int32).
const WG: u32 = 64u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<i32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> sel: array<i32>;
@group(0) @binding(3) var<storage, read> counts: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let pair = gid.x;
  if (pair >= params.batches * params.classes) {
    return;
  }
  var row = 0u;
  for (var k = 0u; k < pair; k++) {
    row += counts[k];
  }
  for (var t = 0u; t < counts[pair]; t++) {
    if (row + t >= params.found) {
      return;
    }
    let at = (row + t) * 3u;
    out[at] = i32(pair / params.classes);
    out[at + 1u] = i32(pair % params.classes);
    out[at + 2u] = sel[pair * params.max_out + t];
  }
}

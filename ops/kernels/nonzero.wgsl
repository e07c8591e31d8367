// wgnn.nonzero_count and wgnn.nonzero (ops/dynamic.cpp): the positions of
// the nonzero elements of x in row-major order, in three phases over
// blocks of 256 elements (one workgroup each):
// - PHASE 0: counts[b] = the nonzero elements of block b;
// - PHASE 1: out[0] = the sum of the counts (one invocation: the value the
//   session reads back to size the result);
// - PHASE 2: each nonzero element finds its place, the counts of the blocks
//   before its own plus the nonzero elements before it in its block, and
//   writes its coordinates into out [rank, found] (int64 as int32).
// x is read as 32-bit words; IS_FLOAT ignores the sign bit (-0.0 is zero,
// NaN is not).
override PHASE: u32 = 0u;
override IS_FLOAT: bool = false;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<i32>;
@group(0) @binding(1) var<storage, read_write> counts: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;
@group(0) @binding(3) var<storage, read> x: array<u32>;
@group(0) @binding(4) var<storage, read> dims: array<u32>;

var<workgroup> block_count: atomic<u32>;
var<workgroup> flags: array<u32, WG>;
var<workgroup> before: array<u32, WG>;
var<workgroup> offset: u32;

fn nonzero(i: u32) -> bool {
  if (i >= params.count) {
    return false;
  }
  let v = x[i];
  if (IS_FLOAT) {
    return (v & 0x7fffffffu) != 0u;  // on the bits: NaN is nonzero whatever the compiler assumes
  }
  return v != 0u;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let b = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  if (PHASE == 1u) {
    if (b == 0u && lid == 0u) {
      var total = 0u;
      for (var k = 0u; k < params.blocks; k++) {
        total += counts[k];
      }
      out[0] = i32(total);
    }
    return;
  }
  let i = b * WG + lid;
  let nz = b < params.blocks && nonzero(i);
  if (PHASE == 0u) {
    if (lid == 0u) {
      atomicStore(&block_count, 0u);
    }
    workgroupBarrier();
    if (nz) {
      atomicAdd(&block_count, 1u);
    }
    workgroupBarrier();
    if (lid == 0u && b < params.blocks) {
      counts[b] = atomicLoad(&block_count);
    }
    return;
  }
  flags[lid] = select(0u, 1u, nz);
  workgroupBarrier();
  if (lid == 0u) {
    var o = 0u;
    for (var k = 0u; k < b && k < params.blocks; k++) {
      o += counts[k];
    }
    offset = o;
    var run = 0u;
    for (var k = 0u; k < WG; k++) {
      before[k] = run;
      run += flags[k];
    }
  }
  workgroupBarrier();
  if (!nz) {
    return;
  }
  let pos = offset + before[lid];
  if (pos >= params.found) {
    return;
  }
  var rest = i;
  for (var d = i32(params.rank) - 1; d >= 0; d--) {
    let size = dims[u32(d)];
    out[u32(d) * params.found + pos] = i32(rest % size);
    rest = rest / size;
  }
}

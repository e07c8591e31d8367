// Tiled transpose for the strided copy (ops/movement.cpp, kernels/copy.wgsl's
// MODE 0 plans): a copy whose destination's contiguous dim (the plan's last,
// L) is not its source's (the plan's second-to-last, J: source stride 1).
// Each workgroup moves a TILE x TILE block of (J, L) at one coordinate of
// the outer dims through workgroup memory, so that both its reads (along J)
// and its writes (along L) are consecutive in memory. The plan's dims 0 ..
// rank - 3 are the outer dims, decoded from the workgroup's flat index after
// its (J, L) block. Bit for bit: {{T}} is u32 for 32-bit dtypes, f16 for
// float16.
{{ENABLE}}

const TILE: u32 = 32u;
const ROWS: u32 = 8u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<{{T}}>;

// [L][J] of the block, rows padded by one against bank conflicts.
var<workgroup> block: array<{{T}}, TILE * (TILE + 1u)>;

{{include lib/dims.wgsl}}

@compute @workgroup_size(TILE, ROWS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let r = params.rank;
  let nj = dim_of(params.shape, r - 2u);
  let nl = dim_of(params.shape, r - 1u);
  let tl = (nl + TILE - 1u) / TILE;
  let per = ((nj + TILE - 1u) / TILE) * tl;
  let flat = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  var outer = flat / per;
  let t = flat - outer * per;
  let j0 = (t / tl) * TILE;
  let l0 = (t % tl) * TILE;
  var so = params.src_base;
  var dso = params.dst_base;
  for (var k = r - 2u; k > 0u; k--) {
    let d = k - 1u;
    let n = dim_of(params.shape, d);
    let c = outer % n;
    outer = outer / n;
    so += c * dim_of(params.src_stride, d);
    dso += c * dim_of(params.dst_stride, d);
  }
  // Workgroups past the last block (a grid rounded up) do nothing; the
  // condition is the same for the whole workgroup.
  if (outer > 0u) {
    return;
  }
  let sl = dim_of(params.src_stride, r - 1u);
  let dj = dim_of(params.dst_stride, r - 2u);
  for (var i = 0u; i < TILE; i += ROWS) {
    let j = j0 + lid.x;
    let l = l0 + lid.y + i;
    if (j < nj && l < nl) {
      block[(lid.y + i) * (TILE + 1u) + lid.x] = src[so + j + l * sl];
    }
  }
  workgroupBarrier();
  for (var i = 0u; i < TILE; i += ROWS) {
    let l = l0 + lid.x;
    let j = j0 + lid.y + i;
    if (j < nj && l < nl) {
      dst[dso + j * dj + l] = block[lid.x * (TILE + 1u) + lid.y + i];
    }
  }
}

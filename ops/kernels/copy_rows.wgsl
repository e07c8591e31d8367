// Copies `rows` rows of every block from one 3-D layout into another, in
// 32-bit words: src is [outer, src_rows, inner], dst [outer, dst_rows,
// inner], and for o < outer, r < rows, i < inner:
//   dst[o, dst_row + r, i] = src[o, src_row + r, i].
// A key/value cache kept at a capacity (generate/generate.cpp): a step's new
// row into its slot, or the rows so far into a larger capacity.
{{PARAMS}}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * nwg.x) * WG + lid;
  if (t >= p.outer * p.rows * p.inner) {
    return;
  }
  let i = t % p.inner;
  let r = (t / p.inner) % p.rows;
  let o = t / (p.inner * p.rows);
  dst[(o * p.dst_rows + p.dst_row + r) * p.inner + i] = src[(o * p.src_rows + p.src_row + r) * p.inner + i];
}

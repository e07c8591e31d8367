// aten.triu / aten.tril (ONNX Trilu): one invocation per element of a
// contiguous [..., rows, cols] tensor; element (r, c) of each matrix is kept
// when c - r >= diagonal (UPPER) or c - r <= diagonal (lower), else zeroed.
// Data moves bit for bit ({{T}} is u32 for 32-bit dtypes, f16 for float16),
// so zero is the all-zero bit pattern of every dtype.
{{ENABLE}}

override UPPER: bool = true;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<{{T}}>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let c = i32(i % params.cols);
  let r = i32((i / params.cols) % params.rows);
  let keep = select(c - r <= params.diagonal, c - r >= params.diagonal, UPPER);
  dst[i] = select({{T}}(0), src[i], keep);
}

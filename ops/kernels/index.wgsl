// Indexed copy along one dimension `dim` of `src` (contiguous, rank <= 8):
// one invocation per output element, at coordinates c of the output shape,
//
//   dst[i] = src[sum_{d != dim} c[d] * src_stride[d] + idx * src_stride[dim]]
//
// with idx = index[c[dim]] (index_select / ONNX Gather, ELEMENTS false) or
// idx = index[i] (gather / ONNX GatherElements: the index has the output's
// shape, ELEMENTS true). Negative indices count from the end; an index still
// outside [0, dim_size) is reported (report(): the graph's checked mode,
// ops/helpers.h check_subs) and clamped. Data moves bit for bit: {{T}} is u32
// for 32-bit dtypes and f16 for float16; indices are int32 (int64 is stored
// as int32).
//
// A table or result over maxStorageBufferBindingSize is split over several
// dispatches (ops/movement.cpp): one covers the output elements [first,
// first + count), `dst` bound from element `first`, and reads only the rows
// [row_lo, row_hi) of dim (which is src's outermost dim of size > 1),
// `src` bound from row row_lo; an element whose index lies outside those
// rows is left to the dispatch that has them.
{{ENABLE}}

override ELEMENTS: bool = false;
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
  let j = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (j >= params.count) {
    return;
  }
  let i = params.first + j;
  var rem = i;
  var s_off = 0u;
  var k = 0u;
  for (var r = params.rank; r > 0u; r--) {
    let d = r - 1u;
    let n = params.shape[d >> 2u][d & 3u];
    let c = rem % n;
    rem = rem / n;
    if (d == params.dim) {
      k = c;
    } else {
      s_off += c * params.src_stride[d >> 2u][d & 3u];
    }
  }
  let size = i32(params.dim_size);
  var idx = index[select(k, i, ELEMENTS)];
  let given = idx;
  idx = select(idx, idx + size, idx < 0);
  if (idx < 0 || idx >= size) {
    report(params.check_slot, given);
  }
  idx = clamp(idx, 0, size - 1);
  let row = u32(idx);
  if (row < params.row_lo || row >= params.row_hi) {
    return;
  }
  dst[j] = src[s_off + (row - params.row_lo) * params.src_stride[params.dim >> 2u][params.dim & 3u]];
}

// Concatenation of two to four tensors along one dim in one dispatch
// (ops/movement.cpp, aten.cat): the result seen as [outer, dim, inner],
// inner counted in {{T}}s; input k holds the result's rows [start_k,
// start_k + rows_k) of dim. One invocation per {{T}} of the result. The op
// moves bits as they are, {{T}} u32 (any dtype whose rows are whole 32-bit
// words, float16 in pairs) or vec4<u32> where a row is whole vec4s.
{{ENABLE}}

const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src0: array<{{T}}>;
@group(0) @binding(3) var<storage, read> src1: array<{{T}}>;
@group(0) @binding(4) var<storage, read> src2: array<{{T}}>;  // src0 again where unused
@group(0) @binding(5) var<storage, read> src3: array<{{T}}>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let w = i % params.inner;
  let t = i / params.inner;
  let d = t % params.dim;
  let o = t / params.dim;
  var k = 0u;
  var first = params.start0;
  var rows = params.rows0;
  if (params.inputs > 1u && d >= params.start1) {
    k = 1u;
    first = params.start1;
    rows = params.rows1;
  }
  if (params.inputs > 2u && d >= params.start2) {
    k = 2u;
    first = params.start2;
    rows = params.rows2;
  }
  if (params.inputs > 3u && d >= params.start3) {
    k = 3u;
    first = params.start3;
    rows = params.rows3;
  }
  let s = (o * rows + (d - first)) * params.inner + w;
  switch k {
    case 0u: {
      dst[i] = src0[s];
    }
    case 1u: {
      dst[i] = src1[s];
    }
    case 2u: {
      dst[i] = src2[s];
    }
    default: {
      dst[i] = src3[s];
    }
  }
}

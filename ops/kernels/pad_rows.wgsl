// Copies a matrix of `cols`-wide float16 rows into one of `cols_out`-wide
// rows (cols_out >= cols), the columns past `cols` zero: a convolution's
// weight [Co, Ci*KH*KW] widened to a multiple of 8 halves for the
// tensor-core kernel, which reads its rows 8 halves at a time
// (ops/subgroup_matmul.cpp). Runs once when the weight is a constant.
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.count) {
    return;
  }
  let r = i / params.cols_out;
  let c = i - r * params.cols_out;
  var v = {{T}}(0.0);
  if (c < params.cols) {
    v = src[r * params.cols + c];
  }
  dst[i] = v;
}

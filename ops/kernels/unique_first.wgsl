// wgnn.unique_count (ops/dynamic.cpp): x viewed as [outer, rows, inner];
// slice r is x[:, r, :]. first[r] = 1 when no earlier slice equals slice r
// (one invocation per slice), 0 otherwise; their sum (kernels/nonzero.wgsl,
// PHASE 1) is the number of unique slices.
{{ENABLE}}

const WG: u32 = 64u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> first: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

fn same(r: u32, s: u32) -> bool {
  for (var o = 0u; o < params.outer; o++) {
    for (var q = 0u; q < params.inner; q++) {
      let base = o * params.rows * params.inner + q;
      if (x[base + r * params.inner] != x[base + s * params.inner]) {
        return false;
      }
    }
  }
  return true;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  if (r >= params.rows) {
    return;
  }
  var is_first = 1u;
  for (var s = 0u; s < r; s++) {
    if (same(r, s)) {
      is_first = 0u;
      break;
    }
  }
  first[r] = is_first;
}

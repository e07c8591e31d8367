// wgnn.unique (ops/dynamic.cpp): ONNX Unique's four results from the
// first[] flags of kernels/unique_first.wgsl, one invocation per slice r of
// x [outer, rows, inner]. The slice's representative is the first slice
// equal to it; its rank among the unique slices is the number of unique
// slices before it: in order of first occurrence, or when `sorted` in
// ascending lexicographic order (over the slice's elements, outer-major).
// inverse[r] = that rank; for a representative: y[:, rank, :] = the slice,
// indices[rank] = r, counts[rank] = the slices equal to it. `found` unique
// slices in all (the value read back); int64 results as int32.
{{ENABLE}}

const WG: u32 = 64u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> indices: array<i32>;
@group(0) @binding(2) var<storage, read_write> inverse: array<i32>;
@group(0) @binding(3) var<storage, read_write> counts: array<i32>;
@group(0) @binding(4) var<uniform> params: Params;
@group(0) @binding(5) var<storage, read> x: array<{{T}}>;
@group(0) @binding(6) var<storage, read> first: array<u32>;

fn at(o: u32, r: u32, q: u32) -> {{T}} {
  return x[(o * params.rows + r) * params.inner + q];
}

// -1, 0 or 1 as slice r is below, equal to or above slice s.
fn compare(r: u32, s: u32) -> i32 {
  for (var o = 0u; o < params.outer; o++) {
    for (var q = 0u; q < params.inner; q++) {
      let a = at(o, r, q);
      let b = at(o, s, q);
      if (a < b) {
        return -1;
      }
      if (a > b) {
        return 1;
      }
    }
  }
  return 0;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  if (r >= params.rows) {
    return;
  }
  var rep = r;
  for (var s = 0u; s < r; s++) {
    if (first[s] != 0u && compare(r, s) == 0) {
      rep = s;
      break;
    }
  }
  var rank = 0u;
  for (var s = 0u; s < params.rows; s++) {
    if (first[s] == 0u || s == rep) {
      continue;
    }
    if (params.sorted != 0u) {
      if (compare(s, rep) < 0) {
        rank += 1u;
      }
    } else if (s < rep) {
      rank += 1u;
    }
  }
  if (rank >= params.found) {
    return;
  }
  inverse[r] = i32(rank);
  if (rep != r) {
    return;
  }
  var n = 0;
  for (var s = r; s < params.rows; s++) {
    if (compare(s, r) == 0) {
      n += 1;
    }
  }
  indices[rank] = i32(r);
  counts[rank] = n;
  for (var o = 0u; o < params.outer; o++) {
    for (var q = 0u; q < params.inner; q++) {
      y[(o * params.found + rank) * params.inner + q] = at(o, r, q);
    }
  }
}

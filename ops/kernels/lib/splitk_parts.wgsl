// Included by the split-K sum passes (matmul_splitk.wgsl, conv_splitk.wgsl),
// which bind `part: array<f32>`: init plus the `splits` parts of one output,
// `stride` apart from `at`, added in order. Four parts are loaded before
// they are added, so that a thread has its loads in flight together, not
// one per add (64 parts were otherwise 64 memory latencies).
fn sum_parts(init: f32, at: u32, stride: u32, splits: u32) -> f32 {
  var acc = init;
  var i = at;
  var s = 0u;
  for (; s + 4u <= splits; s += 4u) {
    let p0 = part[i];
    let p1 = part[i + stride];
    let p2 = part[i + 2u * stride];
    let p3 = part[i + 3u * stride];
    acc += p0;
    acc += p1;
    acc += p2;
    acc += p3;
    i += 4u * stride;
  }
  for (; s < splits; s++) {
    acc += part[i];
    i += stride;
  }
  return acc;
}

// Included by the split-K sum passes (matmul_splitk.wgsl, conv_splitk.wgsl),
// which bind `part: array<f32>`: init plus the `splits` parts of one output,
// `stride` apart from `at`, added in order. Sixteen parts are loaded before
// they are added, so that a thread has its loads in flight together, not
// one per add: ResNet-50's 36 parts were nine memory latencies when loaded
// four at a time, three now. A part past `splits` is not loaded and adds
// 0.0, which leaves the sum as it is (the order and the bits are the
// one-by-one sum's, but for a sum of -0.0, which ends as +0.0).
fn part_or_zero(i: u32, load: bool) -> f32 {
  if (load) {
    return part[i];
  }
  return 0.0;
}

fn sum_parts(init: f32, at: u32, stride: u32, splits: u32) -> f32 {
  var acc = init;
  var i = at;
  for (var s = 0u; s < splits; s += 16u) {
    let p0 = part_or_zero(i, true);
    let p1 = part_or_zero(i + stride, s + 1u < splits);
    let p2 = part_or_zero(i + 2u * stride, s + 2u < splits);
    let p3 = part_or_zero(i + 3u * stride, s + 3u < splits);
    let p4 = part_or_zero(i + 4u * stride, s + 4u < splits);
    let p5 = part_or_zero(i + 5u * stride, s + 5u < splits);
    let p6 = part_or_zero(i + 6u * stride, s + 6u < splits);
    let p7 = part_or_zero(i + 7u * stride, s + 7u < splits);
    let p8 = part_or_zero(i + 8u * stride, s + 8u < splits);
    let p9 = part_or_zero(i + 9u * stride, s + 9u < splits);
    let p10 = part_or_zero(i + 10u * stride, s + 10u < splits);
    let p11 = part_or_zero(i + 11u * stride, s + 11u < splits);
    let p12 = part_or_zero(i + 12u * stride, s + 12u < splits);
    let p13 = part_or_zero(i + 13u * stride, s + 13u < splits);
    let p14 = part_or_zero(i + 14u * stride, s + 14u < splits);
    let p15 = part_or_zero(i + 15u * stride, s + 15u < splits);
    acc += p0;
    acc += p1;
    acc += p2;
    acc += p3;
    acc += p4;
    acc += p5;
    acc += p6;
    acc += p7;
    acc += p8;
    acc += p9;
    acc += p10;
    acc += p11;
    acc += p12;
    acc += p13;
    acc += p14;
    acc += p15;
    i += 16u * stride;
  }
  return acc;
}

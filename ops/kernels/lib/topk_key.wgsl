// TopK's order key of element i of a row (kernels/topk_select.wgsl and
// topk_sort.wgsl): a u32 whose unsigned order is the values' order, largest
// first when params.largest is set. Needs `x`, `params.inner`,
// `params.largest` and the INTS override of the including kernel.
fn key_of(i: u32, base: u32) -> u32 {
  let v = x[base + i * params.inner];
  var b: u32;
  if (INTS) {
    b = bitcast<u32>(i32(v)) ^ 0x80000000u;
  } else {
    // -0 and +0 are equal (ties); NaN keys above +inf.
    let f = select(f32(v), 0.0, f32(v) == 0.0);
    let u = bitcast<u32>(f);
    b = select(u | 0x80000000u, ~u, (u & 0x80000000u) != 0u);
  }
  return select(~b, b, params.largest != 0u);
}

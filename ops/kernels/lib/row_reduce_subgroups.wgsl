// Row reductions with subgroup operations (softmax.wgsl), where the
// workgroup is one row (TPR == WG): each subgroup reduces its values, one
// invocation of each puts the result in a slot of workgroup memory taken
// with an atomic counter (WGSL says nothing of which invocations form a
// subgroup, so slots are not derived from the local index), and every
// thread combines the slots after one barrier. Three barriers in all,
// against 2 log2(WG) + 2 for lib/row_reduce.wgsl. The subgroup size is the
// device's (4 to 128); the writer of each subgroup is its first active
// invocation. A NaN among a subgroup's values makes its maximum NaN,
// whatever subgroupMax does with NaNs (max_nan's rule). The including
// kernel declares WG and max_nan, and calls row_reduce_init (which has a
// barrier) before the first reduction.

var<workgroup> red_max: array<f32, WG>;
var<workgroup> red_sum: array<f32, WG>;
var<workgroup> red_count: array<atomic<u32>, 2>;

fn row_reduce_init(lid: u32) {
  if (lid == 0u) {
    atomicStore(&red_count[0], 0u);
    atomicStore(&red_count[1], 0u);
  }
  workgroupBarrier();
}

fn is_nan_bits(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }

fn row_max(v: f32, lid: u32, t: u32, head: u32) -> f32 {
  // The largest NaN bit pattern among the lanes (0: none), a NaN at run time
  // (a NaN constant is not valid WGSL).
  let nan_bits = subgroupMax(select(0u, bitcast<u32>(v) & 0x7fffffffu, is_nan_bits(v)));
  let m = select(subgroupMax(v), bitcast<f32>(nan_bits), nan_bits != 0u);
  if (subgroupBroadcastFirst(lid) == lid) {
    red_max[atomicAdd(&red_count[0], 1u)] = m;
  }
  workgroupBarrier();
  let n = atomicLoad(&red_count[0]);
  var r = red_max[0];
  for (var k = 1u; k < n; k++) {
    r = max_nan(r, red_max[k]);
  }
  return r;
}

fn row_sum(v: f32, lid: u32, t: u32, head: u32) -> f32 {
  let s = subgroupAdd(v);
  if (subgroupBroadcastFirst(lid) == lid) {
    red_sum[atomicAdd(&red_count[1], 1u)] = s;
  }
  workgroupBarrier();
  let n = atomicLoad(&red_count[1]);
  var r = red_sum[0];
  for (var k = 1u; k < n; k++) {
    r += red_sum[k];
  }
  return r;
}

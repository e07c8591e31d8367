// Row reductions in workgroup memory (softmax.wgsl): TPR threads share a
// row (a power of two), the row's threads at lid - t .. lid - t + TPR - 1
// (`head` the first). Pairwise halving, a barrier per step. Every thread of
// the workgroup calls them; each returns the row's result to all its
// threads. lib/row_reduce_subgroups.wgsl is the same with subgroup
// operations, for TPR == WG. The including kernel declares WG, TPR and
// max_nan, and calls row_reduce_init before the first reduction (nothing
// to do here).

var<workgroup> partial: array<f32, WG>;

fn row_reduce_init(lid: u32) {}

fn row_max(v: f32, lid: u32, t: u32, head: u32) -> f32 {
  partial[lid] = v;
  workgroupBarrier();
  for (var off = TPR / 2u; off > 0u; off = off / 2u) {
    if (t < off) {
      partial[lid] = max_nan(partial[lid], partial[lid + off]);
    }
    workgroupBarrier();
  }
  let r = partial[head];
  workgroupBarrier();
  return r;
}

fn row_sum(v: f32, lid: u32, t: u32, head: u32) -> f32 {
  partial[lid] = v;
  workgroupBarrier();
  for (var off = TPR / 2u; off > 0u; off = off / 2u) {
    if (t < off) {
      partial[lid] = partial[lid] + partial[lid + off];
    }
    workgroupBarrier();
  }
  let r = partial[head];
  workgroupBarrier();
  return r;
}

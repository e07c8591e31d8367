// GroupQueryAttention's present key or value (ops/kv_present.cpp,
// wgnn.kv_present): out [batch, heads, len, row] from past [batch, heads,
// past, row] and fresh [batch, heads, fresh, row], rows as `inner` 32-bit
// words. Row j of batch b is the past's row j below past_len[b], the fresh
// row j - past_len[b] below valid_len[b], else zeros (a row beyond what its
// source holds is zeros too). One word per invocation.
{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> past: array<u32>;
@group(0) @binding(3) var<storage, read> fresh: array<u32>;
@group(0) @binding(4) var<storage, read> past_len: array<i32>;
@group(0) @binding(5) var<storage, read> valid_len: array<i32>;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (t >= p.count) {
    return;
  }
  let i = t % p.inner;
  let j = (t / p.inner) % p.len;
  let bh = t / (p.inner * p.len);
  let b = bh / p.heads;
  let pl = past_len[b];
  let vl = valid_len[b];
  var v = 0u;
  if (i32(j) < pl) {
    if (j < p.past) {
      v = past[(bh * p.past + j) * p.inner + i];
    }
  } else if (i32(j) < vl) {
    let k = u32(i32(j) - pl);
    if (k < p.fresh) {
      v = fresh[(bh * p.fresh + k) * p.inner + i];
    }
  }
  out[t] = v;
}

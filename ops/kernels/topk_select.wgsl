// TopK, first pass (aten.topk, ops/topk.cpp): one workgroup per row of `n`
// values (element i of row r at x[base(r) + i * inner]) chooses the k it
// keeps and writes their positions, in index order, to sel[r * k ..].
//
// Each value has an order key (a u32 that sorts like the value: floats by
// their bits with the sign folded, integers with the sign bit flipped; for
// the smallest, the key's complement). The k-th largest key t is found by
// a radix select, 8 bits a pass from the top: each pass counts the keys
// that share the digits found so far in a 256-bin histogram and takes the
// digit where the count from the top reaches the k still wanted, so the
// row may be of any length (4 passes over it). Kept: every key above t,
// then the keys equal to t in index order until k are kept (ties go to
// the lower index, as ONNX Runtime does). NaN sorts above +inf.
{{ENABLE}}

override INTS: bool = false;  // {{T}} is i32 (int32, int64 stored as int32)
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> sel: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

var<workgroup> red: array<u32, WG>;
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> found: vec2<u32>;  // the digit, the k still wanted after it

{{include lib/topk_key.wgsl}}

// The exclusive prefix sum of v over the invocations before lid.
fn wscan(lid: u32, v: u32) -> u32 {
  red[lid] = v;
  workgroupBarrier();
  for (var off = 1u; off < WG; off = off * 2u) {
    var add = 0u;
    if (lid >= off) {
      add = red[lid - off];
    }
    workgroupBarrier();
    red[lid] = red[lid] + add;
    workgroupBarrier();
  }
  let r = red[lid] - v;
  workgroupBarrier();
  return r;
}

fn wlast() -> u32 {
  return workgroupUniformLoad(&red[WG - 1u]);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  if (row >= params.rows_or_count) {
    return;
  }
  let n = params.n;
  let k = params.k;
  let base = (row / params.inner) * n * params.inner + row % params.inner;
  var t = 0u;
  var mask = 0u;
  var want = k;
  for (var shift = 32u; shift > 0u; shift -= 8u) {
    let sh = shift - 8u;
    atomicStore(&hist[lid], 0u);
    workgroupBarrier();
    for (var i = lid; i < n; i += WG) {
      let kk = key_of(i, base);
      if ((kk & mask) == t) {
        atomicAdd(&hist[(kk >> sh) & 255u], 1u);
      }
    }
    workgroupBarrier();
    if (lid == 0u) {
      // The largest digit d whose count from the top reaches `want`.
      var above = 0u;
      var d = 255u;
      loop {
        let c = atomicLoad(&hist[d]);
        if (above + c >= want || d == 0u) {
          break;
        }
        above += c;
        d--;
      }
      found = vec2<u32>(d, want - above);
    }
    let f = workgroupUniformLoad(&found);
    t = t | (f.x << sh);
    mask = mask | (255u << sh);
    want = f.y;
  }
  let ties = want;
  var taken = 0u;
  var tied = 0u;
  for (var start = 0u; start < n; start += WG) {
    let i = start + lid;
    var kk = 0u;
    if (i < n) {
      kk = key_of(i, base);
    }
    let is_tie = i < n && kk == t;
    let tie_before = wscan(lid, u32(is_tie));
    let tie_total = wlast();
    workgroupBarrier();
    let take = i < n && (kk > t || (is_tie && tied + tie_before < ties));
    let before = wscan(lid, u32(take));
    let total = wlast();
    workgroupBarrier();
    if (take && taken + before < k) {
      sel[row * k + taken + before] = i;
    }
    taken += total;
    tied += tie_total;
  }
}

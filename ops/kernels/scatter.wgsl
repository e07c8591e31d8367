// Scatter (ops/scatter.cpp): one invocation per element u of `updates`
// writes it into dst (a copy of the data made before), at
// - ScatterND (ELEMENTS false): the index tuple m = u / slice (q values of
//   `index`, along dst's first q dims) plus u % slice within the slice;
// - ScatterElements (ELEMENTS true): u's own coordinates in the updates'
//   shape, with the one along `axis` replaced by index[u].
// Negative indices count from the end; one still outside its dim is
// reported (report(), the graph's checked mode) and its update dropped.
// REDUCE: 0 none (a store), 1 add, 2 mul, 3 max, 4 min, each a
// compare-and-swap loop on dst's 32-bit words, so duplicate indices
// combine. KIND: 0 float32, 1 float16 (two per word: the loop swaps the
// whole word), 2 32-bit integers. float16 is handled as bits, so it needs
// no shader-f16; its arithmetic is float32 rounded to float16.
override REDUCE: u32 = 0u;
override ELEMENTS: bool = false;
override KIND: u32 = 0u;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> dst: array<atomic<u32>>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> index: array<i32>;
@group(0) @binding(3) var<storage, read> upd: array<u32>;
{{CHECK_DECL}}

fn merge_f(a: f32, b: f32) -> f32 {
  switch REDUCE {
    case 1u: { return a + b; }
    case 2u: { return a * b; }
    case 3u: { return max(a, b); }
    case 4u: { return min(a, b); }
    default: { return b; }
  }
}

fn merge_i(a: i32, b: i32) -> i32 {
  switch REDUCE {
    case 1u: { return a + b; }
    case 2u: { return a * b; }
    case 3u: { return max(a, b); }
    case 4u: { return min(a, b); }
    default: { return b; }
  }
}

// Element bits `cur` combined with update bits `u`.
fn merge(cur: u32, u: u32) -> u32 {
  if (KIND == 0u) {
    return bitcast<u32>(merge_f(bitcast<f32>(cur), bitcast<f32>(u)));
  }
  if (KIND == 1u) {
    let r = merge_f(unpack2x16float(cur).x, unpack2x16float(u).x);
    return pack2x16float(vec2<f32>(r, 0.0)) & 0xffffu;
  }
  return bitcast<u32>(merge_i(bitcast<i32>(cur), bitcast<i32>(u)));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let u = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (u >= params.count) {
    return;
  }
  var t = 0u;
  var ok = true;
  if (!ELEMENTS) {
    let m = u / params.slice;
    for (var j = 0u; j < params.q; j++) {
      let size = i32(params.dims[j >> 2u][j & 3u]);
      var ix = index[m * params.q + j];
      let given = ix;
      ix = select(ix, ix + size, ix < 0);
      if (ix < 0 || ix >= size) {
        report(params.check_slot, given);
        ok = false;
      }
      t += u32(clamp(ix, 0, size - 1)) * params.strides[j >> 2u][j & 3u];
    }
    t += u % params.slice;
  } else {
    var rem = u;
    for (var r = params.q; r > 0u; r--) {
      let d = r - 1u;
      let n = params.ushape[d >> 2u][d & 3u];
      let c = rem % n;
      rem = rem / n;
      if (d == params.slice) {
        let size = i32(params.dims[d >> 2u][d & 3u]);
        var ix = index[u];
        let given = ix;
        ix = select(ix, ix + size, ix < 0);
        if (ix < 0 || ix >= size) {
          report(params.check_slot, given);
          ok = false;
        }
        t += u32(clamp(ix, 0, size - 1)) * params.strides[d >> 2u][d & 3u];
      } else {
        t += c * params.strides[d >> 2u][d & 3u];
      }
    }
  }
  if (!ok) {
    return;
  }
  if (KIND == 1u) {
    let uh = (upd[u >> 1u] >> ((u & 1u) * 16u)) & 0xffffu;
    let w = t >> 1u;
    let shift = (t & 1u) * 16u;
    loop {
      let old = atomicLoad(&dst[w]);
      let nv = merge((old >> shift) & 0xffffu, uh);
      let new_word = (old & ~(0xffffu << shift)) | (nv << shift);
      if (atomicCompareExchangeWeak(&dst[w], old, new_word).exchanged) {
        break;
      }
    }
    return;
  }
  let uv = upd[u];
  if (REDUCE == 0u) {
    atomicStore(&dst[t], uv);
    return;
  }
  loop {
    let old = atomicLoad(&dst[t]);
    if (atomicCompareExchangeWeak(&dst[t], old, merge(old, uv)).exchanged) {
      break;
    }
  }
}

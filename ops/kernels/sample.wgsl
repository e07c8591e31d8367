// The next token of each sequence (wgnn.sample, ops/sample.cpp): one
// workgroup per row of `vocab` logits (the last position of each of `rows`
// sequences of `seq` positions).
// - greedy: the index of the first largest logit (as argmax);
// - otherwise softmax at `temperature` over the tokens kept by top-k (the
//   k largest logits, ties at the k-th kept too) and top-p (the fewest most
//   likely tokens whose probability reaches top_p), sampled with a uniform
//   number from a counter-based hash of (seed, step, row): the first index,
//   in vocabulary order, whose running sum of weights passes u * total.
// Thresholds are found by bisection over the logits' order keys (a float's
// bits mapped to a u32 that sorts like the float), 32 passes each: exact,
// with no sort. Indices are written as int32 (int64 results).
{{ENABLE}}

const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<i32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
// seed (two words), step, unused.
@group(0) @binding(3) var<storage, read> rng: array<u32>;

var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> found: u32;

fn order_key(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  if ((b & 0x80000000u) != 0u) {
    return ~b;
  }
  return b | 0x80000000u;
}

fn hash(v: u32) -> u32 {
  let s = v * 747796405u + 2891336453u;
  let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
  return (w >> 22u) ^ w;
}

fn sum_u(lid: u32, v: u32) -> u32 {
  red_u[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid < s) {
      red_u[lid] = red_u[lid] + red_u[lid + s];
    }
    workgroupBarrier();
  }
  // Uniform for every invocation (the bisections' loop bounds depend on it).
  let r = workgroupUniformLoad(&red_u[0]);
  workgroupBarrier();
  return r;
}

fn sum_f(lid: u32, v: f32) -> f32 {
  red_f[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid < s) {
      red_f[lid] = red_f[lid] + red_f[lid + s];
    }
    workgroupBarrier();
  }
  let r = workgroupUniformLoad(&red_f[0]);
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  let V = params.vocab;
  let base = (row * params.seq + params.seq - 1u) * V;

  // The largest logit and its first index.
  var best = -3.4028234663852886e38;
  var idx = 0xffffffffu;
  for (var i = lid; i < V; i += WG) {
    let v = f32(x[base + i]);
    if (v > best || idx == 0xffffffffu) {
      best = v;
      idx = i;
    }
  }
  red_f[lid] = best;
  red_u[lid] = idx;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid < s) {
      let ob = red_f[lid + s];
      let oi = red_u[lid + s];
      if (oi != 0xffffffffu && (red_u[lid] == 0xffffffffu || ob > red_f[lid] || (ob == red_f[lid] && oi < red_u[lid]))) {
        red_f[lid] = ob;
        red_u[lid] = oi;
      }
    }
    workgroupBarrier();
  }
  let m = red_f[0];
  let arg = red_u[0];
  workgroupBarrier();
  if (params.greedy != 0u) {
    if (lid == 0u) {
      y[row] = i32(arg);
    }
    return;
  }

  // top-k: the largest key t with at least k keys >= t.
  var lo = 0u;
  if (params.top_k > 0u && params.top_k < V) {
    var hi = 0xffffffffu;
    for (var it = 0u; it < 33u && lo < hi; it++) {
      let mid = lo + (hi - lo) / 2u + (hi - lo) % 2u;
      var c = 0u;
      for (var i = lid; i < V; i += WG) {
        c += select(0u, 1u, order_key(f32(x[base + i])) >= mid);
      }
      if (sum_u(lid, c) >= params.top_k) {
        lo = mid;
      } else {
        hi = mid - 1u;
      }
    }
  }
  let inv_t = 1.0 / params.temperature;
  var z = 0.0;
  for (var i = lid; i < V; i += WG) {
    let v = f32(x[base + i]);
    if (order_key(v) >= lo) {
      z += exp((v - m) * inv_t);
    }
  }
  var total = sum_f(lid, z);
  // top-p: the largest key t >= lo whose kept mass reaches top_p * total.
  if (params.top_p < 1.0) {
    let goal = params.top_p * total;
    var hi = 0xffffffffu;
    for (var it = 0u; it < 33u && lo < hi; it++) {
      let mid = lo + (hi - lo) / 2u + (hi - lo) % 2u;
      var w = 0.0;
      for (var i = lid; i < V; i += WG) {
        let v = f32(x[base + i]);
        if (order_key(v) >= mid) {
          w += exp((v - m) * inv_t);
        }
      }
      if (sum_f(lid, w) >= goal) {
        lo = mid;
      } else {
        hi = mid - 1u;
      }
    }
  }

  // The sample: contiguous chunks per invocation, their sums scanned in order.
  let chunk = (V + WG - 1u) / WG;
  let first = min(lid * chunk, V);
  let last = min(first + chunk, V);
  var own = 0.0;
  for (var i = first; i < last; i++) {
    let v = f32(x[base + i]);
    if (order_key(v) >= lo) {
      own += exp((v - m) * inv_t);
    }
  }
  red_f[lid] = own;
  if (lid == 0u) {
    found = 0xffffffffu;
  }
  workgroupBarrier();
  if (lid == 0u) {
    var acc = 0.0;
    for (var t = 0u; t < WG; t++) {
      let s = red_f[t];
      red_f[t] = acc;
      acc += s;
    }
    total = acc;
    red_u[0] = bitcast<u32>(acc);
  }
  workgroupBarrier();
  total = bitcast<f32>(red_u[0]);
  let r = hash(hash(hash(rng[0] ^ hash(rng[1])) + rng[2]) + row);
  let pick_at = f32(r >> 8u) * (1.0 / 16777216.0) * total;
  var run = red_f[lid];
  if (pick_at >= run && pick_at < run + own) {
    // This chunk holds pick_at (the chunks' ranges are disjoint); its
    // last kept token where the running sum rounds below it to the end.
    var pick = 0xffffffffu;
    for (var i = first; i < last; i++) {
      let v = f32(x[base + i]);
      if (order_key(v) >= lo) {
        run += exp((v - m) * inv_t);
        pick = i;
        if (run > pick_at) {
          break;
        }
      }
    }
    found = pick;
  }
  workgroupBarrier();
  if (lid == 0u) {
    var pick = found;
    if (pick == 0xffffffffu) {
      // Rounding put the pick_at past the last weight: the last kept token.
      for (var i = V; i > 0u; i--) {
        if (order_key(f32(x[base + i - 1u])) >= lo) {
          pick = i - 1u;
          break;
        }
      }
    }
    y[row] = i32(pick);
  }
}

// Row statistics of the normalization kernels (layer_norm.wgsl,
// group_norm.wgsl): the mean and reciprocal standard deviation of rows of
// width_v chunks ({{F32V}}, {{VW}} elements each).
//
// TPR threads share a row (a power of two), so a workgroup of WG threads
// covers WG / TPR rows. Values are shifted by the row's first element, so
// rows with a large mean and a small spread keep their precision; each
// thread computes the mean and M2 of its share, and the TPR partial results
// merge pairwise (Chan et al.) in workgroup memory. Never E[x^2] - E[x]^2.
//
// CACHED (CHUNKS <= MAX_CHUNKS chunks per thread): the thread loads its whole
// share into `cache` at once (many loads in flight, x read from memory once)
// and computes its mean and M2 in two passes over it. Otherwise the share
// streams through a per-chunk Welford/Chan update, and the kernel reads x a
// second time for its output.
//
// The including kernel declares TPR, CHUNKS, CACHED, MAX_CHUNKS and WG, and
// `fn row_chunk(i: u32) -> {{F32V}}`: chunk i of its input, as f32.

var<workgroup> s_n: array<f32, WG>;
var<workgroup> s_mean: array<f32, WG>;
var<workgroup> s_m2: array<f32, WG>;

struct RowStats {
  shift: f32,   // the row's first element
  mean_s: f32,  // the mean of (x - shift)
  rstd: f32,
  n: f32,       // the count and the sum of squared deviations behind them
  m2: f32,
}

fn first_element(v: {{F32V}}) -> f32 {
  return {{FIRST}};
}

// Every thread of the workgroup calls it (it has barriers); `live` says
// whether this thread's row exists. With CACHED, `cache` receives the
// thread's chunks t, t + TPR, ... minus the shift.
fn row_stats(live: bool, base: u32, t: u32, lid: u32, r_local: u32, width_v: u32, width: f32, eps: f32,
             cache: ptr<function, array<{{F32V}}, MAX_CHUNKS>>) -> RowStats {
  let nb = f32({{VW}});
  var shift = 0.0;
  var n = 0.0;
  var mean = 0.0;
  var m2 = 0.0;
  if (live) {
    shift = first_element(row_chunk(base));
    if (CACHED) {
      var sum = 0.0;
      for (var c = 0u; c < CHUNKS; c++) {
        let j = t + c * TPR;
        if (j < width_v) {
          let v = row_chunk(base + j) - shift;
          (*cache)[c] = v;
          sum += {{CSUM}};
          n += nb;
        }
      }
      if (n > 0.0) {
        mean = sum / n;
        for (var c = 0u; c < CHUNKS; c++) {
          if (t + c * TPR < width_v) {
            let d = (*cache)[c] - mean;
            m2 += {{CSQ}};
          }
        }
      }
    } else {
      for (var j = t; j < width_v; j += TPR) {
        let v = row_chunk(base + j) - shift;
        let cm = {{CSUM}} / nb;
        let d = v - cm;
        let cm2 = {{CSQ}};
        let nn = n + nb;
        let delta = cm - mean;
        mean += delta * (nb / nn);
        m2 += cm2 + delta * delta * (n * nb / nn);
        n = nn;
      }
    }
  }
  s_n[lid] = n;
  s_mean[lid] = mean;
  s_m2[lid] = m2;
  workgroupBarrier();
  for (var off = TPR / 2u; off > 0u; off = off / 2u) {
    if (t < off) {
      let na = s_n[lid];
      let nc = s_n[lid + off];
      let nn = na + nc;
      if (nc > 0.0) {
        let delta = s_mean[lid + off] - s_mean[lid];
        s_mean[lid] = s_mean[lid] + delta * (nc / nn);
        s_m2[lid] = s_m2[lid] + s_m2[lid + off] + delta * delta * (na * nc / nn);
        s_n[lid] = nn;
      }
    }
    workgroupBarrier();
  }
  let head = r_local * TPR;
  var s: RowStats;
  s.shift = shift;
  s.mean_s = s_mean[head];
  s.rstd = inverseSqrt(max(s_m2[head] / width, 0.0) + eps);
  s.n = s_n[head];
  s.m2 = s_m2[head];
  return s;
}

// softmax / log_softmax over rows of `width` contiguous elements (the last
// axis), numerically stable: m = max(x), s = sum(exp(x - m)), then
// exp(x - m) / s, or (x - m) - log(s) when LOG. Math in f32; {{T}} is the
// input's storage type, {{O}} the output's (f32 for half_to_float).
// Rows whose width is a multiple of 4 are read and written as vec4 ({{V}},
// {{OV}}; `width` then counts vectors), a quarter of the loads.
//
// As in layer_norm.wgsl, TPR threads share a row (a power of two, 1..256):
// short rows pack 256 / TPR to a workgroup, long rows get 256 threads. When
// a thread's share is at most MAX_CHUNKS elements (CACHED) it stays in
// registers and x is read once; otherwise x is read three times. The row
// max and sum combine pairwise in workgroup memory. A row of -inf gives NaN
// and a NaN anywhere in a row makes the row NaN, as in PyTorch.
{{ENABLE}}

override TPR: u32 = 64u;
override CHUNKS: u32 = 4u;
override CACHED: bool = true;
override LOG: bool = false;
const MAX_CHUNKS: u32 = 16u;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{OV}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{V}}>;

var<workgroup> partial: array<f32, WG>;

// max that propagates NaN, testing NaN by its bits (WGSL lets compilers
// assume no NaNs, so `v != v` may fold to false).
fn max_nan(a: f32, v: f32) -> f32 {
  let a_nan = (bitcast<u32>(a) & 0x7fffffffu) > 0x7f800000u;
  let v_nan = (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
  return select(select(a, v, v > a), select(a, v, v_nan), a_nan || v_nan);
}

// A chunk's first element, largest element (NaN if any) and sum.
fn first(v: {{F32V}}) -> f32 { return {{FIRST}}; }
fn chunk_max(v: {{F32V}}) -> f32 { return {{HMAX}}; }
fn chunk_sum(v: {{F32V}}) -> f32 { return {{CSUM}}; }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let group = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  let r_local = lid / TPR;
  let t = lid % TPR;
  let row = group * (WG / TPR) + r_local;
  let live = row < params.rows;
  let base = row * params.width;
  let head = r_local * TPR;

  var cache: array<{{F32V}}, MAX_CHUNKS>;
  // The running max starts at the row's first element (max is idempotent),
  // so lanes without elements need no -inf (WGSL has no infinity literal).
  var m = 0.0;
  if (live) {
    m = first({{F32V}}(x[base]));
    if (CACHED) {
      for (var c = 0u; c < CHUNKS; c++) {
        let j = t + c * TPR;
        if (j < params.width) {
          cache[c] = {{F32V}}(x[base + j]);
          m = max_nan(m, chunk_max(cache[c]));
        }
      }
    } else {
      for (var j = t; j < params.width; j += TPR) {
        m = max_nan(m, chunk_max({{F32V}}(x[base + j])));
      }
    }
  }
  partial[lid] = m;
  workgroupBarrier();
  for (var off = TPR / 2u; off > 0u; off = off / 2u) {
    if (t < off) {
      partial[lid] = max_nan(partial[lid], partial[lid + off]);
    }
    workgroupBarrier();
  }
  m = partial[head];
  workgroupBarrier();

  var s = 0.0;
  if (live) {
    if (CACHED) {
      for (var c = 0u; c < CHUNKS; c++) {
        if (t + c * TPR < params.width) {
          cache[c] = cache[c] - m;
          s += chunk_sum(exp(cache[c]));
        }
      }
    } else {
      for (var j = t; j < params.width; j += TPR) {
        s += chunk_sum(exp({{F32V}}(x[base + j]) - m));
      }
    }
  }
  partial[lid] = s;
  workgroupBarrier();
  for (var off = TPR / 2u; off > 0u; off = off / 2u) {
    if (t < off) {
      partial[lid] = partial[lid] + partial[lid + off];
    }
    workgroupBarrier();
  }
  s = partial[head];
  if (!live) {
    return;
  }
  let inv = 1.0 / s;
  let log_s = log(s);
  if (CACHED) {
    for (var c = 0u; c < CHUNKS; c++) {
      let j = t + c * TPR;
      if (j < params.width) {
        let d = cache[c];
        y[base + j] = {{OV}}(select(exp(d) * inv, d - log_s, LOG));
      }
    }
  } else {
    for (var j = t; j < params.width; j += TPR) {
      let d = {{F32V}}(x[base + j]) - m;
      y[base + j] = {{OV}}(select(exp(d) * inv, d - log_s, LOG));
    }
  }
}

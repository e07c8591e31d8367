// Reductions (sum, prod, max, min; mean = sum * scale) of `count` elements
// for each of `rows` outputs, or of `seg_len`-element segments of them (the
// first pass of a split reduction: `segs` partial results per output). {{T}} is the input's storage type, {{A}} the
// accumulator (f32 for float32 / float16, i32 for int32 / int64 / bool) and
// {{O}} the output's storage type.
//
// LANES threads (a power of two) share an output; a workgroup of 256 covers
// 256 / LANES outputs. Each thread folds a strided share of the reduced
// elements, then the LANES partial results combine pairwise in workgroup
// memory.
//   INNER (the reduced dims are the innermost, contiguous): output o reads
//     x[o * count + r]; a row's lanes are adjacent threads (coalesced in r).
//   otherwise (reduced dims anywhere): output o reads x at kept_offset(o) +
//     red_offset(r), both decoded from shapes and strides (rank <= 8), no
//     permute; adjacent threads take adjacent outputs (coalesced when the
//     innermost dim is kept), and a workgroup's lanes stride by its output
//     count.
// max and min start from the output's first element (idempotent, so idle
// lanes are harmless) and propagate NaN as PyTorch does.
{{ENABLE}}

override OP: u32 = 0u;     // 0 sum, 1 prod, 2 max, 3 min
override MEAN: bool = false;
override INNER: bool = true;
override LANES: u32 = 1u;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{O}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

var<workgroup> partial: array<{{A}}, WG>;

// NaN by its bits: WGSL lets compilers assume no NaNs, so `v != v` may fold
// to false. Integer accumulators convert to a finite f32 (never NaN).
fn is_nan(v: f32) -> bool {
  return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

fn combine(a: {{A}}, v: {{A}}) -> {{A}} {
  switch OP {
    case 0u: {
      return a + v;
    }
    case 1u: {
      return a * v;
    }
    default: {
      if (is_nan(f32(a))) {
        return a;
      }
      if (is_nan(f32(v))) {
        return v;
      }
      if (OP == 2u) {
        return select(a, v, v > a);
      }
      return select(a, v, v < a);
    }
  }
}

fn kept_offset(o: u32) -> u32 {
  var rem = o;
  var off = 0u;
  for (var k = params.kept_rank; k > 0u; k--) {
    let d = k - 1u;
    let n = params.kept_shape[d >> 2u][d & 3u];
    off += (rem % n) * params.kept_stride[d >> 2u][d & 3u];
    rem = rem / n;
  }
  return off;
}

fn red_offset(r: u32) -> u32 {
  var rem = r;
  var off = 0u;
  for (var k = params.red_rank; k > 0u; k--) {
    let d = k - 1u;
    let n = params.red_shape[d >> 2u][d & 3u];
    off += (rem % n) * params.red_stride[d >> 2u][d & 3u];
    rem = rem / n;
  }
  return off;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let group = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  let outs = WG / LANES;  // outputs per workgroup
  var o: u32;
  var t: u32;             // this thread's lane within its output
  var lane_stride: u32;   // distance between an output's lanes in `partial`
  if (INNER) {
    o = group * outs + lid / LANES;
    t = lid % LANES;
    lane_stride = 1u;
  } else {
    o = group * outs + lid % outs;
    t = lid / outs;
    lane_stride = outs;
  }
  let live = o < params.rows * params.segs;
  // Output o is segment `seg` of row `row`: [rows, segs] for INNER, else
  // [segs, rows] (adjacent threads on adjacent rows).
  var row: u32;
  var seg: u32;
  if (INNER) {
    row = o / params.segs;
    seg = o % params.segs;
  } else {
    row = o % params.rows;
    seg = o / params.rows;
  }
  let r0 = seg * params.seg_len;
  let r1 = min(params.count, r0 + params.seg_len);
  var acc = {{A}}(select(0, 1, OP == 1u));
  if (live) {
    var base: u32;
    if (INNER) {
      base = row * params.count;
    } else {
      base = kept_offset(row);
    }
    if (OP >= 2u && r0 < r1) {
      if (INNER) {
        acc = {{A}}(x[base + r0]);
      } else {
        acc = {{A}}(x[base + red_offset(r0)]);
      }
    }
    for (var r = r0 + t; r < r1; r += LANES) {
      var off: u32;
      if (INNER) {
        off = r;
      } else {
        off = red_offset(r);
      }
      acc = combine(acc, {{A}}(x[base + off]));
    }
  }
  partial[lid] = acc;
  workgroupBarrier();
  for (var k = LANES / 2u; k > 0u; k = k / 2u) {
    if (t < k) {
      partial[lid] = combine(partial[lid], partial[lid + k * lane_stride]);
    }
    workgroupBarrier();
  }
  if (live && t == 0u) {
    var result = partial[lid];
    if (MEAN) {
      result = {{A}}(f32(result) * params.scale);
    }
    y[o] = {{O}}(result);
  }
}

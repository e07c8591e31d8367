// aten.grid_sampler_2d (ops/grid_sample.cpp; ONNX GridSample): one
// invocation per output element (n, c, oh, ow) reads grid[n, oh, ow] =
// (x, y) in [-1, 1] and samples input[n, c] there.
//   coordinates: align_corners: (g + 1) / 2 * (size - 1), else
//     ((g + 1) * size - 1) / 2; nearest rounds them half to even;
//   a coordinate outside [lo, hi] ([0, size - 1] with align_corners, else
//     [-0.5, size - 0.5]) is clamped to [0, size - 1] (border) or reflected
//     off the bounds (reflection);
//   MODE 0 bilinear (2x2 taps), 1 nearest, 2 bicubic (4x4 taps, Keys'
//     cubic with a = -0.75); a tap outside the image reads 0 (zeros), the
//     clamped pixel (border) or the reflected one (reflection).
// Arithmetic in float32.
{{ENABLE}}

override MODE: u32 = 0u;
override PAD: u32 = 0u;  // 0 zeros, 1 border, 2 reflection
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
@group(0) @binding(3) var<storage, read> grid: array<{{T}}>;

fn reflect(v: f32, lo: f32, hi: f32) -> f32 {
  let span = hi - lo;
  if (span <= 0.0) {
    return lo;
  }
  if (v < lo) {
    let d = lo - v;
    let n = floor(d / span);
    let r = d - n * span;
    return select(hi - r, lo + r, (u32(n) & 1u) == 0u);
  }
  if (v > hi) {
    let d = v - hi;
    let n = floor(d / span);
    let r = d - n * span;
    return select(lo + r, hi - r, (u32(n) & 1u) == 0u);
  }
  return v;
}

fn bounds(size: u32) -> vec2<f32> {
  if (params.align != 0u) {
    return vec2<f32>(0.0, f32(size) - 1.0);
  }
  return vec2<f32>(-0.5, f32(size) - 0.5);
}

// The source coordinate of a grid value along a dim of `size`.
fn coord(g: f32, size: u32) -> f32 {
  var v = select(((g + 1.0) * f32(size) - 1.0) * 0.5, (g + 1.0) * 0.5 * (f32(size) - 1.0), params.align != 0u);
  if (MODE == 1u) {
    v = round(v);
  }
  let b = bounds(size);
  if (v < b.x || v > b.y) {
    if (PAD == 1u) {
      v = clamp(v, 0.0, f32(size) - 1.0);
    } else if (PAD == 2u) {
      v = reflect(v, b.x, b.y);
    }
  }
  return v;
}

// A tap's index along a dim of `size` after padding; -1 reads zero.
fn tap(i: i32, size: u32) -> i32 {
  let n = i32(size);
  if (PAD == 0u) {
    return select(-1, i, i >= 0 && i < n);
  }
  if (PAD == 1u) {
    return clamp(i, 0, n - 1);
  }
  let b = bounds(size);
  return clamp(i32(reflect(f32(i), b.x, b.y)), 0, n - 1);
}

fn pixel(plane: u32, r: i32, c: i32) -> f32 {
  let rr = tap(r, params.H);
  let cc = tap(c, params.W);
  if (rr < 0 || cc < 0) {
    return 0.0;
  }
  return f32(x[plane + u32(rr) * params.W + u32(cc)]);
}

fn cubic(t: f32) -> vec4<f32> {
  let a = -0.75;
  let x0 = t + 1.0;
  let x1 = t;
  let x2 = 1.0 - t;
  let x3 = 2.0 - t;
  return vec4<f32>(((a * x0 - 5.0 * a) * x0 + 8.0 * a) * x0 - 4.0 * a,
                   ((a + 2.0) * x1 - (a + 3.0)) * x1 * x1 + 1.0,
                   ((a + 2.0) * x2 - (a + 3.0)) * x2 * x2 + 1.0,
                   ((a * x3 - 5.0 * a) * x3 + 8.0 * a) * x3 - 4.0 * a);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let o = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (o >= params.count) {
    return;
  }
  let ow = o % params.OW;
  let oh = (o / params.OW) % params.OH;
  let nc = o / (params.OW * params.OH);
  let n = nc / params.C;
  let plane = nc * params.H * params.W;
  let gi = ((n * params.OH + oh) * params.OW + ow) * 2u;
  let cx = coord(f32(grid[gi]), params.W);
  let cy = coord(f32(grid[gi + 1u]), params.H);
  var v = 0.0;
  if (MODE == 1u) {
    v = pixel(plane, i32(cy), i32(cx));
  } else if (MODE == 0u) {
    let fx = floor(cx);
    let fy = floor(cy);
    let tx = cx - fx;
    let ty = cy - fy;
    let c0 = i32(fx);
    let r0 = i32(fy);
    v = (1.0 - ty) * ((1.0 - tx) * pixel(plane, r0, c0) + tx * pixel(plane, r0, c0 + 1)) +
        ty * ((1.0 - tx) * pixel(plane, r0 + 1, c0) + tx * pixel(plane, r0 + 1, c0 + 1));
  } else {
    let fx = floor(cx);
    let fy = floor(cy);
    let wx = cubic(cx - fx);
    let wy = cubic(cy - fy);
    let c0 = i32(fx) - 1;
    let r0 = i32(fy) - 1;
    for (var i = 0; i < 4; i++) {
      var row = 0.0;
      for (var j = 0; j < 4; j++) {
        row += wx[j] * pixel(plane, r0 + i, c0 + j);
      }
      v += wy[i] * row;
    }
  }
  y[o] = {{T}}(v);
}

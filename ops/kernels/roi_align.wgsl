// wgnn.roi_align (ops/grid_sample.cpp; ONNX RoiAlign): one invocation per
// output element (r, c, ph, pw). Region r (x1, y1, x2, y2 in rois, times
// `scale`, less 0.5 with HALF_PIXEL) of image batch_indices[r] is split into
// OH x OW bins; each bin samples a grid of gh x gw points (`sampling`, or
// ceil(bin size) of the region when 0) bilinearly, as the ONNX reference
// does: a point more than one pixel outside the image counts as 0, others
// are clamped into it. AVG: the mean of the points; MAX: the largest of
// the points' four weighted taps (w * x, ONNX Runtime's definition).
// A batch index outside [0, N) is reported (checked mode) and gives 0.
// Arithmetic in float32.
{{ENABLE}}

override MAX_MODE: bool = false;
override HALF_PIXEL: bool = true;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
@group(0) @binding(3) var<storage, read> rois: array<{{T}}>;
@group(0) @binding(4) var<storage, read> batch: array<i32>;
{{CHECK_DECL}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let pw = i % params.OW;
  let ph = (i / params.OW) % params.OH;
  let c = (i / (params.OW * params.OH)) % params.C;
  let r = i / (params.OW * params.OH * params.C);
  let b = batch[r];
  if (b < 0 || b >= i32(params.N)) {
    report(params.check_slot, b);
    y[i] = {{T}}(0.0);
    return;
  }
  let off = select(0.0, 0.5, HALF_PIXEL);
  let x0 = f32(rois[r * 4u]) * params.scale - off;
  let y0 = f32(rois[r * 4u + 1u]) * params.scale - off;
  var rw = f32(rois[r * 4u + 2u]) * params.scale - off - x0;
  var rh = f32(rois[r * 4u + 3u]) * params.scale - off - y0;
  if (!HALF_PIXEL) {
    rw = max(rw, 1.0);
    rh = max(rh, 1.0);
  }
  let bh = rh / f32(params.OH);
  let bw = rw / f32(params.OW);
  var gh = i32(params.sampling);
  var gw = i32(params.sampling);
  if (params.sampling == 0u) {
    gh = i32(ceil(rh / f32(params.OH)));
    gw = i32(ceil(rw / f32(params.OW)));
  }
  let count = max(gh * gw, 1);
  let H = i32(params.H);
  let W = i32(params.W);
  let base = (u32(b) * params.C + c) * params.H * params.W;
  var acc = 0.0;
  var first = true;
  for (var iy = 0; iy < gh; iy++) {
    let yy = y0 + f32(ph) * bh + (f32(iy) + 0.5) * bh / f32(gh);
    for (var ix = 0; ix < gw; ix++) {
      let xx = x0 + f32(pw) * bw + (f32(ix) + 0.5) * bw / f32(gw);
      var v = 0.0;
      if (!(yy < -1.0 || yy > f32(H) || xx < -1.0 || xx > f32(W))) {
        var sy = max(yy, 0.0);
        var sx = max(xx, 0.0);
        var y_lo = i32(sy);
        var x_lo = i32(sx);
        var y_hi = y_lo + 1;
        var x_hi = x_lo + 1;
        if (y_lo >= H - 1) {
          y_lo = H - 1;
          y_hi = H - 1;
          sy = f32(y_lo);
        }
        if (x_lo >= W - 1) {
          x_lo = W - 1;
          x_hi = W - 1;
          sx = f32(x_lo);
        }
        let ly = sy - f32(y_lo);
        let lx = sx - f32(x_lo);
        let hy = 1.0 - ly;
        let hx = 1.0 - lx;
        let a = hy * hx * f32(x[base + u32(y_lo * W + x_lo)]);
        let bb = hy * lx * f32(x[base + u32(y_lo * W + x_hi)]);
        let cc = ly * hx * f32(x[base + u32(y_hi * W + x_lo)]);
        let d = ly * lx * f32(x[base + u32(y_hi * W + x_hi)]);
        v = select(a + bb + cc + d, max(max(a, bb), max(cc, d)), MAX_MODE);
      }
      if (MAX_MODE) {
        acc = select(max(acc, v), v, first);
        first = false;
      } else {
        acc += v;
      }
    }
  }
  if (!MAX_MODE) {
    acc /= f32(count);
  }
  y[i] = {{T}}(acc);
}

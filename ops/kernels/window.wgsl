// Window partition and its reverse (ops/window.cpp: the windows of Swin's
// and DaViT's window attention), {{T}} elements in fours (C % 4 == 0),
// one vector a thread; c4 = C / 4.
// REVERSE false: y [B, NH, NW, WH, WW, C] from x [B, H, W, C], positions
//   past H or W (the padding to whole windows) zero.
// REVERSE true: y [B, H, W, C] from x [B, NH, NW, WH, WW, C] (H <= NH * WH,
//   W <= NW * WW: the windows cropped), plus res [B, H, W, C] where
//   has_res (added in f32, then rounded to {{T}}: the separate add's value).
{{ENABLE}}

override REVERSE: bool = false;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<vec4<{{T}}>>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read> res: array<vec4<{{T}}>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * 256u + lid;
  if (i >= params.count) {
    return;
  }
  let c = i % params.c4;
  var pos = i / params.c4;
  if (REVERSE) {
    let xx = pos % params.w;
    pos /= params.w;
    let yy = pos % params.h;
    let b = pos / params.h;
    let iy = yy / params.wh;
    let ix = xx / params.ww;
    let ky = yy - iy * params.wh;
    let kx = xx - ix * params.ww;
    var v = x[((((b * params.nh + iy) * params.nw + ix) * params.wh + ky) * params.ww + kx) * params.c4 + c];
    if (params.has_res != 0u) {
      v = vec4<{{T}}>(vec4<f32>(v) + vec4<f32>(res[i]));
    }
    y[i] = v;
  } else {
    let kx = pos % params.ww;
    pos /= params.ww;
    let ky = pos % params.wh;
    pos /= params.wh;
    let ix = pos % params.nw;
    pos /= params.nw;
    let iy = pos % params.nh;
    let b = pos / params.nh;
    let yy = iy * params.wh + ky;
    let xx = ix * params.ww + kx;
    var v = vec4<{{T}}>();
    if (yy < params.h && xx < params.w) {
      v = x[((b * params.h + yy) * params.w + xx) * params.c4 + c];
    }
    y[i] = v;
  }
}

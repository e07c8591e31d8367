// Max and average pooling over 1 to 3 spatial dims (seen as D x H x W,
// missing dims of size 1), one thread per output element. x and y are
// {{T}} storage, values are compared and summed as {{C}} (max: f32 for
// float storage, i32 / u32 for integer storage; average: f32).
//
// Window of output o along a dim: start = o * stride - pad_begin, taps
// start + j * dil for j < kernel. Taps outside the input are skipped.
//   MAX: the largest tap; NaN wins (as in ATen). With WRITE_IDX, `idx` gets
//     the argmax: its flat offset in the (n, c) plane, row-major, or
//     column-major over H x W (idx_col_major), plus idx_plane times the
//     plane number (ONNX counts from the start of the tensor). A window
//     without any tap in the input gives EMPTY.
//   AVG: the sum of the taps in the input over the divisor: divisor_override
//     when > 0; else, with count_include_pad, the taps inside the padded
//     input [-pad_begin, in + pad_end) (ATen clips ceil_mode windows there),
//     else the taps inside the input. No tap in the input gives 0.
//   ADAPTIVE (AVG): the window along a dim is [floor(o * in / out),
//     ceil((o + 1) * in / out)), all taps valid.
{{ENABLE}}

override AVG: bool = false;
override ADAPTIVE: bool = false;
override WRITE_IDX: bool = false;
override IS_FLOAT: bool = true;
override EMPTY: f32 = 0.0;
const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> idx: array<i32>;

fn is_nan(v: {{C}}) -> bool {
  return IS_FLOAT && (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let ind = vec3<i32>(params.in_dims.xyz);
  let outd = params.out_dims;
  let pl = i % outd.w;
  let plane = i / outd.w;
  let ohw = outd.y * outd.z;
  let o = vec3<i32>(vec3<u32>(pl / ohw, (pl % ohw) / outd.z, pl % outd.z));
  var start: vec3<i32>;
  var ksize: vec3<i32>;
  var dil = params.dil.xyz;
  if (ADAPTIVE) {
    let od = vec3<i32>(outd.xyz);
    start = (o * ind) / od;
    ksize = ((o + 1) * ind + od - 1) / od - start;
    dil = vec3<i32>(1);
  } else {
    start = o * params.stride.xyz - params.pad_begin.xyz;
    ksize = params.kernel.xyz;
  }
  let xbase = plane * params.in_dims.w;

  var m = {{C}}(EMPTY);
  var found = false;
  var arg = 0u;
  var sum = 0.0;
  var valid = 0i;
  var padded = 0i;
  let padded_end = ind + params.pad_end.xyz;
  for (var kd = 0i; kd < ksize.x; kd++) {
    let id = start.x + kd * dil.x;
    let din = id >= 0 && id < ind.x;
    let dpad = id < padded_end.x;
    for (var kh = 0i; kh < ksize.y; kh++) {
      let ih = start.y + kh * dil.y;
      let hin = din && ih >= 0 && ih < ind.y;
      let hpad = dpad && ih < padded_end.y;
      for (var kw = 0i; kw < ksize.z; kw++) {
        let iw = start.z + kw * dil.z;
        if (AVG && hpad && iw < padded_end.z) {
          padded++;
        }
        if (!hin || iw < 0 || iw >= ind.z) {
          continue;
        }
        let off = (u32(id) * u32(ind.y) + u32(ih)) * u32(ind.z) + u32(iw);
        if (AVG) {
          sum += f32(x[xbase + off]);
          valid++;
        } else {
          let v = {{C}}(x[xbase + off]);
          if (!found || v > m || is_nan(v)) {
            m = v;
            arg = off;
            found = true;
          }
        }
      }
    }
  }
  if (AVG) {
    var divisor = valid;
    if (ADAPTIVE) {
      divisor = ksize.x * ksize.y * ksize.z;
    } else if (params.divisor_override > 0u) {
      divisor = i32(params.divisor_override);
    } else if (params.count_include_pad != 0u) {
      divisor = padded;
    }
    var r = 0.0;
    if (valid > 0) {
      r = sum / f32(divisor);
    }
    y[i] = {{T}}(r);
  } else {
    y[i] = {{T}}(m);
    if (WRITE_IDX) {
      if (params.idx_col_major != 0u) {
        let ow = arg % u32(ind.z);
        let oh = (arg / u32(ind.z)) % u32(ind.y);
        arg = ow * u32(ind.y) + oh;
      }
      idx[i] = i32(plane * params.idx_plane + arg);
    }
  }
}

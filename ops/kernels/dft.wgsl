// wgnn.dft (ops/spectral.cpp): a direct discrete Fourier transform, one
// invocation per output bin. The input is [outer, len, inner, comps] (comps
// 1: real, 2: complex as (re, im)); the result is [outer, frames, bins,
// inner, out_comps]. Bin k of frame f sums n terms: sample j of the frame
// is input position f * step + j along `len` (zero past its end), weighted
// by window[j] when has_window, times exp(-+2 pi i j k / n) (the sign +
// when inverse, which also scales by 1 / n). Hermitian (an inverse from a
// one-sided spectrum): term j > n / 2 is the conjugate of term n - j, and
// only the real part is written (out_comps 1). The phase index j * k mod n
// is kept as an integer and indexes a table of cos and sin of 2 pi m / n
// computed on the host in double precision (the shader's sin and cos are
// too coarse: an imaginary part that should cancel to 0 would keep ~1e-5).
{{ENABLE}}

const WG: u32 = 256u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
@group(0) @binding(3) var<storage, read> window: array<{{T}}>;
@group(0) @binding(4) var<storage, read> twiddle: array<vec2<f32>>;  // (cos, sin) of 2 pi m / n

fn sample(base: u32, pos: u32, conj: bool) -> vec2<f32> {
  if (pos >= params.len) {
    return vec2<f32>(0.0);
  }
  let at = base + (pos * params.inner) * params.comps;
  var v = vec2<f32>(f32(x[at]), 0.0);
  if (params.comps == 2u) {
    v.y = f32(x[at + 1u]);
  }
  if (conj) {
    v.y = -v.y;
  }
  return v;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  let q = i % params.inner;
  let k = (i / params.inner) % params.bins;
  let f = (i / (params.inner * params.bins)) % params.frames;
  let o = i / (params.inner * params.bins * params.frames);
  let base = ((o * params.len) * params.inner + q) * params.comps;
  let sg = select(-1.0, 1.0, params.inverse != 0u);
  let n = params.n;
  var acc = vec2<f32>(0.0);
  var phase = 0u;  // j * k mod n
  let step_k = k % n;
  for (var j = 0u; j < n; j++) {
    var v: vec2<f32>;
    if (params.hermitian != 0u) {
      if (2u * j <= n) {
        v = sample(base, j, false);
      } else {
        v = sample(base, n - j, true);
      }
    } else {
      v = sample(base, f * params.step + j, false);
    }
    if (params.has_window != 0u) {
      v = v * f32(window[j]);
    }
    let t = twiddle[phase];
    let c = t.x;
    let s = sg * t.y;
    acc += vec2<f32>(v.x * c - v.y * s, v.x * s + v.y * c);
    phase += step_k;
    if (phase >= n) {
      phase -= n;
    }
  }
  if (params.inverse != 0u) {
    acc = acc / f32(n);
  }
  if (params.out_comps == 1u) {
    y[i] = {{T}}(acc.x);
  } else {
    y[2u * i] = {{T}}(acc.x);
    y[2u * i + 1u] = {{T}}(acc.y);
  }
}

// wgnn.recurrent (ONNX RNN, GRU, LSTM): the recurrence, after the input
// projection of every time step (one matrix product, on the host side of
// this kernel). Computes in f32; {{T}} is the storage type.
//
// Entry points:
//   persistent: one workgroup per (direction, batch row) runs every time
//     step, a storage barrier between steps (the recurrence couples the
//     hidden units of one batch row only, so rows need no global sync).
//   step: one invocation per (direction, batch row, hidden unit) and one
//     dispatch per time step (params.s); GRU without linear_before_reset
//     takes two dispatches per step (PHASE 0 writes r * h, PHASE 1 the rest).
//
// Buffers:
//   proj   [T, B, D, G, H]: x_t W^T + Wb for every step, direction, gate
//   r      [D, G, H, H]: recurrence weights
//   aux    Rb [D, G*H], P [D, 3H], h0 [D, B, H], c0 [D, B, H], each where
//          present, at the offsets in params
//   seq    [B] int32 sequence lengths (where has_seq)
//   y      [T, D, B, H]; zero at steps past a row's length
//   state  [2, D, B, H]: the last h (and c for LSTM)
//   work   f32 scratch: h ping-pong [D, B, 2, H], c [D, B, H], r * h [D, B, H]
{{ENABLE}}

override PHASE: u32 = 1u;
const WG: u32 = 64u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> state: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> work: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;
@group(0) @binding(4) var<storage, read> proj: array<{{T}}>;
@group(0) @binding(5) var<storage, read> rw: array<{{T}}>;
@group(0) @binding(6) var<storage, read> aux: array<{{T}}>;
@group(0) @binding(7) var<storage, read> seq: array<i32>;

fn has(bit: u32) -> bool { return (params.flags & bit) != 0u; }

// ONNX's activation list: Relu, Tanh, Sigmoid, Affine, LeakyRelu,
// ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus.
fn act(d: u32, which: u32, x: f32) -> f32 {
  let code = params.acts[d][which];
  let a = params.alpha[d][which];
  let b = params.beta[d][which];
  switch code {
    case 0u: { return max(x, 0.0); }
    case 1u: { return tanh(x); }
    case 2u: { return 1.0 / (1.0 + exp(-x)); }
    case 3u: { return a * x + b; }
    case 4u: { return select(a * x, x, x >= 0.0); }
    case 5u: { return select(0.0, x, x > a); }
    case 6u: { return a * tanh(b * x); }
    case 7u: { return clamp(a * x + b, 0.0, 1.0); }
    case 8u: { return select(a * (exp(x) - 1.0), x, x >= 0.0); }
    case 9u: { return x / (1.0 + abs(x)); }
    default: {
      // Softplus, as log1p(exp(x)) without overflow for large x
      return select(log(1.0 + exp(x)), x, x > 20.0);
    }
  }
}

fn clipped(x: f32) -> f32 {
  if (has(128u)) {
    return clamp(x, -params.clip, params.clip);
  }
  return x;
}

fn row_len(b: u32) -> u32 {
  if (has(1u)) {
    return u32(clamp(seq[b], 0, i32(params.T)));
  }
  return params.T;
}

fn gates() -> u32 {
  return select(select(1u, 3u, params.kind == 1u), 4u, params.kind == 2u);
}

// h at the start of step s (h0 or zero at s = 0).
fn h_prev(d: u32, b: u32, k: u32, s: u32) -> f32 {
  let H = params.H;
  if (s == 0u) {
    if (has(2u)) {
      return f32(aux[params.off_h0 + (d * params.B + b) * H + k]);
    }
    return 0.0;
  }
  return work[((d * params.B + b) * 2u + (s & 1u)) * H + k];
}

fn c_prev(d: u32, b: u32, j: u32, s: u32) -> f32 {
  let H = params.H;
  if (s == 0u) {
    if (has(4u)) {
      return f32(aux[params.off_c0 + (d * params.B + b) * H + j]);
    }
    return 0.0;
  }
  return work[params.D * params.B * 2u * H + (d * params.B + b) * H + j];
}

// sum_k R[d, g, j, k] * h_prev[k] (or (r * h_prev)[k] where rh).
fn rdot(d: u32, b: u32, g: u32, j: u32, s: u32, rh: bool) -> f32 {
  let H = params.H;
  let base = ((d * gates() + g) * H + j) * H;
  let rh_base = params.D * params.B * 3u * H + (d * params.B + b) * H;
  var acc = 0.0;
  for (var k = 0u; k < H; k++) {
    var hk: f32;
    if (rh) {
      hk = work[rh_base + k];
    } else {
      hk = h_prev(d, b, k, s);
    }
    acc += f32(rw[base + k]) * hk;
  }
  return acc;
}

fn rbias(d: u32, g: u32, j: u32) -> f32 {
  if (has(16u)) {
    return f32(aux[params.off_rb + (d * gates() + g) * params.H + j]);
  }
  return 0.0;
}

fn peep(d: u32, which: u32, j: u32) -> f32 {
  if (has(8u)) {
    return f32(aux[params.off_p + d * 3u * params.H + which * params.H + j]);
  }
  return 0.0;
}

// Hidden unit j of row b, direction d, at step s.
fn unit(d: u32, b: u32, j: u32, s: u32, phase: u32) {
  let H = params.H;
  let B = params.B;
  let D = params.D;
  let G = gates();
  let len = row_len(b);
  let rev = ((params.rev >> d) & 1u) != 0u;
  let hw_next = ((d * B + b) * 2u + ((s + 1u) & 1u)) * H + j;
  let c_at = D * B * 2u * H + (d * B + b) * H + j;
  if (s >= len) {
    // Past the row's length: the state holds, y is zero.
    if (phase == 1u) {
      let h = h_prev(d, b, j, s);
      work[hw_next] = h;
      y[((s * D + d) * B + b) * H + j] = {{T}}(0.0);
      state[(d * B + b) * H + j] = {{T}}(h);
      if (params.kind == 2u) {
        let c = c_prev(d, b, j, s);
        work[c_at] = c;
        state[((D + d) * B + b) * H + j] = {{T}}(c);
      }
    }
    return;
  }
  let t = select(s, len - 1u - s, rev);
  let pbase = ((t * B + b) * D + d) * G * H;
  if (phase == 0u) {
    // GRU, linear_before_reset = 0: r * h_prev for the candidate's product.
    let r = act(d, 0u, clipped(f32(proj[pbase + H + j]) + rdot(d, b, 1u, j, s, false) + rbias(d, 1u, j)));
    work[D * B * 3u * H + (d * B + b) * H + j] = r * h_prev(d, b, j, s);
    return;
  }
  var h: f32;
  if (params.kind == 0u) {
    h = act(d, 0u, clipped(f32(proj[pbase + j]) + rdot(d, b, 0u, j, s, false) + rbias(d, 0u, j)));
  } else if (params.kind == 1u) {
    let z = act(d, 0u, clipped(f32(proj[pbase + j]) + rdot(d, b, 0u, j, s, false) + rbias(d, 0u, j)));
    var n: f32;
    if (has(32u)) {
      let r = act(d, 0u, clipped(f32(proj[pbase + H + j]) + rdot(d, b, 1u, j, s, false) + rbias(d, 1u, j)));
      n = act(d, 1u, clipped(f32(proj[pbase + 2u * H + j]) + r * (rdot(d, b, 2u, j, s, false) + rbias(d, 2u, j))));
    } else {
      n = act(d, 1u, clipped(f32(proj[pbase + 2u * H + j]) + rdot(d, b, 2u, j, s, true) + rbias(d, 2u, j)));
    }
    h = (1.0 - z) * n + z * h_prev(d, b, j, s);
  } else {
    // LSTM gates in ONNX order i, o, f, c; peepholes i, o, f.
    let cp = c_prev(d, b, j, s);
    let i = act(d, 0u, clipped(f32(proj[pbase + j]) + rdot(d, b, 0u, j, s, false) + rbias(d, 0u, j) +
                               peep(d, 0u, j) * cp));
    var f: f32;
    if (has(64u)) {
      f = 1.0 - i;
    } else {
      f = act(d, 0u, clipped(f32(proj[pbase + 2u * H + j]) + rdot(d, b, 2u, j, s, false) + rbias(d, 2u, j) +
                             peep(d, 2u, j) * cp));
    }
    let g = act(d, 1u, clipped(f32(proj[pbase + 3u * H + j]) + rdot(d, b, 3u, j, s, false) + rbias(d, 3u, j)));
    let c = f * cp + i * g;
    let o = act(d, 0u, clipped(f32(proj[pbase + H + j]) + rdot(d, b, 1u, j, s, false) + rbias(d, 1u, j) +
                               peep(d, 1u, j) * c));
    h = o * act(d, 2u, c);
    work[c_at] = c;
    state[((D + d) * B + b) * H + j] = {{T}}(c);
  }
  work[hw_next] = h;
  y[((t * D + d) * B + b) * H + j] = {{T}}(h);
  state[(d * B + b) * H + j] = {{T}}(h);
}

@compute @workgroup_size(WG)
fn persistent(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;  // d * B + b
  let d = row / params.B;
  let b = row % params.B;
  let two_phase = params.kind == 1u && !has(32u);
  for (var s = 0u; s < params.T; s++) {
    if (two_phase) {
      for (var j = lid; j < params.H; j += WG) {
        unit(d, b, j, s, 0u);
      }
      storageBarrier();
    }
    for (var j = lid; j < params.H; j += WG) {
      unit(d, b, j, s, 1u);
    }
    storageBarrier();
  }
}

@compute @workgroup_size(WG)
fn step(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.D * params.B * params.H) {
    return;
  }
  let j = i % params.H;
  let row = i / params.H;
  unit(row / params.B, row % params.B, j, params.s, PHASE);
}

// Elementwise ops over up to three inputs with numpy broadcasting: the
// binary ops (arithmetic, comparisons, logical), where, casts and
// logical_not (ops/binary.cpp). Each invocation writes four consecutive
// output elements:
//   out[i] = vec4<{{O}}>({{EXPR}})
// where x, y are four elements of inputs `in_a`, `in_b` (storage {{T}})
// converted to vec4<{{C}}> (the compute type: f32 for float16 and float32
// storage, i32 for int32/int64/int8, u32 for bool/uint8, or {{T}} itself),
// and c four elements of the u32 input `in_c` (where's condition).
//
// MODE_A / MODE_B / MODE_C say how each input is read:
//   0: it has the output's element count (and so its layout): in[i];
//   1: one element for all: in[0].x splat;
//   2: through the broadcast strides in the uniform: one gather per element.
// Only mode 2 decodes the flat output index into coordinates (once per
// invocation, then a carry for the next three elements). Unused inputs are
// bound to a dummy buffer in mode 1.
{{ENABLE}}

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> out: array<vec4<{{O}}>>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> in_a: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read> in_b: array<vec4<{{T}}>>;
@group(0) @binding(4) var<storage, read> in_c: array<vec4<u32>>;
{{CHECK_DECL}}

override MODE_A: u32 = 0u;
override MODE_B: u32 = 1u;
override MODE_C: u32 = 1u;

alias C4 = vec4<{{C}}>;

// --- float helpers (vec4<f32>); isnan4, nan4, inf4 test and make NaN and
// inf on the bits (lib/math.wgsl).
{{include lib/math.wgsl}}

fn any_nan(x: vec4<f32>, y: vec4<f32>) -> vec4<bool> { return isnan4(x) | isnan4(y); }

// Nonzero test for logical ops: NaN counts as true (as in C and ATen).
fn nz_f(x: vec4<f32>) -> vec4<bool> { return (x != vec4<f32>(0.0)) | isnan4(x); }

// ATen minimum / maximum propagate NaN.
fn min_f(x: vec4<f32>, y: vec4<f32>) -> vec4<f32> { return select(min(x, y), nan4(), any_nan(x, y)); }
fn max_f(x: vec4<f32>, y: vec4<f32>) -> vec4<f32> { return select(max(x, y), nan4(), any_nan(x, y)); }

// +-0 with the sign of s.
fn zero_signed(s: vec4<f32>) -> vec4<f32> {
  return bitcast<vec4<f32>>(bitcast<vec4<u32>>(s) & vec4<u32>(0x80000000u));
}

// C fmod: x - trunc(x / y) * y with the sign of x. The product-subtract is
// one fma (exact when the quotient is right); a quotient rounded across an
// integer is corrected by one |y| step. IEEE's cases: x infinite, y zero or
// a NaN give NaN; x finite and y infinite give x; a zero keeps x's sign.
fn fmod_f(x: vec4<f32>, y: vec4<f32>) -> vec4<f32> {
  var r = fma(-trunc(x / y), y, x);
  let step = select(abs(y), -abs(y), x < vec4<f32>(0.0));
  r = select(r, r + step, (r != vec4<f32>(0.0)) & ((r < vec4<f32>(0.0)) != (x < vec4<f32>(0.0))));
  r = select(r, r - step, abs(r) >= abs(y));
  r = select(r, zero_signed(x), r == vec4<f32>(0.0));
  r = select(r, x, isinf4(y));
  return select(r, nan4(), any_nan(x, y) | isinf4(x) | (y == vec4<f32>(0.0)));
}

// Python's remainder (numpy's mod, ONNX Mod with fmod 0): the sign of the
// divisor. x finite and y infinite of the other sign give y; a zero takes
// y's sign.
fn rem_f(x: vec4<f32>, y: vec4<f32>) -> vec4<f32> {
  let r = fmod_f(x, y);
  let q = select(r, r + y, (r != vec4<f32>(0.0)) & ((r < vec4<f32>(0.0)) != (y < vec4<f32>(0.0))));
  return select(q, zero_signed(y), q == vec4<f32>(0.0));
}

// pow with C semantics: a negative base takes integral exponents (odd ones
// keep the sign) and gives NaN for others; x^0 = 1 and 1^y = 1 (NaN
// included), (-1)^+-inf = 1; +-0^y is +-0 for odd y > 0, 0 for other y > 0,
// +-inf for odd y < 0 and inf for other y < 0. WGSL's pow alone is only
// defined for x > 0.
fn pow_f(x: vec4<f32>, y: vec4<f32>) -> vec4<f32> {
  let zero = vec4<f32>(0.0);
  let one = vec4<f32>(1.0);
  let integral = (trunc(y) == y) & !isinf4(y);
  let odd = integral & (abs(y - 2.0 * floor(0.5 * y)) == one);
  let neg = x < zero;
  var r = pow(abs(x), y);
  r = select(r, -r, neg & odd);
  r = select(r, nan4(), neg & !integral & !isinf4(y));
  let signed_zero = select(zero, x, odd);  // x is +-0 here
  let signed_inf = select(inf4(), select(inf4(), -inf4(), signbit4(x)), odd);
  r = select(r, select(signed_inf, signed_zero, y > zero), x == zero);
  r = select(r, one, (x == -one) & isinf4(y));
  return select(r, one, (y == zero) | (x == one));
}

// float -> int32 truncating toward zero, saturating at the int32 range,
// NaN -> 0.
fn to_i32(x: vec4<f32>) -> vec4<i32> {
  let t = vec4<i32>(clamp(trunc(x), vec4<f32>(-2147483648.0), vec4<f32>(2147483520.0)));
  return select(select(t, vec4<i32>(2147483647), x >= vec4<f32>(2147483648.0)), vec4<i32>(0), isnan4(x));
}

// Casts to float16: beyond its range is +-inf (as IEEE and ATen), not a
// device-defined value.
fn f16_range(x: vec4<f32>) -> vec4<f32> { return select(x, sign(x) * inf4(), abs(x) >= vec4<f32>(65520.0)); }

// --- integer helpers (vec4<i32>, wrapping arithmetic). WGSL defines
// x / 0 = x and x % 0 = 0; the integer divisions check their divisor first
// (divisor(): a zero among output elements 4i .. 4i+3 is reported with its
// element index, in the graph's checked mode).
fn divisor(i: u32, y: vec4<i32>) -> vec4<i32> {
  for (var lane = 0u; lane < 4u; lane++) {
    if (y[lane] == 0 && i * 4u + lane < params.numel) {
      report(params.check_slot, i32(i * 4u + lane));
    }
  }
  return y;
}
fn div_floor_i(x: vec4<i32>, y: vec4<i32>) -> vec4<i32> {
  let r = x % y;
  let adjust = (r != vec4<i32>(0)) & ((r < vec4<i32>(0)) != (y < vec4<i32>(0)));
  return x / y - select(vec4<i32>(0), vec4<i32>(1), adjust);
}

fn rem_i(x: vec4<i32>, y: vec4<i32>) -> vec4<i32> {
  let r = x % y;
  return select(r, r + y, (r != vec4<i32>(0)) & ((r < vec4<i32>(0)) != (y < vec4<i32>(0))));
}

// Integer power by squaring (wrapping). A negative exponent gives the
// truncated 1 / x^|y|: 1 for x = 1, +-1 for x = -1, else 0.
fn pow_i(x: vec4<i32>, y: vec4<i32>) -> vec4<i32> {
  var r = vec4<i32>(1);
  var base = x;
  var e = vec4<u32>(max(y, vec4<i32>(0)));
  for (var k = 0u; k < 31u; k++) {
    if (all(e == vec4<u32>(0u))) {
      break;
    }
    r = select(r, r * base, (e & vec4<u32>(1u)) != vec4<u32>(0u));
    base = base * base;
    e = e >> vec4<u32>(1u);
  }
  let odd = (y & vec4<i32>(1)) != vec4<i32>(0);
  let inv = select(select(vec4<i32>(0), vec4<i32>(1), x == vec4<i32>(1)),
                   select(vec4<i32>(1), vec4<i32>(-1), odd), x == vec4<i32>(-1));
  return select(r, inv, y < vec4<i32>(0));
}

// Low 8 bits, sign-extended (casts to int8).
fn wrap_i8(x: vec4<i32>) -> vec4<i32> { return (x << vec4<u32>(24u)) >> vec4<u32>(24u); }

// --- indexing
{{include lib/dims.wgsl}}

// Element offsets of in_a, in_b, in_c for output elements 4i .. 4i+3 (one
// per lane; lanes past the end wrap to offset 0 and are never stored).
struct Offsets {
  a: vec4<u32>,
  b: vec4<u32>,
  c: vec4<u32>,
}

fn offsets(i: u32) -> Offsets {
  let shape = params.shape;
  let sa = params.sa;
  let sb = params.sb;
  let sc = params.sc;
  var coord: array<u32, 8>;
  var rem = i * 4u;
  var o = vec3<u32>(0u);
  for (var k = params.rank; k > 0u; k--) {
    let d = k - 1u;
    let n = dim_of(shape, d);
    coord[d] = rem % n;
    rem = rem / n;
    o += coord[d] * vec3<u32>(dim_of(sa, d), dim_of(sb, d), dim_of(sc, d));
  }
  var res: Offsets;
  for (var lane = 0u; lane < 4u; lane++) {
    res.a[lane] = o.x;
    res.b[lane] = o.y;
    res.c[lane] = o.z;
    // Next element: increment the last coordinate, carrying leftwards.
    var k = params.rank;
    loop {
      if (k == 0u) {
        break;
      }
      let d = k - 1u;
      let st = vec3<u32>(dim_of(sa, d), dim_of(sb, d), dim_of(sc, d));
      coord[d] += 1u;
      o += st;
      let n = dim_of(shape, d);
      if (coord[d] < n) {
        break;
      }
      o -= n * st;
      coord[d] = 0u;
      k = d;
    }
  }
  return res;
}

fn load_a(i: u32, o: vec4<u32>) -> C4 {
  if (MODE_A == 0u) {
    return C4(in_a[i]);
  }
  if (MODE_A == 1u) {
    return C4({{C}}(in_a[0].x));
  }
  return C4({{C}}(in_a[o.x / 4u][o.x % 4u]), {{C}}(in_a[o.y / 4u][o.y % 4u]), {{C}}(in_a[o.z / 4u][o.z % 4u]),
            {{C}}(in_a[o.w / 4u][o.w % 4u]));
}

fn load_b(i: u32, o: vec4<u32>) -> C4 {
  if (MODE_B == 0u) {
    return C4(in_b[i]);
  }
  if (MODE_B == 1u) {
    return C4({{C}}(in_b[0].x));
  }
  return C4({{C}}(in_b[o.x / 4u][o.x % 4u]), {{C}}(in_b[o.y / 4u][o.y % 4u]), {{C}}(in_b[o.z / 4u][o.z % 4u]),
            {{C}}(in_b[o.w / 4u][o.w % 4u]));
}

fn load_c(i: u32, o: vec4<u32>) -> vec4<u32> {
  if (MODE_C == 0u) {
    return in_c[i];
  }
  if (MODE_C == 1u) {
    return vec4<u32>(in_c[0].x);
  }
  return vec4<u32>(in_c[o.x / 4u][o.x % 4u], in_c[o.y / 4u][o.y % 4u], in_c[o.z / 4u][o.z % 4u],
                   in_c[o.w / 4u][o.w % 4u]);
}

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
  if (i >= params.count) {
    return;
  }
  var o: Offsets;
  if (MODE_A == 2u || MODE_B == 2u || MODE_C == 2u) {
    o = offsets(i);
  }
  let x = load_a(i, o.a);
  let y = load_b(i, o.b);
  let c = load_c(i, o.c);
  out[i] = vec4<{{O}}>({{EXPR}});
}

// Binary elementwise ops (arithmetic, comparisons, logical), where, prelu and
// casts, with ATen names and numpy broadcasting. Every op is one WGSL
// expression run by one kernel (kernels/binary.wgsl): four output elements
// per invocation, inputs read contiguously, as one splatted element, or
// through broadcast strides (see that file).
//
// Dtypes: both tensor operands must have the same dtype (no type
// promotion). float16 and float32 compute in f32; int32 and int64 in i32 with
// wrapping arithmetic (int64 tensors are stored as int32, see graph/tensor.h);
// bool and uint8 in u32. Arithmetic on uint8 and int8 (add, sub, mul, the
// rounded divisions) computes in i32 and wraps the result to 8 bits, as
// ONNX Runtime does (uint8 200 + 100 = 44, int8 100 + 100 = -56). Comparisons and logical ops return bool; true
// division (aten.div.Tensor) of integers returns float32, as in ATen.
// Integer division by zero follows WGSL: x / 0 = x, x % 0 = 0.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/helpers.h"
#include "ops/layout.h"
#include "ops/uniforms.h"
#include "ops/registry.h"

namespace wgnn::ops {
namespace {

using DTypes = std::vector<DType>;
const DTypes kNumeric = {DType::F32, DType::F16, DType::I32, DType::I64};
const DTypes kFloats = {DType::F32, DType::F16};
const DTypes kAll = {DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool, DType::U8, DType::I8};
// add, sub, mul, the rounded divisions and remainders also take 8-bit integers.
const DTypes kArith = {DType::F32, DType::F16, DType::I32, DType::I64, DType::U8, DType::I8};
// Bit shifts (ONNX BitShift): uint8, and (opset 28) int8 and int32, whose
// right shift is arithmetic. Not int64: held as int32, its shifts would
// lose the high bits.
const DTypes kShifts = {DType::U8, DType::I8, DType::I32};
// Bitwise and / or / xor: the integers wgnn holds. int64 and int8 are held
// as sign-extended int32, on which the three give the sign-extended result.
const DTypes kIntegers = {DType::I32, DType::I64, DType::U8, DType::I8};

bool is_float(DType d) { return d == DType::F32 || d == DType::F16; }
// u32 storage (bool, uint8) vs i32 storage (int32, int64, int8).
bool is_u32(DType d) { return d == DType::Bool || d == DType::U8; }
// The WGSL scalar type an input of dtype `d` is computed in.
const char* compute_type(DType d) { return is_float(d) ? "f32" : is_u32(d) ? "u32" : "i32"; }

std::string dtype_names(const DTypes& ds) {
  std::vector<std::string> n;
  for (DType d : ds) n.emplace_back(dtype_name(d));
  return fmt::format("{}", fmt::join(n, ", "));
}

void require_dtype(const Args& a, TensorRef t, std::string_view name, const DTypes& ok) {
  const DType d = a.g.info(t).dtype;
  if (std::find(ok.begin(), ok.end(), d) == ok.end()) {
    a.fail(fmt::format("argument '{}' has dtype {}; accepted: {}", name, dtype_name(d), dtype_names(ok)));
  }
}

void require_same_dtype(const Args& a, TensorRef x, std::string_view xn, TensorRef y, std::string_view yn) {
  const DType dx = a.g.info(x).dtype, dy = a.g.info(y).dtype;
  if (dx != dy) {
    a.fail(fmt::format("arguments '{}' ({}) and '{}' ({}) must have the same dtype (no type promotion; cast one "
                       "with aten._to_copy.default)",
                       xn, dtype_name(dx), yn, dtype_name(dy)));
  }
}

void require_at_most(const Args& a, size_t n) {
  if (a.args.size() > n) a.fail(fmt::format("takes at most {} arguments, got {}", n, a.args.size()));
}

// One dispatch of kernels/binary.wgsl.
struct Launch {
  DType in = DType::F32;  // storage dtype of in_a and in_b
  std::string compute;    // WGSL scalar type of x and y
  DType out = DType::F32;
  std::string expr;
  float falpha = 1.f;
  int32_t ialpha = 1;
  std::string label;
  // A run-time check (Graph::add_check) the expression reports through, its
  // message with {} for the value; empty: none.
  std::string check;
};

// An input of the kernel: a tensor and its argument name, or absent (id -1).
struct Input {
  TensorRef t{-1};
  std::string_view name;
  // Read through a permutation of its dims (wgnn.add_permuted): its shape
  // is then the permuted one, its strides its own permuted; empty: none.
  IntList perm = {};
};

// An input's shape as the op sees it (permuted where it is read so).
Shape seen_shape(const Graph& g, const Input& in) {
  const Shape& s = g.info(in.t).shape;
  if (in.perm.empty()) return s;
  Shape r(s.size());
  for (size_t d = 0; d < s.size(); ++d) r[d] = s[size_t(in.perm[d])];
  return r;
}

using Params = BinaryParams;  // ops/uniforms.h
static_assert(sizeof(Params) == 160);

// Validates shapes (broadcasting, rank, binding size), adds the result and
// records the dispatch (none when the result is empty).
TensorRef launch(const Args& a, const Launch& l, std::array<Input, 3> ins) {
  Graph& g = a.g;
  Shape out_shape;
  bool first = true;
  std::vector<std::string> all;
  for (const Input& in : ins) {
    if (in.t.id >= 0) all.push_back(fmt::format("'{}' {}", in.name, shape_str(seen_shape(g, in))));
  }
  for (const Input& in : ins) {
    if (in.t.id < 0) continue;
    const Shape s = seen_shape(g, in);
    require_rank(s, a.op, in.name);
    if (first) {
      out_shape = s;
      first = false;
      continue;
    }
    try {
      out_shape = broadcast_shapes(out_shape, s, a.op);
    } catch (const Error&) {
      a.fail(fmt::format("shapes do not broadcast: {}", fmt::join(all, ", ")));
    }
  }
  const int64_t n = numel(out_shape);
  if (n > int64_t(UINT32_MAX) - 3) {
    a.fail(fmt::format("the result {} is too large for 32-bit indexing", shape_str(out_shape)));
  }
  const uint64_t bytes = uint64_t(n) * gpu_dtype_size(l.out), limit = g.ctx().limits().max_buffer_size;
  if (bytes > limit) {
    a.fail(fmt::format("the result {} {} is {} bytes, over this device's maxBufferSize of {} bytes (a tensor is one "
                       "buffer)",
                       dtype_name(l.out), shape_str(out_shape), bytes, limit));
  }
  TensorRef y = g.add_tensor(out_shape, l.out);
  if (n == 0) return y;

  // Modes: 0 same layout as the result, 1 one element, 2 strided.
  std::array<uint32_t, 3> mode{1, 1, 1};
  std::array<Shape, 3> strides;
  bool strided = false;
  for (size_t k = 0; k < 3; ++k) {
    strides[k] = Shape(out_shape.size(), 0);
    if (ins[k].t.id < 0) continue;
    const TensorInfo& ti = g.info(ins[k].t);
    if (ti.numel() == 1) {
      mode[k] = 1;
    } else if (!ins[k].perm.empty()) {
      // Its own strides in the permuted order, broadcast into the result's.
      mode[k] = 2;
      strided = true;
      const Shape own = contiguous_strides(ti.shape), ps = seen_shape(g, ins[k]);
      Shape permuted(ps.size());
      for (size_t d = 0; d < ps.size(); ++d) permuted[d] = ps[d] == 1 ? 0 : own[size_t(ins[k].perm[d])];
      const size_t off = out_shape.size() - ps.size();
      for (size_t d = 0; d < ps.size(); ++d) strides[k][off + d] = permuted[d];
    } else if (ti.numel() == n) {
      mode[k] = 0;
    } else {
      mode[k] = 2;
      strided = true;
      strides[k] = broadcast_strides(ti.shape, out_shape);
    }
  }
  // Merge dims that decode alike for every strided input (and drop dims of
  // size 1): [N, C, H, W] + [1, C, 1, 1] decodes as [N, C, H*W].
  Shape shape;
  std::array<Shape, 3> st;
  if (strided) {
    for (size_t d = 0; d < out_shape.size(); ++d) {
      if (out_shape[d] == 1) continue;
      bool merge = !shape.empty();
      for (size_t k = 0; k < 3 && merge; ++k) {
        if (mode[k] == 2 && st[k].back() != strides[k][d] * out_shape[d]) merge = false;
      }
      if (merge) {
        shape.back() *= out_shape[d];
        for (size_t k = 0; k < 3; ++k) st[k].back() = strides[k][d];
      } else {
        shape.push_back(out_shape[d]);
        for (size_t k = 0; k < 3; ++k) st[k].push_back(strides[k][d]);
      }
    }
  }

  const bool f16 = l.in == DType::F16 || l.out == DType::F16;
  if (f16) (void)float_subs(g, DType::F16, a.op);  // throws without shader-f16
  Subs subs = {{"ENABLE", f16 ? "enable f16;" : ""}};
  const bool check = !l.check.empty() && g.checked();
  for (auto& s : check_subs(check, 5)) subs.push_back(std::move(s));
  subs.insert(subs.end(),
              {{"T", wgsl_type(l.in)}, {"C", l.compute}, {"O", wgsl_type(l.out)}, {"EXPR", l.expr}});
  const gpu::Constants modes = {
      {"MODE_A", double(mode[0])}, {"MODE_B", double(mode[1])}, {"MODE_C", double(mode[2])}};
  const gpu::Pipeline& p = kernel(g, "ops/kernels/binary.wgsl", subs, modes);
  // Tensors over maxStorageBufferBindingSize: the work is split into spans
  // of the outer dim of `shape` (of flat elements when no input is
  // strided), a multiple of 4 elements each, one dispatch per span. The
  // result and the inputs of its layout are bound by the span's byte range,
  // a strided input by the range its rows read (whole when it does not
  // move along the outer dim, as a broadcast bias), a single element whole.
  const bool flat = shape.empty();
  const uint64_t units = flat ? uint64_t(n) : uint64_t(shape[0]);
  const uint64_t per_unit = flat ? 1 : uint64_t(numel(shape)) / units;  // elements per unit
  std::vector<uint64_t> unit_bytes = {per_unit * gpu_dtype_size(l.out)}, extra = {0};
  std::array<uint64_t, 3> es{}, stride0{}, reach{};  // element size; outer stride; elements one unit reads past its start
  for (size_t k = 0; k < 3; ++k) {
    if (ins[k].t.id < 0) continue;
    es[k] = gpu_dtype_size(g.info(ins[k].t).dtype);
    if (mode[k] == 0) {
      unit_bytes.push_back(per_unit * es[k]);
      extra.push_back(0);
    } else if (mode[k] == 2) {
      stride0[k] = uint64_t(st[k][0]);
      reach[k] = 1;
      for (size_t d = 1; d < shape.size(); ++d) reach[k] += uint64_t(shape[d] - 1) * uint64_t(st[k][d]);
      if (stride0[k] == 0) {
        a.require_fits_binding(ins[k].t, ins[k].name);  // bound whole
      } else {
        unit_bytes.push_back(stride0[k] * es[k]);
        extra.push_back(reach[k] * es[k]);
      }
    }
  }
  const uint64_t multiple = 4 / std::gcd<uint64_t>(per_unit, 4);
  const std::vector<Span> spans =
      binding_spans(g, units, unit_bytes, multiple, fmt::format("{}: the result {}", a.op, shape_str(out_shape)), extra);
  std::optional<Graph::Check> chk;
  if (check) chk = g.add_check(fmt::format("{}: {}", a.op, l.check));
  for (const Span& sp : spans) {
    const uint64_t elems = sp.count * per_unit, start = sp.start * per_unit;
    const uint64_t count = (elems + 3) / 4;
    Shape part = shape;
    if (!flat) part[0] = int64_t(sp.count);
    Params params{};
    params.count = uint32_t(count);
    params.numel = uint32_t(elems);
    params.rank = uint32_t(part.size());
    if (chk) params.check_slot = chk->slot;
    params.ialpha = l.ialpha;
    params.falpha = l.falpha;
    params.shape = pack(part, a.op);
    params.sa = pack(st[0], a.op);
    params.sb = pack(st[1], a.op);
    params.sc = pack(st[2], a.op);
    const uint64_t out_es = gpu_dtype_size(l.out);
    std::vector<Binding> bind = {bind_bytes(g, y, start * out_es, elems * out_es), g.uniform(params)};
    for (size_t k = 0; k < 3; ++k) {
      const Input& in = ins[k];
      if (in.t.id < 0) {
        bind.push_back(Binding::of(g.ctx().dummy_buffer()));
      } else if (mode[k] == 0) {
        bind.push_back(bind_bytes(g, in.t, start * es[k], elems * es[k]));
      } else if (mode[k] == 2 && stride0[k] != 0 && spans.size() > 1) {
        const uint64_t from = sp.start * stride0[k];
        bind.push_back(bind_bytes(g, in.t, from * es[k], ((sp.count - 1) * stride0[k] + reach[k]) * es[k]));
      } else {
        bind.push_back(Binding::of(in.t));
      }
    }
    if (chk) bind.push_back(Binding::of(chk->flags));
    g.add_dispatch(p, std::move(bind), grid_for(g, gpu::ceil_div(count, 256)), std::string(a.op),
                   fmt::format("{}{}", l.label, strided ? " bcast" : ""));
  }
  return y;
}

// ---- binary ops

struct BinaryOp {
  const char* name;  // ATen name
  const DTypes* accepts;
  bool bool_out;
  const char* f;  // x, y: vec4<f32> (float16, float32)
  const char* i;  // x, y: vec4<i32> (int32, int64, int8)
  const char* u;  // x, y: vec4<u32> (bool, uint8)
  bool alpha = false;
  bool true_div = false;  // integer inputs divide as float32 (ATen's true division)
};

// Float comparisons spell out NaN (any_nan in the kernel): x == NaN is
// false, x != NaN true, whatever the device assumes about NaN.
const std::vector<BinaryOp>& binary_ops() {
  static const std::vector<BinaryOp> ops = {
      {"aten.add.Tensor", &kArith, false, "x + params.falpha * y", "x + params.ialpha * y", nullptr, true},
      {"aten.sub.Tensor", &kArith, false, "x - params.falpha * y", "x - params.ialpha * y", nullptr, true},
      {"aten.mul.Tensor", &kArith, false, "x * y", "x * y", nullptr},
      // silu(x) * y: SwiGLU's gate times its up product (passes/fuse_silu_mul).
      {"wgnn.silu_mul.default", &kFloats, false, "x / (1.0 + exp(-x)) * y", nullptr, nullptr},
      {"aten.div.Tensor", &kNumeric, false, "x / y", nullptr, nullptr, false, true},
      {"aten.pow.Tensor_Tensor", &kNumeric, false, "pow_f(x, y)", "pow_i(x, y)", nullptr},
      {"aten.minimum.default", &kAll, false, "min_f(x, y)", "min(x, y)", "min(x, y)"},
      {"aten.maximum.default", &kAll, false, "max_f(x, y)", "max(x, y)", "max(x, y)"},
      {"aten.remainder.Tensor", &kArith, false, "rem_f(x, y)", "rem_i(x, divisor(i, y))", nullptr},
      {"aten.fmod.Tensor", &kArith, false, "fmod_f(x, y)", "x % divisor(i, y)", nullptr},
      // uint8 shifts: bits shifted past the 8th are dropped; a shift of 8 or
      // more gives 0. Signed (int8 sign-extended in i32, wrapped back to 8
      // bits): a negative shift or one of the width or more gives what the
      // sign extension alone gives (0 left; 0 or -1 right).
      {"aten.bitwise_left_shift.Tensor", &kShifts, false, nullptr,
       "select(x << bitcast<vec4<u32>>(y), C4(0), (y < C4(0)) | (y >= C4(32)))",
       "select((x << min(y, C4(31))) & C4(255), C4(0), y >= C4(8))"},
      {"aten.bitwise_right_shift.Tensor", &kShifts, false, nullptr,
       "select(x >> bitcast<vec4<u32>>(min(y, C4(31))), select(C4(0), C4(-1), x < C4(0)), y < C4(0))",
       "select(x >> min(y, C4(31)), C4(0), y >= C4(8))"},
      {"aten.bitwise_and.Tensor", &kIntegers, false, nullptr, "x & y", "x & y"},
      {"aten.bitwise_or.Tensor", &kIntegers, false, nullptr, "x | y", "x | y"},
      {"aten.bitwise_xor.Tensor", &kIntegers, false, nullptr, "x ^ y", "x ^ y"},
      {"aten.eq.Tensor", &kAll, true, "(x == y) & !any_nan(x, y)", "x == y", "x == y"},
      {"aten.ne.Tensor", &kAll, true, "(x != y) | any_nan(x, y)", "x != y", "x != y"},
      {"aten.lt.Tensor", &kAll, true, "(x < y) & !any_nan(x, y)", "x < y", "x < y"},
      {"aten.le.Tensor", &kAll, true, "(x <= y) & !any_nan(x, y)", "x <= y", "x <= y"},
      {"aten.gt.Tensor", &kAll, true, "(x > y) & !any_nan(x, y)", "x > y", "x > y"},
      {"aten.ge.Tensor", &kAll, true, "(x >= y) & !any_nan(x, y)", "x >= y", "x >= y"},
      {"aten.logical_and.default", &kAll, true, "nz_f(x) & nz_f(y)", "(x != C4(0)) & (y != C4(0))",
       "(x != C4(0)) & (y != C4(0))"},
      {"aten.logical_or.default", &kAll, true, "nz_f(x) | nz_f(y)", "(x != C4(0)) | (y != C4(0))",
       "(x != C4(0)) | (y != C4(0))"},
      {"aten.logical_xor.default", &kAll, true, "nz_f(x) != nz_f(y)", "(x != C4(0)) != (y != C4(0))",
       "(x != C4(0)) != (y != C4(0))"},
  };
  return ops;
}

const BinaryOp& binary_op(std::string_view name) {
  for (const BinaryOp& b : binary_ops()) {
    if (b.name == name) return b;
  }
  throw Error(fmt::format("no binary op {}", name));
}

// aten.div.Tensor_mode's rounded divisions.
const BinaryOp kDivTrunc{"aten.div.Tensor_mode", &kArith, false, "trunc(x / y)", "x / divisor(i, y)", nullptr};
const BinaryOp kDivFloor{"aten.div.Tensor_mode", &kArith, false, "floor(x / y)", "div_floor_i(x, divisor(i, y))",
                         nullptr};

// "aten.add.Tensor" -> "add"
std::string short_name(std::string_view op) {
  std::string s(op.substr(op.find('.') + 1));
  return s.substr(0, s.find('.'));
}

// The kernel's types and expression for op b on two tensors of dtype dt
// (checked here), before any alpha.
Launch binary_launch(const BinaryOp& b, const Args& a, TensorRef x, TensorRef y) {
  require_dtype(a, x, "self", *b.accepts);
  require_dtype(a, y, "other", *b.accepts);
  require_same_dtype(a, x, "self", y, "other");
  const DType dt = a.g.info(x).dtype;
  Launch l;
  l.in = dt;
  l.compute = compute_type(dt);
  l.out = b.bool_out ? DType::Bool : dt;
  l.label = fmt::format("{} {}", short_name(a.op), dtype_name(dt));
  if (is_float(dt)) {
    l.expr = b.f;
  } else if (b.true_div) {
    l.compute = "f32";
    l.out = DType::F32;
    l.expr = b.f;
  } else if (dt == DType::I8 && b.accepts == &kShifts) {
    l.expr = fmt::format("wrap_i8({})", b.i);  // bits shifted past the 8th dropped
  } else if ((dt == DType::U8 || dt == DType::I8) && b.accepts == &kArith) {
    l.compute = "i32";  // 8-bit arithmetic: in i32, the result wrapped to 8 bits
    l.expr = dt == DType::U8 ? fmt::format("({}) & C4(255)", b.i) : fmt::format("wrap_i8({})", b.i);
    if (l.expr.find("divisor(") != std::string::npos) l.check = "integer division by zero at element {}";
  } else {
    l.expr = is_u32(dt) ? b.u : b.i;
    if (l.expr.find("divisor(") != std::string::npos) l.check = "integer division by zero at element {}";
  }
  return l;
}

Value run_binary(const BinaryOp& b, const Args& a) {
  TensorRef x = a.tensor(0, "self");
  TensorRef y = a.tensor(1, "other");
  Launch l = binary_launch(b, a, x, y);
  const DType dt = a.g.info(x).dtype;
  if (b.alpha) {
    const Value& v = a.args.size() > 2 ? a.args[2] : Value(None{});
    const double alpha = a.scalar(2, "alpha", 1.0);
    if (!is_float(dt)) {
      if (v.is_double() && alpha != std::trunc(alpha)) {
        a.fail(fmt::format("argument 'alpha' is {}; for integer tensors it must be an Int", v.describe()));
      }
      if (alpha < double(std::numeric_limits<int32_t>::min()) || alpha > double(std::numeric_limits<int32_t>::max())) {
        a.fail(fmt::format("argument 'alpha' is {}; for integer tensors it must fit int32", v.describe()));
      }
      l.ialpha = int32_t(alpha);
    }
    l.falpha = float(alpha);
  }
  return launch(a, l, {Input{x, "self"}, Input{y, "other"}, Input{}});
}

// wgnn.add_permuted.default(self, other, dims): self + aten.permute(other,
// dims) without the permuted copy: the kernel reads `other` through its
// strides in the permuted order (fuse_permute_add: ConvNeXt's residual add
// after its MLP's result goes back to channels first). aten.add's dtypes
// and broadcasting; dims a permutation of other's dims (negative ones
// counted from the end).
Value add_permuted(Graph& g, const ValueList& args) {
  Args a{"wgnn.add_permuted.default", args, g};
  if (args.size() != 3) a.fail(fmt::format("takes 3 arguments (self, other, dims), got {}", args.size()));
  TensorRef x = a.tensor(0, "self");
  TensorRef y = a.tensor(1, "other");
  IntList dims = a.int_list(2, "dims");
  const size_t rank = g.info(y).shape.size();
  std::vector<bool> seen(rank, false);
  bool ok = dims.size() == rank;
  for (int64_t& d : dims) {
    if (d < 0) d += int64_t(rank);
    ok = ok && d >= 0 && d < int64_t(rank) && !seen[size_t(d)];
    if (ok) seen[size_t(d)] = true;
  }
  if (!ok) {
    a.fail(fmt::format("argument 'dims' {} is not a permutation of the {} dims of 'other' {}",
                       shape_str(a.int_list(2, "dims")), rank, shape_str(g.info(y).shape)));
  }
  const Launch l = binary_launch(binary_op("aten.add.Tensor"), a, x, y);  // alpha 1
  return launch(a, l, {Input{x, "self"}, Input{y, "other", dims}, Input{}});
}

// aten.div.Tensor_mode(self, other, *, rounding_mode: 'trunc' | 'floor' | None)
Value div_mode(Graph& g, const ValueList& args) {
  Args a{"aten.div.Tensor_mode", args, g};
  require_at_most(a, 3);
  const Value& m = args.size() > 2 ? args[2] : Value(None{});
  if (m.is_none()) return run_binary(binary_op("aten.div.Tensor"), a);  // true division
  if (!std::holds_alternative<std::string>(m.v)) {
    a.fail(fmt::format("argument 'rounding_mode' must be a String or None, got {}; accepted: 'trunc', 'floor', None",
                       m.describe()));
  }
  const std::string mode = std::get<std::string>(m.v);
  if (mode == "trunc") return run_binary(kDivTrunc, a);
  if (mode == "floor") return run_binary(kDivFloor, a);
  a.fail(fmt::format("argument 'rounding_mode' is '{}'; accepted: 'trunc', 'floor', None", mode));
}

// ---- where

// aten.where.self(condition, self, other): condition ? self : other.
Value where_self(Graph& g, const ValueList& args) {
  Args a{"aten.where.self", args, g};
  require_at_most(a, 3);
  TensorRef cond = a.tensor(0, "condition");
  TensorRef x = a.tensor(1, "self");
  TensorRef y = a.tensor(2, "other");
  require_dtype(a, cond, "condition", {DType::Bool});
  require_same_dtype(a, x, "self", y, "other");
  const DType dt = g.info(x).dtype;
  Launch l;
  l.in = l.out = dt;
  l.compute = wgsl_type(dt);  // no conversion: the selected bits are stored as they are
  l.expr = "select(y, x, c != vec4<u32>(0u))";
  l.label = fmt::format("where {}", dtype_name(dt));
  return launch(a, l, {Input{x, "self"}, Input{y, "other"}, Input{cond, "condition"}});
}

// ---- prelu

// aten.prelu.default(self, weight): self where self >= 0 (or NaN), else
// weight * self. weight holds one value for all, or one per channel (dim 1
// of self); it is read as [C, 1, ..., 1] against self's trailing dims.
Value prelu(Graph& g, const ValueList& args) {
  Args a{"aten.prelu.default", args, g};
  require_at_most(a, 2);
  TensorRef x = a.tensor(0, "self");
  TensorRef w = a.tensor(1, "weight");
  require_dtype(a, x, "self", {DType::F32, DType::F16});
  require_same_dtype(a, x, "self", w, "weight");
  const Shape& xs = g.info(x).shape;
  const Shape& ws = g.info(w).shape;
  const int64_t n = numel(ws);
  const int64_t channels = xs.size() >= 2 ? xs[1] : 1;
  if (ws.size() > 1 || (n != 1 && n != channels)) {
    a.fail(fmt::format("argument 'weight' has shape {}; expected one value, or [{}] (one per channel of self {})",
                       shape_str(ws), channels, shape_str(xs)));
  }
  TensorRef wv = w;
  if (n != 1) {
    Shape per_channel(xs.size() - 1, 1);
    per_channel[0] = n;
    wv = g.add_view(w, per_channel);
  }
  Launch l;
  l.in = l.out = g.info(x).dtype;
  l.compute = "f32";
  l.expr = "select(x, y * x, x < vec4<f32>(0.0))";
  l.label = fmt::format("prelu {}", dtype_name(l.in));
  return launch(a, l, {Input{x, "self"}, Input{wv, "weight"}, Input{}});
}

// ---- unary: logical_not and casts

Value logical_not(Graph& g, const ValueList& args) {
  Args a{"aten.logical_not.default", args, g};
  require_at_most(a, 1);
  TensorRef x = a.tensor(0, "self");
  const DType dt = g.info(x).dtype;
  Launch l;
  l.in = dt;
  l.compute = compute_type(dt);
  l.out = DType::Bool;
  l.expr = is_float(dt) ? "!nz_f(x)" : "x == C4(0)";
  l.label = fmt::format("logical_not {}", dtype_name(dt));
  return launch(a, l, {Input{x, "self"}, Input{}, Input{}});
}

// aten.isnan.default(self) and wgnn.isinf.default(self, detect_positive,
// detect_negative) (ONNX IsInf): bool, decided on the bits (a device may
// assume no NaN or infinity in float arithmetic).
Value isnan_op(Graph& g, const ValueList& args) {
  Args a{"aten.isnan.default", args, g};
  require_at_most(a, 1);
  TensorRef x = a.tensor(0, "self");
  require_dtype(a, x, "self", {DType::F32, DType::F16});
  Launch l;
  l.in = g.info(x).dtype;
  l.compute = "f32";
  l.out = DType::Bool;
  l.expr = "isnan4(x)";
  l.label = fmt::format("isnan {}", dtype_name(l.in));
  return launch(a, l, {Input{x, "self"}, Input{}, Input{}});
}

Value isinf_op(Graph& g, const ValueList& args) {
  Args a{"wgnn.isinf.default", args, g};
  require_at_most(a, 3);
  TensorRef x = a.tensor(0, "self");
  require_dtype(a, x, "self", {DType::F32, DType::F16});
  const bool pos = a.boolean(1, "detect_positive", true), neg = a.boolean(2, "detect_negative", true);
  Launch l;
  l.in = g.info(x).dtype;
  l.compute = "f32";
  l.out = DType::Bool;
  const std::string mag = "((bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) == vec4<u32>(0x7f800000u))";
  const std::string sign = "((bitcast<vec4<u32>>(x) >> vec4<u32>(31u)) == vec4<u32>(1u))";
  l.expr = pos && neg ? mag : pos ? mag + " & !" + sign : neg ? mag + " & " + sign : "vec4<bool>(false)";
  l.label = fmt::format("isinf {}", dtype_name(l.in));
  return launch(a, l, {Input{x, "self"}, Input{}, Input{}});
}

// ATen ScalarType codes of the dtypes wgnn has.
constexpr std::pair<int64_t, DType> kScalarTypes[] = {{0, DType::U8},  {1, DType::I8},  {3, DType::I32},
                                                      {4, DType::I64}, {5, DType::F16}, {6, DType::F32},
                                                      {11, DType::Bool}};

const char* aten_scalar_type_name(int64_t code) {
  switch (code) {
    case 2: return "int16";
    case 7: return "float64";
    case 8: return "complex32";
    case 9: return "complex64";
    case 10: return "complex128";
    case 15: return "bfloat16";
    default: return "unknown";
  }
}

// The expression converting x (vec4<compute_type(src)>) to dst.
std::string cast_expr(DType src, DType dst) {
  if (is_float(src)) {
    switch (dst) {
      case DType::F32: return "x";
      case DType::F16: return "f16_range(x)";
      case DType::I32:
      case DType::I64: return "to_i32(x)";
      case DType::I8: return "wrap_i8(to_i32(x))";
      case DType::U8: return "to_i32(x) & vec4<i32>(255)";
      case DType::Bool: return "nz_f(x)";
    }
  }
  const std::string xi = is_u32(src) ? "vec4<i32>(x)" : "x";
  switch (dst) {
    case DType::F32: return "x";
    case DType::F16: return "f16_range(vec4<f32>(x))";
    case DType::I32:
    case DType::I64: return "x";
    case DType::I8: return "wrap_i8(" + xi + ")";
    case DType::U8: return xi + " & vec4<i32>(255)";
    case DType::Bool: return "x != C4(0)";
  }
  return "x";
}

// aten._to_copy.default(self, *, dtype=None, layout, device, pin_memory,
// non_blocking, memory_format): a copy, converted to `dtype` (an ATen
// ScalarType code). Only dtype is read; the other arguments describe
// placement and layout, which the graph decides.
//   float -> integer: truncation toward zero (as C and ONNX Cast), NaN -> 0,
//     saturating at the int32 range: int64 tensors are stored as int32, so a
//     float cast to int64 clamps to [-2^31, 2^31 - 1].
//   integer -> int8 / uint8: the low 8 bits (two's complement wrap);
//     float -> int8 / uint8 truncates to int32 first, then wraps.
//   any -> bool: != 0 (NaN is true).
//   -> float16: values beyond its range become +-inf.
Value to_copy(Graph& g, const ValueList& args) {
  Args a{"aten._to_copy.default", args, g};
  TensorRef x = a.tensor(0, "self");
  const DType src = g.info(x).dtype;
  DType dst = src;
  if (args.size() > 1 && !args[1].is_none()) {
    if (args[1].is_bool()) {
      a.fail(fmt::format("argument 'dtype' must be an Int (a ScalarType code), got {}", args[1].describe()));
    }
    const int64_t code = a.integer(1, "dtype", -1);
    bool found = false;
    for (auto [c, d] : kScalarTypes) {
      if (c == code) {
        dst = d;
        found = true;
      }
    }
    if (!found) {
      a.fail(fmt::format("argument 'dtype' is {} ({}); accepted ScalarType codes: 0 (uint8), 1 (int8), 3 (int32), "
                         "4 (int64), 5 (float16), 6 (float32), 11 (bool)",
                         code, aten_scalar_type_name(code)));
    }
  }
  Launch l;
  l.in = src;
  l.out = dst;
  // Every stored value is valid in dst as it is: int32 <-> int64, int8 ->
  // int32/int64, bool -> uint8 (and a copy to the same dtype).
  const bool same_storage = std::string_view(wgsl_type(src)) == wgsl_type(dst);
  const bool keep = src == dst || (same_storage && dst != DType::I8 && dst != DType::Bool);
  l.compute = keep ? wgsl_type(src) : compute_type(src);
  l.expr = keep ? std::string("x") : cast_expr(src, dst);
  l.label = fmt::format("cast {} -> {}", dtype_name(src), dtype_name(dst));
  return launch(a, l, {Input{x, "self"}, Input{}, Input{}});
}

}  // namespace

void register_binary_ops(OpRegistry& r) {
  for (const BinaryOp& b : binary_ops()) {
    r.add(b.name, [&b](Graph& g, const ValueList& args) {
      Args a{b.name, args, g};
      require_at_most(a, b.alpha ? 3 : 2);
      return run_binary(b, a);
    });
  }
  r.add("wgnn.add_permuted.default", add_permuted);
  r.add("aten.div.Tensor_mode", div_mode);
  r.add("aten.where.self", where_self);
  r.add("aten.prelu.default", prelu);
  r.add("aten.logical_not.default", logical_not);
  r.add("aten.isnan.default", isnan_op);
  r.add("wgnn.isinf.default", isinf_op);
  r.add("aten._to_copy.default", to_copy);
}

}  // namespace wgnn::ops

// The ops of an ExecuTorch program as IR nodes. Most are wgnn ops of the
// same ATen name and arguments, passed through (the registry checks them
// when a plan lowers them). The rest are ExecuTorch's forms of them:
//   - `_copy` views (view_copy, permute_copy, squeeze_copy, select_copy,
//     slice_copy, expand_copy, split_with_sizes_copy, t_copy, alias_copy)
//     as wgnn's views and copies (wgnn's results are new tensors already);
//   - dim-order copies (`dim_order_ops._to_dim_order_copy`,
//     `_clone_dim_order`): a memory layout, which wgnn's planner decides,
//     so a copy at most a dtype conversion;
//   - scalar forms (`eq.Scalar`, `pow.Tensor_Scalar`, `add.Scalar`) as the
//     tensor forms with a 0-d constant;
//   - factories (full, zeros, ones, arange, scalar_tensor, *_like) as
//     constants of the declared dtype and shape;
//   - the Vulkan delegate's own ops: `et_vk.prepack` (a weight's upload:
//     nothing here), `et_vk.conv_with_clamp` (convolution, then clamp) and
//     the quantized ones (`et_vk.q8ta_*`, `et_vk.linear_*`): int8
//     activations dequantized, the float op, quantized again, with the
//     weights dequantized to float32 at load.
// A dtype argument the Vulkan serializer drops (it writes None for a
// torch.dtype) is taken from the result's declared dtype.
#include "pte/aten.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu/error.h"
#include "graph/half.h"
#include "graph/host_tensor.h"
#include "ops/registry.h"

namespace wgnn::pte {

TensorRef OpCall::tensor(size_t i) const {
  if (i >= args.size() || !args[i].is_tensor()) {
    fail(fmt::format("argument {} must be a tensor, got {}", i, i < args.size() ? args[i].describe() : "nothing"));
  }
  return args[i].tensor();
}

const Shape& OpCall::out_shape(size_t i) const {
  if (i >= outs.size()) fail(fmt::format("result {} is not declared", i));
  if (!out_shapes_known) {
    throw Unsupported(fmt::format("{}: its results' shapes at these input sizes are needed to map it, and wgnn has no "
                                  "shape rule for it (a dynamic-shape program run below its bounds)",
                                  where));
  }
  return outs[i].shape;
}

const Meta& OpCall::meta_of(TensorRef t) const {
  auto it = meta.find(t.id);
  if (it == meta.end()) fail("a tensor argument has no declared shape");
  return it->second;
}

int64_t OpCall::integer(size_t i) const {
  if (i >= args.size() || !args[i].is_int()) {
    fail(fmt::format("argument {} must be an Int, got {}", i, i < args.size() ? args[i].describe() : "nothing"));
  }
  return std::get<int64_t>(args[i].v);
}

double OpCall::scalar(size_t i) const {
  if (i < args.size() && args[i].is_double()) return std::get<double>(args[i].v);
  if (i < args.size() && args[i].is_int()) return double(std::get<int64_t>(args[i].v));
  if (i < args.size() && args[i].is_bool()) return std::get<bool>(args[i].v) ? 1.0 : 0.0;
  fail(fmt::format("argument {} must be a scalar, got {}", i, i < args.size() ? args[i].describe() : "nothing"));
}

namespace {

// A value of the program (a fill value, a scalar) stored as `t`'s dtype:
// beyond float32's range it is an infinity (as PyTorch stores it); an
// integer dtype takes the value truncated, and one it cannot hold (or a
// NaN) is an error, never an undefined conversion.
void put(HostTensor& t, int64_t i, double v) {
  const auto integer = [&](double lo, double hi) -> int64_t {
    if (!(v >= lo && v < hi)) {
      throw Error(fmt::format("the value {} does not fit a {} tensor", v, dtype_name(t.dtype)));
    }
    return int64_t(v);
  };
  const auto narrow = [](double x) {
    const double most = double(std::numeric_limits<float>::max());
    if (x > most) return std::numeric_limits<float>::infinity();
    if (x < -most) return -std::numeric_limits<float>::infinity();
    return float(x);  // NaN stays NaN
  };
  switch (t.dtype) {
    case DType::F32: reinterpret_cast<float*>(t.data.data())[i] = narrow(v); break;
    case DType::F16: reinterpret_cast<uint16_t*>(t.data.data())[i] = float_to_half(narrow(v)); break;
    case DType::I32: reinterpret_cast<int32_t*>(t.data.data())[i] = int32_t(integer(-2147483648.0, 2147483648.0)); break;
    case DType::I64:
      reinterpret_cast<int64_t*>(t.data.data())[i] = integer(-9223372036854775808.0, 9223372036854775808.0);
      break;
    case DType::Bool: t.data.data()[i] = uint8_t(v != 0 ? 1 : 0); break;
    case DType::U8: t.data.data()[i] = uint8_t(integer(0.0, 256.0)); break;
    case DType::I8: reinterpret_cast<int8_t*>(t.data.data())[i] = int8_t(integer(-128.0, 128.0)); break;
  }
}

}  // namespace

TensorRef OpCall::constant(DType dtype, const Shape& shape, double v) const {
  HostTensor t(dtype, shape);
  const int64_t n = numel(shape);
  for (int64_t i = 0; i < n; ++i) put(t, i, v);
  return ir.constant(std::move(t));
}

void OpCall::fail(const std::string& msg) const { throw Error(fmt::format("{}: {}", where, msg)); }

int64_t scalar_type_code(DType d) {
  switch (d) {
    case DType::U8: return 0;
    case DType::I8: return 1;
    case DType::I32: return 3;
    case DType::I64: return 4;
    case DType::F16: return 5;
    case DType::F32: return 6;
    case DType::Bool: return 11;
  }
  return 6;
}

namespace {

std::vector<TensorRef> one(TensorRef t) { return {t}; }

// The op of the same name, arguments as given.
std::vector<TensorRef> same(OpCall& c) {
  if (c.outs.size() == 1) return one(c.ir.call(c.op, c.args));
  return c.ir.call_multi(c.op, c.args, c.outs.size());
}

// Another op's name, the same arguments (the first `n`, or all).
template <const char* Name, size_t N = 64>
std::vector<TensorRef> renamed(OpCall& c) {
  ValueList args(c.args.begin(), c.args.begin() + std::min(N, c.args.size()));
  if (c.outs.size() == 1) return one(c.ir.call(Name, args));
  return c.ir.call_multi(Name, args, c.outs.size());
}

IntList out_shape(const OpCall& c, size_t i = 0) {
  const Shape& s = c.out_shape(i);
  return IntList(s.begin(), s.end());
}

TensorRef view(OpCall& c, TensorRef x, const IntList& shape) { return c.ir.call("aten.view.default", {x, shape}); }

// The result's declared shape as a view of the input: squeeze and
// unsqueeze, and any op that only renames dims.
std::vector<TensorRef> as_view(OpCall& c) { return one(view(c, c.tensor(0), out_shape(c))); }

std::vector<TensorRef> identity(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const Meta& m = c.meta_of(x);
  if (m.dtype != c.outs.at(0).dtype) {
    return one(c.ir.call("aten._to_copy.default", {x, scalar_type_code(c.outs.at(0).dtype)}));
  }
  if (m.shape != c.out_shape()) c.fail(fmt::format("the result's shape {} is not the input's {}",
                                                  shape_str(c.out_shape()), shape_str(m.shape)));
  return one(x);
}

std::vector<TensorRef> to_copy(OpCall& c) {
  // To its own dtype: the same values (the IR's values are never written
  // in place; a model output gets a buffer of its own where it is one).
  if (c.meta_of(c.tensor(0)).dtype == c.outs.at(0).dtype) return one(c.tensor(0));
  return one(c.ir.call("aten._to_copy.default", {c.tensor(0), scalar_type_code(c.outs.at(0).dtype)}));
}

int64_t norm_dim(const OpCall& c, int64_t d, size_t rank) {
  const int64_t r = int64_t(rank);
  if (d < -r || d >= std::max<int64_t>(r, 1)) c.fail(fmt::format("dim {} is out of range for rank {}", d, rank));
  return d < 0 ? d + r : d;
}

std::vector<TensorRef> t_copy(OpCall& c) {
  const TensorRef x = c.tensor(0);
  if (c.meta_of(x).shape.size() < 2) return one(x);
  return one(c.ir.call("aten.permute.default", {x, IntList{1, 0}}));
}

// select_copy.int(self, dim, index): a slice of one, without the dim.
std::vector<TensorRef> select(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const Shape& s = c.meta_of(x).shape;
  const int64_t dim = norm_dim(c, c.integer(1), s.size());
  int64_t index = c.integer(2);
  if (index < -s[size_t(dim)] || index >= s[size_t(dim)]) {
    c.fail(fmt::format("index {} is out of range for dim {} of size {}", index, dim, s[size_t(dim)]));
  }
  if (index < 0) index += s[size_t(dim)];
  const TensorRef part = c.ir.call("aten.slice.Tensor", {x, dim, index, index + 1, int64_t(1)});
  return one(view(c, part, out_shape(c)));
}

std::vector<TensorRef> expand(OpCall& c) { return one(c.ir.call("aten.expand.default", {c.tensor(0), c.args.at(1)})); }

std::vector<TensorRef> split_copy(OpCall& c) {
  // split_copy.Tensor(self, split_size, dim): the declared results' sizes.
  const TensorRef x = c.tensor(0);
  const int64_t dim = norm_dim(c, c.integer(2), c.meta_of(x).shape.size());
  IntList sizes;
  for (size_t i = 0; i < c.outs.size(); ++i) sizes.push_back(c.out_shape(i).at(size_t(dim)));
  return c.ir.call_multi("aten.split_with_sizes.default", {x, sizes, dim}, c.outs.size());
}

std::vector<TensorRef> constant_pad(OpCall& c) {
  Value value = c.args.size() > 2 ? c.args[2] : Value(0.0);
  return one(c.ir.call("aten.pad.default", {c.tensor(0), c.args.at(1), std::string("constant"), value}));
}

// A factory: the declared result filled with one value (`arg`: its index).
template <int Arg>
std::vector<TensorRef> filled(OpCall& c) {
  double v = 0;
  if constexpr (Arg >= 0) v = c.scalar(size_t(Arg));
  return one(c.constant(c.outs.at(0).dtype, c.out_shape(), v));
}
template <int V>
std::vector<TensorRef> filled_with(OpCall& c) {
  return one(c.constant(c.outs.at(0).dtype, c.out_shape(), double(V)));
}

std::vector<TensorRef> arange(OpCall& c) {
  // arange.start_step(start, end, step): the declared length.
  const double start = c.scalar(0), step = c.is_none(2) ? 1.0 : c.scalar(2);
  const Meta m{c.outs.at(0).dtype, c.out_shape()};
  if (m.shape.size() != 1) c.fail(fmt::format("the result must have rank 1, declared {}", shape_str(m.shape)));
  HostTensor t(m.dtype, m.shape);
  for (int64_t i = 0; i < m.shape[0]; ++i) put(t, i, start + double(i) * step);
  return one(c.ir.constant(std::move(t)));
}

// `op.Scalar(self, other)` as `op.Tensor(self, 0-d other)`, other args kept.
template <const char* Name>
std::vector<TensorRef> with_scalar(OpCall& c) {
  const TensorRef x = c.tensor(0);
  ValueList args = c.args;
  args[1] = c.constant(c.meta_of(x).dtype, {}, c.scalar(1));
  return one(c.ir.call(Name, args));
}

bool is_float(DType d) { return d == DType::F32 || d == DType::F16; }

// The dtype two operands meet at (ATen's promotion among wgnn's dtypes):
// a float over an integer, the wider float or integer.
DType promoted(DType a, DType b) {
  if (a == b) return a;
  if (is_float(a) != is_float(b)) return is_float(a) ? a : b;
  if (is_float(a)) return DType::F32;
  const auto rank = [](DType d) {
    switch (d) {
      case DType::Bool: return 0;
      case DType::U8:
      case DType::I8: return 1;
      case DType::I32: return 2;
      default: return 3;
    }
  };
  return rank(a) >= rank(b) ? a : b;
}

// A binary op whose second (or first) argument may be a scalar; operands
// of different dtypes meet at the promoted one (the delegate keeps int64
// constants as int32 where the program's own values stay int64).
std::vector<TensorRef> binary(OpCall& c) {
  ValueList args = c.args;
  for (size_t i = 0; i < 2 && i < args.size(); ++i) {
    if (args[i].is_tensor()) continue;
    const size_t other = 1 - i;
    if (other >= args.size() || !args[other].is_tensor()) c.fail("neither operand is a tensor");
    args[i] = c.constant(c.meta_of(args[other].tensor()).dtype, {}, c.scalar(i));
  }
  if (args.size() >= 2) {
    const DType a = c.meta_of(args[0].tensor()).dtype, b = c.meta_of(args[1].tensor()).dtype;
    if (a != b) {
      const DType to = promoted(a, b);
      for (size_t i = 0; i < 2; ++i) {
        if (c.meta_of(args[i].tensor()).dtype != to) {
          args[i] = c.ir.call("aten._to_copy.default", {args[i].tensor(), scalar_type_code(to)});
        }
      }
    }
  }
  return one(c.ir.call(c.op, args));
}

// _native_batch_norm_legit.no_stats(input, weight, bias, training,
// momentum, eps): normalized with the batch's own statistics per channel
// (dim 1), over every other dim (how instance_norm reaches ExecuTorch);
// also its mean and 1/sqrt(var + eps), per channel.
std::vector<TensorRef> batch_norm_no_stats(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const Shape s = c.meta_of(x).shape;
  if (s.size() < 2) c.fail(fmt::format("needs an input of rank 2 or more, got {}", shape_str(s)));
  const int64_t n = s[0], ch = s[1];
  const int64_t rest = numel(s) / std::max<int64_t>(n * ch, 1);
  const double eps = c.scalar(5);
  // (N, C, rest) -> (1, C, N * rest): instance norm over the last dim.
  TensorRef v = view(c, x, IntList{n, ch, rest});
  if (n > 1) {
    v = c.ir.call("aten.permute.default", {v, IntList{1, 0, 2}});
  }
  v = view(c, v, IntList{1, ch, n * rest});
  const Value w = c.is_none(1) ? Value(None{}) : c.args[1];
  const Value b = c.is_none(2) ? Value(None{}) : c.args[2];
  TensorRef y = c.ir.call("aten.instance_norm.default", {v, w, b, None{}, None{}, true, 0.0, eps, false});
  if (n > 1) {
    y = view(c, y, IntList{ch, n, rest});
    y = c.ir.call("aten.permute.default", {y, IntList{1, 0, 2}});
  }
  y = view(c, y, IntList(s.begin(), s.end()));
  // The statistics: mean and rstd per channel.
  const TensorRef mean = c.ir.call("aten.mean.dim", {v, IntList{0, 2}, true});
  const TensorRef d = c.ir.call("aten.sub.Tensor", {v, mean});
  const TensorRef var = c.ir.call("aten.mean.dim", {c.ir.call("aten.mul.Tensor", {d, d}), IntList{0, 2}, false});
  const DType dt = c.meta_of(x).dtype;
  const TensorRef rstd = c.ir.call("aten.rsqrt.default", {c.ir.call("aten.add.Tensor", {var, c.constant(dt, {}, eps)})});
  std::vector<TensorRef> out{y};
  const TensorRef stats[2] = {view(c, mean, IntList{ch}), view(c, rstd, IntList{ch})};
  for (size_t k = 1; k < c.outs.size() && k < 3; ++k) {
    if (c.out_shapes_known && c.outs[k].shape != Shape{ch}) {
      c.fail(fmt::format("result {} is declared {}; the statistics are [{}]", k, shape_str(c.outs[k].shape), ch));
    }
    out.push_back(stats[k - 1]);
  }
  return out;
}

std::vector<TensorRef> hardtanh(OpCall& c) {
  return one(c.ir.call("aten.clamp.default", {c.tensor(0), c.scalar(1), c.scalar(2)}));
}

std::vector<TensorRef> log10(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const TensorRef l = c.ir.call("aten.log.default", {x});
  return one(c.ir.call("aten.mul.Tensor", {l, c.constant(c.meta_of(x).dtype, {}, 1.0 / std::log(10.0))}));
}

std::vector<TensorRef> bitwise_not(OpCall& c) {
  const TensorRef x = c.tensor(0);
  if (c.meta_of(x).dtype != DType::Bool) c.fail("only bool tensors are supported");
  return one(c.ir.call("aten.logical_not.default", {x}));
}

// embedding(weight, indices, ...): rows of weight, in the indices' shape.
std::vector<TensorRef> embedding(OpCall& c) {
  const TensorRef w = c.tensor(0), idx = c.tensor(1);
  const TensorRef flat = view(c, idx, IntList{numel(c.meta_of(idx).shape)});
  const TensorRef rows = c.ir.call("aten.index_select.default", {w, int64_t(0), flat});
  const Shape& ws = c.meta_of(w).shape;
  if (ws.size() != 2) c.fail(fmt::format("the weight must have rank 2, got {}", shape_str(ws)));
  IntList shape(c.meta_of(idx).shape.begin(), c.meta_of(idx).shape.end());
  shape.push_back(ws[1]);
  return one(view(c, rows, shape));
}

// The one index tensor of index.Tensor's and index_put's [indices]
// argument (argument 1) and the dim it indexes: leading Nones (whole dims),
// one tensor, nothing indexed after it.
std::pair<size_t, TensorRef> one_index(const OpCall& c) {
  if (c.args.size() < 2 || !c.args[1].is_list()) c.fail("argument 1 must be a list of index tensors");
  const ValueList& idx = c.args[1].list();
  size_t dim = 0;
  while (dim < idx.size() && idx[dim].is_none()) ++dim;
  if (dim >= idx.size() || !idx[dim].is_tensor()) c.fail("no index tensor given");
  for (size_t k = dim + 1; k < idx.size(); ++k) {
    if (!idx[k].is_none()) c.fail("indexing with more than one index tensor is not supported");
  }
  return {dim, idx[dim].tensor()};
}

// index_put(self, [indices], values, accumulate): one index tensor (1-D)
// at dim d, the other dims whole (None): self with the rows of dim d that
// the index names replaced by (or, accumulating, added to) values, which
// broadcast to self's shape with dim d the index's length. A scatter along
// d with the index expanded to that shape.
std::vector<TensorRef> index_put(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const auto [dim, i] = one_index(c);
  const Shape& xs = c.meta_of(x).shape;
  const Shape& is = c.meta_of(i).shape;
  if (dim >= xs.size()) c.fail(fmt::format("index dim {} is out of range for shape {}", dim, shape_str(xs)));
  if (is.size() != 1) c.fail(fmt::format("the index must have rank 1, got {}", shape_str(is)));
  const bool accumulate = c.args.size() > 3 && c.args[3].is_bool() && std::get<bool>(c.args[3].v);
  IntList target(xs.begin(), xs.end());
  target[dim] = is[0];
  const TensorRef values = c.ir.call("aten.expand.default", {c.tensor(2), target});
  IntList along(xs.size(), 1);
  along[dim] = is[0];
  const TensorRef index = c.ir.call("aten.expand.default", {view(c, i, along), target});
  if (accumulate) {
    return one(c.ir.call("aten.scatter_reduce.two", {x, int64_t(dim), index, values, std::string("sum"), true}));
  }
  return one(c.ir.call("aten.scatter.src", {x, int64_t(dim), index, values}));
}

// index.Tensor(self, [indices]): one index tensor along dim 0 only.
std::vector<TensorRef> index_tensor(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const auto [dim, i] = one_index(c);
  const TensorRef flat = view(c, i, IntList{numel(c.meta_of(i).shape)});
  const TensorRef rows = c.ir.call("aten.index_select.default", {x, int64_t(dim), flat});
  // x's dims with `dim` replaced by the index's.
  const Shape& xs = c.meta_of(x).shape;
  if (dim >= xs.size()) c.fail(fmt::format("index dim {} is out of range for shape {}", dim, shape_str(xs)));
  IntList shape(xs.begin(), xs.begin() + long(dim));
  for (int64_t d : c.meta_of(i).shape) shape.push_back(d);
  shape.insert(shape.end(), xs.begin() + long(dim) + 1, xs.end());
  return one(view(c, rows, shape));
}

// (..., C*r*r, H, W) -> (..., C, H*r, W*r): x of shape s, as a view, a
// permutation and the result's declared shape.
TensorRef shuffled_pixels(OpCall& c, TensorRef x, const Shape& s, int64_t r) {
  if (s.size() < 3 || r < 1 || s[s.size() - 3] % (r * r) != 0) {
    c.fail(fmt::format("needs a (..., C, H, W) input with C a multiple of {}, got {}", r * r, shape_str(s)));
  }
  int64_t n = 1;
  for (size_t i = 0; i + 3 < s.size(); ++i) n *= s[i];
  const int64_t ch = s[s.size() - 3] / (r * r), h = s[s.size() - 2], w = s[s.size() - 1];
  const TensorRef v = view(c, x, IntList{n, ch, r, r, h, w});
  const TensorRef p = c.ir.call("aten.permute.default", {v, IntList{0, 1, 4, 2, 5, 3}});
  return view(c, p, out_shape(c));
}

// pixel_shuffle(self, r).
std::vector<TensorRef> pixel_shuffle(OpCall& c) {
  return one(shuffled_pixels(c, c.tensor(0), c.meta_of(c.tensor(0)).shape, c.integer(1)));
}

// flip(self, dims): each dim read backwards (index_select with the indices
// reversed, a constant of the known size).
std::vector<TensorRef> flip(OpCall& c) {
  TensorRef x = c.tensor(0);
  const Shape s = c.meta_of(x).shape;
  if (c.args.size() < 2 || !c.args[1].is_int_list()) c.fail("needs a list of dims");
  for (int64_t d : std::get<IntList>(c.args[1].v)) {
    const int64_t dim = norm_dim(c, d, s.size());
    const int64_t n = s[size_t(dim)];
    HostTensor idx(DType::I64, {n});
    for (int64_t i = 0; i < n; ++i) reinterpret_cast<int64_t*>(idx.data.data())[i] = n - 1 - i;
    x = c.ir.call("aten.index_select.default", {x, dim, c.ir.constant(std::move(idx))});
  }
  return one(x);
}

// bitwise and / or of bools are the logical ops.
template <const char* Logical>
std::vector<TensorRef> bitwise(OpCall& c) {
  if (c.meta_of(c.tensor(0)).dtype == DType::Bool) return one(c.ir.call(Logical, {c.tensor(0), c.tensor(1)}));
  return binary(c);
}

// et_vk.rms_norm(x, weight, eps): over the last dim.
std::vector<TensorRef> et_rms_norm(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const Shape& s = c.meta_of(x).shape;
  if (s.empty()) c.fail("needs an input of rank 1 or more");
  return one(c.ir.call("aten.rms_norm.default", {x, IntList{s.back()}, c.args.at(1), c.scalar(2)}));
}

// quantized_decomposed.{quantize,dequantize}_per_tensor.default(input,
// scale, zero_point, quant_min, quant_max, dtype): the .tensor forms, the
// scalars as 0-d constants (the zero point in the quantized dtype).
template <bool Quantize>
std::vector<TensorRef> per_tensor(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const DType q = Quantize ? c.outs.at(0).dtype : c.meta_of(x).dtype;
  const DType f = Quantize ? c.meta_of(x).dtype : c.outs.at(0).dtype;
  ValueList args = c.args;
  args[1] = c.constant(f, {}, c.scalar(1));
  args[2] = c.constant(q, {}, c.scalar(2));
  args.resize(std::max<size_t>(args.size(), 6));
  args[5] = scalar_type_code(q);
  if (!Quantize) {
    args.resize(7);
    args[6] = scalar_type_code(f);
  }
  return one(c.ir.call(Quantize ? "quantized_decomposed.quantize_per_tensor.tensor"
                                : "quantized_decomposed.dequantize_per_tensor.tensor",
                       args));
}

// et_vk.conv_with_clamp(input, weight, bias, stride, padding, dilation,
// transposed, output_padding, groups, output_min, output_max).
std::vector<TensorRef> conv_with_clamp(OpCall& c) {
  if (c.args.size() < 11) c.fail(fmt::format("needs 11 arguments, got {}", c.args.size()));
  const ValueList conv(c.args.begin(), c.args.begin() + 9);
  const TensorRef y = c.ir.call("aten.convolution.default", conv);
  return one(c.ir.call("aten.clamp.default", {y, c.args[9], c.args[10]}));
}

// copy(self, src): src broadcast to self's shape.
std::vector<TensorRef> copy(OpCall& c) {
  const TensorRef src = c.tensor(1);
  const Meta m{c.outs.at(0).dtype, c.out_shape()};
  TensorRef y = c.ir.call("aten.expand.default", {src, IntList(m.shape.begin(), m.shape.end())});
  if (c.meta_of(src).dtype != m.dtype) y = c.ir.call("aten._to_copy.default", {y, scalar_type_code(m.dtype)});
  return one(y);
}

// as_strided_copy(self, size, stride, storage_offset): where the strides
// read the input's elements in order (a view), or its dims in another
// order (a permute), at offset 0; other strides are refused by name.
std::vector<TensorRef> as_strided(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const Shape in = c.meta_of(x).shape;
  if (c.args.size() < 3 || !c.args[1].is_int_list() || !c.args[2].is_int_list()) c.fail("needs size and stride lists");
  const IntList size = std::get<IntList>(c.args[1].v), stride = std::get<IntList>(c.args[2].v);
  const int64_t offset = c.is_none(3) ? 0 : c.integer(3);
  if (size.size() != stride.size() || offset != 0) c.fail("only offset 0, with one stride per size, is supported");
  // Contiguous strides of a shape (size-1 dims take any stride).
  const auto contiguous = [](const IntList& s) {
    IntList st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * std::max<int64_t>(s[i], 1);
    return st;
  };
  if (numel(Shape(size.begin(), size.end())) == numel(in)) {
    const IntList want = contiguous(size);
    bool in_order = true;
    for (size_t i = 0; i < size.size(); ++i) in_order = in_order && (size[i] == 1 || stride[i] == want[i]);
    if (in_order) return one(view(c, x, size));
    // A permute: each dim of size is a dim of the input, by its stride.
    const IntList ist = contiguous(IntList(in.begin(), in.end()));
    if (size.size() == in.size()) {
      IntList perm;
      std::vector<bool> used(in.size(), false);
      for (size_t i = 0; i < size.size(); ++i) {
        for (size_t j = 0; j < in.size(); ++j) {
          if (!used[j] && in[j] == size[i] && (size[i] == 1 || ist[j] == stride[i])) {
            used[j] = true;
            perm.push_back(int64_t(j));
            break;
          }
        }
      }
      if (perm.size() == size.size()) return one(c.ir.call("aten.permute.default", {x, perm}));
    }
  }
  c.fail(fmt::format("strides [{}] for sizes [{}] of a {} input are neither a view nor a permute", fmt::join(stride, ", "),
                     fmt::join(size, ", "), shape_str(in)));
}

// any(self) / any.dim(self, dim, keepdim) / any.dims(self, dims, keepdim):
// whether a value is nonzero, as the max of (self != 0) as int32.
std::vector<TensorRef> any(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const Shape& s = c.meta_of(x).shape;
  IntList dims;
  bool keep = false;
  if (!c.is_none(1)) {
    if (c.args[1].is_int()) dims = {c.integer(1)};
    else if (c.args[1].is_int_list()) dims = std::get<IntList>(c.args[1].v);
    if (c.args.size() > 2 && c.args[2].is_bool()) keep = std::get<bool>(c.args[2].v);
  }
  if (dims.empty()) {
    for (size_t i = 0; i < s.size(); ++i) dims.push_back(int64_t(i));
  }
  const TensorRef nz = c.ir.call("aten.ne.Tensor", {x, c.constant(c.meta_of(x).dtype, {}, 0.0)});
  const TensorRef as_int = c.ir.call("aten._to_copy.default", {nz, scalar_type_code(DType::I32)});
  TensorRef m = s.empty() ? as_int : c.ir.call("aten.amax.default", {as_int, dims, keep});
  m = c.ir.call("aten._to_copy.default", {m, scalar_type_code(DType::Bool)});
  if (c.out_shape().empty() && !s.empty()) m = view(c, m, IntList{});
  return one(m);
}

// et_vk.sdpa(q, k, v, attn_mask?, scale?): softmax(q k^T * scale + mask) v
// over the last two dims, as wgnn.attention reading the contiguous inputs
// through views ([..., L, D] as [B, H, L, D]; rank 2 to 4), the mask
// broadcast with zero strides.
std::vector<TensorRef> sdpa(OpCall& c) {
  const TensorRef q = c.tensor(0), k = c.tensor(1), v = c.tensor(2);
  const Shape qs = c.meta_of(q).shape, ks = c.meta_of(k).shape, vs = c.meta_of(v).shape;
  if (qs.size() < 2 || qs.size() > 4 || ks.size() != qs.size() || vs.size() != qs.size()) {
    c.fail(fmt::format("q, k and v must have one rank of 2 to 4, got {}, {}, {}", shape_str(qs), shape_str(ks),
                       shape_str(vs)));
  }
  // [B, H, rows, cols] of a shape of rank 2 to 4.
  const auto bh = [](const Shape& s) {
    std::array<int64_t, 4> d{1, 1, 1, 1};
    for (size_t i = 0; i < s.size(); ++i) d[4 - s.size() + i] = s[i];
    return d;
  };
  const auto contiguous_view = [](const std::array<int64_t, 4>& d) {
    return IntList{0, d[0], d[1], d[2], d[3], d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  };
  const auto qd = bh(qs), kd = bh(ks), vd = bh(vs);
  const double scale = c.is_none(4) ? 1.0 / std::sqrt(double(qd[3])) : c.scalar(4);
  Value mask = None{};
  IntList mask_view;
  if (!c.is_none(3)) {
    const TensorRef m = c.tensor(3);
    const Shape ms = c.meta_of(m).shape;
    if (ms.size() > 4) c.fail(fmt::format("the mask's rank is {}; at most 4", ms.size()));
    if (c.meta_of(m).dtype != DType::F32 && c.meta_of(m).dtype != DType::F16) {
      c.fail(fmt::format("the mask is {}; an additive float mask is supported", dtype_name(c.meta_of(m).dtype)));
    }
    const auto md = bh(ms);
    const std::array<int64_t, 4> full{qd[0], qd[1], qd[2], kd[2]};
    std::array<int64_t, 4> st{md[1] * md[2] * md[3], md[2] * md[3], md[3], 1};
    mask_view = {0};
    for (size_t i = 0; i < 4; ++i) {
      if (md[i] != full[i] && md[i] != 1) {
        c.fail(fmt::format("the mask {} does not broadcast to [{}, {}, {}, {}]", shape_str(ms), full[0], full[1],
                           full[2], full[3]));
      }
      mask_view.push_back(md[i] == 1 && full[i] != 1 ? 0 : st[i]);
    }
    mask = m;
  }
  const std::array<int64_t, 4> od{qd[0], qd[1], qd[2], vd[3]};
  return one(c.ir.call("wgnn.attention.default",
                       {q, k, v, mask, scale, contiguous_view(qd), contiguous_view(kd), contiguous_view(vd), mask_view,
                        out_shape(c), IntList{0, od[1] * od[2] * od[3], od[2] * od[3], od[3], 1}}));
}

// et_vk.apply_rotary_emb(xq [B, S, H, D], xk [B, S, Hk, D], freqs_cos
// [S, D/2], freqs_sin [S, D/2]) -> (xq, xk) rotated: each pair (x[2k],
// x[2k+1]) of a head by position s's angle k (ExecuTorch's llama rope),
//   out[2k] = x[2k] cos - x[2k+1] sin, out[2k+1] = x[2k] sin + x[2k+1] cos.
std::vector<TensorRef> rotary_pairs(OpCall& c) {
  const TensorRef cs = c.tensor(2), sn = c.tensor(3);
  std::vector<TensorRef> out;
  for (size_t i = 0; i < 2; ++i) {
    const TensorRef x = c.tensor(i);
    const Shape xs = c.meta_of(x).shape;
    if (xs.size() != 4 || xs[3] % 2 != 0) c.fail(fmt::format("x must be [B, S, H, D] with D even, got {}", shape_str(xs)));
    const int64_t b = xs[0], n = xs[1], h = xs[2], half = xs[3] / 2;
    for (TensorRef f : {cs, sn}) {
      if (numel(c.meta_of(f).shape) != n * half) {
        c.fail(fmt::format("the frequencies have shape {}; x {} needs [{}, {}]", shape_str(c.meta_of(f).shape),
                           shape_str(xs), n, half));
      }
    }
    (void)b;
    (void)h;
    // One dispatch: cos and sin [1, S, 1, D/2] over the pairs of x.
    const TensorRef cv = view(c, cs, IntList{1, n, 1, half}), sv = view(c, sn, IntList{1, n, 1, half});
    out.push_back(c.ir.call("wgnn.rotary_pairs.default", {x, cv, sv}));
  }
  return out;
}

// sdpa_with_kv_cache(q [B, S, H, D], k, v [B, S, Hk, D], k_cache, v_cache
// [B, max, Hk, D], start_pos, seq_len, attn_mask, dropout_p, is_causal,
// scale) (ExecuTorch's llama op): k and v written into the caches at
// positions start_pos .. start_pos + S - 1, then q attends to every cached
// position up to its own (causal), head h to cache head h / (H / Hk).
// start_pos is read on the GPU: the front end passes argument 5 as the
// [S] positions (pte/program.cpp), so one plan serves every position.
// Returns the output, the two caches as written (pte/aten.h,
// mutated_args) and the mask (for the front end to pass to the next layer:
// argument 11).
std::vector<TensorRef> sdpa_with_kv_cache(OpCall& c) {
  const TensorRef q = c.tensor(0), k = c.tensor(1), v = c.tensor(2), kc = c.tensor(3), vc = c.tensor(4);
  const TensorRef pos = c.tensor(5);
  const Shape qs = c.meta_of(q).shape, ks = c.meta_of(k).shape, cs = c.meta_of(kc).shape;
  if (qs.size() != 4 || ks.size() != 4 || cs.size() != 4 || c.meta_of(v).shape != ks || c.meta_of(vc).shape != cs ||
      ks[0] != qs[0] || ks[1] != qs[1] || ks[3] != qs[3] || cs[0] != qs[0] || cs[2] != ks[2] || cs[3] != qs[3] ||
      qs[2] % ks[2] != 0) {
    c.fail(fmt::format("q {}, k and v {}, caches {}: expected [B, S, H, D], [B, S, Hk, D], [B, max, Hk, D] with H a "
                       "multiple of Hk",
                       shape_str(qs), shape_str(ks), shape_str(cs)));
  }
  if (!c.is_none(7)) c.fail("an attention mask is not supported (the causal one is)");
  if (c.args.size() > 9 && c.args[9].is_bool() && !std::get<bool>(c.args[9].v)) c.fail("is_causal False is not supported");
  if (c.args.size() > 8 && !c.is_none(8) && c.scalar(8) != 0.0) c.fail("dropout is not supported");
  const int64_t b = qs[0], s = qs[1], h = qs[2], d = qs[3], hk = ks[2], max_len = cs[1], g = h / hk;
  const double scale = c.args.size() > 10 && !c.is_none(10) ? c.scalar(10) : 1.0 / std::sqrt(double(d));
  // The caches written at the positions (a scatter along the position dim).
  const TensorRef at = c.ir.call("aten.expand.default", {view(c, pos, IntList{1, s, 1, 1}), IntList{b, s, hk, d}});
  const TensorRef kn = c.ir.call("aten.scatter.src", {kc, int64_t(1), at, k});
  const TensorRef vn = c.ir.call("aten.scatter.src", {vc, int64_t(1), at, v});
  // Each cache head repeated for its H / Hk query heads: [B, max, H, D].
  const auto heads = [&](TensorRef t) {
    if (g == 1) return t;
    const TensorRef e = c.ir.call("aten.expand.default", {view(c, t, IntList{b, max_len, hk, 1, d}),
                                                          IntList{b, max_len, hk, g, d}});
    return view(c, e, IntList{b, max_len, h, d});
  };
  const TensorRef kh = heads(kn), vh = heads(vn);
  // Causal over absolute positions: query i sees slots j <= pos[i] (the
  // additive mask [S, max]; argument 11, where the front end passes the
  // one it made for an earlier layer at the same positions).
  TensorRef mask;
  if (c.args.size() > 11 && c.args[11].is_tensor()) {
    mask = c.tensor(11);
  } else {
    HostTensor slots(c.meta_of(pos).dtype, {1, max_len});
    for (int64_t j = 0; j < max_len; ++j) put(slots, j, double(j));
    const TensorRef allowed =
        c.ir.call("aten.le.Tensor", {c.ir.constant(std::move(slots)), view(c, pos, IntList{s, 1})});
    mask = c.ir.call("aten.where.self", {allowed, c.constant(DType::F32, {}, 0.0),
                                         c.constant(DType::F32, {}, -std::numeric_limits<double>::infinity())});
  }
  const IntList qv{0, b, h, s, d, s * h * d, d, h * d, 1};
  const IntList kvv{0, b, h, max_len, d, max_len * h * d, d, h * d, 1};
  const TensorRef o = c.ir.call("wgnn.attention.default",
                                {q, kh, vh, mask, scale, qv, kvv, kvv, IntList{0, 0, 0, max_len, 1},
                                 IntList{b, s, h, d}, IntList{0, s * h * d, d, h * d, 1}});
  return {o, kn, vn, mask};
}

// et_vk.apply_rotary_emb_interleaved(x [B, N, C], freqs_cis (N * C values:
// (cos, sin) pairs)): (real, imag) pairs along C rotated,
//   out[2k] = x[2k] cos[k] - x[2k+1] sin[k], out[2k+1] = x[2k] sin[k] + x[2k+1] cos[k].
std::vector<TensorRef> rotary_interleaved(OpCall& c) {
  const TensorRef x = c.tensor(0), f = c.tensor(1);
  const Shape xs = c.meta_of(x).shape;
  if (xs.size() != 3 || xs[2] % 2 != 0) c.fail(fmt::format("x must be [B, N, C] with C even, got {}", shape_str(xs)));
  const int64_t b = xs[0], n = xs[1], h = xs[2] / 2;
  if (numel(c.meta_of(f).shape) != n * 2 * h) {
    c.fail(fmt::format("freqs_cis has {} values; x {} needs {}", numel(c.meta_of(f).shape), shape_str(xs), n * 2 * h));
  }
  const TensorRef xv = view(c, x, IntList{b, n, h, 2});
  const TensorRef fv = view(c, f, IntList{n, h, 2});
  const auto part = [&](TensorRef t, int64_t dim, int64_t i) {
    return c.ir.call("aten.slice.Tensor", {t, dim, i, i + 1, int64_t(1)});
  };
  const TensorRef re = part(xv, 3, 0), im = part(xv, 3, 1), cs = part(fv, 2, 0), sn = part(fv, 2, 1);
  const auto mul = [&](TensorRef a, TensorRef b2) { return c.ir.call("aten.mul.Tensor", {a, b2}); };
  const TensorRef out_re = c.ir.call("aten.sub.Tensor", {mul(re, cs), mul(im, sn)});
  const TensorRef out_im = c.ir.call("aten.add.Tensor", {mul(re, sn), mul(im, cs)});
  const TensorRef both = c.ir.call("aten.cat.default", {ValueList{out_re, out_im}, int64_t(3)});
  return one(view(c, both, out_shape(c)));
}

// ---------------------------------------------------------------------------
// The delegate's quantized ops (et_vk.q8ta_*, et_vk.linear_*), with the
// semantics of their reference implementations in ExecuTorch's
// backends/vulkan/custom_ops_lib.py: int8 activations dequantized per
// tensor, the float op, and the result quantized again (round half to
// even, clamped to [-128, 127]); the weights (constants of the delegate,
// int8 per output channel, or 4 bits in bytes) are dequantized to float32
// once, at load.

const HostTensor& constant_arg(OpCall& c, size_t i, const char* what) {
  const TensorRef t = c.tensor(i);
  const HostTensor* h = c.ir.model_values(t);
  if (!h) c.fail(fmt::format("{} (argument {}) must be a constant of the program", what, i));
  return *h;
}

TensorRef dequantized(OpCall& c, TensorRef x, double scale, int64_t zero_point) {
  const DType q = c.meta_of(x).dtype;
  if (q != DType::I8) c.fail(fmt::format("an int8 input was expected, got {}", dtype_name(q)));
  return c.ir.call("quantized_decomposed.dequantize_per_tensor.tensor",
                   {x, c.constant(DType::F32, {}, scale), c.constant(DType::I8, {}, double(zero_point)), int64_t(-128),
                    int64_t(127), scalar_type_code(DType::I8), scalar_type_code(DType::F32)});
}

// round(y * (1 / scale)) + zero_point, clamped: multiplied by the inverse in
// float32, as quantized_decomposed.quantize_per_tensor computes it (a
// division rounds differently now and then).
TensorRef quantized(OpCall& c, TensorRef y, double scale, int64_t zero_point) {
  if (!(scale > 0) || !std::isfinite(scale)) c.fail(fmt::format("the output scale {} is not a positive number", scale));
  const TensorRef scaled = c.ir.call("aten.mul.Tensor", {y, c.constant(DType::F32, {}, 1.0 / scale)});
  return c.ir.call("quantized_decomposed.quantize_per_tensor.tensor",
                   {scaled, c.constant(DType::F32, {}, 1.0), c.constant(DType::I8, {}, double(zero_point)),
                    int64_t(-128), int64_t(127), scalar_type_code(DType::I8)});
}

// The activation argument ("none" or "relu").
TensorRef activated(OpCall& c, TensorRef y, size_t i) {
  const std::string act = i < c.args.size() && std::holds_alternative<std::string>(c.args[i].v)
                              ? std::get<std::string>(c.args[i].v)
                              : std::string("none");
  if (act == "relu") return c.ir.call("aten.relu.default", {y});
  if (act != "none" && !act.empty()) c.fail(fmt::format("activation '{}' is not one of none, relu", act));
  return y;
}

// The first n values of a float constant (the delegate pads output channels
// to a multiple of 4), or None.
Value float_prefix(OpCall& c, size_t i, int64_t n, const char* what) {
  if (c.is_none(i)) return Value();
  const HostTensor& b = constant_arg(c, i, what);
  if (b.numel() < n) c.fail(fmt::format("{} has {} values, {} are needed", what, b.numel(), n));
  HostTensor out(DType::F32, {n});
  for (int64_t k = 0; k < n; ++k) out.as<float>()[k] = float(b.get_double(size_t(k)));
  return Value(c.ir.constant(std::move(out)));
}

std::vector<double> scales_of(OpCall& c, size_t i, int64_t n, const char* what) {
  const HostTensor& s = constant_arg(c, i, what);
  if (s.numel() < n) c.fail(fmt::format("{} has {} values, {} are needed", what, s.numel(), n));
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[size_t(k)] = s.get_double(size_t(k));
  return v;
}

// Weights [N, K'] int8 with one scale per row, the first k of each row:
// float32 [N, k].
TensorRef rows_dequantized(OpCall& c, size_t wi, size_t si, int64_t k) {
  const HostTensor& w = constant_arg(c, wi, "the weights");
  if (w.shape.size() != 2 || w.shape[1] < k) {
    c.fail(fmt::format("the weights must be [N, K] with K >= {}, got {}", k, shape_str(w.shape)));
  }
  const int64_t n = w.shape[0], stride = w.shape[1];
  const std::vector<double> s = scales_of(c, si, n, "the weight scales");
  HostTensor out(DType::F32, {n, k});
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      out.as<float>()[r * k + j] = float(double(w.get_int(size_t(r * stride + j))) * s[size_t(r)]);
    }
  }
  return c.ir.constant(std::move(out));
}

TensorRef linear_of(OpCall& c, TensorRef x, TensorRef w, const Value& bias) {
  return c.ir.call("aten.linear.default", {x, w, bias});
}

// q8ta_relu(input, input_scale, input_zero_point, output_scale, output_zero_point)
std::vector<TensorRef> q8ta_relu(OpCall& c) {
  const TensorRef y = c.ir.call("aten.relu.default", {dequantized(c, c.tensor(0), c.scalar(1), c.integer(2))});
  return one(quantized(c, y, c.scalar(3), c.integer(4)));
}

// q8ta_add(a, b, a_scale, a_zero_point, b_scale, b_zero_point, output_scale,
// output_zero_point, alpha): a + alpha * b.
std::vector<TensorRef> q8ta_add(OpCall& c) {
  const TensorRef a = dequantized(c, c.tensor(0), c.scalar(2), c.integer(3));
  TensorRef b = dequantized(c, c.tensor(1), c.scalar(4), c.integer(5));
  const double alpha = c.scalar(8);
  if (alpha != 1.0) b = c.ir.call("aten.mul.Tensor", {b, c.constant(DType::F32, {}, alpha)});
  return one(quantized(c, c.ir.call("aten.add.Tensor", {a, b}), c.scalar(6), c.integer(7)));
}

// q8ta_pixel_shuffle(input, input_scale, input_zero_point, output_inv_scale,
// output_zero_point, upscale_factor).
std::vector<TensorRef> q8ta_pixel_shuffle(OpCall& c) {
  const TensorRef x = dequantized(c, c.tensor(0), c.scalar(1), c.integer(2));
  const TensorRef y = shuffled_pixels(c, x, c.meta_of(c.tensor(0)).shape, c.integer(5));
  const double inv = c.scalar(3);
  if (!(inv > 0)) c.fail(fmt::format("the output's inverse scale {} is not a positive number", inv));
  return one(quantized(c, y, 1.0 / inv, c.integer(4)));
}

// q8ta_linear / q8ta_linear_gemv(x, input_scale, input_zero_point, weights
// [N, K], weight_sums, weight_scales, output_scale, output_zero_point, bias,
// activation).
std::vector<TensorRef> q8ta_linear(OpCall& c) {
  const TensorRef x = dequantized(c, c.tensor(0), c.scalar(1), c.integer(2));
  const Shape& xs = c.meta_of(c.tensor(0)).shape;
  const int64_t n = c.out_shape().back();
  const TensorRef w = rows_dequantized(c, 3, 5, xs.back());
  const Value bias = float_prefix(c, 8, n, "the bias");
  const TensorRef y = activated(c, linear_of(c, x, w, bias), 9);
  return one(quantized(c, y, c.scalar(6), c.integer(7)));
}

// linear_q8ta_q8csw(x int8, input_scale, input_zero_point, weights [N, K],
// weight_sums, weight_scales, bias): a float result.
std::vector<TensorRef> linear_q8ta_q8csw(OpCall& c) {
  TensorRef x = c.tensor(0);
  if (c.meta_of(x).dtype == DType::I8) x = dequantized(c, x, c.scalar(1), c.integer(2));
  const int64_t n = c.out_shape().back();
  const TensorRef w = rows_dequantized(c, 3, 5, c.meta_of(c.tensor(0)).shape.back());
  return one(linear_of(c, x, w, float_prefix(c, 6, n, "the bias")));
}

// linear_qcs4w(x, weights [N, K/2] uint8, scales [N]): two 4-bit values a
// byte (the even input's in the high nibble), stored +8, as the Vulkan
// backend's fuse_quantized_ops pass packs them; one scale per row.
std::vector<TensorRef> linear_qcs4w(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const int64_t k = c.meta_of(x).shape.back();
  const HostTensor& w = constant_arg(c, 1, "the weights");
  if (w.shape.size() != 2 || w.shape[1] * 2 < k) {
    c.fail(fmt::format("the weights must be [N, K/2] bytes for K = {}, got {}", k, shape_str(w.shape)));
  }
  const int64_t n = w.shape[0], stride = w.shape[1];
  const std::vector<double> s = scales_of(c, 2, n, "the scales");
  HostTensor out(DType::F32, {n, k});
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const auto byte = uint8_t(w.get_int(size_t(r * stride + j / 2)));
      const int q = (j % 2 == 0 ? byte >> 4 : byte & 0x0F) - 8;
      out.as<float>()[r * k + j] = float(double(q) * s[size_t(r)]);
    }
  }
  return one(linear_of(c, x, c.ir.constant(std::move(out)), Value()));
}

// torchao.choose_qparams_affine(input, mapping_type, block_size,
// target_dtype, quant_min, quant_max, eps, scale_dtype, zero_point_dtype,
// keepdim): a scale and zero point per block, blocks that span whole dims
// (one per row for dynamic activation quantization). ASYMMETRIC:
//   scale = max((max(x, 0) - min(x, 0)) / (qmax - qmin), eps),
//   zero_point = clamp(qmin - round(min(x, 0) / scale), qmin, qmax);
// SYMMETRIC: scale = max(max(|min(x, 0)|, max(x, 0)) / ((qmax - qmin) / 2),
// eps), zero_point = (qmax + qmin + 1) / 2.
std::vector<TensorRef> choose_qparams_affine(OpCall& c) {
  const TensorRef x = c.tensor(0);
  const Shape s = c.meta_of(x).shape;
  const std::string mapping =
      std::holds_alternative<std::string>(c.args.at(1).v) ? std::get<std::string>(c.args[1].v) : std::string();
  if (!c.args.at(2).is_int_list() || std::get<IntList>(c.args[2].v).size() != s.size()) {
    c.fail(fmt::format("block_size must list one size per dim of the {} input", shape_str(s)));
  }
  const IntList block = std::get<IntList>(c.args[2].v);
  IntList dims;
  for (size_t i = 0; i < s.size(); ++i) {
    if (block[i] == s[i] && s[i] > 1) {
      dims.push_back(int64_t(i));
    } else if (block[i] != 1 && block[i] != s[i]) {
      c.fail(fmt::format("block size {} of dim {} (of {}) is neither 1 nor the whole dim: not supported", block[i],
                         i, s[i]));
    }
  }
  const double qmin = c.is_none(4) ? -128.0 : c.scalar(4), qmax = c.is_none(5) ? 127.0 : c.scalar(5);
  const double eps = c.is_none(6) ? double(std::numeric_limits<float>::min()) : c.scalar(6);
  if (c.outs.size() != 2) c.fail("needs two results (scale, zero point)");
  const TensorRef zero = c.constant(DType::F32, {}, 0.0);
  TensorRef lo = dims.empty() ? x : c.ir.call("aten.amin.default", {x, dims, false});
  TensorRef hi = dims.empty() ? x : c.ir.call("aten.amax.default", {x, dims, false});
  lo = c.ir.call("aten.minimum.default", {lo, zero});
  hi = c.ir.call("aten.maximum.default", {hi, zero});
  TensorRef scale, zp;
  if (mapping == "ASYMMETRIC") {
    scale = c.ir.call("aten.div.Tensor", {c.ir.call("aten.sub.Tensor", {hi, lo}), c.constant(DType::F32, {}, qmax - qmin)});
    scale = c.ir.call("aten.clamp.default", {scale, eps, Value()});
    const TensorRef r = c.ir.call("aten.round.default", {c.ir.call("aten.div.Tensor", {lo, scale})});
    zp = c.ir.call("aten.sub.Tensor", {c.constant(DType::F32, {}, qmin), r});
    zp = c.ir.call("aten.clamp.default", {zp, qmin, qmax});
  } else if (mapping == "SYMMETRIC") {
    const TensorRef m = c.ir.call("aten.maximum.default", {c.ir.call("aten.neg.default", {lo}), hi});
    scale = c.ir.call("aten.div.Tensor", {m, c.constant(DType::F32, {}, (qmax - qmin) / 2)});
    scale = c.ir.call("aten.clamp.default", {scale, eps, Value()});
    zp = c.ir.call("aten.mul.Tensor", {scale, c.constant(DType::F32, {}, 0.0)});
    zp = c.ir.call("aten.add.Tensor", {zp, c.constant(DType::F32, {}, std::floor((qmax + qmin + 1) / 2))});
  } else {
    c.fail(fmt::format("mapping type '{}' is not one of ASYMMETRIC, SYMMETRIC", mapping));
  }
  const auto as = [&](TensorRef t, size_t i) {
    t = view(c, t, out_shape(c, i));
    if (c.outs[i].dtype != DType::F32) t = c.ir.call("aten._to_copy.default", {t, scalar_type_code(c.outs[i].dtype)});
    return t;
  };
  return {as(scale, 0), as(zp, 1)};
}

// 4-bit weights [N, K/2] (argument wi) with a scale per group of inputs
// ([K/group, N], argument si; the group size argument gi) as float32 [N, K]:
// two values a byte, the even input's in the low nibble, stored +8, as the
// Vulkan backend's pack_4bit_weight_tensor writes them.
std::pair<TensorRef, int64_t> q4gsw_weights(OpCall& c, size_t wi, size_t si, size_t gi) {
  const int64_t k = c.meta_of(c.tensor(0)).shape.back();
  const HostTensor& w = constant_arg(c, wi, "the weights");
  const HostTensor& s = constant_arg(c, si, "the weight scales");
  const int64_t group = c.integer(gi);
  if (w.shape.size() != 2 || w.shape[1] * 2 < k || group < 1) {
    c.fail(fmt::format("the weights must be [N, K/2] bytes for K = {} and a group size >= 1, got {} and {}", k,
                       shape_str(w.shape), group));
  }
  const int64_t n = w.shape[0], stride = w.shape[1];
  const int64_t groups = (k + group - 1) / group;
  if (s.shape.size() != 2 || s.shape[0] < groups || s.shape[1] < n) {
    c.fail(fmt::format("the weight scales must be [K/group, N] = [{}, {}] at least, got {}", groups, n,
                       shape_str(s.shape)));
  }
  HostTensor out(DType::F32, {n, k});
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const auto byte = uint8_t(w.get_int(size_t(r * stride + j / 2)));
      const int q = (j % 2 == 0 ? byte & 0x0F : byte >> 4) - 8;
      out.as<float>()[r * k + j] = float(double(q) * s.get_double(size_t((j / group) * s.shape[1] + r)));
    }
  }
  return {c.ir.constant(std::move(out)), n};
}

// linear_dq8ca_q4gsw(x, input_scale, input_zero_point, weights [N, K/2]
// uint8, weight_sums, weight_scales [K/group, N], group_size, bias): x
// quantized to int8 with its rows' scales and zero points and dequantized
// again (the dynamic activation quantization), times the 4-bit weights
// (q4gsw_weights).
std::vector<TensorRef> linear_dq8ca_q4gsw(OpCall& c) {
  TensorRef x = c.tensor(0);
  if (c.args.at(1).is_tensor() && c.args.at(2).is_tensor()) {
    const Shape xs = c.meta_of(x).shape;
    IntList col(xs.begin(), xs.end());
    col.back() = 1;
    const TensorRef scale = view(c, c.tensor(1), col);
    TensorRef zp = view(c, c.tensor(2), col);
    if (c.meta_of(c.tensor(2)).dtype != DType::F32) zp = c.ir.call("aten._to_copy.default", {zp, scalar_type_code(DType::F32)});
    const TensorRef inv = c.ir.call("aten.div.Tensor", {c.constant(DType::F32, {}, 1.0), scale});
    TensorRef q = c.ir.call("aten.round.default", {c.ir.call("aten.mul.Tensor", {x, inv})});
    q = c.ir.call("aten.clamp.default", {c.ir.call("aten.add.Tensor", {q, zp}), -128.0, 127.0});
    x = c.ir.call("aten.mul.Tensor", {c.ir.call("aten.sub.Tensor", {q, zp}), scale});
  }
  const auto [w, n] = q4gsw_weights(c, 3, 5, 6);
  return one(linear_of(c, x, w, float_prefix(c, 7, n, "the bias")));
}

// linear_q4gsw(x, weights, weight_scales, group_size, bias): the same
// weights, a float x.
std::vector<TensorRef> linear_q4gsw(OpCall& c) {
  const auto [w, n] = q4gsw_weights(c, 1, 2, 3);
  return one(linear_of(c, c.tensor(0), w, float_prefix(c, 4, n, "the bias")));
}

// q8ta_conv2d / q8ta_conv2d_pw / q8ta_conv2d_dw / q8ta_conv2d_transposed(x,
// input_scale, input_zero_point, weights, weight_sums, weight_scales,
// output_scale, output_zero_point, bias, kernel_size, stride, padding,
// [output_padding,] dilation, groups, activation). Weights as the Vulkan
// backend's quantized-convolution pattern lays them out: [OC, K'] with K' >=
// kh * kw * IC/groups in (kh, kw, ic) order (transposed: row o is output
// channel o), depthwise [kh, kw, OC].
enum class QConv { Regular, Depthwise, Transposed };

template <QConv Kind>
std::vector<TensorRef> q8ta_conv2d(OpCall& c) {
  constexpr bool transposed = Kind == QConv::Transposed;
  const size_t at_dilation = transposed ? 13 : 12, at_groups = at_dilation + 1, at_act = at_groups + 1;
  const TensorRef x = dequantized(c, c.tensor(0), c.scalar(1), c.integer(2));
  const Shape& xs = c.meta_of(c.tensor(0)).shape;
  if (xs.size() != 4) c.fail(fmt::format("needs an (N, C, H, W) input, got {}", shape_str(xs)));
  if (!c.args.at(9).is_int_list() || std::get<IntList>(c.args[9].v).size() != 2) c.fail("needs a kernel size [kh, kw]");
  const IntList ks = std::get<IntList>(c.args[9].v);
  const int64_t kh = ks[0], kw = ks[1], groups = c.integer(at_groups);
  if (groups < 1 || xs[1] % groups != 0) c.fail(fmt::format("groups {} do not divide {} channels", groups, xs[1]));
  const int64_t icg = xs[1] / groups;
  const HostTensor& w = constant_arg(c, 3, "the weights");
  int64_t oc = 0;
  HostTensor wf;
  if constexpr (Kind == QConv::Depthwise) {
    if (w.shape.size() != 3 || w.shape[0] != kh || w.shape[1] != kw) {
      c.fail(fmt::format("depthwise weights must be [kh, kw, OC] = [{}, {}, OC], got {}", kh, kw, shape_str(w.shape)));
    }
    oc = w.shape[2];
    const std::vector<double> s = scales_of(c, 5, oc, "the weight scales");
    wf = HostTensor(DType::F32, {oc, 1, kh, kw});
    for (int64_t o = 0; o < oc; ++o) {
      for (int64_t i = 0; i < kh * kw; ++i) {
        wf.as<float>()[o * kh * kw + i] = float(double(w.get_int(size_t(i * oc + o))) * s[size_t(o)]);
      }
    }
  } else {
    const int64_t kdim = icg * kh * kw;
    if (w.shape.size() != 2 || w.shape[1] < kdim) {
      c.fail(fmt::format("the weights must be [OC, K] with K >= {}, got {}", kdim, shape_str(w.shape)));
    }
    oc = w.shape[0];
    if (oc % groups != 0) c.fail(fmt::format("groups {} do not divide {} output channels", groups, oc));
    const std::vector<double> s = scales_of(c, 5, oc, "the weight scales");
    const int64_t stride = w.shape[1];
    if constexpr (transposed) {
      // (OC, icg, kh, kw) -> (groups * icg, OC / groups, kh, kw), the
      // scale of output channel o on axis 1.
      const int64_t ocg = oc / groups;
      wf = HostTensor(DType::F32, {groups * icg, ocg, kh, kw});
      for (int64_t o = 0; o < oc; ++o) {
        const int64_t g = o / ocg, og = o % ocg;
        for (int64_t i = 0; i < icg; ++i) {
          for (int64_t p = 0; p < kh * kw; ++p) {
            wf.as<float>()[((g * icg + i) * ocg + og) * kh * kw + p] =
                float(double(w.get_int(size_t(o * stride + p * icg + i))) * s[size_t(o)]);
          }
        }
      }
    } else {
      wf = HostTensor(DType::F32, {oc, icg, kh, kw});
      for (int64_t o = 0; o < oc; ++o) {
        for (int64_t i = 0; i < icg; ++i) {
          for (int64_t p = 0; p < kh * kw; ++p) {
            wf.as<float>()[(o * icg + i) * kh * kw + p] =
                float(double(w.get_int(size_t(o * stride + p * icg + i))) * s[size_t(o)]);
          }
        }
      }
    }
  }
  const Value bias = float_prefix(c, 8, oc, "the bias");
  const Value output_padding = transposed ? c.args.at(12) : Value(IntList{0, 0});
  const TensorRef y = c.ir.call("aten.convolution.default",
                                {x, c.ir.constant(std::move(wf)), bias, c.args.at(10), c.args.at(11),
                                 c.args.at(at_dilation), transposed, output_padding, groups});
  return one(quantized(c, activated(c, y, at_act), c.scalar(6), c.integer(7)));
}

// et_vk.grid_priors(self, stride, offset): the anchor points of an H x W
// feature map (its last two dims), [H * W, 2] of ((j + offset) * stride,
// (i + offset) * stride) in row-major order: a constant of the shape.
std::vector<TensorRef> grid_priors(OpCall& c) {
  const Shape& s = c.meta_of(c.tensor(0)).shape;
  if (s.size() < 2) c.fail(fmt::format("needs an input of rank 2 or more, got {}", shape_str(s)));
  const int64_t h = s[s.size() - 2], w = s[s.size() - 1];
  const double stride = c.scalar(1), offset = c.scalar(2);
  const Meta m{c.outs.at(0).dtype, c.out_shape()};
  if (m.shape != Shape{h * w, 2}) c.fail(fmt::format("the result is declared {}, expected [{}, 2]", shape_str(m.shape), h * w));
  HostTensor t(m.dtype, m.shape);
  for (int64_t i = 0; i < h; ++i) {
    for (int64_t j = 0; j < w; ++j) {
      put(t, 2 * (i * w + j), (double(j) + offset) * stride);
      put(t, 2 * (i * w + j) + 1, (double(i) + offset) * stride);
    }
  }
  return one(c.ir.constant(std::move(t)));
}

constexpr char kLogicalAnd[] = "aten.logical_and.default";
constexpr char kLogicalOr[] = "aten.logical_or.default";
constexpr char kView[] = "aten.view.default";
constexpr char kPermute[] = "aten.permute.default";
constexpr char kSlice[] = "aten.slice.Tensor";
constexpr char kSplitWithSizes[] = "aten.split_with_sizes.default";
constexpr char kEq[] = "aten.eq.Tensor";
constexpr char kNe[] = "aten.ne.Tensor";
constexpr char kLt[] = "aten.lt.Tensor";
constexpr char kLe[] = "aten.le.Tensor";
constexpr char kGt[] = "aten.gt.Tensor";
constexpr char kGe[] = "aten.ge.Tensor";
constexpr char kPow[] = "aten.pow.Tensor_Tensor";
constexpr char kAdd[] = "aten.add.Tensor";
constexpr char kSub[] = "aten.sub.Tensor";
constexpr char kMul[] = "aten.mul.Tensor";
constexpr char kDiv[] = "aten.div.Tensor";
constexpr char kMaxPool[] = "aten.max_pool2d.default";

const std::map<std::string, Translate>& table() {
  static const std::map<std::string, Translate> t = [] {
    std::map<std::string, Translate> m;
    // wgnn ops of the same name and arguments.
    for (const char* op :
         {"aten._log_softmax.default", "aten._native_batch_norm_legit_no_training.default", "aten._softmax.default",
          "aten.abs.default", "aten.addmm.default", "aten.amax.default", "aten.amin.default", "aten.argmax.default",
          "aten.argmin.default", "aten.avg_pool2d.default", "aten.bmm.default", "aten.cat.default",
          "aten.clamp.default", "aten.convolution.default", "aten.cos.default", "aten.exp.default",
          "aten.gather.default", "aten.gelu.default", "aten.grid_sampler_2d.default", "aten.hardswish.default",
          "aten.hardsigmoid.default", "aten.index_select.default", "aten.leaky_relu.default", "aten.linear.default",
          "aten.log.default", "aten.logical_and.default", "aten.logical_not.default", "aten.logical_or.default",
          "aten.max_pool2d_with_indices.default", "aten.mean.dim", "aten.minimum.default", "aten.maximum.default",
          "aten.mm.default", "aten.native_group_norm.default", "aten.native_layer_norm.default", "aten.neg.default",
          "aten.permute.default", "aten.relu.default", "aten.repeat.default", "aten.round.default",
          "aten.rsqrt.default", "aten.sigmoid.default", "aten.sin.default", "aten.sqrt.default",
          "aten.sum.dim_IntList", "aten.tanh.default", "aten.upsample_bilinear2d.vec",
          "aten.upsample_nearest2d.vec", "aten.where.self", "aten.erf.default", "aten.silu.default",
          "aten.reciprocal.default", "aten.floor.default", "aten.ceil.default", "aten.sign.default",
          "aten.elu.default", "aten.cumsum.default", "aten.topk.default", "aten.prod.dim_int",
          "aten.rms_norm.default", "aten.tril.default", "aten.triu.default", "aten.adaptive_avg_pool2d.default",
          "aten._adaptive_avg_pool2d.default", "aten.constant_pad_nd.default", "aten.pad.default",
          "aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor",
          "aten.logical_xor.default", "aten.isnan.default", "aten.softplus.default", "aten.prelu.default",
          "aten.expand.default", "aten.slice.Tensor", "aten.view.default", "aten.split_with_sizes.default",
          "aten.remainder.Tensor", "aten.fmod.Tensor", "aten.div.Tensor_mode", "aten.tan.default",
          "aten.atan.default", "aten.asin.default", "aten.acos.default", "aten.sinh.default", "aten.cosh.default"}) {
      m[op] = same;
    }
    m["aten.constant_pad_nd.default"] = constant_pad;
    m["aten._native_batch_norm_legit.no_stats"] = batch_norm_no_stats;
    // Binary ops: either operand may be a scalar.
    for (const char* op : {"aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor",
                           "aten.pow.Tensor_Tensor", "aten.eq.Tensor", "aten.ne.Tensor", "aten.lt.Tensor",
                           "aten.le.Tensor", "aten.gt.Tensor", "aten.ge.Tensor"}) {
      m[op] = binary;
    }
    m["aten.eq.Scalar"] = with_scalar<kEq>;
    m["aten.ne.Scalar"] = with_scalar<kNe>;
    m["aten.lt.Scalar"] = with_scalar<kLt>;
    m["aten.le.Scalar"] = with_scalar<kLe>;
    m["aten.gt.Scalar"] = with_scalar<kGt>;
    m["aten.ge.Scalar"] = with_scalar<kGe>;
    m["aten.pow.Tensor_Scalar"] = with_scalar<kPow>;
    m["aten.add.Scalar"] = with_scalar<kAdd>;
    m["aten.sub.Scalar"] = with_scalar<kSub>;
    m["aten.mul.Scalar"] = with_scalar<kMul>;
    m["aten.div.Scalar"] = with_scalar<kDiv>;
    // Views and copies.
    m["aten.view_copy.default"] = renamed<kView, 2>;
    m["aten._unsafe_view.default"] = renamed<kView, 2>;
    m["aten.reshape.default"] = renamed<kView, 2>;
    m["aten.permute_copy.default"] = renamed<kPermute, 2>;
    m["aten.slice_copy.Tensor"] = renamed<kSlice, 5>;
    m["aten.split_with_sizes_copy.default"] = renamed<kSplitWithSizes, 3>;
    m["aten.split_copy.Tensor"] = split_copy;
    m["aten.squeeze_copy.dims"] = as_view;
    m["aten.squeeze_copy.dim"] = as_view;
    m["aten.squeeze_copy.default"] = as_view;
    m["aten.unsqueeze_copy.default"] = as_view;
    m["aten.select_copy.int"] = select;
    m["aten.t_copy.default"] = t_copy;
    m["aten.expand_copy.default"] = expand;
    m["aten.alias_copy.default"] = identity;
    m["aten.clone.default"] = identity;
    m["aten.detach_copy.default"] = identity;
    m["aten.lift_fresh_copy.default"] = identity;
    m["dim_order_ops._clone_dim_order.default"] = identity;
    m["dim_order_ops._to_dim_order_copy.default"] = to_copy;
    m["aten._to_copy.default"] = to_copy;
    m["aten.copy.default"] = copy;
    m["aten.pixel_shuffle.default"] = pixel_shuffle;
    m["aten.flip.default"] = flip;
    m["aten.any.default"] = any;
    m["aten.any.dim"] = any;
    m["aten.any.dims"] = any;
    m["aten.bitwise_and.Tensor"] = bitwise<kLogicalAnd>;
    m["aten.bitwise_or.Tensor"] = bitwise<kLogicalOr>;
    m["et_vk.rms_norm.default"] = et_rms_norm;
    m["et_vk.sdpa.default"] = sdpa;
    m["et_vk.grid_priors.default"] = grid_priors;
    m["et_vk.apply_rotary_emb_interleaved.default"] = rotary_interleaved;
    m["et_vk.apply_rotary_emb.default"] = rotary_pairs;
    m["sdpa_with_kv_cache.default"] = sdpa_with_kv_cache;
    m["llama.sdpa_with_kv_cache.default"] = sdpa_with_kv_cache;
    m["quantized_decomposed.quantize_per_tensor.default"] = per_tensor<true>;
    m["quantized_decomposed.dequantize_per_tensor.default"] = per_tensor<false>;
    m["aten.as_strided_copy.default"] = as_strided;
    m["aten.embedding.default"] = embedding;
    m["aten.index.Tensor"] = index_tensor;
    m["aten.index_put.default"] = index_put;
    // Elementwise forms.
    m["aten.hardtanh.default"] = hardtanh;
    m["aten.log10.default"] = log10;
    m["aten.bitwise_not.default"] = bitwise_not;
    // Factories.
    m["aten.full.default"] = filled<1>;
    m["aten.full_like.default"] = filled<1>;
    m["aten.scalar_tensor.default"] = filled<0>;
    m["aten.zeros.default"] = filled_with<0>;
    m["aten.zeros_like.default"] = filled_with<0>;
    m["aten.ones.default"] = filled_with<1>;
    m["aten.ones_like.default"] = filled_with<1>;
    m["aten.arange.start_step"] = arange;
    // The Vulkan delegate's own ops.
    m["et_vk.prepack.default"] = identity;
    m["et_vk.conv_with_clamp.default"] = conv_with_clamp;
    m["et_vk.q8ta_relu.default"] = q8ta_relu;
    m["et_vk.q8ta_add.default"] = q8ta_add;
    m["et_vk.q8ta_pixel_shuffle.default"] = q8ta_pixel_shuffle;
    m["et_vk.q8ta_linear.default"] = q8ta_linear;
    m["et_vk.q8ta_linear_gemv.default"] = q8ta_linear;
    m["et_vk.linear_q8ta_q8csw.default"] = linear_q8ta_q8csw;
    m["et_vk.linear_qcs4w.default"] = linear_qcs4w;
    m["et_vk.linear_dq8ca_q4gsw.default"] = linear_dq8ca_q4gsw;
    m["et_vk.linear_q4gsw.default"] = linear_q4gsw;
    m["torchao.choose_qparams_affine.default"] = choose_qparams_affine;
    m["et_vk.q8ta_conv2d.default"] = q8ta_conv2d<QConv::Regular>;
    m["et_vk.q8ta_conv2d_pw.default"] = q8ta_conv2d<QConv::Regular>;
    m["et_vk.q8ta_conv2d_dw.default"] = q8ta_conv2d<QConv::Depthwise>;
    m["et_vk.q8ta_conv2d_transposed.default"] = q8ta_conv2d<QConv::Transposed>;
    (void)kMaxPool;
    return m;
  }();
  return t;
}

}  // namespace

std::vector<size_t> mutated_args(const std::string& op) {
  if (op == "sdpa_with_kv_cache.default" || op == "llama.sdpa_with_kv_cache.default") return {3, 4};
  return {};
}

std::optional<std::vector<Shape>> result_shapes(const OpCall& c) {
  const std::string& op = c.op;
  const auto in = [&]() -> const Shape& { return c.meta_of(c.tensor(0)).shape; };
  const auto one_shape = [](Shape s) { return std::optional<std::vector<Shape>>(std::vector<Shape>{std::move(s)}); };
  const auto int_list = [&](size_t i) {
    if (i >= c.args.size() || !c.args[i].is_int_list()) c.fail(fmt::format("argument {} must be a list of ints", i));
    const IntList& l = std::get<IntList>(c.args[i].v);
    return Shape(l.begin(), l.end());
  };
  if (op == "aten.squeeze_copy.default" || op == "aten.squeeze_copy.dim" || op == "aten.squeeze_copy.dims") {
    const Shape& s = in();
    std::vector<bool> drop(s.size(), op == "aten.squeeze_copy.default");
    if (op == "aten.squeeze_copy.dim") drop.at(size_t(norm_dim(c, c.integer(1), s.size()))) = true;
    if (op == "aten.squeeze_copy.dims") {
      for (int64_t d : int_list(1)) drop.at(size_t(norm_dim(c, d, s.size()))) = true;
    }
    Shape out;
    for (size_t d = 0; d < s.size(); ++d) {
      if (!(drop[d] && s[d] == 1)) out.push_back(s[d]);
    }
    return one_shape(out);
  }
  if (op == "aten.unsqueeze_copy.default") {
    Shape s = in();
    const int64_t d = norm_dim(c, c.integer(1), s.size() + 1);
    s.insert(s.begin() + d, 1);
    return one_shape(s);
  }
  if (op == "aten.select_copy.int") {
    Shape s = in();
    s.erase(s.begin() + norm_dim(c, c.integer(1), s.size()));
    return one_shape(s);
  }
  if (op == "aten.split_copy.Tensor") {
    const Shape& s = in();
    const size_t dim = size_t(norm_dim(c, c.integer(2), s.size()));
    const int64_t step = c.integer(1);
    if (step <= 0) c.fail(fmt::format("split size {} must be positive", step));
    std::vector<Shape> out;
    for (int64_t at = 0; at < s[dim] || (s[dim] == 0 && out.empty()); at += step) {
      Shape part = s;
      part[dim] = std::min(step, s[dim] - at);
      out.push_back(part);
    }
    return out;
  }
  if (op == "aten.full.default" || op == "aten.zeros.default" || op == "aten.ones.default") return one_shape(int_list(0));
  if (op == "aten.full_like.default" || op == "aten.zeros_like.default" || op == "aten.ones_like.default" ||
      op == "aten.alias_copy.default" || op == "aten.clone.default" || op == "aten.detach_copy.default" ||
      op == "aten.lift_fresh_copy.default" || op == "dim_order_ops._clone_dim_order.default" ||
      op == "et_vk.prepack.default" || op == "aten.copy.default") {
    return one_shape(in());
  }
  if (op == "aten.scalar_tensor.default") return one_shape({});
  if (op == "aten.arange.start_step") {
    const double start = c.scalar(0), end = c.scalar(1), step = c.is_none(2) ? 1.0 : c.scalar(2);
    if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
      c.fail(fmt::format("arange({}, {}, {}) has no length", start, end, step));
    }
    const double n = std::ceil((end - start) / step);
    if (!(n < 4294967296.0)) c.fail(fmt::format("arange({}, {}, {}) has {} values; at most 2^32", start, end, step, n));
    return one_shape({std::max<int64_t>(0, int64_t(n))});
  }
  return std::nullopt;
}

Translate find_translation(const std::string& op) {
  const auto& t = table();
  auto it = t.find(op);
  if (it == t.end()) return nullptr;
  // A pass-through needs the op in the registry of this build.
  if (it->second == same && !ops::OpRegistry::global().has(op)) return nullptr;
  return it->second;
}

std::vector<std::string> translated_ops() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : table()) {
    if (find_translation(name)) out.push_back(name);
  }
  return out;
}

}  // namespace wgnn::pte

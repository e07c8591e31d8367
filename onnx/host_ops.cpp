#include "onnx/host_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpu/error.h"
#include "graph/half.h"
#include "ops/layout.h"

namespace wgnn::onnx_import::host {

bool is_float(DType d) { return d == DType::F32 || d == DType::F16; }
double get(const HostTensor& t, size_t i) { return t.get_double(i); }
int64_t get_int(const HostTensor& t, size_t i) { return t.get_int(i); }

void set(HostTensor& t, size_t i, double v) {
  switch (t.dtype) {
    case DType::F32: t.as<float>()[i] = float(v); break;
    case DType::F16: t.as<uint16_t>()[i] = float_to_half(float(v)); break;
    case DType::I32: t.as<int32_t>()[i] = int32_t(v); break;
    case DType::I64: t.as<int64_t>()[i] = int64_t(v); break;
    case DType::Bool: t.as<uint8_t>()[i] = v != 0; break;
    case DType::U8: t.as<uint8_t>()[i] = uint8_t(v); break;
    case DType::I8: t.as<int8_t>()[i] = int8_t(v); break;
  }
}

void set_int(HostTensor& t, size_t i, int64_t v) {
  switch (t.dtype) {
    case DType::I64: t.as<int64_t>()[i] = v; break;
    case DType::I32: t.as<int32_t>()[i] = int32_t(v); break;
    // uint8 / int8 arithmetic wraps around (the low 8 bits), as ONNX Runtime's.
    case DType::U8: t.as<uint8_t>()[i] = uint8_t(uint64_t(v) & 255u); break;
    case DType::I8: t.as<int8_t>()[i] = int8_t(uint8_t(uint64_t(v) & 255u)); break;
    default: set(t, i, double(v));
  }
}

HostTensor from_ints(const std::vector<int64_t>& v, DType dtype) {
  HostTensor t(dtype, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) set_int(t, i, v[i]);
  return t;
}

std::vector<int64_t> to_ints(const HostTensor& t) {
  std::vector<int64_t> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = get_int(t, i);
  return v;
}

HostTensor scalar_like(DType d, double v) {
  HostTensor t(d, {});
  set(t, 0, v);
  return t;
}

namespace {

// Calls fn(out_index, a_index, b_index) over the broadcast of a and b.
template <typename Fn>
Shape broadcast_each(const Shape& a, const Shape& b, Fn fn) {
  const Shape out = ops::broadcast_shapes(a, b, "constant folding");
  const Shape sa = ops::broadcast_strides(a, out), sb = ops::broadcast_strides(b, out);
  const int64_t n = numel(out);
  std::vector<int64_t> idx(out.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < out.size(); ++d) {
      ia += idx[d] * sa[d];
      ib += idx[d] * sb[d];
    }
    fn(size_t(i), size_t(ia), size_t(ib));
    for (int d = int(out.size()) - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < out[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  return out;
}

// Python's float remainder (numpy's mod): C fmod moved to the divisor's
// sign; a zero takes the divisor's sign, an infinite divisor of the other
// sign is the result (ops/kernels/binary.wgsl, rem_f).
double python_mod(double x, double y) {
  double r = std::fmod(x, y);
  if (r != 0 && std::signbit(r) != std::signbit(y)) r += y;
  if (r == 0) r = std::copysign(0.0, y);
  return r;
}

}  // namespace

HostTensor binary(const std::string& op, const HostTensor& a, const HostTensor& b, int fmod) {
  const bool cmp = op == "Equal" || op == "Less" || op == "LessOrEqual" || op == "Greater" || op == "GreaterOrEqual";
  const bool logic = op == "And" || op == "Or" || op == "Xor";
  const Shape out_shape = ops::broadcast_shapes(a.shape, b.shape, op);
  HostTensor out((cmp || logic) ? DType::Bool : a.dtype, out_shape);
  const bool fl = is_float(a.dtype);
  broadcast_each(a.shape, b.shape, [&](size_t o, size_t ia, size_t ib) {
    if (fl || op == "Pow") {
      const double x = get(a, ia), y = get(b, ib);
      double r = 0;
      if (op == "Add") r = x + y;
      else if (op == "Sub") r = x - y;
      else if (op == "Mul") r = x * y;
      else if (op == "Div") r = x / y;
      else if (op == "Pow") r = std::pow(x, y);
      else if (op == "Min") r = std::min(x, y);
      else if (op == "Max") r = std::max(x, y);
      else if (op == "Mod") r = fmod ? std::fmod(x, y) : python_mod(x, y);
      else if (op == "Equal") r = x == y;
      else if (op == "Less") r = x < y;
      else if (op == "LessOrEqual") r = x <= y;
      else if (op == "Greater") r = x > y;
      else if (op == "GreaterOrEqual") r = x >= y;
      else if (op == "And") r = (x != 0) && (y != 0);
      else if (op == "Or") r = (x != 0) || (y != 0);
      else if (op == "Xor") r = (x != 0) != (y != 0);
      else throw Error("constant folding: unknown binary op " + op);
      set(out, o, r);
    } else {
      const int64_t x = get_int(a, ia), y = get_int(b, ib);
      int64_t r = 0;
      if ((op == "Div" || op == "Mod") && y == 0) throw Error("constant folding: integer division by zero in " + op);
      if (op == "Add") r = x + y;
      else if (op == "Sub") r = x - y;
      else if (op == "Mul") r = x * y;
      else if (op == "Div") r = x / y;  // truncates toward zero, as ONNX integer Div
      else if (op == "Min") r = std::min(x, y);
      else if (op == "Max") r = std::max(x, y);
      else if (op == "Mod") r = fmod ? x % y : ((x % y) + y) % y;
      else if (op == "Equal") r = x == y;
      else if (op == "Less") r = x < y;
      else if (op == "LessOrEqual") r = x <= y;
      else if (op == "Greater") r = x > y;
      else if (op == "GreaterOrEqual") r = x >= y;
      else if (op == "And") r = (x != 0) && (y != 0);
      else if (op == "Or") r = (x != 0) || (y != 0);
      else if (op == "Xor") r = (x != 0) != (y != 0);
      else throw Error("constant folding: unknown binary op " + op);
      set_int(out, o, r);
    }
  });
  return out;
}

HostTensor unary(const std::string& op, const HostTensor& a) {
  HostTensor out(op == "Not" ? DType::Bool : a.dtype, a.shape);
  for (size_t i = 0; i < size_t(a.numel()); ++i) {
    if (!is_float(a.dtype) && (op == "Neg" || op == "Abs" || op == "Sign" || op == "Relu")) {
      const int64_t x = get_int(a, i);
      set_int(out, i, op == "Neg" ? -x : op == "Abs" ? std::abs(x) : op == "Relu" ? std::max<int64_t>(x, 0)
                                                                                   : (x > 0) - (x < 0));
      continue;
    }
    const double x = get(a, i);
    double r = 0;
    if (op == "Neg") r = -x;
    else if (op == "Abs") r = std::abs(x);
    else if (op == "Not") r = x == 0;
    else if (op == "Sqrt") r = std::sqrt(x);
    else if (op == "Floor") r = std::floor(x);
    else if (op == "Ceil") r = std::ceil(x);
    else if (op == "Reciprocal") r = 1 / x;
    else if (op == "Exp") r = std::exp(x);
    else if (op == "Log") r = std::log(x);
    else if (op == "Relu") r = std::max(x, 0.0);
    else if (op == "Sign") r = (x > 0) - (x < 0);
    else throw Error("constant folding: unknown unary op " + op);
    set(out, i, r);
  }
  return out;
}

HostTensor where(const HostTensor& c, const HostTensor& a, const HostTensor& b) {
  const Shape s1 = ops::broadcast_shapes(c.shape, a.shape, "Where");
  const Shape out_shape = ops::broadcast_shapes(s1, b.shape, "Where");
  HostTensor ce = expand(c, out_shape), ae = expand(a, out_shape), be = expand(b, out_shape);
  HostTensor out(a.dtype, out_shape);
  const size_t es = dtype_size(a.dtype);
  for (size_t i = 0; i < size_t(out.numel()); ++i) {
    std::memcpy(out.data.data() + i * es, (get_int(ce, i) ? ae : be).data.data() + i * es, es);
  }
  return out;
}

HostTensor cast(const HostTensor& a, DType to) {
  HostTensor out(to, a.shape);
  for (size_t i = 0; i < size_t(a.numel()); ++i) {
    if (!is_float(a.dtype) && !is_float(to)) set_int(out, i, get_int(a, i));
    else if (is_float(a.dtype) && !is_float(to)) set_int(out, i, int64_t(std::trunc(get(a, i))));
    else set(out, i, get(a, i));
  }
  return out;
}

HostTensor reshape(HostTensor a, const Shape& shape) {
  if (numel(shape) != a.numel()) {
    throw Error(fmt::format("reshape of {} to {}: element counts differ", shape_str(a.shape), shape_str(shape)));
  }
  a.shape = shape;
  return a;
}

HostTensor gather(const HostTensor& data, const HostTensor& indices, int64_t axis) {
  const int64_t r = int64_t(data.shape.size());
  axis = ops::normalize_axis(axis, r, "Gather", "axis");
  Shape out_shape(data.shape.begin(), data.shape.begin() + axis);
  out_shape.insert(out_shape.end(), indices.shape.begin(), indices.shape.end());
  out_shape.insert(out_shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  HostTensor out(data.dtype, out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[size_t(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= data.shape[size_t(d)];
  const int64_t dim = data.shape[size_t(axis)], ni = indices.numel();
  const size_t es = dtype_size(data.dtype);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < ni; ++k) {
      int64_t idx = get_int(indices, size_t(k));
      if (idx < 0) idx += dim;
      if (idx < 0 || idx >= dim) {
        throw Error(fmt::format("Gather: index {} is out of range for axis {} of size {}", get_int(indices, size_t(k)),
                                axis, dim));
      }
      if (inner > 0) {
        std::memcpy(out.data.data() + size_t((o * ni + k) * inner) * es,
                    data.data.data() + size_t((o * dim + idx) * inner) * es, size_t(inner) * es);
      }
    }
  }
  return out;
}

HostTensor concat(const std::vector<const HostTensor*>& parts, int64_t axis) {
  const HostTensor& f = *parts.at(0);
  const int64_t r = int64_t(f.shape.size());
  axis = ops::normalize_axis(axis, r, "Concat", "axis");
  Shape out_shape = f.shape;
  out_shape[size_t(axis)] = 0;
  for (const HostTensor* p : parts) {
    if (int64_t(p->shape.size()) != r || p->dtype != f.dtype) throw Error("Concat: inputs differ in rank or dtype");
    out_shape[size_t(axis)] += p->shape[size_t(axis)];
  }
  HostTensor out(f.dtype, out_shape);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_shape[size_t(d)];
  const size_t es = dtype_size(f.dtype);
  size_t pos = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const HostTensor* p : parts) {
      const size_t chunk = size_t(p->numel() / std::max<int64_t>(outer, 1)) * es;
      if (outer == 0 || chunk == 0) continue;  // an empty part has no data pointer
      std::memcpy(out.data.data() + pos, p->data.data() + size_t(o) * chunk, chunk);
      pos += chunk;
    }
  }
  return out;
}

HostTensor slice(const HostTensor& a, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                 const std::vector<int64_t>& axes_in, const std::vector<int64_t>& steps_in) {
  const int64_t r = int64_t(a.shape.size());
  std::vector<int64_t> b(size_t(r), 0), st(size_t(r), 1);
  Shape out_shape = a.shape;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t ax = ops::normalize_axis(axes_in.empty() ? int64_t(k) : axes_in[k], r, "Slice", "axes");
    const int64_t step = steps_in.empty() ? 1 : steps_in[k];
    if (step == 0) throw Error("Slice: step 0");
    const int64_t dim = a.shape[size_t(ax)];
    int64_t s = starts[k], e = ends[k];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      out_shape[size_t(ax)] = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      out_shape[size_t(ax)] = s > e ? (s - e - step - 1) / (-step) : 0;
    }
    b[size_t(ax)] = s;
    st[size_t(ax)] = step;
  }
  HostTensor out(a.dtype, out_shape);
  const Shape in_strides = ops::contiguous_strides(a.shape);
  const size_t es = dtype_size(a.dtype);
  std::vector<int64_t> idx(size_t(r), 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t src = 0;
    for (int64_t d = 0; d < r; ++d) src += (b[size_t(d)] + idx[size_t(d)] * st[size_t(d)]) * in_strides[size_t(d)];
    std::memcpy(out.data.data() + size_t(i) * es, a.data.data() + size_t(src) * es, es);
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < out_shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  return out;
}

HostTensor expand(const HostTensor& a, const Shape& shape) {
  const Shape out_shape = ops::broadcast_shapes(a.shape, shape, "Expand");
  HostTensor out(a.dtype, out_shape);
  const size_t es = dtype_size(a.dtype);
  broadcast_each(a.shape, out_shape, [&](size_t o, size_t ia, size_t) {
    std::memcpy(out.data.data() + o * es, a.data.data() + ia * es, es);
  });
  return out;
}

HostTensor transpose(const HostTensor& a, const std::vector<int64_t>& perm) {
  const size_t r = a.shape.size();
  Shape out_shape(r);
  for (size_t d = 0; d < r; ++d) out_shape[d] = a.shape[size_t(perm[d])];
  HostTensor out(a.dtype, out_shape);
  const Shape in_strides = ops::contiguous_strides(a.shape);
  const size_t es = dtype_size(a.dtype);
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < r; ++d) src += idx[d] * in_strides[size_t(perm[d])];
    std::memcpy(out.data.data() + size_t(i) * es, a.data.data() + size_t(src) * es, es);
    for (int d = int(r) - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < out_shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  return out;
}

HostTensor reduce(const std::string& op, const HostTensor& a, std::vector<int64_t> axes, bool keepdims) {
  const int64_t r = int64_t(a.shape.size());
  std::vector<bool> red(size_t(r), axes.empty());
  for (int64_t ax : axes) red[size_t(ops::normalize_axis(ax, r, op, "axes"))] = true;
  Shape out_shape, kept;
  for (int64_t d = 0; d < r; ++d) {
    if (!red[size_t(d)]) out_shape.push_back(a.shape[size_t(d)]);
    if (keepdims) kept.push_back(red[size_t(d)] ? 1 : a.shape[size_t(d)]);
  }
  HostTensor out(a.dtype, keepdims ? kept : out_shape);
  std::vector<double> acc(size_t(out.numel()), op == "ReduceProd" ? 1.0 : op == "ReduceMax" ? -INFINITY
                                                                       : op == "ReduceMin" ? INFINITY
                                                                                           : 0.0);
  std::vector<int64_t> cnt(acc.size(), 0);
  std::vector<int64_t> idx(size_t(r), 0);
  for (int64_t i = 0; i < a.numel(); ++i) {
    int64_t o = 0;
    for (int64_t d = 0; d < r; ++d) {
      if (!red[size_t(d)]) o = o * a.shape[size_t(d)] + idx[size_t(d)];
    }
    const double x = get(a, size_t(i));
    double& v = acc[size_t(o)];
    if (op == "ReduceSum" || op == "ReduceMean") v += x;
    else if (op == "ReduceProd") v *= x;
    else if (op == "ReduceMax") v = std::max(v, x);
    else if (op == "ReduceMin") v = std::min(v, x);
    ++cnt[size_t(o)];
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < a.shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  for (size_t o = 0; o < acc.size(); ++o) set(out, o, op == "ReduceMean" ? acc[o] / double(std::max<int64_t>(cnt[o], 1)) : acc[o]);
  return out;
}

HostTensor trilu(const HostTensor& a, int64_t k, bool upper) {
  const size_t r = a.shape.size();
  if (r < 2) throw Error(fmt::format("Trilu: input {} has rank {}; accepted: 2 or more", shape_str(a.shape), r));
  HostTensor out(a.dtype, a.shape);
  const int64_t rows = a.shape[r - 2], cols = a.shape[r - 1];
  const size_t es = dtype_size(a.dtype);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const int64_t d = i % cols - (i / cols) % rows;
    if (upper ? d >= k : d <= k) std::memcpy(out.data.data() + size_t(i) * es, a.data.data() + size_t(i) * es, es);
  }
  return out;
}

}  // namespace wgnn::onnx_import::host

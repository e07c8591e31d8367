#include "ops/layout.h"

#include <fmt/format.h>

#include "gpu/error.h"

namespace wgnn::ops {

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size(), 1);
  for (int i = int(shape.size()) - 2; i >= 0; --i) s[size_t(i)] = s[size_t(i) + 1] * shape[size_t(i) + 1];
  return s;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw Error(fmt::format("{}: shapes {} and {} do not broadcast (dim {}: {} vs {})", op, shape_str(a),
                              shape_str(b), i, da, db));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& in, const Shape& out) {
  Shape s(out.size(), 0);
  const Shape cs = contiguous_strides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : cs[i];
  return s;
}

Dims pack(const Shape& values, std::string_view op) {
  if (values.size() > size_t(kMaxRank)) {
    throw Error(fmt::format("{}: rank {} exceeds the supported maximum of {}", op, values.size(), kMaxRank));
  }
  Dims d{};
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] > int64_t(UINT32_MAX)) {
      throw Error(fmt::format("{}: value {} does not fit 32 bits", op, values[i]));
    }
    d[i] = uint32_t(values[i]);
  }
  return d;
}

int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view op, std::string_view name) {
  const int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  if (axis < lo || axis > hi) {
    throw Error(fmt::format("{}: argument '{}' is {}; accepted for rank {}: {}..{}", op, name, axis, rank, lo, hi));
  }
  return axis < 0 ? axis + std::max<int64_t>(rank, 1) : axis;
}

void require_rank(const Shape& shape, std::string_view op, std::string_view name) {
  if (shape.size() > size_t(kMaxRank)) {
    throw Error(fmt::format("{}: argument '{}' has rank {} ({}); at most {} is supported", op, name, shape.size(),
                            shape_str(shape), kMaxRank));
  }
}

}  // namespace wgnn::ops

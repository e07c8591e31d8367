// Data-movement ops (permute, cat, split_with_sizes, slice, index_select,
// gather, expand, repeat, pad, triu, tril) against plain C++ references, for every
// storage kind: float32, float16, int32, int64 (stored as int32) and bool.
// Data moves bit for bit, so results must match exactly.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <optional>

#include "op_test_util.h"
#include "scoped_env.h"
#include "typed_values.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

using Coords = std::vector<int64_t>;

// The output of an op whose element at coordinates c is input element
// src(c), or `fill` where src(c) is -1.
std::vector<double> ref_map(const Shape& out, const std::vector<double>& in,
                            const std::function<int64_t(const Coords&)>& src, double fill = 0) {
  std::vector<double> r(size_t(numel(out)));
  for (int64_t i = 0; i < numel(out); ++i) {
    const int64_t s = src(unravel(i, out));
    r[size_t(i)] = s < 0 ? fill : in[size_t(s)];
  }
  return r;
}

class Movement : public testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (GetParam() == DType::F16 && !ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  }
  DType dt() const { return GetParam(); }
};

std::string param_name(const testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Dtypes, Movement,
                         testing::Values(DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool), param_name);

TEST_P(Movement, Permute) {
  struct Case {
    Shape shape;
    IntList dims;
  };
  const std::vector<Case> cases = {
      {{7}, {0}},
      {{3, 5}, {1, 0}},
      {{3, 5}, {-1, -2}},
      {{2, 3, 5}, {2, 0, 1}},
      {{2, 3, 5}, {0, 1, 2}},
      {{4, 1, 3, 5}, {3, 1, 0, 2}},
      {{2, 3, 1, 5, 3}, {4, 2, 0, 3, 1}},
      {{2, 3, 2, 5, 3, 2}, {5, 3, 1, -6, 4, 2}},
      {{2, 1, 2, 3, 1, 2, 3, 2}, {7, 6, 5, 4, 3, 2, 1, 0}},
      {{1, 1, 1}, {2, 0, 1}},
      {{}, {}},
      {{3, 0, 2}, {2, 1, 0}},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " dims " + shape_str(c.dims));
    Graph g(ctx());
    const auto x = random_values(size_t(numel(c.shape)), dt(), seed++);
    TensorRef y = ops::call(g, "aten.permute.default", {put(g, c.shape, dt(), x), c.dims}).tensor();
    const size_t r = c.shape.size();
    Shape out(r);
    std::vector<size_t> perm(r);
    for (size_t i = 0; i < r; ++i) {
      perm[i] = size_t(c.dims[i] < 0 ? c.dims[i] + int64_t(r) : c.dims[i]);
      out[i] = c.shape[perm[i]];
    }
    ASSERT_EQ(g.info(y).shape, out);
    ASSERT_EQ(g.info(y).dtype, dt());
    g.run();
    EXPECT_EQ(get(g, y), ref_map(out, x, [&](const Coords& o) {
                Coords s(r);
                for (size_t i = 0; i < r; ++i) s[perm[i]] = o[i];
                return ravel(s, c.shape);
              }));
  }
}

// The copy kernels a permute may run on (ops/movement.cpp): the tiled
// transpose (a dim of source stride 1 becomes strided; both of at least 16,
// edges not multiples of its 32 x 32 block, outer dims), the vector copy
// (contiguous runs of whole vec4<u32>: a window partition, a head split) and
// one element per invocation (WGNN_COPY_KERNEL=element, and runs that are no
// whole vectors). Each against the reference, and the label naming the kernel.
TEST_P(Movement, PermuteOnEveryCopyKernel) {
  struct Case {
    Shape shape;
    IntList dims;
    const char* kernel;  // the label's suffix: "tiled", "vec4" or "" (one element per invocation)
  };
  const std::vector<Case> cases = {
      {{1, 40, 37}, {0, 2, 1}, "tiled"},
      {{3, 20, 50}, {0, 2, 1}, "tiled"},
      {{64, 48}, {1, 0}, "tiled"},
      {{2, 17, 3, 33}, {0, 3, 2, 1}, "tiled"},
      {{2, 33, 5, 40}, {3, 0, 2, 1}, "tiled"},
      {{1, 4, 7, 4, 7, 8}, {0, 1, 3, 2, 4, 5}, "vec4"},
      {{1, 24, 3, 2, 16}, {2, 0, 3, 1, 4}, "vec4"},
      {{16, 18, 6}, {1, 0, 2}, ""},
      {{8, 40}, {1, 0}, ""},
  };
  uint32_t seed = 300;
  for (const bool element_only : {false, true}) {
    std::optional<ScopedSetting> env;
    if (element_only) env.emplace("WGNN_COPY_KERNEL", "element");
    for (const Case& c : cases) {
      SCOPED_TRACE(shape_str(c.shape) + " dims " + shape_str(c.dims) + (element_only ? " element copies" : ""));
      Graph g(ctx());
      const auto x = random_values(size_t(numel(c.shape)), dt(), seed++);
      TensorRef in = put(g, c.shape, dt(), x);
      const size_t before = g.dispatches().size();
      TensorRef y = ops::call(g, "aten.permute.default", {in, c.dims}).tensor();
      ASSERT_EQ(g.dispatches().size(), before + 1);
      const std::string label = g.dispatches().back().label;
      const std::string want = element_only || !*c.kernel ? "permute" : std::string("permute ") + c.kernel;
      EXPECT_EQ(label, want);
      const size_t r = c.shape.size();
      Shape out(r);
      for (size_t i = 0; i < r; ++i) out[i] = c.shape[size_t(c.dims[i])];
      g.run();
      EXPECT_EQ(get(g, y), ref_map(out, x, [&](const Coords& o) {
                  Coords s(r);
                  for (size_t i = 0; i < r; ++i) s[size_t(c.dims[i])] = o[i];
                  return ravel(s, c.shape);
                }));
    }
  }
}

// Pads and repeats whose last dim stays whole vectors run on the vector copy.
TEST(MovementOps, PadAndRepeatOfWholeVectorsCopyVectors) {
  Graph g(ctx());
  TensorRef x = put(g, {1, 5, 5, 8}, DType::F32, std::vector<double>(200, 1.0));
  ops::call(g, "aten.pad.default", {x, IntList{0, 0, 0, 2, 0, 2}, std::string("constant"), 0.0});
  EXPECT_EQ(g.dispatches().back().label, "pad vec4");
  ops::call(g, "aten.repeat.default", {x, IntList{1, 2, 1, 1}});
  EXPECT_EQ(g.dispatches().back().label, "repeat vec4");
  ops::call(g, "aten.pad.default", {x, IntList{1, 0}, std::string("constant"), 0.0});
  EXPECT_EQ(g.dispatches().back().label, "pad");
}

TEST_P(Movement, Cat) {
  struct Case {
    std::vector<Shape> shapes;
    int64_t dim;
  };
  const std::vector<Case> cases = {
      {{{2, 3}, {4, 3}, {1, 3}}, 0},
      {{{2, 3}, {2, 5}, {2, 1}}, 1},
      {{{2, 3, 5}, {2, 4, 5}}, -2},
      {{{2, 3, 5}, {2, 3, 0}, {2, 3, 7}}, -1},
      {{{0}, {3, 4}, {0}, {2, 4}}, 0},  // legacy 1-D empty inputs are skipped
      {{{3}, {5}, {1}}, 0},
      {{{2, 2, 3, 1, 2}, {2, 2, 3, 4, 2}}, 3},
      {{{1, 2, 1, 2, 3, 3}, {1, 2, 1, 2, 3, 1}, {1, 2, 1, 2, 3, 2}}, 5},
      {{{5}}, 0},
      {{{2, 0}, {3, 0}}, 0},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE("dim " + std::to_string(c.dim) + " first " + shape_str(c.shapes[0]));
    Graph g(ctx());
    std::vector<std::vector<double>> xs;
    ValueList ts;
    for (const Shape& s : c.shapes) {
      xs.push_back(random_values(size_t(numel(s)), dt(), seed++));
      ts.push_back(put(g, s, dt(), xs.back()));
    }
    TensorRef y = ops::call(g, "aten.cat.default", {ts, c.dim}).tensor();
    // Reference: walk the inputs (skipping [0]) along dim.
    size_t first = 0;
    while (c.shapes[first] == Shape{0}) ++first;
    const Shape ref_shape = c.shapes[first];
    const size_t d = size_t(c.dim < 0 ? c.dim + int64_t(ref_shape.size()) : c.dim);
    Shape out = ref_shape;
    out[d] = 0;
    size_t nonempty = 0;
    for (const Shape& s : c.shapes) {
      if (s == Shape{0}) continue;
      out[d] += s[d];
      nonempty += numel(s) > 0;
    }
    ASSERT_EQ(g.info(y).shape, out);
    // Two to four inputs, none empty, rows of whole 32-bit words: one
    // dispatch (kernels/cat.wgsl); one input with elements: a view of it,
    // none; otherwise a copy per non-empty input.
    uint64_t row_bytes = gpu_dtype_size(dt());
    for (size_t k = d + 1; k < out.size(); ++k) row_bytes *= uint64_t(out[k]);
    const bool one = c.shapes.size() >= 2 && c.shapes.size() <= 4 && nonempty == c.shapes.size() && row_bytes % 4 == 0;
    EXPECT_EQ(g.dispatches().size(), nonempty == 1 ? 0u : one ? 1u : nonempty);
    g.run();
    std::vector<double> ref;
    for (int64_t i = 0; i < numel(out); ++i) {
      Coords o = unravel(i, out);
      for (size_t k = 0; k < c.shapes.size(); ++k) {
        if (c.shapes[k] == Shape{0}) continue;
        if (o[d] < c.shapes[k][d]) {
          ref.push_back(xs[k][size_t(ravel(o, c.shapes[k]))]);
          break;
        }
        o[d] -= c.shapes[k][d];
      }
    }
    EXPECT_EQ(get(g, y), ref);
  }
}

TEST_P(Movement, SplitWithSizes) {
  struct Case {
    Shape shape;
    IntList sizes;
    int64_t dim;
  };
  const std::vector<Case> cases = {
      {{7, 3}, {2, 0, 5}, 0},
      {{3, 10}, {3, 3, 4}, -1},
      {{2, 6, 5}, {1, 5}, 1},
      {{2, 3, 4, 5, 3}, {1, 1, 1}, 4},
      {{9}, {9}, 0},
  };
  uint32_t seed = 200;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " sizes " + shape_str(c.sizes));
    Graph g(ctx());
    const auto x = random_values(size_t(numel(c.shape)), dt(), seed++);
    Value out = ops::call(g, "aten.split_with_sizes.default", {put(g, c.shape, dt(), x), c.sizes, c.dim});
    ASSERT_EQ(out.list().size(), c.sizes.size());
    g.run();
    const size_t d = size_t(c.dim < 0 ? c.dim + int64_t(c.shape.size()) : c.dim);
    int64_t offset = 0;
    for (size_t k = 0; k < c.sizes.size(); ++k) {
      Shape s = c.shape;
      s[d] = c.sizes[k];
      TensorRef y = out.list()[k].tensor();
      ASSERT_EQ(g.info(y).shape, s);
      EXPECT_EQ(get(g, y), ref_map(s, x, [&](Coords o) {
                  o[d] += offset;
                  return ravel(o, c.shape);
                })) << "part " << k;
      offset += c.sizes[k];
    }
  }
}

// The indices a slice takes: Python's slice.indices(n), except that, as in
// ONNX Slice, a negative-step start before the first element clamps to 0.
std::vector<int64_t> slice_indices(int64_t n, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  const int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  auto fix = [&](std::optional<int64_t> v, int64_t def, bool is_start) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    if (x < lower) x = is_start && step < 0 ? 0 : lower;
    if (x > upper) x = upper;
    return x;
  };
  const int64_t s = fix(start, step > 0 ? lower : upper, true);
  const int64_t e = fix(end, step > 0 ? upper : lower, false);
  std::vector<int64_t> idx;
  for (int64_t i = s; step > 0 ? i < e : i > e;) {
    idx.push_back(i);
    if (step > 0 ? e - i <= step : i - e + step <= 0) break;
    i += step;
  }
  return idx;
}

TEST_P(Movement, Slice) {
  struct Case {
    std::optional<int64_t> start, end;
    int64_t step;
  };
  const std::vector<Case> cases = {
      {{}, {}, 1},         {2, 9, 1},          {2, 9, 3},          {-3, {}, 1},
      {-100, 100, 2},      {INT64_MAX, {}, 1}, {0, INT64_MAX, 4},  {5, 2, 1},
      {3, 3, 1},           {0, 11, 20},        {0, {}, INT64_MAX}, {9, 2, -2},
      {{}, {}, -1},        {-1, -100, -3},     {INT64_MAX, INT64_MIN, -1},
      {100, 0, -4},        {-100, {}, -1},     {10, 0, -20},       {5, {}, INT64_MIN},
      {{}, -12, -1},       {-12, -11, 1},
  };
  const Shape shape = {2, 11, 3};
  const auto x = random_values(size_t(numel(shape)), dt(), 300);
  for (int64_t dim : {1, -2}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("start {} end {} step {}", c.start ? std::to_string(*c.start) : "None",
                               c.end ? std::to_string(*c.end) : "None", c.step));
      Graph g(ctx());
      ValueList args{put(g, shape, dt(), x), dim, c.start ? Value(*c.start) : Value(None{}),
                     c.end ? Value(*c.end) : Value(None{}), c.step};
      TensorRef y = ops::call(g, "aten.slice.Tensor", args).tensor();
      const auto idx = slice_indices(11, c.start, c.end, c.step);
      const Shape out = {2, int64_t(idx.size()), 3};
      ASSERT_EQ(g.info(y).shape, out);
      if (idx.empty()) EXPECT_EQ(g.dispatches().size(), 0u);
      g.run();
      EXPECT_EQ(get(g, y), ref_map(out, x, [&](Coords o) {
                  o[1] = idx[size_t(o[1])];
                  return ravel(o, shape);
                }));
    }
  }
}

TEST_P(Movement, SliceOtherDimsAndRanks) {
  struct Case {
    Shape shape;
    int64_t dim, start, end, step;
  };
  const std::vector<Case> cases = {
      {{13}, 0, 1, 12, 5},       {{13}, 0, -2, -13, -4},       {{5, 7}, 0, 1, -1, 1},
      {{5, 7}, -1, 6, 0, -1},    {{2, 3, 4, 5, 6, 3}, 3, 1, 5, 2}, {{2, 3, 4, 5, 6, 3}, -1, -1, -4, -1},
      {{4, 0, 3}, 1, 0, 5, -1},
  };
  uint32_t seed = 310;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + fmt::format(" dim {} {}:{}:{}", c.dim, c.start, c.end, c.step));
    Graph g(ctx());
    const auto x = random_values(size_t(numel(c.shape)), dt(), seed++);
    TensorRef y =
        ops::call(g, "aten.slice.Tensor", {put(g, c.shape, dt(), x), c.dim, c.start, c.end, c.step}).tensor();
    const size_t d = size_t(c.dim < 0 ? c.dim + int64_t(c.shape.size()) : c.dim);
    const auto idx = slice_indices(c.shape[d], c.start, c.end, c.step);
    Shape out = c.shape;
    out[d] = int64_t(idx.size());
    ASSERT_EQ(g.info(y).shape, out);
    g.run();
    EXPECT_EQ(get(g, y), ref_map(out, x, [&](Coords o) {
                o[d] = idx[size_t(o[d])];
                return ravel(o, c.shape);
              }));
  }
}

TEST(Slice, KnownIndices) {
  // Hand-checked cases of the clamping rules (ONNX Slice for negative steps).
  EXPECT_EQ(slice_indices(5, {}, {}, -2), (std::vector<int64_t>{4, 2, 0}));
  EXPECT_EQ(slice_indices(5, -100, {}, -1), (std::vector<int64_t>{0}));
  EXPECT_EQ(slice_indices(5, 100, -100, -3), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(slice_indices(5, -2, 100, 1), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(slice_indices(5, 1, INT64_MAX, INT64_MAX), (std::vector<int64_t>{1}));
}

TEST_P(Movement, IndexSelect) {
  struct Case {
    Shape shape;
    int64_t dim;
    std::vector<double> index;
    bool constant;
    DType idt;
  };
  const std::vector<Case> cases = {
      {{4, 6, 3}, 0, {3, 0, -1, 2, 2, -4}, false, DType::I64},
      {{4, 6, 3}, 1, {5, -6, 0, 1}, true, DType::I32},
      {{4, 6, 3}, -1, {-1, 0, 1, 2, -3}, false, DType::I32},
      {{4, 6, 3}, 2, {}, false, DType::I64},
      {{7}, 0, {6, 5, 4, -7}, true, DType::I64},
      {{2, 3, 2, 3, 2, 5}, 4, {1, -2, 0}, false, DType::I64},
  };
  uint32_t seed = 400;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " dim " + std::to_string(c.dim));
    Graph g(ctx());
    const auto x = random_values(size_t(numel(c.shape)), dt(), seed++);
    const int64_t n = int64_t(c.index.size());
    TensorRef idx = put(g, {n}, c.idt, c.index, c.constant ? TensorKind::Constant : TensorKind::Input);
    TensorRef y = ops::call(g, "aten.index_select.default", {put(g, c.shape, dt(), x), c.dim, idx}).tensor();
    const size_t d = size_t(c.dim < 0 ? c.dim + int64_t(c.shape.size()) : c.dim);
    Shape out = c.shape;
    out[d] = n;
    ASSERT_EQ(g.info(y).shape, out);
    g.run();
    EXPECT_EQ(get(g, y), ref_map(out, x, [&](Coords o) {
                const auto k = int64_t(c.index[size_t(o[d])]);
                o[d] = k < 0 ? k + c.shape[d] : k;
                return ravel(o, c.shape);
              }));
  }
}

TEST_P(Movement, IndexSelectZeroDimensional) {
  Graph g(ctx());
  const auto x = random_values(1, dt(), 450);
  TensorRef idx = put(g, {1}, DType::I64, {-1});
  TensorRef y = ops::call(g, "aten.index_select.default", {put(g, {}, dt(), x), 0, idx}).tensor();
  TensorRef z = ops::call(g, "aten.gather.default", {put(g, {}, dt(), x), -1, put(g, {}, DType::I32, {0})}).tensor();
  EXPECT_EQ(g.info(y).shape, Shape{});
  EXPECT_EQ(g.info(z).shape, Shape{});
  g.run();
  EXPECT_EQ(get(g, y), x);
  EXPECT_EQ(get(g, z), x);
}

TEST_P(Movement, Gather) {
  struct Case {
    Shape shape;
    int64_t dim;
    Shape ishape;
  };
  const std::vector<Case> cases = {
      {{4, 6, 3}, 1, {4, 5, 2}},
      {{4, 6, 3}, 0, {7, 3, 3}},
      {{4, 6, 3}, -1, {2, 6, 5}},
      {{9}, 0, {4}},
      {{2, 3, 4, 2, 3}, 3, {2, 2, 4, 6, 1}},
      {{5, 3}, 0, {0, 3}},
  };
  uint32_t seed = 500;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " dim " + std::to_string(c.dim) + " index " + shape_str(c.ishape));
    const size_t d = size_t(c.dim < 0 ? c.dim + int64_t(c.shape.size()) : c.dim);
    const int64_t size = c.shape[d];
    for (DType idt : {DType::I32, DType::I64}) {
      Graph g(ctx());
      const auto x = random_values(size_t(numel(c.shape)), dt(), seed++);
      const auto index = random_values(size_t(numel(c.ishape)), DType::I64, seed++, double(-size), double(size - 1));
      TensorRef idx = put(g, c.ishape, idt, index);
      TensorRef y = ops::call(g, "aten.gather.default", {put(g, c.shape, dt(), x), c.dim, idx}).tensor();
      ASSERT_EQ(g.info(y).shape, c.ishape);
      g.run();
      EXPECT_EQ(get(g, y), ref_map(c.ishape, x, [&](Coords o) {
                  const auto k = int64_t(index[size_t(ravel(o, c.ishape))]);
                  o[d] = k < 0 ? k + size : k;
                  return ravel(o, c.shape);
                }));
    }
  }
}

TEST(IndexSelect, IndexOutOfRangeIsAnErrorInCheckedModeElseClamped) {
  // Checked (the default): an index outside [-size, size) fails the run with
  // its value and the valid range.
  for (const char* op : {"aten.index_select.default", "aten.gather.default"}) {
    SCOPED_TRACE(op);
    Graph g(ctx());
    ASSERT_TRUE(g.checked());
    TensorRef x = put(g, {5}, DType::F32, {10, 11, 12, 13, 14});
    TensorRef idx = put(g, {4}, DType::I64, {-5, 7, 4, -1});
    TensorRef y = ops::call(g, op, {x, 0, idx}).tensor();
    EXPECT_EQ(g.check_count(), 1u);
    try {
      g.run();
      ADD_FAILURE() << "no error for index 7 into a dim of size 5";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(op) + ": index 7 is out of range: accepted [-5, 5) for dim 0 of size 5"));
    }
    // Valid indices (negative ones wrap once) pass, on the same graph.
    g.write(idx, std::vector<int64_t>{-5, 0, 4, -1}.data(), 4 * sizeof(int64_t));
    g.run();
    EXPECT_EQ(get(g, y), (std::vector<double>{10, 10, 14, 14}));
  }
  // Unchecked: clamped to [0, size) after negative indices wrap once; no check recorded.
  Graph g(ctx());
  g.set_checked(false);
  TensorRef x = put(g, {5}, DType::F32, {10, 11, 12, 13, 14});
  TensorRef idx = put(g, {4}, DType::I64, {7, -9, 4, -1});
  TensorRef y = ops::call(g, "aten.index_select.default", {x, 0, idx}).tensor();
  TensorRef z = ops::call(g, "aten.gather.default", {x, 0, idx}).tensor();
  EXPECT_EQ(g.check_count(), 0u);
  g.run();
  EXPECT_EQ(get(g, y), (std::vector<double>{14, 10, 14, 14}));
  EXPECT_EQ(get(g, z), (std::vector<double>{14, 10, 14, 14}));
  // A constant index is checked on the host, at once, in both modes.
  TensorRef cidx = put(g, {3}, DType::I64, {0, 5, 1}, TensorKind::Constant);
  for (const char* op : {"aten.index_select.default", "aten.gather.default"}) {
    try {
      ops::call(g, op, {x, 0, cidx});
      ADD_FAILURE() << "no error for an out-of-range constant index";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(op));
      EXPECT_THAT(e.what(), HasSubstr("holds 5 at flat position 1"));
    }
  }
}

TEST_P(Movement, Expand) {
  struct Case {
    Shape shape;
    IntList size;
    Shape out;
  };
  const std::vector<Case> cases = {
      {{3, 1, 5}, {2, -1, 4, -1}, {2, 3, 4, 5}},
      {{}, {2, 3}, {2, 3}},
      {{1}, {0}, {0}},
      {{2, 1}, {2, 1}, {2, 1}},
      {{1, 1, 1}, {2, 3, 4}, {2, 3, 4}},
      {{4, 1, 3}, {2, 1, 4, 2, 3}, {2, 1, 4, 2, 3}},
      {{1, 7}, {3, 2, 7}, {3, 2, 7}},
  };
  uint32_t seed = 600;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " to " + shape_str(c.size));
    Graph g(ctx());
    const auto x = random_values(size_t(numel(c.shape)), dt(), seed++);
    TensorRef y = ops::call(g, "aten.expand.default", {put(g, c.shape, dt(), x), c.size}).tensor();
    ASSERT_EQ(g.info(y).shape, c.out);
    g.run();
    const size_t lead = c.out.size() - c.shape.size();
    EXPECT_EQ(get(g, y), ref_map(c.out, x, [&](const Coords& o) {
                Coords s(c.shape.size());
                for (size_t k = 0; k < s.size(); ++k) s[k] = c.shape[k] == 1 ? 0 : o[k + lead];
                return ravel(s, c.shape);
              }));
  }
}

TEST_P(Movement, Repeat) {
  struct Case {
    Shape shape;
    IntList reps;
  };
  const std::vector<Case> cases = {
      {{2, 3}, {2, 1, 3}},
      {{}, {3, 2}},
      {{4}, {0}},
      {{1, 2, 1, 3}, {2, 1, 3, 1}},
      {{2, 3, 5}, {1, 1, 1}},
      {{3, 2}, {1, 2, 3, 1, 2, 2}},
      {{2, 3, 8}, {2, 2, 1}},  // the vector copy
  };
  uint32_t seed = 700;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " repeats " + shape_str(c.reps));
    Graph g(ctx());
    const auto x = random_values(size_t(numel(c.shape)), dt(), seed++);
    TensorRef y = ops::call(g, "aten.repeat.default", {put(g, c.shape, dt(), x), c.reps}).tensor();
    const size_t lead = c.reps.size() - c.shape.size();
    Shape out(c.reps.size());
    for (size_t k = 0; k < out.size(); ++k) out[k] = c.reps[k] * (k < lead ? 1 : c.shape[k - lead]);
    ASSERT_EQ(g.info(y).shape, out);
    g.run();
    EXPECT_EQ(get(g, y), ref_map(out, x, [&](const Coords& o) {
                Coords s(c.shape.size());
                for (size_t k = 0; k < s.size(); ++k) s[k] = o[k + lead] % c.shape[k];
                return ravel(s, c.shape);
              }));
  }
}

TEST_P(Movement, Pad) {
  struct Case {
    Shape shape;
    IntList pads;
    std::string mode;
  };
  const std::vector<Case> cases = {
      {{3, 4, 5}, {1, 2}, "constant"},
      {{3, 4, 5}, {2, 1, 1, 3}, "constant"},
      {{3, 4, 5}, {-1, 2, 0, -2}, "constant"},
      {{3, 4, 5}, {0, 0, 0, 0, 0, 0}, "constant"},
      {{3, 4, 5}, {1, 1, 2, 0, 1, 2}, "constant"},
      {{3, 4, 5}, {-2, -3}, "constant"},
      {{3, 4, 5}, {2, 3}, "reflect"},
      {{3, 4, 5}, {4, 4, 1, 2}, "reflect"},
      {{3, 4, 5}, {-1, 3, 2, -1}, "reflect"},
      {{3, 4, 5}, {2, 4, 1, 0, 0, 1}, "replicate"},
      {{3, 4, 5}, {-2, 3}, "replicate"},
      {{3, 4, 5}, {2, 5, 1, 3}, "circular"},
      {{3, 4, 5}, {-1, 2}, "circular"},
      {{2, 1, 3, 2, 2, 3}, {1, 1, 0, 1, 1, 0, 1, 1}, "replicate"},
      {{}, {}, "constant"},
      // The last dim whole vectors and unpadded: the vector copy.
      {{1, 5, 5, 8}, {0, 0, 0, 2, 0, 2}, "constant"},
      {{3, 4, 8}, {0, 0, 2, 1, 1, 0}, "reflect"},
      {{2, 5, 16}, {0, 0, -1, 2}, "replicate"},
      {{3, 4, 8}, {0, 0, 3, 2}, "circular"},
  };
  const double value = dt() == DType::Bool ? 1.0 : dt() == DType::F32 || dt() == DType::F16 ? -2.5 : 7.0;
  uint32_t seed = 800;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " pad " + shape_str(c.pads) + " " + c.mode);
    Graph g(ctx());
    const auto x = random_values(size_t(numel(c.shape)), dt(), seed++);
    const Value v = c.mode == "constant" ? Value(value) : Value(None{});
    TensorRef y = ops::call(g, "aten.pad.default", {put(g, c.shape, dt(), x), c.pads, c.mode, v}).tensor();
    const size_t r = c.shape.size();
    Shape out = c.shape, lo(r, 0);
    for (size_t k = 0; k < c.pads.size() / 2; ++k) {
      lo[r - 1 - k] = c.pads[2 * k];
      out[r - 1 - k] += c.pads[2 * k] + c.pads[2 * k + 1];
    }
    ASSERT_EQ(g.info(y).shape, out);
    g.run();
    EXPECT_EQ(get(g, y), ref_map(out, x,
                                 [&](const Coords& o) -> int64_t {
                                   Coords s(r);
                                   for (size_t k = 0; k < r; ++k) {
                                     const int64_t m = c.shape[k];
                                     int64_t t = o[k] - lo[k];
                                     if (t >= 0 && t < m) {
                                       s[k] = t;
                                     } else if (c.mode == "constant") {
                                       return -1;
                                     } else if (c.mode == "reflect") {
                                       s[k] = t < 0 ? -t : 2 * (m - 1) - t;
                                     } else if (c.mode == "replicate") {
                                       s[k] = t < 0 ? 0 : m - 1;
                                     } else {
                                       s[k] = ((t % m) + m) % m;
                                     }
                                   }
                                   return ravel(s, c.shape);
                                 },
                                 value));
  }
}

TEST(Pad, KnownValues) {
  Graph g(ctx());
  TensorRef x = put(g, {3}, DType::F32, {1, 2, 3});
  TensorRef r = ops::call(g, "aten.pad.default", {x, IntList{1, 1}, std::string("reflect"), None{}}).tensor();
  TensorRef e = ops::call(g, "aten.pad.default", {x, IntList{2, 1}, std::string("replicate")}).tensor();
  TensorRef c = ops::call(g, "aten.pad.default", {x, IntList{2, 3}, std::string("circular")}).tensor();
  TensorRef k = ops::call(g, "aten.pad.default", {x, IntList{1, -1}, std::string("constant"), 9.0}).tensor();
  TensorRef z = ops::call(g, "aten.pad.default", {x, IntList{0, 2}}).tensor();  // mode and value default
  g.run();
  EXPECT_EQ(get(g, r), (std::vector<double>{2, 1, 2, 3, 2}));
  EXPECT_EQ(get(g, e), (std::vector<double>{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(get(g, c), (std::vector<double>{2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(get(g, k), (std::vector<double>{9, 1, 2}));
  EXPECT_EQ(get(g, z), (std::vector<double>{1, 2, 3, 0, 0}));
}

TEST(MovementOps, MovesBitsExactly) {
  // NaN payloads, -0, subnormals and infinities survive every copy.
  Graph g(ctx());
  const std::vector<uint32_t> f32 = {0x7fc00123u, 0x80000000u, 0x00000001u, 0x7f800000u,
                                     0xff800000u, 0x3f800000u, 0x807fffffu, 0xffc00000u};
  TensorRef x = g.add_tensor({2, 4}, DType::F32, TensorKind::Input);
  g.write(x, f32.data(), 32);
  TensorRef y = ops::call(g, "aten.permute.default", {x, IntList{1, 0}}).tensor();
  std::vector<uint16_t> f16;
  if (ctx().features().shader_f16) f16 = {0x7e01, 0x8000, 0x0001, 0x7c00, 0xfc00, 0x3c00, 0x83ff, 0xfe00};
  TensorRef xh{}, yh{};
  if (!f16.empty()) {
    xh = g.add_tensor({2, 4}, DType::F16, TensorKind::Input);
    g.write(xh, f16.data(), 16);
    yh = ops::call(g, "aten.permute.default", {xh, IntList{1, 0}}).tensor();
  }
  g.run();
  const auto got = g.read<uint32_t>(y);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(got[i], f32[(i % 2) * 4 + i / 2]) << i;
  if (!f16.empty()) {
    const auto goth = g.read<uint16_t>(yh);
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(goth[i], f16[(i % 2) * 4 + i / 2]) << i;
  }
}

TEST_P(Movement, TriuTril) {
  struct Case {
    Shape shape;
    int64_t diagonal;
  };
  const std::vector<Case> cases = {
      {{5, 7}, 0},  {{5, 7}, 2},     {{5, 7}, -3},   {{7, 5}, 1},    {{3, 4, 6}, 0}, {{2, 3, 5, 5}, -1},
      {{1, 1}, 0},  {{4, 4}, 100},   {{4, 4}, -100}, {{6, 3}, -6},   {{2, 0, 3}, 0}, {{33, 17}, 5},
  };
  uint32_t seed = 900;
  for (const Case& c : cases) {
    for (const bool upper : {true, false}) {
      SCOPED_TRACE(shape_str(c.shape) + (upper ? " triu " : " tril ") + std::to_string(c.diagonal));
      Graph g(ctx());
      const auto x = random_values(size_t(numel(c.shape)), dt(), seed++);
      TensorRef y = ops::call(g, upper ? "aten.triu.default" : "aten.tril.default",
                              {put(g, c.shape, dt(), x), c.diagonal})
                        .tensor();
      ASSERT_EQ(g.info(y).shape, c.shape);
      g.run();
      const size_t r = c.shape.size();
      EXPECT_EQ(get(g, y), ref_map(c.shape, x, [&](const Coords& o) -> int64_t {
                  const int64_t d = o[r - 1] - o[r - 2];
                  return (upper ? d >= c.diagonal : d <= c.diagonal) ? ravel(o, c.shape) : -1;
                }));
    }
  }
}

TEST(MovementOps, TriuDefaultDiagonalAndErrors) {
  Graph g(ctx());
  TensorRef x = put(g, {3, 3}, DType::F32, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  TensorRef u = ops::call(g, "aten.triu.default", {x}).tensor();
  TensorRef l = ops::call(g, "aten.tril.default", {x}).tensor();
  g.run();
  EXPECT_EQ(g.read<float>(u), (std::vector<float>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
  EXPECT_EQ(g.read<float>(l), (std::vector<float>{1, 0, 0, 4, 5, 0, 7, 8, 9}));
  Graph g2(ctx());
  try {
    ops::call(g2, "aten.triu.default", {g2.add_tensor({4}, DType::F32, TensorKind::Input), 0});
    ADD_FAILURE() << "no error for a 1-D self";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("aten.triu.default"));
    EXPECT_THAT(e.what(), HasSubstr("rank 2 or more"));
  }
}

TEST(MovementOps, MoreWorkgroupsThanOneGridDimension) {
  // 16.8M elements: 65625 workgroups of 256, beyond one grid dimension.
  Graph g(ctx());
  TensorRef x = put(g, {2, 1}, DType::I32, {5, -3});
  TensorRef y = ops::call(g, "aten.expand.default", {x, IntList{2, 8400000}}).tensor();
  g.run();
  const auto got = g.read<int32_t>(y);
  ASSERT_EQ(got.size(), 16800000u);
  EXPECT_EQ(std::count(got.begin(), got.begin() + 8400000, 5), 8400000);
  EXPECT_EQ(std::count(got.begin() + 8400000, got.end(), -3), 8400000);
}

TEST(MovementOps, ZeroSizeResultsRecordNoDispatch) {
  Graph g(ctx());
  TensorRef x = put(g, {3, 4}, DType::F32, std::vector<double>(12, 1.0));
  ops::call(g, "aten.slice.Tensor", {x, 1, 3, 1});
  ops::call(g, "aten.repeat.default", {x, IntList{0, 1}});
  ops::call(g, "aten.expand.default", {put(g, {1, 4}, DType::F32, std::vector<double>(4, 1.0)), IntList{0, 4}});
  ops::call(g, "aten.split_with_sizes.default", {x, IntList{0, 3}, 0});
  ops::call(g, "aten.pad.default", {x, IntList{-2, -2}});
  ops::call(g, "aten.index_select.default", {x, 0, put(g, {0}, DType::I64, {})});
  EXPECT_EQ(g.dispatches().size(), 0u);  // the split's 3-row part is all of x: a view
  g.run();
}

TEST(MovementOps, Errors) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({2, 3, 4}, DType::F32, TensorKind::Input);
  TensorRef s = g.add_tensor({}, DType::F32, TensorKind::Input);
  TensorRef xh = g.add_tensor({2, 3, 4}, DType::I64, TensorKind::Input);
  TensorRef fidx = g.add_tensor({2}, DType::F32, TensorKind::Input);
  TensorRef idx = g.add_tensor({2}, DType::I64, TensorKind::Input);
  TensorRef idx2 = g.add_tensor({2, 2}, DType::I64, TensorKind::Input);
  TensorRef big = g.add_tensor({1, 1, 1, 1, 1, 1, 1, 1}, DType::F32, TensorKind::Input);
  auto expect_error = [&](const std::string& op, const ValueList& args, const char* needle) {
    try {
      ops::call(g, op, args);
      ADD_FAILURE() << op << ": no error for " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(op));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  const std::string permute = "aten.permute.default", cat = "aten.cat.default",
                    split = "aten.split_with_sizes.default", slice = "aten.slice.Tensor",
                    isel = "aten.index_select.default", gather = "aten.gather.default",
                    expand = "aten.expand.default", repeat = "aten.repeat.default", pad = "aten.pad.default";
  expect_error(permute, {x, IntList{0, 1}}, "'dims' is [0, 1]; accepted: a permutation");
  expect_error(permute, {x, IntList{0, 1, 1}}, "a permutation");
  expect_error(permute, {x, IntList{0, 1, 3}}, "a permutation");
  expect_error(permute, {x, 3}, "a permutation");
  expect_error(permute, {x, std::string("x")}, "must be an IntList");
  expect_error(cat, {ValueList{}, 0}, "empty list");
  expect_error(cat, {x, 0}, "must be a ValueList");
  expect_error(cat, {ValueList{x, 1}, 0}, "element 1 must be a Tensor");
  expect_error(cat, {ValueList{x, xh}, 0}, "dtype int64");
  expect_error(cat, {ValueList{x, g.add_tensor({2, 4, 4}, DType::F32)}, 0}, "must match except in dim 0");
  expect_error(cat, {ValueList{x, g.add_tensor({2, 3}, DType::F32)}, 0}, "must match");
  expect_error(cat, {ValueList{x, x}, 3}, "'dim' is 3");
  expect_error(cat, {ValueList{s, s}, 0}, "zero-dimensional");
  expect_error(split, {x, IntList{1, 1}, 1}, "sum 2");
  expect_error(split, {x, IntList{4, -1}, 1}, "sizes >= 0");
  expect_error(split, {x, IntList{2}, -4}, "'dim' is -4");
  expect_error(slice, {x, 1, 0, 3, 0}, "'step' is 0");
  expect_error(slice, {x, 3, 0, 3, 1}, "'dim' is 3");
  expect_error(slice, {s, 0, 0, 1, 1}, "zero-dimensional");
  expect_error(slice, {x, 0, 0.5, 1, 1}, "'start' must be an Int");
  expect_error(isel, {x, 0, fidx}, "'index' has dtype float32; accepted: int32, int64");
  expect_error(isel, {x, 0, idx2}, "'index' has shape [2, 2]");
  expect_error(isel, {x, 5, idx}, "'dim' is 5");
  expect_error(isel, {s, 0, idx}, "exactly 1");
  expect_error(isel, {g.add_tensor({0, 2}, DType::F32), 0, idx}, "size 0");
  expect_error(gather, {x, 0, idx2}, "the rank of self");
  expect_error(gather, {x, 1, g.add_tensor({3, 3, 4}, DType::I32)}, "no larger than");
  expect_error(gather, {x, 0, g.add_tensor({2, 3, 4}, DType::Bool)}, "dtype bool");
  expect_error(expand, {x, IntList{3, 4}}, "at least the 3 dims");
  expect_error(expand, {x, IntList{2, 5, 4}}, "dim 1 asks for 5");
  expect_error(expand, {x, IntList{-1, 2, 3, 4}}, "new leading dim 0");
  expect_error(repeat, {x, IntList{2, 2}}, "at least the 3 dims");
  expect_error(repeat, {x, IntList{1, -1, 1}}, "counts >= 0");
  expect_error(pad, {x, IntList{1}}, "even number");
  expect_error(pad, {x, IntList{1, 1, 1, 1, 1, 1, 1, 1}}, "at most 2 per dim");
  expect_error(pad, {x, IntList{-5, 0}}, "negative size");
  expect_error(pad, {x, IntList{4, 0}, std::string("reflect")}, "smaller than the dim");
  expect_error(pad, {x, IntList{5, 0}, std::string("circular")}, "no larger than the dim");
  expect_error(pad, {x, IntList{1, 1}, std::string("edge")}, "'mode' is 'edge'; accepted");
  expect_error(pad, {x, IntList{1, 1}, std::string("reflect"), 1.0}, "takes no value");
  expect_error(pad, {xh, IntList{1, 1}, std::string("constant"), 1e12}, "takes values in");
  expect_error(pad, {g.add_tensor({2, 0}, DType::F32), IntList{1, 1}, std::string("replicate")}, "size 0");
  expect_error(expand, {big, IntList{2, 1, 1, 1, 1, 1, 1, 1, 1}}, "rank 9");
  expect_error(expand, {big, IntList{INT64_MAX, INT64_MAX, 4, 1, 1, 1, 1, 1}}, "more than 2147483647 elements");
  expect_error(repeat, {x, IntList{1 << 30, 1 << 30, 4}}, "more than 2147483647 elements");
  expect_error(pad, {x, IntList{INT64_MAX, INT64_MAX}}, "pads of at most");
  expect_error(split, {x, IntList{INT64_MAX, INT64_MAX, 2}, 2}, "sizes >= 0 that sum to 4");
  expect_error(permute, {g.add_tensor({1, 1, 1, 1, 1, 1, 1, 1, 1}, DType::F32), IntList{}}, "rank 9");
}

}  // namespace

// Slices that are one aligned contiguous block are views (no dispatch);
// concatenated intermediates are computed straight into their block of the
// result (Graph::alias_into) unless a dispatch would then bind the result's
// storage twice, or the block is not aligned.
namespace {

std::vector<float> relu_ref(const std::vector<float>& v) {
  std::vector<float> r(v);
  for (float& x : r) x = std::max(x, 0.f);
  return r;
}

}  // namespace

TEST(Views, AlignedChannelSliceIsAView) {
  Graph g(ctx());
  const Shape s{1, 8, 16, 16};  // 1 KiB per channel
  const auto xv = random_floats(size_t(numel(s)), -1, 1, 501);
  TensorRef x = upload(g, s, xv, DType::F32);
  TensorRef part = ops::call(g, "aten.slice.Tensor", {x, int64_t(1), int64_t(2), int64_t(5), int64_t(1)}).tensor();
  EXPECT_EQ(g.dispatches().size(), 0u);
  TensorRef y = ops::call(g, "aten.relu.default", {part}).tensor();
  g.mark_output(y);
  g.run();
  const std::vector<float> want = relu_ref(std::vector<float>(xv.begin() + 2 * 256, xv.begin() + 5 * 256));
  EXPECT_EQ(download(g, y), want);
  // 3x3 channels (36 bytes) are not aligned: a copy.
  Graph h(ctx());
  TensorRef x2 = upload(h, {1, 8, 3, 3}, random_floats(72, -1, 1, 502), DType::F32);
  ops::call(h, "aten.slice.Tensor", {x2, int64_t(1), int64_t(2), int64_t(5), int64_t(1)});
  EXPECT_EQ(h.dispatches().size(), 1u);
}

// A slice of a whole dim (step 1) and a pad of zero everywhere are the
// input itself (DaViT's window padding and crop where the windows divide the
// map): no dispatch, and a later op reads the input's values. A slice that
// drops one element or steps by 2, and a pad of one, still copy.
TEST(Views, WholeSliceAndZeroPadAreTheInput) {
  const Shape s{2, 6, 5, 4};
  const auto xv = random_floats(size_t(numel(s)), -1, 1, 505);
  std::vector<float> want = relu_ref(xv);
  for (int64_t dim : {0, 2, 3}) {
    SCOPED_TRACE(dim);
    Graph g(ctx());
    TensorRef x = upload(g, s, xv, DType::F32);
    TensorRef part =
        ops::call(g, "aten.slice.Tensor", {x, dim, int64_t(0), s[size_t(dim)], int64_t(1)}).tensor();
    TensorRef padded = ops::call(g, "aten.pad.default", {part, IntList{0, 0, 0, 0, 0, 0}}).tensor();
    EXPECT_EQ(g.dispatches().size(), 0u);
    EXPECT_EQ(g.info(padded).shape, s);
    TensorRef y = ops::call(g, "aten.relu.default", {padded}).tensor();
    g.mark_output(y);
    g.run();
    EXPECT_EQ(download(g, y), want);
  }
  Graph h(ctx());
  TensorRef x = upload(h, s, xv, DType::F32);
  ops::call(h, "aten.slice.Tensor", {x, int64_t(2), int64_t(0), int64_t(4), int64_t(1)});
  ops::call(h, "aten.slice.Tensor", {x, int64_t(2), int64_t(0), int64_t(5), int64_t(2)});
  ops::call(h, "aten.pad.default", {x, IntList{0, 1}});
  EXPECT_EQ(h.dispatches().size(), 3u);
}

// A split along the first dim whose parts are aligned blocks (DaViT's q, k
// and v) makes views, no dispatch; unaligned parts are copied.
TEST(Views, SplitIntoAlignedBlocksMakesViews) {
  const Shape s{3, 2, 64, 32};  // 16 KiB a part
  const auto xv = random_floats(size_t(numel(s)), -1, 1, 506);
  Graph g(ctx());
  TensorRef x = upload(g, s, xv, DType::F32);
  const Value parts = ops::call(g, "aten.split_with_sizes.default", {x, IntList{1, 1, 1}, int64_t(0)});
  EXPECT_EQ(g.dispatches().size(), 0u);
  std::vector<TensorRef> ys;
  for (const Value& p : parts.list()) {
    ys.push_back(ops::call(g, "aten.relu.default", {p.tensor()}).tensor());
    g.mark_output(ys.back());
  }
  g.run();
  const size_t n = size_t(numel(s)) / 3;
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(download(g, ys[k]), relu_ref(std::vector<float>(xv.begin() + long(k * n), xv.begin() + long((k + 1) * n))))
        << "part " << k;
  }
  // 3x3 floats a part (36 bytes) are not aligned: copies.
  Graph h(ctx());
  TensorRef x2 = upload(h, {3, 3, 3}, random_floats(27, -1, 1, 507), DType::F32);
  ops::call(h, "aten.split_with_sizes.default", {x2, IntList{1, 1, 1}, int64_t(0)});
  EXPECT_EQ(h.dispatches().size(), 3u);
}

TEST(Views, ConcatenatedIntermediatesAreWrittenInPlace) {
  Graph g(ctx());
  const Shape s{1, 4, 16, 16};
  const auto av = random_floats(size_t(numel(s)), -1, 1, 503), bv = random_floats(size_t(numel(s)), -1, 1, 504);
  TensorRef a = upload(g, s, av, DType::F32), b = upload(g, s, bv, DType::F32);
  TensorRef ra = ops::call(g, "aten.relu.default", {a}).tensor();
  TensorRef nb = ops::call(g, "aten.neg.default", {b}).tensor();
  // ra2 reads ra and is written by one dispatch: placing it too would bind
  // the result's storage twice in that dispatch, so it is copied.
  TensorRef ra2 = ops::call(g, "aten.add.Tensor", {ra, ra}).tensor();
  TensorRef y = ops::call(g, "aten.cat.default", {ValueList{ra, nb, ra2, a}, int64_t(1)}).tensor();
  // ra is read again after the concatenation.
  TensorRef z = ops::call(g, "aten.neg.default", {ra}).tensor();
  // relu, neg, add, then copies of ra2 and of the input a only.
  EXPECT_EQ(g.dispatches().size(), 6u);
  g.mark_output(y);
  g.mark_output(z);
  g.run();
  const size_t n = size_t(numel(s));
  std::vector<float> want;
  const auto rav = relu_ref(av);
  want.insert(want.end(), rav.begin(), rav.end());
  for (float v : bv) want.push_back(-v);
  for (float v : rav) want.push_back(v + v);
  want.insert(want.end(), av.begin(), av.end());
  EXPECT_EQ(download(g, y), want);
  std::vector<float> wz(n);
  for (size_t i = 0; i < n; ++i) wz[i] = -rav[i];
  EXPECT_EQ(download(g, z), wz);
}

TEST(Views, UnalignedOrBatchedConcatenationsCopy) {
  for (const Shape& s : {Shape{1, 2, 3, 3}, Shape{2, 4, 16, 16}}) {
    SCOPED_TRACE(shape_str(s));
    Graph g(ctx());
    const auto av = random_floats(size_t(numel(s)), -1, 1, 505);
    TensorRef a = upload(g, s, av, DType::F32);
    TensorRef r1 = ops::call(g, "aten.relu.default", {a}).tensor();
    TensorRef r2 = ops::call(g, "aten.neg.default", {a}).tensor();
    TensorRef y = ops::call(g, "aten.cat.default", {ValueList{r1, r2}, int64_t(1)}).tensor();
    EXPECT_EQ(g.dispatches().size(), 3u);  // relu, neg, one dispatch copying both
    g.mark_output(y);
    g.run();
    const auto out = download(g, y);
    const int64_t per = numel(s) / s[0];
    for (int64_t b = 0; b < s[0]; ++b)
      for (int64_t i = 0; i < per; ++i) {
        const float v = av[size_t(b * per + i)];
        EXPECT_EQ(out[size_t(b * 2 * per + i)], std::max(v, 0.f));
        EXPECT_EQ(out[size_t(b * 2 * per + per + i)], -v);
      }
  }
}

// The same intermediate twice (rotary's cat([freqs, freqs]) at one token),
// or an intermediate and a view of it: placing the first in the result would
// make the second's copy read the result's storage while writing it (a
// WebGPU validation error at submit). Both are copied (by one dispatch,
// which binds the storage twice, read-only), and the values hold.
TEST(Views, AnInputTwiceOrWithItsViewIsCopied) {
  const Shape s{1, 1, 32};  // 128 bytes: aligned enough to be placed
  const auto av = random_floats(size_t(numel(s)), -1, 1, 508);
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant);
    Graph g(ctx());
    TensorRef a = upload(g, s, av, DType::F32);
    TensorRef r = ops::call(g, "aten.relu.default", {a}).tensor();
    TensorRef second = variant == 0 ? r : g.add_view(r, s);
    TensorRef y = ops::call(g, "aten.cat.default", {ValueList{r, second}, int64_t(-1)}).tensor();
    EXPECT_EQ(g.dispatches().size(), 2u);  // relu, one dispatch copying both (the same storage read twice)
    g.mark_output(y);
    g.run();
    std::vector<float> want = relu_ref(av);
    want.insert(want.end(), want.begin(), want.end());
    EXPECT_EQ(download(g, y), want);
  }
}

// Placing a concatenation's input in the result or copying it is a choice
// of the plan's structure (Graph::choose). A size that replays a copy where
// its own sizes allow a placement copies as the first size did: the same
// structure, one plan. A size that replays a placement its sizes do not
// allow copies, and the replay ends there: a structure of its own. Every
// size computes its own values.
TEST(Views, AReplayedConcatenationCopiesWhereItsFirstSizeCopied) {
  const uint64_t align = std::max<uint64_t>(ctx().limits().min_storage_buffer_offset_alignment, 16);
  // Elements of each input: 8 bytes past a multiple of 16 cannot be placed
  // (nor can what follows it), whatever the device's offset alignment.
  const int64_t aligned = int64_t(align / 4) * 2, unaligned = aligned + 2;
  struct Rec {
    TensorRef x, y;
  };
  auto record = [](Graph& g, int64_t n) {
    TensorRef x = g.add_tensor({1, n}, DType::F32, TensorKind::Input, "x");
    TensorRef r1 = ops::call(g, "aten.relu.default", {x}).tensor();
    TensorRef r2 = ops::call(g, "aten.neg.default", {x}).tensor();
    TensorRef y = ops::call(g, "aten.cat.default", {ValueList{r1, r2}, int64_t(1)}).tensor();
    g.mark_output(y);
    return Rec{x, y};
  };
  auto check = [](Graph& g, const Rec& r, int64_t n, uint32_t seed) {
    const auto xv = random_floats(size_t(n), -1, 1, seed);
    g.write(r.x, xv.data(), xv.size() * 4);
    g.run();
    std::vector<float> want = relu_ref(xv);
    for (float v : xv) want.push_back(-v);
    EXPECT_EQ(download(g, r.y), want) << n << " elements";
  };
  Graph first_unaligned(ctx()), replayed_aligned(ctx()), own_aligned(ctx());
  const Rec a = record(first_unaligned, unaligned);
  replayed_aligned.replay_choices(std::make_shared<const PlanChoices>(first_unaligned.choices()));
  const Rec b = record(replayed_aligned, aligned);
  const Rec c = record(own_aligned, aligned);
  EXPECT_EQ(first_unaligned.dispatches().size(), 3u) << "relu, neg, one copy of both";
  EXPECT_EQ(own_aligned.dispatches().size(), 2u) << "both placed: no copy";
  EXPECT_TRUE(replayed_aligned.replay_followed());
  EXPECT_EQ(replayed_aligned.structure(), first_unaligned.structure());
  EXPECT_NE(own_aligned.structure(), first_unaligned.structure());
  check(first_unaligned, a, unaligned, 601);
  check(replayed_aligned, b, aligned, 602);
  check(own_aligned, c, aligned, 603);

  Graph replayed_unaligned(ctx());
  replayed_unaligned.replay_choices(std::make_shared<const PlanChoices>(own_aligned.choices()));
  const Rec d = record(replayed_unaligned, unaligned);
  EXPECT_FALSE(replayed_unaligned.replay_followed()) << "the inputs cannot be placed at this size";
  EXPECT_EQ(replayed_unaligned.structure(), first_unaligned.structure());
  check(replayed_unaligned, d, unaligned, 604);
}

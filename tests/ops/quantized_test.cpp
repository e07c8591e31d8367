// The quantized ops (ops/quantized.cpp) against C++ references written from
// ONNX's definitions: quantize (round half to even, saturation, zero
// points of both signs) and dequantize per tensor, per axis on different
// axes and blocked; DynamicQuantizeLinear; integer products and
// convolutions with zero points per tensor, row, column and channel, and
// their requantized (QLinear) forms. Integer results must be equal.
// MatMulNBits (4-bit weights in blocks) against a double-precision product
// of the weights dequantized from the packed bytes.
#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "error_of.h"
#include "op_test_util.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

using Ints = std::vector<int32_t>;

TensorRef upload_ints(Graph& g, const Shape& s, const Ints& v, DType dt, TensorKind kind = TensorKind::Input) {
  TensorRef t = g.add_tensor(s, dt, kind);
  if (dt == DType::U8) {
    std::vector<uint8_t> b(v.begin(), v.end());
    g.write(t, b.data(), b.size());
  } else if (dt == DType::I8) {
    std::vector<int8_t> b(v.begin(), v.end());
    g.write(t, b.data(), b.size());
  } else {
    g.write(t, v.data(), v.size() * 4);
  }
  return t;
}

Ints read_ints(Graph& g, TensorRef t) {
  const DType dt = g.info(t).dtype;
  if (dt == DType::U8) {
    auto b = g.read<uint8_t>(t);
    return Ints(b.begin(), b.end());
  }
  if (dt == DType::I8) {
    auto b = g.read<int8_t>(t);
    return Ints(b.begin(), b.end());
  }
  return g.read<int32_t>(t);
}

Ints random_ints(size_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  Ints v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::pair<int, int> range_of(DType d) { return d == DType::U8 ? std::pair{0, 255} : std::pair{-128, 127}; }
int64_t code_of(DType d) { return d == DType::U8 ? 0 : 1; }

// ONNX QuantizeLinear: saturate(round_half_even(x / scale) + zero_point),
// the quotient in float32.
int32_t ref_quantize(float x, float scale, int32_t zp, DType d) {
  const float q = x / scale;
  const double r = std::nearbyint(double(q)) + zp;  // default rounding: to nearest even
  const auto [lo, hi] = range_of(d);
  return int32_t(std::clamp(r, double(lo), double(hi)));
}

// The index of the scale of element i (per tensor: 0; per axis: along
// `axis`; blocked: the block of `block` along axis).
struct Layout {
  Shape x;
  int axis = -1;  // -1: per tensor
  int64_t block = 0;
  size_t scale_index(size_t i, Shape* sshape = nullptr) const {
    if (axis < 0) return 0;
    int64_t inner = 1;
    for (size_t d = size_t(axis) + 1; d < x.size(); ++d) inner *= x[d];
    const int64_t dim = x[size_t(axis)];
    const int64_t a = (int64_t(i) / inner) % dim;
    if (block == 0) return size_t(a);
    const int64_t sdim = (dim + block - 1) / block;
    const int64_t o = int64_t(i) / (inner * dim), r = int64_t(i) % inner;
    (void)sshape;
    return size_t((o * sdim + a / block) * inner + r);
  }
  Shape scale_shape() const {
    if (axis < 0) return {};
    if (block == 0) return {x[size_t(axis)]};
    Shape s = x;
    s[size_t(axis)] = (s[size_t(axis)] + block - 1) / block;
    return s;
  }
};

void check_quantize(const Layout& l, DType qd, uint32_t seed, bool with_zp = true) {
  SCOPED_TRACE(shape_str(l.x) + " axis " + std::to_string(l.axis) + " block " + std::to_string(l.block) + " " +
               dtype_name(qd));
  Graph g(ctx());
  const size_t n = size_t(numel(l.x)), ns = size_t(numel(l.scale_shape()));
  std::vector<float> x = random_floats(n, -300, 300, seed);
  std::vector<float> s = random_floats(ns, 0.05f, 2.f, seed + 1);
  const auto [lo, hi] = range_of(qd);
  Ints zp = random_ints(ns, qd == DType::U8 ? 0 : -20, qd == DType::U8 ? 255 : 20, seed + 2);
  if (!with_zp) std::fill(zp.begin(), zp.end(), 0);
  // Exact ties: x = (k + 0.5) * scale with a scale of 0.5 or 0.25.
  for (size_t i = 0; i < n; i += 3) {
    const size_t si = l.scale_index(i);
    s[si] = si % 2 ? 0.5f : 0.25f;
    x[i] = (float(int(i % 11) - 5) + 0.5f) * s[si];
  }
  const Shape ss = l.scale_shape();
  TensorRef xt = upload(g, l.x, x, DType::F32);
  TensorRef st = constant(g, ss, s, DType::F32);
  Value zt = with_zp ? Value(upload_ints(g, ss, zp, qd, TensorKind::Constant)) : Value(None{});
  Value y;
  if (l.axis < 0) {
    y = ops::call(g, "quantized_decomposed.quantize_per_tensor.tensor", {xt, st, zt, lo, hi, code_of(qd)});
  } else if (l.block == 0) {
    y = ops::call(g, "quantized_decomposed.quantize_per_channel.default", {xt, st, zt, l.axis, lo, hi, code_of(qd)});
  } else {
    y = ops::call(g, "wgnn.quantize_blocked.default", {xt, st, zt, l.axis, l.block, lo, hi, code_of(qd)});
  }
  EXPECT_EQ(g.info(y.tensor()).dtype, qd);
  g.run();
  Ints ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = ref_quantize(x[i], s[l.scale_index(i)], zp[l.scale_index(i)], qd);
  EXPECT_EQ(read_ints(g, y.tensor()), ref);
  // Saturation happened at both ends (the data spans well beyond the range).
  const Ints got = read_ints(g, y.tensor());
  if (n < 100) return;
  EXPECT_NE(std::find(got.begin(), got.end(), lo), got.end());
  EXPECT_NE(std::find(got.begin(), got.end(), hi), got.end());
}

void check_dequantize(const Layout& l, DType qd, uint32_t seed) {
  SCOPED_TRACE(shape_str(l.x) + " axis " + std::to_string(l.axis) + " block " + std::to_string(l.block) + " " +
               dtype_name(qd));
  Graph g(ctx());
  const size_t n = size_t(numel(l.x)), ns = size_t(numel(l.scale_shape()));
  const auto [lo, hi] = qd == DType::I32 ? std::pair{-100000, 100000} : range_of(qd);
  const Ints q = random_ints(n, lo, hi, seed);
  const std::vector<float> s = random_floats(ns, 0.001f, 3.f, seed + 1);
  const Ints zp = qd == DType::I32 ? Ints(ns, 0) : random_ints(ns, lo, hi, seed + 2);
  const Shape ss = l.scale_shape();
  TensorRef qt = upload_ints(g, l.x, q, qd);
  TensorRef st = constant(g, ss, s, DType::F32);
  TensorRef zt = upload_ints(g, ss, zp, qd, TensorKind::Constant);
  const int64_t code = qd == DType::I32 ? 3 : code_of(qd);
  Value y;
  if (l.axis < 0) {
    y = ops::call(g, "quantized_decomposed.dequantize_per_tensor.tensor", {qt, st, zt, lo, hi, code});
  } else if (l.block == 0) {
    y = ops::call(g, "quantized_decomposed.dequantize_per_channel.default", {qt, st, zt, l.axis, lo, hi, code});
  } else {
    y = ops::call(g, "wgnn.dequantize_blocked.default", {qt, st, zt, l.axis, l.block, lo, hi, code});
  }
  g.run();
  const std::vector<float> got = download(g, y.tensor());
  ASSERT_EQ(got.size(), n);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t si = l.scale_index(i);
    const float want = float(q[i] - zp[si]) * s[si];  // ONNX: (x - zero_point) * scale
    if (got[i] != want && bad++ < 5) ADD_FAILURE() << "[" << i << "] got " << got[i] << " want " << want;
  }
}

}  // namespace

TEST(Quantize, PerTensorTiesAndSaturation) {
  check_quantize({{1000}}, DType::U8, 1);
  check_quantize({{7, 13}}, DType::I8, 2);
  check_quantize({{3, 5, 7}}, DType::U8, 3, false);
  check_quantize({{3, 5, 7}}, DType::I8, 4, false);
}

TEST(Quantize, TiesGoToEven) {
  Graph g(ctx());
  const std::vector<float> x = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, -3.5f, 0.f, -0.f, 1e9f, -1e9f};
  TensorRef y = ops::call(g, "quantized_decomposed.quantize_per_tensor.tensor",
                          {upload(g, {12}, x, DType::F32), constant(g, {}, {1.f}, DType::F32),
                           upload_ints(g, {}, {-3}, DType::I8, TensorKind::Constant), -128, 127, int64_t(1)})
                    .tensor();
  g.run();
  EXPECT_EQ(read_ints(g, y), (Ints{0 - 3, 2 - 3, 2 - 3, 0 - 3, -2 - 3, -2 - 3, 4 - 3, -4 - 3, -3, -3, 127, -128}));
}

// Quotients within an ULP of a half-integer, scales with full 24-bit
// mantissas: the result must be that of IEEE division (a GPU whose f32
// division is off by up to 2.5 ULP, as WGSL allows and NVIDIA's is, puts
// some of these on the wrong side unless the rounding is decided exactly).
TEST(Quantize, NearTiesAsIeeeDivisionRounds) {
  const std::vector<float> scales = random_floats(64, 0.001f, 3.f, 91);
  std::vector<float> x, s;
  for (size_t j = 0; j < scales.size(); ++j) {
    for (int k = -130; k <= 130; k += 7) {
      const float t = float((double(k) + 0.5) * double(scales[j]));
      for (float v : {std::nextafter(t, -1e30f), t, std::nextafter(t, 1e30f)}) {
        x.push_back(v);
        s.push_back(scales[j]);
      }
    }
  }
  const size_t per = x.size() / scales.size();
  Graph g(ctx());
  TensorRef y = ops::call(g, "quantized_decomposed.quantize_per_channel.default",
                          {upload(g, {int64_t(scales.size()), int64_t(per)}, x, DType::F32),
                           constant(g, {int64_t(scales.size())}, scales, DType::F32),
                           upload_ints(g, {int64_t(scales.size())}, Ints(scales.size(), 0), DType::I8,
                                       TensorKind::Constant),
                           int64_t(0), -128, 127, int64_t(1)})
                    .tensor();
  g.run();
  const Ints got = read_ints(g, y);
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const int32_t want = ref_quantize(x[i], s[i], 0, DType::I8);
    if (got[i] != want && bad++ < 5) ADD_FAILURE() << "x " << x[i] << " / " << s[i] << ": got " << got[i] << " want " << want;
  }
  EXPECT_EQ(bad, 0u) << "of " << x.size();
}

TEST(Quantize, PerAxisOnEveryAxis) {
  for (int axis = 0; axis < 3; ++axis) {
    check_quantize({{3, 5, 7}, axis}, DType::U8, 10 + uint32_t(axis));
    check_quantize({{3, 5, 7}, axis}, DType::I8, 20 + uint32_t(axis));
  }
  check_quantize({{1, 9}, 1}, DType::I8, 30);
}

TEST(Quantize, Blocked) {
  check_quantize({{4, 10}, 1, 4}, DType::U8, 40);  // a last block of 2
  check_quantize({{6, 5}, 0, 3}, DType::I8, 41);
  check_quantize({{2, 7, 3}, 1, 2}, DType::I8, 42);
}

TEST(Dequantize, PerTensorAxisBlockedInt32) {
  check_dequantize({{5, 7}}, DType::U8, 50);
  check_dequantize({{5, 7}}, DType::I8, 51);
  check_dequantize({{101}}, DType::I32, 52);
  for (int axis = 0; axis < 3; ++axis) {
    check_dequantize({{3, 5, 7}, axis}, DType::U8, 53 + uint32_t(axis));
    check_dequantize({{3, 5, 7}, axis}, DType::I8, 56 + uint32_t(axis));
  }
  check_dequantize({{4, 10}, 1, 4}, DType::I8, 60);
  check_dequantize({{9, 2}, 0, 4}, DType::U8, 61);
}

TEST(Dequantize, Float16Result) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  Graph g(ctx());
  TensorRef y = ops::call(g, "quantized_decomposed.dequantize_per_tensor.tensor",
                          {upload_ints(g, {4}, {0, 10, 255, 128}, DType::U8), constant(g, {}, {0.5f}, DType::F32),
                           upload_ints(g, {}, {128}, DType::U8, TensorKind::Constant), 0, 255, int64_t(0), int64_t(5)})
                    .tensor();
  EXPECT_EQ(g.info(y).dtype, DType::F16);
  g.run();
  EXPECT_EQ(download(g, y), (std::vector<float>{-64.f, -59.f, 63.5f, 0.f}));
}

namespace {

// ONNX DynamicQuantizeLinear in float32.
void ref_dynamic(const std::vector<float>& x, float& scale, int32_t& zp, Ints& y) {
  float mn = 0, mx = 0;
  for (float v : x) {
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  scale = (mx - mn) / 255.f;
  zp = scale == 0 ? 0 : int32_t(std::nearbyint(std::clamp(0.f - mn / scale, 0.f, 255.f)));
  y.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = scale == 0 ? zp : ref_quantize(x[i], scale, zp, DType::U8);
}

void check_dynamic(const std::vector<float>& x) {
  Graph g(ctx());
  const ValueList r =
      ops::call(g, "wgnn.dynamic_quantize_linear.default", {upload(g, {int64_t(x.size())}, x, DType::F32)}).list();
  g.run();
  float scale;
  int32_t zp;
  Ints y;
  ref_dynamic(x, scale, zp, y);
  EXPECT_EQ(g.read<float>(r[1].tensor())[0], scale);
  EXPECT_EQ(read_ints(g, r[2].tensor())[0], zp);
  EXPECT_EQ(read_ints(g, r[0].tensor()), y);
}

}  // namespace

TEST(DynamicQuantizeLinear, RangesWithZero) {
  check_dynamic(random_floats(1001, -3, 7, 70));
  check_dynamic(random_floats(257, 1, 9, 71));     // all positive: min adjusted to 0
  check_dynamic(random_floats(33, -9, -2, 72));    // all negative: max adjusted to 0
  check_dynamic(std::vector<float>(19, 0.f));      // all zeros: scale 0
  check_dynamic({0.f, 2.f, -3.f, -1.5f, 4.f, 10.f});
  // Scales (max - min) / 255 as IEEE division rounds them, over many ranges.
  const std::vector<float> ends = random_floats(80, -50, 50, 73);
  for (size_t i = 0; i + 1 < ends.size(); i += 2) check_dynamic({ends[i], ends[i + 1], 0.25f * ends[i]});
}

namespace {

struct MatmulCase {
  int64_t ba, bb, M, K, N;
  DType da, db;
  bool a_rows, b_cols;  // zero points per row / column
};

// With `scale_inputs`, the scales are graph inputs (their packing runs on
// every run, not once at prepare()).
void check_matmul_integer(const MatmulCase& m, uint32_t seed, bool requant, bool scale_inputs = false) {
  SCOPED_TRACE(fmt::format("[{},{},{}] x [{},{},{}] {} {} rows {} cols {} requant {}", m.ba, m.M, m.K, m.bb, m.K, m.N,
                           dtype_name(m.da), dtype_name(m.db), m.a_rows, m.b_cols, requant));
  Graph g(ctx());
  const int64_t B = std::max(m.ba, m.bb);
  const auto [alo, ahi] = range_of(m.da);
  const auto [blo, bhi] = range_of(m.db);
  const Ints a = random_ints(size_t(m.ba * m.M * m.K), alo, ahi, seed);
  const Ints b = random_ints(size_t(m.bb * m.K * m.N), blo, bhi, seed + 1);
  const int64_t nza = m.a_rows ? m.M : 1, nzb = m.b_cols ? m.N : 1;
  const Ints za = random_ints(size_t(nza), alo, ahi, seed + 2), zb = random_ints(size_t(nzb), blo, bhi, seed + 3);
  TensorRef at = upload_ints(g, {m.ba, m.M, m.K}, a, m.da), bt = upload_ints(g, {m.bb, m.K, m.N}, b, m.db);
  TensorRef zat = upload_ints(g, {nza}, za, m.da, TensorKind::Constant);
  TensorRef zbt = upload_ints(g, {nzb}, zb, m.db, TensorKind::Constant);
  std::vector<float> sa = random_floats(size_t(nza), 0.01f, 0.1f, seed + 4), sb = random_floats(size_t(nzb), 0.01f, 0.1f, seed + 5);
  const float sy = 0.37f;
  const int32_t zy = 7;
  TensorRef y;
  if (requant) {
    auto scale = [&](const Shape& sh, const std::vector<float>& v) {
      return scale_inputs ? upload(g, sh, v, DType::F32) : constant(g, sh, v, DType::F32);
    };
    y = ops::call(g, "wgnn.qlinear_matmul.default",
                  {at, scale({nza}, sa), zat, bt, scale({nzb}, sb), zbt, scale({}, {sy}),
                   upload_ints(g, {}, {zy}, DType::I8, TensorKind::Constant)})
            .tensor();
  } else {
    y = ops::call(g, "wgnn.matmul_integer.default", {at, bt, zat, zbt}).tensor();
  }
  EXPECT_EQ(g.info(y).shape, (Shape{B, m.M, m.N}));
  // The packed dot-product kernel where the adapter offers it and
  // WGNN_DOT4 is not 0, else the unpacked one.
  const char* env = wgnn::test::ctx().settings().get("WGNN_DOT4");
  const bool want_dot4 = ctx().features().packed_4x8_dot && !(env && std::string(env) == "0");
  bool dot4 = false;
  for (const auto& d : g.dispatches()) dot4 |= d.label.find("matmul_integer dot4") != std::string::npos;
  EXPECT_EQ(dot4, want_dot4);
  g.run();
  Ints ref(size_t(B * m.M * m.N));
  for (int64_t bi = 0; bi < B; ++bi) {
    const int64_t oa = m.ba == 1 ? 0 : bi * m.M * m.K, ob = m.bb == 1 ? 0 : bi * m.K * m.N;
    for (int64_t i = 0; i < m.M; ++i) {
      for (int64_t j = 0; j < m.N; ++j) {
        int64_t acc = 0;
        const int32_t zai = za[size_t(m.a_rows ? i : 0)], zbj = zb[size_t(m.b_cols ? j : 0)];
        for (int64_t k = 0; k < m.K; ++k) {
          acc += int64_t(a[size_t(oa + i * m.K + k)] - zai) * int64_t(b[size_t(ob + k * m.N + j)] - zbj);
        }
        int32_t v = int32_t(acc);
        if (requant) {
          const float ms = sa[size_t(m.a_rows ? i : 0)] * sb[size_t(m.b_cols ? j : 0)] / sy;
          v = int32_t(std::clamp(std::nearbyint(double(float(acc) * ms)) + zy, -128.0, 127.0));
        }
        ref[size_t((bi * m.M + i) * m.N + j)] = v;
      }
    }
  }
  EXPECT_EQ(read_ints(g, y), ref);
}

}  // namespace

TEST(MatmulInteger, ZeroPointsPerTensorRowColumn) {
  check_matmul_integer({1, 1, 5, 7, 3, DType::U8, DType::U8, false, false}, 80, false);
  check_matmul_integer({1, 1, 17, 33, 19, DType::U8, DType::I8, true, true}, 81, false);
  check_matmul_integer({3, 1, 16, 32, 16, DType::I8, DType::I8, false, true}, 82, false);
  check_matmul_integer({1, 4, 2, 300, 31, DType::I8, DType::U8, true, false}, 83, false);
  check_matmul_integer({2, 2, 1, 1, 1, DType::U8, DType::U8, false, false}, 84, false);
}

// The same products through the unpacked kernel (WGNN_DOT4=0), which
// adapters without packed_4x8_integer_dot_product run; the tests above take
// the packed one where it is offered.
TEST(MatmulInteger, UnpackedFallback) {
  if (!ctx().features().packed_4x8_dot) std::printf("note: this adapter lacks packed_4x8_integer_dot_product: every test here runs unpacked\n");
  wgnn::test::ctx().mutable_settings().set("WGNN_DOT4", "0");
  check_matmul_integer({1, 1, 17, 33, 19, DType::U8, DType::I8, true, true}, 81, false);
  check_matmul_integer({1, 4, 2, 300, 31, DType::I8, DType::U8, true, false}, 83, false);
  check_matmul_integer({2, 1, 17, 40, 19, DType::U8, DType::I8, true, true}, 91, true);
  wgnn::test::ctx().mutable_settings().unset("WGNN_DOT4");
}

TEST(QLinearMatmul, Requantized) {
  check_matmul_integer({1, 1, 5, 7, 3, DType::U8, DType::U8, false, false}, 90, true);
  check_matmul_integer({2, 1, 17, 40, 19, DType::U8, DType::I8, true, true}, 91, true);
  check_matmul_integer({1, 3, 9, 64, 33, DType::I8, DType::I8, false, true}, 92, true);
  check_matmul_integer({2, 1, 17, 40, 19, DType::U8, DType::I8, true, true}, 93, true, true);
}

namespace {

struct ConvCase {
  Shape x, w;  // x [N, C, spatial...], w [Co, C / groups, kernel...]
  IntList stride, pad, dil;  // pad: begins, then ends
  int64_t groups;
  DType dx, dw;
  bool w_chan;  // w zero point (and scale) per output channel
};

// One convolution through one kernel: the tiled implicit GEMM (where it
// applies: more than one input channel per group), or with `direct`
// (WGNN_CONV_INTEGER=direct) the direct kernel, against the reference.
void check_conv_path(const ConvCase& cc, uint32_t seed, bool requant, bool direct) {
  SCOPED_TRACE(fmt::format("x {} w {} groups {} requant {} direct {}", shape_str(cc.x), shape_str(cc.w), cc.groups,
                           requant, direct));
  if (direct) wgnn::test::ctx().mutable_settings().set("WGNN_CONV_INTEGER", "direct");
  Graph g(ctx());
  const int d = int(cc.x.size()) - 2;
  const auto [xlo, xhi] = range_of(cc.dx);
  const auto [wlo, whi] = range_of(cc.dw);
  const Ints x = random_ints(size_t(numel(cc.x)), xlo, xhi, seed), w = random_ints(size_t(numel(cc.w)), wlo, whi, seed + 1);
  const int64_t Co = cc.w[0], nzw = cc.w_chan ? Co : 1;
  const Ints zx = random_ints(1, xlo, xhi, seed + 2), zw = random_ints(size_t(nzw), wlo, whi, seed + 3);
  const Ints bias = random_ints(size_t(Co), -5000, 5000, seed + 4);
  const std::vector<float> sx = {0.02f}, sw = random_floats(size_t(nzw), 0.005f, 0.05f, seed + 5);
  const float sy = 0.25f;
  const int32_t zy = 100;
  TensorRef xt = upload_ints(g, cc.x, x, cc.dx), wt = upload_ints(g, cc.w, w, cc.dw, TensorKind::Constant);
  TensorRef zxt = upload_ints(g, {}, zx, cc.dx, TensorKind::Constant), zwt = upload_ints(g, {nzw}, zw, cc.dw, TensorKind::Constant);
  TensorRef y;
  if (requant) {
    y = ops::call(g, "wgnn.qlinear_conv.default",
                  {xt, constant(g, {}, sx, DType::F32), zxt, wt, constant(g, {nzw}, sw, DType::F32), zwt,
                   constant(g, {}, {sy}, DType::F32), upload_ints(g, {}, {zy}, DType::U8, TensorKind::Constant),
                   upload_ints(g, {Co}, bias, DType::I32, TensorKind::Constant), cc.stride, cc.pad, cc.dil, cc.groups})
            .tensor();
  } else {
    y = ops::call(g, "wgnn.conv_integer.default", {xt, wt, zxt, zwt, cc.stride, cc.pad, cc.dil, cc.groups}).tensor();
  }
  wgnn::test::ctx().mutable_settings().unset("WGNN_CONV_INTEGER");
  const bool want_tiled = !direct && cc.w[1] > 1;
  int tiled = 0, convs = 0;
  for (const auto& dsp : g.dispatches()) {
    if (dsp.label.rfind(requant ? "qlinear_conv" : "conv_integer", 0) != 0) continue;
    ++convs;
    tiled += dsp.label.find(" gemm ") != std::string::npos;
  }
  EXPECT_EQ(convs, 1);
  EXPECT_EQ(tiled, want_tiled ? 1 : 0);
  g.run();
  // Reference over D x H x W (missing dims 1).
  auto dim3 = [&](const Shape& s, int j) { return j < 3 - d ? int64_t(1) : s[size_t(2 + j - (3 - d))]; };
  auto par3 = [&](const IntList& v, int j, int64_t def) { return j < 3 - d ? def : v[size_t(j - (3 - d))]; };
  int64_t in[3], k[3], st[3], pb[3], pe[3], dl[3], o[3];
  for (int j = 0; j < 3; ++j) {
    in[j] = dim3(cc.x, j);
    k[j] = dim3(cc.w, j);
    st[j] = par3(cc.stride, j, 1);
    dl[j] = par3(cc.dil, j, 1);
    pb[j] = j < 3 - d ? 0 : cc.pad[size_t(j - (3 - d))];
    pe[j] = j < 3 - d ? 0 : cc.pad[size_t(d + j - (3 - d))];
    o[j] = (in[j] + pb[j] + pe[j] - dl[j] * (k[j] - 1) - 1) / st[j] + 1;
  }
  const int64_t N = cc.x[0], C = cc.x[1], cg = C / cc.groups, og = Co / cc.groups;
  Shape out{N, Co};
  for (int j = 3 - d; j < 3; ++j) out.push_back(o[j]);
  EXPECT_EQ(g.info(y).shape, out);
  Ints ref;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Co; ++co)
      for (int64_t od = 0; od < o[0]; ++od)
        for (int64_t oh = 0; oh < o[1]; ++oh)
          for (int64_t ow = 0; ow < o[2]; ++ow) {
            int64_t acc = 0;
            const int32_t zwc = zw[size_t(cc.w_chan ? co : 0)];
            const int64_t grp = co / og;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t a = 0; a < k[0]; ++a)
                for (int64_t b = 0; b < k[1]; ++b)
                  for (int64_t c = 0; c < k[2]; ++c) {
                    const int64_t id = od * st[0] - pb[0] + a * dl[0], ih = oh * st[1] - pb[1] + b * dl[1],
                                  iw = ow * st[2] - pb[2] + c * dl[2];
                    if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1] || iw < 0 || iw >= in[2]) continue;
                    const int64_t c_in = grp * cg + ci;
                    const int32_t xv = x[size_t((((n * C + c_in) * in[0] + id) * in[1] + ih) * in[2] + iw)];
                    const int32_t wv = w[size_t((((co * cg + ci) * k[0] + a) * k[1] + b) * k[2] + c)];
                    acc += int64_t(xv - zx[0]) * int64_t(wv - zwc);
                  }
            int32_t v = int32_t(acc);
            if (requant) {
              const float ms = sx[0] * sw[size_t(cc.w_chan ? co : 0)] / sy;
              v = int32_t(std::clamp(std::nearbyint(double(float(acc + bias[size_t(co)]) * ms)) + zy, 0.0, 255.0));
            }
            ref.push_back(v);
          }
  EXPECT_EQ(read_ints(g, y), ref);
}

// Both kernels against the reference.
void check_conv(const ConvCase& cc, uint32_t seed, bool requant) {
  check_conv_path(cc, seed, requant, false);
  check_conv_path(cc, seed, requant, true);
}

}  // namespace

TEST(ConvInteger, ShapesGroupsPaddingZeroPoints) {
  // 2-D: padding (asymmetric), stride, dilation, per-channel w zero point.
  check_conv({{2, 3, 9, 7}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, DType::U8, DType::U8, false}, 100, false);
  check_conv({{1, 4, 11, 10}, {6, 2, 3, 2}, {2, 3}, {0, 2, 1, 0}, {2, 1}, 2, DType::U8, DType::I8, true}, 101, false);
  check_conv({{1, 3, 5, 5}, {3, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, DType::I8, DType::I8, true}, 102, false);
  // 1-D and 3-D.
  check_conv({{2, 5, 13}, {3, 5, 4}, {2}, {3, 1}, {1}, 1, DType::U8, DType::U8, true}, 103, false);
  check_conv({{1, 2, 4, 5, 3}, {2, 2, 2, 3, 2}, {1, 2, 1}, {1, 0, 1, 1, 0, 1}, {1, 1, 2}, 1, DType::I8, DType::U8, false}, 104, false);
}

// Shapes for the tiled kernel's edges: channel and pixel counts that are
// not multiples of any tile (16 to 64 channels x 64 to 256 pixels), a
// reduction not a multiple of TK, more than one channel tile, several
// groups with several channels each, 1x1 kernels, 1-D and 3-D.
TEST(ConvInteger, TiledEdges) {
  check_conv({{1, 19, 17, 15}, {70, 19, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, DType::U8, DType::U8, true}, 120, false);
  check_conv({{2, 12, 9, 11}, {9, 4, 3, 2}, {2, 1}, {2, 0, 1, 2}, {1, 2}, 3, DType::I8, DType::U8, true}, 121, false);
  check_conv({{1, 33, 7, 9}, {17, 33, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, DType::U8, DType::I8, true}, 122, false);
  check_conv({{3, 10, 37}, {6, 5, 5}, {3}, {2, 4}, {2}, 2, DType::U8, DType::U8, false}, 123, false);
  check_conv({{1, 3, 6, 5, 7}, {4, 3, 3, 2, 3}, {2, 1, 2}, {1, 1, 0, 1, 1, 2}, {1, 2, 1}, 1, DType::U8, DType::I8, true},
             124, false);
  check_conv({{1, 16, 33, 31}, {24, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, DType::U8, DType::U8, false}, 125, false);
}

TEST(QLinearConv, TiledEdges) {
  check_conv({{1, 19, 17, 15}, {70, 19, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, DType::U8, DType::U8, true}, 130, true);
  check_conv({{2, 12, 9, 11}, {9, 4, 3, 2}, {2, 1}, {2, 0, 1, 2}, {1, 2}, 3, DType::I8, DType::U8, true}, 131, true);
  check_conv({{1, 3, 6, 5, 7}, {4, 3, 3, 2, 3}, {2, 1, 2}, {1, 1, 0, 1, 1, 2}, {1, 2, 1}, 1, DType::U8, DType::I8, false},
             132, true);
}

TEST(ConvInteger, UnknownKernelChoiceFails) {
  Graph g(ctx());
  TensorRef x = upload_ints(g, {1, 2, 4, 4}, Ints(32, 3), DType::U8), w = upload_ints(g, {2, 2, 1, 1}, Ints(4, 1), DType::U8);
  wgnn::test::ctx().mutable_settings().set("WGNN_CONV_INTEGER", "fast");
  EXPECT_THAT(error_of([&] {
                ops::call(g, "wgnn.conv_integer.default", {x, w, None{}, None{}, IntList{1, 1}, IntList{0, 0, 0, 0},
                                                           IntList{1, 1}, int64_t(1)});
              }),
              HasSubstr("WGNN_CONV_INTEGER is 'fast'; accepted: direct, tiled"));
  wgnn::test::ctx().mutable_settings().unset("WGNN_CONV_INTEGER");
}

TEST(QLinearConv, BiasAndPerChannelScales) {
  check_conv({{2, 3, 9, 7}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, DType::U8, DType::U8, false}, 110, true);
  check_conv({{1, 4, 11, 10}, {6, 2, 3, 2}, {2, 3}, {0, 2, 1, 0}, {2, 1}, 2, DType::U8, DType::I8, true}, 111, true);
  check_conv({{2, 5, 13}, {3, 5, 4}, {2}, {3, 1}, {1}, 1, DType::I8, DType::I8, true}, 112, true);
}

TEST(Quantized, Errors) {
  Graph g(ctx());
  TensorRef x = upload(g, {4}, {1, 2, 3, 4}, DType::F32);
  TensorRef s = constant(g, {}, {1.f}, DType::F32);
  EXPECT_THAT(error_of([&] {
                ops::call(g, "quantized_decomposed.quantize_per_tensor.tensor", {x, s, None{}, 0, 255, int64_t(4)});
              }),
              HasSubstr("accepted ScalarType codes: 0 (uint8), 1 (int8)"));
  EXPECT_THAT(error_of([&] {
                ops::call(g, "quantized_decomposed.quantize_per_channel.default",
                          {x, constant(g, {3}, {1, 1, 1}, DType::F32), None{}, 0, 0, 255, int64_t(0)});
              }),
              HasSubstr("must be 1-D with input [4]'s size 4 along axis 0"));
  TensorRef a = upload_ints(g, {1, 2, 3}, {1, 2, 3, 4, 5, 6}, DType::U8);
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.matmul_integer.default", {a, a, None{}, None{}}); }),
              HasSubstr("do not multiply"));
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.matmul_integer.default", {x, a, None{}, None{}}); }),
              HasSubstr("accepted: uint8, int8"));
}

namespace {

// com.microsoft MatMulNBits' layout, written from ONNX Runtime's contrib
// op definition: B [N, k_blocks, block / 2] bytes, element k of row n in
// byte k / 2 (the low nibble for even k); zero points per row in
// ceil(k_blocks / 2) bytes, packed the same way, 8 when absent.
struct NBitsCase {
  int64_t M, K, N, block;
  bool zp, bias;
};

void check_matmul_nbits(const NBitsCase& c, uint32_t seed, DType dt = DType::F32) {
  SCOPED_TRACE(fmt::format("M {} K {} N {} block {} zp {} bias {} {}", c.M, c.K, c.N, c.block, c.zp, c.bias, dtype_name(dt)));
  Graph g(ctx());
  const int64_t kb = (c.K + c.block - 1) / c.block, row_bytes = kb * c.block / 2, zrow = (kb + 1) / 2;
  const Ints q = random_ints(size_t(c.N * kb * c.block), 0, 15, seed);  // padding past K included
  const Ints z = random_ints(size_t(c.N * kb), 0, 15, seed + 1);
  std::vector<uint8_t> bytes(size_t(c.N * row_bytes)), zbytes(size_t(c.N * zrow));
  for (int64_t n = 0; n < c.N; ++n) {
    for (int64_t k = 0; k < kb * c.block; ++k) {
      bytes[size_t(n * row_bytes + k / 2)] |= uint8_t(q[size_t(n * kb * c.block + k)] << (4 * (k % 2)));
    }
    for (int64_t b = 0; b < kb; ++b) zbytes[size_t(n * zrow + b / 2)] |= uint8_t(z[size_t(n * kb + b)] << (4 * (b % 2)));
  }
  auto words = [](std::vector<uint8_t> v) {
    v.resize((v.size() + 3) / 4 * 4);
    Ints w(v.size() / 4);
    std::memcpy(w.data(), v.data(), v.size());
    return w;
  };
  const std::vector<float> a = quantize(random_floats(size_t(c.M * c.K), -1.f, 1.f, seed + 2), dt);
  const std::vector<float> s = quantize(random_floats(size_t(c.N * kb), 0.01f, 0.2f, seed + 3), dt);
  const std::vector<float> bias = quantize(random_floats(size_t(c.N), -1.f, 1.f, seed + 4), dt);
  const Ints bw = words(bytes), zw = words(zbytes);
  TensorRef bt = upload_ints(g, {c.N, row_bytes / 4}, bw, DType::I32, TensorKind::Constant);
  Value zt = None{}, biast = None{};
  if (c.zp) zt = upload_ints(g, {int64_t(zw.size())}, zw, DType::I32, TensorKind::Constant);
  if (c.bias) biast = constant(g, {c.N}, bias, dt);
  TensorRef y = ops::call(g, "wgnn.matmul_nbits.default",
                          {upload(g, {c.M, c.K}, a, dt), bt, constant(g, {c.N * kb}, s, dt), zt, biast, c.K, c.N, c.block})
                    .tensor();
  EXPECT_EQ(g.info(y).shape, (Shape{c.M, c.N}));
  // At most 8 rows (a decoder's step): kernels/gemv_nbits.wgsl; else the tiles.
  bool gemv = false;
  for (const auto& d : g.dispatches()) gemv = gemv || d.label.find(" gemv ") != std::string::npos;
  EXPECT_EQ(gemv, c.M <= 8);
  g.run();
  std::vector<double> ref(size_t(c.M * c.N)), mag(ref.size());
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < c.N; ++n) {
      double acc = c.bias ? bias[size_t(n)] : 0.0, am = c.bias ? std::abs(bias[size_t(n)]) : 0.0;
      for (int64_t k = 0; k < c.K; ++k) {
        const int64_t b = k / c.block;
        const int zp = c.zp ? z[size_t(n * kb + b)] : 8;
        const double w = double(q[size_t(n * kb * c.block + k)] - zp) * s[size_t(n * kb + b)];
        acc += double(a[size_t(m * c.K + k)]) * w;
        am += std::abs(double(a[size_t(m * c.K + k)]) * w);
      }
      ref[size_t(m * c.N + n)] = acc;
      mag[size_t(m * c.N + n)] = am;
    }
  }
  if (dt == DType::F16) {
    EXPECT_TRUE(f16_product_close(download(g, y), ref, mag));
  } else {
    EXPECT_TRUE(all_close(download(g, y), ref, 1e-5, 1e-5));
  }
}

}  // namespace

TEST(MatmulNBits, BlocksZeroPointsBias) {
  check_matmul_nbits({1, 64, 17, 32, true, false}, 100);    // one row (decoding), two blocks
  check_matmul_nbits({5, 40, 33, 16, false, false}, 101);   // K not a multiple of the block: 3 blocks, the last padded
  check_matmul_nbits({3, 48, 16, 16, true, true}, 102);     // an odd number of blocks: the last zero-point byte half used
  check_matmul_nbits({20, 256, 9, 128, true, true}, 103);
  check_matmul_nbits({33, 96, 40, 32, false, true}, 104);   // tiles partly outside M and N
  // The few-rows kernel's column widths (16 columns a workgroup from N =
  // 4096, 1 below 512) and a K that ends inside a word.
  check_matmul_nbits({1, 1003, 300, 32, true, true}, 105);
  check_matmul_nbits({8, 256, 4100, 64, false, false}, 106);
  check_matmul_nbits({2, 512, 1030, 32, true, false}, 107);
}

TEST(MatmulNBits, Float16) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  check_matmul_nbits({7, 80, 21, 16, true, true}, 110, DType::F16);
}

TEST(MatmulNBits, Errors) {
  Graph g(ctx());
  TensorRef a = upload(g, {2, 32}, std::vector<float>(64, 1.f), DType::F32);
  TensorRef b = upload_ints(g, {3, 4}, Ints(12, 0), DType::I32, TensorKind::Constant);
  TensorRef s = constant(g, {3}, {1, 1, 1}, DType::F32);
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.matmul_nbits.default", {a, b, s, None{}, None{}, 32, 3, 24}); }),
              HasSubstr("block_size 24 must be a power of two, at least 16"));
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.matmul_nbits.default", {a, b, s, None{}, None{}, 32, 3, 16}); }),
              HasSubstr("must hold N * k_blocks = 6 values"));  // K 32 in blocks of 16: b fits, 3 scales do not
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.matmul_nbits.default", {a, b, s, None{}, None{}, 32, 4, 32}); }),
              HasSubstr("must be int32 [4, 4]"));
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.matmul_nbits.default", {a, b, s, None{}, None{}, 16, 3, 32}); }),
              HasSubstr("must be [M, K] with K = 16"));
}

namespace {

// DequantizeLinear of 8-bit weights [K, N] then a product, in one kernel
// (wgnn.matmul_dequant): against a double product of (w - zp) * scale.
void check_matmul_dequant(int64_t M, int64_t K, int64_t N, DType wd, int mode, bool zp, uint32_t seed) {
  SCOPED_TRACE(fmt::format("M {} K {} N {} {} mode {} zp {}", M, K, N, dtype_name(wd), mode, zp));
  Graph g(ctx());
  const auto [lo, hi] = range_of(wd);
  const Ints w = random_ints(size_t(K * N), lo, hi, seed);
  const int64_t ns = mode == 0 ? 1 : mode == 1 ? N : K, nw = (N + 3) / 4;
  const Ints z = random_ints(size_t(ns), lo, hi, seed + 1);
  const std::vector<float> s = random_floats(size_t(ns), 0.001f, 0.05f, seed + 2);
  const std::vector<float> a = random_floats(size_t(M * K), -1.f, 1.f, seed + 3);
  Ints packed(size_t(K * nw), 0);
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t n = 0; n < N; ++n) {
      const uint32_t byte = uint32_t(w[size_t(k * N + n)]) & 255u;
      packed[size_t(k * nw + n / 4)] = int32_t(uint32_t(packed[size_t(k * nw + n / 4)]) | (byte << (8 * (n % 4))));
    }
  }
  Value zt = None{};
  if (zp) zt = upload_ints(g, {ns}, z, DType::I32, TensorKind::Constant);
  TensorRef y = ops::call(g, "wgnn.matmul_dequant.default",
                          {upload(g, {M, K}, a, DType::F32), upload_ints(g, {K, nw}, packed, DType::I32, TensorKind::Constant),
                           constant(g, {ns}, s, DType::F32), zt, N, wd == DType::I8, int64_t(mode)})
                    .tensor();
  g.run();
  std::vector<double> ref(size_t(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const size_t si = size_t(mode == 0 ? 0 : mode == 1 ? n : k);
        const float deq = float(w[size_t(k * N + n)] - (zp ? z[si] : 0)) * s[si];  // DequantizeLinear, float32
        acc += double(a[size_t(m * K + k)]) * double(deq);
      }
      ref[size_t(m * N + n)] = acc;
    }
  }
  EXPECT_TRUE(all_close(download(g, y), ref, 1e-5, 1e-5));
}

}  // namespace

TEST(MatmulDequant, ScalesPerTensorColumnRow) {
  check_matmul_dequant(1, 64, 17, DType::I8, 0, false, 120);  // N not a multiple of 4: the last word padded
  check_matmul_dequant(5, 40, 33, DType::U8, 1, true, 121);
  check_matmul_dequant(19, 33, 16, DType::I8, 2, true, 122);
  check_matmul_dequant(3, 7, 2, DType::U8, 0, true, 123);
}

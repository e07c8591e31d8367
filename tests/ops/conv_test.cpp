// Convolution and pooling ops against plain C++ double-precision
// references: 1-D, 2-D and 3-D; kernels 1x1 to 7x7; stride, padding,
// dilation; groups (2, depthwise, channel multipliers); no bias; batches;
// transposed convolution with stride, output_padding, groups and dilation;
// every kernel path, tile shape and split-K; max / average / adaptive / global
// pooling with ceil_mode, count_include_pad, divisor_override, indices,
// NaN and integer dtypes; float16; every validation error.
#include <gmock/gmock.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "scoped_env.h"
#include "error_of.h"
#include "op_test_util.h"

using namespace wgnn;
using wgnn::test::ScopedSetting;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

bool has_f16() { return ctx().features().shader_f16; }

using D3 = std::array<int64_t, 3>;

// A spatial list (one value for all dims, or one per dim) as 3 dims,
// left-padded with `fill`.
D3 dims3(const IntList& v, size_t d, int64_t fill) {
  D3 r{fill, fill, fill};
  for (size_t j = 0; j < d; ++j) r[3 - d + j] = v.size() == 1 ? v[0] : v[j];
  return r;
}

// ---- convolution reference --------------------------------------------------

struct Conv {
  Shape x, w;
  bool bias = true;
  IntList stride{1}, padding{0}, dilation{1};
  bool transposed = false;
  IntList output_padding{0};
  int64_t groups = 1;
  DType dtype = DType::F32;
  bool split = false;  // wgnn.convolution_padded: padding = begins, then ends
};

struct Ref {
  Shape shape;
  std::vector<double> v;
};

Ref ref_conv(const Conv& c, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b) {
  const size_t d = c.x.size() - 2;
  D3 in = dims3(IntList(c.x.begin() + 2, c.x.end()), d, 1), k = dims3(IntList(c.w.begin() + 2, c.w.end()), d, 1);
  D3 s = dims3(c.stride, d, 1), dil = dims3(c.dilation, d, 1), op = dims3(c.output_padding, d, 0);
  D3 pb, pe;
  if (c.split) {
    pb = dims3(IntList(c.padding.begin(), c.padding.begin() + long(d)), d, 0);
    pe = dims3(IntList(c.padding.begin() + long(d), c.padding.end()), d, 0);
  } else {
    pb = pe = dims3(c.padding, d, 0);
  }
  const int64_t n = c.x[0], cin = c.x[1], g = c.groups;
  const int64_t cout = c.transposed ? c.w[1] * g : c.w[0];
  const int64_t cin_g = cin / g, cout_g = cout / g;
  D3 out;
  for (size_t j = 0; j < 3; ++j) {
    out[j] = c.transposed ? (in[j] - 1) * s[j] - pb[j] - pe[j] + dil[j] * (k[j] - 1) + op[j] + 1
                          : (in[j] + pb[j] + pe[j] - dil[j] * (k[j] - 1) - 1) / s[j] + 1;
  }
  Ref r;
  r.shape = {n, cout};
  for (size_t j = 3 - d; j < 3; ++j) r.shape.push_back(out[j]);
  const int64_t ovol = out[0] * out[1] * out[2], ivol = in[0] * in[1] * in[2], kvol = k[0] * k[1] * k[2];
  r.v.assign(size_t(n * cout * ovol), 0.0);
  for (int64_t i = 0; i < n * cout; ++i) {
    for (int64_t p = 0; p < ovol; ++p) r.v[size_t(i * ovol + p)] = c.bias ? b[size_t(i % cout)] : 0.0;
  }
  auto xat = [&](int64_t nn, int64_t ci, int64_t a, int64_t bb, int64_t cc) {
    return double(x[size_t(((nn * cin + ci) * in[0] + a) * in[1] + bb) * size_t(in[2]) + size_t(cc)]);
  };
  for (int64_t nn = 0; nn < n; ++nn) {
    for (int64_t gi = 0; gi < g; ++gi) {
      for (int64_t co = 0; co < cout_g; ++co) {
        for (int64_t ci = 0; ci < cin_g; ++ci) {
          for (int64_t kd = 0; kd < k[0]; ++kd) {
            for (int64_t kh = 0; kh < k[1]; ++kh) {
              for (int64_t kw = 0; kw < k[2]; ++kw) {
                const int64_t kk = (kd * k[1] + kh) * k[2] + kw;
                // forward: w[co, ci, k]; transposed: w[ci, co, k]
                const double wv =
                    c.transposed ? w[size_t(((gi * cin_g + ci) * cout_g + co) * kvol + kk)]
                                 : w[size_t(((gi * cout_g + co) * cin_g + ci) * kvol + kk)];
                const int64_t icc = gi * cin_g + ci, occ = gi * cout_g + co;
                if (!c.transposed) {
                  for (int64_t a = 0; a < out[0]; ++a) {
                    const int64_t ia = a * s[0] - pb[0] + kd * dil[0];
                    if (ia < 0 || ia >= in[0]) continue;
                    for (int64_t bb = 0; bb < out[1]; ++bb) {
                      const int64_t ib = bb * s[1] - pb[1] + kh * dil[1];
                      if (ib < 0 || ib >= in[1]) continue;
                      for (int64_t cc = 0; cc < out[2]; ++cc) {
                        const int64_t ic = cc * s[2] - pb[2] + kw * dil[2];
                        if (ic < 0 || ic >= in[2]) continue;
                        r.v[size_t(((nn * cout + occ) * out[0] + a) * out[1] + bb) * size_t(out[2]) + size_t(cc)] +=
                            wv * xat(nn, icc, ia, ib, ic);
                      }
                    }
                  }
                } else {
                  // Scatter: input position i reaches output i * s - pb + k * dil.
                  for (int64_t a = 0; a < in[0]; ++a) {
                    const int64_t oa = a * s[0] - pb[0] + kd * dil[0];
                    if (oa < 0 || oa >= out[0]) continue;
                    for (int64_t bb = 0; bb < in[1]; ++bb) {
                      const int64_t ob = bb * s[1] - pb[1] + kh * dil[1];
                      if (ob < 0 || ob >= out[1]) continue;
                      for (int64_t cc = 0; cc < in[2]; ++cc) {
                        const int64_t oc = cc * s[2] - pb[2] + kw * dil[2];
                        if (oc < 0 || oc >= out[2]) continue;
                        r.v[size_t(((nn * cout + occ) * out[0] + oa) * out[1] + ob) * size_t(out[2]) + size_t(oc)] +=
                            wv * xat(nn, icc, a, bb, cc);
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  (void)ivol;
  return r;
}

// Runs `c` on the GPU (weights as constants or as inputs) and compares.
void run_conv(const Conv& c, uint32_t seed, bool weight_input = false) {
  if (c.dtype == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  const int64_t cout = c.transposed ? c.w[1] * c.groups : c.w[0];
  auto x = quantize(random_floats(size_t(numel(c.x)), -1, 1, seed), c.dtype);
  auto w = quantize(random_floats(size_t(numel(c.w)), -1, 1, seed + 1), c.dtype);
  auto b = quantize(random_floats(size_t(cout), -1, 1, seed + 2), c.dtype);
  Graph g(ctx());
  TensorRef tx = upload(g, c.x, x, c.dtype);
  TensorRef tw = weight_input ? upload(g, c.w, w, c.dtype) : constant(g, c.w, w, c.dtype);
  Value tb = c.bias ? Value(constant(g, {cout}, b, c.dtype)) : Value(None{});
  const std::string op = c.split ? "wgnn.convolution_padded.default" : "aten.convolution.default";
  TensorRef y = ops::call(g, op, {tx, tw, tb, c.stride, c.padding, c.dilation, c.transposed, c.output_padding,
                                  c.groups})
                    .tensor();
  const Ref r = ref_conv(c, x, w, b);
  ASSERT_EQ(g.info(y).shape, r.shape);
  EXPECT_EQ(g.info(y).dtype, c.dtype);
  g.run();
  // Terms are products of values in [-1, 1]; the reduction is at most a few
  // hundred long. float16: the float16 product bound, sum |x w| + |b| from
  // the same reference on the magnitudes.
  if (c.dtype == DType::F16) {
    EXPECT_TRUE(f16_product_close(download(g, y), r.v, ref_conv(c, magnitudes(x), magnitudes(w), magnitudes(b)).v));
  } else {
    EXPECT_TRUE(all_close(download(g, y), r.v, 1e-4, 1e-5));
  }
}

// The labels of the dispatches a convolution records, joined by " | ".
std::string conv_label(const Conv& c) {
  Graph g(ctx());
  TensorRef tx = g.add_tensor(c.x, c.dtype, TensorKind::Input);
  TensorRef tw = g.add_tensor(c.w, c.dtype, TensorKind::Input);
  ops::call(g, c.split ? "wgnn.convolution_padded.default" : "aten.convolution.default",
            {tx, tw, None{}, c.stride, c.padding, c.dilation, c.transposed, c.output_padding, c.groups});
  std::string all;
  for (const auto& d : g.dispatches()) all += (all.empty() ? "" : " | ") + d.label;
  return all;
}

struct Named {
  const char* name;
  Conv c;
};
void PrintTo(const Named& n, std::ostream* os) { *os << n.name; }

// clang-format off
const std::vector<Named>& conv_cases() {
  static const std::vector<Named> v = {
      {"k3_pad1_odd", {{2, 3, 7, 9}, {5, 3, 3, 3}, true, {1}, {1}}},
      {"k1_pointwise", {{2, 17, 6, 5}, {33, 17, 1, 1}}},
      {"k1_pointwise_wide", {{2, 70, 15, 15}, {100, 70, 1, 1}}},
      {"k1_stride2", {{1, 16, 9, 11}, {24, 16, 1, 1}, true, {2}}},
      {"k1_pad1", {{1, 5, 4, 4}, {6, 5, 1, 1}, true, {1}, {1}}},
      {"k3_stride2_pad1", {{1, 8, 13, 12}, {16, 8, 3, 3}, true, {2}, {1}}},
      {"k5_stride2_pad2", {{1, 6, 17, 15}, {7, 6, 5, 5}, true, {2}, {2}}},
      {"k7_stride2_pad3_stem", {{1, 3, 31, 29}, {8, 3, 7, 7}, true, {2}, {3}}},
      {"k3_dilation2", {{1, 4, 12, 13}, {6, 4, 3, 3}, true, {1}, {2}, {2}}},
      {"k3_dilation2_stride2_pad1", {{2, 4, 12, 13}, {6, 4, 3, 3}, true, {2}, {1}, {2}}},
      {"rect_kernel_per_dim_lists", {{1, 3, 10, 9}, {4, 3, 3, 2}, true, {2, 1}, {1, 0}, {1, 2}}},
      {"groups2", {{2, 6, 7, 8}, {4, 3, 3, 3}, true, {1}, {1}, {1}, false, {0}, 2}},
      {"groups3_stride2", {{1, 9, 11, 10}, {12, 3, 3, 3}, true, {2}, {1}, {1}, false, {0}, 3}},
      {"groups2_pointwise", {{1, 8, 5, 5}, {6, 4, 1, 1}, true, {1}, {0}, {1}, false, {0}, 2}},
      {"depthwise3x3", {{2, 8, 10, 9}, {8, 1, 3, 3}, true, {1}, {1}, {1}, false, {0}, 8}},
      {"depthwise3x3_stride2", {{1, 12, 15, 14}, {12, 1, 3, 3}, true, {2}, {1}, {1}, false, {0}, 12}},
      {"depthwise5x5_dilation2", {{1, 4, 16, 16}, {4, 1, 5, 5}, true, {1}, {4}, {2}, false, {0}, 4}},
      {"depthwise7x7_convnext", {{1, 16, 14, 14}, {16, 1, 7, 7}, true, {1}, {3}, {1}, false, {0}, 16}},
      {"depthwise_multiplier2", {{2, 4, 6, 6}, {8, 1, 3, 3}, true, {1}, {0}, {1}, false, {0}, 4}},
      {"single_input_channel", {{1, 1, 9, 9}, {5, 1, 3, 3}, true, {1}, {1}}},
      {"no_bias", {{2, 3, 6, 5}, {4, 3, 3, 2}, false}},
      {"no_bias_depthwise", {{1, 5, 6, 6}, {5, 1, 3, 3}, false, {1}, {1}, {1}, false, {0}, 5}},
      {"batch5", {{5, 3, 8, 7}, {4, 3, 3, 3}, true, {1}, {1}}},
      {"long_reduction", {{1, 40, 9, 9}, {20, 40, 3, 3}, true, {1}, {1}}},
      {"one_pixel_output", {{1, 7, 3, 3}, {5, 7, 3, 3}}},
      {"one_element", {{1, 1, 1, 1}, {1, 1, 1, 1}}},
      {"wide_tile_few_channels", {{1, 4, 40, 40}, {3, 4, 3, 3}, true, {1}, {1}}},
      {"mid_tile_32_channels", {{1, 4, 24, 24}, {32, 4, 3, 3}, true, {1}, {1}}},
      {"conv1d", {{2, 4, 13}, {5, 4, 3}, true, {2}, {1}, {2}}},
      {"conv1d_pointwise", {{3, 6, 10}, {4, 6, 1}}},
      {"conv1d_groups_depthwise", {{2, 6, 11}, {6, 1, 5}, true, {1}, {2}, {1}, false, {0}, 6}},
      {"conv3d", {{2, 3, 5, 6, 4}, {4, 3, 2, 3, 2}, true, {1, 2, 1}, {1, 0, 1}}},
      {"conv3d_groups_dilated", {{1, 4, 6, 6, 6}, {6, 2, 2, 2, 2}, true, {2}, {1}, {2}, false, {0}, 2}},
      {"conv3d_depthwise", {{1, 3, 5, 5, 5}, {6, 1, 3, 3, 3}, true, {1}, {1}, {1}, false, {0}, 3}},
      {"transposed_stride2_outpad1", {{2, 4, 5, 6}, {4, 3, 3, 3}, true, {2}, {1}, {1}, true, {1}}},
      {"transposed_stride3_2", {{1, 3, 7, 6}, {3, 4, 3, 3}, true, {3, 2}, {1}, {1}, true, {1, 1}}},
      {"transposed_k4_stride2_pad1", {{1, 8, 6, 6}, {8, 5, 4, 4}, true, {2}, {1}, {1}, true, {0}}},
      {"transposed_groups2", {{1, 6, 5, 4}, {6, 2, 3, 3}, true, {2}, {0}, {1}, true, {0}, 2}},
      {"transposed_dilation2", {{1, 2, 4, 5}, {2, 3, 2, 3}, true, {1}, {0}, {2}, true, {0}}},
      {"transposed_no_bias_k1", {{1, 5, 4, 4}, {5, 3, 1, 1}, false, {2}, {0}, {1}, true, {1}}},
      {"transposed_1d", {{2, 3, 7}, {3, 2, 4}, true, {3}, {1}, {1}, true, {2}}},
      {"transposed_3d", {{1, 2, 3, 4, 3}, {2, 3, 3, 3, 2}, true, {2, 1, 2}, {1, 0, 0}, {1}, true, {1, 0, 1}}},
      {"padded_asymmetric", {{1, 3, 7, 5}, {4, 3, 3, 3}, true, {2}, {1, 0, 1, 2}, {1}, false, {0}, 1,
                             DType::F32, true}},
      {"padded_asymmetric_depthwise", {{1, 4, 6, 6}, {4, 1, 3, 3}, true, {1}, {0, 2, 1, 0}, {1}, false, {0}, 4,
                                       DType::F32, true}},
      {"padded_transposed_negative", {{1, 2, 3, 3}, {2, 3, 3, 3}, true, {3, 2}, {0, 0, -1, -1}, {1}, true, {0}, 1,
                                      DType::F32, true}},
      {"padded_transposed_asymmetric", {{1, 2, 4, 3}, {2, 2, 3, 3}, true, {2}, {0, 1, 2, 1}, {1}, true, {1}, 1,
                                        DType::F32, true}},
      {"padded_1d", {{1, 3, 9}, {2, 3, 4}, true, {2}, {3, 0}, {1}, false, {0}, 1, DType::F32, true}},
      // Few tiles and a long reduction: split-K (ranges not dividing K too).
      {"splitk_2", {{1, 64, 7, 7}, {64, 64, 3, 3}, true, {1}, {1}}},
      {"splitk_9", {{1, 256, 5, 5}, {32, 256, 3, 3}, true, {1}, {1}}},
      {"splitk_uneven_ranges", {{1, 200, 4, 4}, {20, 200, 3, 3}, true, {1}, {1}}},
      {"splitk_batch2", {{2, 64, 5, 5}, {40, 64, 3, 3}, false, {1}, {1}}},
      {"splitk_pointwise", {{2, 1024, 3, 3}, {30, 1024, 1, 1}}},
      {"splitk_groups2", {{1, 128, 6, 6}, {64, 64, 3, 3}, true, {1}, {1}, {1}, false, {0}, 2}},
      {"splitk_transposed", {{1, 128, 3, 3}, {128, 16, 3, 3}, true, {2}, {0}, {1}, true, {0}}},
      {"splitk_f16", {{1, 64, 5, 5}, {48, 64, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, DType::F16}},
      {"f16_k3", {{2, 5, 9, 7}, {6, 5, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, DType::F16}},
      {"f16_pointwise", {{1, 24, 6, 6}, {20, 24, 1, 1}, true, {1}, {0}, {1}, false, {0}, 1, DType::F16}},
      {"f16_depthwise", {{1, 8, 9, 9}, {8, 1, 3, 3}, true, {2}, {1}, {1}, false, {0}, 8, DType::F16}},
      {"f16_transposed", {{1, 4, 5, 5}, {4, 3, 3, 3}, true, {2}, {1}, {1}, true, {1}, 1, DType::F16}},
      {"f16_conv1d_groups", {{2, 4, 12}, {6, 2, 3}, false, {1}, {1}, {1}, false, {0}, 2, DType::F16}},
      // A large kernel that tiles the input (kernel = stride): float32 runs
      // it as a copy of the patches and the regular GEMM (Conv.Patches has
      // small ones).
      {"patches_large_2x2", {{1, 128, 64, 64}, {256, 128, 2, 2}, true, {2}}},
  };
  return v;
}
// clang-format on

class ConvCase : public testing::TestWithParam<Named> {};

TEST_P(ConvCase, MatchesReference) { run_conv(GetParam().c, 7); }
INSTANTIATE_TEST_SUITE_P(Cases, ConvCase, testing::ValuesIn(conv_cases()),
                         [](const testing::TestParamInfo<Named>& i) { return std::string(i.param.name); });

}  // namespace

// Kernels that tile the input, small ones taken too (WGNN_CONV_PATCHES=1):
// the patches copied, then the GEMM, in 1 to 3 spatial dims, with and
// without a bias, a batch; float16 keeps its kernels.
TEST(Conv, Patches) {
  test::ScopedSetting all("WGNN_CONV_PATCHES", "1");
  const std::vector<std::pair<Conv, bool>> cases = {
      {{{2, 6, 8, 10}, {5, 6, 2, 2}, true, {2}}, true},
      {{{1, 3, 16, 12}, {8, 3, 4, 4}, true, {4}}, true},
      {{{1, 4, 6, 9}, {6, 4, 2, 3}, true, {2, 3}}, true},
      {{{2, 5, 12}, {4, 5, 3}, false, {3}}, true},
      {{{1, 2, 4, 6, 4}, {3, 2, 2, 3, 2}, true, {2, 3, 2}}, true},
      {{{1, 6, 8, 8}, {5, 6, 2, 2}, true, {2}, {0}, {1}, false, {0}, 1, DType::F16}, false},
  };
  uint32_t seed = 880;
  for (const auto& [c, patches] : cases) {
    if (c.dtype == DType::F16 && !has_f16()) continue;
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    EXPECT_EQ(conv_label(c).rfind("permute | gemm", 0) == 0, patches) << conv_label(c);
    run_conv(c, seed += 3);
  }
}

// Kernels that do not tile the input (padding, strides other than the
// kernel, dilation, an inexact number of patches) with WGNN_CONV_PATCHES=1:
// kernels/im2col.wgsl gathers the patches with the padding's zeros, then
// the GEMM runs with the activation in its epilogue. 1 to 3 spatial dims,
// a batch, without a bias, the Whisper encoder's shapes (scaled down), and
// the cases that keep their kernels (groups, transposed, float16); relu,
// clamp and GELU.
TEST(Conv, PatchesGathered) {
  ScopedSetting all("WGNN_CONV_PATCHES", "1");
  struct Case {
    Conv c;
    const char* act;
    bool patches;
  };
  const std::vector<Case> cases = {
      {{{1, 8, 30}, {16, 8, 3}, true, {1}, {1}}, "gelu", true},             // Whisper's first, scaled
      {{{1, 16, 30}, {16, 16, 3}, true, {2}, {1}}, "gelu", true},           // its second (stride 2)
      {{{2, 3, 9, 8}, {4, 3, 2, 2}, true, {2}}, "none", true},              // inexact tiling
      {{{2, 5, 7, 9}, {6, 5, 3, 3}, false, {1}, {1}}, "clamp", true},
      {{{1, 4, 11, 10}, {7, 4, 3, 3}, true, {2, 1}, {1, 0, 2, 1}}, "relu", true},  // split padding
      {{{1, 3, 12, 12}, {5, 3, 3, 3}, true, {1}, {2}, {2}}, "none", true},  // dilation
      {{{1, 2, 5, 6, 4}, {3, 2, 3, 3, 2}, true, {1, 2, 1}, {1}}, "clamp", true},
      {{{1, 6, 8, 8}, {6, 3, 3, 3}, true, {1}, {1}, {1}, false, {0}, 2}, "none", false},     // groups
      {{{1, 6, 8, 8}, {6, 5, 3, 3}, true, {2}, {1}, {1}, true, {0}}, "none", false},         // transposed
      {{{1, 6, 8, 8}, {5, 6, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, DType::F16}, "relu", false},
  };
  uint32_t seed = 900;
  for (Case k : cases) {
    Conv& c = k.c;
    if (c.dtype == DType::F16 && !has_f16()) continue;
    SCOPED_TRACE(fmt::format("{} * {} {}", shape_str(c.x), shape_str(c.w), k.act));
    c.split = true;
    const size_t d = c.x.size() - 2;
    if (c.padding.size() == 1) c.padding.assign(2 * d, c.padding[0]);
    const int64_t cout = c.transposed ? c.w[1] * c.groups : c.w[0];
    auto x = quantize(random_floats(size_t(numel(c.x)), -1, 1, seed), c.dtype);
    auto w = quantize(random_floats(size_t(numel(c.w)), -1, 1, seed + 1), c.dtype);
    auto b = quantize(random_floats(size_t(cout), -1, 1, seed + 2), c.dtype);
    seed += 3;
    Graph g(ctx());
    const double lo = -0.25, hi = 0.5;
    TensorRef y = ops::call(g, "wgnn.convolution_padded.default",
                            {upload(g, c.x, x, c.dtype), constant(g, c.w, w, c.dtype),
                             c.bias ? Value(constant(g, {cout}, b, c.dtype)) : Value(None{}), c.stride, c.padding,
                             c.dilation, c.transposed, c.output_padding, c.groups, std::string(k.act), lo, hi})
                      .tensor();
    std::string labels;
    for (const auto& dsp : g.dispatches()) labels += (labels.empty() ? "" : " | ") + dsp.label;
    EXPECT_EQ(labels.rfind("conv patches", 0) == 0, k.patches) << labels;
    Ref r = ref_conv(c, x, w, b);
    for (double& v : r.v) {
      if (std::string_view(k.act) == "relu") v = std::max(v, 0.0);
      if (std::string_view(k.act) == "clamp") v = std::clamp(v, lo, hi);
      if (std::string_view(k.act) == "gelu") v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    }
    ASSERT_EQ(g.info(y).shape, r.shape);
    g.run();
    const bool f16 = c.dtype == DType::F16;
    EXPECT_TRUE(all_close(download(g, y), r.v, f16 ? 6e-2 : 1e-4, f16 ? 4e-3 : 1e-5)) << labels;
  }
  // By default only 1-D convolutions gather (the Whisper encoder's); a 2-D
  // one of that size keeps the implicit GEMM.
  ScopedSetting def("WGNN_CONV_PATCHES", "");
  EXPECT_EQ(conv_label({{1, 512, 3000}, {512, 512, 3}, true, {2}, {1}}).rfind("conv patches", 0), 0u);
  EXPECT_EQ(conv_label({{1, 64, 128, 128}, {64, 64, 3, 3}, true, {1}, {1}}).find("patches"), std::string::npos);
}

// wgnn.conv_depthwise_channels_last against the convolution reference on the
// same values moved channels first (a host permute): 1 to 3 spatial dims,
// channel multipliers, strides, dilation, split padding, without a bias,
// positions in a row ([N, prod(size), C]) and as spatial dims, float16.
TEST(Conv, DepthwiseChannelsLastMatchesTheReference) {
  struct Case {
    Conv c;
    bool row;  // input [N, prod(size), C] rather than [N, *size, C]
    std::string label = "channels-last";
    bool weight_input = false;  // the weight an input, not a constant: its per-tap copy made on every run
  };
  const std::vector<Case> cases = {
      {{{2, 12, 5, 6}, {12, 1, 3, 3}, true, {1}, {1}, {1}, false, {0}, 12}, true},
      {{{1, 8, 9, 7}, {16, 1, 3, 3}, true, {2, 1}, {1, 0, 2, 1}, {1, 2}, false, {0}, 8, DType::F32, true}, false},
      // C_out = C_in (kernels/conv_depthwise_cl.wgsl) with strides, dilation and uneven padding.
      {{{1, 8, 9, 7}, {8, 1, 3, 3}, true, {2, 1}, {1, 0, 2, 1}, {1, 2}, false, {0}, 8, DType::F32, true}, false},
      {{{1, 16, 9, 7}, {16, 1, 5, 3}, true, {1, 2}, {2, 1}, {2, 1}, false, {0}, 16, DType::F16}, true},
      {{{1, 5, 11}, {10, 1, 5}, false, {1}, {2}, {1}, false, {0}, 5}, true},
      {{{1, 4, 3, 4, 5}, {4, 1, 3, 1, 3}, true, {1}, {1, 0, 1}, {1}, false, {0}, 4}, false},
      {{{1, 12, 5, 6}, {12, 1, 3, 3}, true, {1}, {1}, {1}, false, {0}, 12, DType::F16}, true},
      // Output columns a thread: 4 where that makes 2^17 threads (here 32 x
      // 17 x 256, the last of a row's 17 holding 3 columns), 2 (32 x 32 x
      // 128, the last holding 1) and 1 (ConvNeXt's last stage: 7 x 7 x 768,
      // fewer than 2^17 with any: the narrowest).
      {{{1, 1024, 32, 67}, {1024, 1, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1024, DType::F16}, false,
       "channels-last v4x4 "},
      {{{1, 512, 32, 63}, {512, 1, 3, 3}, true, {1}, {1}, {1}, false, {0}, 512}, false, "channels-last v4x2 ",
       true},
      {{{1, 768, 7, 7}, {768, 1, 7, 7}, true, {1}, {3}, {1}, false, {0}, 768, DType::F16}, false,
       "channels-last v1x1 "},
      // C = 2 mod 4: two channels a thread make at most 16 x 16 x 129 =
      // 33024 threads, one channel 66048: the narrowest.
      {{{1, 258, 16, 16}, {258, 1, 3, 3}, true, {1}, {1}, {1}, false, {0}, 258}, false, "channels-last v1x1 "},
      // Two channels and two columns: 128 x 32 x 33 = 135168 threads.
      {{{1, 66, 128, 64}, {66, 1, 3, 3}, true, {1}, {1}, {1}, false, {0}, 66, DType::F16}, false,
       "channels-last v2x2 "},
  };
  uint32_t seed = 700;
  for (const Case& k : cases) {
    const Conv& c = k.c;
    SCOPED_TRACE(fmt::format("x {} w {} {}", shape_str(c.x), shape_str(c.w), k.row ? "row" : "spatial"));
    if (c.dtype == DType::F16 && !has_f16()) continue;
    const size_t d = c.x.size() - 2;
    const int64_t n = c.x[0], cin = c.x[1], cout = c.w[0];
    int64_t vol = 1;
    for (size_t j = 0; j < d; ++j) vol *= c.x[2 + j];
    auto x = quantize(random_floats(size_t(numel(c.x)), -1, 1, seed), c.dtype);
    auto w = quantize(random_floats(size_t(numel(c.w)), -1, 1, seed + 1), c.dtype);
    auto b = quantize(random_floats(size_t(cout), -1, 1, seed + 2), c.dtype);
    seed += 3;
    // x as the op takes it: [N, positions, C].
    std::vector<float> xl(x.size());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t ch = 0; ch < cin; ++ch) {
        for (int64_t q = 0; q < vol; ++q) xl[size_t((i * vol + q) * cin + ch)] = x[size_t((i * cin + ch) * vol + q)];
      }
    }
    Shape xs{n};
    if (k.row) {
      xs.push_back(vol);
    } else {
      xs.insert(xs.end(), c.x.begin() + 2, c.x.end());
    }
    xs.push_back(cin);
    Graph g(ctx());
    TensorRef y = ops::call(g, "wgnn.conv_depthwise_channels_last.default",
                            {upload(g, xs, xl, c.dtype),
                             k.weight_input ? upload(g, c.w, w, c.dtype) : constant(g, c.w, w, c.dtype),
                             c.bias ? Value(constant(g, {cout}, b, c.dtype)) : Value(None{}),
                             IntList(c.x.begin() + 2, c.x.end()), c.stride, c.padding, c.dilation})
                      .tensor();
    const Ref r = ref_conv(c, x, w, b);
    int64_t out_vol = 1;
    for (size_t j = 2; j < r.shape.size(); ++j) out_vol *= r.shape[j];
    Shape want{n};
    if (k.row) {
      want.push_back(out_vol);
    } else {
      want.insert(want.end(), r.shape.begin() + 2, r.shape.end());
    }
    want.push_back(cout);
    ASSERT_EQ(g.info(y).shape, want);
    EXPECT_THAT(g.dispatches().back().label, testing::HasSubstr(k.label));
    g.run();
    const std::vector<float> got = download(g, y);
    // The reference moved channels last.
    std::vector<double> ref(got.size()), mag;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t ch = 0; ch < cout; ++ch) {
        for (int64_t q = 0; q < out_vol; ++q) {
          ref[size_t((i * out_vol + q) * cout + ch)] = r.v[size_t((i * cout + ch) * out_vol + q)];
        }
      }
    }
    if (c.dtype == DType::F16) {
      const Ref m = ref_conv(c, magnitudes(x), magnitudes(w), magnitudes(b));
      mag.resize(got.size());
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t ch = 0; ch < cout; ++ch) {
          for (int64_t q = 0; q < out_vol; ++q) {
            mag[size_t((i * out_vol + q) * cout + ch)] = m.v[size_t((i * cout + ch) * out_vol + q)];
          }
        }
      }
      EXPECT_TRUE(f16_product_close(got, ref, mag));
    } else {
      EXPECT_TRUE(all_close(got, ref, 1e-4, 1e-5));
    }
  }
}

// The residual in the channels-last epilogue: y = conv(x) + r, float32 and
// float16 (where the conv is rounded to float16 before the add, as a
// separate add would see it); four channels a thread (C a multiple of 4)
// and one (WGNN_DEPTHWISE_VEC4=0).
TEST(Conv, DepthwiseChannelsLastResidual) {
  for (const char* vec : {"1", "0"})
  for (DType dt : {DType::F32, DType::F16}) {
    if (dt == DType::F16 && !has_f16()) continue;
    SCOPED_TRACE(fmt::format("{} vec4 {}", dtype_name(dt), vec));
    wgnn::test::ScopedSetting env("WGNN_DEPTHWISE_VEC4", vec);
    const int64_t N = 1, H = 4, W = 7, C = 12;
    auto x = quantize(random_floats(size_t(N * H * W * C), -1, 1, 811), dt);
    auto w = quantize(random_floats(size_t(C * 9), -1, 1, 812), dt);
    auto b = quantize(random_floats(size_t(C), -1, 1, 813), dt);
    auto r = quantize(random_floats(size_t(N * H * W * C), -1, 1, 814), dt);
    Graph g(ctx());
    const TensorRef tx = upload(g, {N, H * W, C}, x, dt), tw = constant(g, {C, 1, 3, 3}, w, dt),
                    tb = constant(g, {C}, b, dt), tr = upload(g, {N, H * W, C}, r, dt);
    TensorRef plain = ops::call(g, "wgnn.conv_depthwise_channels_last.default",
                                {tx, tw, tb, IntList{H, W}, IntList{1}, IntList{1}, IntList{1}})
                          .tensor();
    TensorRef y = ops::call(g, "wgnn.conv_depthwise_channels_last.default",
                            {tx, tw, tb, IntList{H, W}, IntList{1}, IntList{1}, IntList{1}, tr})
                      .tensor();
    TensorRef sum = ops::call(g, "aten.add.Tensor", {plain, tr}).tensor();
    bool labelled = false;
    const std::string want = vec[0] == '1' ? "channels-last v1x1 k=[3, 3] residual" : "channels-last k=[3, 3] residual";
    for (const auto& d : g.dispatches()) labelled = labelled || d.label.find(want) != std::string::npos;
    EXPECT_TRUE(labelled);
    g.run();
    // Bit for bit the convolution and a separate add.
    EXPECT_EQ(download(g, y), download(g, sum));
  }
  Graph g(ctx());
  const TensorRef tx = upload(g, {1, 6, 4}, std::vector<float>(24, 1.f), DType::F32);
  EXPECT_THAT(error_of([&] {
                ops::call(g, "wgnn.conv_depthwise_channels_last.default",
                          {tx, constant(g, {4, 1, 3}, std::vector<float>(12, 1.f), DType::F32), None{}, IntList{6},
                           IntList{1}, IntList{1}, IntList{1}, upload(g, {1, 6, 3}, std::vector<float>(18, 1.f),
                                                                      DType::F32)});
              }),
              HasSubstr("argument 'residual'"));
}

TEST(Conv, DepthwiseChannelsLastErrors) {
  Graph g(ctx());
  TensorRef x = upload(g, {1, 30, 12}, std::vector<float>(360, 0.5f), DType::F32);
  TensorRef w = constant(g, {12, 1, 3, 3}, std::vector<float>(108, 0.1f), DType::F32);
  auto err = [&](const ValueList& args) {
    return error_of([&] { ops::call(g, "wgnn.conv_depthwise_channels_last.default", args); });
  };
  EXPECT_THAT(err({x, w, None{}, IntList{5, 7}, IntList{1}, IntList{1}, IntList{1}}), HasSubstr("expected [N, 5, 7, C]"));
  EXPECT_THAT(err({x, constant(g, {12, 2, 3, 3}, std::vector<float>(216, 0.1f), DType::F32), None{}, IntList{5, 6},
                   IntList{1}, IntList{1}, IntList{1}}),
              HasSubstr("[C_out, 1, *kernel]"));
  EXPECT_THAT(err({x, constant(g, {18, 1, 3, 3}, std::vector<float>(162, 0.1f), DType::F32), None{}, IntList{5, 6},
                   IntList{1}, IntList{1}, IntList{1}}),
              HasSubstr("not a multiple"));
  EXPECT_THAT(err({x, w, None{}, IntList{5, 6}, IntList{0}, IntList{1}, IntList{1}}), HasSubstr("stride"));
  EXPECT_THAT(err({x, w, None{}, IntList{5, 6}, IntList{1}, IntList{-1}, IntList{1}}), HasSubstr("padding"));
  EXPECT_THAT(err({x, w, None{}, IntList{1, 1}, IntList{1}, IntList{0}, IntList{1}}), HasSubstr("expected"));
}

TEST(Conv, WeightAsInputNotConstant) {
  run_conv({{1, 6, 7, 7}, {4, 6, 3, 3}, true, {1}, {1}}, 3, true);
  run_conv({{1, 6, 7, 7}, {6, 1, 3, 3}, true, {1}, {1}, {1}, false, {0}, 6}, 4, true);
  run_conv({{1, 4, 3, 3}, {4, 2, 3, 3}, true, {2}, {0}, {1}, true, {1}}, 5, true);
}

TEST(Conv, PicksTheKernelForTheShape) {
  EXPECT_THAT(conv_label({{1, 8, 5, 5}, {16, 8, 1, 1}}), HasSubstr("pointwise"));
  EXPECT_THAT(conv_label({{1, 8, 5, 5}, {16, 8, 1, 1}, true, {2}}), HasSubstr("gemm"));
  EXPECT_THAT(conv_label({{1, 8, 5, 5}, {16, 8, 3, 3}}), HasSubstr("gemm k=[3, 3] tile=64x64"));
  EXPECT_THAT(conv_label({{1, 8, 5, 5}, {8, 1, 3, 3}, true, {1}, {0}, {1}, false, {0}, 8}), HasSubstr("depthwise"));
  EXPECT_THAT(conv_label({{1, 8, 5, 5}, {8, 1, 3, 3}, true, {1}, {0}, {1}, true, {0}}), HasSubstr("transposed"));
  EXPECT_THAT(conv_label({{1, 4, 40, 40}, {3, 4, 3, 3}}), HasSubstr("tile=16x256"));
  EXPECT_THAT(conv_label({{1, 4, 24, 24}, {32, 4, 3, 3}}), HasSubstr("tile=32x128"));
  // A large kernel that tiles its input (DaViT's downsampling): the patches
  // copied, then the GEMM (float32); WGNN_CONV_PATCHES=0, a small one, an
  // input that is not a whole number of patches or padding keep the
  // implicit GEMM.
  EXPECT_EQ(conv_label({{1, 128, 192, 192}, {256, 128, 2, 2}, true, {2}}), "permute | gemm 256x9216x512");
  EXPECT_THAT(conv_label({{2, 6, 8, 10}, {5, 6, 2, 2}, true, {2}}), HasSubstr("conv gemm k=[2, 2]"));
  EXPECT_THAT(conv_label({{1, 3, 9, 8}, {4, 3, 2, 2}, true, {2}}), HasSubstr("conv gemm k=[2, 2]"));
  EXPECT_THAT(conv_label({{1, 3, 8, 8}, {4, 3, 2, 2}, true, {2}, {1}}), HasSubstr("conv gemm k=[2, 2]"));
  {
    test::ScopedSetting off("WGNN_CONV_PATCHES", "0");
    EXPECT_THAT(conv_label({{1, 128, 192, 192}, {256, 128, 2, 2}, true, {2}}), HasSubstr("conv gemm k=[2, 2]"));
  }
  // ResNet-50's last 3x3 convolution at batch 1: 8 tiles, K = 4608.
  EXPECT_EQ(conv_label({{1, 512, 7, 7}, {512, 512, 3, 3}, true, {1}, {1}}),
            "conv gemm k=[3, 3] tile=64x64 splitk=18 | conv splitk sum 18");
  EXPECT_THAT(conv_label({{16, 512, 7, 7}, {512, 512, 3, 3}, true, {1}, {1}}), testing::Not(HasSubstr("splitk")));
  for (const char* name : {"splitk_2", "splitk_9", "splitk_uneven_ranges", "splitk_batch2", "splitk_pointwise",
                           "splitk_groups2", "splitk_transposed", "splitk_f16"}) {
    for (const Named& n : conv_cases()) {
      if (n.c.dtype == DType::F16 && !has_f16()) continue;
      if (std::string(n.name) == name) EXPECT_THAT(conv_label(n.c), HasSubstr("splitk sum")) << name;
    }
  }
}

// wgnn.convolution_padded with a float32 per-channel affine (an inference
// batch norm in float16) and an activation, on each kernel path, against
// act((conv + bias) * scale + shift) in double. `path` is a substring of
// the dispatch labels the convolution must record.

void run_conv_affine(Conv c, const std::string& act, uint32_t seed, const std::string& path) {
  if (c.dtype == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  c.split = true;
  const size_t d = c.x.size() - 2;
  if (c.padding.size() == 1) c.padding.assign(2 * d, c.padding[0]);
  const int64_t cout = c.transposed ? c.w[1] * c.groups : c.w[0];
  auto x = quantize(random_floats(size_t(numel(c.x)), -1, 1, seed), c.dtype);
  auto w = quantize(random_floats(size_t(numel(c.w)), -1, 1, seed + 1), c.dtype);
  auto b = quantize(random_floats(size_t(cout), -1, 1, seed + 2), c.dtype);
  // Scales of both signs and magnitudes a batch norm gives (gamma / sqrt(var + eps)).
  auto scale = random_floats(size_t(cout), 0.05f, 4, seed + 3);
  const auto shift = random_floats(size_t(cout), -2, 2, seed + 4);
  for (size_t i = 0; i < scale.size(); i += 3) scale[i] = -scale[i];
  std::vector<float> aff(scale);
  aff.insert(aff.end(), shift.begin(), shift.end());
  Graph g(ctx());
  TensorRef tx = upload(g, c.x, x, c.dtype);
  TensorRef tw = constant(g, c.w, w, c.dtype);
  Value tb = c.bias ? Value(constant(g, {cout}, b, c.dtype)) : Value(None{});
  TensorRef ta = g.add_constant({2, cout}, DType::F32, aff.data());
  const double lo = -0.5, hi = 1.5;
  TensorRef y = ops::call(g, "wgnn.convolution_padded.default",
                          {tx, tw, tb, c.stride, c.padding, c.dilation, c.transposed, c.output_padding, c.groups, act,
                           lo, hi, ta})
                    .tensor();
  std::string labels;
  for (const auto& dsp : g.dispatches()) labels += (labels.empty() ? "" : " | ") + dsp.label;
  EXPECT_THAT(labels, HasSubstr(path));
  EXPECT_THAT(labels, HasSubstr("affine"));
  Ref r = ref_conv(c, x, w, b);
  const int64_t vol = int64_t(r.v.size()) / (r.shape[0] * cout);
  for (size_t i = 0; i < r.v.size(); ++i) {
    const size_t ch = size_t(int64_t(i) / vol % cout);
    double v = r.v[i] * double(scale[ch]) + double(shift[ch]);
    if (act == "relu") v = std::max(v, 0.0);
    if (act == "clamp") v = std::clamp(v, lo, hi);
    if (act == "gelu") v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    r.v[i] = v;
  }
  ASSERT_EQ(g.info(y).shape, r.shape);
  g.run();
  const bool f16 = c.dtype == DType::F16;
  EXPECT_TRUE(all_close(download(g, y), r.v, f16 ? 6e-2 : 4e-4, f16 ? 4e-3 : 1e-5)) << labels;
}

TEST(Conv, AffineInTheEpilogueOfEveryKernel) {
  const char* acts[] = {"none", "relu", "clamp", "gelu"};
  for (DType dt : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    // The regular kernels, also where the device has subgroup matrices.
    ScopedSetting off("WGNN_SUBGROUP_MATMUL", "0");
    const int o = dt == DType::F16 ? 2 : 1;  // each case with another activation per dtype
    run_conv_affine({{2, 5, 7, 9}, {6, 5, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, dt}, acts[o % 4], 31,
                    "conv gemm");
    run_conv_affine({{2, 17, 6, 5}, {33, 17, 1, 1}, false, {1}, {0}, {1}, false, {0}, 1, dt}, acts[(o + 1) % 4], 32,
                    "conv pointwise");
    // Few tiles, a long reduction: split-K, the affine in the second pass.
    run_conv_affine({{1, 256, 5, 5}, {32, 256, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, dt}, acts[(o + 2) % 4], 33,
                    "splitk sum 9 affine");
    run_conv_affine({{1, 256, 5, 5}, {32, 256, 3, 3}, false, {1}, {1}, {1}, false, {0}, 1, dt}, acts[o % 4], 37,
                    "splitk sum 9 affine");
    run_conv_affine({{2, 8, 10, 9}, {8, 1, 3, 3}, true, {2}, {1}, {1}, false, {0}, 8, dt}, acts[(o + 1) % 4], 34,
                    "conv depthwise");
    run_conv_affine({{1, 6, 5, 4}, {6, 2, 3, 3}, true, {2}, {0}, {1}, true, {0}, 2, dt}, acts[(o + 2) % 4], 35,
                    "conv transposed gemm");
    run_conv_affine({{1, 9, 11, 10}, {12, 3, 3, 3}, false, {2}, {1}, {1}, false, {0}, 3, dt}, acts[o % 4], 36,
                    "conv gemm");
  }
}

// The tensor-core kernels' epilogue (1x1 as a product, KxK as the
// convolution mode), emulated on any device with shader-f16.
TEST(Conv, AffineInTheEpilogueOfTheSubgroupMatrixKernels) {
  if (!has_f16()) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  run_conv_affine({{2, 24, 6, 4}, {40, 24, 1, 1}, true, {1}, {0}, {1}, false, {0}, 1, DType::F16}, "relu", 41,
                  "conv 1x1 subgroup-matrix");
  run_conv_affine({{1, 16, 8, 8}, {24, 16, 1, 1}, false, {1}, {0}, {1}, false, {0}, 1, DType::F16}, "none", 44,
                  "conv 1x1 subgroup-matrix");
  run_conv_affine({{1, 8, 9, 8}, {20, 8, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, DType::F16}, "clamp", 42,
                  "conv 3x3 subgroup-matrix");
  run_conv_affine({{2, 16, 16, 16}, {24, 16, 3, 3}, false, {2}, {1}, {1}, false, {0}, 1, DType::F16}, "relu", 43,
                  "conv 3x3 stride 2 subgroup-matrix");
  // 5x5 = 25 pixels (results written one half at a time) over K = 2304
  // on one tile: split-K on the tensor cores (18 ranges of 4 steps), the
  // bias, affine and activation in the sum pass.
  run_conv_affine({{1, 256, 5, 5}, {32, 256, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, DType::F16}, "relu", 45,
                  "conv 3x3 subgroup-matrix 32x25x2304 splitk=18 emulated | conv splitk sum 18 affine relu");
  // A 1x1 on 7x7 (49 pixels): the convolution kernel, not the product.
  run_conv_affine({{1, 64, 7, 7}, {48, 64, 1, 1}, true, {1}, {0}, {1}, false, {0}, 1, DType::F16}, "clamp", 46,
                  "conv 1x1 subgroup-matrix 48x49x64 bias affine");
}

// affine_rounded: the convolution (and bias) rounded to float16 before the
// affine, the values of a separate convolution then batch norm: against a
// reference that rounds there, with scales that make the rounding show.
TEST(Conv, AffineRoundedGivesTheSeparateConvolutionsValues) {
  if (!has_f16()) GTEST_SKIP() << "no shader-f16";
  for (const char* mode : {"0", "emulate"}) {
    SCOPED_TRACE(mode);
    ScopedSetting env("WGNN_SUBGROUP_MATMUL", mode);
    for (const Conv& c : {Conv{{1, 16, 8, 8}, {24, 16, 3, 3}, true, {1}, {1, 1, 1, 1}, {1}, false, {0}, 1, DType::F16, true},
                          Conv{{1, 16, 8, 8}, {24, 16, 1, 1}, true, {1}, {0, 0, 0, 0}, {1}, false, {0}, 1, DType::F16, true},
                          Conv{{1, 8, 8, 8}, {8, 1, 3, 3}, true, {1}, {1, 1, 1, 1}, {1}, false, {0}, 8, DType::F16, true},
                          Conv{{1, 256, 5, 5}, {32, 256, 3, 3}, true, {1}, {1, 1, 1, 1}, {1}, false, {0}, 1, DType::F16, true}}) {
      const int64_t cout = c.w[0];
      auto x = quantize(random_floats(size_t(numel(c.x)), -1, 1, 51), c.dtype);
      auto w = quantize(random_floats(size_t(numel(c.w)), -1, 1, 52), c.dtype);
      auto b = quantize(random_floats(size_t(cout), -1, 1, 53), c.dtype);
      std::vector<float> aff(size_t(2 * cout));
      for (int64_t i = 0; i < cout; ++i) aff[size_t(i)] = 37.f + float(i), aff[size_t(cout + i)] = 0.25f * float(i);
      Ref r = ref_conv(c, x, w, b);
      Graph g(ctx());
      TensorRef tx = upload(g, c.x, x, c.dtype);
      TensorRef tw = constant(g, c.w, w, c.dtype);
      TensorRef tb = constant(g, {cout}, b, c.dtype);
      TensorRef ta = g.add_constant({2, cout}, DType::F32, aff.data());
      std::vector<TensorRef> ys;
      for (bool rounded : {true, false}) {
        ys.push_back(ops::call(g, "wgnn.convolution_padded.default",
                               {tx, tw, tb, c.stride, c.padding, c.dilation, false, c.output_padding, c.groups,
                                std::string("none"), 0.0, 0.0, ta, rounded})
                         .tensor());
      }
      g.run();
      const std::vector<float> yr = download(g, ys[0]), yu = download(g, ys[1]);
      const int64_t vol = int64_t(r.v.size()) / cout;
      std::vector<double> want(r.v.size());
      size_t differ = 0;
      for (size_t i = 0; i < r.v.size(); ++i) {
        const size_t ch = size_t(int64_t(i) / vol % cout);
        want[i] = double(half_to_float(float_to_half(float(r.v[i])))) * aff[ch] + aff[size_t(cout) + ch];
        differ += yr[i] != yu[i];
      }
      // The output's float16 rounding (half an ulp: 2.5e-4 relative).
      EXPECT_TRUE(all_close(yr, want, 1e-3, 6e-4));
      EXPECT_GT(differ, r.v.size() / 10) << "the rounding changed nothing";
    }
  }
}

// wgnn.convolution_padded's residual: act(conv + residual) in the
// epilogue of each kernel path gives the values of the separate chain
// (convolution, aten.add, then the activation) bit for bit, and both the
// double reference's; with an affine, act(conv * scale + shift + residual)
// against the reference. `path` is a substring of the fused labels.
void run_conv_residual(Conv c, const std::string& act, uint32_t seed, const std::string& path, bool affine) {
  if (c.dtype == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  c.split = true;
  const size_t d = c.x.size() - 2;
  if (c.padding.size() == 1) c.padding.assign(2 * d, c.padding[0]);
  const int64_t cout = c.transposed ? c.w[1] * c.groups : c.w[0];
  auto x = quantize(random_floats(size_t(numel(c.x)), -1, 1, seed), c.dtype);
  auto w = quantize(random_floats(size_t(numel(c.w)), -1, 1, seed + 1), c.dtype);
  auto b = quantize(random_floats(size_t(cout), -1, 1, seed + 2), c.dtype);
  Ref r = ref_conv(c, x, w, b);
  auto res = quantize(random_floats(r.v.size(), -2, 2, seed + 3), c.dtype);
  std::vector<float> aff(size_t(2 * cout));
  for (int64_t i = 0; i < cout; ++i) aff[size_t(i)] = 0.5f + 0.25f * float(i % 5), aff[size_t(cout + i)] = 0.125f * float(i % 3);
  Graph g(ctx());
  TensorRef tx = upload(g, c.x, x, c.dtype);
  TensorRef tw = constant(g, c.w, w, c.dtype);
  Value tb = c.bias ? Value(constant(g, {cout}, b, c.dtype)) : Value(None{});
  TensorRef tr = upload(g, r.shape, res, c.dtype);
  Value ta = affine ? Value(g.add_constant({2, cout}, DType::F32, aff.data())) : Value(None{});
  const double lo = -0.5, hi = 1.5;
  const ValueList conv_args{tx, tw, tb, c.stride, c.padding, c.dilation, c.transposed, c.output_padding, c.groups};
  ValueList fused_args = conv_args;
  fused_args.insert(fused_args.end(), {act, lo, hi, ta, c.dtype == DType::F16 && affine, tr});
  TensorRef y = ops::call(g, "wgnn.convolution_padded.default", fused_args).tensor();
  std::string labels;
  for (const auto& dsp : g.dispatches()) labels += (labels.empty() ? "" : " | ") + dsp.label;
  EXPECT_THAT(labels, HasSubstr(path));
  if (path.find("subgroup") == std::string::npos) EXPECT_THAT(labels, HasSubstr("residual"));
  // The chain unfused: the convolution (with the affine), the add, the activation.
  ValueList plain_args = conv_args;
  plain_args.insert(plain_args.end(), {std::string("none"), 0.0, 0.0, ta, c.dtype == DType::F16 && affine});
  TensorRef u = ops::call(g, "wgnn.convolution_padded.default", plain_args).tensor();
  u = ops::call(g, "aten.add.Tensor", {u, tr}).tensor();
  if (act == "relu") u = ops::call(g, "aten.relu.default", {u}).tensor();
  if (act == "clamp") u = ops::call(g, "aten.clamp.default", {u, lo, hi}).tensor();
  g.mark_output(y);
  g.mark_output(u);
  const int64_t vol = int64_t(r.v.size()) / (r.shape[0] * cout);
  for (size_t i = 0; i < r.v.size(); ++i) {
    const size_t ch = size_t(int64_t(i) / vol % cout);
    double v = affine ? r.v[i] * double(aff[ch]) + double(aff[size_t(cout) + ch]) : r.v[i];
    v += double(res[i]);
    if (act == "relu") v = std::max(v, 0.0);
    if (act == "clamp") v = std::clamp(v, lo, hi);
    if (act == "gelu") v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    r.v[i] = v;
  }
  ASSERT_EQ(g.info(y).shape, r.shape);
  g.run();
  const bool f16 = c.dtype == DType::F16;
  const std::vector<float> got = download(g, y), want = download(g, u);
  EXPECT_TRUE(all_close(got, r.v, f16 ? 6e-2 : 4e-4, f16 ? 8e-3 : 1e-5)) << labels;
  if (!affine) {
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], 4) != 0;
    EXPECT_EQ(differ, 0u) << labels;
  } else {
    EXPECT_TRUE(all_close(got, std::vector<double>(want.begin(), want.end()), f16 ? 2e-3 : 1e-6, f16 ? 2e-3 : 1e-6));
  }
}

TEST(Conv, ResidualInTheEpilogueOfEveryKernel) {
  const char* acts[] = {"none", "relu", "clamp"};
  for (DType dt : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    ScopedSetting off("WGNN_SUBGROUP_MATMUL", "0");
    for (bool affine : {false, true}) {
      SCOPED_TRACE(affine ? "with the affine" : "no affine");
      const int o = (dt == DType::F16) + 2 * affine;
      run_conv_residual({{2, 5, 7, 9}, {6, 5, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, dt}, acts[o % 3], 61,
                        "conv gemm", affine);
      run_conv_residual({{2, 17, 6, 5}, {33, 17, 1, 1}, false, {1}, {0}, {1}, false, {0}, 1, dt}, acts[(o + 1) % 3],
                        62, "conv pointwise", affine);
      run_conv_residual({{1, 256, 5, 5}, {32, 256, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, dt}, acts[(o + 2) % 3],
                        63, std::string("splitk sum 9") + (affine ? " affine" : "") + " residual", affine);
      run_conv_residual({{2, 8, 10, 9}, {8, 1, 3, 3}, true, {2}, {1}, {1}, false, {0}, 8, dt}, acts[(o + 1) % 3], 64,
                        "conv depthwise", affine);
      run_conv_residual({{1, 6, 5, 4}, {6, 2, 3, 3}, true, {2}, {0}, {1}, true, {0}, 2, dt}, acts[(o + 2) % 3], 65,
                        "conv transposed gemm", affine);
    }
  }
}

TEST(Conv, ResidualWithTheSubgroupMatrixKernels) {
  // In their epilogue, added to the float16-rounded value before the
  // activation (the values of the separate add, bit for bit without the
  // affine), OH*OW a multiple of 8 or not.
  if (!has_f16()) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  run_conv_residual({{2, 24, 6, 4}, {40, 24, 1, 1}, true, {1}, {0}, {1}, false, {0}, 1, DType::F16}, "relu", 71,
                    "conv 1x1 subgroup-matrix 40x24x24 batch 2 bias residual relu emulated", false);
  run_conv_residual({{1, 8, 9, 8}, {20, 8, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, DType::F16}, "clamp", 72,
                    "conv 3x3 subgroup-matrix 20x72x72 bias affine residual clamp emulated", true);
  run_conv_residual({{1, 8, 9, 8}, {20, 8, 3, 3}, true, {1}, {1}, {1}, false, {0}, 1, DType::F16}, "relu", 74,
                    "conv 3x3 subgroup-matrix 20x72x72 bias residual relu emulated", false);
  // 49 pixels: results written, and the residual read, one half at a time.
  run_conv_residual({{1, 24, 7, 7}, {40, 24, 1, 1}, true, {1}, {0}, {1}, false, {0}, 1, DType::F16}, "relu", 75,
                    "conv 1x1 subgroup-matrix 40x49x24 bias residual relu emulated", false);
  // Split-K on the tensor cores: the residual and activation in the sum
  // pass (ResNet-50's last 1x1 of a block on 7x7, scaled).
  for (bool affine : {false, true})
    run_conv_residual({{1, 512, 7, 7}, {40, 512, 1, 1}, true, {1}, {0}, {1}, false, {0}, 1, DType::F16}, "relu", 73,
                      affine ? "conv splitk sum 4 affine residual relu" : "conv splitk sum 4 residual relu", affine);
}

TEST(Conv, ResidualThatBroadcastsIsAddedAfterTheConvolution) {
  // A residual of another shape than the result's (one value per channel
  // here) is added by aten.add with broadcasting, then the activation: the
  // numpy result; another dtype is an error.
  Graph g(ctx());
  const std::vector<float> xv = random_floats(1 * 3 * 5 * 5, -1, 1, 81), wv = random_floats(4 * 3 * 3 * 3, -1, 1, 82);
  const std::vector<float> rv = {0.5f, -3.f, 1.f, -0.25f};
  TensorRef x = upload(g, {1, 3, 5, 5}, xv, DType::F32);
  TensorRef w = constant(g, {4, 3, 3, 3}, wv, DType::F32);
  TensorRef r = upload(g, {1, 4, 1, 1}, rv, DType::F32);
  const ValueList conv{x, w, None{}, IntList{1}, IntList{0, 0, 0, 0}, IntList{1}, false, IntList{0}, int64_t(1)};
  ValueList fused = conv;
  fused.insert(fused.end(), {std::string("relu"), 0.0, 0.0, None{}, false, r});
  TensorRef y = ops::call(g, "wgnn.convolution_padded.default", fused).tensor();
  EXPECT_EQ(g.info(y).shape, (Shape{1, 4, 3, 3}));
  g.mark_output(y);
  g.run();
  Conv c{{1, 3, 5, 5}, {4, 3, 3, 3}, false, {1}, {0, 0, 0, 0}, {1}, false, {0}, 1, DType::F32, true};
  Ref ref = ref_conv(c, xv, wv, {});
  for (size_t i = 0; i < ref.v.size(); ++i) ref.v[i] = std::max(ref.v[i] + double(rv[i / 9]), 0.0);
  EXPECT_TRUE(all_close(download(g, y), ref.v, 1e-5, 1e-5));
  TensorRef h = g.add_tensor({1, 4, 3, 3}, DType::I32, TensorKind::Input);
  ValueList bad = conv;
  bad.insert(bad.end(), {std::string("none"), 0.0, 0.0, None{}, false, h});
  EXPECT_THAT(error_of([&] { ops::call(g, "wgnn.convolution_padded.default", bad); }),
              HasSubstr("argument 'residual' has dtype int32; expected the input's float32"));
}

TEST(Conv, AffineErrors) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({1, 3, 5, 5}, DType::F32, TensorKind::Input);
  TensorRef w = g.add_tensor({4, 3, 3, 3}, DType::F32, TensorKind::Input);
  auto call = [&](TensorRef aff) {
    ops::call(g, "wgnn.convolution_padded.default",
              {x, w, None{}, IntList{1}, IntList{0, 0, 0, 0}, IntList{1}, false, IntList{0}, int64_t(1),
               std::string("none"), 0.0, 0.0, aff});
  };
  EXPECT_THAT(error_of([&] { call(g.add_tensor({4}, DType::F32, TensorKind::Input)); }),
              HasSubstr("argument 'affine' is float32 [4]; expected float32 [2, 4]"));
  EXPECT_THAT(error_of([&] { call(g.add_tensor({2, 4}, DType::F16, TensorKind::Input)); }),
              HasSubstr("expected float32 [2, 4]"));
}

TEST(Conv, ManyTilesAndLargeOutputs) {
  // 112 x 112 x 64 channels from 32 (MobileNet-like): several hundred tiles.
  run_conv({{1, 32, 112, 112}, {64, 32, 1, 1}}, 11);
  run_conv({{1, 16, 56, 56}, {24, 16, 3, 3}, true, {1}, {1}}, 12);
}

// A convolution's split of its long reduction (split-K, chosen from its
// tile count) is a choice of the plan's structure (Graph::choose). A size
// that replays a split its own tiles do not need runs one range of the
// reduction through the same two passes; one that replays no split runs
// without. Either way it records the first size's structure (one plan)
// and computes its own values.
TEST(Conv, AReplayedSplitRecordsTheFirstSizesStructure) {
  const Conv small{{1, 64, 6, 6}, {256, 64, 3, 3}, true, {1}, {1}};
  const Conv large{{1, 64, 40, 40}, {256, 64, 3, 3}, true, {1}, {1}};
  ASSERT_THAT(conv_label(small), HasSubstr("splitk")) << "premise: the small size splits on its own";
  ASSERT_THAT(conv_label(large), testing::Not(HasSubstr("splitk"))) << "premise: the large size does not";
  struct Rec {
    TensorRef x, y;
    std::vector<float> xv, wv, bv;
  };
  auto record = [](Graph& g, const Conv& c, uint32_t seed) {
    Rec r;
    r.xv = random_floats(size_t(numel(c.x)), -1, 1, seed);
    r.wv = random_floats(size_t(numel(c.w)), -1, 1, 77);
    r.bv = random_floats(size_t(c.w[0]), -1, 1, 78);
    r.x = upload(g, c.x, r.xv, DType::F32);
    TensorRef w = constant(g, c.w, r.wv, DType::F32);
    TensorRef b = constant(g, {c.w[0]}, r.bv, DType::F32);
    r.y = ops::call(g, "aten.convolution.default",
                    {r.x, w, b, c.stride, c.padding, c.dilation, c.transposed, c.output_padding, c.groups})
              .tensor();
    g.mark_output(r.y);
    return r;
  };
  for (const bool small_first : {true, false}) {
    SCOPED_TRACE(small_first ? "the small size first" : "the large size first");
    const Conv& first = small_first ? small : large;
    const Conv& then = small_first ? large : small;
    Graph a(ctx()), replayed(ctx()), own(ctx());
    record(a, first, 1);
    replayed.replay_choices(std::make_shared<const PlanChoices>(a.choices()));
    const Rec r = record(replayed, then, 2);
    record(own, then, 3);
    EXPECT_TRUE(replayed.replay_followed());
    EXPECT_EQ(replayed.structure(), a.structure());
    EXPECT_NE(own.structure(), a.structure());
    replayed.run();
    EXPECT_TRUE(all_close(download(replayed, r.y), ref_conv(then, r.xv, r.wv, r.bv).v, 1e-4, 1e-5));
  }
}

TEST(Conv, EmptyBatchRecordsNoDispatch) {
  Graph g(ctx());
  TensorRef x = g.add_tensor({0, 3, 5, 5}, DType::F32, TensorKind::Input);
  TensorRef w = g.add_tensor({4, 3, 3, 3}, DType::F32, TensorKind::Input);
  TensorRef y = ops::call(g, "aten.convolution.default",
                          {x, w, None{}, IntList{1}, IntList{0}, IntList{1}, false, IntList{0}, int64_t(1)})
                    .tensor();
  EXPECT_EQ(g.info(y).shape, (Shape{0, 4, 3, 3}));
  EXPECT_TRUE(g.dispatches().empty());
}

// ---- pooling reference ----------------------------------------------------------

namespace {

struct Pool {
  enum Kind { Max, Avg, Adaptive } kind = Max;
  Shape x;
  IntList kernel{1}, stride{}, padding{0}, dilation{1};
  bool ceil_mode = false, count_include_pad = true;
  int64_t divisor = 0;  // divisor_override
  IntList output_size{};
  DType dtype = DType::F32;
  bool split = false;  // wgnn.*_pool_padded: padding = begins, then ends
  int indices = 0;     // 1: ATen's (per plane), 2: ONNX row-major, 3: ONNX column-major
};

struct PoolRef {
  Shape shape;
  std::vector<double> v;
  std::vector<int64_t> idx;
};

// ATen's output size: floor or ceil, the last window starting inside the
// input or its begin padding.
int64_t out_size(int64_t in, int64_t k, int64_t pb, int64_t pe, int64_t s, int64_t d, bool ceil_mode) {
  const double span = double(in + pb + pe - d * (k - 1) - 1) / double(s);
  int64_t o = int64_t(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil_mode && (o - 1) * s >= in + pb) --o;
  return o;
}

PoolRef ref_pool(const Pool& p, const std::vector<float>& x) {
  const size_t d = p.kind == Pool::Adaptive ? p.output_size.size() : p.kernel.size();
  const size_t lead = p.x.size() - d;
  int64_t planes = 1;
  for (size_t i = 0; i < lead; ++i) planes *= p.x[i];
  D3 in = dims3(IntList(p.x.begin() + long(lead), p.x.end()), d, 1);
  D3 k = dims3(p.kernel, d, 1), s = p.stride.empty() ? k : dims3(p.stride, d, 1), dil = dims3(p.dilation, d, 1);
  D3 pb, pe;
  if (p.split) {
    pb = dims3(IntList(p.padding.begin(), p.padding.begin() + long(d)), d, 0);
    pe = dims3(IntList(p.padding.begin() + long(d), p.padding.end()), d, 0);
  } else {
    pb = pe = dims3(p.padding, d, 0);
  }
  D3 out;
  for (size_t j = 0; j < 3; ++j) {
    out[j] = p.kind == Pool::Adaptive ? dims3(p.output_size, d, 1)[j]
                                      : out_size(in[j], k[j], pb[j], pe[j], s[j], dil[j], p.ceil_mode);
  }
  PoolRef r;
  r.shape = Shape(p.x.begin(), p.x.begin() + long(lead));
  for (size_t j = 3 - d; j < 3; ++j) r.shape.push_back(out[j]);
  const int64_t ivol = in[0] * in[1] * in[2];
  for (int64_t pl = 0; pl < planes; ++pl) {
    for (int64_t a = 0; a < out[0]; ++a) {
      for (int64_t b = 0; b < out[1]; ++b) {
        for (int64_t c = 0; c < out[2]; ++c) {
          const D3 o{a, b, c};
          // Per dim: the taps (positions) of the window, and for average
          // pooling ATen's window clipped to the padded input.
          std::array<std::vector<int64_t>, 3> taps;
          int64_t pool_size = 1;
          for (size_t j = 0; j < 3; ++j) {
            if (p.kind == Pool::Adaptive) {
              const int64_t st = (o[j] * in[j]) / out[j];
              const int64_t en = ((o[j] + 1) * in[j] + out[j] - 1) / out[j];
              for (int64_t t = st; t < en; ++t) taps[j].push_back(t);
              pool_size *= en - st;
              continue;
            }
            const int64_t st = o[j] * s[j] - pb[j];
            int64_t inside_padded = 0;
            for (int64_t t = 0; t < k[j]; ++t) {
              const int64_t pos = st + t * dil[j];
              if (pos < in[j] + pe[j]) ++inside_padded;
              if (pos >= 0 && pos < in[j]) taps[j].push_back(pos);
            }
            pool_size *= inside_padded;
          }
          double acc = p.kind == Pool::Max ? -std::numeric_limits<double>::infinity() : 0.0;
          int64_t arg = -1, count = 0;
          for (int64_t ta : taps[0]) {
            for (int64_t tb : taps[1]) {
              for (int64_t tc : taps[2]) {
                const int64_t off = (ta * in[1] + tb) * in[2] + tc;
                const double v = x[size_t(pl * ivol + off)];
                ++count;
                if (p.kind == Pool::Max) {
                  if (arg < 0 || v > acc || std::isnan(v)) {
                    acc = v;
                    arg = off;
                  }
                } else {
                  acc += v;
                }
              }
            }
          }
          if (p.kind == Pool::Max) {
            if (arg < 0) acc = -double(std::numeric_limits<float>::max());
            if (p.indices == 3) arg = (arg % in[2]) * in[1] + (arg / in[2]) % in[1];
            if (p.indices >= 2) arg += pl * ivol;
            r.idx.push_back(arg);
          } else {
            const int64_t div = p.kind == Pool::Adaptive ? pool_size
                                : p.divisor > 0      ? p.divisor
                                : p.count_include_pad ? pool_size
                                                      : count;
            acc = count ? acc / double(div) : 0.0;
          }
          r.v.push_back(acc);
        }
      }
    }
  }
  return r;
}

ValueList pool_args(const Pool& p, TensorRef x) {
  const size_t d = p.kernel.size();
  if (p.kind == Pool::Adaptive) return {x, p.output_size};
  if (p.split) {
    if (p.kind == Pool::Max) {
      ValueList a{x, p.kernel, p.stride, p.padding, p.dilation, p.ceil_mode};
      if (p.indices) a.push_back(int64_t(p.indices == 3 ? 1 : 0));
      return a;
    }
    return {x, p.kernel, p.stride, p.padding, p.dilation, p.ceil_mode, p.count_include_pad,
            p.divisor ? Value(p.divisor) : Value(None{})};
  }
  if (p.kind == Pool::Max) return {x, p.kernel, p.stride, p.padding, p.dilation, p.ceil_mode};
  ValueList a{x, p.kernel, p.stride, p.padding, p.ceil_mode, p.count_include_pad};
  if (d > 1) a.push_back(p.divisor ? Value(p.divisor) : Value(None{}));
  return a;
}

std::string pool_op(const Pool& p) {
  const size_t d = p.kind == Pool::Adaptive ? p.output_size.size() : p.kernel.size();
  if (p.split) {
    if (p.kind == Pool::Avg) return "wgnn.avg_pool_padded.default";
    return p.indices ? "wgnn.max_pool_padded_with_indices.default" : "wgnn.max_pool_padded.default";
  }
  switch (p.kind) {
    case Pool::Max: return fmt::format("aten.max_pool{}d{}.default", d, p.indices ? "_with_indices" : "");
    case Pool::Avg: return fmt::format("aten.avg_pool{}d.default", d);
    case Pool::Adaptive: return fmt::format("aten.adaptive_avg_pool{}d.default", d);
  }
  return "";
}

void run_pool(const Pool& p, uint32_t seed, std::vector<float> x = {}) {
  if (p.dtype == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  if (x.empty()) x = random_floats(size_t(numel(p.x)), -4, 4, seed);
  const bool is_int = p.dtype != DType::F32 && p.dtype != DType::F16;
  if (is_int) {
    for (auto& v : x) v = std::round(v * 20);
    if (p.dtype == DType::U8) {
      for (auto& v : x) v = std::abs(v);
    }
  }
  x = quantize(x, p.dtype == DType::F16 ? DType::F16 : DType::F32);
  Graph g(ctx());
  TensorRef tx;
  if (is_int) {
    tx = g.add_tensor(p.x, p.dtype, TensorKind::Input);
    if (p.dtype == DType::I32) {
      std::vector<int32_t> h(x.begin(), x.end());
      g.write(tx, h.data(), h.size() * 4);
    } else if (p.dtype == DType::I64) {
      std::vector<int64_t> h(x.begin(), x.end());
      g.write(tx, h.data(), h.size() * 8);
    } else if (p.dtype == DType::U8) {
      std::vector<uint8_t> h(x.begin(), x.end());
      g.write(tx, h.data(), h.size());
    } else {
      std::vector<int8_t> h(x.begin(), x.end());
      g.write(tx, h.data(), h.size());
    }
  } else {
    tx = upload(g, p.x, x, p.dtype);
  }
  Value out = ops::call(g, pool_op(p), pool_args(p, tx));
  TensorRef y = p.indices ? out.list()[0].tensor() : out.tensor();
  const PoolRef r = ref_pool(p, x);
  ASSERT_EQ(g.info(y).shape, r.shape);
  EXPECT_EQ(g.info(y).dtype, p.dtype);
  g.run();
  std::vector<float> got;
  switch (p.dtype) {
    case DType::I32: {
      auto h = g.read<int32_t>(y);
      got.assign(h.begin(), h.end());
      break;
    }
    case DType::I64: {
      auto h = g.read<int64_t>(y);
      got.assign(h.begin(), h.end());
      break;
    }
    case DType::U8: {
      auto h = g.read<uint8_t>(y);
      got.assign(h.begin(), h.end());
      break;
    }
    case DType::I8: {
      auto h = g.read<int8_t>(y);
      got.assign(h.begin(), h.end());
      break;
    }
    default: got = download(g, y);
  }
  const bool f16 = p.dtype == DType::F16;
  EXPECT_TRUE(all_close(got, r.v, f16 ? 4e-3 : 1e-5, f16 ? 2e-3 : 1e-5));
  if (p.indices) {
    TensorRef ti = out.list()[1].tensor();
    EXPECT_EQ(g.info(ti).dtype, DType::I64);
    EXPECT_EQ(g.info(ti).shape, r.shape);
    EXPECT_EQ(g.read<int64_t>(ti), r.idx);
  }
}

struct NamedPool {
  const char* name;
  Pool p;
};
void PrintTo(const NamedPool& n, std::ostream* os) { *os << n.name; }

// clang-format off
const std::vector<NamedPool>& pool_cases() {
  using P = Pool;
  static const std::vector<NamedPool> v = {
      {"max2d_k3_s2_p1_resnet", {P::Max, {2, 3, 15, 14}, {3, 3}, {2}, {1}}},
      {"max2d_k2_default_stride", {P::Max, {1, 4, 9, 8}, {2, 2}}},
      {"max2d_ceil", {P::Max, {1, 2, 10, 11}, {3, 3}, {2, 2}, {0}, {1}, true}},
      {"max2d_ceil_pad", {P::Max, {1, 2, 9, 12}, {3, 2}, {2, 3}, {1, 1}, {1}, true}},
      {"max2d_dilation2", {P::Max, {2, 2, 11, 10}, {3, 2}, {1, 2}, {1}, {2, 3}}},
      {"max2d_unbatched", {P::Max, {3, 8, 7}, {2, 2}, {2}, {1}, {1}, true}},
      {"max2d_global_window", {P::Max, {2, 6, 7, 7}, {7, 7}}},
      {"max2d_window_is_input_unbatched", {P::Max, {5, 4, 9}, {4, 9}}},
      {"max1d", {P::Max, {2, 3, 20}, {4}, {3}, {1}, {2}}},
      {"max3d", {P::Max, {1, 2, 5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {1, 1, 0}, {1}, true}},
      {"max2d_indices", {P::Max, {2, 3, 9, 8}, {3, 3}, {2}, {1}, {1}, true, true, 0, {}, DType::F32, false, 1}},
      {"max1d_indices", {P::Max, {2, 3, 11}, {3}, {2}, {1}, {1}, true, true, 0, {}, DType::F32, false, 1}},
      {"max3d_indices", {P::Max, {1, 2, 4, 5, 6}, {2, 2, 2}, {2}, {1}, {1}, false, true, 0, {}, DType::F32, false, 1}},
      {"max2d_f16", {P::Max, {1, 5, 9, 9}, {3, 3}, {2}, {1}, {1}, false, true, 0, {}, DType::F16}},
      {"max2d_int32", {P::Max, {1, 3, 7, 7}, {3, 3}, {2}, {1}, {1}, false, true, 0, {}, DType::I32}},
      {"max2d_int64", {P::Max, {1, 2, 6, 5}, {2, 2}, {1}, {1}, {1}, false, true, 0, {}, DType::I64}},
      {"max2d_uint8", {P::Max, {1, 2, 5, 5}, {5, 5}, {1}, {2}, {1}, false, true, 0, {}, DType::U8}},
      {"max2d_int8", {P::Max, {1, 2, 6, 6}, {3, 3}, {1}, {1}, {1}, false, true, 0, {}, DType::I8}},
      {"avg2d_pad_include", {P::Avg, {2, 3, 11, 10}, {3, 3}, {2}, {1}, {1}, false, true}},
      {"avg2d_pad_exclude", {P::Avg, {2, 3, 11, 10}, {3, 3}, {2}, {1}, {1}, false, false}},
      {"avg2d_ceil_include", {P::Avg, {1, 2, 10, 9}, {3, 2}, {2, 2}, {1, 1}, {1}, true, true}},
      {"avg2d_ceil_exclude", {P::Avg, {1, 2, 10, 9}, {3, 2}, {2, 2}, {1, 0}, {1}, true, false}},
      {"avg2d_divisor_override", {P::Avg, {1, 3, 8, 8}, {3, 3}, {2}, {1}, {1}, true, true, 5}},
      {"avg2d_default_stride", {P::Avg, {2, 4, 8, 6}, {2, 2}}},
      {"avg2d_global_window", {P::Avg, {2, 5, 6, 7}, {6, 7}}},
      {"avg1d", {P::Avg, {2, 3, 17}, {4}, {3}, {2}, {1}, true, false}},
      {"avg3d", {P::Avg, {1, 2, 5, 6, 7}, {3, 2, 3}, {2}, {1, 1, 0}, {1}, true, true}},
      {"avg2d_f16", {P::Avg, {1, 4, 9, 9}, {3, 3}, {2}, {1}, {1}, false, false, 0, {}, DType::F16}},
      {"adaptive2d_1x1", {P::Adaptive, {2, 3, 7, 7}, {1}, {}, {0}, {1}, false, true, 0, {1, 1}}},
      {"adaptive2d_1x1_large", {P::Adaptive, {1, 3, 64, 64}, {1}, {}, {0}, {1}, false, true, 0, {1, 1}}},
      {"adaptive2d_1x1_one_element", {P::Adaptive, {1, 3, 1, 1}, {1}, {}, {0}, {1}, false, true, 0, {1, 1}}},
      {"adaptive2d_uneven", {P::Adaptive, {2, 3, 7, 11}, {1}, {}, {0}, {1}, false, true, 0, {3, 5}}},
      {"adaptive2d_upsamples", {P::Adaptive, {1, 2, 3, 2}, {1}, {}, {0}, {1}, false, true, 0, {5, 4}}},
      {"adaptive2d_unbatched", {P::Adaptive, {4, 6, 6}, {1}, {}, {0}, {1}, false, true, 0, {2, 3}}},
      {"adaptive1d", {P::Adaptive, {2, 3, 10}, {1}, {}, {0}, {1}, false, true, 0, {4}}},
      {"adaptive3d", {P::Adaptive, {1, 2, 5, 4, 6}, {1}, {}, {0}, {1}, false, true, 0, {2, 3, 4}}},
      {"adaptive2d_f16", {P::Adaptive, {1, 8, 5, 5}, {1}, {}, {0}, {1}, false, true, 0, {1, 1}, DType::F16}},
      {"padded_max_asymmetric_ceil", {P::Max, {1, 2, 9, 8}, {3, 3}, {2, 2}, {0, 2, 1, 0}, {1, 1}, true, true, 0, {},
                                      DType::F32, true}},
      {"padded_max_big_pads", {P::Max, {1, 1, 4, 4}, {2, 2}, {1, 1}, {3, 3, 3, 3}, {1, 1}, false, true, 0, {},
                               DType::F32, true}},
      {"padded_avg_asymmetric_include", {P::Avg, {1, 2, 9, 8}, {3, 3}, {2, 2}, {0, 2, 1, 0}, {1, 1}, true, true, 0,
                                         {}, DType::F32, true}},
      {"padded_avg_asymmetric_exclude", {P::Avg, {1, 2, 9, 8}, {3, 3}, {2, 2}, {0, 2, 1, 0}, {1, 1}, false, false, 0,
                                         {}, DType::F32, true}},
      {"padded_avg_dilation", {P::Avg, {1, 2, 10, 9}, {2, 3}, {1, 2}, {1, 1, 1, 1}, {2, 2}, false, true, 0, {},
                               DType::F32, true}},
      {"padded_avg_1d", {P::Avg, {2, 2, 11}, {3}, {2}, {2, 0}, {1}, false, false, 0, {}, DType::F32, true}},
      {"padded_max_indices_row_major", {P::Max, {2, 3, 5, 5}, {2, 2}, {2, 2}, {0, 0, 1, 1}, {1, 1}, false, true, 0,
                                        {}, DType::F32, true, 2}},
      {"padded_max_indices_col_major", {P::Max, {2, 3, 5, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, true, 0,
                                        {}, DType::F32, true, 3}},
  };
  return v;
}
// clang-format on

class PoolCase : public testing::TestWithParam<NamedPool> {};

TEST_P(PoolCase, MatchesReference) { run_pool(GetParam().p, 21); }
INSTANTIATE_TEST_SUITE_P(Cases, PoolCase, testing::ValuesIn(pool_cases()),
                         [](const testing::TestParamInfo<NamedPool>& i) { return std::string(i.param.name); });

}  // namespace

TEST(Pool, AlternativeSpellingsOfAdaptiveAvgPool) {
  Graph g(ctx());
  auto x = random_floats(2 * 3 * 6 * 6, -1, 1, 4);
  TensorRef tx = upload(g, {2, 3, 6, 6}, x, DType::F32);
  TensorRef a = ops::call(g, "aten._adaptive_avg_pool2d.default", {tx, IntList{2, 2}}).tensor();
  TensorRef b = ops::call(g, "aten.adaptive_avg_pool2d.default", {tx, IntList{2}}).tensor();
  TensorRef c = ops::call(g, "aten.avg_pool2d.default", {tx, IntList{3, 3}}).tensor();
  g.run();
  EXPECT_EQ(download(g, a), download(g, c));
  EXPECT_EQ(download(g, b), download(g, c));
}

TEST(Pool, MaxPropagatesNaN) {
  std::vector<float> x(2 * 16, 1.0f);
  x[5] = std::nanf("");
  x[16 + 15] = std::nanf("");
  x[16 + 0] = 100.f;
  // NaN in a window wins, in the general kernel and in the global one.
  for (const IntList& k : {IntList{2, 2}, IntList{4, 4}}) {
    Graph g(ctx());
    TensorRef tx = upload(g, {1, 2, 4, 4}, x, DType::F32);
    TensorRef y = ops::call(g, "aten.max_pool2d.default", {tx, k}).tensor();
    g.run();
    auto got = download(g, y);
    if (k[0] == 2) {
      ASSERT_EQ(got.size(), 8u);
      EXPECT_TRUE(std::isnan(got[0]));
      EXPECT_EQ(got[1], 1.f);
      EXPECT_EQ(got[4], 100.f);
      EXPECT_TRUE(std::isnan(got[7]));
    } else {
      ASSERT_EQ(got.size(), 2u);
      EXPECT_TRUE(std::isnan(got[0]));
      EXPECT_TRUE(std::isnan(got[1]));
    }
  }
}

TEST(Pool, AllNegativeWindowsAndMissingTapsGiveLowest) {
  // Max of negative values with padding: padding never wins.
  std::vector<float> x(9, -5.f);
  run_pool({Pool::Max, {1, 1, 3, 3}, {3, 3}, {1}, {1}}, 1, x);
  // A window wholly in padding (ONNX allows any pads): the lowest float.
  Graph g(ctx());
  TensorRef tx = upload(g, {1, 1, 2, 2}, {1, 2, 3, 4}, DType::F32);
  TensorRef y = ops::call(g, "wgnn.max_pool_padded.default",
                          {tx, IntList{1, 1}, IntList{1, 1}, IntList{1, 0, 0, 0}, IntList{1, 1}, false})
                    .tensor();
  g.run();
  EXPECT_EQ(download(g, y), (std::vector<float>{-std::numeric_limits<float>::max(),
                                                -std::numeric_limits<float>::max(), 1, 2, 3, 4}));
}

TEST(Pool, MoreWorkgroupsThanOneGridDimension) {
  // 4100 x 4100 outputs: more than 65535 workgroups of 256.
  const int64_t n = 4100;
  if (uint64_t(n * n) * 4 > ctx().limits().max_storage_buffer_binding_size) GTEST_SKIP() << "binding limit";
  Graph g(ctx());
  std::vector<float> x(size_t(n * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 1000);
  TensorRef tx = upload(g, {1, 1, n, n}, x, DType::F32);
  TensorRef y = ops::call(g, "aten.max_pool2d.default", {tx, IntList{1}}).tensor();
  g.run();
  std::vector<double> ref(x.begin(), x.end());
  EXPECT_TRUE(all_close(download(g, y), ref, 0, 0));
}

// ---- errors ---------------------------------------------------------------------

namespace {

void expect_error(Graph& g, const std::string& op, const ValueList& args, std::vector<std::string> needles) {
  try {
    ops::call(g, op, args);
    ADD_FAILURE() << "no error from " << op << " (expected " << needles[0] << ")";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(op));
    for (const auto& n : needles) EXPECT_THAT(e.what(), HasSubstr(n));
  }
}

}  // namespace

TEST(Conv, Errors) {
  Graph g(ctx());
  auto t = [&](const Shape& s, DType d = DType::F32) { return g.add_tensor(s, d, TensorKind::Input); };
  const std::string op = "aten.convolution.default";
  TensorRef x = t({1, 4, 8, 8});
  TensorRef w = t({6, 4, 3, 3});
  auto args = [&](TensorRef xx, TensorRef ww, Value b, IntList s, IntList p, IntList d, bool tr, IntList op_,
                  int64_t groups) { return ValueList{xx, ww, b, s, p, d, tr, op_, groups}; };
  const IntList one{1}, zero{0};
  expect_error(g, op, args(x, t({6, 3, 3, 3}), None{}, one, zero, one, false, zero, 1),
               {"expects input to have 3 channels", "has 4"});
  expect_error(g, op, args(x, t({6, 2, 3, 3}), None{}, one, zero, one, false, zero, 3),
               {"input channels (4) are not divisible by groups (3)"});
  expect_error(g, op, args(x, t({6, 4, 3, 3}), None{}, one, zero, one, false, zero, 0), {"'groups' is 0"});
  expect_error(g, op, args(x, t({5, 2, 3, 3}), None{}, one, zero, one, false, zero, 2),
               {"5 output channels, not divisible by groups (2)"});
  expect_error(g, op, args(x, t({6, 4, 9, 3}), None{}, one, zero, one, false, zero, 1),
               {"can't be greater than the padded input", "spans 9", "padded input is 8"});
  expect_error(g, op, args(x, t({6, 4, 5, 5}), None{}, one, zero, IntList{2}, false, zero, 1),
               {"can't be greater than the padded input", "spans 9"});
  expect_error(g, op, args(t({4, 8, 8}), w, None{}, one, zero, one, false, zero, 1),
               {"expected 4-dimensional input for 4-dimensional weight [6, 4, 3, 3], but got input [4, 8, 8]"});
  expect_error(g, op, args(t({1, 1, 4, 8, 8, 2}), w, None{}, one, zero, one, false, zero, 1),
               {"got input [1, 1, 4, 8, 8, 2]"});
  expect_error(g, op, args(x, t({6, 4, 3}), None{}, one, zero, one, false, zero, 1),
               {"3-dimensional weight [6, 4, 3], but got input [1, 4, 8, 8]"});
  expect_error(g, op, args(x, t({6, 4}), None{}, one, zero, one, false, zero, 1),
               {"'weight' has shape [6, 4]", "rank 3 (1-D)"});
  expect_error(g, op, args(x, w, t({5}), one, zero, one, false, zero, 1), {"'bias' has shape [5]", "expected [6]"});
  expect_error(g, op, args(x, w, t({6}, DType::F16), one, zero, one, false, zero, 1), {"'bias' has dtype float16"});
  expect_error(g, op, args(x, t({6, 4, 3, 3}, DType::F16), None{}, one, zero, one, false, zero, 1),
               {"'weight' has dtype float16"});
  expect_error(g, op, args(t({1, 4, 8, 8}, DType::I32), w, None{}, one, zero, one, false, zero, 1),
               {"'input' has dtype int32"});
  expect_error(g, op, args(x, w, None{}, IntList{0}, zero, one, false, zero, 1), {"'stride' is [0, 0]", "> 0"});
  expect_error(g, op, args(x, w, None{}, IntList{1, 1, 1}, zero, one, false, zero, 1),
               {"'stride' is [1, 1, 1]", "expected 2 values"});
  expect_error(g, op, args(x, w, None{}, one, IntList{-1}, one, false, zero, 1), {"'padding' is [-1, -1]", ">= 0"});
  expect_error(g, op, args(x, w, None{}, one, zero, IntList{0}, false, zero, 1), {"'dilation' is [0, 0]"});
  // Transposed: weight is (C_in, C_out / groups, k...).
  TensorRef wt = t({4, 3, 3, 3});
  expect_error(g, op, args(t({1, 5, 4, 4}), wt, None{}, one, zero, one, true, zero, 1),
               {"transposed weight [4, 3, 3, 3] expects input to have 4 channels", "has 5"});
  expect_error(g, op, args(x, wt, None{}, IntList{2}, zero, one, true, IntList{2}, 1),
               {"output_padding [2, 2] must be smaller than either stride [2, 2] or dilation [1, 1]"});
  expect_error(g, op, args(t({1, 4, 1, 1}), t({4, 3, 1, 1}), None{}, one, IntList{1}, one, true, zero, 1),
               {"output along spatial dim 0 would be -1"});
  expect_error(g, op, {x}, {"missing argument 1 'weight'"});
  expect_error(g, op, {x, 2.0}, {"'weight' must be a Tensor"});
  expect_error(g, op, ValueList(10, Value(x)), {"at most 9 arguments"});
  expect_error(g, "wgnn.convolution_padded.default", args(x, w, None{}, one, IntList{1, 1}, one, false, zero, 1),
               {"'padding' is [1, 1]", "expected 4 values (begin pads, then end pads)"});
  expect_error(g, "wgnn.convolution_padded.default",
               args(x, w, None{}, one, IntList{0, -1, 0, 0}, one, false, zero, 1), {">= 0"});
}

TEST(Pool, Errors) {
  Graph g(ctx());
  auto t = [&](const Shape& s, DType d = DType::F32) { return g.add_tensor(s, d, TensorKind::Input); };
  TensorRef x = t({1, 2, 6, 6});
  expect_error(g, "aten.max_pool2d.default", {t({6, 6}), IntList{2}}, {"'self' has shape [6, 6]", "rank 3 (C, H, W)"});
  expect_error(g, "aten.max_pool2d.default", {x, IntList{7}}, {"output size along spatial dim 0 would be 0"});
  expect_error(g, "aten.max_pool2d.default", {x, IntList{2}, IntList{2}, IntList{2}},
               {"padding [2, 2] should be at most half of the effective kernel size [2, 2]"});
  expect_error(g, "aten.avg_pool2d.default", {x, IntList{3}, IntList{1}, IntList{2}},
               {"padding [2, 2] should be at most half of the kernel size [3, 3]"});
  expect_error(g, "aten.max_pool2d.default", {x, IntList{0}}, {"'kernel_size' is [0, 0]"});
  expect_error(g, "aten.max_pool2d.default", {x, IntList{}}, {"'kernel_size' is empty"});
  expect_error(g, "aten.max_pool2d.default", {x, IntList{2}, IntList{0}}, {"'stride' is [0, 0]"});
  expect_error(g, "aten.max_pool2d.default", {x, IntList{2, 2, 2}}, {"'kernel_size' is [2, 2, 2]", "expected 2"});
  expect_error(g, "aten.max_pool2d.default", {t({1, 2, 6, 6}, DType::Bool), IntList{2}}, {"'self' has dtype bool"});
  expect_error(g, "aten.avg_pool2d.default", {t({1, 2, 6, 6}, DType::I32), IntList{2}}, {"'self' has dtype int32"});
  expect_error(g, "aten.avg_pool2d.default", {x, IntList{2}, IntList{}, IntList{0}, false, true, int64_t(0)},
               {"'divisor_override' is 0"});
  expect_error(g, "aten.adaptive_avg_pool2d.default", {x, IntList{0, 1}}, {"'output_size' is [0, 1]"});
  expect_error(g, "aten.adaptive_avg_pool2d.default", {x, IntList{1, 1, 1}}, {"'output_size' is [1, 1, 1]"});
  expect_error(g, "aten.adaptive_avg_pool2d.default", {t({1, 2, 0, 3}), IntList{1, 1}}, {"empty spatial dim"});
  expect_error(g, "aten.max_pool1d.default", {x, IntList{2}}, {"'self' has shape [1, 2, 6, 6]", "rank 2 (C, L)"});
  expect_error(g, "wgnn.max_pool_padded.default", {x, IntList{2, 2}, IntList{1, 1}, IntList{1, 1}},
               {"'padding' is [1, 1]", "expected 4 values"});
  expect_error(g, "wgnn.max_pool_padded.default", {x, IntList{2, 2, 2, 2}}, {"expected 1 to 3 values"});
  expect_error(g, "wgnn.max_pool_padded_with_indices.default",
               {x, IntList{2, 2}, IntList{1, 1}, IntList{0, 0, 0, 0}, IntList{1, 1}, false, int64_t(2)},
               {"'storage_order' is 2"});
}

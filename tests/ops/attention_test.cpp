// wgnn.attention.default against a double-precision reference, float32 and
// float16: contiguous views, q/k/v packed in one projection buffer with the
// result absorbed as [B, L, H*Dv], k stored transposed, edge sizes (S past a
// tile, L=1, S=1, head dims not multiples of 4, 128), Whisper-size heads,
// additive masks (float-min causal broadcast over heads, -inf on some keys,
// a row of -inf giving NaN, broadcast over the batch), every tile shape
// through WGNN_ATTENTION_TILE, and every validation error. Float16 attention
// on subgroup matrices (tensor cores) on the same kinds of problems, emulated
// here and on the tensor cores where the device has them.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "op_test_util.h"
#include "ops/subgroup_matmul.h"
#include "scoped_env.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

constexpr const char* kOp = "wgnn.attention.default";
bool has_f16() { return ctx().features().shader_f16; }

struct Buf {
  Shape shape;
  std::vector<float> v;
};

// One problem: buffers, views into them and the result's layout.
struct Problem {
  std::vector<Buf> bufs;
  int qb = 0, kb = 1, vb = 2;  // which buffer q, k, v read
  IntList qv, kv, vv;          // [offset, B, H, N, D, sB, sH, sN, sD]
  std::optional<Buf> mask;
  DType mask_dt = DType::F32;
  IntList mv;  // [offset, sB, sH, sL, sS]
  Shape out_shape;
  IntList ov;  // [offset, sB, sH, sL, sD]
  double scale = 1;
};

IntList contiguous_view(int64_t B, int64_t H, int64_t N, int64_t D) { return {0, B, H, N, D, H * N * D, N * D, D, 1}; }

double at(const Buf& b, const IntList& v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return b.v[size_t(v[0] + i0 * v[5] + i1 * v[6] + i2 * v[7] + i3 * v[8])];
}

// The result in out_shape's layout (elements the view does not write stay 0).
std::vector<double> reference(const Problem& p) {
  const Buf &Q = p.bufs[size_t(p.qb)], &K = p.bufs[size_t(p.kb)], &V = p.bufs[size_t(p.vb)];
  const int64_t B = p.qv[1], H = p.qv[2], L = p.qv[3], D = p.qv[4], S = p.kv[3], DV = p.vv[4];
  std::vector<double> out(size_t(numel(p.out_shape)), 0.0);
  std::vector<double> s(static_cast<size_t>(S));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t l = 0; l < L; ++l) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) acc += at(Q, p.qv, b, h, l, d) * at(K, p.kv, b, h, j, d);
          acc *= p.scale;
          if (p.mask) acc += p.mask->v[size_t(p.mv[0] + b * p.mv[1] + h * p.mv[2] + l * p.mv[3] + j * p.mv[4])];
          s[size_t(j)] = acc;
          mx = std::max(mx, acc);
        }
        double sum = 0;
        for (int64_t j = 0; j < S; ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - mx));
        for (int64_t d = 0; d < DV; ++d) {
          double o = 0;
          for (int64_t j = 0; j < S; ++j) o += s[size_t(j)] * at(V, p.vv, b, h, j, d);
          out[size_t(p.ov[0] + b * p.ov[1] + h * p.ov[2] + l * p.ov[3] + d * p.ov[4])] = o / sum;
        }
      }
    }
  }
  return out;
}

// Runs the op (buffers rounded to `dt` first); returns the result. `labels`
// gets the dispatches' labels, each followed by its pipeline's name.
std::vector<float> run(Problem& p, DType dt, std::string* labels = nullptr) {
  for (auto& b : p.bufs) b.v = quantize(b.v, dt);
  if (p.mask) p.mask->v = quantize(p.mask->v, p.mask_dt);
  Graph g(ctx());
  std::vector<TensorRef> t;
  for (const auto& b : p.bufs) t.push_back(upload(g, b.shape, b.v, dt));
  Value mask = None{};
  if (p.mask) mask = upload(g, p.mask->shape, p.mask->v, p.mask_dt);
  TensorRef y = ops::call(g, kOp,
                          {t[size_t(p.qb)], t[size_t(p.kb)], t[size_t(p.vb)], mask, p.scale, p.qv, p.kv, p.vv,
                           p.mask ? p.mv : IntList{}, IntList(p.out_shape.begin(), p.out_shape.end()), p.ov})
                    .tensor();
  EXPECT_EQ(g.info(y).shape, p.out_shape);
  EXPECT_EQ(g.info(y).dtype, dt);
  if (labels) {
    for (const auto& d : g.dispatches()) *labels += d.label + " [" + d.pipeline->name() + "]; ";
  }
  g.run();
  return download(g, y);
}

double atol_for(DType dt) { return dt == DType::F16 ? 2e-3 : 2e-5; }
double rtol_for(DType dt) { return dt == DType::F16 ? 4e-3 : 1e-4; }

// Both forms: the one-dispatch kernel, and (WGNN_ATTENTION_MAX_KEYS=0, as
// for more keys than the kernel takes) two products and a softmax reading
// the same views, which every problem here suits but for a mask of another
// dtype than q (then the kernel runs).
void check(Problem p, DType dt) {
  if (dt == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  Problem two = p;
  const auto got = run(p, dt);
  EXPECT_TRUE(all_close(got, reference(p), atol_for(dt), rtol_for(dt)));
  SCOPED_TRACE("two products");
  ScopedSetting limit("WGNN_ATTENTION_MAX_KEYS", "0");
  ScopedSetting no_tc("WGNN_SUBGROUP_ATTENTION", "0");
  std::string labels;
  const auto got2 = run(two, dt, &labels);
  const bool products = !two.mask || two.mask_dt == dt;
  EXPECT_EQ(labels.find("gemm") != std::string::npos, products) << labels;
  EXPECT_EQ(labels.find("attention") == std::string::npos, products) << labels;
  EXPECT_TRUE(all_close(got2, reference(two), atol_for(dt), rtol_for(dt)));
}

Buf random_buf(const Shape& shape, uint32_t seed, float lo = -1, float hi = 1) {
  return {shape, random_floats(size_t(numel(shape)), lo, hi, seed)};
}

// q, k, v contiguous [B, H, L, D], [B, H, S, D], [B, H, S, Dv]; the result
// [B, H, L, Dv].
Problem contiguous(int64_t B, int64_t H, int64_t L, int64_t S, int64_t D, int64_t DV, uint32_t seed) {
  Problem p;
  p.bufs = {random_buf({B, H, L, D}, seed), random_buf({B, H, S, D}, seed + 1), random_buf({B, H, S, DV}, seed + 2)};
  p.qv = contiguous_view(B, H, L, D);
  p.kv = contiguous_view(B, H, S, D);
  p.vv = contiguous_view(B, H, S, DV);
  p.out_shape = {B, H, L, DV};
  p.ov = {0, H * L * DV, L * DV, DV, 1};
  p.scale = 1 / std::sqrt(double(D));
  return p;
}

// A causal additive mask [1, 1, L, S] (key j > l masked by `masked`), read
// with strides 0 over the batch and heads.
void causal(Problem& p, float masked) {
  const int64_t L = p.qv[3], S = p.kv[3];
  Buf m{{1, 1, L, S}, std::vector<float>(size_t(L * S), 0.f)};
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t j = l + 1; j < S; ++j) m.v[size_t(l * S + j)] = masked;
  }
  p.mask = m;
  p.mv = {0, 0, 0, S, 1};
}

class AttentionF : public testing::TestWithParam<DType> {};

TEST_P(AttentionF, Contiguous) { check(contiguous(1, 2, 5, 5, 8, 8, 1), GetParam()); }

// DeiT-tiny: the qkv projection [1, 197, 3, 3, 64] (B, L, q/k/v, H, D) read
// in place, the result written as [1, 197, 192] (transpose(1, 2) and
// reshape absorbed).
TEST_P(AttentionF, PackedQkvDeiT) {
  const int64_t L = 197, H = 3, D = 64, row = 3 * H * D;
  Problem p;
  p.bufs = {random_buf({1, L, 3, H, D}, 11)};
  p.qb = p.kb = p.vb = 0;
  p.qv = {0, 1, H, L, D, L * row, D, row, 1};
  p.kv = {H * D, 1, H, L, D, L * row, D, row, 1};
  p.vv = {2 * H * D, 1, H, L, D, L * row, D, row, 1};
  p.out_shape = {1, L, H * D};
  p.ov = {0, L * H * D, D, H * D, 1};
  p.scale = 0.125;
  check(p, GetParam());
}

// k stored transposed, [B, H, D, S] (stride 1 along keys).
TEST_P(AttentionF, KeysTransposed) {
  const int64_t B = 1, H = 2, L = 33, S = 45, D = 16;
  Problem p = contiguous(B, H, L, S, D, D, 21);
  p.bufs[1] = random_buf({B, H, D, S}, 22);
  p.kv = {0, B, H, S, D, H * D * S, D * S, 1, S};
  check(p, GetParam());
}

TEST_P(AttentionF, EdgeSizes) {
  const DType dt = GetParam();
  {
    SCOPED_TRACE("S not a multiple of the tile");
    check(contiguous(1, 3, 37, 77, 32, 32, 31), dt);
  }
  {
    SCOPED_TRACE("L = 1");
    check(contiguous(1, 4, 1, 50, 64, 64, 32), dt);
  }
  {
    SCOPED_TRACE("S = 1");
    check(contiguous(1, 2, 20, 1, 64, 64, 33), dt);
  }
  {
    SCOPED_TRACE("D = 80");
    check(contiguous(1, 2, 19, 23, 80, 80, 34), dt);
  }
  {
    SCOPED_TRACE("D = 3");
    check(contiguous(2, 2, 9, 14, 3, 3, 35), dt);
  }
  {
    SCOPED_TRACE("D = 1, Dv = 7");
    check(contiguous(1, 1, 6, 10, 1, 7, 36), dt);
  }
  {
    SCOPED_TRACE("D = 40, Dv = 24");
    check(contiguous(1, 2, 17, 29, 40, 24, 37), dt);
  }
  {
    SCOPED_TRACE("D = 128");
    check(contiguous(1, 2, 70, 90, 128, 128, 38), dt);
  }
}

// A causal mask of float-min (float32) or -65504 (float16): exact zeros for
// the masked keys, no overflow; broadcast over heads (sH = 0).
TEST_P(AttentionF, CausalFloatMinMask) {
  const DType dt = GetParam();
  Problem p = contiguous(1, 3, 40, 40, 32, 32, 41);
  causal(p, dt == DType::F16 ? -65504.f : std::numeric_limits<float>::lowest());
  p.mask_dt = dt;
  // Masked keys get huge values of v: any weight on them would show.
  for (int64_t h = 0; h < 3; ++h) {
    for (int64_t j = 1; j < 40; ++j) {
      for (int64_t d = 0; d < 32; ++d) p.bufs[2].v[size_t((h * 40 + j) * 32 + d)] *= j == 39 ? 1000.f : 1.f;
    }
  }
  check(p, dt);
}

// -inf on some keys of each row (a float32 mask over float16 q/k/v too).
TEST_P(AttentionF, InfMaskSomeKeys) {
  const DType dt = GetParam();
  Problem p = contiguous(1, 2, 30, 70, 16, 16, 51);
  Buf m{{1, 2, 30, 70}, random_floats(size_t(2 * 30 * 70), -2, 2, 52)};
  for (size_t i = 0; i < m.v.size(); ++i) {
    if ((i * 7919) % 5 < 2 && i % 70 != 3) m.v[i] = -INFINITY;  // key 3 stays finite in every row
  }
  // The first tile of a row all -inf, a later key finite.
  for (int64_t j = 0; j < 70; ++j) m.v[size_t(5 * 70 + j)] = j == 69 ? 0.5f : -INFINITY;
  p.mask = m;
  p.mv = {0, 2 * 30 * 70, 30 * 70, 70, 1};
  check(p, dt);
}

// A row masked -inf everywhere gives NaN, as the math does; the other rows
// are unaffected.
TEST_P(AttentionF, AllInfRowIsNaN) {
  const DType dt = GetParam();
  if (dt == DType::F16 && !has_f16()) GTEST_SKIP() << "no shader-f16";
  Problem p = contiguous(1, 1, 6, 9, 8, 8, 61);
  Buf m{{1, 1, 6, 9}, std::vector<float>(54, 0.f)};
  for (int64_t j = 0; j < 9; ++j) m.v[size_t(2 * 9 + j)] = -INFINITY;
  p.mask = m;
  p.mv = {0, 0, 0, 9, 1};
  for (const char* limit : {"1024", "0"}) {  // the kernel, then two products
    SCOPED_TRACE(limit);
    ScopedSetting use("WGNN_ATTENTION_MAX_KEYS", limit);
    Problem q = p;
    const auto got = run(q, dt);
    const auto ref = reference(q);
    for (size_t i = 0; i < got.size(); ++i) {
      if (i / 8 == 2) {
        EXPECT_TRUE(std::isnan(got[i])) << i << ": " << got[i];
      } else {
        EXPECT_NEAR(got[i], ref[i], atol_for(dt) + rtol_for(dt) * std::abs(ref[i])) << i;
      }
    }
  }
}

// B = 2 with a key-padding mask [2, 1, 1, S] broadcast over heads and
// queries, and a causal mask [1, 1, L, S] broadcast over the batch.
TEST_P(AttentionF, BatchBroadcastMask) {
  const DType dt = GetParam();
  {
    Problem p = contiguous(2, 3, 12, 20, 16, 16, 71);
    Buf m{{2, 1, 1, 20}, std::vector<float>(40, 0.f)};
    for (int64_t j = 15; j < 20; ++j) m.v[size_t(j)] = std::numeric_limits<float>::lowest();
    for (int64_t j = 11; j < 20; ++j) m.v[size_t(20 + j)] = std::numeric_limits<float>::lowest();
    p.mask = m;
    p.mv = {0, 20, 0, 0, 1};
    check(p, dt);
  }
  {
    Problem p = contiguous(2, 2, 16, 16, 8, 8, 72);
    causal(p, -1e4f);
    check(p, dt);
  }
  if (has_f16()) {
    SCOPED_TRACE("float16 mask");
    Problem p = contiguous(2, 2, 16, 16, 8, 8, 73);
    causal(p, -65504.f);
    p.mask_dt = DType::F16;
    check(p, dt);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AttentionF, testing::Values(DType::F32, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace

// Whisper-base encoder self-attention, 8 heads of 1500 x 1500 x 64: more
// keys than the kernel takes, so two products and a softmax, q, k and v read
// as the encoder's projections lay them out ([1500, 8 * 64], heads split by
// strides) and the result written with its heads merged, [1500, 8 * 64].
TEST(Attention, WhisperSize) {
  const int64_t H = 8, L = 1500, D = 64;
  Problem p;
  p.bufs = {random_buf({L, H * D}, 81), random_buf({L, H * D}, 82), random_buf({L, H * D}, 83)};
  p.qv = p.kv = p.vv = {0, 1, H, L, D, L * H * D, D, H * D, 1};
  p.out_shape = {1, L, H * D};
  p.ov = {0, L * H * D, D, H * D, 1};
  p.scale = 0.125;
  std::string labels;
  Problem q = p;
  const auto got = run(q, DType::F32, &labels);
  EXPECT_THAT(labels, HasSubstr("gemm 1500x1500x64 batch 8 Bt ["));
  EXPECT_THAT(labels, HasSubstr("gemm 1500x64x1500 batch 8"));
  EXPECT_THAT(labels, HasSubstr("softmax"));
  EXPECT_THAT(labels, testing::Not(HasSubstr("attention")));
  EXPECT_TRUE(all_close(got, reference(q), atol_for(DType::F32), rtol_for(DType::F32)));
}

// WGNN_ATTENTION_TILE for the span of a scope.
struct TileOverride {
  explicit TileOverride(const char* tile) { wgnn::test::ctx().mutable_settings().set("WGNN_ATTENTION_TILE", tile); }
  ~TileOverride() { wgnn::test::ctx().mutable_settings().unset("WGNN_ATTENTION_TILE"); }
};

// Every kind of tile on the same problems (one pipeline per tile: on
// lavapipe each costs seconds of compiling): one thread per query (no
// merge), one query per workgroup, threads per query and keys per tile
// not powers of two, masked, S past the tile and S = 1.
TEST(Attention, EveryTileShape) {
  for (const char* tile : {"64x1x8", "4x32x32", "1x32x32", "2x3x9", "7x5x15"}) {
    SCOPED_TRACE(tile);
    TileOverride use(tile);
    Problem p = contiguous(2, 2, 37, 45, 20, 12, 91);
    causal(p, std::numeric_limits<float>::lowest());
    check(p, DType::F32);
    Problem one = contiguous(1, 2, 5, 1, 20, 12, 92);
    causal(one, -1e4f);
    check(one, DType::F32);
  }
}

TEST(Attention, EmptyResult) {
  Graph g(ctx());
  TensorRef q = g.add_tensor({1, 2, 0, 8}, DType::F32, TensorKind::Input);
  TensorRef k = g.add_tensor({1, 2, 5, 8}, DType::F32, TensorKind::Input);
  const IntList kv = {0, 1, 2, 5, 8, 80, 40, 8, 1};
  TensorRef y = ops::call(g, kOp,
                          {q, k, k, None{}, 0.5, IntList{0, 1, 2, 0, 8, 0, 0, 8, 1}, kv, kv, IntList{},
                           IntList{1, 0, 16}, IntList{0, 0, 8, 16, 1}})
                    .tensor();
  EXPECT_EQ(g.info(y).shape, (Shape{1, 0, 16}));
  EXPECT_TRUE(g.dispatches().empty());
}

TEST(Attention, ProfileLabelAndFlops) {
  {
    Graph g(ctx());
    TensorRef q = g.add_tensor({1, 8, 1000, 64}, DType::F32, TensorKind::Input);
    const IntList view = contiguous_view(1, 8, 1000, 64);
    ops::call(g, kOp, {q, q, q, None{}, 0.125, view, view, view, IntList{}, IntList{1, 8, 1000, 64},
                       IntList{0, 8 * 1000 * 64, 1000 * 64, 64, 1}});
    ASSERT_EQ(g.dispatches().size(), 1u);
    EXPECT_EQ(g.dispatches()[0].label, "attention L=1000 S=1000 D=64 heads=8");
    EXPECT_EQ(g.dispatches()[0].flops, 4.0 * 8 * 1000 * 1000 * 64);
  }
  // Over 1024 keys: two products (their FLOPs, the same sum) and a softmax.
  Graph g(ctx());
  TensorRef q = g.add_tensor({1, 8, 1500, 64}, DType::F32, TensorKind::Input);
  const IntList view = contiguous_view(1, 8, 1500, 64);
  ops::call(g, kOp, {q, q, q, None{}, 0.125, view, view, view, IntList{}, IntList{1, 8, 1500, 64},
                     IntList{0, 8 * 1500 * 64, 1500 * 64, 64, 1}});
  ASSERT_EQ(g.dispatches().size(), 3u);
  EXPECT_EQ(g.dispatches()[0].label, "gemm 1500x1500x64 batch 8 Bt");
  EXPECT_THAT(g.dispatches()[1].label, HasSubstr("softmax"));
  EXPECT_EQ(g.dispatches()[2].label, "gemm 1500x64x1500 batch 8");
  EXPECT_EQ(g.dispatches()[0].flops + g.dispatches()[2].flops, 4.0 * 8 * 1500 * 1500 * 64);
}

TEST(Attention, Errors) {
  Graph g(ctx());
  TensorRef q = g.add_tensor({1, 2, 5, 8}, DType::F32, TensorKind::Input);
  TensorRef k = g.add_tensor({1, 2, 6, 8}, DType::F32, TensorKind::Input);
  TensorRef v = g.add_tensor({1, 2, 7, 8}, DType::F32, TensorKind::Input);
  TensorRef h = g.add_tensor({1, 2, 6, 8}, DType::F16, TensorKind::Input);
  TensorRef mi = g.add_tensor({1, 1, 5, 6}, DType::I32, TensorKind::Input);
  TensorRef m = g.add_tensor({1, 1, 5, 6}, DType::F32, TensorKind::Input);
  TensorRef big = g.add_tensor({1, 1, 4, 200}, DType::F32, TensorKind::Input);
  const IntList qv = contiguous_view(1, 2, 5, 8), kv = contiguous_view(1, 2, 6, 8);
  const IntList out = {1, 2, 5, 8}, ov = {0, 80, 40, 8, 1};
  auto expect_error = [&](const ValueList& args, const std::vector<std::string>& needles) {
    const std::string msg = [&] {
      try {
        ops::call(g, kOp, args);
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    }();
    EXPECT_THAT(msg, HasSubstr(kOp));
    for (const auto& n : needles) EXPECT_THAT(msg, HasSubstr(n));
  };
  // A view reading past its buffer: k is [1, 2, 6, 8], the view asks 7 keys.
  expect_error({q, k, k, None{}, 0.5, qv, contiguous_view(1, 2, 7, 8), contiguous_view(1, 2, 7, 8), IntList{}, out, ov},
               {"'k_view'", "reads element 111", "out of bounds of 'k' [1, 2, 6, 8] (96 elements)"});
  expect_error({q, k, k, None{}, 0.5, IntList{1, 1, 2, 5, 8, 80, 40, 8, 1}, kv, kv, IntList{}, out, ov},
               {"'q_view'", "out of bounds of 'q'"});
  // S differs between k and v.
  expect_error({q, k, v, None{}, 0.5, qv, kv, contiguous_view(1, 2, 7, 8), IntList{}, out, ov},
               {"k has S=6 keys but v has S=7"});
  // View lengths.
  expect_error({q, k, k, None{}, 0.5, IntList{0, 1, 2, 5, 8}, kv, kv, IntList{}, out, ov},
               {"'q_view' has 5 values; expected 9"});
  expect_error({q, k, k, m, 0.5, qv, kv, kv, IntList{0, 0, 0, 6}, out, ov}, {"'mask_view' has 4 values; expected 5"});
  expect_error({q, k, k, None{}, 0.5, qv, kv, kv, IntList{0, 0, 0, 6, 1}, out, ov}, {"'mask' is None"});
  expect_error({q, k, k, None{}, 0.5, qv, kv, kv, IntList{}, out, IntList{0, 80, 40, 8}},
               {"'out_view' has 4 values; expected 5"});
  // Head dims over the kernel's limit.
  const IntList bv = {0, 1, 1, 4, 200, 0, 0, 200, 1};
  expect_error({big, big, big, None{}, 0.5, bv, bv, bv, IntList{}, IntList{1, 1, 4, 200}, IntList{0, 0, 0, 200, 1}},
               {"D=200", "not supported", "1 to 128"});
  // Other mismatches.
  expect_error({q, k, k, None{}, 0.5, qv, contiguous_view(1, 1, 6, 8), contiguous_view(1, 1, 6, 8), IntList{}, out, ov},
               {"batch and head sizes differ"});
  expect_error({q, k, k, None{}, 0.5, qv, IntList{0, 1, 2, 6, 4, 96, 48, 8, 1}, kv, IntList{}, out, ov},
               {"q has head dim D=8 but k has D=4"});
  expect_error({q, h, h, None{}, 0.5, qv, kv, kv, IntList{}, out, ov}, {"same dtype", "float16"});
  expect_error({q, k, k, mi, 0.5, qv, kv, kv, IntList{0, 0, 0, 6, 1}, out, ov}, {"'mask' has dtype int32"});
  expect_error({q, k, k, m, 0.5, qv, kv, kv, IntList{0, 0, 0, 7, 1}, out, ov},
               {"'mask_view'", "out of bounds of 'mask'"});
  expect_error({q, k, k, None{}, 0.5, IntList{0, 1, 2, 5, 8, 80, -40, 8, 1}, kv, kv, IntList{}, out, ov},
               {"'q_view'", "-40", "no negative strides"});
  expect_error({q, k, k, None{}, 0.5, qv, kv, kv, IntList{}, IntList{1, 2, 5, 9}, ov}, {"'out_shape' [1, 2, 5, 9]"});
  expect_error({q, k, k, None{}, 0.5, qv, kv, kv, IntList{}, out, IntList{1, 80, 40, 8, 1}},
               {"'out_view'", "writes element 80", "out of bounds of the result"});
  expect_error({q, k, k, None{}, 0.5, qv, kv, kv, IntList{}, out, IntList{0, 80, 20, 8, 1}},
               {"'out_view'", "does not write each element of the result [1, 2, 5, 8] once"});
  expect_error({q, k, k, None{}, None{}, qv, kv, kv, IntList{}, out, ov}, {"'scale' is required"});
  expect_error({q, k, k, None{}, 0.5, qv, kv, kv}, {"takes 11 arguments"});
  {
    TileOverride use("4x3x8");
    expect_error({q, k, k, None{}, 0.5, qv, kv, kv, IntList{}, out, ov}, {"WGNN_ATTENTION_TILE='4x3x8'", "BQxKSxBK"});
  }
}

// ---- Float16 attention on subgroup matrices (ops/subgroup_attention.h) ----

namespace {

// Runs `p` in float16 on the tensor-core kernel (emulated, or real where
// the device has subgroup matrices) and checks it took that kernel and
// matches the reference.
void check_tensor_cores(const Problem& p0, bool emulated) {
  Problem p = p0;
  std::optional<ScopedSetting> mode;
  if (emulated) mode.emplace("WGNN_SUBGROUP_MATMUL", "emulate");
  ScopedSetting every("WGNN_SUBGROUP_ATTENTION", "1");  // the small problems too
  std::string labels;
  const auto got = run(p, DType::F16, &labels);
  EXPECT_THAT(labels, HasSubstr("tensor cores"));
  EXPECT_EQ(labels.find("emulated") != std::string::npos, emulated) << labels;
  const char* pf = wgnn::test::ctx().settings().get("WGNN_SUBGROUP_ATTENTION_PREFETCH");
  if (labels.find(" vec") != std::string::npos)
    EXPECT_EQ(labels.find("prefetch") != std::string::npos, !(pf && std::string(pf) == "0")) << labels;
  const char* vt = wgnn::test::ctx().settings().get("WGNN_SUBGROUP_ATTENTION_VTILES");
  if (labels.find(" prefetch") != std::string::npos)
    EXPECT_EQ(labels.find("two-v") != std::string::npos, !(vt && std::string(vt) == "1")) << labels;
  const char* sh = wgnn::test::ctx().settings().get("WGNN_SUBGROUP_ATTENTION_SHUFFLE");
  EXPECT_EQ(labels.find(" shuffle") != std::string::npos, !emulated && !(sh && std::string(sh) == "0")) << labels;
  const char* qreg = wgnn::test::ctx().settings().get("WGNN_SUBGROUP_ATTENTION_QREG");
  EXPECT_EQ(labels.find("q-registers") != std::string::npos, !(qreg && std::string(qreg) == "0")) << labels;
  EXPECT_EQ(labels.find("gemm"), std::string::npos) << labels;
  EXPECT_TRUE(all_close(got, reference(p), atol_for(DType::F16), rtol_for(DType::F16)));
}

// Each problem emulated, then on the tensor cores where there are some.
void check_tc(const Problem& p) {
  if (!has_f16()) GTEST_SKIP() << "no shader-f16";
  {
    SCOPED_TRACE("emulated");
    check_tensor_cores(p, true);
  }
  if (ops::tensor_cores_available(ctx())) {
    SCOPED_TRACE("tensor cores");
    check_tensor_cores(p, false);
  }
}

// Whisper's layout at a smaller size: q, k and v [L, H * D] with the heads
// split by strides (the vec4 loads), the result with its heads merged.
Problem packed_heads(int64_t H, int64_t L, int64_t D, uint32_t seed) {
  Problem p;
  p.bufs = {random_buf({L, H * D}, seed), random_buf({L, H * D}, seed + 1), random_buf({L, H * D}, seed + 2)};
  p.qv = p.kv = p.vv = {0, 1, H, L, D, L * H * D, D, H * D, 1};
  p.out_shape = {1, L, H * D};
  p.ov = {0, L * H * D, D, H * D, 1};
  p.scale = 1 / std::sqrt(double(D));
  return p;
}

}  // namespace

// Queries not a multiple of a tile's 16 or of the workgroup's, keys past
// a block, D != Dv, two batch entries.
TEST(SubgroupAttention, Contiguous) { check_tc(contiguous(2, 2, 37, 45, 16, 32, 101)); }

// The encoder's layout (vec4 loads, heads merged on the way out), over more
// keys than the one-dispatch scalar kernel takes.
TEST(SubgroupAttention, PackedHeadsLongSequence) { check_tc(packed_heads(2, 1100, 64, 111)); }

// The same with the key blocks staged straight from memory, not through
// registers a block ahead.
TEST(SubgroupAttention, PackedHeadsNoPrefetch) {
  ScopedSetting off("WGNN_SUBGROUP_ATTENTION_PREFETCH", "0");
  check_tc(packed_heads(2, 90, 32, 115));
}

// q staged as a tile in workgroup memory for the whole kernel, not held in
// registers: the long layout, then masks over ragged queries.
TEST(SubgroupAttention, QueriesInWorkgroupMemory) {
  ScopedSetting tile("WGNN_SUBGROUP_ATTENTION_QREG", "0");
  check_tc(packed_heads(2, 300, 64, 117));
  Problem p = contiguous(2, 2, 40, 40, 32, 32, 118);
  causal(p, std::numeric_limits<float>::lowest());
  check_tc(p);
}

// The block loop's forms (ops/subgroup_attention.h): one V tile or two,
// the pair's maxima and sums through workgroup memory or shuffles, the P
// tile padded or not; on the long layout and on scores that climb 8.5
// every 48 keys (rescales at most blocks).
TEST(SubgroupAttention, BlockLoopForms) {
  Problem climb = contiguous(1, 2, 40, 150, 32, 16, 191);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t l = 0; l < 40; ++l) climb.bufs[0].v[size_t((h * 40 + l) * 32)] = l % 2 ? -1.f : 1.f;
    for (int64_t j = 0; j < 150; ++j) climb.bufs[1].v[size_t((h * 150 + j) * 32)] = float(8.5 * double(j / 48) / climb.scale);
  }
  for (const char* vtiles : {"1", "2"})
    for (const char* shuffle : {"0", "1"})
      for (const char* ppad : {"0", "1"}) {
        SCOPED_TRACE(fmt::format("V tiles {} shuffle {} P padded {}", vtiles, shuffle, ppad));
        ScopedSetting v("WGNN_SUBGROUP_ATTENTION_VTILES", vtiles), sh("WGNN_SUBGROUP_ATTENTION_SHUFFLE", shuffle),
            pp("WGNN_SUBGROUP_ATTENTION_PPAD", ppad);
        check_tc(packed_heads(2, 300, 64, 192));
        ScopedSetting none("WGNN_SUBGROUP_ATTENTION_SPLITS", "0");
        check_tc(climb);
      }
}

// k stored transposed ([B, H, D, S]: scalar loads), head dims of 128.
TEST(SubgroupAttention, KeysTransposedHeadDim128) {
  const int64_t B = 1, H = 1, L = 20, S = 33, D = 128;
  Problem p = contiguous(B, H, L, S, D, D, 121);
  p.bufs[1] = random_buf({B, H, D, S}, 122);
  p.kv = {0, B, H, S, D, H * D * S, D * S, 1, S};
  check_tc(p);
}

// Masks: a causal float-min mask broadcast over batch and heads; -inf on
// some keys (float16), every key of one row left open.
TEST(SubgroupAttention, Masks) {
  {
    SCOPED_TRACE("causal float-min");
    Problem p = contiguous(2, 2, 40, 40, 32, 32, 131);
    causal(p, std::numeric_limits<float>::lowest());
    check_tc(p);
  }
  {
    SCOPED_TRACE("float16 -inf on some keys");
    Problem p = contiguous(1, 2, 16, 70, 16, 16, 132);
    Buf m{{1, 1, 16, 70}, std::vector<float>(size_t(16 * 70), 0.f)};
    for (size_t i = 0; i < m.v.size(); i += 3) m.v[i] = -INFINITY;
    for (int64_t j = 0; j < 70; ++j) m.v[size_t(j)] = 0.f;  // row 0: every key
    p.mask = m;
    p.mask_dt = DType::F16;
    p.mv = {0, 0, 0, 70, 1};
    check_tc(p);
  }
}

TEST(SubgroupAttention, AllInfRowIsNaN) {
  if (!has_f16()) GTEST_SKIP() << "no shader-f16";
  Problem p = contiguous(1, 1, 16, 20, 16, 16, 141);
  Buf m{{1, 1, 16, 20}, std::vector<float>(size_t(16 * 20), 0.f)};
  for (int64_t j = 0; j < 20; ++j) m.v[size_t(3 * 20 + j)] = -INFINITY;  // row 3
  p.mask = m;
  p.mv = {0, 0, 0, 20, 1};
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  ScopedSetting every("WGNN_SUBGROUP_ATTENTION", "1");
  std::string labels;
  const auto got = run(p, DType::F16, &labels);
  EXPECT_THAT(labels, HasSubstr("tensor cores"));
  for (int64_t l = 0; l < 16; ++l)
    for (int64_t d = 0; d < 16; ++d) EXPECT_EQ(std::isnan(got[size_t(l * 16 + d)]), l == 3) << l << " " << d;
}

// Where the kernel is not used: float32, fewer than 16 queries, head dims
// not multiples of 16, WGNN_SUBGROUP_ATTENTION=0; and by default, too little
// work (fewer than 128 tiles of 16 queries), which =1 takes.
TEST(SubgroupAttention, OtherCasesKeepTheirKernels) {
  if (!has_f16()) GTEST_SKIP() << "no shader-f16";
  ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
  auto labels_of = [](Problem p, DType dt) {
    std::string labels;
    run(p, dt, &labels);
    return labels;
  };
  EXPECT_THAT(labels_of(contiguous(1, 2, 32, 32, 16, 16, 150), DType::F16), testing::Not(HasSubstr("tensor cores")));
  EXPECT_THAT(labels_of(contiguous(1, 8, 256, 8, 16, 16, 155), DType::F16), HasSubstr("tensor cores"));
  ScopedSetting every("WGNN_SUBGROUP_ATTENTION", "1");
  EXPECT_THAT(labels_of(contiguous(1, 2, 32, 32, 16, 16, 151), DType::F32), testing::Not(HasSubstr("tensor cores")));
  EXPECT_THAT(labels_of(contiguous(1, 2, 8, 32, 16, 16, 152), DType::F16), testing::Not(HasSubstr("tensor cores")));
  EXPECT_THAT(labels_of(contiguous(1, 2, 32, 32, 24, 16, 153), DType::F16), testing::Not(HasSubstr("tensor cores")));
  ScopedSetting off("WGNN_SUBGROUP_ATTENTION", "0");
  EXPECT_THAT(labels_of(contiguous(1, 2, 32, 32, 16, 16, 154), DType::F16), testing::Not(HasSubstr("tensor cores")));
}

// The keys in ranges, one workgroup each, merged by a second pass: by
// default where the (b, h, query tile) workgroups are few and the keys many
// (the long layout: 36 workgroups over 1,100 keys, 8 ranges), and forced
// (WGNN_SUBGROUP_ATTENTION_SPLITS) over a causal mask whose first range is
// all a row has (the other ranges give it weight 0), over ranges that end
// inside a block, and with a row masked everywhere (NaN, as unsplit).
TEST(SubgroupAttention, KeysInRanges) {
  if (!has_f16()) GTEST_SKIP() << "no shader-f16";
  auto labels_of = [](Problem p) {
    ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
    ScopedSetting every("WGNN_SUBGROUP_ATTENTION", "1");
    std::string labels;
    run(p, DType::F16, &labels);
    return labels;
  };
  const Problem packed = packed_heads(2, 1100, 64, 171);
  EXPECT_THAT(labels_of(packed), HasSubstr("keys in 8 ranges"));
  check_tc(packed);
  {
    ScopedSetting off("WGNN_SUBGROUP_ATTENTION_SPLITS", "0");
    EXPECT_THAT(labels_of(packed), testing::Not(HasSubstr("ranges")));
  }
  ScopedSetting three("WGNN_SUBGROUP_ATTENTION_SPLITS", "3");
  Problem p = contiguous(2, 2, 40, 40, 32, 32, 172);
  causal(p, std::numeric_limits<float>::lowest());
  EXPECT_THAT(labels_of(p), HasSubstr("keys in 3 ranges"));
  check_tc(p);
  const int64_t S = 45;  // ranges of 16, 16 and 13 keys
  Problem q = contiguous(1, 2, 33, S, 16, 48, 173);
  Buf m{{1, 1, 33, S}, std::vector<float>(size_t(33 * S), 0.f)};
  for (int64_t j = 0; j < S; ++j) m.v[size_t(5 * S + j)] = -INFINITY;  // row 5
  q.mask = m;
  q.mv = {0, 0, 0, S, 1};
  {
    ScopedSetting mode("WGNN_SUBGROUP_MATMUL", "emulate");
    ScopedSetting every("WGNN_SUBGROUP_ATTENTION", "1");
    std::string labels;
    const auto got = run(q, DType::F16, &labels);
    EXPECT_THAT(labels, HasSubstr("keys in 3 ranges"));
    const auto want = reference(q);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t l = 0; l < 33; ++l)
        for (int64_t d = 0; d < 48; ++d) {
          const size_t i = size_t((h * 33 + l) * 48 + d);
          if (l == 5) {
            EXPECT_TRUE(std::isnan(got[i])) << h << " " << l << " " << d;
          } else {
            EXPECT_NEAR(got[i], want[i], atol_for(DType::F16) + rtol_for(DType::F16) * std::abs(want[i]));
          }
        }
  }
}

// Every block shape the picker may choose, fixed by
// WGNN_SUBGROUP_ATTENTION_TILE, on one masked problem.
TEST(SubgroupAttention, EveryTile) {
  for (const char* tile : {"1x16", "2x32", "4x16", "2x64"}) {
    SCOPED_TRACE(tile);
    ScopedSetting use("WGNN_SUBGROUP_ATTENTION_TILE", tile);
    Problem p = contiguous(1, 2, 50, 77, 32, 16, 161);
    causal(p, -1e4f);
    check_tc(p);
  }
}

// The kernel's running max moves only where a block's scores pass it by
// more than 8; then the row's O and sum are rescaled. Here the scores climb
// stairs of 48 keys, 8.5 higher each (the keys below still weigh about 1%),
// on the even rows (a rescale at most blocks), and go down them on the odd
// ones (alpha 1 in the same rescales): in one range of keys, in three, and
// in blocks of 64 keys. Leaving out the rescale of O fails it.
TEST(SubgroupAttention, ScoresThatClimbAcrossBlocks) {
  const int64_t H = 2, L = 40, S = 150, D = 32;
  Problem p = contiguous(1, H, L, S, D, 16, 181);
  std::vector<float>&q = p.bufs[0].v, &k = p.bufs[1].v;
  for (float& x : q) x *= 0.5f;
  for (float& x : k) x *= 0.5f;
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t l = 0; l < L; ++l) q[size_t((h * L + l) * D)] = l % 2 ? -1.f : 1.f;
    for (int64_t j = 0; j < S; ++j) k[size_t((h * S + j) * D)] = float(8.5 * double(j / 48) / p.scale);
  }
  {
    SCOPED_TRACE("one range");
    ScopedSetting none("WGNN_SUBGROUP_ATTENTION_SPLITS", "0");
    check_tc(p);
  }
  {
    SCOPED_TRACE("three key ranges");
    ScopedSetting three("WGNN_SUBGROUP_ATTENTION_SPLITS", "3");
    check_tc(p);
  }
  {
    SCOPED_TRACE("blocks of 64 keys");
    ScopedSetting none("WGNN_SUBGROUP_ATTENTION_SPLITS", "0");
    ScopedSetting use("WGNN_SUBGROUP_ATTENTION_TILE", "2x64");
    check_tc(p);
  }
}

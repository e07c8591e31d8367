// wgnn.window_partition and wgnn.window_reverse (ops/window.cpp) against
// plain C++ references: maps that windows divide and maps padded to whole
// windows, the reverse cropped and with a residual, float32 and float16.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include "error_of.h"
#include "op_test_util.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

bool has_f16() { return ctx().features().shader_f16; }

struct WindowCase {
  int64_t b, h, w, c, wh, ww;
};

}  // namespace

TEST(Window, PartitionAndReverseMatchTheReference) {
  const std::vector<WindowCase> cases = {
      {1, 8, 6, 4, 4, 3},    // windows divide the map
      {2, 10, 9, 8, 4, 4},   // padded: 3 x 3 windows of 4 x 4
      {1, 7, 7, 12, 7, 7},   // one window
      {1, 5, 13, 16, 2, 5},  // padded along both
  };
  uint32_t seed = 900;
  for (DType dt : {DType::F32, DType::F16}) {
    if (dt == DType::F16 && !has_f16()) continue;
    for (const WindowCase& k : cases) {
      SCOPED_TRACE(fmt::format("{} B {} H {} W {} C {} window {}x{}", dtype_name(dt), k.b, k.h, k.w, k.c, k.wh, k.ww));
      const int64_t nh = (k.h + k.wh - 1) / k.wh, nw = (k.w + k.ww - 1) / k.ww;
      const auto x = quantize(random_floats(size_t(k.b * k.h * k.w * k.c), -1, 1, seed), dt);
      const auto r = quantize(random_floats(size_t(k.b * k.h * k.w * k.c), -1, 1, seed + 1), dt);
      seed += 2;
      Graph g(ctx());
      const TensorRef tx = upload(g, {k.b, k.h, k.w, k.c}, x, dt);
      const TensorRef win = ops::call(g, "wgnn.window_partition.default", {tx, IntList{k.wh, k.ww}}).tensor();
      ASSERT_EQ(g.info(win).shape, (Shape{k.b, nh, nw, k.wh, k.ww, k.c}));
      // Back, with the residual as rows, and back alone.
      const TensorRef tr = upload(g, {k.b, k.h * k.w, k.c}, r, dt);
      const TensorRef back = ops::call(g, "wgnn.window_reverse.default", {win, IntList{k.h, k.w}}).tensor();
      const TensorRef sum = ops::call(g, "wgnn.window_reverse.default", {win, IntList{k.h, k.w}, tr}).tensor();
      ASSERT_EQ(g.info(back).shape, (Shape{k.b, k.h, k.w, k.c}));
      ASSERT_EQ(g.info(sum).shape, (Shape{k.b, k.h * k.w, k.c}));
      EXPECT_EQ(g.dispatches().size(), 3u);
      g.mark_output(win);
      g.mark_output(back);
      g.mark_output(sum);
      g.run();
      std::vector<float> want_win(size_t(numel(g.info(win).shape)));
      for (int64_t bb = 0; bb < k.b; ++bb)
        for (int64_t iy = 0; iy < nh; ++iy)
          for (int64_t ix = 0; ix < nw; ++ix)
            for (int64_t ky = 0; ky < k.wh; ++ky)
              for (int64_t kx = 0; kx < k.ww; ++kx)
                for (int64_t c = 0; c < k.c; ++c) {
                  const int64_t y = iy * k.wh + ky, xx = ix * k.ww + kx;
                  const size_t o = size_t(((((bb * nh + iy) * nw + ix) * k.wh + ky) * k.ww + kx) * k.c + c);
                  want_win[o] = y < k.h && xx < k.w ? x[size_t(((bb * k.h + y) * k.w + xx) * k.c + c)] : 0.f;
                }
      EXPECT_EQ(download(g, win), want_win);
      EXPECT_EQ(download(g, back), x);
      std::vector<float> want_sum(x.size());
      for (size_t i = 0; i < x.size(); ++i) want_sum[i] = quantize({x[i] + r[i]}, dt)[0];
      EXPECT_EQ(download(g, sum), want_sum);
    }
  }
}

TEST(Window, Errors) {
  Graph g(ctx());
  const TensorRef x = upload(g, {1, 8, 8, 4}, std::vector<float>(256, 1.f), DType::F32);
  const TensorRef odd = upload(g, {1, 8, 8, 6}, std::vector<float>(384, 1.f), DType::F32);
  const TensorRef flat = upload(g, {1, 64, 4}, std::vector<float>(256, 1.f), DType::F32);
  auto err = [&](const char* op, const ValueList& args) { return error_of([&] { ops::call(g, op, args); }); };
  EXPECT_THAT(err("wgnn.window_partition.default", {flat, IntList{4, 4}}), HasSubstr("expected [B, H, W, C]"));
  EXPECT_THAT(err("wgnn.window_partition.default", {odd, IntList{4, 4}}), HasSubstr("a multiple of 4"));
  EXPECT_THAT(err("wgnn.window_partition.default", {x, IntList{4, 0}}), HasSubstr("two positive sizes"));
  EXPECT_THAT(err("wgnn.window_partition.default", {x, IntList{4}}), HasSubstr("two positive sizes"));
  const TensorRef win = ops::call(g, "wgnn.window_partition.default", {x, IntList{4, 4}}).tensor();
  EXPECT_THAT(err("wgnn.window_reverse.default", {x, IntList{8, 8}}), HasSubstr("expected [B, NH, NW, WH, WW, C]"));
  EXPECT_THAT(err("wgnn.window_reverse.default", {win, IntList{9, 8}}), HasSubstr("larger than the windows' 8 x 8"));
  EXPECT_THAT(err("wgnn.window_reverse.default", {win, IntList{8, 8}, odd}), HasSubstr("argument 'residual'"));
  EXPECT_THAT(err("wgnn.window_reverse.default", {win, IntList{8, 8}, upload(g, {1, 8, 8, 4}, std::vector<float>(256, 1.f), DType::F16)}),
              HasSubstr("argument 'residual' is float16"));
}

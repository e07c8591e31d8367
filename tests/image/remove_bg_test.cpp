// Background removal end to end on tiny matting models built here (the mean
// over the RGB channels, then a sigmoid): pre-processing, the GPU run, the
// matte back to alpha, and the errors about models and sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "error_of.h"
#include "gpu_fixture.h"
#include "matting/remover.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using wgnn::test::error_of;
using image::Image;
using matting::Preprocess;
using matting::Remover;
using test::ModelBuilder;
using testing::HasSubstr;

namespace {

// input (1x3xHxW) -> ReduceMean over channels -> Sigmoid -> "output"; a
// second output follows, as ISNet has several.
std::string matting_model(const std::string& name, int h, int w, const std::vector<std::string>& params = {}) {
  ModelBuilder b;
  b.input("input", {1, 3, h, w}, onnx::TensorProto::FLOAT, params);
  b.output("output", {1, 1, h, w}, onnx::TensorProto::FLOAT, params);
  b.output("side", {1, 1, h, w}, onnx::TensorProto::FLOAT, params);
  auto* mean = b.node("ReduceMean", {"input"}, {"mean"});
  ModelBuilder::attr_ints(mean, "axes", {1});
  ModelBuilder::attr_int(mean, "keepdims", 1);
  b.node("Sigmoid", {"mean"}, {"output"});
  b.node("Relu", {"mean"}, {"side"});
  return b.save(name);
}

Image solid(int w, int h, uint8_t r, uint8_t g, uint8_t bl) {
  Image img(w, h, 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      img.at(x, y, 0) = r;
      img.at(x, y, 1) = g;
      img.at(x, y, 2) = bl;
    }
  return img;
}

uint8_t expected_alpha(double r, double g, double b, image::Normalization n) {
  const double mean = ((r - n.mean) + (g - n.mean) + (b - n.mean)) / (3 * n.std);
  return uint8_t(std::lround(255.0 / (1.0 + std::exp(-mean))));
}

}  // namespace

TEST(RemoveBg, FixedSizeModelGetsIsNetProcessing) {
  Remover r(test::ctx(), matting_model("fixed.onnx", 64, 64));
  EXPECT_EQ(r.kind(), Preprocess::ISNet);
  const Image photo = solid(100, 80, 200, 100, 50);
  const matting::Cutout c = r.run(photo);
  EXPECT_EQ(c.plan.width, 64);
  EXPECT_EQ(c.plan.height, 64);
  ASSERT_EQ(c.alpha.width, 100);
  ASSERT_EQ(c.alpha.height, 80);
  ASSERT_EQ(c.rgba.channels, 4);
  const uint8_t want = expected_alpha(200, 100, 50, image::kISNetNormalization);
  EXPECT_EQ(want, 125);  // sigmoid((350/3 - 128) / 256) = 0.4889
  for (int y = 0; y < 80; ++y)
    for (int x = 0; x < 100; ++x) {
      ASSERT_NEAR(c.alpha.at(x, y, 0), want, 1) << x << "," << y;
      ASSERT_EQ(c.rgba.at(x, y, 3), c.alpha.at(x, y, 0));
      ASSERT_EQ(c.rgba.at(x, y, 0), 200);
      ASSERT_EQ(c.rgba.at(x, y, 1), 100);
      ASSERT_EQ(c.rgba.at(x, y, 2), 50);
    }
}

TEST(RemoveBg, MatteFollowsTheSubjectBackToPhotoSize) {
  // Left half white, right half black, 128x64 -> 64x64 model input (area
  // filter: 2 to 1 across, a copy down) -> matte -> 128x64 (bilinear).
  Image photo = solid(128, 64, 0, 0, 0);
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x)
      for (int k = 0; k < 3; ++k) photo.at(x, y, k) = 255;
  Remover r(test::ctx(), matting_model("halves.onnx", 64, 64));
  const matting::Cutout c = r.run(photo);
  const int white = expected_alpha(255, 255, 255, image::kISNetNormalization);
  const int black = expected_alpha(0, 0, 0, image::kISNetNormalization);
  EXPECT_EQ(white, 158);
  EXPECT_EQ(black, 96);
  for (int y = 0; y < 64; ++y) {
    for (int x = 0; x < 63; ++x) ASSERT_NEAR(c.alpha.at(x, y, 0), white, 1) << x;
    for (int x = 65; x < 128; ++x) ASSERT_NEAR(c.alpha.at(x, y, 0), black, 1) << x;
    // The two pixels at the edge blend 3:1 and 1:3 (matte column 31.25, 31.75).
    ASSERT_NEAR(c.alpha.at(63, y, 0), 0.75 * white + 0.25 * black, 1.5);
    ASSERT_NEAR(c.alpha.at(64, y, 0), 0.25 * white + 0.75 * black, 1.5);
  }
}

TEST(RemoveBg, SizeRunsAFixedSizeModelAtAnotherSize) {
  matting::RemoverOptions o;
  o.size = 32;
  Remover r(test::ctx(), matting_model("fixed32.onnx", 64, 64), o);
  const matting::Cutout c = r.run(solid(50, 70, 10, 240, 90));
  EXPECT_EQ(c.plan.width, 32);
  EXPECT_EQ(c.plan.height, 32);
  const uint8_t want = expected_alpha(10, 240, 90, image::kISNetNormalization);
  for (uint8_t a : c.alpha.pixels) ASSERT_NEAR(a, want, 1);
}

TEST(RemoveBg, FreeSizeModelGetsModNetProcessing) {
  matting::RemoverOptions o;
  o.size = 64;
  Remover r(test::ctx(), matting_model("free.onnx", -1, -1, {"", "", "height", "width"}), o);
  EXPECT_EQ(r.kind(), Preprocess::MODNet);
  // Short side 64, the long one 64 * 100/50 = 128 (multiples of 32).
  EXPECT_EQ(r.plan(100, 50).width, 128);
  EXPECT_EQ(r.plan(100, 50).height, 64);
  EXPECT_EQ(r.plan(50, 90).width, 64);
  EXPECT_EQ(r.plan(50, 90).height, 128);  // 115.2 -> 128
  EXPECT_EQ(r.plan(300, 290).height, 64);
  EXPECT_EQ(r.plan(300, 290).width, 64);
  const matting::Cutout c = r.run(solid(100, 50, 200, 100, 50));
  const uint8_t want = expected_alpha(200, 100, 50, image::kMODNetNormalization);
  EXPECT_EQ(want, 122);  // sigmoid((350/3 - 127.5) / 127.5) = 0.4788
  ASSERT_EQ(c.alpha.width, 100);
  for (uint8_t a : c.alpha.pixels) ASSERT_NEAR(a, want, 1);

  Remover d(test::ctx(), matting_model("free512.onnx", -1, -1, {"", "", "height", "width"}));
  EXPECT_EQ(d.plan(640, 480).height, 512);  // the default short side
  EXPECT_EQ(d.plan(640, 480).width, 672);   // 682.7 -> 672
}

TEST(RemoveBg, ThePhotosOwnAlphaIsMultipliedIn) {
  Remover r(test::ctx(), matting_model("alpha.onnx", 32, 32));
  Image photo(20, 10, 4);
  for (int y = 0; y < 10; ++y)
    for (int x = 0; x < 20; ++x) {
      photo.at(x, y, 0) = 200;
      photo.at(x, y, 1) = 100;
      photo.at(x, y, 2) = 50;
      photo.at(x, y, 3) = uint8_t(x < 5 ? 0 : x < 10 ? 128 : 255);
    }
  const matting::Cutout c = r.run(photo);
  ASSERT_EQ(c.rgba.channels, 4);
  const int m = expected_alpha(200, 100, 50, image::kISNetNormalization);  // the matte alone (RGB solid)
  for (int y = 0; y < 10; ++y)
    for (int x = 0; x < 20; ++x) {
      const int in = photo.at(x, y, 3);
      ASSERT_NEAR(c.alpha.at(x, y, 0), m * in / 255.0, 1.01) << x << "," << y;
      ASSERT_LE(c.alpha.at(x, y, 0), in);
      ASSERT_EQ(c.rgba.at(x, y, 3), c.alpha.at(x, y, 0));
      ASSERT_EQ(c.rgba.at(x, y, 0), 200);
    }
  EXPECT_EQ(c.alpha.at(0, 0, 0), 0);
  EXPECT_THAT(error_of([&] { r.run(Image(4, 4, 2)); }), HasSubstr("RGB or RGBA"));
}

TEST(RemoveBg, PreprocessFlagOverridesTheChoice) {
  matting::RemoverOptions o;
  o.preprocess = Preprocess::ISNet;
  o.size = 64;
  Remover r(test::ctx(), matting_model("free_isnet.onnx", -1, -1, {"", "", "h", "w"}), o);
  EXPECT_EQ(r.kind(), Preprocess::ISNet);
  const matting::Cutout c = r.run(solid(40, 30, 90, 90, 90));
  EXPECT_EQ(c.plan.width, 64);
  EXPECT_EQ(c.plan.height, 64);
  const uint8_t want = expected_alpha(90, 90, 90, image::kISNetNormalization);
  for (uint8_t a : c.alpha.pixels) ASSERT_NEAR(a, want, 1);

  // MODNet's processing on a fixed-size model (ISNet's kind) would feed it
  // the wrong normalization at the wrong shape: refused.
  o.preprocess = Preprocess::MODNet;
  const std::string modnet = error_of([&] { Remover(test::ctx(), matting_model("fixed_modnet.onnx", 64, 64), o); });
  EXPECT_THAT(modnet, HasSubstr("has a fixed size"));
  EXPECT_THAT(modnet, HasSubstr("--preprocess isnet"));
  Remover m(test::ctx(), matting_model("free_modnet.onnx", -1, -1, {"", "", "h", "w"}), o);
  EXPECT_EQ(m.kind(), Preprocess::MODNet);
  EXPECT_EQ(m.plan(40, 30).width, 96);  // 85.3 -> 96
  EXPECT_EQ(m.run(solid(40, 30, 90, 90, 90)).plan.height, 64);

  EXPECT_EQ(matting::parse_preprocess("modnet"), Preprocess::MODNet);
  EXPECT_THAT(error_of([] { matting::parse_preprocess("u2net"); }), HasSubstr("auto, isnet, modnet"));
}

TEST(RemoveBg, AModelTracedAtItsSizeSaysSoAtAnother) {
  // A constant Reshape target ties the model to 64x64 (as ISNet's constant
  // Resize sizes tie the original export to 1024x1024).
  ModelBuilder b;
  b.input("input", {1, 3, 64, 64});
  b.output("output", {1, 1, 64, 64});
  b.init_i64("target", {1, 1, 64, 64});
  auto* mean = b.node("ReduceMean", {"input"}, {"mean"});
  ModelBuilder::attr_ints(mean, "axes", {1});
  b.node("Reshape", {"mean", "target"}, {"r"});
  b.node("Sigmoid", {"r"}, {"output"});
  const std::string path = b.save("traced.onnx");
  EXPECT_EQ(Remover(test::ctx(), path).run(solid(10, 10, 1, 2, 3)).alpha.width, 10);
  matting::RemoverOptions o;
  o.size = 32;
  Remover r(test::ctx(), path, o);
  const std::string e = error_of([&] { r.run(solid(10, 10, 1, 2, 3)); });
  EXPECT_THAT(e, HasSubstr("Reshape"));
  EXPECT_THAT(e, HasSubstr("declares a 64x64 input and fails at 32x32: run it without --size"));
  EXPECT_THAT(e, HasSubstr("isnet_any_size.onnx"));
}

TEST(RemoveBg, ModelErrors) {
  auto& ctx = test::ctx();
  EXPECT_THAT(error_of([&] { Remover(ctx, "/nonexistent/isnet.onnx"); }), HasSubstr("no such file"));

  auto one_input = [](const std::string& name, const std::vector<int64_t>& shape, int elem) {
    ModelBuilder b;
    b.input("x", shape, elem);
    b.output("y", shape, elem);
    b.node("Identity", {"x"}, {"y"});
    return b.save(name);
  };
  const std::string gray = error_of([&] { Remover(ctx, one_input("gray.onnx", {1, 1, 8, 8}, onnx::TensorProto::FLOAT)); });
  EXPECT_THAT(gray, HasSubstr("has no image input"));
  EXPECT_THAT(gray, HasSubstr("1x3xHxW"));
  EXPECT_THAT(gray, HasSubstr("'x' float32 [1, 1, 8, 8]"));
  EXPECT_THAT(error_of([&] { Remover(ctx, one_input("rank3.onnx", {3, 8, 8}, onnx::TensorProto::FLOAT)); }),
              HasSubstr("has no image input"));
  EXPECT_THAT(error_of([&] { Remover(ctx, one_input("int.onnx", {1, 3, 8, 8}, onnx::TensorProto::INT64)); }),
              HasSubstr("has no image input"));

  {
    ModelBuilder b;
    b.input("input", {1, 3, 8, 8});
    b.input("extra", {1});
    b.output("y", {1, 3, 8, 8});
    b.node("Identity", {"input"}, {"y"});
    EXPECT_THAT(error_of([&] { Remover(ctx, b.save("two.onnx")); }), HasSubstr("has 2 inputs"));
  }
  {
    ModelBuilder b;
    b.input("input", {1, 3, 8, -1}, onnx::TensorProto::FLOAT, {"", "", "", "w"});
    b.output("y", {1, 3, 8, -1}, onnx::TensorProto::FLOAT, {"", "", "", "w"});
    b.node("Identity", {"input"}, {"y"});
    EXPECT_THAT(error_of([&] { Remover(ctx, b.save("half.onnx")); }), HasSubstr("--preprocess isnet|modnet"));
  }
  // The first output is not a matte of the input's size.
  Remover r(ctx, one_input("rgb_out.onnx", {1, 3, 32, 32}, onnx::TensorProto::FLOAT));
  EXPECT_THAT(error_of([&] { r.run(solid(8, 8, 1, 2, 3)); }), HasSubstr("first output 'y' is float32 [1, 3, 32, 32]"));

  matting::RemoverOptions o;
  o.size = 100;
  EXPECT_THAT(error_of([&] { Remover(ctx, matting_model("size.onnx", 64, 64), o); }), HasSubstr("multiple of 32"));
  o.size = 16384;
  Remover big(ctx, matting_model("big.onnx", 64, 64), o);
  if (ctx.limits().max_storage_buffer_binding_size < uint64_t(16384) * 16384 * 12) {
    EXPECT_THAT(error_of([&] { big.plan(10, 10); }), HasSubstr("use a smaller --size"));
  }
}

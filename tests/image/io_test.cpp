// Reading and writing images: PNG and JPEG round trips against known pixels,
// channel conversion to RGB, and the errors a person can cause.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stb_image_write.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "error_of.h"
#include "file_size_limit.h"
#include "image/image.h"

using namespace wgnn;
using wgnn::test::error_of;
using image::Image;
using testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

std::string tmp(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("wgnn_image_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

Image pattern(int w, int h, int c) {
  Image img(w, h, c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) img.at(x, y, k) = uint8_t((x * 37 + y * 11 + k * 101) & 255);
  return img;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST(ImageIo, PngRgbRoundTripIsExact) {
  const Image img = pattern(7, 5, 3);
  const std::string p = tmp("rgb.png");
  image::write_png(p, img);
  const Image back = image::read_rgb(p);
  EXPECT_EQ(back.width, 7);
  EXPECT_EQ(back.height, 5);
  EXPECT_EQ(back.channels, 3);
  EXPECT_EQ(back.pixels, img.pixels);
}

TEST(ImageIo, GrayPngBecomesRgb) {
  const Image img = pattern(9, 4, 1);
  const std::string p = tmp("gray.png");
  image::write_png(p, img);
  const Image back = image::read_rgb(p);
  ASSERT_EQ(back.channels, 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 9; ++x)
      for (int k = 0; k < 3; ++k) ASSERT_EQ(back.at(x, y, k), img.at(x, y, 0)) << x << "," << y;
}

TEST(ImageIo, AlphaIsDroppedFromRgbaAndGrayAlpha) {
  const Image rgba = pattern(6, 3, 4);
  image::write_png(tmp("rgba.png"), rgba);
  const Image a = image::read_rgb(tmp("rgba.png"));
  ASSERT_EQ(a.channels, 3);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 6; ++x)
      for (int k = 0; k < 3; ++k) ASSERT_EQ(a.at(x, y, k), rgba.at(x, y, k));

  const Image ga = pattern(5, 2, 2);
  image::write_png(tmp("ga.png"), ga);
  const Image b = image::read_rgb(tmp("ga.png"));
  ASSERT_EQ(b.channels, 3);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 5; ++x)
      for (int k = 0; k < 3; ++k) ASSERT_EQ(b.at(x, y, k), ga.at(x, y, 0));
}

TEST(ImageIo, EncodeDecodeInMemory) {
  const Image img = pattern(3, 3, 3);
  const Image back = image::decode_rgb(image::encode_png(img), "memory");
  EXPECT_EQ(back.pixels, img.pixels);
}

// Rows that each PNG filter suits (the same row repeated: Up; one colour
// along the row: Sub) and rows of noise, at an odd width, decoded by
// libpng: every byte comes back, in RGB and RGBA.
TEST(ImageIo, PngRowsOfEveryFilterReadBackExactly) {
  for (int c : {3, 4}) {
    Image img(37, 24, c);
    uint32_t state = 7u + uint32_t(c);
    auto noise = [&] { return uint8_t((state = state * 1664525u + 1013904223u) >> 24); };
    for (int y = 0; y < img.height; ++y)
      for (int x = 0; x < img.width; ++x)
        for (int k = 0; k < c; ++k) {
          uint8_t v;
          if (y < 8) v = uint8_t(x * 29 + k * 50);        // repeated rows
          else if (y < 16) v = uint8_t(y * 13 + k * 70);  // one colour per row
          else v = noise();
          img.at(x, y, k) = v;
        }
    const Image back = image::decode_photo(image::encode_png(img), "memory.png");
    ASSERT_EQ(back.channels, c);
    EXPECT_EQ(back.pixels, img.pixels) << c << " channels";
  }
}

TEST(ImageIo, JpegOfSolidBlocksReadsBackClose) {
  // 8x8 blocks of one colour each: JPEG keeps their DC terms; what remains
  // is YCbCr rounding.
  const uint8_t colors[4][3] = {{200, 30, 40}, {20, 180, 60}, {10, 20, 220}, {250, 250, 250}};
  Image img(16, 16, 3);
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x)
      for (int k = 0; k < 3; ++k) img.at(x, y, k) = colors[(y / 8) * 2 + x / 8][k];
  const std::string p = tmp("blocks.jpg");
  ASSERT_TRUE(stbi_write_jpg(p.c_str(), 16, 16, 3, img.pixels.data(), 100));
  const Image back = image::read_rgb(p);
  ASSERT_EQ(back.width, 16);
  ASSERT_EQ(back.height, 16);
  ASSERT_EQ(back.channels, 3);
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x)
      for (int k = 0; k < 3; ++k) ASSERT_NEAR(back.at(x, y, k), img.at(x, y, k), 4) << x << "," << y << "," << k;
}

TEST(ImageIo, GrayJpegBecomesRgb) {
  Image img(8, 8, 1);
  for (auto& v : img.pixels) v = 90;
  const std::string p = tmp("gray.jpg");
  ASSERT_TRUE(stbi_write_jpg(p.c_str(), 8, 8, 1, img.pixels.data(), 100));
  const Image back = image::read_rgb(p);
  ASSERT_EQ(back.channels, 3);
  for (size_t i = 0; i < back.pixels.size(); ++i) ASSERT_NEAR(back.pixels[i], 90, 1) << i;
}

TEST(ImageIo, WithAlphaInterleaves) {
  const Image rgb = pattern(4, 2, 3), alpha = pattern(4, 2, 1);
  const Image out = image::with_alpha(rgb, alpha);
  ASSERT_EQ(out.channels, 4);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 4; ++x) {
      for (int k = 0; k < 3; ++k) ASSERT_EQ(out.at(x, y, k), rgb.at(x, y, k));
      ASSERT_EQ(out.at(x, y, 3), alpha.at(x, y, 0));
    }
  EXPECT_THAT(error_of([&] { image::with_alpha(rgb, pattern(3, 2, 1)); }), HasSubstr("one size"));
}

TEST(ImageIo, Errors) {
  EXPECT_THAT(error_of([] { image::read_rgb(tmp("absent.png")); }), HasSubstr("no such file"));
  EXPECT_THAT(error_of([] { image::read_rgb(fs::temp_directory_path().string()); }), HasSubstr("is a folder"));

  write_file(tmp("empty.png"), "");
  EXPECT_THAT(error_of([] { image::read_rgb(tmp("empty.png")); }), HasSubstr("is empty"));

  write_file(tmp("text.png"), "this is not a picture\n");
  const std::string e = error_of([] { image::read_rgb(tmp("text.png")); });
  EXPECT_THAT(e, HasSubstr("text.png' is not an image"));
  EXPECT_THAT(e, HasSubstr("PNG, JPEG, WebP and TIFF are accepted"));

  // A PNG cut short: the header reads, the pixels do not.
  const std::string png = image::encode_png(pattern(64, 64, 3));
  write_file(tmp("cut.png"), png.substr(0, png.size() / 2));
  EXPECT_THAT(error_of([] { image::read_rgb(tmp("cut.png")); }), HasSubstr("could not be decoded"));

  // Too large a side is refused from the header, before decoding.
  image::write_png(tmp("wide.png"), Image(image::kMaxSide + 1, 1, 1));
  const std::string wide = error_of([] { image::read_rgb(tmp("wide.png")); });
  EXPECT_THAT(wide, HasSubstr("16385x1 pixels"));
  EXPECT_THAT(wide, HasSubstr("scale it down"));
  image::write_png(tmp("edge.png"), Image(1, image::kMaxSide, 1));
  EXPECT_EQ(image::read_rgb(tmp("edge.png")).height, image::kMaxSide);

  EXPECT_THAT(error_of([] { image::encode_png(Image(2, 2, 5)); }), HasSubstr("1 to 4 channels"));
  EXPECT_THAT(error_of([] { image::write_png(tmp("no/such/folder/x.png"), Image(2, 2, 3)); }),
              HasSubstr("cannot write"));
}

namespace {
// A PNG signature and an IHDR chunk claiming w x h (CRC not checked by the
// size test), no pixel data.
std::string png_header(uint32_t w, uint32_t h) {
  std::string b("\x89PNG\r\n\x1a\n", 8);
  b += std::string("\0\0\0\x0dIHDR", 8);
  for (uint32_t v : {w, h}) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(char((v >> s) & 0xFF));
  }
  b += std::string("\x08\x02\0\0\0", 5);
  b += std::string(4, '\0');  // CRC
  return b;
}
}  // namespace

TEST(ImageIo, TooLargeIsSaidFromTheHeader) {
  const std::string huge = error_of([] { image::decode_rgb(png_header(100000, 100000), "huge.png"); });
  EXPECT_THAT(huge, HasSubstr("'huge.png' is too large"));
  EXPECT_THAT(huge, HasSubstr("100000x100000 pixels"));
  // 16384 x 16384 is within the side limit but over the default pixel cap.
  const std::string big = error_of([] { image::decode_rgb(png_header(16384, 16384), "big.png"); });
  EXPECT_THAT(big, HasSubstr("too large"));
  EXPECT_THAT(big, HasSubstr("67108864 pixels in all"));
  // The cap is the caller's to choose.
  const std::string png = image::encode_png(pattern(10, 10, 3));
  EXPECT_THAT(error_of([&] { image::decode_rgb(png, "ten.png", 99); }), HasSubstr("99 pixels in all"));
  EXPECT_EQ(image::decode_rgb(png, "ten.png", 100).width, 10);
  // A JPEG's size comes from its frame header.
  std::string jpg;
  stbi_write_jpg_to_func([](void* ctx, void* data, int size) { static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size_t(size)); },
                         &jpg, 20, 10, 3, pattern(20, 10, 3).pixels.data(), 90);
  EXPECT_THAT(error_of([&] { image::decode_rgb(jpg, "small.jpg", 199); }), HasSubstr("20x10 pixels"));
  EXPECT_EQ(image::decode_rgb(jpg, "small.jpg", 200).height, 10);
}

TEST(ImageIo, OnlyPngJpegWebpAndTiffAreDecoded) {
  std::string bmp;
  auto append = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size_t(size));
  };
  stbi_write_bmp_to_func(append, &bmp, 4, 4, 3, pattern(4, 4, 3).pixels.data());
  EXPECT_THAT(error_of([&] { image::decode_rgb(bmp, "x.bmp"); }), HasSubstr("it looks like a BMP file"));
  std::string tga;
  stbi_write_tga_to_func(append, &tga, 4, 4, 3, pattern(4, 4, 3).pixels.data());
  EXPECT_THAT(error_of([&] { image::decode_rgb(tga, "x.tga"); }), HasSubstr("PNG, JPEG, WebP and TIFF are accepted"));
  EXPECT_THAT(error_of([] { image::decode_rgb(std::string("GIF89a\x04\0\x04\0\0\0\0", 13), "x.gif"); }),
              HasSubstr("it looks like a GIF file"));
  EXPECT_THAT(error_of([] { image::decode_rgb("P6\n4 4\n255\n" + std::string(48, 'a'), "x.ppm"); }),
              HasSubstr("it looks like a PNM file"));
}

TEST(ImageIo, FailedPngWriteKeepsTheOldFile) {
  const std::string p = tmp("kept.png");
  image::write_png(p, pattern(8, 8, 3));
  std::string e;
  {
    // Pixels no encoder can squeeze under the limit (a pattern compresses
    // to a few hundred bytes).
    Image noise(512, 512, 3);
    uint32_t state = 12345;
    for (uint8_t& v : noise.pixels) v = uint8_t((state = state * 1664525u + 1013904223u) >> 24);
    wgnn::test::FileSizeLimit limit(4096);
    e = error_of([&] { image::write_png(p, noise); });
  }
  EXPECT_THAT(e, HasSubstr("kept.png"));
  EXPECT_THAT(e, HasSubstr("file size limit"));
  const Image back = image::read_rgb(p);
  EXPECT_EQ(back.width, 8);
  EXPECT_EQ(back.pixels, pattern(8, 8, 3).pixels);
}

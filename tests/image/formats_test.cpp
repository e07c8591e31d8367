// Reading photos as they are meant to be seen: JPEG EXIF orientation, the
// file's own alpha, WebP (libwebp) and TIFF (libtiff), gray, and the errors
// of files cut short.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stb_image_write.h>
#include <tiffio.h>
#include <unistd.h>
#include <webp/encode.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "error_of.h"
#include "image/image.h"
#include "image/matte.h"

using namespace wgnn;
using image::Image;
using testing::HasSubstr;
using wgnn::test::error_of;
namespace fs = std::filesystem;

namespace {

std::string tmp(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("wgnn_formats_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Image pattern(int w, int h, int c, int min = 0) {
  Image img(w, h, c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) img.at(x, y, k) = uint8_t(std::max(min, (x * 37 + y * 11 + k * 101) & 255));
  return img;
}

// Four solid quadrants (red, green, blue, white), each a whole number of
// JPEG blocks, so a JPEG of it decodes close to these colours.
Image quadrants(int w, int h) {
  Image img(w, h, 3);
  const uint8_t colours[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 3; ++k) img.at(x, y, k) = colours[(y >= h / 2) * 2 + (x >= w / 2)][k];
  return img;
}

std::string jpeg_of(const Image& img) {
  std::string out;
  stbi_write_jpg_to_func([](void* ctx, void* data, int size) { static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size_t(size)); },
                         &out, img.width, img.height, img.channels, img.pixels.data(), 100);
  return out;
}

// The JPEG with an EXIF APP1 segment after its SOI marker whose IFD0 holds
// one Orientation tag, in big-endian ("MM") or little-endian ("II") order.
std::string with_orientation(const std::string& jpeg, int o, bool big_endian) {
  std::string tiff;
  auto u16 = [&](uint32_t v) {
    if (big_endian) { tiff.push_back(char(v >> 8)); tiff.push_back(char(v & 255)); }
    else { tiff.push_back(char(v & 255)); tiff.push_back(char(v >> 8)); }
  };
  auto u32 = [&](uint32_t v) {
    if (big_endian) { u16(v >> 16); u16(v & 0xFFFF); }
    else { u16(v & 0xFFFF); u16(v >> 16); }
  };
  tiff += big_endian ? "MM" : "II";
  u16(42);
  u32(8);     // IFD0 offset
  u16(1);     // one entry
  u16(0x0112);  // Orientation
  u16(3);     // SHORT
  u32(1);
  u16(uint32_t(o));
  u16(0);
  u32(0);     // no next IFD
  const std::string payload = std::string("Exif\0\0", 6) + tiff;
  const size_t len = payload.size() + 2;
  std::string app1 = "\xFF\xE1";
  app1.push_back(char(len >> 8));
  app1.push_back(char(len & 255));
  return jpeg.substr(0, 2) + app1 + payload + jpeg.substr(2);
}

int max_diff(const Image& a, const Image& b) {
  if (a.width != b.width || a.height != b.height || a.channels != b.channels) return 1 << 20;
  int m = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) m = std::max(m, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
  return m;
}

}  // namespace

TEST(ImageOrientation, OrientedMovesEveryPixelWhereExifSays) {
  // a b c        each of the 8 orientations, written out by hand
  // d e f
  Image img(3, 2, 1);
  img.pixels = {'a', 'b', 'c', 'd', 'e', 'f'};
  const struct { int o, w; const char* want; } cases[] = {
      {1, 3, "abcdef"}, {2, 3, "cbafed"}, {3, 3, "fedcba"}, {4, 3, "defabc"},
      {5, 2, "adbecf"}, {6, 2, "daebfc"}, {7, 2, "fcebda"}, {8, 2, "cfbead"},
  };
  for (const auto& c : cases) {
    const Image out = image::oriented(img, c.o);
    EXPECT_EQ(out.width, c.w) << c.o;
    EXPECT_EQ(out.height, 6 / c.w) << c.o;
    EXPECT_EQ(std::string(out.pixels.begin(), out.pixels.end()), c.want) << "orientation " << c.o;
  }
  EXPECT_THAT(error_of([&] { image::oriented(img, 9); }), HasSubstr("not one of 1 to 8"));
}

TEST(ImageOrientation, JpegOrientationIsReadFromExif) {
  const std::string jpg = jpeg_of(quadrants(32, 16));
  EXPECT_EQ(image::jpeg_orientation(jpg), 1);  // none
  for (int o = 1; o <= 8; ++o) {
    EXPECT_EQ(image::jpeg_orientation(with_orientation(jpg, o, true)), o);
    EXPECT_EQ(image::jpeg_orientation(with_orientation(jpg, o, false)), o);
  }
  EXPECT_EQ(image::jpeg_orientation(with_orientation(jpg, 9, true)), 1);  // out of range: as stored
  EXPECT_EQ(image::jpeg_orientation(with_orientation(jpg, 0, false)), 1);
}

TEST(ImageOrientation, JpegIsDecodedTurned) {
  const std::string jpg = jpeg_of(quadrants(32, 16));
  const Image stored = image::decode_photo(jpg, "q.jpg");
  ASSERT_EQ(stored.width, 32);
  for (int o = 1; o <= 8; ++o) {
    const Image got = image::decode_photo(with_orientation(jpg, o, o % 2 == 0), "q.jpg");
    EXPECT_EQ(max_diff(got, image::oriented(stored, o)), 0) << "orientation " << o;
  }
  // 6: turned 90 degrees clockwise, the stored bottom-left (blue) is now
  // top-left and the top-left (red) top-right; 8: the top-right (green)
  // comes to the top-left.
  const Image six = image::decode_photo(with_orientation(jpg, 6, true), "q.jpg");
  ASSERT_EQ(six.width, 16);
  ASSERT_EQ(six.height, 32);
  EXPECT_LT(six.at(2, 2, 0), 30);
  EXPECT_GT(six.at(2, 2, 2), 225);
  EXPECT_GT(six.at(13, 2, 0), 225);
  EXPECT_LT(six.at(13, 2, 1), 30);
  const Image eight = image::decode_photo(with_orientation(jpg, 8, false), "q.jpg");
  EXPECT_GT(eight.at(2, 2, 1), 225);
  EXPECT_LT(eight.at(2, 2, 0), 30);
  // decode_rgb turns it too.
  EXPECT_EQ(image::decode_rgb(with_orientation(jpg, 6, true), "q.jpg").width, 16);
}

TEST(ImageAlpha, PngAlphaIsKept) {
  const Image rgba = pattern(9, 5, 4);
  image::write_png(tmp("rgba.png"), rgba);
  const Image back = image::read_photo(tmp("rgba.png"));
  EXPECT_EQ(back.channels, 4);
  EXPECT_EQ(back.pixels, rgba.pixels);
  EXPECT_EQ(image::read_rgb(tmp("rgba.png")).channels, 3);

  Image ga = pattern(6, 4, 2);
  image::write_png(tmp("ga.png"), ga);
  const Image g = image::read_photo(tmp("ga.png"));
  ASSERT_EQ(g.channels, 4);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 6; ++x) {
      for (int k = 0; k < 3; ++k) EXPECT_EQ(g.at(x, y, k), ga.at(x, y, 0));
      EXPECT_EQ(g.at(x, y, 3), ga.at(x, y, 1));
    }
  // Gray without alpha: RGB.
  image::write_png(tmp("g.png"), pattern(6, 4, 1));
  EXPECT_EQ(image::read_photo(tmp("g.png")).channels, 3);
}

TEST(ImageAlpha, MultiplyAlpha) {
  Image a(4, 1, 1), b(4, 1, 1);
  a.pixels = {255, 255, 128, 0};
  b.pixels = {255, 0, 128, 200};
  EXPECT_EQ(image::multiply_alpha(a, b).pixels, (std::vector<uint8_t>{255, 0, 64, 0}));
  EXPECT_THAT(error_of([&] { image::multiply_alpha(a, Image(2, 2, 1)); }), HasSubstr("one size"));
}

TEST(ImageWebp, LosslessRoundTrips) {
  const Image rgb = pattern(13, 7, 3);
  uint8_t* out = nullptr;
  size_t n = WebPEncodeLosslessRGB(rgb.pixels.data(), rgb.width, rgb.height, rgb.width * 3, &out);
  ASSERT_GT(n, 0u);
  const std::string webp(reinterpret_cast<char*>(out), n);
  WebPFree(out);
  const Image back = image::decode_photo(webp, "x.webp");
  EXPECT_EQ(back.channels, 3);
  EXPECT_EQ(back.pixels, rgb.pixels);

  const Image rgba = pattern(11, 6, 4, 1);  // no alpha of 0: lossless may change RGB under it
  n = WebPEncodeLosslessRGBA(rgba.pixels.data(), rgba.width, rgba.height, rgba.width * 4, &out);
  ASSERT_GT(n, 0u);
  const std::string webpa(reinterpret_cast<char*>(out), n);
  WebPFree(out);
  const Image backa = image::decode_photo(webpa, "a.webp");
  EXPECT_EQ(backa.channels, 4);
  EXPECT_EQ(backa.pixels, rgba.pixels);

  std::ofstream(tmp("x.webp"), std::ios::binary) << webp;
  EXPECT_EQ(image::read_photo(tmp("x.webp")).pixels, rgb.pixels);

  EXPECT_THAT(error_of([&] { image::decode_photo(webp.substr(0, webp.size() / 2), "cut.webp"); }),
              HasSubstr("'cut.webp'"));
  EXPECT_THAT(error_of([&] { image::decode_photo(webp.substr(0, 20), "short.webp"); }), HasSubstr("WebP"));
  std::string wave = "RIFF\x24\0\0\0WAVEfmt " + std::string(32, '\0');
  EXPECT_THAT(error_of([&] { image::decode_photo(wave, "x.wav"); }), HasSubstr("RIFF (not WebP)"));
  // Too large from the header: the pixel cap.
  EXPECT_THAT(error_of([&] { image::decode_photo(webp, "x.webp", 13 * 7 - 1); }), HasSubstr("too large"));
}

namespace {

// A TIFF written by libtiff: 8-bit, `c` samples (1 gray, 3 RGB, 4 RGBA with
// unassociated alpha), big- or little-endian.
std::string tiff_of(const Image& img, bool big_endian, uint16_t bits = 8, uint16_t orientation = 0) {
  const std::string path = tmp(big_endian ? "w_be.tif" : "w_le.tif");
  TIFF* t = TIFFOpen(path.c_str(), big_endian ? "wb" : "wl");
  EXPECT_NE(t, nullptr);
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, uint32_t(img.width));
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, uint32_t(img.height));
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, uint16_t(img.channels));
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, bits);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, img.channels >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
  TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_LZW);
  if (img.channels == 4) {
    const uint16_t extra[] = {EXTRASAMPLE_UNASSALPHA};
    TIFFSetField(t, TIFFTAG_EXTRASAMPLES, uint16_t(1), extra);
  }
  TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, uint32_t(img.height));
  if (orientation != 0) TIFFSetField(t, TIFFTAG_ORIENTATION, orientation);
  const size_t row = size_t(img.width) * size_t(img.channels);
  for (int y = 0; y < img.height; ++y) {
    if (bits == 8) {
      std::vector<uint8_t> line(img.pixels.begin() + long(row) * y, img.pixels.begin() + long(row) * (y + 1));
      TIFFWriteScanline(t, line.data(), uint32_t(y), 0);
    } else {
      std::vector<uint16_t> line(row);
      for (size_t i = 0; i < row; ++i) line[i] = uint16_t(img.pixels[row * size_t(y) + i] * 257);
      TIFFWriteScanline(t, line.data(), uint32_t(y), 0);
    }
  }
  TIFFClose(t);
  return slurp(path);
}

}  // namespace

TEST(ImageTiff, RgbGrayAndBothByteOrders) {
  const Image rgb = pattern(17, 9, 3);
  for (bool be : {false, true}) {
    const Image back = image::decode_photo(tiff_of(rgb, be), "x.tif");
    EXPECT_EQ(back.channels, 3);
    EXPECT_EQ(back.pixels, rgb.pixels) << (be ? "big-endian" : "little-endian");
  }
  const Image back16 = image::decode_photo(tiff_of(rgb, false, 16), "x16.tif");
  EXPECT_EQ(back16.pixels, rgb.pixels);  // 16-bit scaled to 8

  const Image gray = pattern(10, 4, 1);
  const Image g = image::decode_photo(tiff_of(gray, false), "g.tif");
  ASSERT_EQ(g.channels, 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 10; ++x)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(g.at(x, y, k), gray.at(x, y, 0));
}

TEST(ImageTiff, AlphaIsKeptAndColoursUnpremultiplied) {
  const Image rgba = pattern(12, 5, 4, 128);  // alpha >= 128: un-premultiplying is within 1
  const Image back = image::decode_photo(tiff_of(rgba, true), "a.tif");
  ASSERT_EQ(back.channels, 4);
  for (size_t i = 3; i < back.pixels.size(); i += 4) EXPECT_EQ(back.pixels[i], rgba.pixels[i]);
  EXPECT_LE(max_diff(back, rgba), 1);
}

TEST(ImageTiff, OrientationTagIsApplied) {
  const Image stored = pattern(7, 4, 3);
  for (uint16_t o = 1; o <= 8; ++o) {
    const Image got = image::decode_photo(tiff_of(stored, o % 2 == 0, 8, o), "o.tif");
    EXPECT_EQ(max_diff(got, image::oriented(stored, o)), 0) << "orientation " << o;
  }
}

TEST(ImageTiff, Errors) {
  const std::string good = tiff_of(pattern(64, 32, 3), false);
  std::ofstream(tmp("x.tif"), std::ios::binary) << good;
  EXPECT_EQ(image::read_photo(tmp("x.tif")).width, 64);
  const std::string cut = error_of([&] { image::decode_photo(good.substr(0, good.size() / 3), "cut.tif"); });
  EXPECT_THAT(cut, HasSubstr("'cut.tif' is a TIFF"));
  EXPECT_THAT(error_of([&] { image::decode_photo(std::string("II*\0\x08\0\0\0", 8), "h.tif"); }),
              HasSubstr("'h.tif' is a TIFF"));
  EXPECT_THAT(error_of([&] { image::decode_photo(good, "x.tif", 64 * 32 - 1); }), HasSubstr("too large"));
}

TEST(ImageAlpha, CompositeOver) {
  Image px(3, 1, 4);
  px.pixels = {200, 100, 50, 255, 200, 100, 50, 0, 200, 100, 50, 128};
  const Image white = image::composite_over(px, {255, 255, 255, 255});
  ASSERT_EQ(white.channels, 3);
  EXPECT_EQ(white.pixels, (std::vector<uint8_t>{200, 100, 50, 255, 255, 255, 227, 177, 152}));
  // A translucent colour: alpha 128 over 128 gives 192.
  const Image half = image::composite_over(px, {0, 0, 255, 128});
  ASSERT_EQ(half.channels, 4);
  EXPECT_EQ(half.at(1, 0, 3), 128);
  EXPECT_EQ(half.at(1, 0, 2), 255);
  EXPECT_EQ(half.at(2, 0, 3), 192);
  EXPECT_EQ(half.at(2, 0, 0), 134);  // (200 * .502) / .751
  // A = 0: the image unchanged.
  EXPECT_EQ(image::composite_over(px, {9, 9, 9, 0}).pixels, px.pixels);
  EXPECT_THAT(error_of([&] { image::composite_over(Image(2, 2, 3), {0, 0, 0, 255}); }), HasSubstr("needs RGBA"));
}

// A malformed JPEG the image fuzzer found (no quantization table 1): stb_image
// read out of bounds on it; the JPEG decoder (libjpeg-turbo) refuses it.
TEST(ImageJpeg, MalformedFileIsAnErrorNotACrash) {
  std::ifstream in(std::string(WGNN_SOURCE_DIR) + "/fuzz/regressions/image/jpeg_undefined_quant_table.jpg",
                   std::ios::binary);
  ASSERT_TRUE(in) << "the regression file is missing";
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_THAT(error_of([&] { image::decode_photo(bytes, "bad.jpg"); }),
              HasSubstr("'bad.jpg' is a JPEG file wgnn cannot read (libjpeg: Quantization table"));
}

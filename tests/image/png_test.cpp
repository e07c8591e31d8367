// PNG decoding (image/png_read.cpp, libpng) of every layout a PNG can have:
// palettes with and without transparency, gray of 1 to 16 bits, a tRNS
// colour, 16-bit samples, Adam7 interlacing. Each file is written here by
// libpng's low-level writer from known samples, and the decoded pixels are
// compared with what those samples mean (palette looked up, gray scaled to
// 8 bits and copied to R, G and B, 16-bit cut to the high byte, tRNS as
// alpha), the pixels stb_image, PIL and rembg give for the same file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <png.h>

#include <csetjmp>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "error_of.h"
#include "image/image.h"

using namespace wgnn;
using wgnn::test::error_of;
using image::Image;
using testing::HasSubstr;

namespace {

struct Layout {
  int color = PNG_COLOR_TYPE_RGB;
  int depth = 8;
  bool interlace = false;
  std::vector<png_color> palette;
  std::vector<png_byte> palette_alpha;  // tRNS for a palette
  bool trns_color = false;              // tRNS for gray / RGB: the sample value in trns
  png_color_16 trns{};
};

void append(png_structp png, png_bytep data, png_size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}
void flush(png_structp) {}

// The file for `rows` (each row packed as the layout's depth says).
std::string write(const Layout& l, int w, int h, const std::vector<std::vector<png_byte>>& rows) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    ADD_FAILURE() << "libpng could not write the test file";
    return {};
  }
  png_set_write_fn(png, &out, append, flush);
  png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), l.depth, l.color,
               l.interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!l.palette.empty()) png_set_PLTE(png, info, l.palette.data(), int(l.palette.size()));
  if (!l.palette_alpha.empty()) {
    png_set_tRNS(png, info, l.palette_alpha.data(), int(l.palette_alpha.size()), nullptr);
  }
  if (l.trns_color) png_set_tRNS(png, info, nullptr, 0, const_cast<png_color_16*>(&l.trns));
  png_write_info(png, info);
  if (l.interlace) png_set_interlace_handling(png);
  std::vector<png_bytep> ptrs;
  for (const auto& r : rows) ptrs.push_back(const_cast<png_bytep>(r.data()));
  png_write_image(png, ptrs.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// Packs samples of `depth` bits (1, 2, 4, 8 or 16, big-endian) into a row.
std::vector<png_byte> pack(const std::vector<int>& samples, int depth) {
  std::vector<png_byte> row;
  if (depth == 16) {
    for (int s : samples) {
      row.push_back(png_byte(s >> 8));
      row.push_back(png_byte(s & 255));
    }
    return row;
  }
  const int per = 8 / depth;
  row.assign((samples.size() + size_t(per) - 1) / size_t(per), 0);
  for (size_t i = 0; i < samples.size(); ++i) {
    row[i / size_t(per)] |= png_byte(samples[i] << (8 - depth * int(i % size_t(per) + 1)));
  }
  return row;
}

int sample(int x, int y, int k, int depth) { return (x * 7 + y * 13 + k * 5 + x * y) % (1 << depth); }

}  // namespace

TEST(Png, GrayOfEveryDepthScalesTo8BitsAndFillsRgb) {
  for (int depth : {1, 2, 4, 8, 16}) {
    for (bool interlace : {false, true}) {
      const int w = 11, h = 9;
      Layout l;
      l.color = PNG_COLOR_TYPE_GRAY;
      l.depth = depth;
      l.interlace = interlace;
      std::vector<std::vector<png_byte>> rows;
      for (int y = 0; y < h; ++y) {
        std::vector<int> s;
        for (int x = 0; x < w; ++x) s.push_back(sample(x, y, 0, depth));
        rows.push_back(pack(s, depth));
      }
      const Image img = image::decode_photo(write(l, w, h, rows), "gray.png");
      ASSERT_EQ(img.channels, 3) << depth;
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          const int v = sample(x, y, 0, depth);
          // Below 8 bits, a sample scales by 255 / (2^depth - 1); at 16, its high byte.
          const int want = depth == 16 ? v >> 8 : depth == 8 ? v : v * 255 / ((1 << depth) - 1);
          for (int k = 0; k < 3; ++k) ASSERT_EQ(img.at(x, y, k), want) << depth << " " << interlace << " " << x << "," << y;
        }
      }
    }
  }
}

TEST(Png, SixteenBitRgbaKeepsTheHighByte) {
  const int w = 6, h = 5;
  Layout l;
  l.color = PNG_COLOR_TYPE_RGB_ALPHA;
  l.depth = 16;
  std::vector<std::vector<png_byte>> rows;
  for (int y = 0; y < h; ++y) {
    std::vector<int> s;
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 4; ++k) s.push_back(sample(x, y, k, 16) * 97 % 65536);
    rows.push_back(pack(s, 16));
  }
  const Image img = image::decode_photo(write(l, w, h, rows), "rgba16.png");
  ASSERT_EQ(img.channels, 4);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 4; ++k) ASSERT_EQ(img.at(x, y, k), (sample(x, y, k, 16) * 97 % 65536) >> 8);
}

TEST(Png, PaletteIsLookedUpAndItsTransparencyBecomesAlpha) {
  for (bool with_alpha : {false, true}) {
    for (bool interlace : {false, true}) {
      const int w = 10, h = 7, depth = 4;
      Layout l;
      l.color = PNG_COLOR_TYPE_PALETTE;
      l.depth = depth;
      l.interlace = interlace;
      for (int i = 0; i < 16; ++i) l.palette.push_back(png_color{png_byte(i * 16), png_byte(255 - i * 9), png_byte(i * i)});
      if (with_alpha) {
        for (int i = 0; i < 12; ++i) l.palette_alpha.push_back(png_byte(i * 20));  // entries 12..15 stay opaque
      }
      std::vector<std::vector<png_byte>> rows;
      for (int y = 0; y < h; ++y) {
        std::vector<int> s;
        for (int x = 0; x < w; ++x) s.push_back(sample(x, y, 0, depth));
        rows.push_back(pack(s, depth));
      }
      const Image img = image::decode_photo(write(l, w, h, rows), "palette.png");
      ASSERT_EQ(img.channels, with_alpha ? 4 : 3);
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          const int i = sample(x, y, 0, depth);
          ASSERT_EQ(img.at(x, y, 0), l.palette[size_t(i)].red);
          ASSERT_EQ(img.at(x, y, 1), l.palette[size_t(i)].green);
          ASSERT_EQ(img.at(x, y, 2), l.palette[size_t(i)].blue);
          if (with_alpha) ASSERT_EQ(img.at(x, y, 3), i < 12 ? i * 20 : 255);
        }
      }
    }
  }
}

TEST(Png, ATransparentColourBecomesAlpha) {
  const int w = 8, h = 6;
  Layout l;
  l.color = PNG_COLOR_TYPE_RGB;
  l.trns_color = true;
  l.trns.red = 10;
  l.trns.green = 20;
  l.trns.blue = 30;
  std::vector<std::vector<png_byte>> rows;
  for (int y = 0; y < h; ++y) {
    std::vector<int> s;
    for (int x = 0; x < w; ++x) {
      const bool clear = (x + y) % 3 == 0;
      s.push_back(clear ? 10 : x * 30);
      s.push_back(clear ? 20 : y * 40);
      s.push_back(clear ? 30 : 200);
    }
    rows.push_back(pack(s, 8));
  }
  const Image img = image::decode_photo(write(l, w, h, rows), "trns.png");
  ASSERT_EQ(img.channels, 4);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const bool clear = (x + y) % 3 == 0;
      EXPECT_EQ(img.at(x, y, 0), clear ? 10 : x * 30);
      EXPECT_EQ(img.at(x, y, 3), clear ? 0 : 255) << x << "," << y;
    }
  }
}

// The file the image fuzzer found (fuzz/regressions/image): an 8x6 gray PNG
// followed by a chunk whose length field reads "IDAT", 1.2 GB. stb_image
// asked for 2 GiB before it read a byte of it.
TEST(Png, AChunkLongerThanTheFileIsAnErrorNotAnAllocation) {
  std::ifstream in(std::string(WGNN_SOURCE_DIR) + "/fuzz/regressions/image/png_idat_length_2gib.png", std::ios::binary);
  ASSERT_TRUE(in);
  const std::string lie((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(error_of([&] { image::decode_photo(lie, "lie.png"); }), HasSubstr("'lie.png' could not be decoded"));
  // An IDAT that says 1 GiB follows the header, and the file ends.
  Layout l;
  l.color = PNG_COLOR_TYPE_GRAY;
  std::vector<std::vector<png_byte>> rows(6, std::vector<png_byte>(8, 100));
  std::string cut = write(l, 8, 6, rows).substr(0, 33);
  cut += std::string("\x40\0\0\0IDAT", 8);
  cut += std::string(100, 'x');
  EXPECT_THAT(error_of([&] { image::decode_photo(cut, "cut.png"); }), HasSubstr("'cut.png' could not be decoded"));
}

// PNG encoding of a remove-bg cut-out, timed on one core: wgnn's encoder
// (image/png_write.cpp: libdeflate) beside libpng at zlib level 3 with the
// Sub and Up filters (wgnn's encoder before it), on the same pixels.
//
//   wgnn_bench_png PHOTO [--runs N]
//
// PHOTO is read as RGB; a cut-out's alpha is added (an ellipse over the
// middle, with a soft edge), as remove-bg writes it. Prints one JSON line
// per encoder: median ms, bytes, and whether libpng reads the bytes back
// to the same pixels.
#include <png.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "image/image.h"

namespace {

using wgnn::image::Image;

void append(png_structp png, png_bytep data, png_size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}
void flush(png_structp) {}

// The previous encoder's settings, for the side-by-side measure.
std::string libpng_level3(const Image& img) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fprintf(stderr, "libpng failed\n");
    std::exit(1);
  }
  png_set_write_fn(png, &out, append, flush);
  png_set_IHDR(png, info, png_uint_32(img.width), png_uint_32(img.height), 8, PNG_COLOR_TYPE_RGB_ALPHA,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 3);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB | PNG_FILTER_UP);
  png_write_info(png, info);
  for (int y = 0; y < img.height; ++y)
    png_write_row(png, const_cast<png_bytep>(img.pixels.data() + size_t(y) * size_t(img.width) * 4));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

double median_ms(int runs, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: wgnn_bench_png PHOTO [--runs N]\n");
    return 2;
  }
  int runs = 9;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
  const Image rgb = wgnn::image::read_rgb(argv[1]);
  Image img(rgb.width, rgb.height, 4);
  const double cx = rgb.width / 2.0, cy = rgb.height / 2.0, rx = rgb.width * 0.3, ry = rgb.height * 0.4;
  for (int y = 0; y < rgb.height; ++y)
    for (int x = 0; x < rgb.width; ++x) {
      for (int k = 0; k < 3; ++k) img.at(x, y, k) = rgb.at(x, y, k);
      const double d = std::hypot((x - cx) / rx, (y - cy) / ry);
      img.at(x, y, 3) = uint8_t(std::clamp((1.05 - d) * 10.0, 0.0, 1.0) * 255.0 + 0.5);
    }
  struct Encoder {
    const char* name;
    std::function<std::string(const Image&)> encode;
  };
  const Encoder encoders[] = {{"wgnn", wgnn::image::encode_png}, {"libpng-level3", libpng_level3}};
  for (const Encoder& e : encoders) {
    std::string bytes;
    const double ms = median_ms(runs, [&] { bytes = e.encode(img); });
    const Image back = wgnn::image::decode_photo(bytes, "encoded.png");
    std::printf("{\"encoder\": \"%s\", \"width\": %d, \"height\": %d, \"median_ms\": %.1f, \"bytes\": %zu, "
                "\"reads_back\": %s}\n",
                e.name, img.width, img.height, ms, bytes.size(), back.pixels == img.pixels ? "true" : "false");
  }
  return 0;
}

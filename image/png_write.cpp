// PNG encoding through libpng (zlib at a fast level): Debian's stb_image_write
// compresses with its own deflate, which took most of a folder run's host
// time (about 280 ms for a 1024x768 RGBA cut-out on one core).
#include <fmt/format.h>
#include <png.h>

#include <csetjmp>
#include <string>

#include "image/image.h"

namespace wgnn::image {
namespace {

// zlib level 3 and the Sub and Up filters: within a few per cent of the
// size of level 6 with every filter on photos, at a fraction of the time.
constexpr int kZlibLevel = 3;

void append(png_structp png, png_bytep data, png_size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}
void flush(png_structp) {}

struct Writer {
  png_structp png = nullptr;
  png_infop info = nullptr;
  char message[256] = {0};
  ~Writer() { png_destroy_write_struct(&png, &info); }
};

void on_error(png_structp png, png_const_charp msg) {
  auto* w = static_cast<Writer*>(png_get_error_ptr(png));
  std::snprintf(w->message, sizeof w->message, "%s", msg);
  png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}

// The libpng calls, with no C++ object made between setjmp and its end (a
// longjmp would skip its destructor). False on an error (in w->message).
bool encode(Writer* w, const Image& img, std::string* out) {
  if (setjmp(png_jmpbuf(w->png))) return false;
  static const int kColor[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                               PNG_COLOR_TYPE_RGB_ALPHA};
  png_set_write_fn(w->png, out, append, flush);
  png_set_IHDR(w->png, w->info, png_uint_32(img.width), png_uint_32(img.height), 8, kColor[img.channels],
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(w->png, kZlibLevel);
  png_set_filter(w->png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB | PNG_FILTER_UP);
  png_write_info(w->png, w->info);
  const size_t stride = size_t(img.width) * size_t(img.channels);
  for (int y = 0; y < img.height; ++y) {
    png_write_row(w->png, const_cast<png_bytep>(img.pixels.data() + size_t(y) * stride));
  }
  png_write_end(w->png, nullptr);
  return true;
}

}  // namespace

std::string encode_png(const Image& img) {
  if (img.channels < 1 || img.channels > 4) {
    throw Error(fmt::format("a PNG holds 1 to 4 channels; the image has {}", img.channels));
  }
  if (img.width <= 0 || img.height <= 0 ||
      img.pixels.size() != size_t(img.width) * size_t(img.height) * size_t(img.channels)) {
    throw Error(fmt::format("cannot encode a {}x{}x{} image of {} bytes", img.width, img.height, img.channels,
                            img.pixels.size()));
  }
  Writer w;
  w.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &w, on_error, on_warning);
  if (w.png) w.info = png_create_info_struct(w.png);
  if (!w.png || !w.info) throw std::bad_alloc();
  std::string out;
  out.reserve(img.pixels.size() / 2);
  if (!encode(&w, img, &out)) {
    throw Error(fmt::format("PNG encoding of a {}x{} image failed: {}", img.width, img.height, w.message));
  }
  return out;
}

}  // namespace wgnn::image

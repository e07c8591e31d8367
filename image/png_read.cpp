// PNG decoding through libpng, the decoder made and fuzzed for hostile
// input. stb_image's PNG path grew its buffer to an IDAT chunk's declared
// length before reading it: a 120-byte file whose chunk claimed 1.2 GB made it
// ask for 2 GiB (the image fuzzer found it). libpng inflates chunk by chunk
// and bounds every other chunk it keeps (png_set_chunk_malloc_max).
//
// The pixels are what stb_image, PIL and rembg give: palette and gray
// expanded to 8-bit RGB, a tRNS colour turned into alpha, 16-bit samples cut
// to their high byte, and no gamma or colour-profile correction.
#include <fmt/format.h>
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "image/decoders.h"

namespace wgnn::image::detail {
namespace {

// Ancillary chunks larger than this (text, ICC profiles) are an error, not
// an allocation; IDAT data is streamed and never held whole.
constexpr png_alloc_size_t kMaxChunkBytes = 8u << 20;

struct Reader {
  const std::string* bytes = nullptr;
  size_t pos = 0;
  png_structp png = nullptr;
  png_infop info = nullptr;
  char message[256] = {0};
  bool too_large = false;
  png_uint_32 width = 0, height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
  std::vector<png_bytep> rows;
  ~Reader() { png_destroy_read_struct(&png, &info, nullptr); }
};

void on_error(png_structp png, png_const_charp msg) {
  auto* r = static_cast<Reader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof r->message, "%s", msg);
  png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}

void read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (n > r->bytes->size() - r->pos) png_error(png, "the file ends inside a chunk (truncated)");
  std::memcpy(out, r->bytes->data() + r->pos, n);
  r->pos += n;
}

// The libpng calls. Nothing with a destructor is made between setjmp and its
// end (a longjmp would skip it): every buffer lives in the Reader. False on
// an error (in r->message), or when the size is over the bound (too_large).
bool decode(Reader* r, uint64_t max_pixels) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  png_set_read_fn(r->png, r, read_bytes);
  png_set_chunk_malloc_max(r->png, kMaxChunkBytes);
  png_set_user_limits(r->png, png_uint_32(kMaxSide), png_uint_32(kMaxSide));
  png_read_info(r->png, r->info);
  r->width = png_get_image_width(r->png, r->info);
  r->height = png_get_image_height(r->png, r->info);
  if (uint64_t(r->width) * uint64_t(r->height) > max_pixels) {
    r->too_large = true;
    return false;
  }
  const int color = png_get_color_type(r->png, r->info);
  const bool alpha = (color & PNG_COLOR_MASK_ALPHA) != 0 || png_get_valid(r->png, r->info, PNG_INFO_tRNS) != 0;
  png_set_expand(r->png);  // palette -> RGB, gray below 8 bits -> 8, tRNS -> alpha
  png_set_strip_16(r->png);
  png_set_gray_to_rgb(r->png);
  png_set_interlace_handling(r->png);
  png_read_update_info(r->png, r->info);
  r->channels = png_get_channels(r->png, r->info);
  if (r->channels != (alpha ? 4 : 3) || png_get_rowbytes(r->png, r->info) != size_t(r->width) * size_t(r->channels)) {
    png_error(r->png, "unexpected row layout after expansion");
  }
  const size_t stride = size_t(r->width) * size_t(r->channels);
  r->pixels.resize(stride * size_t(r->height));
  r->rows.resize(r->height);
  for (png_uint_32 y = 0; y < r->height; ++y) r->rows[y] = r->pixels.data() + size_t(y) * stride;
  png_read_image(r->png, r->rows.data());
  return true;
}

}  // namespace

Image decode_png(const std::string& bytes, const std::string& what, uint64_t max_pixels) {
  Reader r;
  r.bytes = &bytes;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, on_error, on_warning);
  if (r.png) r.info = png_create_info_struct(r.png);
  if (!r.png || !r.info) throw std::bad_alloc();
  if (!decode(&r, max_pixels)) {
    if (r.too_large) check_size(r.width, r.height, what, "PNG", max_pixels);
    throw Error(fmt::format("'{}' could not be decoded as a PNG (libpng: {})", what, r.message));
  }
  Image img;
  img.width = int(r.width);
  img.height = int(r.height);
  img.channels = r.channels;
  img.pixels = std::move(r.pixels);
  return img;
}

}  // namespace wgnn::image::detail

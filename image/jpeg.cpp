// JPEG through libjpeg-turbo (Debian's libjpeg62-turbo): the decoder that is
// fuzzed and maintained for hostile input. stb_image's JPEG path read out of
// bounds on a malformed file the image fuzzer found (a SEGV inside
// stbi_load_from_memory), so JPEG no longer goes through it.
#include <fmt/format.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include <jpeglib.h>

#include "image/decoders.h"

namespace wgnn::image::detail {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void on_message(j_common_ptr, int) {}  // warnings (corrupt data libjpeg recovers from) stay quiet

}  // namespace

Image decode_jpeg(const std::string& bytes, const std::string& what, uint64_t max_pixels) {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error;
  err.pub.emit_message = on_message;
  err.message[0] = '\0';
  // Everything that outlives a longjmp is declared before setjmp and not
  // changed after it except through the pointer below.
  // Every allocation lives here, before setjmp: a longjmp out of libjpeg
  // skips the destructors of anything made after it (a leak).
  std::vector<uint8_t> rgb, row;
  uint32_t width = 0, height = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    throw Error(fmt::format("'{}' is a JPEG file wgnn cannot read (libjpeg: {})", what, err.message));
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  width = cinfo.image_width;
  height = cinfo.image_height;
  // CMYK / YCCK (Adobe) JPEGs are decoded as CMYK and converted below; every
  // other colour space libjpeg turns into RGB.
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  try {
    check_size(width, height, what, "JPEG", max_pixels);
    rgb.resize(size_t(width) * height * 3);
  } catch (...) {
    jpeg_destroy_decompress(&cinfo);
    throw;
  }
  jpeg_start_decompress(&cinfo);
  const uint32_t comps = uint32_t(cinfo.output_components);
  row.resize(size_t(width) * comps);
  while (cinfo.output_scanline < cinfo.output_height) {
    const uint32_t y = cinfo.output_scanline;
    JSAMPROW rows[1] = {row.data()};
    jpeg_read_scanlines(&cinfo, rows, 1);
    uint8_t* dst = rgb.data() + size_t(y) * width * 3;
    if (comps == 3) {
      std::memcpy(dst, row.data(), row.size());
    } else {
      // Adobe writes inverted CMYK: R = C * K / 255 with the stored values.
      for (uint32_t x = 0; x < width; ++x) {
        const uint32_t c = row[x * 4], m = row[x * 4 + 1], yy = row[x * 4 + 2], k = row[x * 4 + 3];
        dst[x * 3] = uint8_t(c * k / 255);
        dst[x * 3 + 1] = uint8_t(m * k / 255);
        dst[x * 3 + 2] = uint8_t(yy * k / 255);
      }
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  Image img(int(width), int(height), 3);
  std::memcpy(img.pixels.data(), rgb.data(), rgb.size());
  return img;
}

}  // namespace wgnn::image::detail

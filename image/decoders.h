#pragma once
// The per-format decoders behind image::decode_photo (image/io.cpp tells the
// format by signature and calls one). Each checks the size from its header
// (check_size) before it takes pixel memory, and returns RGB or RGBA.
#include <cstdint>
#include <string>

#include "image/image.h"

namespace wgnn::image::detail {

// An Error ("too large") when w x h is over kMaxSide a side or over
// `max_pixels` in all; `format` names the header it was read from.
void check_size(uint64_t w, uint64_t h, const std::string& what, const char* format, uint64_t max_pixels);

Image decode_webp(const std::string& bytes, const std::string& what, uint64_t max_pixels);
Image decode_tiff(const std::string& bytes, const std::string& what, uint64_t max_pixels);
// libpng: RGB, or RGBA when the file has alpha (a channel or a tRNS colour).
Image decode_png(const std::string& bytes, const std::string& what, uint64_t max_pixels);
// libjpeg-turbo: RGB (CMYK / YCCK converted).
Image decode_jpeg(const std::string& bytes, const std::string& what, uint64_t max_pixels);

}  // namespace wgnn::image::detail

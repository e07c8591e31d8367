#pragma once
// 8-bit images in host memory, and reading / writing them (stb: Debian's
// libstb). Host only: nothing here touches the GPU.
//
//   image::Image photo = image::read_rgb("photo.jpg");   // PNG, JPEG, ... -> RGB
//   image::write_png("out.png", rgba);                   // 1 to 4 channels
//
// Every failure a person can cause (a missing file, a file that is not an
// image, an image too large, an unwritable output or a full disk) is a
// wgnn::Error naming the file and what to do.
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/error.h"

namespace wgnn::image {

// The largest side read_rgb accepts (checked from the header, before the
// pixels are decoded).
inline constexpr int kMaxSide = 16384;
// The most pixels read_rgb accepts by default (8192 x 8192, about 200 MB
// decoded), also checked from the header; a caller may allow more.
inline constexpr uint64_t kDefaultMaxPixels = 8192ull * 8192ull;

struct Image {
  int width = 0, height = 0;
  int channels = 0;             // 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA
  std::vector<uint8_t> pixels;  // row-major, channels interleaved

  Image() = default;
  Image(int w, int h, int c) : width(w), height(h), channels(c), pixels(size_t(w) * size_t(h) * size_t(c)) {}
  uint8_t& at(int x, int y, int c) { return pixels[(size_t(y) * size_t(width) + size_t(x)) * size_t(channels) + size_t(c)]; }
  uint8_t at(int x, int y, int c) const {
    return pixels[(size_t(y) * size_t(width) + size_t(x)) * size_t(channels) + size_t(c)];
  }
};

// Decodes a PNG or JPEG into RGB: gray is replicated, alpha is dropped,
// 16-bit samples are scaled to 8 bits. JPEG EXIF orientation is not applied.
// The format is told by the file's signature before anything is decoded:
// other formats (GIF, BMP, TGA, PSD, PNM, ...) are refused by name. The size
// is read from the header first: over kMaxSide a side or over `max_pixels`
// is an Error saying so ("too large"), before any pixel memory is taken.
Image read_rgb(const std::string& path, uint64_t max_pixels = kDefaultMaxPixels);
// The same from bytes in memory; `what` names them in errors.
Image decode_rgb(const std::string& bytes, const std::string& what, uint64_t max_pixels = kDefaultMaxPixels);

// PNG with as many channels as the image has (1 to 4), written atomically
// (util/file.h).
void write_png(const std::string& path, const Image& img);
std::string encode_png(const Image& img);

// An RGB image with a one-channel alpha of the same size: RGBA.
Image with_alpha(const Image& rgb, const Image& alpha);

}  // namespace wgnn::image

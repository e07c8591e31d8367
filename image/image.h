#pragma once
// 8-bit images in host memory, and reading / writing them (Debian's libpng,
// libjpeg-turbo, libwebp, libtiff, libexif for JPEG orientation). Host
// only: nothing here touches the GPU.
//
//   image::Image photo = image::read_photo("photo.jpg"); // -> RGB or RGBA
//   image::Image rgb = image::read_rgb("photo.webp");    // -> RGB
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

// Decodes a PNG, JPEG, WebP or TIFF photo as it is meant to be seen: RGB (3
// channels), or RGBA (4) when the file has an alpha channel (gray + alpha,
// RGBA PNG, WebP with alpha, TIFF with an extra alpha sample; TIFF's
// associated alpha is un-premultiplied). Gray is replicated, 16-bit samples
// are scaled to 8 bits, a JPEG's EXIF orientation (1 to 8) is applied, and
// a TIFF's Orientation tag (the same values). The format is told by the file's
// signature before anything is decoded: other formats (GIF, BMP, TGA, PSD,
// PNM, ...) are refused by name. The size is read from the header first:
// over kMaxSide a side or over `max_pixels` is an Error saying so ("too
// large"), before any pixel memory is taken. Animated WebP is refused; a
// multi-page TIFF yields its first page.
Image read_photo(const std::string& path, uint64_t max_pixels = kDefaultMaxPixels);
// The same from bytes in memory; `what` names them in errors.
Image decode_photo(const std::string& bytes, const std::string& what, uint64_t max_pixels = kDefaultMaxPixels);
// read_photo / decode_photo with the alpha dropped: always RGB.
Image read_rgb(const std::string& path, uint64_t max_pixels = kDefaultMaxPixels);
Image decode_rgb(const std::string& bytes, const std::string& what, uint64_t max_pixels = kDefaultMaxPixels);

// The EXIF orientation of a JPEG (its APP1 segment, IFD0's Orientation tag):
// 1 to 8, and 1 when there is none or it is out of range.
int jpeg_orientation(const std::string& jpeg_bytes);
// The image turned the way EXIF orientation `o` (1 to 8) says it is to be
// shown: 2 mirrors, 3 turns 180 degrees, 4 flips, 5 transposes, 6 turns 90
// degrees clockwise, 7 transverses, 8 turns 90 degrees counter-clockwise.
// 5 to 8 swap width and height.
Image oriented(const Image& img, int o);

// Channels first .. first + count - 1 of each pixel (RGBA -> RGB: 0, 3;
// its alpha: 3, 1).
Image channels_of(const Image& img, int first, int count);

// PNG with as many channels as the image has (1 to 4), written atomically
// (util/file.h).
void write_png(const std::string& path, const Image& img);
std::string encode_png(const Image& img);

// An RGB image with a one-channel alpha of the same size: RGBA.
Image with_alpha(const Image& rgb, const Image& alpha);

}  // namespace wgnn::image

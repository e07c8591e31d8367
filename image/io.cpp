#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <sstream>

#include "image/decoders.h"
#include "image/image.h"
#include "util/file.h"

namespace wgnn::image {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st)) throw Error(fmt::format("'{}': no such file", path));
  if (fs::is_directory(st)) throw Error(fmt::format("'{}' is a folder, not an image file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  return std::move(ss).str();
}

}  // namespace

namespace {

uint32_t be16(const std::string& b, size_t i) {
  return (uint32_t(uint8_t(b[i])) << 8) | uint32_t(uint8_t(b[i + 1]));
}
uint32_t be32(const std::string& b, size_t i) { return (be16(b, i) << 16) | be16(b, i + 2); }

enum class Format { Png, Jpeg, Webp, Tiff };

// The format from the file's signature; anything but PNG, JPEG, WebP and
// TIFF is an Error naming what it looks like.
Format format_of(const std::string& b, const std::string& what) {
  static const char kPng[] = "\x89PNG\r\n\x1a\n";
  if (b.size() >= 8 && b.compare(0, 8, kPng, 8) == 0) return Format::Png;
  if (b.size() >= 3 && uint8_t(b[0]) == 0xFF && uint8_t(b[1]) == 0xD8 && uint8_t(b[2]) == 0xFF) return Format::Jpeg;
  if (b.size() >= 12 && b.compare(0, 4, "RIFF") == 0 && b.compare(8, 4, "WEBP") == 0) return Format::Webp;
  if (b.size() >= 4 && (b.compare(0, 4, std::string("II*\0", 4)) == 0 || b.compare(0, 4, std::string("MM\0*", 4)) == 0 ||
                        b.compare(0, 4, std::string("II+\0", 4)) == 0 || b.compare(0, 4, std::string("MM\0+", 4)) == 0)) {
    return Format::Tiff;
  }
  std::string looks;
  if (b.compare(0, 4, "GIF8") == 0) looks = "a GIF";
  else if (b.compare(0, 2, "BM") == 0) looks = "a BMP";
  else if (b.compare(0, 4, "8BPS") == 0) looks = "a PSD";
  else if (b.size() >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7') looks = "a PNM";
  else if (b.compare(0, 10, "#?RADIANCE") == 0 || b.compare(0, 6, "#?RGBE") == 0) looks = "an HDR";
  else if (b.compare(0, 4, "RIFF") == 0) looks = "a RIFF (not WebP)";
  throw Error(fmt::format("'{}' is not an image wgnn can read: {}; PNG, JPEG, WebP and TIFF are accepted", what,
                          looks.empty() ? "no PNG, JPEG, WebP or TIFF signature" : "it looks like " + looks + " file"));
}

// Width and height from the header: PNG's IHDR, JPEG's first SOF marker.
// False when the header is cut short or has none (the decoder then reports it).
bool header_size(const std::string& b, Format f, uint64_t* w, uint64_t* h) {
  if (f == Format::Png) {
    if (b.size() < 24 || b.compare(12, 4, "IHDR") != 0) return false;
    *w = be32(b, 16);
    *h = be32(b, 20);
    return true;
  }
  size_t i = 2;
  while (i + 4 <= b.size()) {
    if (uint8_t(b[i]) != 0xFF) return false;
    const uint8_t m = uint8_t(b[i + 1]);
    if (m == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {  // no length
      i += 2;
      continue;
    }
    if (m == 0xD9 || m == 0xDA) return false;  // end, or scan data before any frame header
    const uint32_t len = be16(b, i + 2);
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof) {
      if (i + 9 > b.size() || len < 7) return false;
      *h = be16(b, i + 5);
      *w = be16(b, i + 7);
      return true;
    }
    if (len < 2) return false;
    i += 2 + len;
  }
  return false;
}

}  // namespace

namespace detail {

void check_size(uint64_t w, uint64_t h, const std::string& what, const char* format, uint64_t max_pixels) {
  if (w > uint64_t(kMaxSide) || h > uint64_t(kMaxSide) || w * h > max_pixels) {
    throw Error(fmt::format("'{}' is too large: its {} header says {}x{} pixels; accepted are at most {} pixels a "
                            "side and {} pixels in all: scale it down first",
                            what, format, w, h, kMaxSide, max_pixels));
  }
}

}  // namespace detail

Image decode_photo(const std::string& bytes, const std::string& what, uint64_t max_pixels) {
  if (bytes.empty()) throw Error(fmt::format("'{}' is empty, not an image", what));
  if (bytes.size() > size_t(std::numeric_limits<int>::max())) {
    throw Error(fmt::format("'{}' is {} bytes; images over 2 GiB are not read", what, bytes.size()));
  }
  const Format format = format_of(bytes, what);
  if (format == Format::Webp) return detail::decode_webp(bytes, what, max_pixels);
  if (format == Format::Tiff) return detail::decode_tiff(bytes, what, max_pixels);
  const char* name = format == Format::Png ? "PNG" : "JPEG";
  uint64_t hw = 0, hh = 0;
  if (header_size(bytes, format, &hw, &hh)) detail::check_size(hw, hh, what, name, max_pixels);
  Image img = format == Format::Jpeg ? detail::decode_jpeg(bytes, what, max_pixels) : detail::decode_png(bytes, what, max_pixels);
  if (format == Format::Jpeg) {
    const int o = jpeg_orientation(bytes);
    if (o != 1) img = oriented(img, o);
  }
  return img;
}

Image read_photo(const std::string& path, uint64_t max_pixels) {
  return decode_photo(read_file(path), path, max_pixels);
}

Image decode_rgb(const std::string& bytes, const std::string& what, uint64_t max_pixels) {
  return channels_of(decode_photo(bytes, what, max_pixels), 0, 3);
}

Image read_rgb(const std::string& path, uint64_t max_pixels) {
  return decode_rgb(read_file(path), path, max_pixels);
}

void write_png(const std::string& path, const Image& img) { util::write_file_atomic(path, encode_png(img)); }

Image with_alpha(const Image& rgb, const Image& alpha) {
  if (rgb.channels != 3 || alpha.channels != 1 || rgb.width != alpha.width || rgb.height != alpha.height) {
    throw Error(fmt::format("with_alpha: needs RGB and a one-channel alpha of one size; got {}x{}x{} and {}x{}x{}",
                            rgb.width, rgb.height, rgb.channels, alpha.width, alpha.height, alpha.channels));
  }
  Image out(rgb.width, rgb.height, 4);
  const size_t n = size_t(rgb.width) * size_t(rgb.height);
  for (size_t i = 0; i < n; ++i) {
    out.pixels[4 * i + 0] = rgb.pixels[3 * i + 0];
    out.pixels[4 * i + 1] = rgb.pixels[3 * i + 1];
    out.pixels[4 * i + 2] = rgb.pixels[3 * i + 2];
    out.pixels[4 * i + 3] = alpha.pixels[i];
  }
  return out;
}

}  // namespace wgnn::image

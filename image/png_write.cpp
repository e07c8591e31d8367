// PNG encoding: each row filtered (Sub or Up, whichever leaves the smaller
// sum of magnitudes, as libpng's heuristic picks), the rows compressed as
// one zlib stream by libdeflate, and the chunks written here (the format is
// a signature and length-type-data-CRC chunks). libpng at zlib level 3 took
// most of a folder run's host time (about 300 ms for a 1920x1280 RGBA
// cut-out on one core); libdeflate at its level 2 is faster and smaller on
// photos (docs/REMOVE_BG.md, "PNG encoding"). Decoding stays with libpng.
#include <fmt/format.h>
#include <libdeflate.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "image/image.h"

namespace wgnn::image {
namespace {

constexpr int kDeflateLevel = 2;
// IDAT chunks of at most this much data (any size up to 2^31-1 is valid;
// smaller chunks keep every length far from that limit).
constexpr size_t kIdatBytes = size_t(1) << 20;

void put32(std::string& out, uint32_t v) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  out.append(b, 4);
}

void chunk(std::string& out, const char type[4], const void* data, size_t n) {
  put32(out, uint32_t(n));
  const size_t at = out.size();
  out.append(type, 4);
  out.append(static_cast<const char*>(data), n);
  put32(out, uint32_t(libdeflate_crc32(0, out.data() + at, n + 4)));
}

// The filtered scanlines: each row's filter type byte, then its bytes.
std::vector<uint8_t> filtered_rows(const Image& img) {
  const size_t bpp = size_t(img.channels);
  const size_t stride = size_t(img.width) * bpp;
  std::vector<uint8_t> f((stride + 1) * size_t(img.height));
  const uint8_t* px = img.pixels.data();
  auto magnitude = [](uint8_t v) { return uint32_t(v < 128 ? v : 256 - v); };
  for (size_t y = 0; y < size_t(img.height); ++y) {
    const uint8_t* row = px + y * stride;
    const uint8_t* up = y ? row - stride : nullptr;
    uint8_t* o = f.data() + y * (stride + 1);
    uint64_t sub_sum = 0, up_sum = 0;
    for (size_t x = 0; x < stride; ++x) {
      sub_sum += magnitude(uint8_t(row[x] - (x >= bpp ? row[x - bpp] : 0)));
      up_sum += magnitude(uint8_t(row[x] - (up ? up[x] : 0)));
    }
    if (up && up_sum < sub_sum) {
      o[0] = 2;  // Up
      for (size_t x = 0; x < stride; ++x) o[1 + x] = uint8_t(row[x] - up[x]);
    } else {
      o[0] = 1;  // Sub
      for (size_t x = 0; x < stride; ++x) o[1 + x] = uint8_t(row[x] - (x >= bpp ? row[x - bpp] : 0));
    }
  }
  return f;
}

struct FreeCompressor {
  void operator()(libdeflate_compressor* c) const { libdeflate_free_compressor(c); }
};

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
  if (uint64_t(img.width) > 0x7fffffffu || uint64_t(img.height) > 0x7fffffffu) {
    throw Error(fmt::format("a PNG is at most 2^31-1 pixels a side; the image is {}x{}", img.width, img.height));
  }
  const std::vector<uint8_t> rows = filtered_rows(img);
  std::unique_ptr<libdeflate_compressor, FreeCompressor> c(libdeflate_alloc_compressor(kDeflateLevel));
  if (!c) throw std::bad_alloc();
  std::string z(libdeflate_zlib_compress_bound(c.get(), rows.size()), '\0');
  const size_t zn = libdeflate_zlib_compress(c.get(), rows.data(), rows.size(), z.data(), z.size());
  if (zn == 0) {
    throw Error(fmt::format("PNG encoding of a {}x{} image failed: the compressed rows did not fit their bound",
                            img.width, img.height));
  }

  static const uint8_t kColor[] = {0, 0 /*gray*/, 4 /*gray+alpha*/, 2 /*RGB*/, 6 /*RGBA*/};
  std::string out;
  out.reserve(zn + zn / kIdatBytes * 12 + 64);
  out.append("\x89PNG\r\n\x1a\n", 8);
  uint8_t ihdr[13] = {};
  for (int i = 0; i < 4; ++i) {
    ihdr[i] = uint8_t(uint32_t(img.width) >> (24 - 8 * i));
    ihdr[4 + i] = uint8_t(uint32_t(img.height) >> (24 - 8 * i));
  }
  ihdr[8] = 8;  // bits per channel
  ihdr[9] = kColor[img.channels];
  // compression 0 (deflate), filter method 0, no interlace
  chunk(out, "IHDR", ihdr, sizeof ihdr);
  for (size_t at = 0; at < zn; at += kIdatBytes) chunk(out, "IDAT", z.data() + at, std::min(kIdatBytes, zn - at));
  chunk(out, "IEND", "", 0);
  return out;
}

}  // namespace wgnn::image

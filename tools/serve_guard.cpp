#include "tools/serve_guard.h"

#include <cstdint>

namespace wgnn::tools::serve_guard {
namespace {

uint32_t be32(const std::string& b, size_t at) {
  return uint32_t(uint8_t(b[at])) << 24 | uint32_t(uint8_t(b[at + 1])) << 16 | uint32_t(uint8_t(b[at + 2])) << 8 |
         uint32_t(uint8_t(b[at + 3]));
}

std::string png_end(const std::string& b) {
  size_t at = 8;  // the signature
  for (;;) {
    if (at + 8 > b.size()) return "truncated: the PNG ends before its IEND chunk";
    const uint64_t len = be32(b, at);
    if (len > 0x7fffffffu) return "corrupt: a PNG chunk longer than 2^31 bytes";
    const bool iend = b.compare(at + 4, 4, "IEND") == 0;
    if (at + 12 + len > b.size()) return "truncated: the PNG ends inside a chunk";
    if (iend) return "";
    at += 12 + size_t(len);
  }
}

std::string jpeg_end(const std::string& b) {
  const auto u = [&](size_t i) { return uint8_t(b[i]); };
  size_t at = 2;  // SOI
  const size_t n = b.size();
  for (;;) {
    if (at >= n) return "truncated: the JPEG ends before its end-of-image marker";
    if (u(at) != 0xFF) return "corrupt: JPEG data between segments";
    while (at < n && u(at) == 0xFF) ++at;  // fill bytes
    if (at >= n) return "truncated: the JPEG ends before its end-of-image marker";
    const uint8_t m = u(at++);
    if (m == 0xD9) return "";                                // EOI
    if ((m >= 0xD0 && m <= 0xD7) || m == 0x01) continue;     // no length
    if (at + 2 > n) return "truncated: the JPEG ends inside a segment";
    const size_t len = size_t(u(at)) << 8 | u(at + 1);
    if (len < 2) return "corrupt: a JPEG segment shorter than its length field";
    if (at + len > n) return "truncated: the JPEG ends inside a segment";
    at += len;
    if (m == 0xDA) {  // a scan: entropy-coded data up to the next marker
      while (at + 1 < n && !(u(at) == 0xFF && u(at + 1) != 0x00 && u(at + 1) != 0xFF &&
                             !(u(at + 1) >= 0xD0 && u(at + 1) <= 0xD7))) {
        ++at;
      }
      if (at + 1 >= n) return "truncated: the JPEG ends inside its image data";
    }
  }
}

}  // namespace

std::string incomplete_photo(const std::string& b) {
  if (b.size() >= 8 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) return png_end(b);
  if (b.size() >= 3 && uint8_t(b[0]) == 0xFF && uint8_t(b[1]) == 0xD8 && uint8_t(b[2]) == 0xFF) return jpeg_end(b);
  if (b.size() >= 12 && b.compare(0, 4, "RIFF") == 0 && b.compare(8, 4, "WEBP") == 0) {
    const uint64_t size = uint64_t(uint8_t(b[4])) | uint64_t(uint8_t(b[5])) << 8 | uint64_t(uint8_t(b[6])) << 16 |
                          uint64_t(uint8_t(b[7])) << 24;
    if (size + 8 > b.size()) return "truncated: the WebP is shorter than its RIFF header says";
  }
  return "";
}

}  // namespace wgnn::tools::serve_guard

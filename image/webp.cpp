// WebP through Debian's libwebp: still images, lossy or lossless, with or
// without alpha.
#include <fmt/format.h>
#include <webp/decode.h>

#include "image/decoders.h"

namespace wgnn::image::detail {

Image decode_webp(const std::string& bytes, const std::string& what, uint64_t max_pixels) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  WebPBitstreamFeatures f{};
  const VP8StatusCode st = WebPGetFeatures(data, bytes.size(), &f);
  if (st != VP8_STATUS_OK) {
    throw Error(fmt::format("'{}' is a WebP file wgnn cannot read: {}", what,
                            st == VP8_STATUS_NOT_ENOUGH_DATA ? "it is cut short" : "its header is invalid"));
  }
  if (f.has_animation) throw Error(fmt::format("'{}' is an animated WebP; give a still image", what));
  check_size(uint64_t(f.width), uint64_t(f.height), what, "WebP", max_pixels);
  const int c = f.has_alpha ? 4 : 3;
  Image img(f.width, f.height, c);
  const int stride = f.width * c;
  const uint8_t* ok = c == 4 ? WebPDecodeRGBAInto(data, bytes.size(), img.pixels.data(), img.pixels.size(), stride)
                             : WebPDecodeRGBInto(data, bytes.size(), img.pixels.data(), img.pixels.size(), stride);
  if (ok == nullptr) {
    throw Error(fmt::format("'{}' could not be decoded (libwebp: the image data is corrupt or cut short)", what));
  }
  return img;
}

}  // namespace wgnn::image::detail

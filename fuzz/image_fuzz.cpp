// libFuzzer target: image decoding (image::decode_photo: PNG, JPEG with
// EXIF, WebP, TIFF) on arbitrary bytes. Any input must either decode or
// throw wgnn::Error; a decoded image must be RGB or RGBA of at most the
// sizes read_photo promises, with exactly its pixels' bytes, and must encode
// back to a PNG that decodes to the same pixels.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpu/error.h"
#include "image/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  wgnn::image::Image img;
  try {
    // A smaller pixel cap than the default keeps each input fast.
    img = wgnn::image::decode_photo(bytes, "fuzz input", 1 << 22);
  } catch (const wgnn::Error&) {
    return 0;
  }
  if ((img.channels != 3 && img.channels != 4) || img.width < 1 || img.height < 1 || img.width > wgnn::image::kMaxSide ||
      img.height > wgnn::image::kMaxSide || uint64_t(img.width) * uint64_t(img.height) > (1u << 22) ||
      img.pixels.size() != size_t(img.width) * size_t(img.height) * size_t(img.channels)) {
    std::abort();
  }
  const wgnn::image::Image back = wgnn::image::decode_photo(wgnn::image::encode_png(img), "round trip", 1 << 22);
  if (back.width != img.width || back.height != img.height || back.channels != img.channels || back.pixels != img.pixels) {
    std::abort();
  }
  return 0;
}

// EXIF orientation (libexif from Debian) and turning an image by it.
#include <fmt/format.h>
#include <libexif/exif-data.h>

#include <memory>

#include "image/image.h"

namespace wgnn::image {

int jpeg_orientation(const std::string& jpeg_bytes) {
  std::unique_ptr<ExifData, void (*)(ExifData*)> ed(
      exif_data_new_from_data(reinterpret_cast<const unsigned char*>(jpeg_bytes.data()), unsigned(jpeg_bytes.size())),
      exif_data_unref);
  if (!ed) return 1;
  // IFD0 describes the photo (IFD1, the thumbnail, may say otherwise).
  ExifEntry* e = exif_content_get_entry(ed->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
  if (e == nullptr || e->format != EXIF_FORMAT_SHORT || e->components < 1 || e->size < 2 || e->data == nullptr) return 1;
  const int o = exif_get_short(e->data, exif_data_get_byte_order(ed.get()));
  return o >= 1 && o <= 8 ? o : 1;
}

Image oriented(const Image& img, int o) {
  if (o < 1 || o > 8) throw Error(fmt::format("EXIF orientation {} is not one of 1 to 8", o));
  if (o == 1) return img;
  const int w = img.width, h = img.height, c = img.channels;
  const bool swap = o >= 5;
  Image out(swap ? h : w, swap ? w : h, c);
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;
      switch (o) {
        case 2: sx = w - 1 - x; break;
        case 3: sx = w - 1 - x; sy = h - 1 - y; break;
        case 4: sy = h - 1 - y; break;
        case 5: sx = y; sy = x; break;
        case 6: sx = y; sy = h - 1 - x; break;
        case 7: sx = w - 1 - y; sy = h - 1 - x; break;
        case 8: sx = w - 1 - y; sy = x; break;
        default: break;
      }
      for (int k = 0; k < c; ++k) out.at(x, y, k) = img.at(sx, sy, k);
    }
  }
  return out;
}

Image channels_of(const Image& img, int first, int count) {
  if (first < 0 || count < 1 || first + count > img.channels) {
    throw Error(fmt::format("channels {}..{} of a {}-channel image", first, first + count - 1, img.channels));
  }
  if (first == 0 && count == img.channels) return img;
  Image out(img.width, img.height, count);
  const size_t n = size_t(img.width) * size_t(img.height);
  for (size_t i = 0; i < n; ++i) {
    for (int k = 0; k < count; ++k) out.pixels[i * size_t(count) + size_t(k)] = img.pixels[i * size_t(img.channels) + size_t(first + k)];
  }
  return out;
}

}  // namespace wgnn::image

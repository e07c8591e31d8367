// TIFF through Debian's libtiff, read from memory with its RGBA interface
// (any photometric, bit depth and compression libtiff decodes), first page,
// turned by its Orientation tag.
#include <fmt/format.h>
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "image/decoders.h"

namespace wgnn::image::detail {
namespace {

struct Source {
  const std::string* bytes;
  uint64_t pos = 0;
  std::string error;  // libtiff's first error message
};

tmsize_t read_proc(thandle_t h, void* buf, tmsize_t n) {
  auto* s = static_cast<Source*>(h);
  const uint64_t size = s->bytes->size();
  if (n <= 0 || s->pos >= size) return 0;
  const uint64_t k = std::min<uint64_t>(uint64_t(n), size - s->pos);
  std::memcpy(buf, s->bytes->data() + s->pos, size_t(k));
  s->pos += k;
  return tmsize_t(k);
}
tmsize_t write_proc(thandle_t, void*, tmsize_t) { return -1; }
toff_t seek_proc(thandle_t h, toff_t off, int whence) {
  auto* s = static_cast<Source*>(h);
  uint64_t base = 0;
  if (whence == SEEK_CUR) base = s->pos;
  else if (whence == SEEK_END) base = s->bytes->size();
  const uint64_t to = base + uint64_t(off);
  if (to < base && whence != SEEK_SET) return toff_t(-1);
  s->pos = to;
  return to;
}
int close_proc(thandle_t) { return 0; }
toff_t size_proc(thandle_t h) { return static_cast<Source*>(h)->bytes->size(); }
int map_proc(thandle_t, void**, toff_t*) { return 0; }
void unmap_proc(thandle_t, void*, toff_t) {}

int on_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* s = static_cast<Source*>(user);
  if (s->error.empty()) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    s->error = module != nullptr && *module != '\0' ? fmt::format("{}: {}", module, buf) : std::string(buf);
  }
  return 1;
}
int on_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }  // warnings are not errors

}  // namespace

Image decode_tiff(const std::string& bytes, const std::string& what, uint64_t max_pixels) {
  Source src{&bytes, 0, {}};
  std::unique_ptr<TIFFOpenOptions, void (*)(TIFFOpenOptions*)> opts(TIFFOpenOptionsAlloc(), TIFFOpenOptionsFree);
  if (!opts) throw HostOutOfMemory(fmt::format("opening '{}'", what));
  TIFFOpenOptionsSetErrorHandlerExtR(opts.get(), on_error, &src);
  TIFFOpenOptionsSetWarningHandlerExtR(opts.get(), on_warning, &src);
  // No single allocation larger than the largest accepted RGBA image.
  TIFFOpenOptionsSetMaxSingleMemAlloc(opts.get(), tmsize_t(std::min<uint64_t>(max_pixels, uint64_t(kMaxSide) * kMaxSide) * 4 + (1 << 20)));
  auto fail = [&](const char* doing) {
    return Error(fmt::format("'{}' is a TIFF file wgnn cannot read: {} (libtiff: {})", what, doing,
                             src.error.empty() ? "no reason given" : src.error));
  };
  std::unique_ptr<TIFF, void (*)(TIFF*)> t(TIFFClientOpenExt(what.c_str(), "rm", &src, read_proc, write_proc, seek_proc,
                                                             close_proc, size_proc, map_proc, unmap_proc, opts.get()),
                                           TIFFClose);
  if (!t) throw fail("its header is invalid");
  uint32_t w = 0, h = 0;
  if (TIFFGetField(t.get(), TIFFTAG_IMAGEWIDTH, &w) != 1 || TIFFGetField(t.get(), TIFFTAG_IMAGELENGTH, &h) != 1) {
    throw fail("it has no image width or length");
  }
  check_size(w, h, what, "TIFF", max_pixels);
  if (w == 0 || h == 0) throw Error(fmt::format("'{}' is a TIFF of {}x{} pixels: empty", what, w, h));
  char emsg[1024] = "";
  if (TIFFRGBAImageOK(t.get(), emsg) != 1) {
    throw Error(fmt::format("'{}' is a TIFF wgnn cannot read: {}", what, emsg));
  }
  uint16_t extra = 0;
  uint16_t* kinds = nullptr;
  bool alpha = false, associated = false;
  if (TIFFGetField(t.get(), TIFFTAG_EXTRASAMPLES, &extra, &kinds) == 1 && extra > 0 && kinds != nullptr) {
    alpha = kinds[0] == EXTRASAMPLE_ASSOCALPHA || kinds[0] == EXTRASAMPLE_UNASSALPHA;
    associated = alpha;  // libtiff's RGBA interface premultiplies unassociated alpha too
  }
  // The rows as stored (the tag set to top-left), turned afterwards by
  // oriented(): libtiff's RGBA interface flips for orientations 2 to 4 but
  // does not transpose for 5 to 8. TIFF's values are EXIF's.
  uint16_t orientation = ORIENTATION_TOPLEFT;
  if (TIFFGetField(t.get(), TIFFTAG_ORIENTATION, &orientation) != 1 || orientation < 1 || orientation > 8) {
    orientation = ORIENTATION_TOPLEFT;
  }
  TIFFSetField(t.get(), TIFFTAG_ORIENTATION, ORIENTATION_TOPLEFT);
  std::vector<uint32_t> raster(size_t(w) * size_t(h));
  if (TIFFReadRGBAImageOriented(t.get(), w, h, raster.data(), ORIENTATION_TOPLEFT, 1) != 1) {
    throw fail("its image data is corrupt or cut short");
  }
  const int c = alpha ? 4 : 3;
  Image img(int(w), int(h), c);
  for (size_t i = 0; i < raster.size(); ++i) {
    const uint32_t p = raster[i];
    uint8_t* o = &img.pixels[i * size_t(c)];
    o[0] = uint8_t(TIFFGetR(p));
    o[1] = uint8_t(TIFFGetG(p));
    o[2] = uint8_t(TIFFGetB(p));
    if (!alpha) continue;
    const uint32_t a = TIFFGetA(p);
    o[3] = uint8_t(a);
    if (associated && a > 0 && a < 255) {
      for (int k = 0; k < 3; ++k) o[k] = uint8_t(std::min<uint32_t>(255, (uint32_t(o[k]) * 255 + a / 2) / a));
    }
  }
  return orientation == ORIENTATION_TOPLEFT ? img : oriented(img, orientation);
}

}  // namespace wgnn::image::detail

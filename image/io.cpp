#include <fmt/format.h>
#include <stb_image.h>
#include <stb_image_write.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "image/image.h"

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

Image decode_rgb(const std::string& bytes, const std::string& what) {
  if (bytes.empty()) throw Error(fmt::format("'{}' is empty, not an image", what));
  if (bytes.size() > size_t(std::numeric_limits<int>::max())) {
    throw Error(fmt::format("'{}' is {} bytes; images over 2 GiB are not read", what, bytes.size()));
  }
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int len = int(bytes.size());
  int w = 0, h = 0, c = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &c)) {
    throw Error(fmt::format("'{}' is not an image wgnn can read (PNG or JPEG; stb_image: {})", what,
                            stbi_failure_reason()));
  }
  if (w > kMaxSide || h > kMaxSide) {
    throw Error(fmt::format("'{}' is {}x{} pixels; at most {} pixels a side are accepted: scale it down first", what,
                            w, h, kMaxSide));
  }
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(data, len, &w, &h, &c, 3), stbi_image_free);
  if (!px) {
    throw Error(fmt::format("'{}' could not be decoded (stb_image: {})", what, stbi_failure_reason()));
  }
  Image img(w, h, 3);
  std::memcpy(img.pixels.data(), px.get(), img.pixels.size());
  return img;
}

Image read_rgb(const std::string& path) { return decode_rgb(read_file(path), path); }

std::string encode_png(const Image& img) {
  if (img.channels < 1 || img.channels > 4) {
    throw Error(fmt::format("a PNG holds 1 to 4 channels; the image has {}", img.channels));
  }
  if (img.width <= 0 || img.height <= 0 || img.pixels.size() != size_t(img.width) * size_t(img.height) * size_t(img.channels)) {
    throw Error(fmt::format("cannot encode a {}x{}x{} image of {} bytes", img.width, img.height, img.channels,
                            img.pixels.size()));
  }
  std::string out;
  auto append = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size_t(size));
  };
  if (!stbi_write_png_to_func(append, &out, img.width, img.height, img.channels, img.pixels.data(),
                              img.width * img.channels)) {
    throw Error(fmt::format("PNG encoding of a {}x{} image failed", img.width, img.height));
  }
  return out;
}

void write_png(const std::string& path, const Image& img) {
  const std::string bytes = encode_png(img);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  if (!out) throw Error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
}

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

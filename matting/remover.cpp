#include "matting/remover.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string_view>

#include "graph/half.h"
#include "onnx/session.h"

namespace wgnn::matting {
namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

constexpr int kISNetDefaultSize = 1024;
// The metadata key through which a model names its pre-processing.
constexpr const char* kPreprocessKey = "wgnn.preprocess";
constexpr int kMODNetDefaultSize = 512;
constexpr int kMultiple = 32;

std::string describe(const std::vector<onnx_import::ValueInfo>& vs) {
  std::vector<std::string> parts;
  for (const auto& v : vs) parts.push_back(fmt::format("'{}' {} {}", v.name, dtype_name(v.dtype), shape_str(v.shape)));
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", "));
}

int round_to_multiple(double x) { return std::max(kMultiple, int(std::lround(x / kMultiple)) * kMultiple); }

}  // namespace

Preprocess parse_preprocess(const std::string& s) {
  if (s == "auto") return Preprocess::Auto;
  if (s == "isnet") return Preprocess::ISNet;
  if (s == "modnet") return Preprocess::MODNet;
  throw Error(fmt::format("pre-processing '{}' is unknown; accepted: auto, isnet, modnet", s));
}

const char* preprocess_name(Preprocess p) {
  switch (p) {
    case Preprocess::Auto: return "auto";
    case Preprocess::ISNet: return "isnet";
    case Preprocess::MODNet: return "modnet";
  }
  return "?";
}

Remover::Remover(gpu::Context& ctx, const std::string& model_path, RemoverOptions options)
    : ctx_(ctx), options_(options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_path, ec)) {
    throw Error(std::filesystem::exists(model_path, ec)
                    ? fmt::format("model '{}' is not a file", model_path)
                    : fmt::format("model '{}': no such file", model_path));
  }
  if (options_.size != 0 && (options_.size < kMultiple || options_.size > image::kMaxSide || options_.size % kMultiple)) {
    throw Error(fmt::format("--size {}: give a multiple of {} from {} to {}", options_.size, kMultiple, kMultiple,
                            image::kMaxSide));
  }
  const auto t0 = clock::now();
  // Only the first output (the matte) is run and read back: ISNet's other
  // eleven (side outputs, feature maps) would be tens of MB a photo.
  onnx_import::LoadedModel model = onnx_import::load_model(model_path);
  // A model may say which pre-processing it needs (isnet_any_size.onnx,
  // whose height and width are free, says "isnet").
  const auto said = model.metadata.find(kPreprocessKey);
  const std::string said_preprocess = said == model.metadata.end() ? "" : said->second;
  onnx_import::SessionOptions so;
  if (!model.outputs.empty()) so.outputs = {model.outputs.front().name};
  session_ = std::make_unique<onnx_import::Session>(ctx, std::move(model), so);
  load_s_ = seconds_since(t0);

  const auto& ins = session_->inputs();
  std::vector<const onnx_import::ValueInfo*> rgb;
  for (const auto& v : ins) {
    if (v.dtype == DType::F32 && v.shape.size() == 4 && (v.shape[1] == 3 || v.shape[1] < 0) && v.shape[0] <= 1) {
      rgb.push_back(&v);
    }
  }
  if (rgb.empty()) {
    throw Error(fmt::format("model '{}' has no image input: remove-bg needs a float32 input of shape 1x3xHxW "
                            "(RGB, NCHW); the model's inputs: {}",
                            model_path, describe(ins)));
  }
  if (ins.size() > 1) {
    throw Error(fmt::format("model '{}' has {} inputs ({}); remove-bg feeds exactly one, a float32 1x3xHxW image",
                            model_path, ins.size(), describe(ins)));
  }
  input_ = rgb[0]->name;
  declared_ = rgb[0]->shape;
  const bool static_h = declared_[2] > 0, static_w = declared_[3] > 0;
  kind_ = options_.preprocess;
  if (kind_ == Preprocess::MODNet && static_h && static_w) {
    throw Error(fmt::format("model '{}': input '{}' {} has a fixed size, which is ISNet's kind; MODNet "
                            "pre-processing resizes to the photo's aspect ratio and normalizes differently, and "
                            "would give a wrong matte: use --preprocess isnet (or auto)",
                            model_path, input_, shape_str(declared_)));
  }
  if (kind_ == Preprocess::Auto && !said_preprocess.empty()) {
    if (said_preprocess == "isnet") kind_ = Preprocess::ISNet;
    else if (said_preprocess == "modnet") kind_ = Preprocess::MODNet;
    else {
      throw Error(fmt::format("model '{}': its metadata '{}' is '{}'; expected 'isnet' or 'modnet' (or give "
                              "--preprocess)",
                              model_path, kPreprocessKey, said_preprocess));
    }
  }
  if (kind_ == Preprocess::Auto) {
    if (static_h && static_w) {
      kind_ = Preprocess::ISNet;
    } else if (!static_h && !static_w) {
      kind_ = Preprocess::MODNet;
    } else {
      throw Error(fmt::format("model '{}': input '{}' {} has one fixed and one free side; pick the pre-processing "
                              "with --preprocess isnet|modnet",
                              model_path, input_, shape_str(declared_)));
    }
  }
  // A fixed-size model run at another size (--size; MODNet's aspect ratio):
  // the declared size is only the one it was exported at.
  if ((static_h || static_w) && (options_.size != 0 || kind_ == Preprocess::MODNet)) {
    session_->set_input_shape(input_, {1, 3, -1, -1});
  }
}

Remover::~Remover() = default;

InputPlan Remover::plan(int photo_w, int photo_h) const {
  if (photo_w <= 0 || photo_h <= 0) throw Error(fmt::format("an image of {}x{} pixels is empty", photo_w, photo_h));
  InputPlan p;
  p.input = input_;
  p.kind = kind_;
  const bool declared = declared_[2] > 0 && declared_[3] > 0;
  if (kind_ == Preprocess::ISNet) {
    p.norm = image::kISNetNormalization;
    if (options_.size != 0) {
      p.width = p.height = options_.size;
    } else if (declared) {
      p.width = int(declared_[3]);
      p.height = int(declared_[2]);
    } else {
      p.width = p.height = kISNetDefaultSize;
    }
  } else {
    p.norm = image::kMODNetNormalization;
    const int s = options_.size != 0 ? options_.size : kMODNetDefaultSize;
    if (photo_w >= photo_h) {
      p.height = s;
      p.width = round_to_multiple(double(s) * photo_w / photo_h);
    } else {
      p.width = s;
      p.height = round_to_multiple(double(s) * photo_h / photo_w);
    }
  }
  const uint64_t bytes = uint64_t(p.width) * uint64_t(p.height) * 3 * sizeof(float);
  const uint64_t limit = ctx_.limits().max_storage_buffer_binding_size;
  if (p.width > image::kMaxSide || p.height > image::kMaxSide || bytes > limit) {
    throw Error(fmt::format("the model input would be {}x{} ({} MiB); this device binds at most {} MiB and sides "
                            "of at most {} px are accepted: use a smaller --size",
                            p.width, p.height, bytes >> 20, limit >> 20, image::kMaxSide));
  }
  return p;
}

std::vector<std::string> model_folders(const std::string& program_dir, const Settings& settings) {
  namespace fs = std::filesystem;
  std::vector<std::string> dirs;
  auto env = [&](const char* name) { return settings.value(name); };
  if (auto home = env("WGNN_HOME"); !home.empty()) dirs.push_back((fs::path(home) / "models").string());
  if (auto xdg = env("XDG_CACHE_HOME"); !xdg.empty()) {
    dirs.push_back((fs::path(xdg) / "wgnn" / "models").string());
  } else if (auto h = env("HOME"); !h.empty()) {
    dirs.push_back((fs::path(h) / ".cache" / "wgnn" / "models").string());
  }
  if (!program_dir.empty()) {
    const fs::path dir(program_dir);
    dirs.push_back((dir / "models").string());
    dirs.push_back((dir.parent_path() / "share" / "wgnn" / "models").string());
  }
  return dirs;
}

std::string find_model(const std::vector<std::string>& folders) {
  std::error_code ec;
  for (const auto& d : folders) {
    const auto p = std::filesystem::path(d) / kDefaultModel;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return {};
}

Prepared Remover::prepare(const image::Image& photo) const {
  if (photo.channels != 3 && photo.channels != 4) {
    throw Error(fmt::format("Remover::run: needs an RGB or RGBA image; got {} channels", photo.channels));
  }
  Prepared p;
  p.rgb = image::channels_of(photo, 0, 3);
  if (photo.channels == 4) p.alpha = image::channels_of(photo, 3, 1);
  p.plan = plan(p.rgb.width, p.rgb.height);
  p.post_process = options_.post_process;
  const int w = p.plan.width, h = p.plan.height;
  HostTensor& in = p.inputs[input_] = HostTensor(DType::F32, {1, 3, h, w});
  const std::vector<float> planar = image::to_planar(p.rgb, w, h, p.plan.norm);
  std::memcpy(in.data.data(), planar.data(), in.nbytes());
  return p;
}

void Remover::rethrow_for_size(int w, int h) const {
  try {
    throw;
  } catch (const Unsupported&) {
    throw;
  } catch (const HostOutOfMemory&) {
    throw;  // not the size's fault
  } catch (const Error& e) {
    const bool resized = declared_[2] > 0 && declared_[3] > 0 && (declared_[2] != h || declared_[3] != w);
    if (!resized) throw;
    // Some exports trace their upsampling to constant sizes and only run at
    // the size they declare.
    throw Error(fmt::format("{}\nThe model declares a {}x{} input and fails at {}x{}: run it without --size{}", e.what(),
                            declared_[3], declared_[2], w, h,
                            kind_ == Preprocess::ISNet ? " (or use isnet_any_size.onnx, which scripts/setup derives)" : ""));
  }
}

bool Remover::can_submit(const Prepared& p) const {
  if (in_flight_.empty()) return true;
  return in_flight_.size() < 2 && in_flight_.back().width == p.plan.width && in_flight_.back().height == p.plan.height;
}

void Remover::submit(const Prepared& p) {
  if (!can_submit(p)) {
    throw Error(fmt::format("Remover::submit: {} photo(s) in flight{}; collect() first", in_flight_.size(),
                            in_flight_.size() < 2 ? " at another input size" : ""));
  }
  const auto t0 = clock::now();
  try {
    session_->start(p.inputs);
  } catch (...) {
    rethrow_for_size(p.plan.width, p.plan.height);
  }
  in_flight_.push_back({p.plan.width, p.plan.height, seconds_since(t0)});
}

Matte Remover::collect() {
  if (in_flight_.empty()) throw Error("Remover::collect: no photo was submitted");
  const InFlight f = in_flight_.front();
  in_flight_.pop_front();
  const int w = f.width, h = f.height;
  const auto& first = session_->outputs().front();
  {
    // Host memory for the matte from a finished photo, written in place.
    std::lock_guard<std::mutex> lock(spare_mutex_);
    if (!spare_.empty() && outputs_.find(first.name) == outputs_.end()) {
      outputs_[first.name] = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  const auto t0 = clock::now();
  try {
    session_->finish(outputs_);
  } catch (...) {
    rethrow_for_size(w, h);
  }
  Matte out;
  out.submit_s = f.submit_s;
  out.wait_s = seconds_since(t0);
  out.run_s = out.submit_s + out.wait_s;
  auto it = outputs_.find(first.name);
  if (it == outputs_.end()) throw Error(fmt::format("the model gave no output '{}'", first.name));
  const HostTensor& m = it->second;
  bool ok = m.shape.size() >= 2 && m.shape[m.shape.size() - 2] == h && m.shape.back() == w && m.numel() == int64_t(w) * h;
  if (!ok || (m.dtype != DType::F32 && m.dtype != DType::F16)) {
    throw Error(fmt::format("the model's first output '{}' is {} {}; remove-bg reads it as the matte and needs "
                            "float 1x1x{}x{} (the input's height and width)",
                            first.name, dtype_name(m.dtype), shape_str(m.shape), h, w));
  }
  out.tensor = std::move(it->second);
  outputs_.erase(it);
  return out;
}

Matte Remover::infer(const Prepared& p) {
  if (!in_flight_.empty()) {
    throw Error(fmt::format("Remover::infer: {} photo(s) submitted and not collected", in_flight_.size()));
  }
  submit(p);
  return collect();
}

Cutout Remover::finish(Prepared p, Matte m) const {
  Cutout c;
  c.plan = std::move(p.plan);
  c.run_s = m.run_s;
  const HostTensor& t = m.tensor;
  if (t.numel() != int64_t(c.plan.width) * c.plan.height || (t.dtype != DType::F32 && t.dtype != DType::F16)) {
    throw Error(fmt::format("Remover::finish: a matte of {} {} for a {}x{} input", dtype_name(t.dtype),
                            shape_str(t.shape), c.plan.width, c.plan.height));
  }
  if (t.dtype == DType::F32) {
    c.alpha = image::matte_to_alpha(std::span<const float>(t.as<float>(), size_t(t.numel())), c.plan.width,
                                    c.plan.height, p.rgb.width, p.rgb.height);
  } else {
    std::vector<float> values(size_t(t.numel()));
    const uint16_t* h16 = t.as<uint16_t>();
    for (size_t i = 0; i < values.size(); ++i) values[i] = half_to_float(h16[i]);
    c.alpha = image::matte_to_alpha(values, c.plan.width, c.plan.height, p.rgb.width, p.rgb.height);
  }
  {
    // Its memory goes back to collect() (a few kept: the photos in flight).
    std::lock_guard<std::mutex> lock(spare_mutex_);
    if (spare_.size() < 4) spare_.push_back(std::move(m.tensor));
  }
  if (p.post_process) c.alpha = image::post_process_alpha(c.alpha);
  if (p.alpha.channels == 1) c.alpha = image::multiply_alpha(c.alpha, p.alpha);
  c.rgba = image::with_alpha(p.rgb, c.alpha);
  return c;
}

Cutout Remover::run(const image::Image& photo) {
  Prepared p = prepare(photo);
  const Matte m = infer(p);
  return finish(std::move(p), m);
}

std::array<uint8_t, 4> parse_color(const std::string& s, const char* flag) {
  std::array<uint8_t, 4> c{0, 0, 0, 255};
  size_t n = 0, i = 0;
  const auto bad = [&] {
    return Error(fmt::format("{} '{}': give R,G,B or R,G,B,A, each 0 to 255 (e.g. 255,255,255 for white)", flag, s));
  };
  while (i <= s.size()) {
    const size_t j = std::min(s.find(',', i), s.size());
    const std::string part = s.substr(i, j - i);
    if (n >= 4 || part.empty() || part.size() > 3 || part.find_first_not_of("0123456789") != std::string::npos) throw bad();
    const int v = std::stoi(part);
    if (v > 255) throw bad();
    c[n++] = uint8_t(v);
    i = j + 1;
  }
  if (n < 3) throw bad();
  return c;
}

image::Image cutout_image(const Cutout& cut, bool only_mask, const std::optional<std::array<uint8_t, 4>>& bg) {
  if (only_mask) return cut.alpha;
  if (bg) return image::composite_over(cut.rgba, *bg);
  return cut.rgba;
}

}  // namespace wgnn::matting

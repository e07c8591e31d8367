// wgnn remove-bg: a photo in, a cut-out (RGBA PNG, alpha = the matte) out.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "image/image.h"
#include "matting/remover.h"
#include "tools/commands.h"

namespace wgnn::tools {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

// One progress line on stderr: "remove-bg: WHAT ..." then "done in X s". On
// a terminal it counts the seconds while it waits.
class Step {
 public:
  Step(bool quiet, std::string what) : quiet_(quiet), what_(std::move(what)), t0_(clock::now()) {
    if (quiet_) return;
    tty_ = ::isatty(STDERR_FILENO) != 0;
    fmt::print(stderr, "remove-bg: {} ...", what_);
    std::fflush(stderr);
    if (tty_) ticker_ = std::thread([this] { tick(); });
  }
  ~Step() {
    stop();
    if (!quiet_ && !done_) fmt::print(stderr, " failed\n");  // the error follows on its own line
  }
  double done() {
    const double s = std::chrono::duration<double>(clock::now() - t0_).count();
    stop();
    done_ = true;
    if (!quiet_) {
      if (tty_) fmt::print(stderr, "\rremove-bg: {} ...", what_);
      fmt::print(stderr, " {:.1f} s\n", s);
    }
    return s;
  }

 private:
  void tick() {
    std::unique_lock<std::mutex> lock(m_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) {
      const double s = std::chrono::duration<double>(clock::now() - t0_).count();
      fmt::print(stderr, "\rremove-bg: {} ... {:.0f} s", what_, s);
      std::fflush(stderr);
    }
  }
  void stop() {
    if (!ticker_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(m_);
      stopping_ = true;
    }
    cv_.notify_all();
    ticker_.join();
  }
  bool quiet_, tty_ = false, done_ = false;
  std::string what_;
  clock::time_point t0_;
  std::thread ticker_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

std::string default_model() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path dir = ec ? fs::path("models") : exe.parent_path() / "models";
  return (dir / "isnet_any_size.onnx").string();
}

// The output must be a .png in a folder that exists: checked before the
// (slow) run.
void check_output(const std::string& path, const char* flag) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  if (ext != ".png") throw Error(fmt::format("{} '{}': the output is a PNG; give a name ending in .png", flag, path));
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::is_directory(dir, ec)) {
    throw Error(fmt::format("{} '{}': the folder '{}' does not exist", flag, path, dir.string()));
  }
  if (fs::is_directory(path, ec)) throw Error(fmt::format("{} '{}' is a folder; give a file name", flag, path));
}

std::string norm_str(const image::Normalization& n) {
  if (n.mean == image::kISNetNormalization.mean && n.std == image::kISNetNormalization.std) return "(x - 128) / 256";
  return fmt::format("(x - {}) / {}", n.mean, n.std);
}

int run(const gpu::ContextOptions& context_options, const RemoveBgOptions& o, std::string* step) {
  const std::string output =
      o.output.empty() ? fs::path(o.input).stem().string() + "_cutout.png" : o.output;
  const std::string model = o.model.empty() ? default_model() : o.model;
  if (o.runs < 1) throw Error(fmt::format("--runs {}: give 1 or more", o.runs));
  check_output(output, "-o");
  if (!o.mask.empty()) {
    check_output(o.mask, "--mask");
    std::error_code e1, e2;
    const fs::path a = fs::weakly_canonical(fs::absolute(output), e1), b = fs::weakly_canonical(fs::absolute(o.mask), e2);
    if (output == o.mask || (!e1 && !e2 && a == b)) {
      throw Error(fmt::format("-o '{}' and --mask '{}' name the same file: one would overwrite the other; give two "
                              "names",
                              output, o.mask));
    }
  }
  if (o.max_pixels == 0) throw Error("--max-pixels 0: give the largest photo to accept, in pixels (width x height)");
  std::error_code ec;
  if (!fs::is_regular_file(model, ec)) {
    if (o.model.empty()) {
      throw Error(fmt::format("no model at '{}': scripts/setup fetches ISNet there; or give --model FILE", model));
    }
    throw Error(fs::exists(model, ec) ? fmt::format("model '{}' is not a file", model)
                                      : fmt::format("model '{}': no such file", model));
  }
  if (o.size != 0 && (o.size < 32 || o.size % 32 != 0)) {
    throw Error(fmt::format("--size {}: give a multiple of 32 (ISNet: 1024 by default; 512 or 320 are faster)", o.size));
  }
  matting::RemoverOptions ro;
  ro.preprocess = matting::parse_preprocess(o.preprocess);
  ro.size = o.size;

  *step = fmt::format("reading the photo '{}'", o.input);
  const image::Image photo = image::read_rgb(o.input, o.max_pixels);
  auto say = [&](const std::string& line) {
    if (!o.quiet) fmt::print(stderr, "remove-bg: {}\n", line);
  };
  say(fmt::format("{}: {}x{}", o.input, photo.width, photo.height));

  gpu::Context ctx(context_options);
  const auto& a = ctx.adapter();
  const bool cpu = a.adapter_type == "CPU";
  say(fmt::format("adapter {} ({}, {}){}", a.name, a.backend, a.adapter_type,
                  cpu ? ": the GPU work runs on the CPU, expect minutes for a large model" : ""));

  const double model_mib = double(fs::file_size(model, ec)) / double(1 << 20);
  *step = fmt::format("loading the model '{}'", model);
  Step load(o.quiet, fmt::format("loading {} ({:.1f} MiB)", fs::path(model).filename().string(), ec ? 0.0 : model_mib));
  matting::Remover remover(ctx, model, ro);
  load.done();
  const matting::InputPlan plan = remover.plan(photo.width, photo.height);
  say(fmt::format("{} pre-processing: input '{}' {}x{}, RGB {}", matting::preprocess_name(plan.kind), plan.input,
                  plan.width, plan.height, norm_str(plan.norm)));

  *step = fmt::format("running the model on {}x{} pixels", photo.width, photo.height);
  Step first(o.quiet, "first run (builds the graph and compiles its shaders)");
  matting::Cutout cut = remover.run(photo);
  first.done();
  const double first_s = cut.run_s;
  std::vector<double> steady;
  for (int r = 1; r < o.runs; ++r) {
    Step again(o.quiet, fmt::format("run {} of {}", r + 1, o.runs));
    cut = remover.run(photo);
    again.done();
    steady.push_back(cut.run_s);
  }

  *step = fmt::format("writing '{}'", output);
  image::write_png(output, cut.rgba);
  if (!o.mask.empty()) {
    *step = fmt::format("writing '{}'", o.mask);
    image::write_png(o.mask, cut.alpha);
  }
  say(fmt::format("wrote {} ({}x{} RGBA, alpha = matte){}", output, photo.width, photo.height,
                  o.mask.empty() ? "" : fmt::format(" and {} (the matte, gray)", o.mask)));

  std::string line = fmt::format("load {:.2f} s, first run {:.2f} s", remover.load_s(), first_s);
  if (!steady.empty()) {
    std::sort(steady.begin(), steady.end());
    line += fmt::format(", steady run {:.2f} s", steady[steady.size() / 2]);
    if (steady.size() > 1) line += fmt::format(" (median of {})", steady.size());
  }
  fmt::print("{}: {} ({}, {}x{} input)\n", output, line, a.name, plan.width, plan.height);
  return 0;
}

}  // namespace

int remove_bg(const gpu::ContextOptions& context_options, const RemoveBgOptions& o) {
  std::string step = "checking the arguments";
  try {
    return run(context_options, o, &step);
  } catch (const std::bad_alloc&) {
    throw HostOutOfMemory(step);
  }
}

}  // namespace wgnn::tools

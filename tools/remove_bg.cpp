// wgnn remove-bg: photos in, cut-outs (RGBA PNG, alpha = the matte) out:
// one photo, several, or folders, with the model loaded once.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <future>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "image/image.h"
#include "image/matte.h"
#include "matting/remover.h"
#include "tools/commands.h"
#include "tools/cutout_settings.h"
#include "util/file.h"
#include "util/thread_pool.h"

namespace wgnn::tools {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

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

// The folder of an output file takes new files: checked before the run.
void check_writable(const std::string& path, const char* flag) {
  try {
    util::check_folder_writable(fs::path(path).parent_path().string());
  } catch (const Error& e) {
    throw Error(fmt::format("{} '{}': {}", flag, path, e.what()));
  }
}

std::string norm_str(const image::Normalization& n) {
  if (n.mean == image::kISNetNormalization.mean && n.std == image::kISNetNormalization.std) return "(x - 128) / 256";
  return fmt::format("(x - {}) / {}", n.mean, n.std);
}

// The readable image extensions a folder yields (lower case), and the
// outputs' own suffixes (_cutout.png, _mask.png), which a folder scan passes
// over.
bool is_photo_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  static const char* const kExts[] = {".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff"};
  if (std::find_if(std::begin(kExts), std::end(kExts), [&](const char* e) { return ext == e; }) == std::end(kExts)) {
    return false;
  }
  const std::string name = p.filename().string();
  for (const std::string suffix : {"_cutout.png", "_mask.png"}) {
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return false;
    }
  }
  return true;
}

struct Job {
  std::string input;   // "-": stdin
  std::string output;  // "-": stdout
};

std::string output_name(const fs::path& input, const RemoveBgOptions& o) {
  return input.stem().string() + (o.only_mask ? "_mask.png" : "_cutout.png");
}

// The photos of a folder, sorted, as paths relative to it.
std::vector<fs::path> scan(const fs::path& dir, bool recursive) {
  std::vector<fs::path> found;
  std::error_code ec;
  auto take = [&](const fs::directory_entry& e) {
    std::error_code e2;
    if (e.is_regular_file(e2) && is_photo_name(e.path())) found.push_back(fs::relative(e.path(), dir, e2));
  };
  if (recursive) {
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      take(*it);
    }
  } else {
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) take(*it);
  }
  if (ec) throw Error(fmt::format("cannot list the folder '{}': {}", dir.string(), ec.message()));
  std::sort(found.begin(), found.end());
  return found;
}

// The photos to cut out and where each goes. One input that is a file (or
// "-"): -o names the output file (or "-", or a folder that exists). Else -o
// names the output folder (made if missing); a file given by name goes to
// OUT_DIR/STEM_cutout.png, a file found in a folder keeps its folder below
// that one (OUT_DIR/SUB/STEM_cutout.png). A photo given twice, two photos
// with one output, and an output that is a photo are refused before
// anything runs.
void plan_many(const RemoveBgOptions& o, std::vector<Job>* jobs);

std::vector<Job> plan_jobs(const RemoveBgOptions& o, bool* single) {
  if (o.inputs.empty()) throw Error("give a photo, several, or a folder");
  std::error_code ec;
  const bool has_stdin = std::find(o.inputs.begin(), o.inputs.end(), "-") != o.inputs.end();
  if (has_stdin && o.inputs.size() > 1) throw Error("'-' (the photo from stdin) must be the only input");
  *single = o.inputs.size() == 1 && (has_stdin || !fs::is_directory(o.inputs[0], ec));
  std::vector<Job> jobs;
  if (*single) {
    const std::string& in = o.inputs[0];
    std::string out = o.output;
    if (out.empty()) {
      if (has_stdin) throw Error("the photo comes from stdin: give -o FILE.png, or -o - for stdout");
      out = output_name(in, o);
    } else if (out != "-" && fs::is_directory(out, ec)) {
      out = (fs::path(out) / output_name(has_stdin ? fs::path("stdin") : fs::path(in), o)).string();
    }
    jobs.push_back({in, out});
  } else {
    plan_many(o, &jobs);
  }
  // No output may overwrite a photo (its own, or another of the run).
  std::map<std::string, std::string> seen;  // photo (normalized) -> as given
  auto norm = [&](const std::string& p) {
    std::error_code e;
    const fs::path n = fs::weakly_canonical(fs::absolute(p), e).lexically_normal();
    return e ? p : n.string();
  };
  for (const auto& j : jobs) {
    if (j.input == "-") continue;
    auto [it, fresh] = seen.emplace(norm(j.input), j.input);
    if (!fresh) {
      throw Error(it->second == j.input ? fmt::format("'{}' is given twice", j.input)
                                        : fmt::format("'{}' is given twice (also as '{}')", j.input, it->second));
    }
  }
  std::map<std::string, std::string> owner;  // output (normalized) -> its photo
  for (const auto& j : jobs) {
    if (j.output == "-") continue;
    const std::string key = norm(j.output);
    if (auto p = seen.find(key); p != seen.end()) {
      throw Error(fmt::format("the output for '{}' would be '{}', which is the photo '{}' itself: give another -o",
                              j.input, j.output, p->second));
    }
    auto [it, fresh] = owner.emplace(key, j.input);
    if (!fresh) {
      throw Error(fmt::format("'{}' and '{}' would both be cut out to '{}': rename one, or run them with different "
                              "-o folders",
                              it->second, j.input, j.output));
    }
  }
  return jobs;
}

// Several photos or folders: the jobs, outputs under the -o folder.
void plan_many(const RemoveBgOptions& o, std::vector<Job>* jobs_out) {
  std::vector<Job>& jobs = *jobs_out;
  std::error_code ec;
  if (o.output == "-") throw Error("-o -: stdout takes one photo; give an output folder for several");
  const fs::path out_dir = o.output.empty() ? fs::path(".") : fs::path(o.output);
  std::string ext = out_dir.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  if (ext == ".png" && !fs::is_directory(out_dir, ec)) {
    if (o.inputs.size() == 1) {
      throw Error(fmt::format("'{}' is a folder: its photos' cut-outs go to a folder, and -o '{}' names a PNG",
                              o.inputs[0], o.output));
    }
    throw Error(fmt::format("-o '{}': with several photos -o names a folder, not a PNG", o.output));
  }
  for (const auto& in : o.inputs) {
    if (fs::is_directory(in, ec)) {
      const auto found = scan(in, o.recursive);
      if (found.empty()) {
        throw Error(fmt::format("the folder '{}' holds no photos (.png .jpg .jpeg .webp .tif .tiff){}", in,
                                o.recursive ? "" : "; --recursive reads its subfolders"));
      }
      for (const auto& rel : found) {
        jobs.push_back({(fs::path(in) / rel).string(), (out_dir / rel.parent_path() / output_name(rel, o)).string()});
      }
    } else {
      jobs.push_back({in, (out_dir / output_name(in, o)).string()});
    }
  }
}

std::string fmt_duration(double s) {
  if (s < 60) return fmt::format("{:.0f} s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", int(s) / 60, int(s) % 60);
  return fmt::format("{}h{:02d}m", int(s) / 3600, (int(s) / 60) % 60);
}

class Batch {
 public:
  Batch(const gpu::ContextOptions& context_options, const RemoveBgOptions& o, std::string* step)
      : context_options_(context_options), o_(o), step_(step) {}

  int run() {
    if (o_.runs < 1) throw Error(fmt::format("--runs {}: give 1 or more", o_.runs));
    if (o_.threads < 0 || o_.threads > kMaxThreads) {
      throw Error(fmt::format("--threads {}: give 1 to {} (0: automatic)", o_.threads, kMaxThreads));
    }
    if (o_.max_pixels == 0) throw Error("--max-pixels 0: give the largest photo to accept, in pixels (width x height)");
    if (o_.size != 0 && (o_.size < 32 || o_.size % 32 != 0)) {
      throw Error(fmt::format("--size {}: give a multiple of 32 (ISNet: 1024 by default; 512 or 320 are faster)",
                              o_.size));
    }
    (void)matting::parse_preprocess(o_.preprocess);
    if (!o_.bg_color.empty()) bg_ = parse_color(o_.bg_color);
    if (o_.only_mask && bg_) throw Error("--only-mask writes the matte, --bg-color a composite: give one of them");
    if (o_.only_mask && !o_.mask.empty()) throw Error("--only-mask writes the matte already; --mask is for the cut-out's");
    bool single = false;
    jobs_ = plan_jobs(o_, &single);
    model_choice_ = choose_model(o_.model);
    model_ = model_choice_.path;
    kind_ = preprocess_for(model_choice_, o_.preprocess);
    if (single) return run_single(jobs_[0]);
    if (o_.runs != 1) throw Error("--runs times one photo; give a single photo with it");
    if (!o_.mask.empty()) throw Error("--mask names one file; give a single photo with it");
    std::error_code ec;
    const fs::path out_dir = o_.output.empty() ? fs::path(".") : fs::path(o_.output);
    fs::create_directories(out_dir, ec);
    if (ec) throw Error(fmt::format("-o '{}': cannot make the folder: {}", out_dir.string(), ec.message()));
    try {
      util::check_folder_writable(out_dir.string());
    } catch (const Error& e) {
      throw Error(fmt::format("-o '{}': {}", out_dir.string(), e.what()));
    }
    return run_many();
  }

 private:
  void say(const std::string& line) const {
    if (!o_.quiet) fmt::print(stderr, "remove-bg: {}\n", line);
  }

  image::Image read(const std::string& input) const {
    if (input != "-") return image::read_photo(input, o_.max_pixels);
    if (::isatty(STDIN_FILENO)) throw Error("'-' reads the photo from stdin, which is a terminal: pipe a photo in");
    return image::decode_photo(util::read_all(STDIN_FILENO, "stdin", size_t(1) << 30), "stdin", o_.max_pixels);
  }

  // The model, loaded at the first photo that was read.
  matting::Remover& remover() {
    if (remover_) return *remover_;
    loading_ = true;
    *step_ = "starting the GPU";
    ctx_ = std::make_unique<gpu::Context>(context_options_);
    const auto& a = ctx_->adapter();
    say(fmt::format("adapter {} ({}, {}){}", a.name, a.backend, a.adapter_type,
                    a.adapter_type == "CPU" ? ": the GPU work runs on the CPU, expect minutes for a large model" : ""));
    std::error_code ec;
    const double mib = double(fs::file_size(model_, ec)) / double(1 << 20);
    *step_ = fmt::format("loading the model '{}'", model_);
    Step load(o_.quiet, fmt::format("loading {} ({:.1f} MiB)", fs::path(model_).filename().string(), ec ? 0.0 : mib));
    matting::RemoverOptions ro;
    ro.preprocess = kind_;
    ro.size = o_.size;
    ro.post_process = o_.post_process;
    remover_ = std::make_unique<matting::Remover>(*ctx_, model_, ro);
    load.done();
    loading_ = false;
    return *remover_;
  }

  // What a photo's output holds: the cut-out (RGBA), the matte alone
  // (--only-mask, gray) or the cut-out over a colour (--bg-color).
  image::Image result(const matting::Cutout& cut) const { return cutout_image(cut, o_.only_mask, bg_); }

  void write(const std::string& output, const image::Image& img) const {
    *step_ = fmt::format("writing '{}'", output);
    if (output == "-") {
      util::write_all(STDOUT_FILENO, image::encode_png(img), "the PNG to stdout");
      return;
    }
    image::write_png(output, img);
  }

  int run_single(const Job& job) {
    const std::string& output = job.output;
    if (output == "-") {
      if (::isatty(STDOUT_FILENO)) throw Error("-o -: stdout is a terminal; pipe it into a file or a program");
    } else {
      check_output(output, "-o");
      check_writable(output, "-o");
    }
    if (!o_.mask.empty()) {
      check_output(o_.mask, "--mask");
      check_writable(o_.mask, "--mask");
      std::error_code e1, e2;
      const fs::path a = fs::weakly_canonical(fs::absolute(output), e1), b = fs::weakly_canonical(fs::absolute(o_.mask), e2);
      if (output == o_.mask || (!e1 && !e2 && a == b)) {
        throw Error(fmt::format("-o '{}' and --mask '{}' name the same file: one would overwrite the other; give two "
                                "names",
                                output, o_.mask));
      }
    }
    *step_ = fmt::format("reading the photo '{}'", job.input);
    const image::Image photo = read(job.input);
    say(fmt::format("{}: {}x{}{}", job.input == "-" ? "stdin" : job.input, photo.width, photo.height,
                    photo.channels == 4 ? " with alpha" : ""));
    matting::Remover& r = remover();
    const matting::InputPlan plan = r.plan(photo.width, photo.height);
    say(fmt::format("{} pre-processing: input '{}' {}x{}, RGB {}", matting::preprocess_name(plan.kind), plan.input,
                    plan.width, plan.height, norm_str(plan.norm)));

    *step_ = fmt::format("running the model on {}x{} pixels", photo.width, photo.height);
    Step first(o_.quiet, "first run (builds the graph and compiles its shaders)");
    matting::Cutout cut = r.run(photo);
    first.done();
    const double first_s = cut.run_s;
    std::vector<double> steady;
    for (int i = 1; i < o_.runs; ++i) {
      Step again(o_.quiet, fmt::format("run {} of {}", i + 1, o_.runs));
      cut = r.run(photo);
      again.done();
      steady.push_back(cut.run_s);
    }
    write(output, result(cut));
    if (!o_.mask.empty()) write(o_.mask, cut.alpha);
    const char* kind = o_.only_mask ? "gray, the matte" : !bg_ ? "RGBA, alpha = matte"
                       : (*bg_)[3] == 255 ? "RGB, over the --bg-color" : "RGBA, over the --bg-color";
    say(fmt::format("wrote {} ({}x{} {}){}", output == "-" ? "the PNG to stdout" : output, photo.width, photo.height,
                    kind, o_.mask.empty() ? "" : fmt::format(" and {} (the matte, gray)", o_.mask)));

    std::string line = fmt::format("load {:.2f} s, first run {:.2f} s", r.load_s(), first_s);
    if (!steady.empty()) {
      std::sort(steady.begin(), steady.end());
      line += fmt::format(", steady run {:.2f} s", steady[steady.size() / 2]);
      if (steady.size() > 1) line += fmt::format(" (median of {})", steady.size());
    }
    const auto& a = ctx_->adapter();
    // With the PNG on stdout, the timing line goes to stderr.
    if (output != "-") {
      fmt::print("{}: {} ({}, {}x{} input)\n", output, line, a.name, plan.width, plan.height);
    } else if (!o_.quiet) {
      fmt::print(stderr, "remove-bg: {} ({}, {}x{} input)\n", line, a.name, plan.width, plan.height);
    }
    return 0;
  }

  // What a photo's host work gave (decode and pre-processing on a worker).
  struct Decoded {
    matting::Prepared prepared;
    clock::time_point started;
    double decode_s = 0, pre_s = 0;
  };
  // A photo in the order of the run: skipped, failed, or its last step (the
  // cut-out encoded and written) on a worker.
  struct Pending {
    size_t index = 0;
    bool skipped = false;
    bool on_gpu = false;  // submitted and not collected: `written` is set after that
    std::string error;    // failed before its last step
    std::future<void> written;
    clock::time_point started;
    int width = 0, height = 0;
  };
  // Where one photo's time went, in seconds (-1: the stage was not reached).
  struct Stages {
    double decode = -1, pre = -1, wait_input = -1, submit = -1, wait_gpu = -1, post = -1, encode = -1;
  };

  // Several photos, as a pipeline: workers decode and pre-process the photos
  // ahead of the GPU (a bounded window of them); this thread only submits
  // each photo's run and collects its matte, keeping the next photo queued
  // on the GPU behind the one running (Remover::submit/collect: its upload
  // and submission overlap the GPU's work); workers turn each matte into
  // the cut-out and write it while the GPU runs the next. Progress lines and
  // the summary keep the order of the photos; a photo's failure is its own.
  int run_many() {
    const size_t n = jobs_.size();
    size_t done = 0, skipped = 0;
    std::vector<std::pair<std::string, std::string>> failed;  // photo, reason
    const auto t0 = clock::now();
    std::optional<clock::time_point> first_start;
    size_t worked = 0;  // photos run or failed (not skipped), for the rate
    const int threads = worker_threads();
    say(fmt::format("{} photos, {} host thread{}", n, threads, threads == 1 ? "" : "s"));
    std::vector<Stages> stages(n);

    std::vector<char> skip(n, 0);
    for (size_t i = 0; i < n; ++i) {
      std::error_code ec;
      skip[i] = !o_.overwrite && fs::exists(jobs_[i].output, ec);
    }
    // The model is loaded when the first photo has been read (a run whose
    // photos all fail or are skipped loads none); the workers' pre-processing
    // waits for it.
    std::promise<const matting::Remover*> model_promise;
    std::shared_future<const matting::Remover*> model = model_promise.get_future().share();
    bool model_set = false;
    util::ThreadPool pool(threads);
    struct ModelGuard {  // a run that ends early still frees the waiting workers
      std::promise<const matting::Remover*>& p;
      bool& set;
      ~ModelGuard() {
        if (!set) p.set_exception(std::make_exception_ptr(Error("the run stopped before the model was loaded")));
      }
    } guard{model_promise, model_set};

    // Photos decoded ahead of the GPU, and photos past the GPU not yet
    // written: what bounds the memory in use.
    const size_t window = size_t(2 * threads + 2);
    std::vector<std::future<Decoded>> decoded(n);
    std::vector<std::future<void>> read_done(n);  // the photo read (the model may wait on it)
    size_t next = 0;
    auto submit_ahead = [&](size_t upto) {
      for (; next < n && next < upto; ++next) {
        if (skip[next]) continue;
        auto read = std::make_shared<std::promise<void>>();
        read_done[next] = read->get_future();
        const std::string input = jobs_[next].input;
        decoded[next] = pool.submit([this, input, read, model] {
          Decoded d;
          d.started = clock::now();
          image::Image photo;
          try {
            photo = this->read(input);
          } catch (...) {
            read->set_exception(std::current_exception());
            throw;
          }
          read->set_value();
          d.decode_s = seconds_since(d.started);
          const matting::Remover* r = model.get();
          const auto t = clock::now();
          d.prepared = r->prepare(photo);
          d.pre_s = seconds_since(t);
          return d;
        });
      }
    };

    std::deque<Pending> pending;
    std::vector<double> model_s;  // each photo's time on this thread in the Remover (submit + collect)
    auto report = [&](Pending& p) {
      const Job& job = jobs_[p.index];
      const std::string head = fmt::format("[{}/{}] {}", p.index + 1, n, job.input);
      if (p.skipped) {
        ++skipped;
        say(fmt::format("{}: skipped, '{}' exists (--overwrite redoes it)", head, job.output));
        return;
      }
      ++worked;
      std::string error = p.error;
      if (error.empty()) {
        try {
          p.written.get();
        } catch (const std::bad_alloc&) {
          error = fmt::format("out of host memory while writing '{}'", job.output);
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      if (!error.empty()) {
        failed.emplace_back(job.input, error);
        if (!o_.quiet) fmt::print(stderr, "remove-bg: {}: FAILED: {}\n", head, error);
        return;
      }
      ++done;
      const double spent = std::chrono::duration<double>(clock::now() - *first_start).count();
      const double rate = double(worked) / std::max(spent, 1e-9);
      const size_t left = n - p.index - 1;
      say(fmt::format("{} {}x{} -> {} {:.2f} s ({:.1f} photos/s, ETA {})", head, p.width, p.height, job.output,
                      std::chrono::duration<double>(clock::now() - p.started).count(), rate,
                      fmt_duration(double(left) / std::max(rate, 1e-9))));
    };
    // Reports the photos at the front that are finished; waits while more
    // than `keep` are outstanding, but never for a photo still on the GPU
    // (this thread collects it).
    auto drain = [&](size_t keep) {
      while (!pending.empty()) {
        Pending& p = pending.front();
        const bool ready = p.skipped || !p.error.empty() ||
                           (!p.on_gpu && p.written.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
        if (!ready && (pending.size() <= keep || p.on_gpu)) break;
        report(p);
        pending.pop_front();
      }
    };

    // Photos submitted to the GPU and not collected, oldest first (at most
    // two: one running, one queued behind it).
    struct Flight {
      Pending* pending;  // in `pending` (a deque: the reference stays valid)
      std::shared_ptr<matting::Prepared> prepared;
      std::shared_ptr<std::promise<void>> written;
      std::string output;
    };
    std::deque<Flight> flight;
    size_t queued = 0;  // photos submitted while another was on the GPU
    // The oldest photo on the GPU: its matte collected, its cut-out made and
    // written on a worker.
    auto collect_one = [&] {
      Flight f = std::move(flight.front());
      flight.pop_front();
      Pending& p = *f.pending;
      const size_t index = p.index;
      *step_ = fmt::format("running the model on '{}' ({}x{} pixels)", jobs_[index].input, p.width, p.height);
      std::optional<matting::Matte> matte;
      try {
        matte = remover_->collect();
      } catch (const gpu::GpuError&) {
        throw;
      } catch (const Unsupported&) {
        throw;
      } catch (const std::bad_alloc&) {
        f.written->set_exception(std::make_exception_ptr(
            Error(fmt::format("out of host memory while running '{}'", jobs_[index].input))));
      } catch (const Error&) {
        f.written->set_exception(std::current_exception());
      }
      p.on_gpu = false;
      if (!matte) return;
      model_s.push_back(matte->run_s);
      stages[index].submit = matte->submit_s;
      stages[index].wait_gpu = matte->wait_s;
      auto m = std::make_shared<matting::Matte>(std::move(*matte));
      pool.submit([this, f, m, index, &stages] {
        try {
          const auto ta = clock::now();
          const matting::Cutout cut = remover_->finish(std::move(*f.prepared), std::move(*m));
          stages[index].post = seconds_since(ta);
          const auto tb = clock::now();
          const fs::path parent = fs::path(f.output).parent_path();
          std::error_code ec;
          if (!parent.empty()) fs::create_directories(parent, ec);
          if (ec) throw Error(fmt::format("cannot make the folder '{}': {}", parent.string(), ec.message()));
          image::write_png(f.output, result(cut));
          stages[index].encode = seconds_since(tb);
          f.written->set_value();
        } catch (...) {
          f.written->set_exception(std::current_exception());
        }
      });
    };

    for (size_t i = 0; i < n; ++i) {
      submit_ahead(i + window);
      Pending p;
      p.index = i;
      if (skip[i]) {
        p.skipped = true;
        pending.push_back(std::move(p));
        drain(window);
        continue;
      }
      const Job& job = jobs_[i];
      p.started = clock::now();
      if (!first_start) first_start = p.started;
      try {
        if (!model_set) {
          read_done[i].get();  // throws the photo's read error
          *step_ = fmt::format("loading the model '{}'", model_);
          const matting::Remover* r = &remover();
          model_set = true;
          model_promise.set_value(r);
        }
        const auto tw = clock::now();
        Decoded d = decoded[i].get();
        stages[i].wait_input = seconds_since(tw);
        stages[i].decode = d.decode_s;
        stages[i].pre = d.pre_s;
        p.started = d.started;
        p.width = d.prepared.rgb.width;
        p.height = d.prepared.rgb.height;
        auto prepared = std::make_shared<matting::Prepared>(std::move(d.prepared));
        // Behind the photo on the GPU only at the same input size.
        while (!flight.empty() && !remover_->can_submit(*prepared)) collect_one();
        *step_ = fmt::format("running the model on '{}' ({}x{} pixels)", job.input, p.width, p.height);
        remover_->submit(*prepared);
        if (!flight.empty()) ++queued;
        prepared->inputs.clear();  // uploaded: its memory is not needed while the photo is in flight
        auto written = std::make_shared<std::promise<void>>();
        p.written = written->get_future();
        p.on_gpu = true;
        pending.push_back(std::move(p));
        flight.push_back({&pending.back(), prepared, written, job.output});
        // One photo runs while the next waits queued behind it
        // (WGNN_QUEUE_RUNS=0: each photo collected before the next is
        // submitted, for comparison).
        static const bool queue_runs = [] {
          const char* e = std::getenv("WGNN_QUEUE_RUNS");
          return !(e && std::string_view(e) == "0");
        }();
        if (flight.size() == 2 || !queue_runs) collect_one();
        drain(window);
        continue;
      } catch (const gpu::GpuError&) {
        throw;  // the device, not the photo: every later photo would fail the same way
      } catch (const Unsupported&) {
        throw;  // the model, not the photo
      } catch (const std::bad_alloc&) {
        if (loading_) throw;
        p.error = fmt::format("out of host memory while reading or running '{}'", job.input);
      } catch (const Error& e) {
        if (loading_) throw;  // the GPU or the model, not the photo
        p.error = e.what();
      }
      pending.push_back(std::move(p));
      drain(window);
    }
    while (!flight.empty()) collect_one();
    drain(0);

    const double total = std::chrono::duration<double>(clock::now() - t0).count();
    if (!o_.quiet || !failed.empty()) {
      fmt::print(stderr, "remove-bg: {} done, {} skipped, {} failed, of {} photos in {}\n", done, skipped,
                 failed.size(), n, fmt_duration(total));
      if (!o_.quiet && !model_s.empty()) {
        // How busy the GPU thread was: near 100%, the host work keeps up.
        double sum = 0;
        for (double v : model_s) sum += v;
        const double first = model_s.front();
        std::vector<double> later(model_s.begin() + 1, model_s.end());
        std::sort(later.begin(), later.end());
        const double spent = std::chrono::duration<double>(clock::now() - *first_start).count();
        fmt::print(stderr,
                   "remove-bg: the model ran {} photos in {:.2f} s ({:.0f}% of the {:.2f} s since the first photo; "
                   "first run {:.2f} s{}), {:.2f} photos/s after the first; {} queued behind the photo on the GPU\n",
                   model_s.size(), sum, 100 * sum / std::max(spent, 1e-9), spent, first,
                   later.empty() ? "" : fmt::format(", then a median of {:.1f} ms", 1e3 * later[later.size() / 2]),
                   later.empty() ? 0.0 : double(later.size()) / std::max(spent - first, 1e-9), queued);
        fmt::print(stderr, "remove-bg: {}\n", stage_summary(stages));
      }
      for (const auto& [photo, why] : failed) {
        // Most reasons name the photo already.
        const bool named = why.find(photo) != std::string::npos;
        fmt::print(stderr, "remove-bg: failed: {}{}\n", named ? "" : photo + ": ", why);
      }
    }
    return failed.empty() ? 0 : 1;
  }

  // The per-photo medians of each stage (workers: decode, pre-processing,
  // post-processing, PNG encode and write; the GPU thread: waiting for the
  // decoded photo, submitting, waiting for the GPU and reading back). The
  // first photo's GPU stages (the graph built, shaders compiled) are left
  // out of theirs.
  static std::string stage_summary(const std::vector<Stages>& stages) {
    auto median_ms = [&](double Stages::*field, bool skip_first) {
      std::vector<double> v;
      bool first = true;
      for (const Stages& st : stages) {
        if (st.*field < 0) continue;
        if (skip_first && first) {
          first = false;
          continue;
        }
        first = false;
        v.push_back(st.*field);
      }
      if (v.empty()) return std::string("-");
      std::sort(v.begin(), v.end());
      return fmt::format("{:.1f}", 1e3 * v[v.size() / 2]);
    };
    return fmt::format(
        "per photo, median ms: decode {}, pre-process {} (workers); wait for input {}, submit {}, wait for the GPU "
        "{} (GPU thread, after the first); post-process {}, encode and write {} (workers)",
        median_ms(&Stages::decode, false), median_ms(&Stages::pre, false), median_ms(&Stages::wait_input, true),
        median_ms(&Stages::submit, true), median_ms(&Stages::wait_gpu, true), median_ms(&Stages::post, false),
        median_ms(&Stages::encode, false));
  }

  // --threads, or the cores less two (the GPU thread and the driver's),
  // from 1 to kMaxThreads (util/file.h cleans up after at most 16 writers at
  // once).
  static constexpr int kMaxThreads = 16;
  int worker_threads() const {
    if (o_.threads > 0) return o_.threads;
    const int cores = int(std::thread::hardware_concurrency());
    return std::clamp(cores - 2, 1, kMaxThreads);
  }

  const gpu::ContextOptions& context_options_;
  const RemoveBgOptions& o_;
  std::string* step_;
  std::vector<Job> jobs_;
  ModelChoice model_choice_;
  std::string model_;
  matting::Preprocess kind_ = matting::Preprocess::Auto;
  std::unique_ptr<gpu::Context> ctx_;
  std::unique_ptr<matting::Remover> remover_;
  bool loading_ = false;  // in remover(): a failure there stops the run
  std::optional<std::array<uint8_t, 4>> bg_;  // --bg-color
};

}  // namespace

int remove_bg(const gpu::ContextOptions& context_options, const RemoveBgOptions& o) {
  std::string step = "checking the arguments";
  try {
    util::remove_temp_files_on_signal();
    return Batch(context_options, o, &step).run();
  } catch (const std::bad_alloc&) {
    throw HostOutOfMemory(step);
  }
}

}  // namespace wgnn::tools

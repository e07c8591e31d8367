// wgnn serve: background removal over HTTP with the model loaded once.
//   POST /remove-bg   the photo (the request body, or a multipart form's
//                     file), the cut-out PNG back; query parameters
//                     only_mask, post_process, bg_color=R,G,B[,A]
//   GET  /health      JSON: the model, the adapter, the queue
//   GET  /            a page to drop a photo on (serve_page.cpp)
// One thread owns the GPU and runs the model on one photo after another;
// the HTTP threads decode, pre-process, and encode the PNGs beside it. At
// most --queue requests are admitted at once; more get 503 at once.
#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "image/image.h"
#include "matting/remover.h"
#include "tools/commands.h"
#include "tools/cutout_settings.h"
#include "tools/serve_page.h"
#include "util/file.h"

namespace wgnn::tools {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

// The thread that owns the GPU: it makes the Context and the Remover, runs
// the model once on a blank photo (the first run builds the graph and
// compiles the shaders), then runs the photos it is handed in order.
class GpuRunner {
 public:
  GpuRunner(const gpu::ContextOptions& co, const std::string& model, const matting::RemoverOptions& ro) {
    std::promise<void> ready;
    auto started = ready.get_future();
    thread_ = std::thread([this, co, model, ro, &ready] {
      try {
        ctx_ = std::make_unique<gpu::Context>(co);
        adapter_ = ctx_->adapter().name;
        remover_ = std::make_unique<matting::Remover>(*ctx_, model, ro);
        image::Image blank(64, 64, 3);
        std::fill(blank.pixels.begin(), blank.pixels.end(), uint8_t(128));
        const auto t0 = clock::now();
        const matting::Prepared p = remover_->prepare(blank);
        (void)remover_->infer(p);
        warm_s_ = seconds_since(t0);
        ready.set_value();
      } catch (...) {
        ready.set_exception(std::current_exception());
        return;
      }
      loop();
    });
    try {
      started.get();
    } catch (...) {
      thread_.join();
      throw;
    }
  }
  ~GpuRunner() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
    for (auto& j : queue_) j->result.set_exception(std::make_exception_ptr(Error("the server is stopping")));
  }

  const matting::Remover& remover() const { return *remover_; }
  const std::string& adapter() const { return adapter_; }
  double load_s() const { return remover_->load_s(); }
  double warm_s() const { return warm_s_; }
  std::string broken() const {
    std::lock_guard<std::mutex> lock(m_);
    return broken_;
  }

  // The matte of a prepared photo; a photo still waiting at `deadline` is
  // not run (its future throws).
  std::future<matting::Matte> submit(std::shared_ptr<const matting::Prepared> p, clock::time_point deadline) {
    auto job = std::make_shared<Job>();
    job->prepared = std::move(p);
    job->deadline = deadline;
    auto f = job->result.get_future();
    {
      std::lock_guard<std::mutex> lock(m_);
      if (!broken_.empty()) {
        job->result.set_exception(std::make_exception_ptr(gpu::GpuError(broken_)));
        return f;
      }
      queue_.push_back(job);
    }
    cv_.notify_one();
    return f;
  }

 private:
  struct Job {
    std::shared_ptr<const matting::Prepared> prepared;
    clock::time_point deadline;
    std::promise<matting::Matte> result;
  };

  // Runs the photos in order, keeping the next one queued on the GPU
  // behind the one running when it waits already and has the same input
  // size (Remover::submit/collect): the GPU then goes from one request's
  // photo to the next without waiting for this thread.
  void loop() {
    std::deque<std::shared_ptr<Job>> flying;  // submitted, not collected
    auto fail = [this](Job& job) {
      try {
        throw;
      } catch (const gpu::GpuError& e) {
        // The device, not the photo: every later photo would fail the same way.
        {
          std::lock_guard<std::mutex> lock(m_);
          broken_ = e.what();
        }
        job.result.set_exception(std::current_exception());
      } catch (...) {
        job.result.set_exception(std::current_exception());
      }
    };
    auto collect = [&] {
      std::shared_ptr<Job> job = flying.front();
      flying.pop_front();
      try {
        job->result.set_value(remover_->collect());
      } catch (...) {
        fail(*job);
      }
    };
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(m_);
        if (flying.empty()) cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) {
          for (auto& j : flying) j->result.set_exception(std::make_exception_ptr(Error("the server is stopping")));
          return;
        }
        if (!queue_.empty()) {
          job = queue_.front();
          queue_.pop_front();
        }
      }
      if (!job) {  // nothing waits: the photo on the GPU is collected
        collect();
        continue;
      }
      if (clock::now() > job->deadline) {
        job->result.set_exception(std::make_exception_ptr(Error("timed out waiting for the GPU")));
        continue;
      }
      while (!flying.empty() && !remover_->can_submit(*job->prepared)) collect();
      try {
        remover_->submit(*job->prepared);
        flying.push_back(job);
      } catch (...) {
        fail(*job);
      }
      if (flying.size() == 2) collect();
    }
  }

  std::thread thread_;
  std::unique_ptr<gpu::Context> ctx_;
  std::unique_ptr<matting::Remover> remover_;
  std::string adapter_;
  double warm_s_ = 0;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::string broken_;
};

// A failure with its HTTP status.
struct HttpError {
  int status;
  std::string message;
};

bool flag_value(const std::string& name, const std::string& v) {
  if (v.empty() || v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  throw HttpError{400, fmt::format("{}={}: give 1 or 0 (true or false)", name, v)};
}

struct RequestOptions {
  bool only_mask = false;
  bool post_process = false;
  std::optional<std::array<uint8_t, 4>> bg;
};

RequestOptions parse_query(const httplib::Request& req) {
  RequestOptions r;
  // From the URL only: a body sent as a form (curl --data-binary says
  // application/x-www-form-urlencoded) is the photo, not parameters.
  httplib::Params params;
  if (const size_t q = req.target.find('?'); q != std::string::npos) {
    httplib::detail::parse_query_text(req.target.substr(q + 1), params);
  }
  for (const auto& [k, v] : params) {
    if (k == "only_mask") {
      r.only_mask = flag_value(k, v);
    } else if (k == "post_process") {
      r.post_process = flag_value(k, v);
    } else if (k == "bg_color") {
      try {
        r.bg = parse_color(v, "bg_color");
      } catch (const Error& e) {
        throw HttpError{400, e.what()};
      }
    } else {
      throw HttpError{400, fmt::format("unknown query parameter '{}'; accepted: only_mask, post_process, "
                                       "bg_color=R,G,B[,A]",
                                       k)};
    }
  }
  if (r.only_mask && r.bg) throw HttpError{400, "only_mask gives the matte, bg_color a composite: give one of them"};
  return r;
}

class Server {
 public:
  Server(const ServeOptions& o, GpuRunner& gpu, std::string model) : o_(o), gpu_(gpu), model_(std::move(model)) {}

  int run() {
    httplib::Server svr;
    const int threads = o_.threads > 0 ? o_.threads : o_.queue + 4;
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    svr.set_payload_max_length(size_t(o_.max_bytes));
    const auto secs = std::chrono::duration<double>(o_.timeout_s);
    svr.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(secs).count() + 1, 0);
    svr.set_write_timeout(std::chrono::duration_cast<std::chrono::seconds>(secs).count() + 1, 0);
    svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(serve_page(), "text/html; charset=utf-8");
    });
    svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
    svr.Post("/remove-bg", [this](const httplib::Request& req, httplib::Response& res) { remove_bg(req, res); });
    svr.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const bool form = req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0;
      std::string why =
          res.status == 413 && form
              ? "a body sent as application/x-www-form-urlencoded (curl --data-binary's default) is limited to 8 KiB "
                "by the HTTP library: send the photo with its own type (curl -H 'Content-Type: image/jpeg' "
                "--data-binary @photo.jpg) or as a form's file (curl -F file=@photo.jpg)"
          : res.status == 413 ? fmt::format("the request is larger than {} bytes (--max-bytes)", o_.max_bytes)
                        : res.status == 404 ? fmt::format("no such page '{}'; there are /, /health and POST /remove-bg", req.path)
                                            : fmt::format("HTTP status {}", res.status);
      res.set_content(fmt::format("error: {}\n", why), "text/plain; charset=utf-8");
    });
    int port = o_.port;
    if (port == 0) {
      port = svr.bind_to_any_port(o_.host);
      if (port < 0) throw Error(fmt::format("cannot listen on {}: no free port", o_.host));
    } else if (!svr.bind_to_port(o_.host, port)) {
      throw Error(fmt::format("cannot listen on {}:{} (is it taken? --port 0 picks a free one)", o_.host, port));
    }
    const auto plan = gpu_.remover().plan(1024, 768);
    fmt::print("serve: listening on http://{}:{}/ (model {}, {} pre-processing, input {}x{} for a 1024x768 photo, "
               "queue {}, adapter {})\n",
               o_.host, port, fs::path(model_).filename().string(), matting::preprocess_name(plan.kind), plan.width,
               plan.height, o_.queue, gpu_.adapter());
    std::fflush(stdout);
    if (!svr.listen_after_bind()) throw Error(fmt::format("the server on {}:{} stopped with an error", o_.host, port));
    return 0;
  }

 private:
  void health(httplib::Response& res) {
    const std::string broken = gpu_.broken();
    const auto plan = gpu_.remover().plan(1024, 768);
    nlohmann::json j = {
        {"status", broken.empty() ? "ok" : "error"},
        {"model", fs::path(model_).filename().string()},
        {"preprocess", matting::preprocess_name(plan.kind)},
        {"adapter", gpu_.adapter()},
        {"in_flight", in_flight_.load()},
        {"queue", o_.queue},
        {"served", served_.load()},
        {"busy", busy_.load()},
        {"failed", failed_.load()},
        {"load_s", gpu_.load_s()},
        {"first_run_s", gpu_.warm_s()},
    };
    if (!broken.empty()) j["error"] = broken;
    res.status = broken.empty() ? 200 : 503;
    res.set_content(j.dump() + "\n", "application/json");
  }

  void remove_bg(const httplib::Request& req, httplib::Response& res) {
    const auto t0 = clock::now();
    const auto deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o_.timeout_s));
    struct Admission {
      std::atomic<int>& n;
      ~Admission() { --n; }
    };
    if (in_flight_.fetch_add(1) >= o_.queue) {
      --in_flight_;
      ++busy_;
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content(fmt::format("error: busy: {} requests are being served (--queue); try again shortly\n", o_.queue),
                      "text/plain; charset=utf-8");
      log(req, res.status, "busy", t0);
      return;
    }
    Admission admitted{in_flight_};
    std::string what;
    try {
      const RequestOptions ro = parse_query(req);
      const std::string* body = &req.body;
      if (req.is_multipart_form_data()) {
        if (req.files.empty()) throw HttpError{400, "the form holds no file: send the photo as the field 'file'"};
        body = &(req.files.count("file") ? req.files.find("file")->second : req.files.begin()->second).content;
      }
      if (body->empty()) throw HttpError{400, "no photo: send a PNG, JPEG, WebP or TIFF as the request body"};
      image::Image photo;
      try {
        photo = image::decode_photo(*body, "the photo", o_.max_pixels);
      } catch (const Error& e) {
        const bool large = std::string(e.what()).find("too large") != std::string::npos;
        throw HttpError{large ? 413 : 400, e.what()};
      }
      what = fmt::format("{}x{}", photo.width, photo.height);
      auto prepared = std::make_shared<matting::Prepared>();
      try {
        *prepared = gpu_.remover().prepare(photo);
      } catch (const Error& e) {
        throw HttpError{400, e.what()};
      }
      prepared->post_process = ro.post_process;
      std::future<matting::Matte> f = gpu_.submit(prepared, deadline);
      if (f.wait_until(deadline) != std::future_status::ready) {
        throw HttpError{503, fmt::format("timed out: no cut-out within {} s (--timeout)", o_.timeout_s)};
      }
      matting::Matte m;
      try {
        m = f.get();
      } catch (const gpu::GpuError& e) {
        throw HttpError{500, e.what()};
      } catch (const Error& e) {
        const bool late = std::string(e.what()).find("timed out") != std::string::npos;
        throw HttpError{late ? 503 : 500, e.what()};
      }
      const double run_s = m.run_s;
      const matting::Cutout cut = gpu_.remover().finish(std::move(*prepared), std::move(m));
      res.status = 200;
      res.set_content(image::encode_png(cutout_image(cut, ro.only_mask, ro.bg)), "image/png");
      res.set_header("X-Wgnn-Run-Ms", fmt::format("{:.1f}", run_s * 1e3));
      ++served_;
    } catch (const HttpError& e) {
      res.status = e.status;
      if (e.status == 503) res.set_header("Retry-After", "1");
      res.set_content(fmt::format("error: {}\n", e.message), "text/plain; charset=utf-8");
      ++failed_;
    } catch (const std::bad_alloc&) {
      res.status = 503;
      res.set_content("error: out of host memory for this photo\n", "text/plain; charset=utf-8");
      ++failed_;
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(fmt::format("error: {}\n", e.what()), "text/plain; charset=utf-8");
      ++failed_;
    }
    log(req, res.status, what, t0);
  }

  void log(const httplib::Request& req, int status, const std::string& what, clock::time_point t0) {
    if (o_.quiet) return;
    std::lock_guard<std::mutex> lock(log_m_);
    fmt::print(stderr, "serve: {} {} {} {} {:.3f} s\n", req.method, req.path, status, what, seconds_since(t0));
  }

  const ServeOptions& o_;
  GpuRunner& gpu_;
  std::string model_;
  std::atomic<int> in_flight_{0};
  std::atomic<uint64_t> served_{0}, busy_{0}, failed_{0};
  std::mutex log_m_;
};

}  // namespace

int serve(const gpu::ContextOptions& context_options, const ServeOptions& o) {
  if (o.port < 0 || o.port > 65535) throw Error(fmt::format("--port {}: give 0 (any free port) to 65535", o.port));
  if (o.queue < 1) throw Error(fmt::format("--queue {}: give 1 or more", o.queue));
  if (o.threads < 0) throw Error(fmt::format("--threads {}: give 1 or more (0: --queue + 4)", o.threads));
  if (o.max_bytes == 0) throw Error("--max-bytes 0: give the largest request body to accept, in bytes");
  if (o.max_pixels == 0) throw Error("--max-pixels 0: give the largest photo to accept, in pixels");
  if (!(o.timeout_s > 0)) throw Error(fmt::format("--timeout {}: give seconds, more than 0", o.timeout_s));
  const ModelChoice m = choose_model(o.model);
  matting::RemoverOptions ro;
  ro.preprocess = preprocess_for(m, o.preprocess);
  ro.size = o.size;
  util::remove_temp_files_on_signal();
  if (!o.quiet) fmt::print(stderr, "serve: loading {} and running it once ...\n", m.path);
  GpuRunner gpu(context_options, m.path, ro);
  if (!o.quiet) {
    fmt::print(stderr, "serve: loaded in {:.2f} s, first run {:.2f} s ({})\n", gpu.load_s(), gpu.warm_s(), gpu.adapter());
  }
  return Server(o, gpu, m.path).run();
}

}  // namespace wgnn::tools

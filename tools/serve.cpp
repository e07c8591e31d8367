// wgnn serve: background removal over HTTP with the model loaded once.
//   POST /remove-bg   the photo (the request body, or a multipart form's
//                     file), the cut-out PNG back; query parameters
//                     only_mask, post_process, bg_color=R,G,B[,A]
//   GET  /health      JSON: the model, the adapter, the queue
//   GET  /            a page to drop a photo on (serve_page.cpp)
// The HTTP layer (http_server.h: Boost.Beast, one I/O thread for every
// connection) reads each request's headers and decides there, before its
// body is read, whether it is admitted; /health and / are answered on the
// I/O thread. One thread owns the GPU and runs the model on one photo after
// another; a pool of workers (--threads, default --queue up to 64) decode,
// pre-process, and encode the PNGs beside it. At
// most --queue requests are admitted at once; more get 503 at once. A
// request is also turned away (503, Retry-After) when the queue's expected
// wait (a running mean of the GPU's time per photo) would pass its deadline,
// and a queued photo is not run when its deadline cannot be met any more or
// its client is gone (closed its connection: the I/O thread watches it).
// WGNN_SERVE_MAX_CONNECTIONS lowers the cap on open connections (default:
// the open-file limit, raised to its hard limit at start, less 128, at most
// 100,000). SIGTERM or SIGINT drain: no new connections, the
// admitted requests answered (a cut-out, or 503 when they cannot finish
// within the drain time), then exit 0.
// --token (or WGNN_SERVE_TOKEN): POST /remove-bg needs "Authorization:
// Bearer <it>"; --origins: more origins allowed to POST (comma-separated;
// "*" any; default the server's own); --drain-timeout: seconds to drain on
// SIGTERM (default 30).
// --llm DIR: a language-model folder served with OpenAI's API under /v1/
// (serve_llm.h), beside remove-bg when --model is given, else alone. Its
// requests are admitted as photos are (--queue, the token, the origins,
// the drain) and run one at a time on a GPU thread of their own.
#include <fmt/format.h>
#include <signal.h>
#include <strings.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
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
#include "tools/http_server.h"
#include "tools/serve_guard.h"
#include "tools/serve_llm.h"
#include "tools/serve_page.h"
#include "util/file.h"

namespace wgnn::tools {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

// A photo handed to the GPU thread. The handler that submitted it and the
// GPU thread agree under `m` whether it runs: the GPU thread starts it only
// while the handler still waits for it, its deadline can still be met and
// its client is still there; a handler that gives up first marks it
// abandoned, and it is never run.
struct Job {
  std::shared_ptr<const matting::Prepared> prepared;
  clock::time_point deadline;
  std::promise<matting::Matte> result;
  std::function<bool()> client_gone;  // called under m, while the handler waits
  std::mutex m;
  bool started = false;
  bool abandoned = false;
};

// The reason a job was not run, as its future's exception.
struct NotRun : Error {
  using Error::Error;
};

// The thread that owns the GPU: it makes the Context and the Remover, runs
// the model once on a blank photo (the first run builds the graph and
// compiles the shaders) and once more to time a run, then runs the photos
// it is handed in order.
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
        auto t0 = clock::now();
        const matting::Prepared p = remover_->prepare(blank);
        (void)remover_->infer(p);
        warm_s_ = seconds_since(t0);
        t0 = clock::now();
        (void)remover_->infer(p);
        run_s_ = seconds_since(t0);
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
    for (auto& j : queue_) j->result.set_exception(std::make_exception_ptr(NotRun("the server is stopping")));
  }

  const matting::Remover& remover() const { return *remover_; }
  const std::string& adapter() const { return adapter_; }
  double load_s() const { return remover_->load_s(); }
  double warm_s() const { return warm_s_; }
  std::string broken() const {
    std::lock_guard<std::mutex> lock(m_);
    return broken_;
  }

  struct Stats {
    double run_s;       // the running mean of the GPU's time per photo
    double prep_s;      // and of a handler's time before it (decode, pre-process)
    double post_s;      // and after it (matte to PNG)
    size_t waiting;     // photos queued or on the GPU
    uint64_t runs;      // photos run
    uint64_t not_run;   // photos dropped before a run (deadline, client gone, given up)
  };
  Stats stats() const {
    std::lock_guard<std::mutex> lock(m_);
    return {run_s_, prep_s_, post_s_, queue_.size() + flying_, runs_, not_run_};
  }
  // Requests admitted and not past the GPU yet (reading, decoding, queued
  // or running): a new one waits for all of them.
  void enter() { ++ahead_; }
  void leave() { --ahead_; }
  // The seconds from now until a request admitted now would be answered;
  // 0 when nothing is ahead of it (then it is always tried: the means are
  // only learned from runs).
  double expected_at_door() const {
    const int ahead = ahead_.load();
    if (ahead <= 0) return 0;
    const Stats s = stats();
    return s.prep_s + double(ahead + 1) * s.run_s + s.post_s;
  }
  // The same for a prepared photo about to be queued.
  double expected_in_queue() const {
    const Stats s = stats();
    if (s.waiting == 0) return 0;
    return double(s.waiting + 1) * s.run_s + s.post_s;
  }
  void record_prep(double s) {
    std::lock_guard<std::mutex> lock(m_);
    prep_s_ = prep_s_ == 0 ? s : 0.8 * prep_s_ + 0.2 * s;
  }
  void record_post(double s) {
    std::lock_guard<std::mutex> lock(m_);
    post_s_ = post_s_ == 0 ? s : 0.8 * post_s_ + 0.2 * s;
  }
  // From now on no photo starts that cannot be answered by `t`.
  void drain_by(clock::time_point t) {
    std::lock_guard<std::mutex> lock(m_);
    drain_deadline_ = t;
  }

  // The matte of a prepared photo, through the job's future.
  void submit(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (!broken_.empty()) {
        job->result.set_exception(std::make_exception_ptr(gpu::GpuError(broken_)));
        return;
      }
      queue_.push_back(job);
    }
    cv_.notify_one();
  }

 private:
  // Whether `job` may start now; if not, its future says why.
  bool may_start(Job& job) {
    double run_s, post_s;
    size_t ahead;
    clock::time_point drain;
    {
      std::lock_guard<std::mutex> lock(m_);
      run_s = run_s_;
      post_s = post_s_;
      ahead = flying_;
      drain = drain_deadline_;
    }
    const auto done = clock::now() + std::chrono::duration_cast<clock::duration>(
                                         std::chrono::duration<double>(double(ahead + 1) * run_s + post_s));
    std::lock_guard<std::mutex> lock(job.m);
    const char* why = nullptr;
    if (job.abandoned) {
      why = "given up";
    } else if (ahead > 0 ? done > drain : clock::now() > drain) {
      why = "the server is stopping: this photo cannot be finished within the drain time";
    } else if (ahead > 0 ? done > job.deadline : clock::now() > job.deadline) {
      why = "timed out: this photo cannot be finished by its deadline";
    } else if (job.client_gone && job.client_gone()) {
      why = "the client is gone";
    }
    if (why) {
      job.result.set_exception(std::make_exception_ptr(NotRun(why)));
      std::lock_guard<std::mutex> l2(m_);
      ++not_run_;
      return false;
    }
    job.started = true;
    return true;
  }

  // Runs the photos in order, keeping the next one queued on the GPU
  // behind the one running when it waits already and has the same input
  // size (Remover::submit/collect): the GPU then goes from one request's
  // photo to the next without waiting for this thread.
  void loop() {
    struct Flying {
      std::shared_ptr<Job> job;
      clock::time_point submitted;
    };
    std::deque<Flying> flying;  // submitted, not collected
    clock::time_point last_done = clock::now();
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
      Flying job = flying.front();
      flying.pop_front();
      try {
        matting::Matte m = remover_->collect();
        const auto now = clock::now();
        // The GPU's time for this photo: from its submission or the end of
        // the one before it, whichever is later.
        const double s = std::chrono::duration<double>(now - std::max(last_done, job.submitted)).count();
        last_done = now;
        {
          std::lock_guard<std::mutex> lock(m_);
          run_s_ = 0.8 * run_s_ + 0.2 * s;
          ++runs_;
          flying_ = flying.size();
        }
        job.job->result.set_value(std::move(m));
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(m_);
          flying_ = flying.size();
        }
        fail(*job.job);
      }
    };
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(m_);
        if (flying.empty()) cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) {
          for (auto& j : flying) j.job->result.set_exception(std::make_exception_ptr(NotRun("the server is stopping")));
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
      while (!flying.empty() && !remover_->can_submit(*job->prepared)) collect();
      if (!may_start(*job)) continue;
      try {
        remover_->submit(*job->prepared);
        flying.push_back({job, clock::now()});
        std::lock_guard<std::mutex> lock(m_);
        flying_ = flying.size();
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
  size_t flying_ = 0;
  double run_s_ = 0, prep_s_ = 0, post_s_ = 0;
  uint64_t runs_ = 0, not_run_ = 0;
  std::atomic<int> ahead_{0};
  clock::time_point drain_deadline_ = clock::time_point::max();
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

RequestOptions parse_query(const std::string& query) {
  RequestOptions r;
  // From the URL only: a body sent as a form (curl --data-binary says
  // application/x-www-form-urlencoded) is the photo, not parameters.
  for (const auto& [k, v] : http::parse_query(query)) {
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

// Settings without a flag (see the top of this file).
struct ServeEnv {
  std::string token;
  std::vector<std::string> origins;
  bool any_origin = false;
  double drain_s = 30;
};

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// A decimal Content-Length, or -1.
int64_t parse_length(const std::string& v) {
  if (v.empty() || v.size() > 18) return -1;
  int64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

bool loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]";
}

// What a request was admitted with: it counts in --queue and ahead of later
// requests (the expected wait at the door) until let go.
struct Admitted {
  std::atomic<int>& in_flight;
  GpuRunner* gpu;  // null for a language-model request (its own GPU thread)
  double limit_s;
  std::atomic<bool> ahead{true};
  Admitted(std::atomic<int>& n, GpuRunner* g, double l) : in_flight(n), gpu(g), limit_s(l) {
    ++in_flight;
    if (gpu) gpu->enter();
  }
  void leave_gpu() {
    if (ahead.exchange(false) && gpu) gpu->leave();
  }
  ~Admitted() {
    leave_gpu();
    --in_flight;
  }
};

class Server {
 public:
  // gpu: the remove-bg model (null: not served); llm: the language model
  // (null: not served).
  Server(const ServeOptions& o, const ServeEnv& env, GpuRunner* gpu, std::string model, LlmService* llm)
      : o_(o), env_(env), gpu_(gpu), model_(std::move(model)), llm_(llm) {}

  int run() {
    const uint64_t files = http::raise_open_files();
    http::Config cfg;
    cfg.host = o_.host;
    cfg.port = o_.port;
    cfg.body_s = o_.timeout_s;
    cfg.write_s = std::max(10.0, o_.timeout_s);
    // Every admitted request may hold a worker (decode, the GPU wait, the
    // PNG); the rest wait in the pool's queue.
    cfg.workers = o_.threads > 0 ? o_.threads : std::min(o_.queue, 64);
    // A socket per connection; some descriptors stay for the model, the
    // GPU and the log.
    cfg.max_connections = size_t(std::min<uint64_t>(files > 256 ? files - 128 : 128, kMostConnections));
    if (const char* c = std::getenv("WGNN_SERVE_MAX_CONNECTIONS"); c && *c) {
      const int64_t n = parse_length(c);
      if (n < 1 || uint64_t(n) > kMostConnections) {
        throw Error(fmt::format("WGNN_SERVE_MAX_CONNECTIONS={}: give 1 to {}", c, kMostConnections));
      }
      cfg.max_connections = std::min<size_t>(size_t(n), cfg.max_connections);
    }
    max_connections_ = cfg.max_connections;
    http::Routes routes;
    routes.head = [this](http::Request& req, http::Response& res, uint64_t* limit) { return head(req, res, limit); };
    routes.too_large = [this](const http::Request& req, http::Response& res) {
      const std::string why = too_large_text(req);
      ++failed_;
      if (llm_ && LlmService::owns(req.path)) {
        LlmService::error(res, 413, why);
      } else {
        res.status = 413;
        res.content(fmt::format("error: {}\n", why), "text/plain; charset=utf-8");
      }
      log(req.method, req.path, 413, why, req.t0);
    };
    routes.work = [this](http::Request& req, http::Response& res, const std::shared_ptr<const http::Client>& c) {
      if (llm_ && LlmService::owns(req.path)) return complete(req, res, c);
      remove_bg(req, res, c);
    };
    routes.error = [this](const std::string& method, const std::string& path, int status, const std::string& why) {
      if (status != 0) log(method, path, status, why, clock::now());
    };
    http::Server svr(cfg, routes);
    srv_ = &svr;
    port_ = svr.port();
    if (gpu_) {
      const auto plan = gpu_->remover().plan(1024, 768);
      fmt::print("serve: listening on http://{}:{}/ (model {}, {} pre-processing, input {}x{} for a 1024x768 photo, "
                 "queue {}, adapter {})\n",
                 o_.host, port_, fs::path(model_).filename().string(), matting::preprocess_name(plan.kind), plan.width,
                 plan.height, o_.queue, gpu_->adapter());
    }
    if (llm_) {
      fmt::print("serve: listening on http://{}:{}/v1/ (language model '{}': /v1/models, /v1/completions, "
                 "/v1/chat/completions; queue {})\n",
                 o_.host, port_, llm_->model_id(), o_.queue);
    }
    std::fflush(stdout);

    // SIGTERM and SIGINT: stop accepting, answer what was admitted, exit 0.
    svr.run([this, &svr](int sig) {
      const auto now = clock::now();
      const auto by = now + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(env_.drain_s));
      draining_ = true;
      if (gpu_) gpu_->drain_by(by);
      if (!o_.quiet) {
        std::lock_guard<std::mutex> lock(log_m_);
        fmt::print(stderr, "serve: {}: draining {} admitted requests (at most {} s), accepting no more\n",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT", in_flight_.load(), env_.drain_s);
      }
      svr.stop_accepting();
      // Done when every admitted request is answered (its answer written).
      // At the drain time, those still waiting for the GPU (a photo on it
      // that cannot finish in time) are answered 503, and once those
      // answers are written (or a second later) the process exits.
      auto over = std::make_shared<bool>(false);
      svr.every(0.02, [this, &svr, by, over] {
        if (in_flight_.load() == 0 && svr.busy() == 0) {
          svr.stop();
          return false;
        }
        const auto t = clock::now();
        if (t > by && !*over) {
          *over = true;
          if (!o_.quiet) {
            std::lock_guard<std::mutex> lock(log_m_);
            fmt::print(stderr, "serve: the drain time is over with {} requests open; answering them 503\n",
                       in_flight_.load());
          }
          svr.answer_waiting(503, "the server is stopping: this photo could not be finished within the drain time");
        }
        if (*over && (svr.busy() == 0 || t > by + std::chrono::seconds(1))) {
          std::fflush(stderr);
          std::_Exit(0);  // the GPU thread is in the middle of a run
        }
        return true;
      });
    });
    srv_ = nullptr;
    if (!o_.quiet && gpu_) {
      const GpuRunner::Stats st = gpu_->stats();
      fmt::print(stderr, "serve: stopped; served {}, busy {}, failed {}, GPU runs {}, not run {}\n", served_.load(),
                 busy_.load(), failed_.load(), st.runs, st.not_run);
    }
    return 0;
  }

 private:
  static constexpr uint64_t kMostConnections = 100000;

  void answer(http::Response& res, int status, const std::string& why) {
    res.status = status;
    res.content(fmt::format("error: {}\n", why), "text/plain; charset=utf-8");
  }

  // On the I/O thread, once a request's headers are in: answered at once
  // (true), or admitted to have its body read (false).
  bool head(http::Request& req, http::Response& res, uint64_t* limit) {
    if (llm_ && LlmService::owns(req.path)) {
      // OpenAI's error objects for every answer under /v1/.
      if (!screen(req, res) || llm_->head(req, res) || !admit(req, res, limit)) {
        if (res.status >= 400 && res.body.rfind("error: ", 0) == 0) {
          std::string why = res.body.substr(7);
          while (!why.empty() && why.back() == '\n') why.pop_back();
          LlmService::error(res, res.status, why);
        }
        return true;
      }
      return false;
    }
    if (!screen(req, res)) return true;
    if (req.path == "/remove-bg" && req.method == "POST") {
      if (!gpu_) {
        answer(res, 404, "this server serves a language model only (--llm): POST /v1/completions, "
                         "/v1/chat/completions; give --model to serve /remove-bg too");
        return true;
      }
      return !admit(req, res, limit);
    }
    if (req.path == "/" && req.method == "GET" && gpu_) {
      res.content(serve_page(), "text/html; charset=utf-8");
      return true;
    }
    if (req.path == "/health" && req.method == "GET") {
      health(res);
      return true;
    }
    answer(res, 404, fmt::format("no such page '{}'; there are {}", req.path,
                                 gpu_ && llm_ ? "/, /health, POST /remove-bg and /v1/ (OpenAI's API)"
                                 : gpu_       ? "/, /health and POST /remove-bg"
                                              : "/health and /v1/ (OpenAI's API: /v1/models, /v1/completions, "
                                                "/v1/chat/completions)"));
    return true;
  }

  // Checks before routing, before the body is read: framing (one length,
  // no length with chunked), Host. False: answered.
  bool screen(const http::Request& req, http::Response& res) {
    auto refuse = [&](int status, const std::string& why) {
      answer(res, status, why);
      log(req.method, req.path, status, why, req.t0);
      return false;
    };
    const size_t lengths = req.count("Content-Length");
    int64_t length = -1;
    for (size_t i = 0; i < lengths; ++i) {
      const int64_t l = parse_length(trim(req.header("Content-Length", i)));
      if (l < 0) return refuse(400, "Content-Length is not a number");
      if (length >= 0 && l != length) return refuse(400, "two different Content-Lengths");
      length = l;
    }
    const size_t encodings = req.count("Transfer-Encoding");
    if (encodings > 0) {
      if (encodings > 1 || strcasecmp(trim(req.header("Transfer-Encoding")).c_str(), "chunked") != 0) {
        return refuse(400, "Transfer-Encoding: only chunked is accepted");
      }
      if (lengths > 0) return refuse(400, "both Content-Length and Transfer-Encoding");
    }
    if (req.method == "POST" && lengths == 0 && encodings == 0) {
      return refuse(400, "no body: a POST needs a Content-Length (or Transfer-Encoding: chunked)");
    }
    // Host: with a loopback address, only loopback names (a web page
    // elsewhere cannot reach the server through a name of its own that
    // resolves to 127.0.0.1).
    const std::string host = req.header("Host");
    if (loopback(o_.host) && !env_.any_origin) {
      std::string name = host;
      if (!name.empty() && name[0] == '[') {
        name = name.substr(0, name.find(']') + 1);
      } else if (const size_t colon = name.rfind(':'); colon != std::string::npos) {
        name = name.substr(0, colon);
      }
      if (!name.empty() && !loopback(name)) return refuse(403, fmt::format("Host '{}' is not this server's", host));
    }
    return true;
  }

  // Whether this POST may use the server: its Origin (when a browser sends
  // one) is the server's own or one of --origins, and it carries the token
  // when there is one (--token). Else the status and why.
  std::optional<HttpError> not_allowed(const http::Request& req, http::Response& res) {
    const std::string host = req.header("Host");
    if (req.has("Origin") && !env_.any_origin) {
      const std::string origin = req.header("Origin");
      bool ok = origin == "http://" + host;
      for (const auto& o : env_.origins) ok = ok || origin == o;
      if (!ok) {
        return HttpError{403, fmt::format("a page at '{}' may not use this server (its own origin is http://{}; "
                                          "--origins adds others)",
                                          origin, host)};
      }
    }
    if (!env_.token.empty()) {
      const std::string want = "Bearer " + env_.token;
      const std::string got = req.header("Authorization");
      unsigned diff = unsigned(got.size() ^ want.size());
      for (size_t i = 0; i < want.size(); ++i) diff |= unsigned(uint8_t(i < got.size() ? got[i] : 0) ^ uint8_t(want[i]));
      if (diff != 0) {
        res.set("WWW-Authenticate", "Bearer");
        return HttpError{401, "this server needs 'Authorization: Bearer <token>' (its --token)"};
      }
    }
    return std::nullopt;
  }

  static bool form_encoded(const http::Request& req) {
    return req.header("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0;
  }
  std::string too_large_text(const http::Request& req) const {
    if (form_encoded(req)) {
      return "a body sent as application/x-www-form-urlencoded (curl --data-binary's default) is limited "
             "to 8 KiB: send the photo with its own type (curl -H 'Content-Type: image/jpeg' "
             "--data-binary @photo.jpg) or as a form's file (curl -F file=@photo.jpg)";
    }
    return fmt::format("the request is larger than {} bytes (--max-bytes)", o_.max_bytes);
  }

  // POST /remove-bg with its headers in: admitted (its body is read next),
  // or answered now (false), before its body is read, which is then not
  // read at all (the connection closes after the answer).
  bool admit(http::Request& req, http::Response& res, uint64_t* limit) {
    auto refuse = [&](int status, const std::string& why, double retry_s) {
      answer(res, status, why);
      if (status == 503) {
        ++busy_;
        res.set("Retry-After", std::to_string(std::max(1, int(std::ceil(retry_s)))));
      } else {
        ++failed_;
      }
      log(req.method, req.path, status, status == 503 ? "busy" : why, req.t0);
      return false;
    };
    if (auto e = not_allowed(req, res)) return refuse(e->status, e->message, 0);
    double limit_s = o_.timeout_s;
    if (req.has("X-Wgnn-Deadline-Ms")) {
      const int64_t ms = parse_length(trim(req.header("X-Wgnn-Deadline-Ms")));
      if (ms <= 0) return refuse(400, "X-Wgnn-Deadline-Ms: give the milliseconds the client waits, 1 or more", 0);
      limit_s = std::min(limit_s, double(ms) / 1e3);
    }
    const uint64_t most = form_encoded(req) ? std::min<uint64_t>(o_.max_bytes, 8192) : o_.max_bytes;
    if (const int64_t length = parse_length(trim(req.header("Content-Length"))); length > 0 && uint64_t(length) > most) {
      return refuse(413, too_large_text(req), 0);
    }
    if (draining_) return refuse(503, "busy: the server is stopping", 1);
    if (in_flight_.load() >= o_.queue) {
      return refuse(503, fmt::format("busy: {} requests are being served (--queue); try again shortly", o_.queue), 1);
    }
    // At the door: a photo that would wait past its deadline is not run.
    const bool photo = req.path == "/remove-bg";
    if (const double wait = photo ? gpu_->expected_at_door() : 0; seconds_since(req.t0) + wait > limit_s) {
      return refuse(503,
                    fmt::format("busy: the queue's expected wait, {:.1f} s, is past this request's deadline "
                                "({:.1f} s)",
                                wait, limit_s),
                    wait);
    }
    req.hold = std::make_shared<Admitted>(in_flight_, photo ? gpu_ : nullptr, limit_s);
    *limit = most;
    return true;
  }

  void health(http::Response& res) {
    nlohmann::json j;
    std::string broken;
    if (gpu_) j = photo_health(&broken);
    j["status"] = broken.empty() ? (draining_ ? "stopping" : "ok") : "error";
    j["in_flight"] = in_flight_.load();
    j["queue"] = o_.queue;
    j["served"] = served_.load();
    j["busy"] = busy_.load();
    j["failed"] = failed_.load();
    if (llm_) {
      nlohmann::json l = nlohmann::json::parse(llm_->health_json());
      if (l.contains("error") && broken.empty()) {
        broken = l["error"].get<std::string>();
        j["status"] = "error";
      }
      j["llm"] = l;
    }
    if (srv_) {
      const http::Server::Counts c = srv_->counts();
      j["connections"] = srv_->connections();
      j["max_connections"] = max_connections_;
      j["idle_closed"] = c.idle_closed;
      j["header_timeouts"] = c.header_timeouts;
      j["body_timeouts"] = c.body_timeouts;
      j["refused_connections"] = c.refused;
      j["clients_gone"] = c.gone;
      j["half_closed"] = c.half_closed;
    }
    if (!broken.empty()) j["error"] = broken;
    res.status = broken.empty() && !draining_ ? 200 : 503;
    res.content(j.dump() + "\n", "application/json");
  }

  // The remove-bg model's part of /health.
  nlohmann::json photo_health(std::string* broken) {
    *broken = gpu_->broken();
    const auto plan = gpu_->remover().plan(1024, 768);
    const GpuRunner::Stats st = gpu_->stats();
    nlohmann::json j = {
        {"model", fs::path(model_).filename().string()},
        {"preprocess", matting::preprocess_name(plan.kind)},
        {"adapter", gpu_->adapter()},
        {"in_flight", in_flight_.load()},
        {"queue", o_.queue},
        {"served", served_.load()},
        {"busy", busy_.load()},
        {"failed", failed_.load()},
        {"gpu_runs", st.runs},
        {"not_run", st.not_run},
        {"run_s", st.run_s},
        {"prep_s", st.prep_s},
        {"post_s", st.post_s},
        {"waiting", st.waiting},
        {"load_s", gpu_->load_s()},
        {"first_run_s", gpu_->warm_s()},
    };
    return j;
  }

  // On a worker: a language-model request (LlmService::work).
  void complete(http::Request& req, http::Response& res, const std::shared_ptr<const http::Client>& client) {
    std::string what;
    try {
      what = llm_->work(req, res, client);
    } catch (const std::bad_alloc&) {
      LlmService::error(res, 503, "out of host memory for this request");
      what = "out of host memory";
    }
    if (res.status == 200) ++served_;
    else if (res.status == 503) ++busy_;
    else ++failed_;
    log(req.method, req.path, res.status, what, req.t0);
  }

  // On a worker: the photo of an admitted request, read whole.
  void remove_bg(http::Request& req, http::Response& res, const std::shared_ptr<const http::Client>& client) {
    const auto t0 = req.t0;
    auto* admitted = static_cast<Admitted*>(req.hold.get());
    const double limit_s = admitted->limit_s;
    const auto deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(limit_s));
    std::string what;
    try {
      const RequestOptions ro = parse_query(req.query);
      std::string body;
      if (req.header("Content-Type").rfind("multipart/form-data", 0) == 0) {
        std::string why;
        if (!http::form_file(req.header("Content-Type"), req.body, "file", &body, &why)) throw HttpError{400, why};
      } else {
        body = std::move(req.body);
      }
      if (body.empty()) throw HttpError{400, "no photo: send a PNG, JPEG, WebP or TIFF as the request body"};
      if (const std::string why = serve_guard::incomplete_photo(body); !why.empty()) {
        throw HttpError{400, fmt::format("the photo is {}", why)};
      }
      // Waited in the workers' queue: no decoding for a client that is gone
      // or a deadline that cannot be met any more.
      const auto t_prep = clock::now();
      if (client->gone) throw HttpError{503, "the client is gone"};
      if (clock::now() > deadline) throw HttpError{503, fmt::format("timed out: no cut-out within {} s", limit_s)};
      if (const double wait = gpu_->expected_in_queue(); clock::now() + std::chrono::duration_cast<clock::duration>(
                                                                   std::chrono::duration<double>(wait)) > deadline) {
        throw HttpError{503, fmt::format("busy: the queue's expected wait, {:.1f} s, is past this request's deadline",
                                         wait)};
      }
      image::Image photo;
      try {
        photo = image::decode_photo(body, "the photo", o_.max_pixels);
      } catch (const Error& e) {
        const bool large = std::string(e.what()).find("too large") != std::string::npos;
        throw HttpError{large ? 413 : 400, e.what()};
      }
      what = fmt::format("{}x{}", photo.width, photo.height);
      auto prepared = std::make_shared<matting::Prepared>();
      try {
        *prepared = gpu_->remover().prepare(photo);
      } catch (const Error& e) {
        throw HttpError{400, e.what()};
      }
      prepared->post_process = ro.post_process;
      // The work only: the waits before it overlap the photos ahead, which
      // the expected wait counts already.
      gpu_->record_prep(seconds_since(t_prep));
      if (const double wait = gpu_->expected_in_queue(); clock::now() + std::chrono::duration_cast<clock::duration>(
                                                                   std::chrono::duration<double>(wait)) > deadline) {
        throw HttpError{503, fmt::format("busy: the queue's expected wait, {:.1f} s, is past this request's deadline",
                                         wait)};
      }
      auto job = std::make_shared<Job>();
      job->prepared = prepared;
      job->deadline = deadline;
      job->client_gone = [client] { return client->gone.load(); };
      std::future<matting::Matte> f = job->result.get_future();
      gpu_->submit(job);
      // Wait; give up at the deadline or when the client goes, unless the
      // photo is on the GPU already (then its result is waited for).
      for (;;) {
        if (f.wait_for(std::chrono::milliseconds(10)) == std::future_status::ready) break;
        const bool late = clock::now() > deadline;
        if (!late && !client->gone) continue;
        std::lock_guard<std::mutex> lock(job->m);
        if (job->started) continue;
        job->abandoned = true;
        throw HttpError{503, late ? fmt::format("timed out: no cut-out within {} s", limit_s) : "the client is gone"};
      }
      admitted->leave_gpu();
      matting::Matte m;
      try {
        m = f.get();
      } catch (const gpu::GpuError& e) {
        throw HttpError{500, e.what()};
      } catch (const NotRun& e) {
        throw HttpError{503, e.what()};
      } catch (const Error& e) {
        throw HttpError{500, e.what()};
      }
      const auto t_post = clock::now();
      const double run_s = m.run_s;
      const matting::Cutout cut = gpu_->remover().finish(std::move(*prepared), std::move(m));
      res.status = 200;
      res.content(image::encode_png(cutout_image(cut, ro.only_mask, ro.bg)), "image/png");
      res.set("X-Wgnn-Run-Ms", fmt::format("{:.1f}", run_s * 1e3));
      gpu_->record_post(seconds_since(t_post));
      ++served_;
    } catch (const HttpError& e) {
      answer(res, e.status, e.message);
      if (e.status == 503) res.set("Retry-After", "1");
      ++failed_;
    } catch (const std::bad_alloc&) {
      answer(res, 503, "out of host memory for this photo");
      ++failed_;
    } catch (const std::exception& e) {
      answer(res, 500, e.what());
      ++failed_;
    }
    log(req.method, req.path, res.status, what.empty() && res.status != 200 ? res.body.substr(7, 80) : what, t0);
  }

  void log(const std::string& method, const std::string& path, int status, const std::string& what,
           clock::time_point t0) {
    if (o_.quiet) return;
    std::lock_guard<std::mutex> lock(log_m_);
    std::string w = what;
    while (!w.empty() && w.back() == '\n') w.pop_back();
    fmt::print(stderr, "serve: {} {} {} {} {:.3f} s\n", method, path, status, w, seconds_since(t0));
  }

  const ServeOptions& o_;
  const ServeEnv& env_;
  GpuRunner* gpu_;
  std::string model_;
  LlmService* llm_;
  int port_ = 0;
  http::Server* srv_ = nullptr;
  size_t max_connections_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<uint64_t> served_{0}, busy_{0}, failed_{0};
  std::mutex log_m_;
};

}  // namespace

int serve(const gpu::ContextOptions& context_options, const ServeOptions& o) {
  constexpr uint64_t kMostBytes = uint64_t(4) << 30;
  constexpr uint64_t kMostPixels = uint64_t(1) << 30;
  constexpr double kMostSeconds = 86400;
  if (o.port < 0 || o.port > 65535) throw Error(fmt::format("--port {}: give 0 (any free port) to 65535", o.port));
  if (o.queue < 1 || o.queue > 4096) throw Error(fmt::format("--queue {}: give 1 to 4096", o.queue));
  if (o.threads < 0 || o.threads > 4096) {
    throw Error(fmt::format("--threads {}: give 1 to 4096 (0: --queue, at most 64)", o.threads));
  }
  if (o.max_bytes == 0 || o.max_bytes > kMostBytes) {
    throw Error(fmt::format("--max-bytes {}: give the largest request body to accept, 1 to {} bytes (4 GiB)",
                            o.max_bytes > kMostBytes ? "(more than 4 GiB, or negative)" : "0", kMostBytes));
  }
  if (o.max_pixels == 0 || o.max_pixels > kMostPixels) {
    throw Error(fmt::format("--max-pixels {}: give the largest photo to accept, 1 to {} pixels",
                            o.max_pixels > kMostPixels ? "(more than 2^30, or negative)" : "0", kMostPixels));
  }
  if (!std::isfinite(o.timeout_s) || !(o.timeout_s > 0) || o.timeout_s > kMostSeconds) {
    throw Error(fmt::format("--timeout {}: give seconds, more than 0 and at most {}", o.timeout_s, kMostSeconds));
  }
  if (o.size < 0 || o.size > 8192) throw Error(fmt::format("--size {}: give 0 (the model's) to 8192", o.size));
  if (!std::isfinite(o.drain_timeout_s) || o.drain_timeout_s < 0 || o.drain_timeout_s > kMostSeconds) {
    throw Error(fmt::format("--drain-timeout {}: give seconds, 0 to {}", o.drain_timeout_s, kMostSeconds));
  }
  ServeEnv env;
  env.token = o.token;
  if (const char* t = std::getenv("WGNN_SERVE_TOKEN"); env.token.empty() && t && *t) env.token = t;
  if (!o.origins.empty()) {
    const std::string& s = o.origins;
    for (size_t at = 0; at <= s.size();) {
      const size_t comma = std::min(s.find(',', at), s.size());
      const std::string one = trim(s.substr(at, comma - at));
      if (one == "*") env.any_origin = true;
      else if (!one.empty()) env.origins.push_back(one);
      at = comma + 1;
    }
  }
  env.drain_s = o.drain_timeout_s;
  util::remove_temp_files_on_signal();
  std::unique_ptr<LlmService> llm;
  if (!o.llm.empty()) {
    if (!o.quiet) fmt::print(stderr, "serve: loading the language model {} and running it once ...\n", o.llm);
    llm = std::make_unique<LlmService>(context_options, o.llm);
    if (!o.quiet) fmt::print(stderr, "serve: '{}' ready in {:.2f} s\n", llm->model_id(), llm->load_s());
  }
  // remove-bg: unless only a language model is asked for.
  std::unique_ptr<GpuRunner> gpu;
  std::string path;
  if (o.llm.empty() || !o.model.empty()) {
    const ModelChoice m = choose_model(o.model);
    matting::RemoverOptions ro;
    ro.preprocess = preprocess_for(m, o.preprocess);
    ro.size = o.size;
    path = m.path;
    if (!o.quiet) fmt::print(stderr, "serve: loading {} and running it once ...\n", m.path);
    gpu = std::make_unique<GpuRunner>(context_options, m.path, ro);
    if (!o.quiet) {
      fmt::print(stderr, "serve: loaded in {:.2f} s, first run {:.2f} s ({})\n", gpu->load_s(), gpu->warm_s(),
                 gpu->adapter());
    }
  }
  return Server(o, env, gpu.get(), path, llm.get()).run();
}

}  // namespace wgnn::tools

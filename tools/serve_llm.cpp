// `wgnn serve --llm DIR`: OpenAI's completions and chat completions over a
// model folder (serve_llm.h).
#include "tools/serve_llm.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "generate/generate.h"
#include "text/chat_template.h"
#include "text/model_folder.h"
#include "text/stop_text.h"
#include "text/tokenizer.h"
#include "tools/commands.h"

namespace wgnn::tools {
namespace {

using json = nlohmann::json;
using clock = std::chrono::steady_clock;

// A request's failure with its status and the field it is about.
struct ApiError {
  int status;
  std::string message, param, code;
};

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// One generation handed to the GPU thread.
struct Job {
  std::vector<int64_t> prompt;
  generate::Options options;
  std::vector<std::string> stops;
  std::function<void(const std::string&)> on_piece;  // on the GPU thread, for streaming
  std::function<bool()> gone;                         // the client closed its connection
  struct Outcome {
    std::string text, finish_reason;
    size_t completion_tokens = 0;
  };
  std::promise<Outcome> done;
};

struct NotRun : Error {
  using Error::Error;
};

std::mutex rng_m;
std::mt19937_64 rng{std::random_device{}()};

std::string random_id(const char* prefix) {
  std::lock_guard<std::mutex> lock(rng_m);
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), uint32_t(rng()));
}

uint64_t random_seed() {
  std::lock_guard<std::mutex> lock(rng_m);
  return rng();
}

}  // namespace

struct LlmService::Impl {
  text::ModelFolder folder;
  std::string id;
  std::optional<text::Tokenizer> tok;
  std::unique_ptr<text::ChatTemplate> tmpl;
  std::string extra_tokens;  // the folder's other special tokens, for the template
  int default_max = 64;
  double load_s = 0;

  std::thread thread;
  std::unique_ptr<gpu::Context> ctx;
  std::unique_ptr<generate::Generator> gen;
  mutable std::mutex m;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> queue;
  bool stopping = false;
  std::string broken;
  uint64_t runs = 0, not_run = 0, tokens = 0;
  bool busy = false;

  void loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [this] { return stopping || !queue.empty(); });
        if (stopping) return;
        job = queue.front();
        queue.pop_front();
        busy = true;
      }
      run(*job);
      std::lock_guard<std::mutex> lock(m);
      busy = false;
    }
  }

  void run(Job& job) {
    if (job.gone && job.gone()) {
      job.done.set_exception(std::make_exception_ptr(NotRun("the client is gone")));
      std::lock_guard<std::mutex> lock(m);
      ++not_run;
      return;
    }
    try {
      text::StopText stop(job.stops);
      text::Detokenizer detok(*tok, /*skip_special_tokens=*/true);
      bool gone = false;
      auto give = [&](const std::string& piece) {
        if (!piece.empty() && job.on_piece) job.on_piece(piece);
      };
      generate::Options o = job.options;
      o.on_tokens = [&](const std::vector<std::vector<int64_t>>& fresh) {
        if (job.gone && job.gone()) {
          gone = true;
          return false;
        }
        for (int64_t t : fresh.at(0)) {
          give(stop.add(detok.push(t)));
          if (stop.stopped()) return false;
        }
        return true;
      };
      const generate::Result r = gen->run({job.prompt}, o);
      Job::Outcome out;
      const std::vector<int64_t>& toks = r.tokens.at(0);
      out.completion_tokens = toks.size();
      if (!stop.stopped()) give(stop.add(detok.finish()));
      if (!stop.stopped()) give(stop.finish());
      out.text = stop.text();
      const bool eos = !toks.empty() && std::find(o.eos.begin(), o.eos.end(), toks.back()) != o.eos.end();
      out.finish_reason = stop.stopped() || eos || int(toks.size()) < o.max_new_tokens ? "stop" : "length";
      {
        std::lock_guard<std::mutex> lock(m);
        ++runs;
        tokens += toks.size();
      }
      if (gone) throw NotRun("the client is gone");
      job.done.set_value(std::move(out));
    } catch (const gpu::GpuError& e) {
      {
        std::lock_guard<std::mutex> lock(m);
        broken = e.what();
      }
      job.done.set_exception(std::current_exception());
    } catch (...) {
      job.done.set_exception(std::current_exception());
    }
  }

  void submit(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lock(m);
      if (!broken.empty()) throw ApiError{500, "the GPU failed: " + broken, "", "gpu_error"};
      queue.push_back(job);
    }
    cv.notify_one();
  }

  // ---- requests ----------------------------------------------------------

  struct Parsed {
    bool chat = false;
    std::vector<int64_t> prompt;
    generate::Options options;
    std::vector<std::string> stops;
    bool stream = false, include_usage = false;
  };

  static std::string type_name(const json& v) {
    switch (v.type()) {
      case json::value_t::null: return "null";
      case json::value_t::boolean: return "a boolean";
      case json::value_t::string: return "a string";
      case json::value_t::array: return "an array";
      case json::value_t::object: return "an object";
      default: return "a number";
    }
  }
  [[noreturn]] static void bad(const std::string& param, const std::string& message) {
    throw ApiError{400, message, param, ""};
  }
  static double number(const json& v, const std::string& name) {
    if (!v.is_number()) bad(name, fmt::format("'{}' must be a number, not {}", name, type_name(v)));
    return v.get<double>();
  }
  static int64_t integer(const json& v, const std::string& name) {
    if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())) {
      bad(name, fmt::format("'{}' must be an integer, not {}", name, v.is_number() ? v.dump() : type_name(v)));
    }
    return v.is_number_unsigned() ? int64_t(std::min<uint64_t>(v.get<uint64_t>(), uint64_t(INT64_MAX)))
                                  : v.get<int64_t>();
  }

  Parsed parse(const std::string& body, bool chat) const {
    json j;
    try {
      j = json::parse(body);
    } catch (const json::exception& e) {
      bad("", fmt::format("the request body is not valid JSON ({})", e.what()));
    }
    if (!j.is_object()) bad("", "the request body must be a JSON object");
    static const std::set<std::string> common = {"model", "max_tokens", "temperature", "top_p", "seed", "stop",
                                                 "stream", "stream_options", "n", "user"};
    const char* endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
    for (const auto& [k, v] : j.items()) {
      const bool known = common.count(k) || (chat ? (k == "messages" || k == "max_completion_tokens") : k == "prompt");
      if (!known) {
        bad(k, fmt::format("unknown field '{}' for {}; this server takes model, {}, max_tokens{}, temperature, "
                           "top_p, seed, stop, stream, stream_options, n (1) and user",
                           k, endpoint, chat ? "messages" : "prompt", chat ? ", max_completion_tokens" : ""));
      }
    }
    Parsed p;
    p.chat = chat;
    if (!j.contains("model")) bad("model", "'model' is required");
    if (!j["model"].is_string()) bad("model", fmt::format("'model' must be a string, not {}", type_name(j["model"])));
    if (j["model"].get<std::string>() != id) {
      throw ApiError{404, fmt::format("the model '{}' does not exist; this server serves '{}'",
                                      j["model"].get<std::string>(), id),
                     "model", "model_not_found"};
    }
    if (j.contains("user") && !j["user"].is_string()) bad("user", "'user' must be a string");
    if (j.contains("n") && !j["n"].is_null()) {
      const int64_t n = integer(j["n"], "n");
      if (n != 1) bad("n", fmt::format("n is {}: this server gives one choice per request (n = 1)", n));
    }
    p.options.max_new_tokens = default_max;
    for (const char* name : {"max_tokens", "max_completion_tokens"}) {
      if (!j.contains(name) || j[name].is_null()) continue;
      const int64_t n = integer(j[name], name);
      if (n < 1) bad(name, fmt::format("{} is {}: at least 1", name, n));
      if (n > 1 << 20) bad(name, fmt::format("{} is {}: at most {}", name, n, 1 << 20));
      p.options.max_new_tokens = int(n);
    }
    p.options.temperature = 1.0;  // OpenAI's default
    if (j.contains("temperature") && !j["temperature"].is_null()) {
      const double t = number(j["temperature"], "temperature");
      if (!(t >= 0) || !std::isfinite(t)) bad("temperature", fmt::format("temperature is {}: 0 or more", t));
      p.options.temperature = t;
    }
    if (j.contains("top_p") && !j["top_p"].is_null()) {
      const double t = number(j["top_p"], "top_p");
      if (!(t > 0 && t <= 1)) bad("top_p", fmt::format("top_p is {}: more than 0 and at most 1", t));
      p.options.top_p = t;
    }
    // Without a seed, each request samples with one of its own (as OpenAI's).
    if (j.contains("seed") && !j["seed"].is_null()) p.options.seed = uint64_t(integer(j["seed"], "seed"));
    else p.options.seed = random_seed();
    if (j.contains("stop") && !j["stop"].is_null()) {
      const json& s = j["stop"];
      if (s.is_string()) {
        p.stops.push_back(s.get<std::string>());
      } else if (s.is_array()) {
        for (const auto& x : s) {
          if (!x.is_string()) bad("stop", "'stop' must be a string or a list of strings");
          p.stops.push_back(x.get<std::string>());
        }
      } else {
        bad("stop", fmt::format("'stop' must be a string or a list of strings, not {}", type_name(s)));
      }
      if (p.stops.size() > 4) bad("stop", fmt::format("'stop' has {} strings: at most 4", p.stops.size()));
      for (const auto& x : p.stops)
        if (x.empty()) bad("stop", "'stop' has an empty string, which would end every answer at once");
    }
    if (j.contains("stream") && !j["stream"].is_null()) {
      if (!j["stream"].is_boolean()) bad("stream", fmt::format("'stream' must be a boolean, not {}", type_name(j["stream"])));
      p.stream = j["stream"].get<bool>();
    }
    if (j.contains("stream_options") && !j["stream_options"].is_null()) {
      const json& so = j["stream_options"];
      if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
      if (!p.stream) bad("stream_options", "'stream_options' is only allowed with stream: true");
      for (const auto& [k, v] : so.items()) {
        if (k != "include_usage") bad("stream_options", fmt::format("unknown field '{}' of stream_options", k));
        if (!v.is_boolean()) bad("stream_options", "stream_options.include_usage must be a boolean");
        p.include_usage = v.get<bool>();
      }
    }
    p.options.eos = folder.eos_ids;
    if (p.stream || !p.stops.empty()) p.options.sync_every = 1;

    if (chat) {
      if (!j.contains("messages")) bad("messages", "'messages' is required");
      const json& ms = j["messages"];
      if (!ms.is_array()) bad("messages", fmt::format("'messages' must be an array, not {}", type_name(ms)));
      if (ms.empty()) bad("messages", "'messages' is empty: give at least one message");
      std::vector<text::Message> messages;
      for (size_t i = 0; i < ms.size(); ++i) {
        const json& msg = ms[i];
        const std::string at = fmt::format("messages[{}]", i);
        if (!msg.is_object()) bad(at, fmt::format("{} must be an object", at));
        for (const auto& [k, v] : msg.items()) {
          if (k != "role" && k != "content" && k != "name")
            bad(at + "." + k, fmt::format("unknown field '{}' in {} (role, content and name are taken)", k, at));
        }
        if (!msg.contains("role") || !msg["role"].is_string()) bad(at + ".role", fmt::format("{} needs a 'role' string", at));
        const std::string role = msg["role"].get<std::string>();
        if (role != "system" && role != "user" && role != "assistant") {
          bad(at + ".role", fmt::format("{}.role is '{}': give system, user or assistant", at, role));
        }
        if (!msg.contains("content")) bad(at + ".content", fmt::format("{} needs 'content'", at));
        const json& c = msg["content"];
        std::string content;
        if (c.is_string()) {
          content = c.get<std::string>();
        } else if (c.is_array()) {
          for (const auto& part : c) {
            if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
                !part["text"].is_string()) {
              bad(at + ".content", fmt::format("{}.content: only text parts ({{\"type\": \"text\", \"text\": ...}}) "
                                               "are taken",
                                               at));
            }
            content += part["text"].get<std::string>();
          }
        } else {
          bad(at + ".content", fmt::format("{}.content must be a string or a list of text parts, not {}", at,
                                           type_name(c)));
        }
        messages.push_back({role, content});
      }
      if (!tmpl) {
        bad("messages", fmt::format("the model '{}' has no chat template (chat_template in tokenizer_config.json "
                                    "or chat_template.jinja): use /v1/completions",
                                    id));
      }
      std::string rendered;
      try {
        rendered = tmpl->render_json(text::messages_json(messages), /*add_generation_prompt=*/true, extra_tokens);
      } catch (const Error& e) {
        bad("messages", fmt::format("the chat template failed: {}", e.what()));
      }
      p.prompt = tok->encode(rendered, /*add_special_tokens=*/false);
    } else {
      if (!j.contains("prompt")) bad("prompt", "'prompt' is required");
      const json& pr = j["prompt"];
      std::string text;
      if (pr.is_string()) {
        text = pr.get<std::string>();
      } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
        text = pr[0].get<std::string>();
      } else {
        bad("prompt", "'prompt' must be a string (or a list of one string); token-id prompts and several prompts "
                      "are not supported");
      }
      p.prompt = tok->encode(text, /*add_special_tokens=*/true);
    }
    if (p.prompt.empty()) bad(chat ? "messages" : "prompt", "the prompt encodes to no token: nothing to generate from");
    return p;
  }
};

LlmService::LlmService(const gpu::ContextOptions& co, const std::string& dir) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  const auto t0 = clock::now();
  m.folder = text::read_model_folder(dir);
  m.id = std::filesystem::path(m.folder.dir).lexically_normal().filename().string();
  if (m.id.empty()) m.id = std::filesystem::path(m.folder.dir).lexically_normal().parent_path().filename().string();
  m.tok.emplace(text::Tokenizer::load(m.folder.tokenizer));
  if (!m.folder.chat_template.empty()) {
    m.tmpl = std::make_unique<text::ChatTemplate>(m.folder.chat_template, m.folder.bos_token, m.folder.eos_token);
  }
  m.extra_tokens = json(m.folder.special_tokens).dump();
  if (m.folder.max_new_tokens > 0) m.default_max = m.folder.max_new_tokens;
  GenerateOptions g;
  g.decoder = m.folder.decoder;
  g.first = m.folder.first;
  // The GPU thread: its context, the generator, one run to build the plans.
  std::promise<void> ready;
  auto started = ready.get_future();
  m.thread = std::thread([&m, &ready, co, g] {
    try {
      m.ctx = std::make_unique<gpu::Context>(co);
      m.gen = std::make_unique<generate::Generator>(*m.ctx, generate_models(g), generate_session_options(g));
      generate::Options o;
      o.max_new_tokens = 2;
      std::vector<int64_t> warm = m.tok->encode("Hello", true);
      if (warm.empty()) warm = {0};
      (void)m.gen->run({warm}, o);
      ready.set_value();
    } catch (...) {
      ready.set_exception(std::current_exception());
      return;
    }
    m.loop();
  });
  try {
    started.get();
  } catch (...) {
    m.thread.join();
    throw;
  }
  m.load_s = std::chrono::duration<double>(clock::now() - t0).count();
}

LlmService::~LlmService() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.m);
    m.stopping = true;
  }
  m.cv.notify_all();
  if (m.thread.joinable()) m.thread.join();
  for (auto& j : m.queue) j->done.set_exception(std::make_exception_ptr(NotRun("the server is stopping")));
}

const std::string& LlmService::model_id() const { return impl_->id; }
double LlmService::load_s() const { return impl_->load_s; }

bool LlmService::owns(const std::string& path) { return path == "/v1" || path.rfind("/v1/", 0) == 0; }

void LlmService::error(http::Response& res, int status, const std::string& message, const std::string& param,
                       const std::string& code) {
  const char* type = status == 404 && code.empty() ? "invalid_request_error"
                     : status >= 500              ? (status == 503 ? "server_busy" : "server_error")
                                                  : "invalid_request_error";
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  res.status = status;
  res.content(dump(json{{"error", e}}) + "\n", "application/json");
}

bool LlmService::head(const http::Request& req, http::Response& res) const {
  const std::string& p = req.path;
  const bool post = p == "/v1/completions" || p == "/v1/chat/completions";
  if (p == "/v1/models" || p == "/v1/models/" + impl_->id) {
    if (req.method != "GET") {
      res.set("Allow", "GET");
      error(res, 405, fmt::format("{} takes GET, not {}", p, req.method), "", "method_not_allowed");
      return true;
    }
    const json model = {{"id", impl_->id}, {"object", "model"}, {"created", 0}, {"owned_by", "wgnn"}};
    res.content(dump(p == "/v1/models" ? json{{"object", "list"}, {"data", json::array({model})}} : model) + "\n",
                "application/json");
    return true;
  }
  if (post) {
    if (req.method == "POST") {
      const std::string ct = req.header("Content-Type");
      if (!ct.empty() && ct.rfind("application/json", 0) != 0) {
        error(res, 400,
              fmt::format("Content-Type is '{}': send the request as JSON (curl -H 'Content-Type: "
                          "application/json' -d '{{...}}')",
                          ct));
        return true;
      }
      return false;
    }
    res.set("Allow", "POST");
    error(res, 405, fmt::format("{} takes POST, not {}", p, req.method), "", "method_not_allowed");
    return true;
  }
  if (p.rfind("/v1/models/", 0) == 0) {
    error(res, 404, fmt::format("the model '{}' does not exist; this server serves '{}'", p.substr(11), impl_->id),
          "model", "model_not_found");
    return true;
  }
  error(res, 404,
        fmt::format("no such endpoint '{}'; there are GET /v1/models, POST /v1/completions and POST "
                    "/v1/chat/completions",
                    p),
        "", "unknown_url");
  return true;
}

std::string LlmService::work(http::Request& req, http::Response& res,
                             const std::shared_ptr<const http::Client>& client) {
  Impl& m = *impl_;
  const bool chat = req.path == "/v1/chat/completions";
  bool streaming = false;
  const std::string cid = random_id(chat ? "chatcmpl-" : "cmpl-");
  const int64_t created = int64_t(std::time(nullptr));
  const char* object = chat ? "chat.completion" : "text_completion";
  const char* chunk_object = chat ? "chat.completion.chunk" : "text_completion";
  try {
    Impl::Parsed p = m.parse(req.body, chat);
    auto job = std::make_shared<Job>();
    job->prompt = p.prompt;
    job->options = p.options;
    job->stops = p.stops;
    job->gone = [client] { return client->gone.load(); };
    // A chunk of the stream: one choice's piece (or its end).
    auto chunk = [&](const json& choice_part, bool with_usage_null) {
      json c = {{"id", cid}, {"object", chunk_object}, {"created", created}, {"model", m.id}};
      json choice = {{"index", 0}};
      choice.update(choice_part);
      c["choices"] = json::array({choice});
      if (with_usage_null) c["usage"] = nullptr;
      return "data: " + dump(c) + "\n\n";
    };
    if (p.stream) {
      http::Response head;
      head.status = 200;
      head.set("Content-Type", "text/event-stream; charset=utf-8");
      head.set("Cache-Control", "no-cache");
      head.set("X-Accel-Buffering", "no");
      if (!client->begin(head)) throw NotRun("the client is gone");
      streaming = true;
      const bool iu = p.include_usage;
      if (chat) client->send(chunk({{"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                                    {"finish_reason", nullptr}},
                                   iu));
      job->on_piece = [client, chunk, chat, iu](const std::string& piece) {
        const json part = chat ? json{{"delta", {{"content", piece}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}
                               : json{{"text", piece}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
        client->send(chunk(part, iu));
      };
    }
    std::future<Job::Outcome> f = job->done.get_future();
    m.submit(job);
    Job::Outcome out;
    try {
      out = f.get();
    } catch (const NotRun&) {
      throw;
    } catch (const gpu::GpuError& e) {
      throw ApiError{500, fmt::format("the GPU failed: {}", e.what()), "", "gpu_error"};
    } catch (const std::exception& e) {
      throw ApiError{500, e.what(), "", "generation_failed"};
    }
    const json usage = {{"prompt_tokens", p.prompt.size()},
                        {"completion_tokens", out.completion_tokens},
                        {"total_tokens", p.prompt.size() + out.completion_tokens}};
    if (p.stream) {
      const json end = chat ? json{{"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", out.finish_reason}}
                            : json{{"text", ""}, {"logprobs", nullptr}, {"finish_reason", out.finish_reason}};
      client->send(chunk(end, p.include_usage));
      if (p.include_usage) {
        const json u = {{"id", cid}, {"object", chunk_object}, {"created", created}, {"model", m.id},
                        {"choices", json::array()}, {"usage", usage}};
        client->send("data: " + dump(u) + "\n\n");
      }
      client->send("data: [DONE]\n\n");
      res.status = 200;
      return fmt::format("{} prompt + {} tokens, {}, streamed", p.prompt.size(), out.completion_tokens,
                         out.finish_reason);
    }
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", out.finish_reason}};
    if (chat) choice["message"] = {{"role", "assistant"}, {"content", out.text}};
    else choice["text"] = out.text;
    const json body = {{"id", cid},       {"object", object},  {"created", created},
                       {"model", m.id},   {"choices", json::array({choice})}, {"usage", usage}};
    res.status = 200;
    res.content(dump(body) + "\n", "application/json");
    return fmt::format("{} prompt + {} tokens, {}", p.prompt.size(), out.completion_tokens, out.finish_reason);
  } catch (const ApiError& e) {
    if (streaming) {
      client->send("data: " + dump(json{{"error", {{"message", e.message}, {"type", "server_error"},
                                                    {"param", nullptr}, {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}}) +
                   "\n\n");
      return "error in stream: " + e.message;
    }
    error(res, e.status, e.message, e.param, e.code);
    return e.message;
  } catch (const NotRun& e) {
    if (!streaming) {
      error(res, 503, e.what(), "", "not_run");
      res.set("Retry-After", "1");
    }
    return e.what();
  } catch (const std::exception& e) {
    if (streaming) {
      client->send("data: " + dump(json{{"error", {{"message", e.what()}, {"type", "server_error"}, {"param", nullptr},
                                                    {"code", nullptr}}}}) +
                   "\n\n");
      return e.what();
    }
    error(res, 500, e.what(), "", "");
    return e.what();
  }
}

std::string LlmService::health_json() const {
  const Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.m);
  json j = {{"model", m.id},        {"folder", m.folder.dir}, {"runs", m.runs},   {"not_run", m.not_run},
            {"tokens", m.tokens},   {"waiting", m.queue.size() + (m.busy ? 1 : 0)}, {"load_s", m.load_s}};
  if (!m.broken.empty()) j["error"] = m.broken;
  return dump(j);
}

}  // namespace wgnn::tools

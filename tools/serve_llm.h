#pragma once
// `wgnn serve --llm DIR`: a language-model folder (text/model_folder.h)
// served with OpenAI's API (docs/TEXT.md, "wgnn serve --llm"):
//   GET  /v1/models             the one model, named after the folder
//   POST /v1/completions        prompt -> text
//   POST /v1/chat/completions   messages -> the assistant's message (the
//                               folder's chat template)
// with stream (Server-Sent Events), stop, max_tokens, temperature, top_p,
// seed, n (1 only), stream_options.include_usage. One thread owns a GPU
// context of its own and the generator, and runs the requests one at a
// time in the order they came; tools/serve.cpp admits them (--queue, 503
// with Retry-After when full) and hands each to a worker, which waits for
// its turn and streams its pieces. A client gone (its connection closed)
// ends its generation at the next token; one gone before its turn is not
// run.
#include <memory>
#include <string>

#include "gpu/context.h"
#include "tools/http_server.h"

namespace wgnn::tools {

class LlmService {
 public:
  // Loads the folder, builds the generator and runs it once (plans and
  // shaders); errors name what is wrong with the folder.
  LlmService(const gpu::ContextOptions& co, const std::string& dir);
  ~LlmService();
  LlmService(const LlmService&) = delete;
  LlmService& operator=(const LlmService&) = delete;

  const std::string& model_id() const;
  double load_s() const;
  // Paths under /v1/.
  static bool owns(const std::string& path);
  // On the I/O thread with the headers in: true when `res` is the answer
  // (GET /v1/models, an unknown path: 404, a wrong method: 405); false for
  // a POST to an endpoint, whose body is then read for work().
  bool head(const http::Request& req, http::Response& res) const;
  // On a worker, with the whole body: a completion (or a 400, ...). A
  // streamed answer goes out through the client (http::Client::begin).
  // Returns a short line for the log.
  std::string work(http::Request& req, http::Response& res, const std::shared_ptr<const http::Client>& client);
  // For /health: the model, its requests and tokens.
  std::string health_json() const;

  // An error as OpenAI writes it: {"error": {"message", "type", "param",
  // "code"}}.
  static void error(http::Response& res, int status, const std::string& message, const std::string& param = "",
                    const std::string& code = "");

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace wgnn::tools

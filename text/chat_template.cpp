// text::ChatTemplate over the C ABI of text/rust/ (text/text_ffi.h).
#include "text/chat_template.h"

#include <nlohmann/json.hpp>

#include "gpu/error.h"
#include "text/text_ffi.h"

namespace wgnn::text {

std::string messages_json(const std::vector<Message>& messages) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& m : messages) a.push_back({{"role", m.role}, {"content", m.content}});
  return a.dump();
}

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)), bos_(std::move(bos_token)), eos_(std::move(eos_token)) {}

std::string ChatTemplate::render(const std::vector<Message>& messages, bool add_generation_prompt) const {
  return render_json(messages_json(messages), add_generation_prompt);
}

std::string ChatTemplate::render_json(const std::string& messages, bool add_generation_prompt,
                                      const std::string& extra) const {
  char* out = nullptr;
  size_t n = 0;
  char* err = wgnn_text_render_chat(source_.c_str(), messages.c_str(), add_generation_prompt ? 1 : 0, bos_.c_str(),
                                    eos_.c_str(), extra.empty() ? nullptr : extra.c_str(), &out, &n);
  if (err) {
    std::string msg(err);
    wgnn_text_free_string(err);
    throw Error(msg);
  }
  std::string s(out, n);
  wgnn_text_free_bytes(out, n);
  return s;
}

}  // namespace wgnn::text

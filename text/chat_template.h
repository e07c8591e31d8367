#pragma once
// A model's chat template (the Jinja `chat_template` of tokenizer_config.json)
// rendered as transformers' apply_chat_template renders it: trim_blocks and
// lstrip_blocks, loop controls, the tojson filter (Python's json.dumps),
// raise_exception(message), strftime_now(format), Python's str and dict
// methods (.strip(), .items(), ...); the context holds messages,
// add_generation_prompt, bos_token, eos_token, tools and documents (none).
// Rendered by minijinja (text/rust/). A template that does not parse, or
// that raises, throws wgnn::Error with its message.
//
//   text::ChatTemplate t(source, "<s>", "</s>");
//   std::string prompt = t.render({{"system", "Be brief."}, {"user", "Hi"}}, true);
#include <string>
#include <vector>

namespace wgnn::text {

struct Message {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// The messages as the JSON array a template sees.
std::string messages_json(const std::vector<Message>& messages);

class ChatTemplate {
 public:
  ChatTemplate(std::string source, std::string bos_token = "", std::string eos_token = "");
  std::string render(const std::vector<Message>& messages, bool add_generation_prompt) const;
  // messages: a JSON array of message objects (any keys a template reads);
  // extra: a JSON object of more context variables, or empty.
  std::string render_json(const std::string& messages, bool add_generation_prompt,
                          const std::string& extra = "") const;
  const std::string& source() const { return source_; }

 private:
  std::string source_, bos_, eos_;
};

}  // namespace wgnn::text

// `wgnn generate DIR --text TEXT` and `wgnn chat DIR`: a model folder's
// tokenizer and chat template (text/) around generate::Generator.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "text/chat_template.h"
#include "text/model_folder.h"
#include "text/stop_text.h"
#include "text/tokenizer.h"
#include "tools/commands.h"

namespace wgnn::tools {
namespace {

void check_common(const GenerateOptions& o, const char* command) {
  if (!text::is_directory(o.decoder))
    throw Error(fmt::format("{}: {} is not a model folder (a directory with the decoder's ONNX files and "
                            "tokenizer.json); with a decoder file, give token ids with --prompt",
                            command, o.decoder));
  if (!o.prompt.empty()) throw Error(fmt::format("{}: --prompt (token ids) and --text do not go together", command));
  if (o.max_new_tokens < 1) throw Error("--max-new-tokens must be at least 1");
  if (o.batch != 1) throw Error(fmt::format("{}: --batch is for token ids (--prompt) only", command));
  if (o.repeat != 1) throw Error(fmt::format("{}: --repeat is for token ids (--prompt) only", command));
  if (!o.encoder.empty()) throw Error(fmt::format("{}: --encoder is for token ids (--prompt) only", command));
  for (const auto& s : o.stops)
    if (s.empty()) throw Error("--stop: an empty string would end every answer at once");
}

std::string join_ids(const std::vector<int64_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += fmt::format("{}{}", i ? "," : "", ids[i]);
  return s;
}

// The generation options of a folder: its decoder files, its end tokens
// (unless --eos), its max_new_tokens (unless --max-new-tokens); --stream
// reads every token back as it comes.
GenerateOptions with_folder(const GenerateOptions& o, const text::ModelFolder& f) {
  GenerateOptions g = o;
  g.decoder = f.decoder;
  if (g.first.empty()) g.first = f.first;
  if (g.eos.empty() && !f.eos_ids.empty()) g.eos = join_ids(f.eos_ids);
  if (!o.max_new_tokens_given && f.max_new_tokens > 0) g.max_new_tokens = f.max_new_tokens;
  // Streamed, each token is read back as it comes; with --stop strings,
  // each token too (unless --sync-every says otherwise), so that the run
  // ends at the token that completes one.
  if (o.stream || (!o.stops.empty() && g.sync_every == 0)) g.sync_every = 1;
  return g;
}

// The answer's text through StopText: streaming, each piece is printed as
// soon as no stop string can begin inside it.
class TextSink {
 public:
  TextSink(const std::vector<std::string>& stops, bool stream) : stop_(stops), stream_(stream) {}
  // False once a stop string has appeared (later pieces are dropped).
  bool add(const std::string& piece) {
    print(stop_.add(piece));
    return !stop_.stopped();
  }
  void finish() { print(stop_.finish()); }
  const std::string& text() const { return stop_.text(); }

 private:
  void print(const std::string& s) {
    if (!stream_ || s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }
  text::StopText stop_;
  bool stream_;
};

// One answer: the prompt's ids through the generator, the new tokens
// through the detokenizer into the sink.
struct Answer {
  std::vector<generate::Result> runs;
  std::string text;
};

Answer answer(generate::Generator& gen, const text::Tokenizer& tok, const std::vector<int64_t>& prompt,
              const GenerateOptions& g, bool stream) {
  Answer a;
  TextSink sink(g.stops, stream);
  text::Detokenizer detok(tok, /*skip_special_tokens=*/true);
  // Each readback's tokens go to the sink as they come: printed when
  // streaming, and the run ends once a stop string appears.
  generate::Options ro = generate_run_options(g);
  ro.on_tokens = [&](const std::vector<std::vector<int64_t>>& fresh) {
    for (int64_t id : fresh.at(0)) {
      if (!sink.add(detok.push(id))) return false;
    }
    return true;
  };
  a.runs.push_back(gen.run({prompt}, ro));
  if (!a.runs.back().stopped) sink.add(detok.finish());
  sink.finish();
  a.text = sink.text();
  return a;
}

std::vector<int64_t> encode_checked(const text::Tokenizer& tok, const std::string& s, bool add_special,
                                    const char* what) {
  std::vector<int64_t> ids = tok.encode(s, add_special);
  if (ids.empty()) throw Error(fmt::format("{} encodes to no token: nothing to generate from", what));
  return ids;
}

}  // namespace

void check_text_options(const GenerateOptions& o) { check_common(o, "generate --text"); }

int generate_text(gpu::Context& ctx, const GenerateOptions& o) {
  const text::ModelFolder folder = text::read_model_folder(o.decoder);
  const text::Tokenizer tok = text::Tokenizer::load(folder.tokenizer);
  const GenerateOptions g = with_folder(o, folder);
  const std::vector<int64_t> prompt = encode_checked(tok, o.text, /*add_special=*/true, "--text");
  generate::Generator gen(ctx, generate_models(g), generate_session_options(g));
  if (o.verbose) {
    fmt::print(stderr, "{}\nprompt: {} tokens ({}); end tokens: {}\n", gen.describe(), prompt.size(),
               join_ids(prompt), g.eos.empty() ? "none" : g.eos);
  }
  const bool stream = o.stream && !o.json;
  const Answer a = answer(gen, tok, prompt, g, stream);
  if (o.json) {
    std::string j = generation_json(a.runs);
    j.pop_back();  // the closing brace: the text's keys go inside
    fmt::print("{},\"prompt_tokens\":[{}],\"stopped\":{},\"text\":{}}}\n", j, join_ids(prompt),
               a.runs.back().stopped ? "true" : "false",
               nlohmann::json(a.text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  if (!stream) std::fwrite(a.text.data(), 1, a.text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  return 0;
}

void check_chat_options(const ChatOptions& o) {
  check_common(o.gen, "chat");
  if (o.gen.text_given) throw Error("chat: the user's lines come from stdin, not --text");
}

int chat(gpu::Context& ctx, const ChatOptions& o) {
  const text::ModelFolder folder = text::read_model_folder(o.gen.decoder);
  if (folder.chat_template.empty())
    throw Error(fmt::format("chat: model folder {} has no chat template (chat_template in tokenizer_config.json, "
                            "or chat_template.jinja); `wgnn generate {} --text` needs none",
                            folder.dir, folder.dir));
  const text::Tokenizer tok = text::Tokenizer::load(folder.tokenizer);
  const text::ChatTemplate tmpl(folder.chat_template, folder.bos_token, folder.eos_token);
  // The folder's other special tokens (pad_token, unk_token, ...), as
  // transformers passes them to a template.
  const std::string extra = nlohmann::json(folder.special_tokens).dump();
  const GenerateOptions g = with_folder(o.gen, folder);
  generate::Generator gen(ctx, generate_models(g), generate_session_options(g));
  if (o.gen.verbose) fmt::print(stderr, "{}\nend tokens: {}\n", gen.describe(), g.eos.empty() ? "none" : g.eos);
  std::vector<text::Message> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  const bool interactive = isatty(STDIN_FILENO) != 0;
  const bool stream = !o.gen.json;  // an answer is streamed unless each turn is a JSON line
  std::string line;
  int turn = 0;
  for (;;) {
    if (interactive) {
      fmt::print(stderr, "> ");
      std::fflush(stderr);
    }
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    messages.push_back({"user", line});
    // The whole conversation is the prompt of each turn; the template adds
    // its special tokens itself (as apply_chat_template's tokenize does).
    std::string prompt_text;
    try {
      prompt_text = tmpl.render_json(text::messages_json(messages), /*add_generation_prompt=*/true, extra);
    } catch (const Error& e) {
      throw Error(fmt::format("{} (the chat template of {})", e.what(), folder.chat_template_file));
    }
    const std::vector<int64_t> prompt = encode_checked(tok, prompt_text, /*add_special=*/false, "the chat prompt");
    if (o.gen.verbose) fmt::print(stderr, "turn {}: prompt of {} tokens:\n{}\n", turn + 1, prompt.size(), prompt_text);
    const Answer a = answer(gen, tok, prompt, g, stream);
    messages.push_back({"assistant", a.text});
    ++turn;
    if (o.gen.json) {
      const auto& toks = a.runs.back().tokens.at(0);
      fmt::print("{{\"turn\":{},\"prompt_tokens\":[{}],\"tokens\":[{}],\"text\":{}}}\n", turn, join_ids(prompt),
                 join_ids(toks), nlohmann::json(a.text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      std::fputc('\n', stdout);
    }
    std::fflush(stdout);
  }
  if (turn == 0 && o.gen.verbose) fmt::print(stderr, "chat: no user line on stdin\n");
  return 0;
}

}  // namespace wgnn::tools

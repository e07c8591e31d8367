#pragma once
// Text <-> token ids through a Hugging Face tokenizer.json (the tokenizers
// library, built from text/rust/): byte-level BPE (GPT-2, Llama 3, Qwen),
// WordPiece (BERT), Unigram with Metaspace (SentencePiece, Llama 2), with
// their normalizers, pre-tokenizers, post-processors and added tokens, as
// the Python `transformers` tokenizers give them.
//
//   text::Tokenizer tok = text::Tokenizer::load("model/tokenizer.json");
//   std::vector<int64_t> ids = tok.encode("Hello", /*add_special_tokens=*/true);
//   std::string s = tok.decode(ids, /*skip_special_tokens=*/true);
//
//   text::Detokenizer d(tok);        // streaming: complete UTF-8 only
//   for (int64_t id : generated) std::cout << d.push(id);
//   std::cout << d.finish();
//
// Errors (a missing or malformed file, an id outside the vocabulary) throw
// wgnn::Error naming what was wrong.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct WgnnTokenizer;

namespace wgnn::text {

class Tokenizer {
 public:
  // A tokenizer.json file; from_json takes its text.
  static Tokenizer load(const std::string& path);
  static Tokenizer from_json(std::string_view json);

  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Ids outside the vocabulary throw.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = true) const;
  // The id of a token (as written in the vocabulary or the added tokens),
  // or -1 when there is none.
  int64_t token_to_id(std::string_view token) const;
  bool is_special(int64_t id) const;
  size_t vocab_size() const;  // added tokens included

 private:
  struct Free {
    void operator()(WgnnTokenizer* t) const;
  };
  std::shared_ptr<WgnnTokenizer> t_;
  explicit Tokenizer(WgnnTokenizer* t);
};

// Ids to text one token at a time, for streaming: push() returns the text
// the new token completes, never a partial UTF-8 character (a byte-level
// token holding half of one waits for the next), and the pieces joined are
// decode() of all the ids pushed. Each push decodes a short window of the
// last tokens (the token before the new ones gives spacing rules, such as
// a Metaspace's leading space, their context).
class Detokenizer {
 public:
  explicit Detokenizer(const Tokenizer& tok, bool skip_special_tokens = true);
  std::string push(int64_t id);
  // What is held back at the end (a trailing partial character decodes as
  // U+FFFD, as decode() gives it).
  std::string finish();
  const std::vector<int64_t>& ids() const { return ids_; }

 private:
  Tokenizer tok_;  // shares the loaded tokenizer
  bool skip_;
  std::vector<int64_t> ids_;
  size_t prefix_ = 0, read_ = 0;
  static std::string tail(const std::string& before, const std::string& now);  // decoded window: [prefix_, read_) given out
};

}  // namespace wgnn::text

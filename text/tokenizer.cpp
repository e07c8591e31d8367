// text::Tokenizer over the C ABI of text/rust/ (text/text_ffi.h).
#include "text/tokenizer.h"

#include <fmt/format.h>

#include "gpu/error.h"
#include "text/text_ffi.h"

namespace wgnn::text {
namespace {

// Throws the library's message (freed here) when there is one.
void check(char* err, const std::string& what) {
  if (!err) return;
  std::string msg(err);
  wgnn_text_free_string(err);
  throw Error(what.empty() ? msg : fmt::format("{}: {}", what, msg));
}

bool ends_incomplete(const std::string& s) {
  // U+FFFD: what a decode gives for bytes that are not (yet) a character.
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

void Tokenizer::Free::operator()(WgnnTokenizer* t) const { wgnn_text_tokenizer_free(t); }

Tokenizer::Tokenizer(WgnnTokenizer* t) : t_(t, Free{}) {}

Tokenizer Tokenizer::load(const std::string& path) {
  WgnnTokenizer* t = nullptr;
  check(wgnn_text_tokenizer_load(path.c_str(), &t), "cannot load the tokenizer");
  return Tokenizer(t);
}

Tokenizer Tokenizer::from_json(std::string_view json) {
  WgnnTokenizer* t = nullptr;
  check(wgnn_text_tokenizer_from_json(json.data(), json.size(), &t), "cannot read the tokenizer JSON");
  return Tokenizer(t);
}

std::vector<int64_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  int64_t* ids = nullptr;
  size_t n = 0;
  check(wgnn_text_encode(t_.get(), text.data(), text.size(), add_special_tokens ? 1 : 0, &ids, &n), "");
  std::vector<int64_t> out(ids, ids + n);
  wgnn_text_free_ids(ids, n);
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  char* s = nullptr;
  size_t n = 0;
  check(wgnn_text_decode(t_.get(), ids.data(), ids.size(), skip_special_tokens ? 1 : 0, &s, &n), "");
  std::string out(s, n);
  wgnn_text_free_bytes(s, n);
  return out;
}

int64_t Tokenizer::token_to_id(std::string_view token) const {
  int64_t id = -1;
  check(wgnn_text_token_to_id(t_.get(), token.data(), token.size(), &id), "");
  return id;
}

bool Tokenizer::is_special(int64_t id) const { return wgnn_text_is_special(t_.get(), id) != 0; }

size_t Tokenizer::vocab_size() const { return wgnn_text_vocab_size(t_.get()); }

Detokenizer::Detokenizer(const Tokenizer& tok, bool skip_special_tokens) : tok_(tok), skip_(skip_special_tokens) {}

// The text past `before` in `now`, from a character boundary.
std::string Detokenizer::tail(const std::string& before, const std::string& now) {
  size_t at = before.size();
  while (at < now.size() && (static_cast<unsigned char>(now[at]) & 0xC0) == 0x80) ++at;
  return at < now.size() ? now.substr(at) : std::string();
}

std::string Detokenizer::push(int64_t id) {
  ids_.push_back(id);
  const auto begin = ids_.begin();
  const std::string before = tok_.decode(std::vector<int64_t>(begin + long(prefix_), begin + long(read_)), skip_);
  const std::string now = tok_.decode(std::vector<int64_t>(begin + long(prefix_), ids_.end()), skip_);
  if (now.size() <= before.size() || ends_incomplete(now)) return "";
  prefix_ = read_;
  read_ = ids_.size();
  return tail(before, now);
}

std::string Detokenizer::finish() {
  if (read_ == ids_.size()) return "";
  const auto begin = ids_.begin();
  const std::string before = tok_.decode(std::vector<int64_t>(begin + long(prefix_), begin + long(read_)), skip_);
  const std::string now = tok_.decode(std::vector<int64_t>(begin + long(prefix_), ids_.end()), skip_);
  prefix_ = read_ = ids_.size();
  if (now.size() <= before.size()) return "";
  return tail(before, now);
}

}  // namespace wgnn::text

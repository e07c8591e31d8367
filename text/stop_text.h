#pragma once
// An answer's text as its pieces come, ended where a stop string first
// appears (the stop string cut off). What add() gives back is safe to show
// at once: text that could be the start of a stop string is held back
// until it is known not to be. Used by `wgnn generate --text`, `wgnn chat`,
// `wgnn serve --llm` and the Python package's wgnn.generate.
#include <algorithm>
#include <string>
#include <vector>

namespace wgnn::text {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds a piece; returns the text that can be shown now. Once a stop
  // string has appeared, stopped() is true and later pieces are dropped.
  std::string add(const std::string& piece) {
    if (stopped_) return "";
    text_ += piece;
    size_t cut = std::string::npos;
    for (const auto& s : stops_) {
      const size_t from = searched_ > s.size() ? searched_ - s.size() : 0;
      const size_t at = text_.find(s, from);
      if (at != std::string::npos && at < cut) cut = at;
    }
    if (cut != std::string::npos) {
      text_.resize(cut);
      stopped_ = true;
    }
    searched_ = text_.size();
    return give(stopped_ ? text_.size() : text_.size() - held_back());
  }
  // The text held back, at the end.
  std::string finish() { return give(text_.size()); }
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }

 private:
  // Bytes at the end that could begin a stop string.
  size_t held_back() const {
    size_t keep = 0;
    for (const auto& s : stops_) {
      for (size_t n = std::min(s.size() - 1, text_.size()); n > keep; --n) {
        if (text_.compare(text_.size() - n, n, s, 0, n) == 0) {
          keep = n;
          break;
        }
      }
    }
    return keep;
  }
  std::string give(size_t upto) {
    if (upto <= given_) return "";
    std::string out = text_.substr(given_, upto - given_);
    given_ = upto;
    return out;
  }
  std::vector<std::string> stops_;
  std::string text_;
  size_t given_ = 0, searched_ = 0;
  bool stopped_ = false;
};

}  // namespace wgnn::text

// text::Tokenizer and text::Detokenizer against Python's tokenizers
// (tests/data/text/tokenizer_cases.json, written by make_fixtures.py).
#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpu/error.h"

namespace wgnn::text {
namespace {

const std::string kData = std::string(WGNN_SOURCE_DIR) + "/tests/data/text/";

nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

const nlohmann::json& fixtures() {
  static const nlohmann::json j = load_json(kData + "tokenizer_cases.json")["fixtures"];
  return j;
}

class TokenizerCases : public ::testing::TestWithParam<int> {};

TEST_P(TokenizerCases, EncodeAndDecodeAsPython) {
  const auto& f = fixtures()[size_t(GetParam())];
  const Tokenizer tok = Tokenizer::load(kData + f["tokenizer"].get<std::string>());
  EXPECT_EQ(tok.vocab_size(), f["vocab_size"].get<size_t>());
  for (const auto& [token, id] : f["token_to_id"].items()) {
    EXPECT_EQ(tok.token_to_id(token), id.is_null() ? -1 : id.get<int64_t>()) << token;
  }
  ASSERT_GE(f["cases"].size(), 10u);
  for (const auto& c : f["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const auto ids = c["ids"].get<std::vector<int64_t>>();
    EXPECT_EQ(tok.encode(text, true), ids) << f["tokenizer"] << ": " << text;
    EXPECT_EQ(tok.encode(text, false), c["ids_no_special"].get<std::vector<int64_t>>()) << text;
    EXPECT_EQ(tok.decode(ids, false), c["decoded"].get<std::string>()) << text;
    EXPECT_EQ(tok.decode(ids, true), c["decoded_skip"].get<std::string>()) << text;
  }
}

// Streaming: each piece complete UTF-8, and the pieces joined are the
// decode of all the ids (the ids a model generates, without the prompt's
// special tokens in front).
TEST_P(TokenizerCases, DetokenizerStreamsCompleteUtf8) {
  const auto& f = fixtures()[size_t(GetParam())];
  const Tokenizer tok = Tokenizer::load(kData + f["tokenizer"].get<std::string>());
  for (const auto& c : f["cases"]) {
    const auto ids = c["ids_no_special"].get<std::vector<int64_t>>();
    for (bool skip : {true, false}) {
      Detokenizer d(tok, skip);
      std::string joined;
      for (int64_t id : ids) {
        const std::string piece = d.push(id);
        // Whole characters only: no piece ends inside a UTF-8 sequence.
        size_t i = 0;
        while (i < piece.size()) {
          const auto b = static_cast<unsigned char>(piece[i]);
          const size_t n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
          ASSERT_NE(n, 0u) << "piece starts inside a character: " << c["text"];
          ASSERT_LE(i + n, piece.size()) << "piece ends inside a character: " << c["text"];
          i += n;
        }
        joined += piece;
      }
      joined += d.finish();
      EXPECT_EQ(joined, tok.decode(ids, skip)) << f["tokenizer"] << ": " << c["text"];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerCases, ::testing::Range(0, 5), [](const auto& info) {
  std::string name = fixtures()[size_t(info.param)]["tokenizer"].get<std::string>();
  return name.substr(0, name.find('.'));
});

TEST(Tokenizer, ByteTokensHoldBackHalfCharacters) {
  // An emoji the corpus never had is several byte tokens (byte-level BPE;
  // <0xNN> tokens of a byte-fallback BPE): nothing comes out until its last
  // byte.
  for (const char* name : {"bpe_bytelevel.json", "bpe_bytefallback.json"}) {
    const Tokenizer tok = Tokenizer::load(kData + name);
    const auto ids = tok.encode("ok \U0001F98A!", false);
    ASSERT_GE(ids.size(), 6u) << name;
    Detokenizer d(tok);
    std::vector<std::string> pieces;
    for (int64_t id : ids) pieces.push_back(d.push(id));
    EXPECT_EQ(d.finish(), "") << name;
    std::string joined;
    int empty = 0;
    for (const auto& p : pieces) {
      joined += p;
      empty += p.empty() ? 1 : 0;
    }
    EXPECT_EQ(joined, tok.decode(ids)) << name;
    EXPECT_EQ(joined.substr(joined.size() - 5), "\U0001F98A!") << name;
    EXPECT_GE(empty, 1) << name << ": the tokens holding the first bytes of the emoji give nothing";
  }
}

TEST(Tokenizer, ErrorsNameWhatWasWrong) {
  try {
    Tokenizer::load(kData + "no_such_tokenizer.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_tokenizer.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tokenizer::from_json("{\"not\": \"a tokenizer\"}"), Error);
  const Tokenizer tok = Tokenizer::load(kData + "chatml_211.json");
  try {
    tok.decode({5, 211});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("211"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(tok.is_special(tok.token_to_id("<|im_end|>")));
  EXPECT_FALSE(tok.is_special(tok.token_to_id("\u2581the")));
}

}  // namespace
}  // namespace wgnn::text

// text::read_model_folder on folders written here.
#include "text/model_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "gpu/error.h"

namespace wgnn::text {
namespace {
namespace fs = std::filesystem;

const std::string kFolder = std::string(WGNN_SOURCE_DIR) + "/tests/data/text/chatml_folder";

class ModelFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wgnn_model_folder_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name) << text;
  }
  void copy(const std::string& name) { fs::copy_file(fs::path(kFolder) / name, dir_ / name); }
  std::string error_of() {
    try {
      read_model_folder(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(ModelFolderTest, ReadsThePublishedLayout) {
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) copy(f);
  write("decoder_with_past_model.onnx", "x");
  write("decoder_model.onnx", "x");
  ModelFolder f = read_model_folder(dir_.string());
  EXPECT_EQ(f.decoder, (dir_ / "decoder_with_past_model.onnx").string());
  EXPECT_EQ(f.first, (dir_ / "decoder_model.onnx").string());
  EXPECT_EQ(f.tokenizer, (dir_ / "tokenizer.json").string());
  EXPECT_NE(f.chat_template.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(f.eos_token, "<|im_end|>");
  EXPECT_EQ(f.bos_token, "");
  EXPECT_EQ(f.special_tokens, (std::map<std::string, std::string>{{"eos_token", "<|im_end|>"},
                                                                   {"pad_token", "<|endoftext|>"}}));
  EXPECT_EQ(f.eos_ids, (std::vector<int64_t>{3, 1}));  // generation_config's, im_end once
  EXPECT_EQ(f.max_new_tokens, 24);
  // A merged decoder wins; model.onnx in onnx/ too.
  write("onnx/decoder_model_merged.onnx", "x");
  f = read_model_folder(dir_.string());
  EXPECT_EQ(f.decoder, (dir_ / "onnx" / "decoder_model_merged.onnx").string());
  EXPECT_EQ(f.first, "");
}

TEST_F(ModelFolderTest, OnnxRuntimeGenAiFolder) {
  // As onnxruntime-genai's model builder writes it: genai_config.json names
  // the decoder and adds its end tokens.
  copy("tokenizer.json");
  write("model.onnx", "x");
  write("decoder_int4.onnx", "x");
  write("genai_config.json",
        "{\"model\": {\"decoder\": {\"filename\": \"decoder_int4.onnx\", \"head_size\": 16}, "
        "\"eos_token_id\": [7, 2]}}");
  ModelFolder f = read_model_folder(dir_.string());
  EXPECT_EQ(f.decoder, (dir_ / "decoder_int4.onnx").string());
  EXPECT_EQ(f.eos_ids, (std::vector<int64_t>{7, 2}));
  write("genai_config.json", "{\"model\": {\"decoder\": {\"filename\": \"gone.onnx\"}}}");
  EXPECT_NE(error_of().find("names the decoder gone.onnx, which is not there"), std::string::npos) << error_of();
  write("genai_config.json", "{\"search\": {}}");
  EXPECT_NE(error_of().find("no \"model\" object"), std::string::npos) << error_of();
  write("genai_config.json", "{\"model\": {\"eos_token_id\": [1, \"x\"]}}");
  EXPECT_NE(error_of().find("not an integer"), std::string::npos) << error_of();
}

TEST_F(ModelFolderTest, ConfigVariants) {
  copy("tokenizer.json");
  write("model.onnx", "x");
  write("generation_config.json", "{\"eos_token_id\": 1}");
  write("tokenizer_config.json",
        "{\"eos_token\": {\"content\": \"<|im_end|>\", \"special\": true}, \"bos_token\": \"<|endoftext|>\","
        "\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, {\"name\": \"default\", \"template\": "
        "\"D\"}]}");
  ModelFolder f = read_model_folder(dir_.string());
  EXPECT_EQ(f.decoder, (dir_ / "model.onnx").string());
  EXPECT_EQ(f.chat_template, "D");
  EXPECT_EQ(f.chat_template_file, (dir_ / "tokenizer_config.json").string());
  EXPECT_EQ(f.bos_token, "<|endoftext|>");
  EXPECT_EQ(f.eos_ids, (std::vector<int64_t>{1, 3}));
  write("chat_template.jinja", "J");
  EXPECT_EQ(read_model_folder(dir_.string()).chat_template, "J");
  EXPECT_EQ(read_model_folder(dir_.string()).chat_template_file, (dir_ / "chat_template.jinja").string());
}

TEST_F(ModelFolderTest, MissingFilesAreNamed) {
  EXPECT_NE(error_of().find("no decoder"), std::string::npos) << error_of();
  write("model.onnx", "x");
  EXPECT_NE(error_of().find("no tokenizer.json"), std::string::npos) << error_of();
  copy("tokenizer.json");
  write("generation_config.json", "{not json");
  EXPECT_NE(error_of().find("generation_config.json is not valid JSON"), std::string::npos) << error_of();
  EXPECT_NE(([&] {
              try {
                read_model_folder((dir_ / "absent").string());
              } catch (const Error& e) {
                return std::string(e.what());
              }
              return std::string();
            })()
                .find("not a directory"),
            std::string::npos);
}

}  // namespace
}  // namespace wgnn::text

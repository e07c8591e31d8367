#pragma once
// A language model's folder as published (Optimum / transformers exports):
//   the decoder: model.onnx or decoder_model_merged.onnx (one file for the
//     prompt and the steps), or decoder_with_past_model.onnx with
//     decoder_model.onnx (the prompt step); looked for in the folder, then
//     in its onnx/ subfolder;
//   tokenizer.json (required);
//   tokenizer_config.json (optional): chat_template (a string, or a list of
//     {name, template} whose "default" is taken), bos_token, eos_token
//     (strings or {"content": ...}); chat_template.jinja beside it wins;
//   generation_config.json (optional): eos_token_id (an int or a list),
//     max_new_tokens;
//   genai_config.json (optional; onnxruntime-genai's model builder writes
//     it): model.decoder.filename names the decoder (before the names
//     above), model.eos_token_id (an int or a list) adds end tokens; the
//     generator reads model.decoder.head_size itself (generate::Models).
// A folder without a decoder or a tokenizer throws wgnn::Error naming the
// file looked for.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wgnn::text {

struct ModelFolder {
  std::string dir;
  std::string decoder;  // the model run every step (generate::Models::decoder)
  std::string first;    // the prompt step's model, or empty
  std::string tokenizer;  // tokenizer.json's path
  std::string chat_template;  // empty: none
  std::string chat_template_file;  // where it was read from
  std::string bos_token, eos_token;
  // Every "*_token" entry of tokenizer_config.json that is a token
  // (bos_token, eos_token, pad_token, unk_token, ...): transformers gives
  // them all to the chat template.
  std::map<std::string, std::string> special_tokens;
  // generation_config.json's eos_token_id, then tokenizer_config.json's
  // eos_token's id (when the tokenizer has it), without repeats.
  std::vector<int64_t> eos_ids;
  int max_new_tokens = 0;  // generation_config.json's, 0 when absent
};

bool is_directory(const std::string& path);

// Reads the folder's configuration and checks its files exist; the
// tokenizer is loaded to map eos_token to its id.
ModelFolder read_model_folder(const std::string& dir);

}  // namespace wgnn::text

// text::read_model_folder: which files a published model folder holds.
#include "text/model_folder.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpu/error.h"
#include "text/tokenizer.h"

namespace wgnn::text {
namespace fs = std::filesystem;
namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read {}", p.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json read_json(const fs::path& p) {
  try {
    return nlohmann::json::parse(read_text(p));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} is not valid JSON: {}", p.string(), e.what()));
  }
}

// A special token as tokenizer_config.json writes it: "text" or
// {"content": "text", ...}; empty when absent or null.
std::string token_text(const nlohmann::json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return "";
}

void add_id(std::vector<int64_t>& ids, int64_t id) {
  if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

}  // namespace

bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

ModelFolder read_model_folder(const std::string& dir) {
  if (!is_directory(dir)) throw Error(fmt::format("model folder {}: not a directory", dir));
  ModelFolder f;
  f.dir = dir;
  const fs::path root(dir);
  // The ONNX files, in the folder or its onnx/ subfolder.
  auto find = [&](const char* name) -> std::string {
    for (const fs::path& d : {root, root / "onnx"}) {
      std::error_code ec;
      if (fs::is_regular_file(d / name, ec)) return (d / name).string();
    }
    return "";
  };
  const std::string merged = find("decoder_model_merged.onnx"), single = find("model.onnx"),
                    with_past = find("decoder_with_past_model.onnx");
  // onnxruntime-genai's folder: genai_config.json names the decoder and its
  // end tokens.
  std::error_code ec;
  const fs::path genai = root / "genai_config.json";
  std::string genai_decoder;
  if (fs::is_regular_file(genai, ec)) {
    const nlohmann::json cfg = read_json(genai);
    const nlohmann::json* model = cfg.is_object() && cfg.contains("model") ? &cfg["model"] : nullptr;
    if (!model || !model->is_object()) throw Error(fmt::format("{}: no \"model\" object", genai.string()));
    if (model->contains("decoder") && (*model)["decoder"].is_object()) {
      const nlohmann::json& dec = (*model)["decoder"];
      if (dec.contains("filename")) {
        if (!dec["filename"].is_string()) throw Error(fmt::format("{}: model.decoder.filename is not a string", genai.string()));
        genai_decoder = (root / dec["filename"].get<std::string>()).string();
        if (!fs::is_regular_file(genai_decoder, ec)) {
          throw Error(fmt::format("model folder {}: genai_config.json names the decoder {}, which is not there", dir,
                                  dec["filename"].get<std::string>()));
        }
      }
    }
    if (auto it = model->find("eos_token_id"); it != model->end()) {
      if (it->is_number_integer()) {
        add_id(f.eos_ids, it->get<int64_t>());
      } else if (it->is_array()) {
        for (const auto& v : *it) {
          if (!v.is_number_integer())
            throw Error(fmt::format("{}: model.eos_token_id holds a value that is not an integer", genai.string()));
          add_id(f.eos_ids, v.get<int64_t>());
        }
      }
    }
  }
  if (!genai_decoder.empty()) {
    f.decoder = genai_decoder;
  } else if (!merged.empty()) {
    f.decoder = merged;
  } else if (!single.empty()) {
    f.decoder = single;
  } else if (!with_past.empty()) {
    f.decoder = with_past;
    f.first = find("decoder_model.onnx");
  } else {
    throw Error(fmt::format(
        "model folder {}: no decoder (looked for decoder_model_merged.onnx, model.onnx or "
        "decoder_with_past_model.onnx, in the folder and in onnx/)",
        dir));
  }
  const fs::path tok = root / "tokenizer.json";
  if (!fs::is_regular_file(tok, ec)) throw Error(fmt::format("model folder {}: no tokenizer.json", dir));
  f.tokenizer = tok.string();

  const fs::path tcfg = root / "tokenizer_config.json";
  if (fs::is_regular_file(tcfg, ec)) {
    const nlohmann::json cfg = read_json(tcfg);
    f.bos_token = token_text(cfg, "bos_token");
    f.eos_token = token_text(cfg, "eos_token");
    for (const auto& [key, value] : cfg.items()) {
      if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0) {
        if (std::string t = token_text(cfg, key.c_str()); !t.empty()) f.special_tokens[key] = t;
      }
    }
    if (auto it = cfg.find("chat_template"); it != cfg.end()) {
      if (it->is_string()) {
        f.chat_template = it->get<std::string>();
        f.chat_template_file = tcfg.string();
      } else if (it->is_array()) {
        for (const auto& t : *it) {
          if (t.is_object() && t.value("name", "") == "default" && t.contains("template") &&
              t["template"].is_string()) {
            f.chat_template = t["template"].get<std::string>();
            f.chat_template_file = tcfg.string();
          }
        }
        if (f.chat_template.empty())
          throw Error(fmt::format("{}: chat_template is a list without a \"default\" template", tcfg.string()));
      }
    }
  }
  const fs::path jinja = root / "chat_template.jinja";
  if (fs::is_regular_file(jinja, ec)) {
    f.chat_template = read_text(jinja);
    f.chat_template_file = jinja.string();
  }

  const fs::path gcfg = root / "generation_config.json";
  if (fs::is_regular_file(gcfg, ec)) {
    const nlohmann::json cfg = read_json(gcfg);
    if (auto it = cfg.find("eos_token_id"); it != cfg.end()) {
      if (it->is_number_integer()) {
        add_id(f.eos_ids, it->get<int64_t>());
      } else if (it->is_array()) {
        for (const auto& v : *it) {
          if (!v.is_number_integer())
            throw Error(fmt::format("{}: eos_token_id holds a value that is not an integer", gcfg.string()));
          add_id(f.eos_ids, v.get<int64_t>());
        }
      } else if (!it->is_null()) {
        throw Error(fmt::format("{}: eos_token_id must be an integer or a list of them", gcfg.string()));
      }
    }
    if (auto it = cfg.find("max_new_tokens"); it != cfg.end() && it->is_number_integer())
      f.max_new_tokens = it->get<int>();
  }
  if (!f.eos_token.empty()) {
    const Tokenizer t = Tokenizer::load(f.tokenizer);
    add_id(f.eos_ids, t.token_to_id(f.eos_token));
  }
  return f;
}

}  // namespace wgnn::text

#pragma once
// What `wgnn remove-bg` and `wgnn serve` share: where the matting model is
// found (a file, or a preset by name), the --bg-color value, and what an
// output holds (the cut-out, the matte alone, or the cut-out over a colour).
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "image/image.h"
#include "matting/remover.h"

namespace wgnn::tools {

// Where a model is looked for without a path: matting::model_folders from
// the wgnn binary's folder ($WGNN_HOME/models, the user's cache, models/
// beside wgnn, ../share/wgnn/models).
std::vector<std::filesystem::path> model_folders();

// The model to load, and the pre-processing its preset implies.
struct ModelChoice {
  std::string path;
  std::string preset;  // "isnet", "modnet", or "" (a file given by path)
  matting::Preprocess kind = matting::Preprocess::Auto;
};
// `model` is "" (the default: the isnet preset), a preset name ("isnet":
// isnet_any_size.onnx or isnet.onnx; "modnet": modnet.onnx, found in
// model_folders()), or a file path (a file named like a preset: ./isnet).
// An Error names the files and folders it looked in when a preset has no
// file, and says so when a path is missing or not a file.
ModelChoice choose_model(const std::string& model);

// The pre-processing to run: `preprocess` ("auto", "isnet", "modnet")
// checked against the preset (--model modnet with --preprocess isnet is
// refused); auto takes the preset's.
matting::Preprocess preprocess_for(const ModelChoice& m, const std::string& preprocess);

using matting::cutout_image;
using matting::parse_color;

}  // namespace wgnn::tools

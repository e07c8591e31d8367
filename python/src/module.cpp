// wgnn._wgnn: the Python bindings (nanobind). A layer above onnx/ and
// matting/, beside tools/: the Python package (python/wgnn/) gives it
// ONNX Runtime's API; and over generate/ and text/: wgnn.generate, text in
// and text out (a model folder's tokenizer and chat template around
// generate::Generator, as `wgnn generate DIR --text` and `wgnn chat`).
//
// Devices: one gpu::Context per (adapter, limits) choice, made on first use
// and shared by every session that asks for it (a device start-up is slow).
// A Context and what is made on it is used from one thread at a time
// (gpu/context.h): every call here that touches one (a session's creation,
// run and destruction, remove_bg, the device's description) releases the
// GIL and then takes that device's mutex, so calls from several Python
// threads take turns on one device, and other Python threads run meanwhile.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "generate/generate.h"
#include "gpu/context.h"
#include "gpu/describe.h"
#include "gpu/error.h"
#include "graph/host_tensor.h"
#include "image/image.h"
#include "matting/remover.h"
#include "onnx/session.h"
#include "text/chat_template.h"
#include "text/model_folder.h"
#include "text/stop_text.h"
#include "text/tokenizer.h"
#include "wgnn/wgnn.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace wgnn::python {
namespace {

struct Device {
  std::mutex mutex;  // every use of ctx
  std::unique_ptr<gpu::Context> ctx;
};

std::mutex g_devices_mutex;
std::map<std::pair<std::string, std::string>, std::shared_ptr<Device>> g_devices;

// The device for an adapter choice ("auto", "gpu", "lavapipe"; "" : the
// environment's WGNN_ADAPTER, else auto) and limits ("adapter", "default";
// "": WGNN_LIMITS, else adapter). Called without the GIL.
std::shared_ptr<Device> device_for(const std::string& adapter, const std::string& limits) {
  const std::lock_guard<std::mutex> lock(g_devices_mutex);
  auto& d = g_devices[{adapter, limits}];
  if (!d) {
    auto dev = std::make_shared<Device>();
    gpu::ContextOptions o;
    // The documented variables (docs/SETTINGS.md) as the CLI maps them.
    o.settings = Settings::from_variables(&std::getenv);
    o.adapter = adapter;
    o.limits = limits;
    dev->ctx = std::make_unique<gpu::Context>(o);
    d = dev;
  }
  return d;
}

DType dtype_of(const nb::dlpack::dtype& t, const std::string& name) {
  using nb::dlpack::dtype_code;
  const auto code = dtype_code(t.code);
  if (t.lanes == 1) {
    if (code == dtype_code::Float && t.bits == 32) return DType::F32;
    if (code == dtype_code::Float && t.bits == 16) return DType::F16;
    if (code == dtype_code::Int && t.bits == 64) return DType::I64;
    if (code == dtype_code::Int && t.bits == 32) return DType::I32;
    if (code == dtype_code::Int && t.bits == 8) return DType::I8;
    if (code == dtype_code::UInt && t.bits == 8) return DType::U8;
    if (code == dtype_code::Bool && t.bits == 8) return DType::Bool;
  }
  throw Unsupported(fmt::format("input '{}': wgnn takes float32, float16, int64, int32, int8, uint8 and bool arrays; "
                                "this one has another element type (dlpack code {}, {} bits)",
                                name, int(t.code), int(t.bits)));
}

nb::dlpack::dtype dlpack_of(DType d) {
  using nb::dlpack::dtype_code;
  switch (d) {
    case DType::F32: return {uint8_t(dtype_code::Float), 32, 1};
    case DType::F16: return {uint8_t(dtype_code::Float), 16, 1};
    case DType::I64: return {uint8_t(dtype_code::Int), 64, 1};
    case DType::I32: return {uint8_t(dtype_code::Int), 32, 1};
    case DType::I8: return {uint8_t(dtype_code::Int), 8, 1};
    case DType::U8: return {uint8_t(dtype_code::UInt), 8, 1};
    case DType::Bool: return {uint8_t(dtype_code::Bool), 8, 1};
  }
  throw Error("unknown dtype");
}

// ONNX Runtime's type strings.
const char* ort_type(DType d) {
  switch (d) {
    case DType::F32: return "tensor(float)";
    case DType::F16: return "tensor(float16)";
    case DType::I64: return "tensor(int64)";
    case DType::I32: return "tensor(int32)";
    case DType::I8: return "tensor(int8)";
    case DType::U8: return "tensor(uint8)";
    case DType::Bool: return "tensor(bool)";
  }
  return "tensor(unknown)";
}

using Array = nb::ndarray<nb::numpy, nb::device::cpu>;
using InArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// A HostTensor handed to numpy without a copy: the array owns it.
Array to_numpy(HostTensor&& t) {
  auto* owned = new HostTensor(std::move(t));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<HostTensor*>(p); });
  std::vector<size_t> shape(owned->shape.begin(), owned->shape.end());
  return Array(owned->data.data(), shape.size(), shape.data(), owner, nullptr, dlpack_of(owned->dtype));
}

// A value's description: (name, shape with None or the symbolic name for a
// dynamic dim, ONNX Runtime's type string).
nb::tuple describe(const onnx_import::ValueInfo& v) {
  nb::list shape;
  for (size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i] >= 0) {
      shape.append(v.shape[i]);
    } else if (i < v.dim_names.size() && !v.dim_names[i].empty()) {
      shape.append(v.dim_names[i]);
    } else {
      shape.append(nb::none());
    }
  }
  return nb::make_tuple(v.name, shape, ort_type(v.dtype));
}

struct Options {
  std::string adapter, limits;
  bool verbose = false, fp16 = false, fusion = true, checked = true, tiered = true, ir_import = true,
       size_classes = true;
  int max_plans = 8, max_plan_sizes = 64;
  std::vector<std::string> outputs;
  onnx_import::SessionOptions session() const {
    onnx_import::SessionOptions o;
    o.ir_import = ir_import;
    o.outputs = outputs;
    o.verbose = verbose;
    o.fp16 = fp16;
    o.fusion = fusion;
    o.checked = checked;
    o.max_plans = max_plans;
    o.max_plan_sizes = max_plan_sizes;
    o.size_classes = size_classes;
    o.tiered = tiered;
    return o;
  }
};

class PySession {
 public:
  // From a file.
  PySession(const std::string& path, const Options& o) {
    nb::gil_scoped_release release;
    dev_ = device_for(o.adapter, o.limits);
    const std::lock_guard<std::mutex> lock(dev_->mutex);
    s_ = std::make_unique<onnx_import::Session>(*dev_->ctx, path, o.session());
  }
  // From the model's bytes; external data is read relative to `dir`.
  PySession(const nb::bytes& model, const std::string& dir, const Options& o) {
    std::string bytes(model.c_str(), model.size());
    nb::gil_scoped_release release;
    dev_ = device_for(o.adapter, o.limits);
    const std::lock_guard<std::mutex> lock(dev_->mutex);
    s_ = std::make_unique<onnx_import::Session>(
        *dev_->ctx, onnx_import::load_model_from_bytes(bytes, "<model bytes>", dir), o.session());
  }
  ~PySession() {
    nb::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(dev_->mutex);
    s_.reset();
  }

  nb::list inputs() const {
    nb::list l;
    for (const auto& v : s_->inputs()) l.append(describe(v));
    return l;
  }
  nb::list outputs() const {
    nb::list l;
    for (const auto& v : s_->outputs()) l.append(describe(v));
    return l;
  }

  // Runs on (name, array) pairs; returns the outputs named (all when
  // `names` is empty), in that order.
  nb::list run(const std::vector<std::string>& names, const std::vector<std::pair<std::string, InArray>>& feed) {
    // The arrays are read in place (views: no copy on the host); `feed`
    // holds them until the run returns.
    onnx_import::Feeds feeds;
    for (const auto& [name, a] : feed) {
      Shape shape;
      for (size_t i = 0; i < a.ndim(); ++i) shape.push_back(int64_t(a.shape(i)));
      auto in = onnx_import::HostInput::view(dtype_of(a.dtype(), name), shape, a.data(), a.nbytes(), name);
      if (!feeds.host.emplace(name, std::move(in)).second) throw Error(fmt::format("input '{}' is given twice", name));
    }
    // Only the outputs asked for are read back (ONNX Runtime's
    // run(output_names)): remove-bg's matte is 4 of ISNet's 124 MB.
    onnx_import::Fetches fetches;
    for (const auto& n : names) {
      bool known = false;
      for (const auto& v : s_->outputs()) known = known || v.name == n;
      if (!known) {
        std::string list;
        for (const auto& v : s_->outputs()) list += (list.empty() ? "'" : ", '") + v.name + "'";
        throw Error(fmt::format("no output named '{}': the model's outputs are {}", n, list));
      }
      fetches.host[n];
    }
    {
      nb::gil_scoped_release release;
      const std::lock_guard<std::mutex> lock(dev_->mutex);
      const auto t0 = std::chrono::steady_clock::now();
      s_->run(feeds, fetches);  // no names: every output
      last_run_us_ = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    nb::list result;
    std::vector<std::string> order = names;
    if (order.empty()) {
      for (const auto& v : s_->outputs()) order.push_back(v.name);  // a model may list one name twice
    }
    std::map<std::string, nb::object> given;  // a name asked for twice gets the same array
    for (const auto& n : order) {
      if (auto g = given.find(n); g != given.end()) {
        result.append(g->second);
        continue;
      }
      nb::object a = nb::cast(to_numpy(std::move(fetches.host.at(n))));
      given.emplace(n, a);
      result.append(a);
    }
    return result;
  }

  int opset() const { return s_->opset(); }
  std::string summary() const { return s_->summary(); }
  int builds() const { return s_->builds(); }
  int plans() const { return s_->plans(); }
  int plan_sizes() const { return s_->plan_sizes(); }
  void reset_state() {
    nb::gil_scoped_release unlocked;
    s_->reset_state();
  }
  // The last run's time inside Session::run (the C++ API), in us: what a
  // call costs beyond it is the binding's (bench/python_overhead.py).
  double last_run_us() const { return last_run_us_; }

 private:
  std::shared_ptr<Device> dev_;
  std::unique_ptr<onnx_import::Session> s_;
  double last_run_us_ = 0;
};

class PyRemover {
 public:
  PyRemover(const std::string& model, int size, const std::string& preprocess, const std::string& adapter) {
    matting::RemoverOptions o;
    o.size = size;
    o.preprocess = matting::parse_preprocess(preprocess);
    nb::gil_scoped_release release;
    dev_ = device_for(adapter, "");
    const std::lock_guard<std::mutex> lock(dev_->mutex);
    r_ = std::make_unique<matting::Remover>(*dev_->ctx, model, o);
  }
  ~PyRemover() {
    nb::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(dev_->mutex);
    r_.reset();
  }
  // An HxWx3 or HxWx4 uint8 photo in; (HxWx4 RGBA, HxW alpha) out.
  std::pair<Array, Array> run(const nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu, uint8_t>& photo) {
    if (photo.ndim() != 3 || (photo.shape(2) != 3 && photo.shape(2) != 4) || photo.shape(0) == 0 ||
        photo.shape(1) == 0) {
      std::string dims;
      for (size_t i = 0; i < photo.ndim(); ++i) dims += (i ? "x" : "") + std::to_string(photo.shape(i));
      throw Error(fmt::format("remove_bg: needs an HxWx3 (RGB) or HxWx4 (RGBA) uint8 image; got shape {}",
                              dims.empty() ? "()" : dims));
    }
    image::Image img(int(photo.shape(1)), int(photo.shape(0)), int(photo.shape(2)));
    std::memcpy(img.pixels.data(), photo.data(), img.pixels.size());
    matting::Cutout c;
    {
      nb::gil_scoped_release release;
      const std::lock_guard<std::mutex> lock(dev_->mutex);
      c = r_->run(img);
    }
    auto image_array = [](const image::Image& im) {
      HostTensor t(DType::U8, im.channels == 1 ? Shape{im.height, im.width} : Shape{im.height, im.width, im.channels});
      std::memcpy(t.data.data(), im.pixels.data(), t.nbytes());
      return to_numpy(std::move(t));
    };
    return {image_array(c.rgba), image_array(c.alpha)};
  }

  // `wgnn remove-bg`'s path for one photo file's bytes: decoded as the CLI
  // decodes (EXIF orientation, the pixel bound), cut out (the matte cleaned
  // with post_process, as --post-process), and the output image
  // (cutout_image) encoded as the CLI's PNG, byte for byte. Only the model
  // run holds the device: decoding, pre-processing, finishing and encoding
  // run without it (and without the GIL), so several threads keep it busy.
  nb::bytes cutout_png(const nb::bytes& photo, const std::string& name, bool only_mask, const std::string& bg_color,
                       bool post_process, uint64_t max_pixels) {
    std::string data(photo.c_str(), photo.size());
    std::string png;
    {
      nb::gil_scoped_release release;
      const std::optional<std::array<uint8_t, 4>> bg =
          bg_color.empty() ? std::nullopt : std::optional(matting::parse_color(bg_color, "bg_color"));
      matting::Prepared p = r_->prepare(image::decode_photo(data, name, max_pixels));
      p.post_process = post_process;
      matting::Matte m;
      {
        const std::lock_guard<std::mutex> lock(dev_->mutex);
        m = r_->infer(p);
      }
      png = image::encode_png(matting::cutout_image(r_->finish(std::move(p), std::move(m)), only_mask, bg));
    }
    return nb::bytes(png.data(), png.size());
  }

 private:
  std::shared_ptr<Device> dev_;
  std::unique_ptr<matting::Remover> r_;
};

// A model folder loaded for generation (wgnn.Generator): its tokenizer, its
// chat template (where it has one) and a generate::Generator on the device,
// kept from call to call (plans included). run() holds the device for the
// whole generation without the GIL; each piece of text goes to `on_piece`
// (with the GIL) as soon as its token is read back and no stop string can
// begin inside it, which is what the Python side streams.
class PyTextGenerator {
 public:
  PyTextGenerator(const std::string& dir, const std::string& adapter) {
    nb::gil_scoped_release release;
    if (!text::is_directory(dir))
      throw Error(fmt::format("{} is not a model folder (a directory with the decoder's ONNX files and "
                              "tokenizer.json)",
                              dir));
    folder_ = text::read_model_folder(dir);
    tok_ = std::make_unique<text::Tokenizer>(text::Tokenizer::load(folder_.tokenizer));
    if (!folder_.chat_template.empty())
      tmpl_ = std::make_unique<text::ChatTemplate>(folder_.chat_template, folder_.bos_token, folder_.eos_token);
    generate::Models m;
    m.decoder = folder_.decoder;
    m.first = folder_.first;
    dev_ = device_for(adapter, "");
    const std::lock_guard<std::mutex> lock(dev_->mutex);
    gen_ = std::make_unique<generate::Generator>(*dev_->ctx, m);
  }
  ~PyTextGenerator() {
    nb::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(dev_->mutex);
    gen_.reset();
  }

  // The prompt's ids: a text encoded with the tokenizer's special tokens
  // (as `wgnn generate --text`), or (role, content) messages rendered with
  // the chat template (add_generation_prompt) and encoded without them (as
  // `wgnn chat`: the template writes its special tokens itself).
  std::vector<int64_t> encode_text(const std::string& s) const {
    std::vector<int64_t> ids = tok_->encode(s, /*add_special_tokens=*/true);
    if (ids.empty()) throw Error("the prompt encodes to no token: nothing to generate from");
    return ids;
  }
  std::vector<int64_t> encode_chat(const std::vector<std::pair<std::string, std::string>>& messages) const {
    if (!tmpl_)
      throw Error(fmt::format("model folder {} has no chat template (chat_template in tokenizer_config.json, or "
                              "chat_template.jinja): give a prompt instead of messages",
                              folder_.dir));
    std::vector<text::Message> ms;
    for (const auto& [role, content] : messages) ms.push_back({role, content});
    // The folder's other special tokens (pad_token, unk_token, ...), as
    // transformers passes them to a template.
    const std::string extra = nlohmann::json(folder_.special_tokens).dump();
    std::string prompt;
    try {
      prompt = tmpl_->render_json(text::messages_json(ms), /*add_generation_prompt=*/true, extra);
    } catch (const Error& e) {
      throw Error(fmt::format("{} (the chat template of {})", e.what(), folder_.chat_template_file));
    }
    std::vector<int64_t> ids = tok_->encode(prompt, /*add_special_tokens=*/false);
    if (ids.empty()) throw Error("the chat prompt encodes to no token: nothing to generate from");
    return ids;
  }

  // Generates from `prompt` and returns the text (the stop string and what
  // follows cut off). on_piece: None, or called with each piece as it
  // comes (a return of False ends the run there).
  std::string run(const std::vector<int64_t>& prompt, int max_new_tokens, double temperature, int64_t top_k,
                  double top_p, uint64_t seed, const std::vector<std::string>& stops, nb::object on_piece) {
    if (max_new_tokens < 1) throw Error("max_new_tokens must be at least 1");
    for (const auto& st : stops)
      if (st.empty()) throw Error("stop: an empty string would end every answer at once");
    generate::Options o;
    o.max_new_tokens = max_new_tokens;
    o.eos = folder_.eos_ids;
    o.temperature = temperature;
    o.top_k = top_k;
    o.top_p = top_p;
    o.seed = seed;
    // Streamed or with stop strings, each token is read back as it comes.
    const bool streamed = !on_piece.is_none();
    if (streamed || !stops.empty()) o.sync_every = 1;
    nb::gil_scoped_release release;
    text::StopText stop(stops);
    text::Detokenizer detok(*tok_, /*skip_special_tokens=*/true);
    bool cancelled = false;
    // Hands a piece over (with the GIL); false when the caller ends the run.
    auto give = [&](const std::string& piece) {
      if (!streamed || piece.empty()) return true;
      nb::gil_scoped_acquire acquire;
      const nb::object r = on_piece(piece);
      if (r.ptr() == Py_False) cancelled = true;
      return !cancelled;
    };
    o.on_tokens = [&](const std::vector<std::vector<int64_t>>& fresh) {
      for (int64_t id : fresh.at(0)) {
        const std::string piece = stop.add(detok.push(id));
        if (!give(piece) || stop.stopped()) return false;
      }
      return true;
    };
    generate::Result r;
    {
      const std::lock_guard<std::mutex> lock(dev_->mutex);
      r = gen_->run({prompt}, o);
    }
    if (!cancelled) {
      if (!r.stopped) give(stop.add(detok.finish()));
      if (!cancelled) give(stop.finish());
    }
    return stop.text();
  }

  int default_max_new_tokens() const { return folder_.max_new_tokens > 0 ? folder_.max_new_tokens : 64; }
  std::vector<int64_t> eos_ids() const { return folder_.eos_ids; }
  bool has_chat_template() const { return tmpl_ != nullptr; }
  std::string describe() const { return gen_->describe(); }

 private:
  std::shared_ptr<Device> dev_;
  text::ModelFolder folder_;
  std::unique_ptr<text::Tokenizer> tok_;
  std::unique_ptr<text::ChatTemplate> tmpl_;
  std::unique_ptr<generate::Generator> gen_;
};

}  // namespace
}  // namespace wgnn::python

NB_MODULE(_wgnn, m) {
  using namespace wgnn;
  using namespace wgnn::python;
  m.doc() = "wgnn's C++ runtime (the package wgnn wraps it)";

  // wgnn's exceptions; the most derived is tried first.
  static nb::object error = nb::exception<wgnn::Error>(m, "Error", PyExc_RuntimeError);
  static nb::object unsupported = nb::exception<wgnn::Unsupported>(m, "Unsupported", error.ptr());
  static nb::object gpu_error = nb::exception<gpu::GpuError>(m, "GpuError", error.ptr());
  static nb::object device_lost = nb::exception<gpu::DeviceLost>(m, "DeviceLost", gpu_error.ptr());
  static nb::object host_oom = nb::exception<wgnn::HostOutOfMemory>(m, "HostOutOfMemory", error.ptr());
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const gpu::DeviceLost& e) {
      PyErr_SetString(device_lost.ptr(), e.what());
    } catch (const gpu::GpuError& e) {
      PyErr_SetString(gpu_error.ptr(), e.what());
    } catch (const wgnn::Unsupported& e) {
      PyErr_SetString(unsupported.ptr(), e.what());
    } catch (const wgnn::HostOutOfMemory& e) {
      PyErr_SetString(host_oom.ptr(), e.what());
    } catch (const wgnn::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(host_oom.ptr(), "out of host memory");
    }
  });

  nb::class_<Options>(m, "_Options")
      .def(nb::init<>())
      .def_rw("adapter", &Options::adapter)
      .def_rw("limits", &Options::limits)
      .def_rw("verbose", &Options::verbose)
      .def_rw("fp16", &Options::fp16)
      .def_rw("fusion", &Options::fusion)
      .def_rw("checked", &Options::checked)
      .def_rw("max_plans", &Options::max_plans)
      .def_rw("max_plan_sizes", &Options::max_plan_sizes)
      .def_rw("size_classes", &Options::size_classes)
      .def_rw("tiered", &Options::tiered)
      .def_rw("ir_import", &Options::ir_import)
      .def_rw("outputs", &Options::outputs);

  nb::class_<PySession>(m, "_Session")
      .def(nb::init<const std::string&, const Options&>(), "path"_a, "options"_a)
      .def(nb::init<const nb::bytes&, const std::string&, const Options&>(), "model"_a, "dir"_a, "options"_a)
      .def("inputs", &PySession::inputs)
      .def("outputs", &PySession::outputs)
      .def("run", &PySession::run, "names"_a, "feed"_a)
      .def("opset", &PySession::opset)
      .def("summary", &PySession::summary)
      .def("builds", &PySession::builds)
      .def("plans", &PySession::plans)
      .def("plan_sizes", &PySession::plan_sizes)
      .def("reset_state", &PySession::reset_state)
      .def("last_run_us", &PySession::last_run_us);

  nb::class_<PyRemover>(m, "_Remover")
      .def(nb::init<const std::string&, int, const std::string&, const std::string&>(), "model"_a, "size"_a,
           "preprocess"_a, "adapter"_a)
      .def("run", &PyRemover::run, "photo"_a)
      .def("cutout_png", &PyRemover::cutout_png, "photo"_a, "name"_a, "only_mask"_a, "bg_color"_a,
           "post_process"_a = false, "max_pixels"_a = image::kDefaultMaxPixels);

  nb::class_<PyTextGenerator>(m, "_TextGenerator")
      .def(nb::init<const std::string&, const std::string&>(), "model_dir"_a, "adapter"_a)
      .def("encode_text", &PyTextGenerator::encode_text, "text"_a)
      .def("encode_chat", &PyTextGenerator::encode_chat, "messages"_a)
      .def("run", &PyTextGenerator::run, "prompt"_a, "max_new_tokens"_a, "temperature"_a, "top_k"_a, "top_p"_a,
           "seed"_a, "stops"_a, "on_piece"_a.none())
      .def("default_max_new_tokens", &PyTextGenerator::default_max_new_tokens)
      .def("eos_ids", &PyTextGenerator::eos_ids)
      .def("has_chat_template", &PyTextGenerator::has_chat_template)
      .def("describe", &PyTextGenerator::describe);

  m.def(
      "device_info",
      [](const std::string& adapter, const std::string& limits) {
        nb::gil_scoped_release release;
        auto dev = device_for(adapter, limits);
        const std::lock_guard<std::mutex> lock(dev->mutex);
        return gpu::describe_json(*dev->ctx);
      },
      "adapter"_a, "limits"_a);
  // --bg-color's check (matting::parse_color): an Error naming `flag`.
  m.def(
      "parse_color",
      [](const std::string& s, const std::string& flag) {
        const auto c = matting::parse_color(s, flag.c_str());
        return std::vector<int>{c[0], c[1], c[2], c[3]};
      },
      "s"_a, "flag"_a);
  m.def(
      "adapters_json",
      [](const std::string& adapter) {
        nb::gil_scoped_release release;
        gpu::ContextOptions o;
        o.settings = Settings::from_variables(&std::getenv);
        o.adapter = adapter;
        return gpu::describe_adapters_json(gpu::Context::list_adapters(o));
      },
      "adapter"_a);
  // The index in `adapters` (JSON, as adapters_json) that a Context made
  // with `spec` opens, when CUDA_VISIBLE_DEVICES is `cuda_visible_devices`
  // (None: unset): the Context's own rule (gpu/adapters.h).
  m.def(
      "select_adapter_index",
      [](const std::string& adapters, const std::string& spec, std::optional<std::string> cuda_visible_devices) {
        const auto list = gpu::adapters_from_json(adapters);
        if (list.empty()) throw Error("the adapter list is empty");
        if (!gpu::is_driver_choice(spec)) return gpu::select_adapter(list, spec);
        return gpu::cuda_visible_adapter(list, cuda_visible_devices).value_or(0);
      },
      "adapters"_a, "spec"_a, "cuda_visible_devices"_a.none());
  // Drops the module's references to the devices (at exit: a device is
  // destroyed once no session holds it).
  m.def("release_devices", [] {
    std::map<std::pair<std::string, std::string>, std::shared_ptr<Device>> old;
    {
      const std::lock_guard<std::mutex> lock(g_devices_mutex);
      old.swap(g_devices);
    }
    nb::gil_scoped_release release;
    old.clear();
  });
  m.def("onnx_ops", [] { return onnx_import::supported_ops(); });
  m.def("model_folders", [](const std::string& program_dir) {
    return matting::model_folders(program_dir, Settings::from_variables(&std::getenv));
  });
  m.def("find_model", [](const std::vector<std::string>& folders) { return matting::find_model(folders); });
  m.attr("default_model") = matting::kDefaultModel;
  m.attr("__version__") = wgnn_version();
}
